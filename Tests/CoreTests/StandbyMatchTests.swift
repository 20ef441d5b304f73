import CogCodec
import CogProtocol
import Testing

private let ours: [UInt8] = Array(repeating: 1, count: 16)
private let theirs: [UInt8] = Array(repeating: 2, count: 16)
private let digest = StateDigest(value: 7)

/// The leader's log: through revision 10, led in epoch 3, its record at the standby's revision of `recordEpoch`.
private func log(
    recordEpoch: UInt64? = 2, recordDigest: StateDigest = digest, commitsAfter: Bool = false, keepsAll: Bool = true, oldestKept: UInt64? = 4
) -> StandbyMatch.Log {
    StandbyMatch.Log(
        logID: ours, epoch: 3, lastRevision: 10, record: recordEpoch.map { ($0, recordDigest) }, commitsAfter: commitsAfter,
        keepsAllAfter: keepsAll, oldestKept: oldestKept)
}

private func hello(logID: [UInt8]? = ours, epoch: UInt64 = 2, revision: UInt64 = 10) -> StandbyMatch.Hello {
    StandbyMatch.Hello(logID: logID, epoch: epoch, revision: revision, digest: digest)
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
}
