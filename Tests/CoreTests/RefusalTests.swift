import Cog
import CogCluster
import CogCodec
import CogProtocol
import Foundation
import LedgerRig
import Testing

/// An op refuses with a code of its app's own and a reason (issue 28 item
/// 1, `cogwire.md` §4 "Refusals"): nothing of the turn is kept, the answer
/// is `refused` and stored, so a retry gets it again, and it is counted by
/// op and code.
@MainActor
@Suite("Leader core: refusals")
struct RefusalTests {
    /// An op whose body writes a member, then refuses with its argument's
    /// code and reason (a bad code or reason is the test's point).
    static let refusingOp = RemoteOp<[String]>(name: "refusalTests.refuse") { c, codeAndReason in
        c[TestRig.members] = ["written before the refusal"]
        try c.refuse(codeAndReason[0], codeAndReason[1])
    }

    /// The ledger and test rigs' ops, and `refusingOp`.
    static func registry() -> OpRegistry {
        let base = TestRig.registry()
        var runners: [String: OpRegistry.Runner] = [:]
        for name in base.names { runners[name] = base.runner(named: name) }
        runners[refusingOp.name] = refusingOp.runner
        return OpRegistry(runners: runners)
    }

    static let overdraft = OpReply.Outcome.refused(code: "insufficient-funds", reason: "alice has 30, the transfer needs 50")

    @Test func `an overdraft is refused insufficient-funds naming the balance, keeps nothing and uses no revision`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 30, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.outcome("c", try Wire.open("bob", 0, worker: "c", seq: 2)) == .applied(revision: 2))
        let digest = leader.log.stateDigest
        #expect(leader.outcome("c", try Wire.transfer("alice", "bob", 50, worker: "c", seq: 3)) == Self.overdraft)
        #expect(leader.outcome("c", try Wire.transfer("alice", "zed", 5, worker: "c", seq: 4)) == .refused(code: "unknown-account", reason: "no open account named zed"))
        #expect(leader.outcome("c", try Wire.transfer("yan", "bob", 5, worker: "c", seq: 5)) == .refused(code: "unknown-account", reason: "no open account named yan"))
        #expect(try leader.balance("alice") == 30 && (leader.balance("bob") ?? 0) == 0)
        #expect(leader.log.lastRevision == 2 && leader.log.stateDigest == digest, "no record, the state digest unchanged")
        // The next change gets the next revision: none was used by the refusals.
        #expect(leader.outcome("c", try Wire.transfer("alice", "bob", 10, worker: "c", seq: 6)) == .applied(revision: 3))
        // An op that genuinely changes nothing stays unchanged.
        #expect(leader.outcome("c", try Wire.open("alice", 99, worker: "c", seq: 7)) == .unchanged)
        #expect(leader.outcome("c", try Wire.transfer("alice", "bob", 0, worker: "c", seq: 8)) == .unchanged)
    }

    @Test func `a retried refusal gets the same answer marked earlier, also after a restart, and the body never runs again`() throws {
        let leader = try CoreHarness()
        _ = leader.batch([("c", try Wire.open("alice", 30, worker: "c", seq: 1)), ("c", try Wire.open("bob", 0, worker: "c", seq: 2))])
        let overdraft = try Wire.transfer("alice", "bob", 50, worker: "c", seq: 3)
        let first = leader.send("c", overdraft)
        #expect(first == [.reply(OpReply(request: RequestID(worker: "c", sequence: 3), outcome: Self.overdraft))])
        #expect(leader.log.dedup.keys.contains(RequestID(worker: "c", sequence: 3)), "stored in dedup with the batch")
        let noted = leader.ports.noted.count
        // Money arrives: run again, the transfer would now apply — a retry must not run it.
        #expect(leader.outcome("c", try Wire.open("carol", 0, worker: "c", seq: 4)) == .applied(revision: 3))
        #expect(leader.send("c", overdraft) == [.reply(OpReply(request: RequestID(worker: "c", sequence: 3), outcome: Self.overdraft, earlier: true))])
        try leader.restart()
        #expect(leader.send("c", overdraft) == [.reply(OpReply(request: RequestID(worker: "c", sequence: 3), outcome: Self.overdraft, earlier: true))])
        #expect(leader.ports.noted.count == noted + 1, "only carol's open ran since")
        #expect(try leader.balance("alice") == 30 && (leader.balance("bob") ?? 0) == 0)
    }

    @Test func `refusals are counted by op and code, in status too`() throws {
        let leader = try CoreHarness()
        _ = leader.batch([("c", try Wire.open("alice", 30, worker: "c", seq: 1)), ("c", try Wire.open("bob", 0, worker: "c", seq: 2))])
        _ = leader.batch([
            ("c", try Wire.transfer("alice", "bob", 50, worker: "c", seq: 3)), ("c", try Wire.transfer("alice", "bob", 60, worker: "c", seq: 4)),
            ("c", try Wire.transfer("alice", "zed", 1, worker: "c", seq: 5)),
            ("c", try Wire.transfer("alice", "bob", 50, worker: "c", seq: 3)),  // a retry: deduplicated, not counted again
        ])
        #expect(leader.core.refusalCounts == [
            .init(op: "ledger.transfer", code: "insufficient-funds"): 2, .init(op: "ledger.transfer", code: "unknown-account"): 1,
        ])
        #expect(leader.core.requestOutcomes[.refused] == 3 && leader.core.requestOutcomes[.deduplicated] == 1)
        #expect(leader.core.status(now: leader.now).refusals == [
            .init(op: "ledger.transfer", code: "insufficient-funds", count: 2), .init(op: "ledger.transfer", code: "unknown-account", count: 1),
        ])
        #expect(leader.core.errorCounts.isEmpty, "a refusal is an answer, not an error")
    }

    @Test func `past 255 distinct codes, refusals are counted under _other`() throws {
        let leader = try CoreHarness(registry: Self.registry())
        let distinct = LeaderCore.maximumRefusalSeries + 44
        _ = leader.batch(try (1...distinct).map { ("c", try Wire.test("refusalTests.refuse", ["code-\($0)", "no"], seq: UInt64($0))) })
        let counts = leader.core.refusalCounts
        #expect(counts.count == LeaderCore.maximumRefusalSeries)
        #expect(counts[.overflow] == UInt64(distinct - (LeaderCore.maximumRefusalSeries - 1)))
        #expect(counts[.init(op: "refusalTests.refuse", code: "code-1")] == 1)
    }

    @Test func `a bad code or an overlong reason is refused bad-refusal, saying why, and keeps nothing`() throws {
        let leader = try CoreHarness(registry: Self.registry())
        func refusal(_ code: String, _ reason: String, seq: UInt64) throws -> (code: String, reason: String)? {
            guard case .refused(let code, let reason)? = leader.outcome("c", try Wire.test("refusalTests.refuse", [code, reason], seq: seq)) else {
                return nil
            }
            return (code, reason)
        }
        let empty = try #require(try refusal("", "why", seq: 1))
        #expect(empty.code == "bad-refusal" && empty.reason.hasPrefix(#"the op refused with the code "", which is empty"#), "\(empty)")
        let upper = try #require(try refusal("Sold Out\u{1B}[2J", "why", seq: 2))
        #expect(upper.code == "bad-refusal", "\(upper)")
        #expect(upper.reason.hasPrefix(#"the op refused with the code "Sold Out\u{1B}[2J", which has a character other than a-z, 0-9, '-' and '.'"#), "\(upper.reason)")
        #expect(!upper.reason.unicodeScalars.contains { $0.value < 0x20 }, "the control character escaped")
        let long = try #require(try refusal(String(repeating: "x", count: 65), "why", seq: 3))
        #expect(long.code == "bad-refusal" && long.reason.contains("is 65 bytes long; a code is at most 64"), "\(long)")
        let wordy = try #require(try refusal("sold-out", String(repeating: "é", count: 300), seq: 4))
        #expect(wordy.code == "bad-refusal" && wordy.reason.hasPrefix("the op refused sold-out with a reason of 600 bytes; a reason holds at most 512"), "\(wordy)")
        #expect(wordy.reason.utf8.count <= Refusal.maximumReasonBytes)
        #expect(try refusal(String(repeating: "a", count: 64), String(repeating: "b", count: 512), seq: 5)?.code == String(repeating: "a", count: 64))
        #expect(try leader.log.value(name: "test.members", key: nil) == nil, "nothing of any of those turns kept")
        #expect(leader.log.lastRevision == 0)
        #expect(leader.core.refusalCounts[.init(op: "refusalTests.refuse", code: "bad-refusal")] == 4)
    }
}
