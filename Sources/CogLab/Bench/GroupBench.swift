import CogCodec
import CogdCommandLine
import CogLog
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab bench groups`: a real `cogd leader` child and a group of 1, 2 or 4
/// `cogd worker --group bench --rig ledger-greeter` children on loopback.
///
/// - **Scope-child work per second**: a client opens fresh accounts (64 in
///   flight); each opening places a greeter child on one member, whose
///   greeting is an op back to the leader. Accounts opened and greeted per
///   second, first open sent to last greeting published (each run's
///   accounts closed again afterwards, untimed); the median of `--runs`,
///   beside the raw LMDB append rate (160-byte records, 64 per durable
///   commit) measured in the same run.
/// - **Move after an owner's death** (2 and 4 workers): over 24 accounts,
///   a member is SIGKILLed; from the kill to the record that reopens its
///   accounts on survivors, and to the last of their new greeters' greetings
///   (read from the log by `GroupLogCheck`); p50 and p99 over the kills
///   (at least 5; with fewer than 100 the p99 is the slowest), beside the heartbeat timeout (2 s) as the baseline. The
///   replacement starts once the move is done, so each move is a timeout's.
struct GroupBench {
    let options: BenchOptions
    /// The loopback ports taken at the start (`--ports`): two per shape's leader.
    let ports: LoopbackPorts

    static let shapeNames = ["workers-1", "workers-2", "workers-4"]
    /// The leader's `--heartbeat-timeout` in this bench (seconds).
    static let heartbeatTimeout: Double = 2
    static let group = "bench"
    private static let accountsPerRun = 200
    private static let window = 64

    func run() throws {
        let shapes = options.only.isEmpty ? Self.shapeNames : options.only
        for shape in shapes {
            let count = Int(shape.dropFirst("workers-".count))!
            for figure in try measure(workers: count) { figure.report(json: options.json, nameWidth: 40, ports: ports) }
        }
    }

    private func measure(workers count: Int) throws -> [BenchFigure] {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-bench-groups-\(getpid())-\(count)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let requests = ports.nextEndpoint()
        let turns = ports.nextEndpoint()
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let leader = try Child(
            executable,
            ["leader", "--data", root + "/leader", "--requests", requests, "--turns", turns, "--heartbeat-timeout",
             GroupDrill.seconds(Self.heartbeatTimeout)])
        defer { leader.stop() }
        var started = 0
        func startWorker() throws -> (child: Child, name: String) {
            let name = "bench-g\(started)"
            started += 1
            // The leader's heartbeat timeout: the worker's lease is it less the margin (cogwire §6b).
            let child = try Child(
                executable,
                [
                    "worker", "--leader", requests, "--name", name, "--rig", "ledger-greeter", "--group", Self.group,
                    "--heartbeat-timeout", GroupDrill.seconds(Self.heartbeatTimeout),
                ])
            return (child, name)
        }
        var workers = try (0..<count).map { _ in try startWorker() }
        defer { for worker in workers { worker.child.stop() } }
        try waitForGroup(requests, Set(workers.map(\.name)))
        let context = try ZMQContext()
        defer { context.close() }
        let subscriber = try ZMQSocket(context, .subscriber, linger: .zero)
        defer { subscriber.close() }
        try subscriber.subscribeToAll()
        try subscriber.connect(turns)
        let client = try DrillClient(context: context, endpoint: requests, name: "bench-groups-\(count)")
        defer { client.close() }
        usleep(200_000)

        var rates: [Double] = []
        var raw: [Double] = []
        for run in 0..<max(1, options.runs) {
            let accounts = (0..<Self.accountsPerRun).map { "r\(run)-\($0)" }
            rates.append(try openAndGreet(accounts, client: client, subscriber: subscriber))
            try call(accounts.map { ("ledger.close", try CBOREncoder().encode($0)) }, client: client)
            let rawFolder = root + "/raw-\(run)"
            let records = Self.window * 50
            raw.append(Double(records) / (try RawAppendBaseline(directory: rawFolder).run(count: records, recordSize: 160, batch: Self.window)))
            try? FileManager.default.removeItem(atPath: rawFolder)
        }
        var figures = [
            BenchFigure(
                name: "groups.workers-\(count).child-ops-per-second", value: BenchFigure.median(rates), unit: "ops/s",
                baseline: BenchFigure.median(raw))
        ]
        guard count > 1 else { return figures }

        // Moves: 24 accounts spread over the group; kill a member, wait out the move, start a replacement.
        let moved = (0..<24).map { "m\($0)" }
        try call(moved.map { ("ledger.open", try CBOREncoder().encode(["account": CBORValue.text($0), "balance": .unsigned(10)])) }, client: client)
        var kills: [GroupLogCheck.Kill] = []
        for kill in 0..<max(5, options.runs) {
            let slot = kill % count
            usleep(1_200_000)  // past one heartbeat of every member (a fresh one has registered)
            kills.append(GroupLogCheck.Kill(worker: workers[slot].name, at: Date()))
            workers[slot].child.killHard()
            usleep(UInt32((Self.heartbeatTimeout + 1.5) * 1_000_000))
            workers[slot] = try startWorker()
            try waitForGroup(requests, Set(workers.map(\.name)))
        }
        let store = try TurnStore(directory: root + "/leader", mode: .reader)
        defer { store.close() }
        var check = GroupLogCheck(kills: kills, window: Self.heartbeatTimeout + GroupDrill.moveSlack)
        var from: UInt64 = 1
        while true {
            let batch = try store.records(from: from, limit: 10_000)
            guard let last = batch.last else { break }
            for record in batch { check.read(record) }
            from = last.revision + 1
        }
        let measured = check.moves.filter { !$0.members.isEmpty }
        let reopen = measured.compactMap(\.reopenMilliseconds)
        let live = measured.compactMap(\.liveMilliseconds)
        guard live.count == measured.count, !live.isEmpty else {
            throw ClusterBench.BenchError(
                message: "\(measured.count - live.count) of \(measured.count) kills' accounts never greeted again on a survivor")
        }
        let timeout = Self.heartbeatTimeout * 1_000
        figures += [
            BenchFigure(
                name: "groups.workers-\(count).move-reopened.p50", value: ClusterBench.percentile(reopen, 0.5), unit: "ms",
                baseline: timeout, baselineKind: "heartbeat-timeout"),
            BenchFigure(
                name: "groups.workers-\(count).move-live.p50", value: ClusterBench.percentile(live, 0.5), unit: "ms", baseline: timeout,
                baselineKind: "heartbeat-timeout"),
            BenchFigure(
                name: "groups.workers-\(count).move-live.p99", value: ClusterBench.percentile(live, 0.99), unit: "ms", baseline: timeout,
                baselineKind: "heartbeat-timeout"),
        ]
        return figures
    }

    /// The nearest rank rounded up (of a handful of kills, the p99 is the slowest, not the p50 again).
        /// Opens `accounts` (64 in flight) and waits for each one's greeting on
    /// the turns stream; accounts greeted per second.
    private func openAndGreet(_ accounts: [String], client: DrillClient, subscriber: ZMQSocket) throws -> Double {
        var waiting = Set(accounts)
        var next = 0
        let start = ContinuousClock.now
        var last = start
        while !waiting.isEmpty {
            guard ContinuousClock.now - start < .seconds(60) else {
                throw ClusterBench.BenchError(message: "\(waiting.count) of \(accounts.count) accounts not greeted within 60 s")
            }
            while next < accounts.count, client.outstanding < Self.window {
                client.enqueue(op: "ledger.open", argument: ["account": .text(accounts[next]), "balance": .unsigned(0)])
                next += 1
            }
            try client.pump(now: .now)
            let ready = try ZMQSocket.poll([subscriber, client.socket], timeout: .milliseconds(5))
            if ready[1] { _ = try client.receiveReplies() }
            if ready[0] {
                while let frames = try subscriber.receive(), case .turns(_, let records)? = try? WireMessage.decode(frames[frames.count - 1]) {
                    for record in records where record.name.hasSuffix("ledger.greet") {
                        for write in record.writes where write.name == "ledger.greeted" {
                            if let account = try? CBORDecoder().decode(String.self, from: write.key ?? []), waiting.remove(account) != nil {
                                last = .now
                            }
                        }
                    }
                }
            }
        }
        return Double(accounts.count) / ClusterBench.seconds(last - start)
    }

    /// Sends each (op, argument) and waits for every answer (60 s at most).
    private func call(_ requests: [(op: String, argument: [UInt8])], client: DrillClient) throws {
        for request in requests { client.enqueue(op: request.op, argument: [:], raw: request.argument) }
        let deadline = ContinuousClock.now + .seconds(60)
        while client.outstanding > 0 {
            guard ContinuousClock.now < deadline else { throw ClusterBench.BenchError(message: "\(client.outstanding) requests unanswered within 60 s") }
            try client.pump(now: .now)
            if try ZMQSocket.poll([client.socket], timeout: .milliseconds(20))[0] { _ = try client.receiveReplies() }
        }
    }

    /// Waits until the leader lists exactly `names`, each in the group and caught up (30 s at most), then a little more (they register after syncing).
    private func waitForGroup(_ requests: String, _ names: Set<String>) throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if case .status(let status)? = try? CogdCommandLine.request(.statusRequest, leader: requests, timeout: .seconds(2)),
                Set(status.workers.map(\.name)) == names,
                status.workers.allSatisfy({ $0.group == Self.group && $0.appliedRevision == status.revision })
            {
                usleep(300_000)
                return
            }
            usleep(100_000)
        }
        throw ClusterBench.BenchError(message: "the group of \(names.count) did not form within 30 s")
    }
}
