import Cog
import CogCluster
import CogCodec
import CogProtocol
import Foundation
import LedgerRig
import Testing

/// Rejections on the record (issue 28 item 4, `turnlog.md` §2d): the leader
/// core hands each stored rejection or refusal, and each retry answered
/// from one, to the batch's commit — never a transient one, never an
/// applied or unchanged answer, and none of a commit that failed.
@MainActor
@Suite("Leader core: rejections on the record")
struct RejectionRowTests {
    @Test func `a refusal and its retry go into the commits, the retry marked earlier, with op, digest, code and reason`() throws {
        let leader = try CoreHarness()
        _ = leader.batch([("c", try Wire.open("alice", 30, worker: "c", seq: 1)), ("c", try Wire.open("bob", 0, worker: "c", seq: 2))])
        #expect(leader.commits.last?.rejections.isEmpty == true, "applied answers are not rejections")
        let overdraft = try Wire.transfer("alice", "bob", 50, worker: "c", seq: 3)
        _ = leader.send("c", overdraft)
        guard let first = leader.commits.last?.rejections, first.count == 1 else {
            Issue.record("no rejection row: \(leader.commits.last.map { "\($0.rejections)" } ?? "no commit")")
            return
        }
        guard case .op(let request) = overdraft else { return }
        #expect(first[0].request == RequestID(worker: "c", sequence: 3) && first[0].op == "ledger.transfer" && first[0].kind == .refused)
        #expect(first[0].code == "insufficient-funds" && first[0].reason == "alice has 30, the transfer needs 50" && !first[0].earlier)
        #expect(first[0].digest == RequestDigest.of(op: request.op, argument: request.argument))
        let commits = leader.commits.count
        _ = leader.send("c", overdraft)
        #expect(leader.commits.count == commits + 1, "a retry answered from dedup commits its row")
        #expect(leader.commits.last?.rejections.map(\.earlier) == [true] && leader.commits.last?.drafts.isEmpty == true)
        #expect(leader.commits.last?.rejections.first?.code == "insufficient-funds")
    }

    @Test func `a stored rejection is kept, a transient one and an unchanged answer are not`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 2)) == .unchanged)
        #expect(leader.commits.last?.rejections.isEmpty == true)
        #expect(leader.outcome("c", WireMessage.op(OpRequest(request: RequestID(worker: "c", sequence: 3), op: "ledger.nope", argument: [0xf6])))?.rejection?.code == .unknownOp)
        #expect(leader.commits.last?.rejections.map(\.code) == ["unknown-op"] && leader.commits.last?.rejections.first?.kind == .rejected)
        let commits = leader.commits.count
        // The same id with another argument: request-mismatch, transient, kept nowhere (no commit at all).
        #expect(leader.outcome("c", try Wire.open("bob", 5, worker: "c", seq: 2))?.rejection?.code == .requestMismatch)
        #expect(leader.commits.count == commits)
    }

    @Test func `a failed commit keeps none of its rejections, and the retry that then runs is recorded once`() throws {
        let leader = try CoreHarness()
        _ = leader.batch([("c", try Wire.open("alice", 30, worker: "c", seq: 1)), ("c", try Wire.open("bob", 0, worker: "c", seq: 2))])
        leader.log.failingCommits = 1
        let overdraft = try Wire.transfer("alice", "bob", 50, worker: "c", seq: 3)
        #expect(leader.outcome("c", overdraft)?.rejection?.code == .unavailable)
        #expect(leader.outcome("c", overdraft) == RefusalTests.overdraft)
        #expect(leader.commits.last?.rejections.map(\.earlier) == [false], "the rows of the failed commit are not carried over")
    }
}
