import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// What the leader's and a worker's rules do about a log whose oldest
/// records retention removed (`cogwire.md` §4, §5; `turnlog.md` §2a): a
/// catch-up from below the first revision kept is answered `compacted` and
/// the worker syncs from a snapshot; a retry whose answer expired is
/// refused `expired`, never run again.
@MainActor
@Suite("Retention: catch-ups and expired answers")
struct RetentionCoreTests {
    /// A leader whose log holds revisions 1…5 (accounts a1…a5 opened by
    /// c#1…c#5), indexed by a restart; `w` has said hello.
    private func leaderWithFiveTurns() throws -> CoreHarness {
        let leader = try CoreHarness()
        for n in 1...5 {
            #expect(leader.outcome("c", try Wire.open("a\(n)", n, worker: "c", seq: UInt64(n))) == .applied(revision: UInt64(n)))
        }
        try leader.restart()
        #expect(leader.log.unindexedFrom == nil, "the restart indexed the replies")
        #expect(leader.send("w", Wire.hello("w")).first?.typeName == "welcome")
        return leader
    }

    @Test func `a catch-up below the first revision kept is answered compacted, naming what the log keeps`() throws {
        let leader = try leaderWithFiveTurns()
        leader.log.prune(below: 4)
        #expect(leader.log.firstRevision == 4)
        #expect(
            leader.send("w", .catchUpRequest(from: 2)) == [
                .error(WireError(.compacted, "revision 2 is no longer in the log: it keeps revisions 4 to 5; sync from a snapshot (snapshot-request)"))
            ])
        #expect(leader.core.errorCounts["compacted"] == 1)
        // From the first revision kept on, a catch-up is answered as ever.
        guard case .turns(_, let records)? = leader.send("w", .catchUpRequest(from: 4)).first else {
            Issue.record("no turns")
            return
        }
        #expect(records.map(\.revision) == [4, 5])
    }

    @Test func `the newest record and records whose replies are not indexed are never removed`() throws {
        let leader = try CoreHarness()
        for n in 1...3 {
            #expect(leader.outcome("c", try Wire.open("a\(n)", n, worker: "c", seq: UInt64(n))) == .applied(revision: UInt64(n)))
        }
        #expect(leader.log.unindexedFrom == 1)
        leader.log.prune(below: 100)
        #expect(leader.log.firstRevision == 1, "every reply is kept only by its record")
        try leader.restart()
        leader.log.prune(below: 100)
        #expect(leader.log.firstRevision == 3, "the newest stays")
    }

    @Test func `a retry whose answer expired is refused expired and not run again; new requests run`() throws {
        let leader = try leaderWithFiveTurns()
        // The restart stored c#1…c#5's answers while the log ended at 5; two more turns, then 6 and on are kept.
        #expect(leader.outcome("c", try Wire.open("a6", 6, worker: "c", seq: 6)) == .applied(revision: 6))
        #expect(leader.outcome("c", try Wire.open("a7", 7, worker: "c", seq: 7)) == .applied(revision: 7))
        try leader.restart()
        leader.log.prune(below: 6)
        #expect(leader.log.firstRevision == 6)
        #expect(try leader.log.expiredSequence(worker: "c") == 5)
        #expect(try leader.log.dedupReply(for: RequestID(worker: "c", sequence: 1)) == nil)

        let noted = leader.ports.noted.count
        let retry = leader.outcome("c", try Wire.open("a1", 1, worker: "c", seq: 1))
        #expect(
            retry == rejected(
                .expired,
                "request c#1 was answered long ago and its answer is no longer kept (the leader's retention or `cogd log compact` removed answers up to c#5); "
                    + "it is not run again — a new request needs a new sequence"))
        #expect(leader.ports.noted.count == noted, "its body did not run")
        #expect(leader.log.lastRevision == 7)
        #expect(leader.core.errorCounts["expired"] == 1)
        // Still kept: c#6's answer.
        #expect(leader.outcome("c", try Wire.open("a6", 6, worker: "c", seq: 6)) == .applied(revision: 6))
        // A worker restarted as c numbers above every answered sequence; its new request runs.
        guard case .welcome(_, _, _, let lastSequence, _)? = leader.send("c2", Wire.hello("c")).first else {
            Issue.record("no welcome")
            return
        }
        #expect(lastSequence == 7)
        #expect(leader.outcome("c2", try Wire.open("a8", 8, worker: "c", seq: 8)) == .applied(revision: 8))
    }

    // MARK: The worker

    @Test func `a worker told compacted syncs from a snapshot, then applies the records held above it`() {
        var replica = ReplicaCoreTests.synced(at: 2)
        // A gap: 3…5 were missed; the catch-up from 3 is refused, the records already removed.
        #expect(replica.step(.published(epoch: 1, records: [ReplicaCoreTests.record(9)]), now: .milliseconds(30)) == [.send(.catchUpRequest(from: 3))])
        let refusal = WireError(.compacted, "revision 3 is no longer in the log: it keeps revisions 7 to 9; sync from a snapshot (snapshot-request)")
        #expect(
            replica.step(.leader(.error(refusal)), now: .milliseconds(40)) == [.refused(refusal), ReplicaCoreTests.snapshotRequest])
        #expect(replica.compactedCatchUps == 1)
        // Held meanwhile, applied after the snapshot; no catch-up is asked while the snapshot is awaited.
        #expect(replica.step(.published(epoch: 1, records: [ReplicaCoreTests.record(10)]), now: .milliseconds(45)) == [])
        #expect(replica.step(.tick, now: .milliseconds(2_100)).allSatisfy { $0 != .send(.catchUpRequest(from: 3)) })
        let effects = replica.step(ReplicaCoreTests.snapshot(revision: 8, [ReplicaCoreTests.entry("test.n", 8)]), now: .milliseconds(2_150))
        #expect(
            effects == [
                .applySnapshot(revision: 8, entries: [ReplicaCoreTests.entry("test.n", 8)]),
                .apply(ReplicaCoreTests.record(9)), .apply(ReplicaCoreTests.record(10)), .registerScopesAnew,
            ])
        #expect(replica.appliedRevision == 10 && replica.syncedRevision == 8)
    }
}
