import CogCodec
import CogProtocol
import Testing

private let ours: [UInt8] = Array(repeating: 1, count: 16)
private let theirs: [UInt8] = Array(repeating: 2, count: 16)
private let digest = StateDigest(value: 7)

/// The leader's log: through revision 10, led in epoch 3, its record at the standby's revision of `recordEpoch`.
private func log(
    recordEpoch: UInt64? = 2, recordDigest: StateDigest = digest, commitsAfter: Bool = false, keepsAll: Bool = true, oldestKept: UInt64? = 4,
    lastCommit: CommitName? = nil, keptAfterNamed: Int? = nil
) -> StandbyMatch.Log {
    StandbyMatch.Log(
        logID: ours, epoch: 3, lastRevision: 10, record: recordEpoch.map { StandbyMatch.Record(epoch: $0, digest: recordDigest) },
        commitsAfter: commitsAfter, keepsAllAfter: keepsAll, oldestKept: oldestKept, lastCommit: lastCommit, keptAfterNamed: keptAfterNamed)
}

private func hello(logID: [UInt8]? = ours, epoch: UInt64 = 2, revision: UInt64 = 10, lastCommit: CommitName? = nil) -> StandbyMatch.Hello {
    StandbyMatch.Hello(logID: logID, epoch: epoch, revision: revision, digest: digest, lastCommit: lastCommit)
}

/// Log matching for a standby's hello (ha.md §9): in step, behind, or a copy and why.
@Suite("A standby's hello: in step, behind, or sent a copy")
struct StandbyMatchTests {
    @Test func `the same record at the leader's last revision, and no commit after it, is in step`() {
        #expect(StandbyMatch.of(hello(), log()) == .inStep)
        // Commits without a record after it (dedup answers, refusals): behind, caught up from the kept commits.
        #expect(StandbyMatch.of(hello(), log(commitsAfter: true)) == .behind)
        #expect(
            StandbyMatch.of(hello(), log(commitsAfter: true, keepsAll: false, oldestKept: nil))
                == .copy(reason: "the commits after its revision 10 are no longer all kept (none is kept)"))
    }

    @Test func `behind on this log, it catches up while the kept commits reach back to its revision, else it is sent a copy`() {
        #expect(StandbyMatch.of(hello(revision: 6), log()) == .behind)
        #expect(
            StandbyMatch.of(hello(revision: 2), log(keepsAll: false, oldestKept: 4))
                == .copy(reason: "the commits after its revision 2 are no longer all kept (those kept follow revision 3)"))
        // An empty folder: caught up from the start while every commit is kept, else a copy.
        let empty = hello(logID: nil, epoch: 0, revision: 0)
        #expect(StandbyMatch.of(empty, log(recordEpoch: nil)) == .behind)
        #expect(StandbyMatch.of(empty, log(recordEpoch: nil, keepsAll: false)) == .copy(reason: "its folder holds no log yet"))
    }

    @Test func `another log, a deposed leader's tail, a later epoch or a revision past the log's last is sent a copy`() {
        #expect(StandbyMatch.of(hello(logID: theirs), log()) == .copy(reason: "its copy is another log"))
        #expect(StandbyMatch.of(hello(logID: nil, revision: 4), log()) == .copy(reason: "its copy names no log"))
        #expect(StandbyMatch.of(hello(epoch: 4), log()) == .copy(reason: "its epoch 4 is above this leader's"))
        #expect(StandbyMatch.of(hello(revision: 11), log()) == .copy(reason: "its revision 11 is past this log's last"))
        // The same revision written in another epoch: a deposed leader's record, even with the same state after it.
        #expect(
            StandbyMatch.of(hello(epoch: 1, revision: 8), log(recordEpoch: 2))
                == .copy(reason: "it has applied epoch 1 and this log's revision 8 is of epoch 2"))
        #expect(
            StandbyMatch.of(hello(revision: 8), log(recordDigest: StateDigest(value: 8)))
                == .copy(reason: "its state digest at revision 8 differs from this log's"))
        #expect(StandbyMatch.of(hello(revision: 8), log(recordEpoch: nil)) == .copy(reason: "this log no longer holds its revision 8"))
    }

    @Test func `a named last commit is placed by its name: in step at the leader's last, behind when kept, a deposed tail when not`() {
        let leaders = CommitName(epoch: 3, number: 9)
        // The leader's last commit, kept or not (a leader that has shipped nothing since it started keeps none).
        #expect(StandbyMatch.of(hello(lastCommit: leaders), log(lastCommit: leaders, keptAfterNamed: 0)) == .inStep)
        #expect(StandbyMatch.of(hello(lastCommit: leaders), log(commitsAfter: true, keepsAll: false, oldestKept: nil, lastCommit: leaders)) == .inStep)
        // Kept with two after it, of an earlier epoch (applied as a standby): behind.
        let earlier = CommitName(epoch: 2, number: 40)
        #expect(StandbyMatch.of(hello(lastCommit: earlier), log(lastCommit: leaders, keptAfterNamed: 2)) == .behind)
        // Two commits without a record after revision 10 that this log never had: same record, same digest, yet a copy.
        let deposed = CommitName(epoch: 2, number: 42)
        #expect(StandbyMatch.of(hello(lastCommit: deposed), log(lastCommit: leaders)) == .copy(reason: "its last commit (epoch 2, commit 42) is not in this log: a deposed leader's tail"))
        #expect(
            StandbyMatch.of(hello(lastCommit: deposed), log(keepsAll: false, oldestKept: 12, lastCommit: leaders))
                == .copy(reason: "its last commit (epoch 2, commit 42) is not among the commits this leader keeps (those kept follow revision 11)"))
        // The newest kept, but the leader's folder ends at another commit.
        #expect(
            StandbyMatch.of(hello(lastCommit: earlier), log(lastCommit: nil, keptAfterNamed: 0))
                == .copy(reason: "this leader's folder changed after its last commit (epoch 2, commit 40) without shipping"))
        // A record mismatch is found first.
        #expect(StandbyMatch.of(hello(epoch: 1, revision: 8, lastCommit: leaders), log(recordEpoch: 2, lastCommit: leaders, keptAfterNamed: 0))
            == .copy(reason: "it has applied epoch 1 and this log's revision 8 is of epoch 2"))
    }
}
