import CogdCommandLine
import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab bench cluster`: a real `cogd leader` child on loopback, driven by
/// DEALER clients in this process; each figure beside the raw ZeroMQ and raw
/// LMDB figures measured in the same run.
///
/// With `--curve`, then, a second leader serving with CURVE (`--curve-secret`,
/// `--peers`) and clients connecting with keys: its round trip p50 and
/// 16-client turns/s beside the same of the first leader, measured in
/// interleaved runs (`curveComparison`).
@MainActor
struct ClusterBench {
    let options: BenchOptions
    /// The loopback ports taken at the start (`--ports`): the leader's, the echo servers', the CURVE leader's.
    let ports: LoopbackPorts

    nonisolated static let shapeNames = ["round-trip", "throughput-1", "throughput-4", "throughput-16", "lag"]
    /// The shapes `--curve` measures with CURVE on too (when among those run).
    nonisolated static let curveShapeNames = ["round-trip", "throughput-16"]
    /// The name every CURVE bench client's requests carry starts so; its
    /// peers line is `KEY client bench-curve-* ledger.*`.
    nonisolated static let curveClientPrefix = "bench-curve-"

    func run() throws {
        if options.standby { return try runStandby() }
        let shapes = options.only.isEmpty ? ClusterBench.shapeNames : options.only
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-bench-cluster-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let requests = ports.nextEndpoint()
        let turns = ports.nextEndpoint()
        if options.leaderSpinWaitMicroseconds > 0 && !options.json {
            print("the leader spins \(options.leaderSpinWaitMicroseconds) µs after each batch (--leader-spin-wait)")
        }
        let leader = try startLeader(data: root + "/leader", requests: requests, turns: turns, curve: nil)
        defer { Self.stop(leader) }
        let context = try ZMQContext()
        defer { context.close() }
        try Self.setUpAccounts(context: context, requests: requests, name: "setup", keys: nil)
        for shape in shapes {
            switch shape {
            case "round-trip":
                for figure in try roundTrip(context: context, requests: requests, root: root) { report(figure) }
            case "lag":
                report(try lag(context: context, requests: requests, turns: turns))
            default:
                let clients = Int(shape.dropFirst("throughput-".count))!
                for figure in try throughput(clients: clients, context: context, requests: requests, root: root, leader: leader) {
                    report(figure)
                }
            }
        }
        if options.curve {
            try curveComparison(
                context: context, plainRequests: requests, root: root, shapes: shapes.filter(Self.curveShapeNames.contains))
        }
    }

    /// Starts a `cogd leader` child over `data` (with CURVE when given keys).
    private func startLeader(data: String, requests: String, turns: String, curve: LoopbackCurveKeys?) throws -> Process {
        try Self.startLeader(
            data: data, requests: requests, turns: turns,
            options: ["--spin-wait", String(options.leaderSpinWaitMicroseconds)]
                + (curve.map { ["--curve-secret", $0.leaderSecretFile, "--peers", $0.peersFile] } ?? []))
    }

    /// Starts a `cogd leader` child (this same executable) over `data`,
    /// serving on `requests` and `turns`, with the further leader `options`.
    nonisolated static func startLeader(data: String, requests: String, turns: String, options: [String]) throws -> Process {
        let leader = Process()
        leader.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        leader.arguments = ["leader", "--data", data, "--requests", requests, "--turns", turns] + options
        leader.standardOutput = FileHandle.nullDevice
        leader.standardError = FileHandle.nullDevice
        try leader.run()
        return leader
    }

    /// SIGTERM, then SIGKILL if it has not stopped within 5 s.
    nonisolated static func stop(_ leader: Process) {
        kill(leader.processIdentifier, SIGTERM)
        for _ in 0..<500 where leader.isRunning { usleep(10_000) }
        if leader.isRunning { kill(leader.processIdentifier, SIGKILL) }
    }

    // MARK: Shapes

    /// How many ledger accounts `setUpAccounts` opens (`a0`…), which `transfer` moves money between.
    nonisolated static let accounts = 100

    /// Opens the ledger accounts the transfers use, one call at a time (each
    /// waited for, so this also waits for a leader just started).
    nonisolated static func setUpAccounts(context: ZMQContext, requests: String, name: String, keys: CurveClientKeys?) throws {
        let client = try Client(context: context, endpoint: requests, name: name, keys: keys)
        for account in 0..<accounts {
            guard try client.call(op: "ledger.open", argument: Opening(account: "a\(account)", balance: 1_000_000)) != nil else {
                throw BenchError(message: "the leader at \(requests) did not answer ledger.open within 10 s")
            }
        }
    }

    /// The `index`th transfer of a load: 1 from one account to the next, round the ring.
    nonisolated static func transfer(_ index: Int) -> Transfer {
        Transfer(from: "a\(index % accounts)", to: "a\((index + 1) % accounts)", amount: 1)
    }

    private func transfer(_ index: Int) -> Transfer { Self.transfer(index) }

    /// The op round trip and its raw baselines, measured in interleaved
    /// rounds (this machine is shared and noisy: a drift then moves every
    /// figure alike), each figure the median over all rounds.
    private func roundTrip(context: ZMQContext, requests: String, root: String) throws -> [BenchFigure] {
        let client = try Client(context: context, endpoint: requests, name: "rtt")
        let echo = try EchoServer(context: context, endpoint: ports.nextEndpoint(), commitFolder: nil)
        defer { echo.stop() }
        let echoWithCommit = try EchoServer(context: context, endpoint: ports.nextEndpoint(), commitFolder: root + "/raw-echo-commit")
        defer { echoWithCommit.stop() }
        let commit = try RawCommitTimer(root: root)
        let worker = try BenchWorker(endpoint: requests)
        defer { worker.close() }
        var samples: [Double] = []
        var workerSamples: [Double] = []
        var echoSamples: [Double] = []
        var commitSamples: [Double] = []
        var composedSamples: [Double] = []
        var index = 0
        for _ in 0..<max(3, options.runs) {
            samples += try roundTrips(client, count: 220, warmUp: 20, index: &index)
            workerSamples += try worker.measure(count: 120, warmUp: 20, firstIndex: index)
            echoSamples += try echo.measure(count: 400, warmUp: 40)
            commitSamples += try commit.measure()
            composedSamples += try echoWithCommit.measure(count: 220, warmUp: 20)
        }
        let p50 = Self.percentile(samples, 0.5)
        let echoP50 = Self.percentile(echoSamples, 0.5)
        let commitP50 = Self.percentile(commitSamples, 0.5)
        return [
            BenchFigure(name: "cluster.round-trip.p50", value: p50, unit: "us", baseline: echoP50 + commitP50),
            BenchFigure(name: "cluster.round-trip.p99", value: Self.percentile(samples, 0.99), unit: "us", baseline: nil),
            // The same op sent by a real `Worker` (its replica's `cogs.transfer`,
            // stamped and encoded as a mechanism's op is), waiting on its sockets.
            BenchFigure(
                name: "cluster.worker-round-trip.p50", value: Self.percentile(workerSamples, 0.5), unit: "us",
                baseline: echoP50 + commitP50),
            BenchFigure(name: "cluster.raw-zmq-echo.p50", value: echoP50, unit: "us", baseline: nil),
            BenchFigure(name: "cluster.raw-lmdb-commit.p50", value: commitP50, unit: "us", baseline: nil),
            // The same p50 beside raw ZeroMQ and raw LMDB composed in one
            // server loop (each echo waits for its own durable commit).
            BenchFigure(
                name: "cluster.round-trip.p50-vs-echo-with-commit", value: p50, unit: "us",
                baseline: Self.percentile(composedSamples, 0.5)),
        ]
    }

    /// Raw LMDB durable commits of a 160-byte record, each its own
    /// transaction, timed where the leader commits (`--commit-cpu auto`), at
    /// its best too; the calling thread runs unpinned between them, as before.
    final class RawCommitTimer {
        private let appender: RawAppendBaseline.Appender
        private let record = [UInt8](repeating: 0x5a, count: 160)
        private let unpinned: [Int]
        private let commitCPUs: [Int]

        /// Commits into `root`/raw-commit.
        init(root: String) throws {
            appender = try RawAppendBaseline.Appender(directory: root + "/raw-commit")
            unpinned = ThreadAffinity.current()
            commitCPUs = try CommitPlacement.apply(.automatic, dataFolder: root).cpus ?? unpinned
            try ThreadAffinity.pin(unpinned)
        }

        /// The µs of `count` commits, the first `warmUp` left out.
        func measure(count: Int = 120, warmUp: Int = 20) throws -> [Double] {
            try ThreadAffinity.pin(commitCPUs)
            defer { try? ThreadAffinity.pin(unpinned) }
            var samples: [Double] = []
            for round in 0..<count {
                let start = ContinuousClock.now
                try appender.commit(record)
                if round >= warmUp { samples.append(ClusterBench.microseconds(ContinuousClock.now - start)) }
            }
            return samples
        }
    }

    /// Round-trip times in µs of `count` transfers called one at a time, the first `warmUp` left out.
    func roundTrips(_ client: Client, count: Int, warmUp: Int, index: inout Int) throws -> [Double] {
        var samples: [Double] = []
        for round in 0..<count {
            let start = ContinuousClock.now
            _ = try client.call(op: "ledger.transfer", argument: transfer(index))
            index += 1
            if round >= warmUp { samples.append(Self.microseconds(ContinuousClock.now - start)) }
        }
        return samples
    }

    /// The turns/s of `count` pipelining clients beside raw LMDB appends at
    /// the leader's batch; then the leader's serving thread's CPU per applied
    /// turn over the same window beside the CPU of one graph turn of the same
    /// op in this process (`"baselineKind": "graph-turn"`).
    func throughput(
        clients count: Int, context: ZMQContext, requests: String, root: String, leader: Process, prefix: String = "cluster"
    ) throws -> [BenchFigure] {
        let clients = try (0..<count).map { try Client(context: context, endpoint: requests, name: "load-\(count)-\($0)") }
        var sent = 0
        let serving = ThreadCPUClock(pid: leader.processIdentifier, threadNamed: Leader.servingThreadName)
        let allocationsBefore = Self.servingAllocations(requests)
        let cpuBefore = serving?.nanoseconds()
        let start = ContinuousClock.now
        let run = try Self.drive(clients, window: Self.throughputWindow, sent: &sent) { _ in ContinuousClock.now - start < .seconds(3) }
        let cpuAfter = serving?.nanoseconds()
        let allocationsAfter = Self.servingAllocations(requests)
        let batch = min(count * Self.throughputWindow, 4_096)
        let rawFolder = root + "/raw-\(count)"
        let rawSeconds = try RawAppendBaseline(directory: rawFolder).run(count: batch * 50, recordSize: 160, batch: batch)
        try? FileManager.default.removeItem(atPath: rawFolder)
        var figures = [
            BenchFigure(
                name: "\(prefix).turns-per-second.clients-\(count)", value: Double(run.applied) / run.seconds, unit: "turns/s",
                baseline: Double(batch * 50) / rawSeconds)
        ]
        if let cpuBefore, let cpuAfter, cpuAfter >= cpuBefore, run.applied > 0 {
            // Over the window and the drain after it (the drain's turns, at most
            // 64 a client, are in the CPU but not the count: under 1% of a run).
            figures.append(
                BenchFigure(
                    name: "\(prefix).leader-cpu-per-op.clients-\(count)", value: Double(cpuAfter - cpuBefore) / Double(run.applied) / 1_000,
                    unit: "us", baseline: graphTurn, baselineKind: "graph-turn"))
        } else if !options.json {
            print("\(prefix).leader-cpu-per-op.clients-\(count): the leader's \(Leader.servingThreadName) thread was not found in /proc")
        }
        if let allocationsBefore, let allocationsAfter, allocationsAfter >= allocationsBefore, run.applied > 0 {
            // The serving thread's heap allocations per applied op over the same window (a count, as
            // graph.steady.allocations; the two status requests that read it add a few, under 0.01 per op).
            figures.append(
                BenchFigure(
                    name: "\(prefix).leader-allocations-per-op.clients-\(count)",
                    value: Double(allocationsAfter - allocationsBefore) / Double(run.applied), unit: "allocs/op", baseline: nil))
        }
        return figures
    }

    /// The allocations the leader's serving thread has made (its status says them: the leader is this executable).
    static func servingAllocations(_ requests: String) -> UInt64? {
        guard case .status(let status)? = try? CogdCommandLine.request(.statusRequest, leader: requests, timeout: .seconds(2)) else { return nil }
        return status.servingAllocations
    }

    /// One graph turn of `ledger.transfer` in this process, in µs of CPU: measured once, on first use.
    private var graphTurn: Double { GraphTurnBaseline.microseconds }

    /// How many requests each throughput client keeps in flight.
    private static let throughputWindow = 64

    /// Applied turns per second while `clients` each keep a window of
    /// transfers in flight for `duration`; then waits (at most 5 s) for the
    /// replies still due, so what is measured next starts clean.
    private func turnsPerSecond(_ clients: [Client], for duration: Duration, sent: inout Int) throws -> Double {
        let start = ContinuousClock.now
        let run = try Self.drive(clients, window: Self.throughputWindow, sent: &sent) { _ in ContinuousClock.now - start < duration }
        return Double(run.applied) / run.seconds
    }

    /// Keeps `window` transfers in flight on each of `clients` (sending no
    /// more once `sent` reaches `limit`) while `more(applied so far)` holds
    /// and, with a limit, until every one sent is answered. Returns the turns
    /// applied and the seconds that took; then waits (at most 5 s) for the
    /// replies still due, so what is measured next starts clean. Throws when
    /// nothing is answered for 10 s while requests are due.
    nonisolated static func drive(
        _ clients: [Client], window: Int, sent: inout Int, limit: Int = .max, while more: (_ applied: Int) throws -> Bool
    ) throws -> (applied: Int, seconds: Double) {
        let count = clients.count
        var outstanding = [Int](repeating: 0, count: count)
        var applied = 0
        let start = ContinuousClock.now
        var lastAnswer = start
        while try more(applied), sent < limit || outstanding.reduce(0, +) > 0 {
            if ContinuousClock.now - lastAnswer > .seconds(10) {
                throw BenchError(message: "the leader answered none of \(outstanding.reduce(0, +)) requests for 10 s")
            }
            for (index, client) in clients.enumerated() {
                while outstanding[index] < window && sent < limit {
                    try client.send(op: "ledger.transfer", argument: transfer(sent))
                    sent += 1
                    outstanding[index] += 1
                }
            }
            let ready = try ZMQSocket.poll(clients.map(\.socket), timeout: .milliseconds(50))
            for (index, client) in clients.enumerated() where ready[index] {
                while let reply = try client.receiveReply() {
                    outstanding[index] -= 1
                    lastAnswer = .now
                    if case .applied = reply.outcome { applied += 1 }
                }
            }
        }
        let elapsed = Self.seconds(ContinuousClock.now - start)
        // Drain what is still in flight so the next shape starts clean.
        let drainUntil = ContinuousClock.now + .seconds(5)
        while outstanding.reduce(0, +) > 0 && ContinuousClock.now < drainUntil {
            let ready = try ZMQSocket.poll(clients.map(\.socket), timeout: .milliseconds(50))
            for (index, client) in clients.enumerated() where ready[index] {
                while try client.receiveReply() != nil { outstanding[index] -= 1 }
            }
        }
        return (applied, elapsed)
    }

    // MARK: With CURVE

    /// `--curve`: the round trip p50 and the 16-client turns/s of a second
    /// leader, serving with CURVE (`--curve-secret`, `--peers`; its clients
    /// connect with a key listed as `client bench-curve-* ledger.*`), each
    /// beside the same of the leader without CURVE. Measured in interleaved
    /// runs whose order alternates (this machine is shared and noisy: a drift
    /// then moves both alike); the round trip is the p50 over all runs' calls,
    /// turns/s the median of the runs'. `shapes`: which of the two to measure.
    private func curveComparison(context: ZMQContext, plainRequests: String, root: String, shapes: [String]) throws {
        precondition(!shapes.isEmpty, "internal inconsistency: --curve with no shape to compare passed the parser")
        let keys = try LoopbackCurveKeys(
            folder: root + "/keys", workers: [], clientNames: Self.curveClientPrefix + "*", clientOps: ["ledger.*"])
        let curveRequests = ports.nextEndpoint()
        let curveLeader = try startLeader(
            data: root + "/leader-curve", requests: curveRequests, turns: ports.nextEndpoint(), curve: keys)
        defer { Self.stop(curveLeader) }
        try Self.setUpAccounts(context: context, requests: curveRequests, name: Self.curveClientPrefix + "setup", keys: keys.clients)
        /// One side of the comparison: its clients, and what they measured.
        final class Side {
            let roundTripClient: Client
            let loadClients: [Client]
            var roundTrips: [Double] = []
            var turnsPerSecond: [Double] = []
            var index = 0
            var sent = 0

            init(roundTripClient: Client, loadClients: [Client]) {
                self.roundTripClient = roundTripClient
                self.loadClients = loadClients
            }
        }
        func side(endpoint: String, prefix: String, keys: CurveClientKeys?) throws -> Side {
            Side(
                roundTripClient: try Client(context: context, endpoint: endpoint, name: prefix + "rtt", keys: keys),
                loadClients: try (0..<16).map { try Client(context: context, endpoint: endpoint, name: prefix + "load-16-\($0)", keys: keys) })
        }
        // Names of their own: the earlier shapes' requests are in the first leader's dedup table.
        let plain = try side(endpoint: plainRequests, prefix: "plain-", keys: nil)
        let curve = try side(endpoint: curveRequests, prefix: Self.curveClientPrefix, keys: keys.clients)
        let runs = max(3, options.runs)
        for run in 0..<runs {
            let order = run % 2 == 0 ? [plain, curve] : [curve, plain]
            if shapes.contains("round-trip") {
                for side in order { side.roundTrips += try roundTrips(side.roundTripClient, count: 220, warmUp: 20, index: &side.index) }
            }
            if shapes.contains("throughput-16") {
                for side in order {
                    side.turnsPerSecond.append(try turnsPerSecond(side.loadClients, for: .seconds(2), sent: &side.sent))
                }
            }
        }
        if !options.json {
            print("with CURVE: a second leader with --curve-secret and --peers, its clients with keys; \(runs) interleaved runs")
        }
        if shapes.contains("round-trip") {
            let with = Self.percentile(curve.roundTrips, 0.5)
            let without = Self.percentile(plain.roundTrips, 0.5)
            reportCurve(
                BenchFigure(name: "cluster.curve.round-trip.p50", value: with, unit: "us", baseline: without, baselineKind: "without-curve"),
                text: "round trip p50 with CURVE: \(BenchFigure.format(with)) µs vs \(BenchFigure.format(without)) µs without")
        }
        if shapes.contains("throughput-16") {
            let with = BenchFigure.median(curve.turnsPerSecond)
            let without = BenchFigure.median(plain.turnsPerSecond)
            guard with > 0, without > 0 else {
                throw BenchError(message: "no turn was applied in a 16-client run (\(with > 0 ? "without" : "with") CURVE)")
            }
            reportCurve(
                BenchFigure(
                    name: "cluster.curve.turns-per-second.clients-16", value: with, unit: "turns/s", baseline: without,
                    baselineKind: "without-curve"),
                text: "16-client turns/s with CURVE: \(BenchFigure.format(with)) vs \(BenchFigure.format(without)) without")
        }
    }

    /// A CURVE figure: in JSON as every figure (its baseline the same without
    /// CURVE), in text as `TEXT (RATIO×)`.
    private func reportCurve(_ figure: BenchFigure, text: String) {
        guard !options.json, let baseline = figure.baseline else { return figure.report(json: options.json, nameWidth: 44, ports: ports) }
        print("\(text) (\(String(format: "%.2f", figure.value / baseline))×)")
        fflush(nil)
    }

    // MARK: Replication lag

    private func lag(context: ZMQContext, requests: String, turns: String) throws -> BenchFigure {
        let subscriber = try ZMQSocket(context, .subscriber, linger: .zero)
        try subscriber.subscribeToAll()
        try subscriber.connect(turns)
        let client = try Client(context: context, endpoint: requests, name: "lag")
        usleep(200_000)
        var sentAt: [UInt64: ContinuousClock.Instant] = [:]
        var lags: [Double] = []
        let rate = 5_000.0
        let total = 10_000
        let start = ContinuousClock.now
        var sent = 0
        while lags.count < total && ContinuousClock.now - start < .seconds(15) {
            let due = Int(Self.seconds(ContinuousClock.now - start) * rate)
            while sent < min(due, total) {
                sentAt[client.nextSequence] = .now
                try client.send(op: "ledger.transfer", argument: transfer(sent))
                sent += 1
            }
            let ready = try ZMQSocket.poll([subscriber, client.socket], timeout: .milliseconds(1))
            if ready[0] {
                while let frames = try subscriber.receive(), case .turns(_, let records)? = try? WireMessage.decode(frames[frames.count - 1]) {
                    let now = ContinuousClock.now
                    for record in records where record.origin.request?.worker == client.name {
                        if let sequence = record.origin.request?.sequence, let at = sentAt.removeValue(forKey: sequence) {
                            lags.append(Self.microseconds(now - at) / 1_000)
                        }
                    }
                }
            }
            if ready[1] { while try client.receiveReply() != nil {} }
        }
        return BenchFigure(name: "cluster.replication-lag.p99-at-5000-per-s", value: Self.percentile(lags, 0.99), unit: "ms", baseline: nil)
    }

    // MARK: Raw baselines

    /// The hidden subcommand that runs `serveEcho` in a child process.
    nonisolated static let echoServerCommand = "__echo-server"

    /// A raw ZeroMQ ROUTER echo in a child process (its own ZeroMQ I/O
    /// thread), as the leader is: the same hops an op's request and reply
    /// make. With a commit folder the child appends each message to a raw
    /// LMDB database in its own durable transaction before echoing it: raw
    /// ZeroMQ and raw LMDB composed the way an op uses them.
    final class EchoServer {
        private let process = Process()
        private let client: ZMQSocket
        private let payload = [UInt8](repeating: 7, count: 160)

        /// Ends the server if the run is interrupted (nil: no guard).
        private let interruptGuard: LabInterruptGuard?

        init(context: ZMQContext, endpoint: String, commitFolder: String?, interruptGuard: LabInterruptGuard? = nil) throws {
            self.interruptGuard = interruptGuard
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            process.arguments = [echoServerCommand, endpoint] + (commitFolder.map { [$0] } ?? [])
            let ready = Pipe()
            process.standardOutput = ready
            try process.run()
            interruptGuard?.add(process)
            // The server prints one line once it is bound.
            _ = ready.fileHandleForReading.availableData
            client = try ZMQSocket(context, .dealer, linger: .zero)
            try client.connect(endpoint)
        }

        /// Round-trip times in µs of `count` echoes, the first `warmUp` left out.
        func measure(count: Int, warmUp: Int) throws -> [Double] {
            var samples: [Double] = []
            for index in 0..<count {
                let start = ContinuousClock.now
                try client.send([payload])
                guard try ZMQSocket.poll([client], timeout: .seconds(5))[0], try client.receive() != nil else {
                    throw BenchError(message: "the echo server did not answer")
                }
                if index >= warmUp { samples.append(ClusterBench.microseconds(ContinuousClock.now - start)) }
            }
            return samples
        }

        /// An empty message ends the server; it is killed if it lingers.
        func stop() {
            _ = try? client.send([[]])
            client.close()
            for _ in 0..<200 where process.isRunning { usleep(5_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            interruptGuard?.remove(process)
        }
    }

    /// Echoes messages on a ROUTER bound to `endpoint` (committing each to
    /// raw LMDB first when given a folder) until an empty one arrives or none
    /// has for a minute.
    nonisolated static func serveEcho(endpoint: String, commitFolder: String?) -> Int32 {
        do {
            let appender = try commitFolder.map { try RawAppendBaseline.Appender(directory: $0) }
            // A committing echo serves where the leader does (its threads too).
            if let commitFolder { _ = try CommitPlacement.apply(.automatic, dataFolder: commitFolder) }
            let context = try ZMQContext()
            defer { context.close() }
            let router = try ZMQSocket(context, .router, linger: .zero)
            defer { router.close() }
            try router.bind(endpoint)
            print("echoing on \(endpoint)")
            fflush(nil)
            while try ZMQSocket.poll([router], timeout: .seconds(60))[0] {
                while let frames = try router.receive() {
                    guard let payload = frames.last, !payload.isEmpty else { return 0 }
                    try appender?.commit(payload)
                    _ = try router.send(frames)
                }
            }
            return 1
        } catch {
            FileHandle.standardError.write("echo server: \(error)\n".data(using: .utf8)!)
            return 1
        }
    }

    struct BenchError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// A real `Worker` in this process (no mechanisms), synced with the
    /// leader, sending `ledger.transfer` ops from its replica.
    @MainActor
    final class BenchWorker {
        private let worker: Worker
        private var sent: UInt64 = 0

        init(endpoint: String) throws {
            LedgerRig.register()
            worker = try Worker(
                configuration: Worker.Configuration(name: "bench-worker-\(getpid())", leaderEndpoint: endpoint), mechanisms: [])
            let deadline = ContinuousClock.now + .seconds(10)
            while !worker.isSynced, ContinuousClock.now < deadline { try worker.pump(waitingUpTo: .milliseconds(50)) }
            guard worker.isSynced else { throw BenchError(message: "the bench worker did not sync with the leader") }
        }

        /// Round-trip times in µs from `cogs.transfer` to the worker holding the reply.
        func measure(count: Int, warmUp: Int, firstIndex: Int) throws -> [Double] {
            var samples: [Double] = []
            for index in 0..<count {
                sent += 1
                let request = RequestID(worker: worker.configuration.name, sequence: sent)
                let account = (firstIndex + index) % 100
                let start = ContinuousClock.now
                worker.cogs.transfer(from: "a\(account)", to: "a\((account + 1) % 100)", amount: 1)
                let deadline = start + .seconds(5)
                while worker.replies[request] == nil {
                    guard ContinuousClock.now < deadline else { throw BenchError(message: "no reply to \(request)") }
                    try worker.pump(waitingUpTo: .milliseconds(100))
                }
                if index >= warmUp { samples.append(ClusterBench.microseconds(ContinuousClock.now - start)) }
            }
            return samples
        }

        func close() { worker.close() }
    }

    // MARK: Plumbing

    /// A DEALER client speaking `op` requests.
    final class Client {
        let socket: ZMQSocket
        let name: String
        private(set) var nextSequence: UInt64 = 1
        /// Watches the security handshakes under CURVE (nil without keys).
        private let handshakes: HandshakeWatch?

        /// `keys`: connect with CURVE (the leader's peers file must list
        /// the pair under a name pattern that `NAME-PID` matches).
        init(context: ZMQContext, endpoint: String, name: String, keys: CurveClientKeys? = nil) throws {
            self.name = "\(name)-\(getpid())"
            socket = try ZMQSocket(context, .dealer, linger: .zero)
            try socket.setIdentity(self.name)
            try socket.useCurve(keys)
            handshakes = keys == nil ? nil : try HandshakeWatch(socket)
            try socket.connect(endpoint)
        }

        /// Encodes the argument as a worker does (the log's codec over its `Codable` type).
        func send(op: String, argument: some Encodable) throws {
            let request = RequestID(worker: name, sequence: nextSequence)
            nextSequence += 1
            let encoded = try CBOREncoder().encode(argument)
            try socket.send([WireMessage.op(OpRequest(request: request, op: op, argument: encoded)).encoded()])
        }

        func receiveReply() throws -> OpReply? {
            guard let frames = try socket.receive() else { return nil }
            if case .reply(let reply)? = try? WireMessage.decode(frames[frames.count - 1]) { return reply }
            return OpReply(request: RequestID(worker: name, sequence: 0), outcome: .rejected(code: .other(""), detail: "not a reply"))
        }

        func call(op: String, argument: some Encodable) throws -> OpReply? {
            try send(op: op, argument: argument)
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if try ZMQSocket.poll([socket], timeout: .milliseconds(100))[0], let reply = try receiveReply() { return reply }
                if let problem = try handshakes?.problem() { throw BenchError(message: "client \(name): \(problem)") }
            }
            return nil
        }
    }

    func report(_ figure: BenchFigure) { figure.report(json: options.json, nameWidth: 44, ports: ports) }

    /// The nearest-rank percentile: the smallest value with at least
    /// `fraction` of the values at or below it (0 for no values). With
    /// fewer than 100 values, p99 is the largest.
    nonisolated static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((Double(sorted.count) * fraction).rounded(.up))
        return sorted[min(sorted.count - 1, max(0, rank - 1))]
    }

    nonisolated static func seconds(_ duration: Duration) -> Double { BenchFigure.seconds(duration) }

    nonisolated static func microseconds(_ duration: Duration) -> Double { seconds(duration) * 1_000_000 }
}
