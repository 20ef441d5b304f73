import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

@testable import CogdCommandLine

@Suite("cogd leader and workers (real processes, loopback)", .serialized, .timeLimit(.minutes(10)))
struct ClusterTests {
    @Test func `replicas converge to the leader's state and a late worker catches up`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let first = try ports.startWorker("w1")
        defer { first.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 100}"#).hasPrefix("applied revision 1"))
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 50}"#).hasPrefix("applied revision 2"))
        #expect(try ports.call("ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 30}"#).hasPrefix("applied revision 3"))
        #expect(first.waitForLine { $0.hasSuffix(" cogd worker w1: applied 3") } != nil)
        #expect(first.lines.contains { $0.hasSuffix(" cogd worker w1: ledger total 150") })
        let late = try ports.startWorker("late")
        defer { late.stop() }
        #expect(late.lines.contains { $0.contains("cogd worker late: synced at revision 3") })
        #expect(late.waitForLine { $0.hasSuffix(": ledger total 150") } != nil)
        #expect(try ports.call("ledger.transfer", #"{"from": "bob", "to": "alice", "amount": 5}"#).hasPrefix("applied revision 4"))
        #expect(first.waitForLine { $0.hasSuffix(" cogd worker w1: applied 4") } != nil)
        #expect(late.waitForLine { $0.hasSuffix(" cogd worker late: applied 4") } != nil)
        let status = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        #expect(object?["revision"] as? Int == 4)
        let workers = object?["workers"] as? [[String: Any]] ?? []
        #expect(workers.count == 2)
        // Four calls one after another: four commits of one turn each.
        let commits = object?["commits"] as? [String: Any] ?? [:]
        #expect(commits["count"] as? Int == 4 && commits["window"] as? Int == 4, "\(status.stdout)")
        #expect(commits["turnsPerCommit"] as? Double == 1, "\(status.stdout)")
        let p50 = commits["p50Micros"] as? Int ?? 0
        #expect(p50 > 0 && (commits["p99Micros"] as? Int ?? 0) >= p50, "\(status.stdout)")
        // Each heartbeat carries the replica's state digest; the leader finds it equal to the log's at that revision.
        var shown = ""
        #expect(try waitUntil {
            shown = try runCogd(["status", "--leader", ports.requests]).stdout
            return shown.components(separatedBy: ", digest agrees").count == 3
        }, "\(shown)")
        let json = try runCogd(["status", "--leader", ports.requests, "--json"]).stdout
        let digests = ((try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["workers"] as? [[String: Any]])?.map { $0["digest"] as? String }
        #expect(digests == ["agrees", "agrees"], "\(json)")
    }

    @Test func `workers follow and sync turns and state larger than a request may be`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let first = try ports.startWorker("w1")
        defer { first.stop() }
        // An account name of 600 KB: the request fits the 1 MiB request limit,
        // but its turn (the accounts list and the balance key both hold the
        // name) and the state a snapshot carries do not.
        let big = String(repeating: "x", count: 600_000)
        let peer = try RawPeer(endpoint: ports.requests)
        func open(_ account: String, _ sequence: UInt64) throws -> OpReply.Outcome? {
            try peer.replies(to: [openAccountFrame(account, balance: 7, worker: "big", sequence: sequence)]).first?.outcome
        }
        #expect(try open(big, 1) == .applied(revision: 1))
        #expect(try open("small", 2) == .applied(revision: 2))
        #expect(first.waitForLine { $0.hasSuffix(" cogd worker w1: applied 2") } != nil, "the live worker applied the big turn: \(first.lines)")
        #expect(first.lines.contains { $0.hasSuffix(" cogd worker w1: ledger total 14") })
        let late = try ports.startWorker("late")
        defer { late.stop() }
        #expect(late.lines.contains { $0.contains("cogd worker late: synced at revision 2") }, "\(late.lines)")
        #expect(late.waitForLine { $0.hasSuffix(": ledger total 14") } != nil)
    }

    @Test func `a late worker syncs a state table larger than a snapshot part, in parts`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        // Seven accounts with names of 600 KB: their balances alone hold more
        // than one part (4 MiB), and the accounts list goes in a part of its own.
        let peer = try RawPeer(endpoint: ports.requests)
        let frames = try (1...7).map { index in
            try openAccountFrame(String(repeating: "n", count: 600_000) + "\(index)", balance: 7, worker: "big", sequence: UInt64(index))
        }
        #expect(try peer.replies(to: frames, round: 1).map(\.outcome) == (1...7).map { .applied(revision: $0) })
        let late = try ports.startWorker("late")
        defer { late.stop() }
        let synced = late.lines.first { $0.contains("synced at revision") } ?? ""
        #expect(
            synced.range(of: #"cogd worker late: synced at revision 7, epoch 1 \(snapshot in [2-9] parts\)$"#, options: .regularExpression) != nil,
            "\(late.lines)")
        #expect(late.waitForLine { $0.hasSuffix(": ledger total 49") } != nil)
    }

    @Test func `a snapshot sent in parts goes out between batches: requests are answered while it streams`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, options: ["--snapshot-part-bytes", "1024"])
        defer { leader.stop() }
        let accounts = 1_500
        let filler = try RawPeer(endpoint: ports.requests)
        let frames = try (1...accounts).map { try openAccountFrame("a\($0)", balance: 1, worker: "filler", sequence: UInt64($0)) }
        #expect(try filler.replies(to: frames, round: 500).count == accounts)
        // The request for a snapshot in parts and an op right behind it.
        let peer = try RawPeer(endpoint: ports.requests)
        guard case .welcome? = try peer.exchange(.hello(worker: "streamed", lastRevision: 0)) else {
            Issue.record("no welcome")
            return
        }
        try peer.send([WireMessage.snapshotRequest(inParts: true).encoded()])
        try peer.send([try openAccountFrame("late", balance: 1, worker: "streamed", sequence: 1)])
        var parts: [(number: UInt64, revision: UInt64, entries: [SnapshotEntry], more: Bool)] = []
        var replyAfterParts: Int?
        var reply: OpReply.Outcome?
        while parts.last?.more ?? true, let message = try peer.next(within: .seconds(20)) {
            switch message {
            case .snapshot(_, let revision, let entries, let part, let more, _): parts.append((part, revision, entries, more))
            case .reply(let answer):
                reply = answer.outcome
                replyAfterParts = parts.count
            default: Issue.record("unexpected \(message.typeName)")
            }
        }
        if reply == nil, case .reply(let answer)? = try peer.next(within: .seconds(10)) { reply = answer.outcome }
        #expect(parts.count > 50, "\(parts.count) parts")
        #expect(parts.map(\.number) == (0..<UInt64(parts.count)).map { $0 })
        #expect(Set(parts.map(\.revision)) == [UInt64(accounts)], "one revision for every part")
        #expect(parts.dropLast().allSatisfy(\.more) && parts.last?.more == false)
        // Before: every part went out in the batch that asked, the reply after them all.
        #expect(replyAfterParts != nil && replyAfterParts! < parts.count, "the reply came after \(String(describing: replyAfterParts)) of \(parts.count) parts")
        #expect(reply == .applied(revision: UInt64(accounts) + 1))
        let balances = parts.flatMap(\.entries).filter { $0.name == "ledger.balance" }
        #expect(balances.count == accounts, "the account opened meanwhile is not in the snapshot")
        #expect(parts.flatMap(\.entries).count == accounts + 1)
    }

    @Test func `a worker started before its leader says it gets no answer, then syncs when the leader comes`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let worker = try CogdProcess(["worker", "--leader", ports.requests, "--name", "early", "--rig", "ledger"])
        defer { worker.stop() }
        let silence = worker.waitForLine(timeout: .seconds(15)) { $0.contains("no answer from the leader") }
        #expect(
            silence?.contains("cogd worker early: no answer from the leader at \(ports.requests) for 3 s; still trying") == true,
            "\(worker.lines)")
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker early: the leader answers again") } != nil)
        #expect(worker.waitForLine { $0.contains("cogd worker early: synced at revision 0") } != nil)
    }

    @Test func `tail --connect follows the live turn stream`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let tail = try CogdProcess(["tail", "--connect", ports.turns, "--json"])
        defer { tail.stop() }
        // A subscriber joins asynchronously (ZeroMQ gives no signal), so turns
        // keep coming until one reaches it; bounded in count and time.
        var seen: String?
        for account in 0..<40 where seen == nil {
            _ = try ports.call("ledger.open", #"{"account": "a\#(account)", "balance": 1}"#)
            seen = tail.waitForLine(timeout: .milliseconds(250)) { $0.contains("\"name\": \"ledger.open\"") }
        }
        let line = try #require(seen)
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect((object?["revision"] as? Int ?? 0) >= 1)
        #expect(object?["origin"] != nil)
    }

    @Test func `a retried request is applied once, also after a leader restart`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        do {
            let leader = try ports.startLeader(data: folder.path)
            defer { leader.stop() }
            _ = try ports.call("ledger.open", #"{"account": "a", "balance": 10}"#)
            _ = try ports.call("ledger.open", #"{"account": "b", "balance": 0}"#)
            let first = try ports.call("ledger.transfer", #"{"from": "a", "to": "b", "amount": 4}"#, requestID: "client#7")
            #expect(first == "applied revision 3 (request client#7)")
            let retry = try ports.call("ledger.transfer", #"{"from": "a", "to": "b", "amount": 4}"#, requestID: "client#7")
            #expect(retry == "answered from an earlier request: applied at revision 3 (request client#7)")
            leader.killHard()
        }
        let restarted = try ports.startLeader(data: folder.path)
        defer { restarted.stop() }
        #expect(restarted.lines.first?.contains("epoch 2, revision 3") == true)
        let afterRestart = try ports.call("ledger.transfer", #"{"from": "a", "to": "b", "amount": 4}"#, requestID: "client#7")
        #expect(afterRestart == "answered from an earlier request: applied at revision 3 (request client#7)")
        // A peer saying hello in that name learns where its numbering must go on (from the dedup table).
        let welcome = try ClusterCommands.request(.hello(worker: "client", lastRevision: 0), leader: ports.requests, timeout: .seconds(10))
        guard case .welcome(epoch: 2, lastRevision: 3, turnsEndpoint: _, lastSequence: 7, group: nil)? = welcome else {
            Issue.record("expected a welcome at epoch 2, revision 3, last sequence 7; got \(String(describing: welcome))")
            return
        }
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(store.lastRevision == 3)
        #expect(try store.value(name: "ledger.balance", key: try CBOREncoder().encode("b")) == (try CBOREncoder().encode(4)))
        #expect(try store.verify().isSound)
    }

    @Test func `retries are answered after a kill whether their replies were indexed or only in their records`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let count = 1_300
        func open(_ sequence: Int) throws -> [UInt8] {
            try openAccountFrame("a\(sequence)", balance: 1, worker: "bulk", sequence: UInt64(sequence))
        }
        func exchange(_ frames: [[UInt8]]) throws -> [UInt64: OpReply.Outcome] {
            let replies = try RawPeer(endpoint: ports.requests).replies(to: frames)
            return Dictionary(replies.map { ($0.request.sequence, $0.outcome) }, uniquingKeysWith: { _, last in last })
        }
        do {
            let leader = try ports.startLeader(data: folder.path)
            defer { leader.stop() }
            let replies = try exchange(try (1...count).map(open))
            #expect(replies.count == count)
            #expect(replies[1] == .applied(revision: 1))
            #expect(replies[UInt64(count)] == .applied(revision: UInt64(count)))
            leader.killHard()
        }
        let store = try TurnStore(directory: folder.path, mode: .reader)
        // Indexed in batches of 1,024: the first batch's replies are in `dedup`,
        // the rest only in their records when the leader was killed.
        let unindexedFrom = try #require(store.unindexedFrom)
        #expect(unindexedFrom > 1_024 && unindexedFrom <= UInt64(count), "unindexed from \(unindexedFrom)")
        let stats = try runCogd(["log", "stats", "--data", folder.path, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
        #expect(object?["unindexedFrom"] as? Int == Int(unindexedFrom))
        #expect(try store.dedupReply(for: RequestID(worker: "bulk", sequence: 3)) != nil)
        #expect(try store.dedupReply(for: RequestID(worker: "bulk", sequence: UInt64(count))) == nil)
        let restarted = try ports.startLeader(data: folder.path)
        defer { restarted.stop() }
        // Opening, the leader rebuilt the missing replies from the records and indexed them.
        let reopened = try TurnStore(directory: folder.path, mode: .reader)
        #expect(reopened.unindexedFrom == nil)
        #expect(try reopened.dedupReply(for: RequestID(worker: "bulk", sequence: UInt64(count))) != nil)
        let retries = try exchange([try open(3), try open(count)])
        #expect(retries[3] == .applied(revision: 3))
        #expect(retries[UInt64(count)] == .applied(revision: UInt64(count)))
        let welcome = try ClusterCommands.request(.hello(worker: "bulk", lastRevision: 0), leader: ports.requests, timeout: .seconds(10))
        if case .welcome(_, _, _, let lastSequence, _)? = welcome {
            #expect(lastSequence == UInt64(count))
        } else {
            Issue.record("no welcome: \(String(describing: welcome))")
        }
        store.close()
        #expect(try TurnStore(directory: folder.path, mode: .reader).lastRevision == UInt64(count), "nothing applied twice")
    }

    @Test func `retries are still answered from dedup after many one-off requesters`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let peer = try RawPeer(endpoint: ports.requests)
        // More one-off names than the leader keeps in memory (each like a `cogd call`).
        let names = 10_050
        func request(_ index: Int) throws -> [UInt8] {
            try openAccountFrame("a", balance: 1, worker: "once-\(index)", sequence: 1)
        }
        func exchange(_ frames: [[UInt8]]) throws -> [String: OpReply.Outcome] {
            Dictionary(try peer.replies(to: frames, round: 500).map { ($0.request.worker, $0.outcome) }, uniquingKeysWith: { _, last in last })
        }
        var replies = try exchange((0..<names).map(request))
        #expect(replies.count == names)
        #expect(replies["once-0"] == .applied(revision: 1))
        #expect(replies["once-1"] == .unchanged)
        // Retries of the earliest requests, asked after the rest were committed.
        replies = try exchange([request(0), request(1)])
        #expect(replies["once-0"] == .applied(revision: 1))
        #expect(replies["once-1"] == .unchanged)
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(store.lastRevision == 1)
        // The applied request's reply was only in its record; a clean stop indexes it.
        #expect(store.unindexedFrom == 1)
        #expect(try store.dedupReply(for: RequestID(worker: "once-0", sequence: 1)) == nil)
        leader.stop()
        let stopped = try TurnStore(directory: folder.path, mode: .reader)
        #expect(stopped.unindexedFrom == nil)
        #expect(try stopped.dedupReply(for: RequestID(worker: "once-0", sequence: 1)) != nil)
    }

    @Test func `restarting the leader re-syncs the workers and loses no acknowledged turn`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path)
        let worker = try ports.startWorker("w1")
        defer { worker.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "a", "balance": 7}"#).hasPrefix("applied revision 1"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied 1") } != nil)
        leader.killHard()
        leader.stop()
        leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(worker.waitForLine(timeout: .seconds(30)) { $0.contains("cogd worker w1: synced at revision 1, epoch 2") } != nil)
        #expect(try ports.call("ledger.open", #"{"account": "b", "balance": 3}"#).hasPrefix("applied revision 2"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied 2") } != nil)
        #expect(worker.waitForLine { $0.hasSuffix(": ledger total 10") } != nil)
    }

    @Test func `malformed frames, wrong versions and unknown ops get error replies while serving continues`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let peer = try RawPeer(endpoint: ports.requests)
        func exchange(_ frames: [[UInt8]]) throws -> WireMessage? { try peer.exchange(frames) }
        /// What became of an op (nil: no reply).
        func outcome(_ request: OpRequest) throws -> OpReply.Outcome? {
            guard case .reply(let reply)? = try peer.exchange(.op(request)) else { return nil }
            return reply.outcome
        }
        guard case .error(let garbage)? = try exchange([[0xff, 0x13, 0x37]]) else {
            Issue.record("no error reply to garbage")
            return
        }
        #expect(garbage.code == "malformed")
        let future = try CBOREncoder().encode(["v": CBORValue.unsigned(9), "type": .text("hello")])
        guard case .error(let version)? = try exchange([future]) else {
            Issue.record("no error reply to a future version")
            return
        }
        #expect(version.code == "version")
        #expect(version.message == "protocol version 9 is not supported (this side speaks 1)")
        let oversize = [UInt8](repeating: 0, count: WireMessage.maximumSize + 1)
        guard case .error(let big)? = try exchange([oversize]) else {
            Issue.record("no error reply to an oversize message")
            return
        }
        #expect(big.code == "oversize")
        let unknown = OpRequest(request: RequestID(worker: "t", sequence: 1), op: "bank.rob", argument: [0xa0])
        #expect(try outcome(unknown) == .rejected(code: "unknown-op", detail: "no op named `bank.rob` is registered"))
        // A worker name too long to key the dedup table is refused, not stored.
        let longName = String(repeating: "w", count: 600)
        let named = OpRequest(
            request: RequestID(worker: longName, sequence: 1), op: "ledger.open",
            argument: try CBOREncoder().encode(["account": CBORValue.text("n"), "balance": .unsigned(1)]))
        #expect(try outcome(named) == .rejected(code: "bad-request", detail: "worker names are 1 to 255 bytes of UTF-8; this one has 600"))
        guard case .error(let hello)? = try exchange([WireMessage.hello(worker: longName, lastRevision: 0).encoded()]) else {
            Issue.record("no error reply to a hello with a 600-byte worker name")
            return
        }
        #expect(hello.code == "malformed")
        let nul = OpRequest(request: RequestID(worker: "a\u{0}b", sequence: 1), op: "ledger.open", argument: [0xa0])
        #expect(try outcome(nul) == .rejected(code: "bad-request", detail: "worker names hold no NUL character"))
        #expect(try ports.call("ledger.open", #"{"account": "still", "balance": 1}"#).hasPrefix("applied revision 1"))
        let status = try runCogd(["status", "--leader", ports.requests])
        #expect(status.stdout.contains("errors    bad-request 2, malformed 2, oversize 1, unknown-op 1, version 1"), "\(status.stdout)")
    }
}

@Suite("Scope instances across processes (leader authority)", .serialized, .timeLimit(.minutes(10)))
struct ScopeAuthorityTests {
    /// A raw DEALER speaking as worker `tester`.
    final class RawWorker {
        private let peer: RawPeer
        private var sequence: UInt64 = 0

        init(endpoint: String) throws {
            peer = try RawPeer(endpoint: endpoint, identity: "tester")
        }

        func exchange(_ message: WireMessage) throws -> WireMessage? { try peer.exchange(message) }

        func op(_ name: String, _ argument: some Encodable, instance: UInt64? = nil, as worker: String = "tester") throws -> OpReply.Outcome? {
            sequence += 1
            let request = OpRequest(
                request: RequestID(worker: worker, sequence: sequence), op: name,
                argument: try CBOREncoder().encode(argument), instance: instance)
            guard case .reply(let reply)? = try exchange(.op(request)) else { return nil }
            return reply.outcome
        }
    }

    private struct Opening: Encodable {
        var account: String
        var balance: Int
    }

    @Test func `the leader mints instances, records them in the turn, and rejects work from a retired instance`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try RawWorker(endpoint: ports.requests)
        _ = try worker.exchange(.hello(worker: "tester", lastRevision: 0))
        let spec = ScopeRegistration(worker: "tester", registration: 1, path: "Bank.account", source: "ledger.accounts", key: nil, form: .each)
        guard case .scopeRegistered(_, _, let revision, let initial)? = try worker.exchange(.scopeRegister(spec)) else {
            Issue.record("no registration reply")
            return
        }
        #expect(revision == 0)
        #expect(initial.isEmpty)

        #expect(try worker.op("ledger.open", Opening(account: "alice", balance: 0)) == .applied(revision: 1))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        let opened = try store.records(from: 1)[0].scopeEvents
        #expect(opened.map(\.kind) == [.open])
        #expect(opened.first?.identity == (try CBOREncoder().encode("alice")))
        let first = try #require(opened.first?.instance)

        // Work owned by the live instance is applied.
        #expect(try worker.op("ledger.open", Opening(account: "bob", balance: 5), instance: first) == .applied(revision: 2))
        // Closing alice retires her instance in the record of the closing turn.
        #expect(try worker.op("ledger.close", "alice") == .applied(revision: 3))
        #expect(try store.records(from: 3)[0].scopeEvents.map(\.kind) == [.retire])
        // A late request from the retired instance: rejected, no revision, body never run.
        guard case .rejected(let code, let detail)? = try worker.op("ledger.open", Opening(account: "carol", balance: 1), instance: first) else {
            Issue.record("a retired instance's op was not rejected")
            return
        }
        #expect(code == "retired-scope")
        #expect(detail.hasPrefix("scope instance \(first) is retired"))
        #expect(try store.records(from: 1).count == 3)
        // alice → gone → alice again across turns: a new, different instance.
        #expect(try worker.op("ledger.open", Opening(account: "alice", balance: 0)) == .applied(revision: 4))
        let reopened = try #require(try store.records(from: 4)[0].scopeEvents.first)
        #expect(reopened.kind == .open)
        #expect(reopened.instance != first)
        #expect(try worker.op("ledger.open", Opening(account: "dave", balance: 1), instance: reopened.instance) == .applied(revision: 5))
        #expect(try worker.op("ledger.open", Opening(account: "erin", balance: 1), instance: first).map { if case .rejected = $0 { true } else { false } } == true)
        // Another worker cannot use tester's live instance.
        guard case .rejected(_, let foreign)? = try worker.op("ledger.open", Opening(account: "frank", balance: 1), instance: reopened.instance, as: "intruder") else {
            Issue.record("another worker's use of the instance was not rejected")
            return
        }
        #expect(foreign.contains("not owned by intruder"))
        let open = try ports.openScopeInstances()
        #expect(open.contains(Int(reopened.instance)))
        #expect(!open.contains(Int(first)))
    }

    @Test func `a nested selector's instances retire with its parent's, and under a retired parent it selects nothing`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try RawWorker(endpoint: ports.requests)
        _ = try worker.exchange(.hello(worker: "tester", lastRevision: 0))
        let accounts = ScopeRegistration(worker: "tester", registration: 1, path: "Bank.desk", source: "ledger.accounts", key: nil, form: .each)
        _ = try worker.exchange(.scopeRegister(accounts))
        #expect(try worker.op("ledger.open", Opening(account: "alice", balance: 0)) == .applied(revision: 1))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        let alice = try #require(try store.records(from: 1)[0].scopeEvents.first?.instance)

        // Inside alice's desk: one child per account, living in alice's instance.
        var nested = ScopeRegistration(
            worker: "tester", registration: 2, path: "Bank.desk.peer", source: "ledger.accounts", key: nil, form: .each, parent: alice)
        guard case .scopeRegistered(_, _, _, let peers)? = try worker.exchange(.scopeRegister(nested)) else {
            Issue.record("no registration reply")
            return
        }
        #expect(peers.map(\.identity) == [try CBOREncoder().encode("alice")])
        #expect(try worker.op("ledger.open", Opening(account: "bob", balance: 5)) == .applied(revision: 2))
        let opened = try store.records(from: 2)[0].scopeEvents
        #expect(opened.map(\.kind) == [.open, .open])
        #expect(opened.map(\.scope) == ["Bank.desk", "Bank.desk.peer"])
        let bobDesk = opened[0].instance
        let bobPeer = opened[1].instance
        #expect(try worker.op("ledger.open", Opening(account: "carol", balance: 1), instance: bobPeer) == .applied(revision: 3))

        // Closing alice retires her desk and, in the same record, every peer
        // child inside it (bob is still an account), in opening order.
        #expect(try worker.op("ledger.close", "alice") == .applied(revision: 4))
        let closing = try store.records(from: 4)[0].scopeEvents
        #expect(closing.allSatisfy { $0.kind == .retire })
        #expect(closing.map(\.scope) == ["Bank.desk", "Bank.desk.peer", "Bank.desk.peer", "Bank.desk.peer"])
        #expect(closing.map(\.instance) == closing.map(\.instance).sorted())
        #expect(closing.map(\.instance).contains(bobPeer))
        #expect(!closing.map(\.instance).contains(bobDesk))
        guard case .rejected(let code, let detail)? = try worker.op("ledger.open", Opening(account: "dave", balance: 1), instance: bobPeer) else {
            Issue.record("a nested instance outlived its parent")
            return
        }
        #expect(code == "retired-scope")
        #expect(detail.hasPrefix("scope instance \(bobPeer) is retired"))
        #expect(try worker.op("ledger.open", Opening(account: "erin", balance: 1), instance: bobDesk) == .applied(revision: 5))

        // Registered under the retired parent, a selector opens nothing, now or later.
        nested.registration = 3
        guard case .scopeRegistered(_, _, _, let none)? = try worker.exchange(.scopeRegister(nested)) else {
            Issue.record("no registration reply")
            return
        }
        #expect(none.isEmpty)
        #expect(try worker.op("ledger.open", Opening(account: "frank", balance: 1)) == .applied(revision: 6))
        #expect(try store.records(from: 6)[0].scopeEvents.map(\.scope) == ["Bank.desk"])
    }

    private struct Moving: Encodable {
        var from: String
        var to: String
        var amount: Int
    }

    @Test func `a selector over an automatic cog is evaluated by the leader after each turn`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try RawWorker(endpoint: ports.requests)
        _ = try worker.exchange(.hello(worker: "tester", lastRevision: 0))
        #expect(try worker.op("ledger.open", Opening(account: "bob", balance: 100)) == .applied(revision: 1))
        // `ledger.wealthy` is no stored state: the leader computes it (accounts with ≥ 100).
        let wealthy = ScopeRegistration(worker: "tester", registration: 1, path: "Bank.concierge", source: "ledger.wealthy", key: nil, form: .each)
        guard case .scopeRegistered(_, _, _, let initial)? = try worker.exchange(.scopeRegister(wealthy)) else {
            Issue.record("no registration reply")
            return
        }
        #expect(initial.map(\.identity) == [try CBOREncoder().encode("bob")])
        let bob = try #require(initial.first?.instance)
        #expect(try worker.op("ledger.open", Opening(account: "alice", balance: 50)) == .applied(revision: 2))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try store.records(from: 2)[0].scopeEvents.isEmpty, "alice is not wealthy")

        // A transfer writes balances only; what it does to the computed list
        // shows in its own record: bob retires, alice opens.
        #expect(try worker.op("ledger.transfer", Moving(from: "bob", to: "alice", amount: 60)) == .applied(revision: 3))
        let moved = try store.records(from: 3)[0].scopeEvents
        #expect(moved.map(\.kind) == [.retire, .open])
        #expect(moved.map(\.instance).first == bob)
        #expect(moved.last?.identity == (try CBOREncoder().encode("alice")))
        guard case .rejected(let code, _)? = try worker.op("ledger.greet", "bob", instance: bob) else {
            Issue.record("work from a retired computed-selector instance was applied")
            return
        }
        #expect(code == "retired-scope")
        let alice = try #require(moved.last?.instance)
        #expect(try worker.op("ledger.greet", "alice", instance: alice) == .applied(revision: 4))
        // A turn that leaves the list as it was records no scope events.
        #expect(try worker.op("ledger.transfer", Moving(from: "alice", to: "bob", amount: 1)) == .applied(revision: 5))
        #expect(try store.records(from: 5)[0].scopeEvents.isEmpty)

        // A Bool scope over one member of a computed box: `ledger.isWealthy["bob"]` (bob holds 41).
        let bobWealthy = ScopeRegistration(
            worker: "tester", registration: 2, path: "Bank.bobDesk", source: "ledger.isWealthy",
            key: try CBOREncoder().encode("bob"), form: .bool)
        guard case .scopeRegistered(_, _, _, let none)? = try worker.exchange(.scopeRegister(bobWealthy)) else {
            Issue.record("no registration reply")
            return
        }
        #expect(none.isEmpty)
        #expect(try worker.op("ledger.transfer", Moving(from: "alice", to: "bob", amount: 70)) == .applied(revision: 6))
        let rich = try store.records(from: 6)[0].scopeEvents
        // Retirements first (alice leaves the list), then openings in registration order.
        #expect(rich.map(\.scope) == ["Bank.concierge", "Bank.concierge", "Bank.bobDesk"])
        #expect(rich.map(\.kind) == [.retire, .open, .open])
    }
}

@Suite("Scope instances across processes (worker stamping)", .serialized, .timeLimit(.minutes(10)))
struct ScopeStampingTests {
    @Test func `a worker's scope child sends its op stamped with the instance the leader minted`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "ledger-greeter")
        defer { worker.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 3}"#).hasPrefix("applied revision 1"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied 2") } != nil, "the greeter's turn was applied")
        let store = try TurnStore(directory: folder.path, mode: .reader)
        let records = try store.records(from: 1)
        let greeting = try #require(records.first { $0.name == "LedgerGreeter.greeter.ledger.greet" })
        let instance = try #require(greeting.origin.instance)
        #expect(greeting.origin.worker == "w1")
        // The instance was minted either by the registration (if it reached the
        // leader after alice opened) or by the open event in alice's turn.
        if let opening = records.first?.scopeEvents.first {
            #expect(opening.kind == .open)
            #expect(opening.worker == "w1")
            #expect(opening.scope == "LedgerGreeter.greeter")
            #expect(opening.instance == instance)
        }
        #expect(try ports.openScopeInstances().contains(Int(instance)))
        #expect(try store.greetings(of: "alice") == 1)
    }

    @Test func `a worker restarted under the same name numbers its requests above its earlier run's`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 3}"#).hasPrefix("applied revision 1"))
        do {
            let worker = try ports.startWorker("w1", rig: "ledger-greeter")
            defer { worker.stop() }
            #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied 2") } != nil, "alice was greeted")
            // Killed, it says no goodbye: the next run under the name takes it over.
            worker.killHard()
        }
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 5}"#).hasPrefix("applied revision 3"))
        // The second run greets both accounts again. Numbered from 1 again, its
        // first greeting would look like a retry of request w1#1 and get that
        // request's old reply, never running.
        let again = try ports.startWorker("w1", rig: "ledger-greeter")
        defer { again.stop() }
        // Revision 4: the first run's greeter instance retires as the name is taken over.
        #expect(again.waitForLine { $0.hasSuffix(" cogd worker w1: applied 6") } != nil, "both greetings were applied: \(again.lines)")
        let store = try TurnStore(directory: folder.path, mode: .reader)
        let takeover = try store.records(from: 4, limit: 1).first
        #expect(takeover?.name == "cogd.nameTakenOver" && takeover?.writes.isEmpty == true)
        // The greeters of alice and bob (opened for the first run at revision 3).
        // And the roots of its two mechanisms (§6a: a worker of a group, here its own, registers them).
        #expect(takeover?.scopeEvents.map(\.kind) == [.retire, .retire, .retire, .retire], "\(String(describing: takeover))")
        #expect(takeover?.scopeEvents.map(\.scope).sorted() == ["LedgerAudit", "LedgerGreeter", "LedgerGreeter.greeter", "LedgerGreeter.greeter"])
        #expect(takeover?.scopeEvents.allSatisfy { $0.worker == "w1" } == true)
        let greetings = try store.records(from: 1).filter { $0.name == "LedgerGreeter.greeter.ledger.greet" }
        // Each child sends a greeting, then a transfer: the first run used 1
        // (and 2, when its transfer went out before the kill), the second goes
        // on above what the leader answered: 3 and 5, or 2 and 4. Never 1 again.
        let sequences = greetings.compactMap(\.origin.request?.sequence)
        #expect(sequences.count == 3 && sequences[0] == 1 && sequences[1] > 1 && sequences[2] > sequences[1], "\(sequences)")
        #expect(try store.greetings(of: "alice") == 2)
        #expect(try store.greetings(of: "bob") == 1)
    }

    @Test func `a nested scope child's ops carry its own instance, which retires with its parent's`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "ledger-peers")
        defer { worker.stop() }
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 0}"#).hasPrefix("applied"))
        #expect(try waitUntil { try store.greetings(of: "alice") == 1 }, "alice's desk greeted alice")
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 3}"#).hasPrefix("applied"))
        // alice's desk greets bob; bob's desk greets alice and bob.
        #expect(try waitUntil { try store.greetings(of: "alice") == 2 && store.greetings(of: "bob") == 2 })

        let records = try store.records(from: 1)
        let greetings = records.filter { $0.name == "LedgerPeers.desk.peer.ledger.greet" }
        #expect(greetings.count == 4)
        let desks = Set(records.flatMap(\.scopeEvents).filter { $0.scope == "LedgerPeers.desk" }.map(\.instance))
        let greetingInstances = try greetings.map { try #require($0.origin.instance) }
        #expect(Set(greetingInstances).count == 4, "each peer child has its own instance")
        #expect(Set(greetingInstances).isDisjoint(with: desks), "not its desk's")

        // Closing alice retires her desk and both peers inside it (and the
        // alice peer in bob's desk) in the closing turn's record.
        #expect(try ports.call("ledger.close", #""alice""#).hasPrefix("applied"))
        let closing = try #require(try store.records(from: 1).last { $0.name == "ledger.close" })
        let retiredPeers = Set(closing.scopeEvents.filter { $0.kind == .retire && $0.scope == "LedgerPeers.desk.peer" }.map(\.instance))
        #expect(retiredPeers.count == 3)
        #expect(retiredPeers.isSubset(of: Set(greetingInstances)))
        let open = Set(try ports.openScopeInstances().map(UInt64.init))
        #expect(open.isDisjoint(with: retiredPeers))
        #expect(open.intersection(Set(greetingInstances)).count == 1, "only bob's peer in bob's desk is left")

        // A new leader epoch: the worker registers its desk again, then the
        // peers inside it under the desk's new instance; their greetings are
        // applied, stamped with instances of the new epoch.
        leader.killHard()
        leader.stop()
        leader = try ports.startLeader(data: folder.path)
        #expect(worker.waitForLine(timeout: .seconds(30)) { $0.contains("cogd worker w1: synced at") && $0.hasSuffix("epoch 2") } != nil)
        #expect(try ports.call("ledger.open", #"{"account": "carol", "balance": 0}"#).hasPrefix("applied"))
        // A worker of a group (here its own) opens its desk again for the new
        // instance (a new lifetime, §6a): bob's desk greets bob again. Then
        // bob's desk greets carol; carol's desk greets bob and carol.
        #expect(try waitUntil { try store.greetings(of: "carol") == 2 && store.greetings(of: "bob") == 4 })
        let later = try store.records(from: closing.revision + 1).filter { $0.name == "LedgerPeers.desk.peer.ledger.greet" }
        #expect(later.count == 4)
        #expect(later.allSatisfy { $0.epoch == 2 && ($0.origin.instance ?? 0) >> 32 == 2 })
    }

    @Test func `a worker's scope over an automatic cog is stamped with instances the leader evaluates`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "ledger-concierge")
        defer { worker.stop() }
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 150}"#).hasPrefix("applied"))
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 10}"#).hasPrefix("applied"))
        #expect(try waitUntil { try store.greetings(of: "alice") == 1 }, "alice's concierge greeted her")
        // Money moves: alice drops out, bob becomes wealthy and is greeted.
        #expect(try ports.call("ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 100}"#).hasPrefix("applied"))
        #expect(try waitUntil { try store.greetings(of: "bob") == 1 }, "bob's concierge greeted him")
        let records = try store.records(from: 1)
        let transfer = try #require(records.first { $0.name == "ledger.transfer" })
        #expect(transfer.scopeEvents.map(\.kind) == [.retire, .open])
        #expect(transfer.scopeEvents.allSatisfy { $0.scope == "LedgerConcierge.concierge" && $0.worker == "w1" })
        let greetings = records.filter { $0.name == "LedgerConcierge.concierge.ledger.greet" }
        #expect(greetings.count == 2)
        // bob's greeting carries the instance the transfer's record opened.
        #expect(greetings.last?.origin.instance == transfer.scopeEvents.last?.instance)
        #expect(greetings.first?.origin.instance == transfer.scopeEvents.first?.instance)
    }
}

@Suite("Scope instances and silent workers", .serialized, .timeLimit(.minutes(10)))
struct SilentWorkerTests {
    @Test func `killing a worker retires its instances once its heartbeat times out`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 1.5)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "ledger-greeter")
        defer { worker.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 1}"#).hasPrefix("applied revision 1"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied 2") } != nil)
        func openInstances() throws -> [Int] { try ports.openScopeInstances() }
        #expect(try openInstances().count == 1 + 2, "alice's greeter and the two mechanisms' roots")
        worker.killHard()
        // Wait for the leader to notice the silence: bounded by the timeout plus slack.
        let deadline = ContinuousClock.now + .seconds(10)
        var open = try openInstances()
        while !open.isEmpty && ContinuousClock.now < deadline {
            usleep(250_000)
            open = try openInstances()
        }
        #expect(open.isEmpty)
    }

    @Test func `a worker given up for silence has its work refused until it rejoins with new instances`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 1)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "ledger-greeter")
        defer {
            worker.resume()
            worker.stop()
        }
        func openInstances() throws -> [Int] { try ports.openScopeInstances() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 1}"#).hasPrefix("applied revision 1"))
        // alice's greeter and the two mechanisms' roots.
        #expect(try waitUntil { try openInstances().count == 3 })
        let before = try openInstances()

        // Frozen past the heartbeat timeout: given up, its instance retired.
        worker.pause()
        #expect(try waitUntil { try openInstances().isEmpty })
        // Its work is refused while it is gone (here a request in its name).
        let refused = try ports.call("ledger.greet", #""alice""#, requestID: "w1#1000")
        #expect(refused.contains("rejected: retired-scope: worker w1 is gone"), "\(refused)")

        // Thawed: it hears `gone`, says hello, registers its scope anew, and
        // its greeter child (still open) gets a new instance.
        worker.resume()
        #expect(try waitUntil { let open = try openInstances(); return open.count == 3 && Set(open).isDisjoint(with: before) })
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 1}"#).hasPrefix("applied"))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try waitUntil { try store.greetings(of: "bob") == 1 })
        let greeting = try #require(try store.records(from: 1).last { $0.name == "LedgerGreeter.greeter.ledger.greet" })
        #expect(greeting.origin.instance.map { !before.contains(Int($0)) } == true, "stamped with an instance minted after the rejoin")
    }

    @Test func `a second process under a worker's name waits, refused, until the first is gone`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let first = try ports.startWorker("w1")
        defer { first.stop() }
        let second = try CogdProcess(["worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger", "--group", "w1"])
        defer { second.stop() }
        let refusal = second.waitForLine { $0.contains("the leader refuses this name") }
        #expect(refusal?.contains("another process is connected as worker w1") == true, "\(second.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "a", "balance": 1}"#).hasPrefix("applied revision 1"))
        #expect(first.waitForLine { $0.hasSuffix(" cogd worker w1: applied 1") } != nil, "the first process keeps working")
        #expect(!second.lines.contains { $0.contains("synced") })
        let status = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        #expect((object?["workers"] as? [[String: Any]])?.count == 1)
        #expect(((object?["errors"] as? [String: Any])?["name-in-use"] as? Int ?? 0) >= 1)
        // Nor may a tool speak for the name while a process holds it; the
        // refusal leaves no dedup entry that could shadow the holder's own request.
        let borrowed = try ports.call("ledger.open", #"{"account": "z", "balance": 1}"#, requestID: "w1#999")
        #expect(borrowed.contains("rejected: name-in-use: another process is connected as worker w1"), "\(borrowed)")
        #expect(try TurnStore(directory: folder.path, mode: .reader).dedupReply(for: RequestID(worker: "w1", sequence: 999)) == nil)

        // The first stops: its connection closes, and the second takes the name.
        first.stop()
        #expect(second.waitForLine { $0.hasSuffix(" cogd worker w1: the name is free; this process holds it now") } != nil)
        // Revision 2 retires the first process's audit root (§6a), taken over with the name.
        #expect(second.waitForLine { $0.contains("cogd worker w1: synced at revision 2") } != nil, "\(second.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "b", "balance": 2}"#).hasPrefix("applied revision 3"))
        #expect(second.waitForLine { $0.hasSuffix(" cogd worker w1: applied 3") } != nil)
    }

    @Test func `a frozen worker replaced under its name is refused when it thaws`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 1)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 1}"#).hasPrefix("applied revision 1"))
        let old = try ports.startWorker("w1", rig: "ledger-greeter")
        defer {
            old.resume()
            old.stop()
        }
        #expect(old.waitForLine { $0.hasSuffix(" cogd worker w1: applied 2") } != nil, "the first process greeted alice")
        old.pause()
        // A replacement under the same name: refused while the frozen one may
        // still be heard from, then it holds the name and greets alice again.
        let replacement = try CogdProcess(["worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger-greeter", "--group", "w1"])
        defer { replacement.stop() }
        #expect(replacement.waitForLine { $0.contains("cogd worker w1: synced at revision") } != nil, "\(replacement.lines) \(leader.lines)")
        // Revision 3 records the frozen process's greeter instance retiring
        // (given up for silence, or its name taken over); 4 greets alice again.
        #expect(replacement.waitForLine { $0.hasSuffix(" cogd worker w1: applied 4") } != nil)

        // Thawed, the old process is refused the name, and its children send nothing.
        old.resume()
        let refusal = old.waitForLine { $0.contains("the leader refuses this name") }
        #expect(refusal?.contains("another process is connected as worker w1") == true, "\(old.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 1}"#).hasPrefix("applied revision 5"))
        #expect(replacement.waitForLine { $0.hasSuffix(" cogd worker w1: applied 6") } != nil, "the holder greeted bob")
        #expect(old.waitForLine { $0.hasSuffix(" cogd worker w1: applied 6") } != nil, "the refused process still replicates")
        let store = try TurnStore(directory: folder.path, mode: .reader)
        let retirement = try store.records(from: 3, limit: 1).first
        #expect(["cogd.workerGone", "cogd.nameTakenOver"].contains(retirement?.name ?? ""), "\(String(describing: retirement))")
        // alice's greeter and the two mechanisms' roots.
        #expect(retirement?.scopeEvents.map(\.kind) == [.retire, .retire, .retire] && retirement?.origin.isSystem == true)
        #expect(try store.greetings(of: "alice") == 2)
        #expect(try store.greetings(of: "bob") == 1)
        #expect(try ports.openScopeInstances().count == 2 + 2, "the holder's two greeter children and its two roots")
    }
}

@Suite("TrailsRig across processes", .serialized, .timeLimit(.minutes(10)))
struct TrailsClusterTests {
    @Test func `closing a screen while its load is in flight keeps that load out, and a reopened screen's load is accepted`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "trails")
        defer { worker.stop() }
        // Open screen 7, close it while its one-second load is out, open it again.
        #expect(try ports.call("trails.openScreen", #"{"screen": 7, "trail": "ridge"}"#).hasPrefix("applied"))
        #expect(try ports.call("trails.closeScreen", "7").hasPrefix("applied"))
        #expect(try ports.call("trails.openScreen", #"{"screen": 7, "trail": "ridge"}"#).hasPrefix("applied"))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        let deadline = ContinuousClock.now + .seconds(15)
        var accepted: [TurnRecord] = []
        while accepted.isEmpty && ContinuousClock.now < deadline {
            usleep(100_000)
            accepted = try store.records(from: 1).filter { $0.name == "TrailScreens.trailScreen.trails.accept" }
        }
        let records = try store.records(from: 1)
        let openings = records.flatMap(\.scopeEvents).filter { $0.kind == .open && $0.scope == "TrailScreens.trailScreen" }
        let retirements = records.flatMap(\.scopeEvents).filter { $0.kind == .retire && $0.scope == "TrailScreens.trailScreen" }
        #expect(accepted.count == 1)
        #expect(retirements.count == 1)
        let newest = try #require(openings.last)
        #expect(accepted.first?.origin.instance == newest.instance)
        #expect(accepted.first?.origin.instance != retirements.first?.instance)
        let loaded = try store.value(name: "trails.loaded", key: try CBOREncoder().encode(7))
        #expect(loaded.map { CBORText.display(bytes: $0) }?.contains("Ridge Loop") == true)
    }
}
