import CogCluster
import CogdCommandLine
import CogLog
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab bench cluster --standby`: a cluster of two nodes on a lab etcd
/// (`EtcdServer`), `leader --ha … --sync one --lease-ttl 2`: n1 leads and n2 is
/// its synchronous standby, so every reply waits for n2's acknowledgement of
/// its own commit. Measured through n1, beside the same run's raw figures:
/// the op round trip (p50 beside a raw ZeroMQ echo plus two raw LMDB
/// commits, the leader's and the standby's; p99), 16-client turns/s (beside
/// raw LMDB appends). Then the failover: the leader is SIGKILLed and the
/// time until the standby applies an op is measured, `--failovers` times
/// (the killed node restarts as the new standby between them), its median
/// beside the lease TTL. Every process it starts is stopped on every path.
extension ClusterBench {
    /// The shapes `--standby` measures (`--only` picks among them).
    nonisolated static let standbyShapeNames = ["round-trip", "throughput-16", "failover"]
    /// The cluster's name in etcd.
    nonisolated static let standbyCluster = "bench"
    /// The nodes' `--lease-ttl` (seconds): a killed leader's key goes this long after its last renewal.
    nonisolated static let standbyLeaseTTL = 2
    /// The standby's `--degrade-after` (seconds): once it leads alone, it
    /// releases without a standby after this long (n1, measured, has none: it holds).
    nonisolated static let standbyDegradeAfter = 1
    /// The issue's bar: the round trip p50 with `--sync one` at most this many times echo + two commits.
    nonisolated static let standbyRoundTripBar = 1.5

    /// One node of the bench's cluster: its folder and endpoints (kept over
    /// restarts), and the process now running it.
    final class StandbyNode {
        let name: String
        let data: String
        let requests: String
        let turns: String
        private(set) var process: Process?
        private var starts = 0
        private let logFolder: String
        private var logFile: String { "\(logFolder)/\(name)-\(starts).log" }
        private let interruptGuard: LabInterruptGuard
        /// The CPUs its process runs on (empty: wherever the system puts it).
        let cpus: [Int]

        init(name: String, root: String, ports: LoopbackPorts, interruptGuard: LabInterruptGuard, cpus: [Int] = []) {
            self.name = name
            self.interruptGuard = interruptGuard
            self.cpus = cpus
            data = root + "/" + name
            logFolder = root
            requests = ports.nextEndpoint()
            turns = ports.nextEndpoint()
        }

        /// Starts `cogd leader --ha` (this executable) on `etcd` with `options` added; its output goes to a log file in the bench's folder.
        func start(etcd: EtcdServer, options: [String]) throws {
            precondition(process == nil, "internal inconsistency: node \(name) started twice")
            starts += 1
            guard FileManager.default.createFile(atPath: logFile, contents: nil) else {
                throw BenchError(message: "could not create \(logFile)")
            }
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
            defer { try? log.close() }
            let node = Process()
            node.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            node.arguments =
                [
                    "leader", "--ha", etcd.url, "--cluster", ClusterBench.standbyCluster, "--name", name, "--sync", "one",
                    "--lease-ttl", String(ClusterBench.standbyLeaseTTL), "--data", data, "--requests", requests, "--turns", turns,
                ] + options
            node.standardOutput = log
            node.standardError = log
            // The child takes the affinity of the thread that starts it.
            let allowed = ThreadAffinity.current()
            if !cpus.isEmpty { try ThreadAffinity.pin(cpus) }
            defer { if !cpus.isEmpty { try? ThreadAffinity.pin(allowed) } }
            try node.run()
            process = node
            interruptGuard.add(node)
        }

        /// SIGKILL, as a crash: returns once the process is gone.
        func killHard() {
            guard let process else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            interruptGuard.remove(process)
            self.process = nil
        }

        /// SIGTERM (SIGKILL after 5 s), waited for.
        func stop() {
            guard let process else { return }
            ClusterBench.stop(process)
            process.waitUntilExit()
            interruptGuard.remove(process)
            self.process = nil
        }

        /// The last lines of its log, for an error message.
        var logTail: String {
            let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").suffix(8).joined(separator: "\n")
        }
    }

    func runStandby() throws {
        let shapes = options.only.isEmpty ? Self.standbyShapeNames : Self.standbyShapeNames.filter(options.only.contains)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-bench-standby-\(getpid())").path
        // A Ctrl-C stops etcd and the nodes too, and removes the folders.
        let interruptGuard = LabInterruptGuard(what: "bench cluster --standby")
        defer { interruptGuard.end() }
        interruptGuard.add(folder: root)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // Stopped last (the deferred run in reverse): a node stopped cleanly revokes its lease in etcd.
        let etcd = EtcdServer(clientPort: ports.next(), peerPort: ports.next(), interruptGuard: interruptGuard)
        defer { etcd.stop() }
        let n1 = StandbyNode(name: "n1", root: root, ports: ports, interruptGuard: interruptGuard)
        defer { n1.stop() }
        let n2 = StandbyNode(name: "n2", root: root, ports: ports, interruptGuard: interruptGuard, cpus: Self.cpusBesideLeader(root: root))
        defer { n2.stop() }
        try etcd.start()
        let spin = ["--spin-wait", String(options.leaderSpinWaitMicroseconds)]
        // n1 holds every reply until a standby acknowledges (no --degrade-after): what is measured is always synchronous.
        try n1.start(etcd: etcd, options: spin)
        try waitForLeader(n1, etcd: etcd)
        // n2, once it leads alone after a failover, releases without a standby after a while.
        try n2.start(etcd: etcd, options: spin + ["--degrade-after", String(Self.standbyDegradeAfter)])
        try waitForSync(leader: n1, standby: n2, etcd: etcd)
        say(
            "n1 leads cluster \(Self.standbyCluster) on etcd \(etcd.url) with n2 its synchronous standby "
                + "(--sync one, --lease-ttl \(Self.standbyLeaseTTL)); each reply waits for n2's acknowledgement"
                + (n2.cpus.isEmpty ? "" : "; n2 runs on CPU \(CPUList.format(n2.cpus)), apart from n1's serving thread"))
        let context = try ZMQContext()
        defer { context.close() }
        try Self.setUpAccounts(context: context, requests: n1.requests, name: "setup", keys: nil)
        if shapes.contains("round-trip") {
            for figure in try standbyRoundTrip(context: context, requests: n1.requests, root: root, interruptGuard: interruptGuard) {
                report(figure)
            }
        }
        if shapes.contains("throughput-16"), let leader = n1.process {
            for figure in try throughput(clients: 16, context: context, requests: n1.requests, root: root, leader: leader, prefix: "cluster.standby") {
                report(figure)
            }
        }
        if shapes.contains("failover") {
            for figure in try failovers(context: context, etcd: etcd, leader: n1, standby: n2) { report(figure) }
        }
    }

    /// The CPUs this process may use besides those where a leader's serving
    /// thread goes (`--commit-cpu auto`: the disk's completion interrupts);
    /// empty when that pins nothing or leaves none. n2 runs there, as a
    /// standby on a machine of its own would: sharing n1's CPU, its commit
    /// of a shipped turn would wait for n1's thread, which works on the same
    /// turn at the same moment.
    nonisolated static func cpusBesideLeader(root: String) -> [Int] {
        let allowed = ThreadAffinity.current()
        defer { try? ThreadAffinity.pin(allowed) }
        guard let leader = try? CommitPlacement.apply(.automatic, dataFolder: root).cpus else { return [] }
        return allowed.filter { !leader.contains($0) }
    }

    /// The round trip through the leader with its synchronous standby, and
    /// the raw figures measured in the same interleaved rounds: a ZeroMQ echo
    /// round trip and one raw LMDB commit; the p50 is put beside echo + two
    /// commits (the leader's own and the standby's, each durable).
    private func standbyRoundTrip(
        context: ZMQContext, requests: String, root: String, interruptGuard: LabInterruptGuard
    ) throws -> [BenchFigure] {
        let client = try Client(context: context, endpoint: requests, name: "rtt")
        let echo = try EchoServer(context: context, endpoint: ports.nextEndpoint(), commitFolder: nil, interruptGuard: interruptGuard)
        defer { echo.stop() }
        let commit = try RawCommitTimer(root: root)
        var samples: [Double] = []
        var echoSamples: [Double] = []
        var commitSamples: [Double] = []
        var index = 0
        for _ in 0..<options.runs {
            samples += try roundTrips(client, count: 220, warmUp: 20, index: &index)
            echoSamples += try echo.measure(count: 400, warmUp: 40)
            commitSamples += try commit.measure()
        }
        let p50 = Self.percentile(samples, 0.5)
        let echoP50 = Self.percentile(echoSamples, 0.5)
        let commitP50 = Self.percentile(commitSamples, 0.5)
        let composed = echoP50 + 2 * commitP50
        let ratio = p50 / composed
        say(
            "round trip p50 with --sync one: \(BenchFigure.format(p50)) µs = \(String(format: "%.2f", ratio))× echo + two commits "
                + "(\(BenchFigure.format(echoP50)) + 2 × \(BenchFigure.format(commitP50)) = \(BenchFigure.format(composed)) µs); "
                + "the bar is ≤ \(BenchFigure.format(Self.standbyRoundTripBar))×: \(ratio <= Self.standbyRoundTripBar ? "met" : "NOT met")")
        return [
            BenchFigure(
                name: "cluster.standby.round-trip.p50", value: p50, unit: "us", baseline: composed, baselineKind: "echo-plus-two-commits"),
            BenchFigure(name: "cluster.standby.round-trip.p99", value: Self.percentile(samples, 0.99), unit: "us", baseline: nil),
            BenchFigure(name: "cluster.raw-zmq-echo.p50", value: echoP50, unit: "us", baseline: nil),
            BenchFigure(name: "cluster.raw-lmdb-commit.p50", value: commitP50, unit: "us", baseline: nil),
            BenchFigure(name: "cluster.raw-echo-plus-two-commits.p50", value: composed, unit: "us", baseline: nil),
        ]
    }

    /// Kills the leader `options.failovers` times, each time measuring from
    /// the SIGKILL to the first op the standby applies, and to etcd's leader
    /// key naming it; between them the killed node restarts as the new
    /// standby and is waited for until it is in step. The medians, in ms,
    /// beside the lease TTL.
    private func failovers(context: ZMQContext, etcd: EtcdServer, leader first: StandbyNode, standby second: StandbyNode) throws -> [BenchFigure] {
        var leader = first
        var standby = second
        var applied: [Double] = []
        var led: [Double] = []
        for round in 1...options.failovers {
            if round > 1 {
                // The node killed last comes back as the standby of the one that took over.
                try standby.start(
                    etcd: etcd,
                    options: ["--spin-wait", String(options.leaderSpinWaitMicroseconds), "--degrade-after", String(Self.standbyDegradeAfter)])
                try waitForSync(leader: leader, standby: standby, etcd: etcd)
            }
            let killed = ContinuousClock.now
            leader.killHard()
            let times = try firstApplied(context: context, node: standby, etcd: etcd, since: killed, round: round)
            applied.append(times.applied)
            led.append(times.led)
            swap(&leader, &standby)
        }
        func list(_ times: [Double]) -> String { times.map(BenchFigure.format).joined(separator: ", ") + " ms" }
        say(
            "failover: SIGKILL of the leader to its standby's first applied op, \(applied.count) time\(applied.count == 1 ? "" : "s"): "
                + "\(list(applied)); to etcd naming it leader: \(list(led)) "
                + "(lease TTL \(Self.standbyLeaseTTL) s; the new leader, alone, releases after --degrade-after \(Self.standbyDegradeAfter) s)")
        let ttl = Double(Self.standbyLeaseTTL * 1_000)
        return [
            BenchFigure(name: "cluster.standby.failover.p50", value: BenchFigure.median(applied), unit: "ms", baseline: ttl, baselineKind: "lease-ttl"),
            BenchFigure(name: "cluster.standby.failover-leads.p50", value: BenchFigure.median(led), unit: "ms", baseline: ttl, baselineKind: "lease-ttl"),
        ]
    }

    /// Sends `node` transfers, each with a request id of its own from a fresh
    /// client waiting at most 250 ms, until one is applied: the ms since
    /// `since` until then, and until etcd's leader key first named `node`
    /// (read every 10 ms meanwhile). No answer, or any other answer (an
    /// error, a refusal), is not yet.
    private func firstApplied(
        context: ZMQContext, node: StandbyNode, etcd: EtcdServer, since: ContinuousClock.Instant, round: Int
    ) throws -> (applied: Double, led: Double) {
        let key = "/cogd/\(Self.standbyCluster)/leader"
        let deadline = since + .seconds(60)
        var led: Double?
        var attempt = 0
        while ContinuousClock.now < deadline {
            attempt += 1
            let client = try Client(context: context, endpoint: node.requests, name: "failover-\(round)-\(attempt)")
            defer { client.socket.close() }
            try client.send(op: "ledger.transfer", argument: Self.transfer(attempt))
            let waitUntil = ContinuousClock.now + .milliseconds(250)
            while ContinuousClock.now < waitUntil {
                if led == nil, etcd.read([key])?[key]?.split(separator: " ").first.map(String.init) == node.name {
                    led = Self.microseconds(ContinuousClock.now - since) / 1_000
                }
                guard try ZMQSocket.poll([client.socket], timeout: .milliseconds(10))[0] else { continue }
                while let reply = try client.receiveReply() {
                    guard case .applied = reply.outcome else { continue }
                    let applied = Self.microseconds(ContinuousClock.now - since) / 1_000
                    return (applied, led ?? applied)
                }
            }
        }
        throw BenchError(message: "node \(node.name) applied no op within 60 s of its leader's SIGKILL:\n\(node.logTail)")
    }

    /// A line of what the run found: on stdout, or on stderr beside `--json`'s figures.
    private func say(_ line: String) {
        if options.json { printError(line) } else { print(line) }
        fflush(nil)
    }

    /// Waits (at most 30 s) until etcd's leader key names `node`.
    private func waitForLeader(_ node: StandbyNode, etcd: EtcdServer) throws {
        let key = "/cogd/\(Self.standbyCluster)/leader"
        try waitUntilHolds("node \(node.name) to lead (etcd's \(key))", node: node, seconds: 30) {
            etcd.read([key])?[key]?.split(separator: " ").first.map(String.init) == node.name
        }
    }

    /// Waits (at most 60 s) until etcd's sync key says `leader` leads with
    /// `standby` named: the standby holds every turn released.
    private func waitForSync(leader: StandbyNode, standby: StandbyNode, etcd: EtcdServer) throws {
        let key = "/cogd/\(Self.standbyCluster)/sync"
        try waitUntilHolds("node \(standby.name) to be named \(leader.name)'s standby (etcd's \(key))", node: standby, seconds: 60) {
            let fields = (etcd.read([key])?[key] ?? "").split(separator: " ").map(String.init)
            return fields.count >= 3 && fields[1] == leader.name && fields.dropFirst(2).contains(standby.name)
        }
    }

    /// Polls `condition` every 50 ms; throws with `node`'s log when it does not hold within `seconds`, or when the node exits.
    private func waitUntilHolds(_ what: String, node: StandbyNode, seconds: Int, _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if condition() { return }
            if let process = node.process, !process.isRunning {
                throw BenchError(message: "node \(node.name) exited (status \(process.terminationStatus)) while waiting for \(what):\n\(node.logTail)")
            }
            usleep(50_000)
        }
        throw BenchError(message: "waited \(seconds) s for \(what) in vain:\n\(node.logTail)")
    }
}
