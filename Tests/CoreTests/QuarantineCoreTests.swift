import Cog
import CogCodec
import CogProtocol
import Testing

/// A request the previous leader process left running (`turnlog.md` §1a) is
/// decided by the core after it rebuilt its unindexed replies: a crash or
/// a second death quarantines it, one outside kill spares it, and a
/// request that has an answer — even one kept only by its record — keeps it.
@MainActor
@Suite("Leader core: the request left running")
struct QuarantineCoreTests {
    static let crashedLeader = "the leader stopped while running this request (op `ledger.open`); it is not run again"

    @Test func `a crash quarantines the request: committed before serving, its retry rejected crashed-leader, never run`() throws {
        let leader = try CoreHarness()
        let id = RequestID(worker: "poison", sequence: 1)
        let outcome = try leader.core.settle(.init(request: id, op: "ledger.open", digest: nil, crashed: true, diedTwice: false))
        #expect(outcome == .quarantined)
        _ = leader.endBatch()
        let commit = try #require(leader.commits.last)
        #expect(commit.replies.map(\.0) == [id] && commit.drafts.isEmpty)
        #expect(commit.rejections.map(\.code) == ["crashed-leader"] && commit.rejections.map(\.reason) == [Self.crashedLeader])
        #expect(leader.outcome("poison", try Wire.open("alice", 5, worker: "poison", seq: 1)) == rejected(.crashedLeader, Self.crashedLeader))
        #expect(leader.log.lastRevision == 0 && leader.ports.noted.isEmpty, "never run")
    }

    @Test func `one outside kill spares it; a second death with it running quarantines it`() throws {
        let leader = try CoreHarness()
        let id = RequestID(worker: "bank", sequence: 1)
        #expect(try leader.core.settle(.init(request: id, op: "ledger.open", digest: nil, crashed: false, diedTwice: false)) == .spared)
        #expect(!leader.core.hasWork)
        #expect(try leader.core.settle(.init(request: id, op: "ledger.open", digest: nil, crashed: false, diedTwice: true)) == .quarantined)
    }

    @Test func `a request whose answer only its record keeps (not yet indexed) is answered, not quarantined`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        // Restarted without indexing: the reply lives only in record 1 and is rebuilt by the new core.
        try leader.restart(indexing: false)
        let id = RequestID(worker: "c", sequence: 1)
        #expect(try leader.log.dedupReply(for: id) == nil, "not indexed: the store alone would not know it")
        #expect(try leader.core.settle(.init(request: id, op: "ledger.open", digest: nil, crashed: true, diedTwice: false)) == .answered)
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
    }

    @Test func `a quarantine whose commit fails is kept, answers its retries meanwhile, and is stored by the next commit`() throws {
        let leader = try CoreHarness()
        let id = RequestID(worker: "poison", sequence: 1)
        #expect(try leader.core.settle(.init(request: id, op: "ledger.open", digest: nil, crashed: true, diedTwice: false)) == .quarantined)
        leader.log.failingCommits = 1
        _ = leader.endBatch()
        #expect(try leader.log.dedupReply(for: id) == nil, "the commit failed")
        #expect(leader.core.hasWork)
        // The retry is answered from memory, never run; that batch's commit stores the answer.
        #expect(leader.outcome("poison", try Wire.open("alice", 5, worker: "poison", seq: 1)) == rejected(.crashedLeader, Self.crashedLeader))
        #expect(try leader.log.dedupReply(for: id) != nil)
        #expect(leader.log.lastRevision == 0 && leader.ports.noted.isEmpty, "never run")
    }
}
