import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

/// `cogd leader --ha --sync one` on a real etcd (ha.md §9): a standby in
/// step is named in etcd's sync key, every commit is shipped to it, and a
/// reply leaves only once the standby has acknowledged its commit.
@Suite("cogd leader --sync: shipping to a standby", .serialized, .timeLimit(.minutes(10)))
struct ShippingLeaderTests {
    /// Opens account `a<sequence>` through `node` as request `teller#<sequence>`; what `cogd call` printed.
    static func call(_ node: HALeaderTests.Node, _ sequence: Int) throws -> String {
        let result = try runCogd([
            "call", "--leader", "tcp://127.0.0.1:\(node.requests)", "--timeout", "10", "--request-id", "teller#\(sequence)", "ledger.open",
            #"{"account": "a\#(sequence)", "balance": 5}"#,
        ], timeout: .seconds(30))
        return result.stdout + result.stderr
    }

    @Test func `a reply waits for the standby's acknowledgement of its commit, which the standby's copy applies`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let node = HALeaderTests.Node(name: "n1")
        let copy = TemporaryFolder()
        defer {
            node.folder.cleanUp()
            copy.cleanUp()
        }
        let leader = try CogdProcess(node.arguments(etcd) + ["--sync", "one"])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(leader.lines)")
        let endpoint = "tcp://127.0.0.1:\(node.requests)"

        // A standby with an empty folder is in step with a log of no turns.
        let standby = try RawPeer(endpoint: endpoint, identity: "standby-n2")
        let store = try TurnStore(directory: copy.path, mode: .standby, createIfMissing: true)
        guard case .shipWelcome(1, let welcomed)? = try standby.exchange(
            .standbyHello(node: "n2", logID: nil, epoch: store.epoch, revision: store.lastRevision, stateDigest: nil, lastCommit: nil))
        else {
            Issue.record("no ship-welcome: \(leader.lines)")
            return
        }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "the standby is named in the sync key")

        // An op: its commit is shipped; its reply waits for the standby's acknowledgement.
        let client = try RawPeer(endpoint: endpoint)
        try client.send([try openAccountFrame("alice", balance: 5, worker: "c1", sequence: 1)])
        guard case .ship(1, let sequence, let bytes)? = try standby.next() else {
            Issue.record("no ship: \(leader.lines)")
            return
        }
        #expect(sequence > welcomed)
        let commit = try ShippedCommit.decode(bytes)
        #expect(commit.epoch == 1 && commit.firstRevision == 1 && commit.recordCount == 1)
        #expect(try TurnRecord.decode(commit.record(0)).origin.request == RequestID(worker: "c1", sequence: 1))
        #expect(try client.next(within: .seconds(1)) == nil, "no reply before the standby acknowledges")
        let held = try MetricsEndpointTests.get(node.metrics, "/metrics").body
        // Held: the reply and the turn's publication.
        #expect(held.contains("cogd_ha_held_releases 2\n") && held.contains("cogd_ha_sync_state{state=\"sync\"} 1\n"), "\(held)")
        #expect(held.contains("cogd_ha_standby_lag_commits{standby=\"n2\"} 1\n") && held.contains("cogd_ha_named_standbys 1\n"))
        // A status is answered while replies wait: it says why they do.
        let status = try runCogd(["status", "--leader", endpoint], timeout: .seconds(20))
        #expect(status.stdout.contains("standbys  sync; named n2; \(welcomed) of \(sequence) commits released; connected: n2 1 behind"), "\(status)")
        let json = try runCogd(["status", "--leader", endpoint, "--json"], timeout: .seconds(20))
        #expect(json.stdout.contains(#""replication": {"state": "sync", "named": ["n2"], "shipped": \#(sequence), "released": \#(welcomed), "standbys": [{"node": "n2", "lag": 1}]}"#), "\(json)")
        try store.apply(commit)
        try standby.send([WireMessage.shipAck(node: "n2", sequence: sequence).encoded()])
        guard case .reply(let reply)? = try client.next() else {
            Issue.record("no reply after the acknowledgement: \(leader.lines)")
            return
        }
        #expect(reply.outcome == .applied(revision: 1))
        let released = try MetricsEndpointTests.get(node.metrics, "/metrics").body
        #expect(released.contains("cogd_ha_held_releases 0\n") && released.contains("cogd_ha_standby_lag_commits{standby=\"n2\"} 0\n"))
        // The reply and the publication each waited once for the acknowledgement.
        #expect(released.contains("cogd_ha_release_wait_seconds_count 2\n"), "\(released)")
        #expect(store.lastRevision == 1 && store.epoch == 1)
        #expect(try store.records(from: 1).map(\.origin.request) == [RequestID(worker: "c1", sequence: 1)])
        #expect(try store.value(name: "ledger.balance", key: CBOREncoder().encode("alice")) == CBOREncoder().encode(5))
    }

    @Test func `a cogd standby keeps a copy, is named in the sync key, and takes over with every acknowledged turn when the leader is killed`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let first = try CogdProcess(n1.arguments(etcd) + ["--sync", "one"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        // n2 releases alone a second after it finds no standby (once it leads: n1 will be gone).
        let second = try CogdProcess(n2.arguments(etcd) + ["--sync", "one", "--degrade-after", "1"])
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("in step with the leader of epoch 1 at revision 0") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "the standby is named in the sync key")

        // Three requests, each answered once n2 holds its commit.
        for sequence in 1...3 {
            let output = try Self.call(n1, sequence)
            #expect(output.hasPrefix("applied revision \(sequence)"), "\(output)")
        }

        // The leader is killed: n2 takes the lead once its lease is gone, in epoch 2, from its own copy.
        first.killHard()
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("node n2 leads cluster bank in epoch 2 (minted in etcd)") } != nil,
            "\(second.lines)")
        #expect(second.waitForLine { $0.contains("epoch 2, revision 3") } != nil, "\(second.lines)")
        // Alone, it degrades after a second; a retry of an answered request is answered from the copy's dedup:
        // the same revision, nothing run again.
        let retry = try Self.call(n2, 2)
        #expect(retry.hasPrefix("answered from an earlier request: applied at revision 2 (request teller#2)"), "\(retry)")
        #expect(try etcd.get("/cogd/bank/sync") == "2 n2", "the new leader names no standby until one is in step")
    }

    @Test func `a node behind the leader gets a copy of the log, is named, takes over with every acknowledged turn, and catches the old leader up`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        // n1 leads alone (degraded after a second without a standby) and answers three calls.
        let first = try CogdProcess(n1.arguments(etcd) + ["--sync", "one", "--degrade-after", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        for sequence in 1...3 { #expect(try Self.call(n1, sequence).hasPrefix("applied revision \(sequence)")) }

        // n2 starts with an empty folder, behind: it is sent a copy, then follows and is named.
        let second = try CogdProcess(n2.arguments(etcd) + ["--sync", "one", "--degrade-after", "1"])
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("receiving its copy at revision 3") } != nil, "\(second.lines)")
        #expect(second.waitForLine { $0.contains("the leader's copy is in place at revision 3") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        #expect(try Self.call(n1, 4).hasPrefix("applied revision 4"))

        // n1 is killed: n2 leads epoch 2 from its copy, and answers a retry of the last call from it.
        first.killHard()
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 4") } != nil, "\(second.lines)")
        #expect(try Self.call(n2, 4).hasPrefix("answered from an earlier request: applied at revision 4 (request teller#4)"))
        #expect(try Self.call(n2, 5).hasPrefix("applied revision 5"))

        // n1 returns behind n2 on the same log (revision 4 of epoch 1): n2 catches it up from the commits it applied
        // as a standby and its own since, and names it again.
        let again = try CogdProcess(n1.arguments(etcd) + ["--sync", "one", "--degrade-after", "1"])
        defer { again.stop() }
        #expect(second.waitForLine { $0.contains("standby n1 is at revision 4 of this log: sending it the") } != nil, "\(second.lines)")
        #expect(!again.lines.contains { $0.contains("receiving its copy") }, "no copy: \(again.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "2 n2 n1" }, "\(again.lines)")
        #expect(try Self.call(n2, 6).hasPrefix("applied revision 6"))
    }

    @Test func `with three nodes the sync key names one standby; the spare replaces it when it dies, then takes over with every acknowledged turn`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let nodes = ["n1", "n2", "n3"].map { HALeaderTests.Node(name: $0) }
        defer { for node in nodes { node.folder.cleanUp() } }
        // A leader alone releases after 1 s.
        let options = ["--sync", "one", "--degrade-after", "1"]
        let first = try CogdProcess(nodes[0].arguments(etcd) + options)
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(nodes[1].arguments(etcd) + options)
        defer { second.stop() }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        let third = try CogdProcess(nodes[2].arguments(etcd) + options)
        defer { third.stop() }
        #expect(third.waitForLine { $0.contains("in step with the leader of epoch 1") } != nil, "\(third.lines)")
        for sequence in 1...2 { #expect(try Self.call(nodes[0], sequence).hasPrefix("applied revision \(sequence)")) }
        // Any standby named may take the lead, so one is: n3 follows, a spare.
        #expect(try etcd.get("/cogd/bank/sync") == "1 n1 n2", "\(first.lines)")

        // n2 dies: its connection ends, so it is dropped (not a heartbeat timeout later), n3 (at the tip) is named
        // in its place, and replies flow again.
        second.killHard()
        #expect(first.waitForLine(timeout: .seconds(30)) { $0.contains("standby n2 dropped: its connection ended") } != nil, "\(first.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n3" }, "\(first.lines)")
        #expect(try Self.call(nodes[0], 3).hasPrefix("applied revision 3"))

        // The leader is killed: n3 leads epoch 2 from its copy, with every acknowledged turn.
        first.killHard()
        #expect(third.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 3") } != nil, "\(third.lines)")
        let retry = try Self.call(nodes[2], 3)
        #expect(retry.hasPrefix("answered from an earlier request: applied at revision 3 (request teller#3)"), "\(retry)")
    }

    @Test func `with three nodes a frozen named standby is replaced by the spare at the tip while still connected, and replies flow again`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let nodes = ["n1", "n2", "n3"].map { HALeaderTests.Node(name: $0) }
        defer { for node in nodes { node.folder.cleanUp() } }
        let options = ["--sync", "one"]
        let first = try CogdProcess(nodes[0].arguments(etcd) + options)
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(nodes[1].arguments(etcd) + options)
        defer { second.stop() }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        let third = try CogdProcess(nodes[2].arguments(etcd) + options)
        defer { third.stop() }
        #expect(third.waitForLine { $0.contains("in step with the leader of epoch 1") } != nil, "\(third.lines)")
        #expect(try Self.call(nodes[0], 1).hasPrefix("applied revision 1"))

        // n2, the named standby, freezes: its connection stays open and it acknowledges nothing. The reply waits
        // until the spare, which holds the tip, is named in n2's place — before any timeout drops n2.
        second.pause()
        #expect(try Self.call(nodes[0], 2).hasPrefix("applied revision 2"))
        #expect(try etcd.get("/cogd/bank/sync") == "1 n1 n3", "\(first.lines)")
        let renamed = first.waitForLine { $0.contains("asking etcd's sync key to name n3") || $0.contains("standby n2 dropped") }
        #expect(renamed?.contains("asking etcd's sync key to name n3") == true, "n3 was named while n2 was still kept: \(first.lines)")

        // n2 thaws: it is a spare now (dropped or not meanwhile), and the named n3 keeps replies flowing.
        second.resume()
        #expect(try Self.call(nodes[0], 3).hasPrefix("applied revision 3"))
        #expect(try etcd.get("/cogd/bank/sync") == "1 n1 n3", "\(first.lines)")
    }

    @Test func `a standby whose record at its last revision is of another epoch than the leader's there is sent a copy, though its state is the same`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let encoder = CBOREncoder()
        func load(_ count: Int) throws -> [TurnDraft] {
            let accounts = (1...count).map { "a\($0)" }
            return [TurnDraft(name: "ledger.open", writes: [TurnWrite(name: "ledger.accounts", key: nil, value: try encoder.encode(accounts))])]
        }
        // One log through revision 1, in epoch 1, in both folders (copied between two commits of n2's)...
        let deposed = try TurnStore(directory: n2.folder.path, mode: .writer, createIfMissing: true, epoch: 1)
        try deposed.append(try load(5))
        try FileManager.default.createDirectory(atPath: n1.folder.path, withIntermediateDirectories: true)
        for name in ["data.mdb", "cogd.identity"] {
            try FileManager.default.copyItem(atPath: n2.folder.path + "/" + name, toPath: n1.folder.path + "/" + name)
        }
        // ...then revision 2 is the same turn in both, the same state after it — but n2 wrote it in epoch 1 (a
        // deposed leader, whose clients retried the same request on the next leader), and n1 leading epoch 2.
        try deposed.append(try load(6))
        let deposedDigest = try deposed.currentStateDigest()
        deposed.close()
        let next = try TurnStore(directory: n1.folder.path, mode: .writer, epoch: 2)
        try next.append(try load(6))
        #expect(try next.currentStateDigest() == deposedDigest, "the same state after revision 2")
        next.close()
        try etcd.put("/cogd/bank/epoch", "2")

        let first = try CogdProcess(n1.arguments(etcd) + ["--sync", "one", "--degrade-after", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 3, revision 2") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--sync", "one"])
        defer { second.stop() }
        // The two records at revision 2 differ: n2 is not in step there, and its copy is replaced by the leader's.
        let copy = first.waitForLine { $0.contains("standby n2 is") }
        #expect(copy?.contains("standby n2 is not in step (it has applied epoch 1 and this log's revision 2 is of epoch 2): sending it a copy of the log at revision 2") == true,
            "\(first.lines)")
        #expect(second.waitForLine { $0.contains("the leader's copy is in place at revision 2") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "3 n1 n2" }, "\(first.lines)")
        second.stop()
        let copied = try TurnStore(directory: n2.folder.path, mode: .reader)
        defer { copied.close() }
        #expect(try copied.records(from: 1).map(\.epoch) == [1, 2], "n2 holds the leader's record at revision 2")
    }

    @Test func `a node that led an epoch and wrote nothing in it is in step with the next leader's log, not sent a copy`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        // One log through revision 1, written in epoch 1, in both folders...
        let store = try TurnStore(directory: n1.folder.path, mode: .writer, createIfMissing: true, epoch: 1)
        try store.append([TurnDraft(name: "ledger.open", writes: [TurnWrite(name: "ledger.accounts", key: nil, value: try CBOREncoder().encode(["a1"]))])])
        store.close()
        try FileManager.default.createDirectory(atPath: n2.folder.path, withIntermediateDirectories: true)
        for name in ["data.mdb", "cogd.identity"] {
            try FileManager.default.copyItem(atPath: n1.folder.path + "/" + name, toPath: n2.folder.path + "/" + name)
        }
        // ...and n2 led epoch 2 without writing anything (its folder says epoch 2; its last record is of epoch 1).
        let idle = try TurnStore(directory: n2.folder.path, mode: .writer, epoch: 2)
        #expect(idle.epoch == 2 && idle.lastRevision == 1)
        idle.close()
        try etcd.put("/cogd/bank/epoch", "2")

        let first = try CogdProcess(n1.arguments(etcd) + ["--sync", "one", "--degrade-after", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 3, revision 1") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--sync", "one"])
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("in step with the leader of epoch 3") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "3 n1 n2" }, "\(first.lines)")
        // Welcomed as it was: no copy received (the line that says so comes before the one that says in step).
        #expect(!second.lines.contains { $0.contains("receiving its copy") }, "\(second.lines)")
        #expect(try Self.call(n1, 2).hasPrefix("applied revision 2"))
    }

    /// `ledger.trap`'s reasons: a trap (SIGILL or SIGTRAP), and a stack
    /// overflow (SIGSEGV), whose handler runs on the serving thread's alternate stack.
    @Test(arguments: ["on demand", "stack overflow"])
    func `a request whose body crashed the leader is quarantined by the standby that takes over, not run again`(reason: String) throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        // The lab's leader serves `ledger.trap`, whose body traps on demand.
        let first = try CogdProcess(executable: cogdLabExecutable(), n1.arguments(etcd) + ["--sync", "one", "--trap-op"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(executable: cogdLabExecutable(), n2.arguments(etcd) + ["--sync", "one", "--degrade-after", "1", "--trap-op"])
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("in step with the leader of epoch 1 at revision 0") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "the standby is named in the sync key")
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))

        // The poison pill: its body traps, and the leader dies of it.
        let trap = WireMessage.op(
            OpRequest(request: RequestID(worker: "poison", sequence: 1), op: "ledger.trap", argument: try CBOREncoder().encode(reason))
        ).encoded()
        let poisoner = try RawPeer(endpoint: "tcp://127.0.0.1:\(n1.requests)")
        try poisoner.send([trap])
        guard waitUntil({ !first.process.isRunning }) else {
            Issue.record("the trap did not stop the leader: \(first.lines)")
            return
        }
        let signals = [SIGILL: "SIGILL", SIGTRAP: "SIGTRAP", SIGSEGV: "SIGSEGV"]
        #expect((reason == "stack overflow" ? [SIGSEGV] : [SIGILL, SIGTRAP]).contains(first.process.terminationStatus), "\(first.process.terminationStatus)")
        let signal = signals[first.process.terminationStatus] ?? "signal \(first.process.terminationStatus)"
        // Before it died, its courier told the standby which request it was running.
        let told = second.waitForLine { $0.contains("leader-crashed") || $0.contains("died of") }
        #expect(told?.contains(#"the leader of epoch 1 died of \#(signal) while running request "poison#1" (op "ledger.trap"): should this node lead, it answers that request rejected(crashed-leader) and does not run it"#) == true, "\(second.lines)")

        // The standby takes the lead and quarantines the request before it serves anything.
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("node n2 leads cluster bank in epoch 2 (minted in etcd)") } != nil,
            "\(second.lines)")
        let quarantine = second.waitForLine { $0.contains("quarantined request") }
        #expect(quarantine?.contains(#"quarantined request "poison#1" (op "ledger.trap"): the previous leader process died of \#(signal) while running it"#) == true,
            "\(second.lines)")
        // The client's retry is answered rejected, and the new leader lives on and serves.
        guard case .reply(let reply)? = try RawPeer(endpoint: "tcp://127.0.0.1:\(n2.requests)").exchange([trap]) else {
            Issue.record("no reply to the retry at the new leader")
            return
        }
        #expect(reply.outcome == .rejected(code: "crashed-leader", detail: "the leader stopped while running this request (op `ledger.trap`); it is not run again"))
        #expect(second.process.isRunning, "the retry did not stop the new leader")
        #expect(try Self.call(n2, 2).hasPrefix("applied revision "), "the new leader serves")
    }

    @Test func `a standby frozen past the heartbeat timeout is dropped, refused when it acknowledges again, and back in step after its hello`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let nodes = ["n1", "n2"].map { HALeaderTests.Node(name: $0) }
        defer { for node in nodes { node.folder.cleanUp() } }
        let (n1, n2) = (nodes[0], nodes[1])
        let first = try CogdProcess(n1.arguments(etcd) + ["--sync", "one", "--heartbeat-timeout", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--sync", "one"])
        defer { second.stop() }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))

        // Frozen past the leader's heartbeat timeout (its connection stays): dropped for silence.
        kill(second.process.processIdentifier, SIGSTOP)
        #expect(first.waitForLine(timeout: .seconds(30)) { $0.contains("standby n2 dropped: silent for more than 1.0 s") } != nil, "\(first.lines)")
        kill(second.process.processIdentifier, SIGCONT)
        // Its next acknowledgement is refused, so it says hello again and is welcomed back; replies flow again.
        #expect(
            second.waitForLine(timeout: .seconds(30)) { $0.contains("this leader does not keep standby n2 in step (it was dropped)") } != nil,
            "\(second.lines)")
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("in step with the leader of epoch 1 at revision 1") } != nil, "\(second.lines)")
        #expect(try Self.call(n1, 2).hasPrefix("applied revision 2"))
        #expect(try etcd.get("/cogd/bank/sync") == "1 n1 n2")
    }

    @Test func `a worker that lists every node follows the leader: a standby's not-leader, then a failover`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let first = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1", "--heartbeat-timeout", "2"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1", "--heartbeat-timeout", "2"])
        defer { second.stop() }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")

        // The standby is listed first: its not-leader sends the worker to n1, which syncs it.
        let nodes = "tcp://127.0.0.1:\(n2.requests),tcp://127.0.0.1:\(n1.requests)"
        let worker = try CogdProcess(["worker", "--leader", nodes, "--name", "w1", "--rig", "ledger", "--heartbeat-timeout", "2"])
        defer { worker.stop() }
        #expect(worker.waitForLine {
            $0.contains("asking the node at tcp://127.0.0.1:\(n1.requests) (a standby said the node at "
                + "tcp://127.0.0.1:\(n1.requests) leads epoch 1)")
        } != nil, "\(worker.lines)")
        #expect(worker.waitForLine { $0.contains("synced at revision 0") } != nil, "\(worker.lines)")
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))

        // n1 is killed: n2 leads epoch 2; the worker, hearing nothing for its lease, asks n2 and syncs there.
        first.killHard()
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 1") } != nil, "\(second.lines)")
        #expect(worker.waitForLine(timeout: .seconds(30)) {
            $0.contains("asking the node at tcp://127.0.0.1:\(n2.requests)")
        } != nil, "\(worker.lines)")
        #expect(worker.waitForLine(timeout: .seconds(30)) { $0.contains("synced at revision 1") } != nil, "\(worker.lines)")
        let status = try runCogd(["status", "--leader", nodes, "--json"], timeout: .seconds(20))
        #expect(status.stdout.contains(#""epoch": 2"#) && status.stdout.contains(#""name": "w1""#), "\(status)")
    }

    @Test func `a tail that lists every node follows the new leader after a failover, printing each revision once, in order`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let options = ["--sync", "one", "--degrade-after", "1"]
        let first = try CogdProcess(n1.arguments(etcd) + options)
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + options)
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("in step with the leader of epoch 1 at revision 0") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")

        // The tail subscribes to both nodes' streams (the standby's publishes nothing) and catches up from the leader.
        let tail = try CogdProcess([
            "tail", "--connect", "tcp://127.0.0.1:\(n1.turns),tcp://127.0.0.1:\(n2.turns)",
            "--leader", "tcp://127.0.0.1:\(n1.requests),tcp://127.0.0.1:\(n2.requests)", "--from", "1", "--timeout", "10",
        ])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.contains("the leader's log has no turns yet; waiting for revision 1") } != nil, "\(tail.lines)")
        for sequence in 1...3 { #expect(try Self.call(n1, sequence).hasPrefix("applied revision \(sequence)")) }
        #expect(tail.waitForLine { $0.hasPrefix("#3 ") } != nil, "\(tail.lines)")

        // n1 is killed: n2 leads epoch 2, and the tail follows its stream.
        first.killHard()
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 3") } != nil, "\(second.lines)")
        for sequence in 4...5 { #expect(try Self.call(n2, sequence).hasPrefix("applied revision \(sequence)")) }
        #expect(tail.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("#5 ") } != nil, "\(tail.lines)")
        let following = "cogd tail: following the leader of epoch 2 (node tcp://127.0.0.1:\(n2.turns))"
        #expect(tail.waitForLine { $0 == following } != nil, "\(tail.lines)")

        // Stopped, it has printed every revision once, in order, and said the new leader once.
        tail.interrupt()
        #expect(waitUntil { !tail.process.isRunning })
        tail.stop()
        #expect(tail.process.terminationStatus == 130, "\(tail.lines)")
        let revisions = tail.lines.compactMap { line in line.hasPrefix("#") ? Int(line.dropFirst().prefix { $0 != " " }) : nil }
        #expect(revisions == [1, 2, 3, 4, 5], "\(tail.lines)")
        #expect(tail.lines.filter { $0 == following }.count == 1, "\(tail.lines)")
    }

    @Test func `a worker a standby sends back to a node it left for silence only probes it, then follows the new leader`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        // A 6 s lease: after n1 dies, n2 names it as the leader for seconds longer than the worker's lease.
        func arguments(_ node: HALeaderTests.Node) -> [String] {
            node.arguments(etcd, leaseTTL: 6) + ["--degrade-after", "1", "--heartbeat-timeout", "2"]
        }
        let first = try CogdProcess(arguments(n1))
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(arguments(n2))
        defer { second.stop() }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        let one = "tcp://127.0.0.1:\(n1.requests)"
        let worker = try CogdProcess(["worker", "--leader", "\(one),tcp://127.0.0.1:\(n2.requests)", "--name", "w1", "--rig", "ledger", "--heartbeat-timeout", "2"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("synced at revision 0") } != nil, "\(worker.lines)")
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))

        // n1 dies holding its lease: the worker leaves it for silence, n2 sends it back, and it only probes n1.
        first.killHard()
        #expect(worker.waitForLine(timeout: .seconds(30)) {
            $0.contains("asking the node at \(one) (a standby said the node at \(one) leads epoch 1); it was silent when last asked, so it is given 1 s to answer")
        } != nil, "\(worker.lines)")
        // Once n1's lease ends, n2 leads epoch 2 and the worker syncs there.
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("node n2 leads cluster bank in epoch 2") } != nil, "\(second.lines)")
        #expect(worker.waitForLine(timeout: .seconds(30)) { $0.contains("synced at revision 1") } != nil, "\(worker.lines)")
        let status = try runCogd(["status", "--leader", "tcp://127.0.0.1:\(n2.requests)", "--json"], timeout: .seconds(20))
        #expect(status.stdout.contains(#""epoch": 2"#) && status.stdout.contains(#""name": "w1""#), "\(status)")
    }

    @Test func `under CURVE a node follows the log with its standby key, another key may not, and a client is sent on`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let keys = TemporaryFolder()
        defer { keys.cleanUp() }
        let folder = keys.path + "/keys"
        try FileManager.default.createDirectory(atPath: keys.path, withIntermediateDirectories: true)
        // One leader key for the cluster; each node's standby key; a worker and a client.
        let leader = try CurveKeyPair.generate()
        _ = try leader.write(name: "leader", to: folder)
        var pairs: [String: CurveKeyPair] = [:]
        for name in ["n1", "n2", "w1", "ops"] {
            pairs[name] = try CurveKeyPair.generate()
            _ = try pairs[name]!.write(name: name, to: folder)
        }
        let peers = keys.path + "/peers"
        try """
            \(pairs["w1"]!.publicKey) worker w1
            \(pairs["ops"]!.publicKey) client ops ledger.open
            \(pairs["n1"]!.publicKey) standby n1
            \(pairs["n2"]!.publicKey) standby n2

            """.write(toFile: peers, atomically: true, encoding: .utf8)
        let n1 = HALeaderTests.Node(name: "n1")
        let n2 = HALeaderTests.Node(name: "n2")
        defer {
            n1.folder.cleanUp()
            n2.folder.cleanUp()
        }
        func curve(_ node: String) -> [String] {
            ["--curve-secret", folder + "/leader.key", "--peers", peers, "--standby-key", folder + "/\(node).key"]
        }
        // Without its standby key a node of a CURVE cluster is refused at start.
        let missing = try runCogd(n1.arguments(etcd) + ["--curve-secret", folder + "/leader.key", "--peers", peers])
        #expect(missing.status == 64 && missing.stderr.contains("--ha with --curve-secret needs --standby-key FILE"), "\(missing)")

        let first = try CogdProcess(n1.arguments(etcd) + curve("n1"))
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + curve("n2"))
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("in step with the leader of epoch 1") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")

        // A worker key may not follow the log, nor may n2's key as another node.
        let endpoint = "tcp://127.0.0.1:\(n1.requests)"
        let worker = try RawPeer(endpoint: endpoint, keys: CurveClientKeys(pair: pairs["w1"]!, leaderKey: leader.publicKey))
        guard case .error(let refused)? = try worker.exchange(.standbyHello(node: "n2", logID: nil, epoch: 0, revision: 0, stateDigest: nil, lastCommit: nil))
        else {
            Issue.record("no refusal")
            return
        }
        #expect(refused.code == "role-forbids" && refused.message.hasSuffix("may not follow the log as a standby: only a standby key may"))
        let impostor = try RawPeer(endpoint: endpoint, keys: CurveClientKeys(pair: pairs["n2"]!, leaderKey: leader.publicKey))
        guard case .error(let named)? = try impostor.exchange(.shipAck(node: "n3", sequence: 1)) else {
            Issue.record("no refusal")
            return
        }
        #expect(named.code == "not-your-name" && named.message.hasSuffix("may act only as n2, not as n3"), "\(named)")

        // The client asks the standby first: its not-leader (under CURVE, to a listed key) sends it to n1.
        let call = try runCogd([
            "call", "--leader", "tcp://127.0.0.1:\(n2.requests),\(endpoint)", "--timeout", "10", "--key", folder + "/ops.key",
            "--leader-key", folder + "/leader.pub", "ledger.open", #"{"account": "alice", "balance": 5}"#,
        ], timeout: .seconds(30))
        #expect(call.stdout.hasPrefix("applied revision 1"), "\(call)")
    }

    @Test func `a standby that returns behind on the leader's log gets the commits it lacks, not a copy, and can take over with them`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let first = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1"])
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))

        // n2 is killed: n1 degrades after a second and answers two more calls alone.
        second.killHard()
        second.stop()
        #expect(try Self.call(n1, 2).hasPrefix("applied revision 2"))
        #expect(try Self.call(n1, 3).hasPrefix("applied revision 3"))
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1" }, "\(first.lines)")

        // n2 returns at revision 1 of n1's log: it is sent the commits after it, and named again.
        let again = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1"])
        defer { again.stop() }
        #expect(first.waitForLine { $0.contains("standby n2 is at revision 1 of this log: sending it the") } != nil, "\(first.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(again.lines)")
        #expect(!again.lines.contains { $0.contains("receiving its copy") }, "no copy: \(again.lines)")
        #expect(try Self.call(n1, 4).hasPrefix("applied revision 4"))

        // What it was sent is the log: it takes over at revision 4 and answers a retry of call 3 from it.
        first.killHard()
        #expect(again.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 4") } != nil, "\(again.lines)")
        #expect(try Self.call(n2, 3).hasPrefix("answered from an earlier request: applied at revision 3 (request teller#3)"))

        // n2 serves alone (degraded after a second); n1 returns at revision 4, behind n2's own commit. n2 catches it up
        // from the commits it applied as a standby and the one it made since, not with a copy.
        #expect(try Self.call(n2, 5).hasPrefix("applied revision 5"))
        let back = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1"])
        defer { back.stop() }
        #expect(again.waitForLine { $0.contains("standby n1 is at revision 4 of this log: sending it the") } != nil,
            "\(again.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "2 n2 n1" }, "\(back.lines)")
        #expect(!back.lines.contains { $0.contains("receiving its copy") }, "no copy: \(back.lines)")
        #expect(try Self.call(n2, 6).hasPrefix("applied revision 6"))
    }

    /// n1, a lab leader whose freeze cue (`COGD_LAB_FREEZE_UNSHIPPED`)
    /// watches a trigger file of its own, then n2; started, n1 leads epoch 1
    /// with n2 named its synchronous standby. `end()` stops both and removes
    /// the file.
    final class FreezeCued {
        let trigger = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-freeze-\(UUID().uuidString)").path
        let first: CogdProcess
        let second: CogdProcess

        init(_ etcd: TestEtcd, _ n1: HALeaderTests.Node, _ n2: HALeaderTests.Node) throws {
            first = try CogdProcess(
                executable: cogdLabExecutable(), n1.arguments(etcd) + ["--sync", "one"], environment: ["COGD_LAB_FREEZE_UNSHIPPED": trigger])
            #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
            do {
                second = try CogdProcess(executable: cogdLabExecutable(), n2.arguments(etcd) + ["--sync", "one"])
            } catch {
                first.stop()
                throw error
            }
            #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        }

        /// Arms the cue for n1's next commit: the trigger file, holding `content` (what the lab's cue reads).
        func arm(_ content: String = "") -> Bool {
            FileManager.default.createFile(atPath: trigger, contents: Data(content.utf8))
        }

        func end() {
            first.stop()
            second.stop()
            try? FileManager.default.removeItem(atPath: trigger)
        }
    }

    @Test func `a leader frozen past its lease holding a commit no standby received takes it back, then catches up with the next leader instead of a copy`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        // The lab's leader: with the trigger file present, it keeps its next commit from the standby, commits it, and freezes.
        let cued = try FreezeCued(etcd, n1, n2)
        defer { cued.end() }
        let (first, second) = (cued.first, cued.second)
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))
        #expect(try Self.call(n1, 2).hasPrefix("applied revision 2"))

        // Revision 3 is committed on n1 alone, and n1 freezes with its reply held.
        #expect(cued.arm())
        let unanswered = Thread.detachNewThreadResult { try? Self.call(n1, 3) }
        #expect(first.waitForLine { $0.contains("committed the commit from revision 3, which no standby received") } != nil, "\(first.lines)")
        // n2 takes the lead past n1's lease, at revision 2.
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 2") } != nil, "\(second.lines)")
        first.resume()
        let takenBack = first.waitForLine { $0.contains("took back its last commit") }
        #expect(takenBack?.contains("took back its last commit (revision 3), which released nothing (no standby's acknowledgement of it had come). The log ends at revision 2 again") == true,
            "\(first.lines)")
        #expect(waitUntil(timeout: .seconds(15)) { !first.process.isRunning } && first.process.terminationStatus == 1, "\(first.lines)")
        let back = try TurnStore(directory: n1.folder.path, mode: .reader)
        #expect(back.lastRevision == 2)
        back.close()

        // n1 again, now a standby: n2 sends it the commits after revision 2 (none yet), not a copy, and names it.
        let again = try CogdProcess(executable: cogdLabExecutable(), n1.arguments(etcd) + ["--sync", "one"])
        defer { again.stop() }
        #expect(again.waitForLine { $0.contains("in step with the leader of epoch 2") } != nil, "\(again.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "2 n2 n1" }, "\(second.lines)")
        #expect(!second.lines.contains { $0.contains("sending it a copy") }, "no copy: \(second.lines)")
        #expect(!again.lines.contains { $0.contains("receiving its copy") }, "no copy: \(again.lines)")
        // The request n1 took back is applied once, by n2, at revision 3 of epoch 2; n1 holds the same log.
        let retried = try Self.call(n2, 3)
        #expect(retried.hasPrefix("applied revision 3") || retried.contains("applied at revision 3 (request teller#3)"), "\(retried)")
        #expect(try Self.call(n2, 4).hasPrefix("applied revision 4"))
        again.stop()
        let follower = try TurnStore(directory: n1.folder.path, mode: .reader)
        defer { follower.close() }
        #expect(try follower.records(from: 1).map(\.epoch) == [1, 1, 2, 2], "n1 holds n2's log")
        _ = unanswered.wait()
    }

    @Test func `a leader frozen past its lease whose standby acknowledged its last commit keeps that commit as it steps down`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        // The lab's leader: with `shipped` in the trigger file, it ships its next commit as usual and freezes once it is committed.
        let cued = try FreezeCued(etcd, n1, n2)
        defer { cued.end() }
        let (first, second) = (cued.first, cued.second)
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))
        #expect(try Self.call(n1, 2).hasPrefix("applied revision 2"))

        // Revision 3 reaches n2, which acknowledges it; n1 freezes before it can release its reply.
        #expect(cued.arm("shipped"))
        let unanswered = Thread.detachNewThreadResult { try? Self.call(n1, 3) }
        #expect(first.waitForLine { $0.contains("committed the commit from revision 3, shipped as usual") } != nil, "\(first.lines)")
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 3") } != nil, "\(second.lines)")
        first.resume()
        #expect(waitUntil(timeout: .seconds(15)) { !first.process.isRunning } && first.process.terminationStatus == 1, "\(first.lines)")
        // Stepping down, n1 reads n2's acknowledgement (in its loop, or listening for it): the commit is in n2's log, so it stays.
        #expect(!first.lines.contains { $0.contains("took back") || $0.contains("not-taken-back") }, "\(first.lines)")
        if let kept = first.lines.first(where: { $0.contains("kept its last commit") }) {
            #expect(kept.contains("kept its last commit (revision 3): it released nothing, but every standby that may take the lead acknowledged it"), "\(kept)")
        }
        let stepped = try TurnStore(directory: n1.folder.path, mode: .reader)
        #expect(stepped.lastRevision == 3 && stepped.lastCommit == CommitName(epoch: 1, number: 3))
        stepped.close()

        // n1 again, a standby: at n2's log, which went on from that commit; no copy.
        let again = try CogdProcess(executable: cogdLabExecutable(), n1.arguments(etcd) + ["--sync", "one"])
        defer { again.stop() }
        #expect(again.waitForLine { $0.contains("in step with the leader of epoch 2") } != nil, "\(again.lines)")
        #expect(!again.lines.contains { $0.contains("receiving its copy") }, "no copy: \(again.lines)")
        #expect(try Self.call(n2, 3).contains("applied at revision 3 (request teller#3)"))
        _ = unanswered.wait()
    }

    @Test func `an old leader holding a deposed tail of answers without a record, at the next leader's last record, is sent a copy: its answers are not kept`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let teller2 = RequestID(worker: "teller", sequence: 2)
        let cued = try FreezeCued(etcd, n1, n2)
        defer { cued.end() }
        let (first, second) = (cued.first, cued.second)
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))

        // Two answers without a record (a1 is open already), each a commit kept from n2; n1 freezes after the second.
        #expect(cued.arm("2"))
        let unanswered = Thread.detachNewThreadResult { try? Self.openA1(n1, 2) }
        #expect(first.waitForLine { $0.contains("the commit from revision 2 is kept from the standbys") } != nil, "\(first.lines)")
        let alsoUnanswered = Thread.detachNewThreadResult { try? Self.openA1(n1, 3) }
        #expect(first.waitForLine { $0.contains("committed the commit from revision 2, which no standby received") } != nil, "\(first.lines)")
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 1") } != nil, "\(second.lines)")
        first.resume()
        // It takes back the second; the first stays, a deposed tail holding request 2's answer at n2's last record.
        let takenBack = first.waitForLine { $0.contains("took back its last commit (answers without a record after revision 1)") }
        #expect(
            takenBack?.contains("The log ends at revision 1 again, but the 1 commit before it released nothing either: "
                + "if the next leader's log lacks them, it sends this node a whole copy") == true, "\(first.lines)")
        #expect(waitUntil(timeout: .seconds(15)) { !first.process.isRunning }, "\(first.lines)")
        let back = try TurnStore(directory: n1.folder.path, mode: .reader)
        #expect(back.lastRevision == 1)
        #expect(try back.dedupReply(for: teller2) != nil, "the deposed tail")
        let deposed = back.lastCommit
        back.close()
        #expect(deposed?.epoch == 1)

        // n1 again: same record, same state digest, but its last commit is not in n2's log: a copy.
        let again = try CogdProcess(executable: cogdLabExecutable(), n1.arguments(etcd) + ["--sync", "one"])
        defer { again.stop() }
        let copy = second.waitForLine { $0.contains("standby n1 is not in step") }
        #expect(copy?.contains("(its last commit (\(deposed.map(String.init(describing:)) ?? "?")) is not in this log: a deposed leader's tail)") == true, "\(second.lines)")
        #expect(again.waitForLine { $0.contains("in step with the leader of epoch 2") } != nil, "\(again.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "2 n2 n1" }, "\(second.lines)")
        let copied = try TurnStore(directory: n1.folder.path, mode: .reader)
        #expect(try copied.dedupReply(for: teller2) == nil, "the deposed answer is gone with the tail")
        copied.close()
        // Request 2 was never answered: n2 runs it, and n1's copy holds n2's answer, not its own.
        #expect(try Self.openA1(n2, 2).hasPrefix("unchanged: the op wrote nothing"))
        #expect(try Self.call(n2, 4).hasPrefix("applied revision 2"))
        again.stop()
        let follower = try TurnStore(directory: n1.folder.path, mode: .reader)
        defer { follower.close() }
        #expect(try follower.records(from: 1).map(\.epoch) == [1, 2], "n1 holds n2's log")
        #expect(follower.lastCommit?.epoch == 2)
        _ = (unanswered.wait(), alsoUnanswered.wait())
    }

    @Test func `after every node stopped, a standby at the commit the new leader process started from catches up instead of receiving a copy`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let first = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1"])
        defer { second.stop() }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))

        // Both processes die; n1, the last leader, starts again first, as a new process: it keeps no commit from before.
        second.killHard()
        first.killHard()
        second.stop()
        first.stop()
        let leader = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1"])
        defer { leader.stop() }
        #expect(leader.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 1") } != nil, "\(leader.lines)")
        #expect(try Self.call(n1, 2).hasPrefix("applied revision 2"))
        #expect(try Self.call(n1, 3).hasPrefix("applied revision 3"))

        // n2, at n1's last commit before the outage (its first), is sent the commits made since: no copy.
        let standby = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1"])
        defer { standby.stop() }
        let caughtUp = leader.waitForLine { $0.contains("standby n2 is at revision 1 of this log: sending it the") }
        #expect(caughtUp?.contains("commits after it (its last: epoch 1, commit 1)") == true, "\(leader.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "2 n1 n2" }, "\(standby.lines)")
        #expect(!leader.lines.contains { $0.contains("sending it a copy") }, "no copy: \(leader.lines)")
        #expect(try Self.call(n1, 4).hasPrefix("applied revision 4"))
        standby.stop()
        let copy = try TurnStore(directory: n2.folder.path, mode: .reader)
        defer { copy.close() }
        #expect(try copy.records(from: 1).map(\.epoch) == [1, 2, 2, 2])
    }

    @Test func `a leader frozen past its lease after its standby acknowledged all it shipped commits nothing as it steps down, and is in step with the next leader`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        let first = try CogdProcess(n1.arguments(etcd) + ["--sync", "one"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--sync", "one"])
        defer { second.stop() }
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        // Answered, so n2 acknowledged both commits; their replies are not stored in dedup yet (turnlog.md §2).
        #expect(try Self.call(n1, 1).hasPrefix("applied revision 1"))
        #expect(try Self.call(n1, 2).hasPrefix("applied revision 2"))
        let before = try TurnStore(directory: n1.folder.path, mode: .reader)
        let lastCommit = before.lastCommit
        before.close()
        #expect(lastCommit == CommitName(epoch: 1, number: 2))

        // n1 freezes; n2 takes the lead past its lease; n1, resumed, steps down.
        first.pause()
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 2") } != nil, "\(second.lines)")
        first.resume()
        #expect(waitUntil(timeout: .seconds(15)) { !first.process.isRunning } && first.process.terminationStatus == 1, "\(first.lines)")
        #expect(!first.lines.contains { $0.contains("took back") || $0.contains("kept its last commit") }, "\(first.lines)")
        // Its folder ends at the commit n2 acknowledged: no commit after it (one storing the replies would be a tail n2 lacks).
        let stepped = try TurnStore(directory: n1.folder.path, mode: .reader)
        #expect(stepped.lastCommit == lastCommit && stepped.lastRevision == 2)
        stepped.close()

        // n1 again, a standby: in step with n2 at once, no copy.
        let again = try CogdProcess(n1.arguments(etcd) + ["--sync", "one"])
        defer { again.stop() }
        #expect(again.waitForLine { $0.contains("in step with the leader of epoch 2") } != nil, "\(again.lines)")
        #expect(!again.lines.contains { $0.contains("receiving its copy") }, "no copy: \(again.lines)")
        // The answers n1 gave are n2's answers to their retries.
        #expect(try Self.call(n2, 2).contains("applied at revision 2 (request teller#2)"))
        #expect(try Self.call(n2, 3).hasPrefix("applied revision 3"))
    }

    /// Opens account a1 through `node` as request `teller#<sequence>`: an op that changes nothing once a1 is open.
    static func openA1(_ node: HALeaderTests.Node, _ sequence: Int) throws -> String {
        let result = try runCogd([
            "call", "--leader", "tcp://127.0.0.1:\(node.requests)", "--timeout", "10", "--request-id", "teller#\(sequence)", "ledger.open",
            #"{"account": "a1", "balance": 5}"#,
        ], timeout: .seconds(30))
        return result.stdout + result.stderr
    }

    @Test func `a standby back at the leader's last record gets the answers committed without a record since, and answers their retries as the old leader would`() throws {
        let cluster = try TwoNodes()
        defer { cluster.end() }
        guard try cluster.etcd.start() else { return }
        let (etcd, n1, n2) = (cluster.etcd, cluster.n1, cluster.n2)
        /// Opens account a1 through `node` as request `teller#<sequence>`: an op that changes nothing once a1 is open.
        func openA1(_ node: HALeaderTests.Node, _ sequence: Int) throws -> String {
            let result = try runCogd([
                "call", "--leader", "tcp://127.0.0.1:\(node.requests)", "--timeout", "10", "--request-id", "teller#\(sequence)", "ledger.open",
                #"{"account": "a1", "balance": 5}"#,
            ], timeout: .seconds(30))
            return result.stdout + result.stderr
        }
        let first = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1"])
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        #expect(try openA1(n1, 1).hasPrefix("applied revision 1"))

        // n2 is killed; n1, alone, answers a request that writes nothing: a commit with its answer and no record.
        second.killHard()
        second.stop()
        #expect(try openA1(n1, 2).hasPrefix("unchanged: the op wrote nothing"))
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1" }, "\(first.lines)")

        // n2 returns at revision 1, n1's last record: it is sent the commit made since, not welcomed as it is.
        let again = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1"])
        defer { again.stop() }
        #expect(first.waitForLine { $0.contains("standby n2 is at revision 1 of this log: sending it the 1 commits after it") } != nil, "\(first.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(again.lines)")
        #expect(try Self.call(n1, 3).hasPrefix("applied revision 2"))

        // n2 takes over and answers a retry of request 2 from its copy, as n1 would have: nothing runs again.
        first.killHard()
        #expect(again.waitForLine(timeout: .seconds(30)) { $0.contains("epoch 2, revision 2") } != nil, "\(again.lines)")
        #expect(try openA1(n2, 2).hasPrefix("answered from an earlier request: unchanged: the op wrote nothing"))
    }
}

/// A test's lab etcd and two nodes, n1 and n2 (bank cluster, free ports):
/// `end()` removes the nodes' folders, then stops etcd.
final class TwoNodes {
    let etcd: TestEtcd
    let n1 = HALeaderTests.Node(name: "n1")
    let n2 = HALeaderTests.Node(name: "n2")

    init() throws {
        etcd = try TestEtcd()
    }

    func end() {
        n1.folder.cleanUp()
        n2.folder.cleanUp()
        etcd.stop()
    }
}
