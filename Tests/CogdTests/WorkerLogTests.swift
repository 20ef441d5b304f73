import CogCluster
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

/// A worker tells its operator, in its own log, what the leader did to it:
/// its replica discarded (`revision-ahead`), given up (`gone`), its
/// messages refused (`malformed`) — and a name the leader would refuse is
/// a usage error before anything connects.
@Suite("A worker's log says what happened to it", .serialized, .timeLimit(.minutes(10)))
struct WorkerLogTests {
    @Test func `a leader restarted on an empty folder: the worker warns it discarded its replica, then says it synced again`() throws {
        let first = TemporaryFolder()
        let empty = TemporaryFolder()
        defer {
            first.cleanUp()
            empty.cleanUp()
        }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: first.path)
        defer { leader.stop() }
        let worker = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger", "--group", "w1", "--log-format", "json",
        ])
        defer { worker.stop() }
        func event(_ name: String) -> [String: Any]? {
            worker.waitForLine { logEvent($0)?["event"] as? String == name }.flatMap(logEvent)
        }
        #expect(event("synced")?["epoch"] as? Double == 1, "\(worker.lines)")
        for (index, account) in ["a", "b", "c"].enumerated() {
            #expect(try ports.call("ledger.open", #"{"account": "\#(account)", "balance": 1}"#).hasPrefix("applied revision \(index + 1)"))
        }
        #expect(worker.waitForLine { logEvent($0)?["message"] as? String == "applied 3" } != nil, "\(worker.lines)")

        // The same endpoints, a new empty folder: epoch 1 again, revision 0.
        leader.stop()
        let restarted = try ports.startLeader(data: empty.path)
        defer { restarted.stop() }
        let discarded = try #require(event("revision-ahead"), "\(worker.lines)")
        #expect(discarded["level"] as? String == "warn")
        #expect(discarded["discardedRevision"] as? Double == 3 && discarded["discardedEpoch"] as? Double == 1, "\(discarded)")
        #expect(
            (discarded["message"] as? String)?.hasPrefix(
                "the leader's log is behind this replica (its data folder went back, or is another one): discarded the replica at "
                    + "revision 3, epoch 1; syncing again from the leader's state (the leader says: worker w1 says it holds revision 3, "
                    + "but this leader's log ends at revision 0") == true, "\(discarded)")
        // Same epoch as before, yet the sync is said, after the warning.
        let resynced = try #require(event("resynced"), "\(worker.lines)")
        #expect(resynced["level"] as? String == "info" && resynced["epoch"] as? Double == 1 && resynced["discardedRevision"] as? Double == 3)
        #expect(
            (resynced["message"] as? String)?.range(of: #"^synced at revision \d+, epoch 1; started over: revision 3 was discarded$"#, options: .regularExpression)
                != nil, "\(resynced)")
        let order = worker.lines.compactMap { logEvent($0)?["event"] as? String }
        #expect(order.firstIndex(of: "revision-ahead").map { $0 < order.lastIndex(of: "resynced")! } == true, "\(order)")
        // And it follows the new log from there.
        #expect(try ports.call("ledger.open", #"{"account": "d", "balance": 1}"#).hasPrefix("applied revision 1"))
        #expect(worker.waitForLine { logEvent($0)?["message"] as? String == "applied 1" } != nil, "\(worker.lines)")
    }

    @Test func `a frozen worker given up says the leader gave it up because it was paused, not that the leader was silent`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        // 2 s: a worker heartbeats every second, so a busy machine does not get it given up unpaused.
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 2)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "ledger-greeter")
        defer {
            worker.resume()
            worker.stop()
        }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 1}"#).hasPrefix("applied revision 1"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied 2") } != nil, "it greeted alice: \(worker.lines)")

        // Frozen past the heartbeat timeout, and then past the 3 s after
        // which a worker says it hears nothing from its leader.
        worker.pause()
        #expect(leader.waitForLine { $0.contains("worker w1 left: silent for") } != nil, "\(leader.lines)")
        usleep(3_000_000)
        worker.resume()

        let givenUp = worker.waitForLine { $0.contains("the leader gave this worker up: this process itself was paused") }
        #expect(givenUp?.contains(" WARN  cogd worker w1: the leader gave this worker up: this process itself was paused for ") == true, "\(worker.lines)")
        #expect(
            givenUp?.hasSuffix(
                " s (stopped, suspended or starved: its own clock jumped), so it sent no heartbeat past the leader's heartbeat timeout; it "
                    + "retired this worker's scope instances. Rejoining: saying hello, then registering the scopes anew (their children's "
                    + "requests wait for new instances)") == true, "\(String(describing: givenUp))")
        #expect(worker.waitForLine { $0.contains(" INFO  cogd worker w1: rejoined the leader at revision ") } != nil, "\(worker.lines)")
        // Its greeter works again, under a new instance.
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 1}"#).hasPrefix("applied"))
        #expect(try waitUntil { try TurnStore(directory: folder.path, mode: .reader).greetings(of: "bob") == 1 })
        // The leader is not blamed for the pause: no line counts the paused seconds (5 s or more) as
        // the leader's silence. (A loaded machine may still delay the leader's answer after the resume
        // past 3 s, and that is said, with the seconds since the resume.)
        let blamed = worker.lines.filter { line in
            guard let range = line.range(of: #"no answer from the leader [^;]* for (\d+) s"#, options: .regularExpression) else { return false }
            let seconds = line[range].split(separator: " ").dropLast().last.flatMap { Int($0) } ?? 0
            return seconds >= 5
        }
        #expect(blamed.isEmpty, "the leader is not blamed for the worker's own pause: \(worker.lines)")
    }

    @Test func `a worker refused its name waits between hellos without saying the leader is silent, and serves its metrics meanwhile`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let holder = try ports.startWorker("w1")
        defer { holder.stop() }
        let metrics = freePort()
        let second = try CogdProcess(["worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger", "--group", "w1", "--metrics", "127.0.0.1:\(metrics)"])
        defer { second.stop() }
        let refusal = second.waitForLine { $0.contains("the leader refuses this name") }
        #expect(
            refusal?.hasSuffix("; each worker needs its own --name; saying hello again after 0.5 s, 1 s, 2 s, 4 s, then every 5 s until it is free")
                == true, "\(second.lines)")
        // Five refusals: the hellos at 0, 0.5, 1.5, 3.5 and 7.5 s; the last two 4 s apart.
        #expect(waitUntil(timeout: .seconds(30)) { ((try? ports.errorCounts())?["name-in-use"] ?? 0) >= 5 }, "\((try? ports.errorCounts()) ?? [:])")
        let samples = try MetricsEndpointTests.scrape(metrics).samples
        #expect(samples["cogd_worker_synced"] == 0 && samples["cogd_worker_reconnects_total"] == 0, "its loop publishes while it waits: \(samples)")
        #expect(!second.lines.contains { $0.contains("no answer from the leader") }, "a refusal is an answer: \(second.lines)")
        holder.stop()
        #expect(second.waitForLine { $0.hasSuffix(" cogd worker w1: the name is free; this process holds it now") } != nil, "\(second.lines)")
        #expect(second.waitForLine { $0.contains("cogd worker w1: synced at revision") } != nil, "\(second.lines)")
    }

    @Test func `worker --name the leader would refuse is a usage error before anything connects`() throws {
        // Nothing listens at this endpoint: the error comes first.
        let nowhere = "tcp://127.0.0.1:\(freePort())"
        let empty = try runCogd(["worker", "--leader", nowhere, "--name", ""], timeout: .seconds(20))
        #expect(empty.status == 64, "\(empty)")
        #expect(
            empty.stderr.hasPrefix(
                "Error: --name takes a worker name the leader accepts, not '': worker names are 1 to 255 bytes of UTF-8; this one has 0\n"),
            "\(empty.stderr)")
        #expect(empty.stderr.contains("See 'cogd worker --help'"), "\(empty.stderr)")
        let long = try runCogd(["worker", "--leader", nowhere, "--name", String(repeating: "x", count: 300)], timeout: .seconds(20))
        #expect(long.status == 64, "\(long)")
        #expect(long.stderr.contains("worker names are 1 to 255 bytes of UTF-8; this one has 300\n"), "\(long.stderr)")
        #expect(!long.stderr.contains("zmq_setsockopt"), "\(long.stderr)")
        #expect(throws: Command.UsageError(
            message: "--name takes a worker name the leader accepts, not 'a\u{0}b': worker names hold no NUL character", subcommand: "worker")
        ) { try Command.parse(["worker", "--name", "a\u{0}b"]) }
    }

    @Test func `a worker named with the longest name the leader accepts syncs`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        // 255 bytes (a two-byte character at the end): longer than a routing identity may be with its suffix.
        let name = String(repeating: "n", count: 253) + "é"
        #expect(name.utf8.count == 255)
        let worker = try CogdProcess(["worker", "--leader", ports.requests, "--name", name, "--rig", "ledger", "--group", "g"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains(": synced at revision 0, epoch 1") } != nil, "\(worker.lines)")
        let status = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        #expect((object?["workers"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == [name], "\(status.stdout)")
    }

    @Test func `a worker whose messages the leader refuses malformed says so at once, then not at every refusal`() throws {
        let leader = try ScriptedLeader()
        let worker = try CogdProcess(["worker", "--leader", leader.endpoint, "--name", "w1", "--rig", "ledger"])
        defer { worker.stop() }
        // The scripted leader refuses everything the worker sends (here with a terminal escape in its words).
        var refused: [String] = []
        let refusal = WireError(.malformed, "this leader reads no \u{1B}[31mred\u{1B}[0m messages")
        while refused.count < 4, let sent = try leader.next() {
            refused.append(sent.message?.typeName ?? "undecodable")
            try leader.send(.error(refusal), to: sent.identity)
        }
        #expect(refused.first == "hello" && refused.count == 4, "\(refused)")
        let line = worker.waitForLine { $0.contains("the leader refuses this worker's messages as malformed") }
        #expect(
            line?.contains(
                " WARN  cogd worker w1: the leader refuses this worker's messages as malformed: this leader reads no \\u{1B}[31mred\\u{1B}[0m "
                     + "messages (1 since the last such line, 1 in all); what it refused is not done (does the leader run another cogd version?)") == true,
            "\(worker.lines)")
        // Four refusals, one line (the next comes 10 s after it at the soonest, with the count).
        worker.stop()
        #expect(worker.lines.count { $0.contains("as malformed") } == 1, "\(worker.lines)")
        #expect(!worker.lines.contains { $0.contains("\u{1B}") }, "nothing raw reaches the terminal")
    }
}
