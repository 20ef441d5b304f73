import CogCodec
import CogProtocol
import Testing

/// The leader's snapshot sender with time as an input (cogwire §5, §8):
/// parts, a whole snapshot's limit, a view that ends under a stream, a
/// requester that reads nothing, one replaced by a new request.
@Suite("Snapshot sender: parts, oversize, restarts and the deadline")
struct SnapshotSenderTests {
    /// A state table in memory, read in key order like the LMDB view.
    final class Table: SnapshotSource {
        let revision: UInt64
        let stateDigest = StateDigest()
        var entries: [StateEntry]
        var position = 0
        var ended = false
        private(set) var closed = false

        init(revision: UInt64, count: Int, valueBytes: Int = 100) {
            self.revision = revision
            entries = (0..<count).map { StateEntry(name: "t.v", key: Array("k\($0)".utf8), value: Array(repeating: 7, count: valueBytes)) }
        }

        func next(maximumBytes: Int, size: (StateEntry) -> Int) throws(TurnStoreError) -> (entries: [StateEntry], more: Bool) {
            if ended { throw TurnStoreError(code: .snapshotEnded, message: "the view ended") }
            var taken: [StateEntry] = []
            var total = 0
            while position < entries.count {
                let entrySize = size(entries[position])
                if !taken.isEmpty, total + entrySize > maximumBytes { break }
                taken.append(entries[position])
                total += entrySize
                position += 1
            }
            return (taken, position < entries.count)
        }

        func close() { closed = true }
    }

    static let peer = Array("w1/1".utf8)

    /// The snapshot message a frame holds.
    static func part(_ frame: [UInt8]) throws -> (entries: Int, part: UInt64?, more: Bool?) {
        guard case .snapshot(_, _, let entries, let part, let more, _) = try WireMessage.decode(frame, limit: .max) else {
            Issue.record("not a snapshot")
            return (0, nil, nil)
        }
        return (entries.count, part, more)
    }

    @Test func `a snapshot in parts goes out a part per offer, then ends and is noted`() throws {
        var sender = SnapshotSender<Table>(partBytes: 1_024, deadline: .seconds(30))
        let table = Table(revision: 9, count: 25)
        #expect(sender.start(to: Self.peer, whole: false, source: .success(table), now: .zero) == [])
        var frames: [[UInt8]] = []
        var effects: [SnapshotSender<Table>.Effect] = []
        for round in 0..<10 where !sender.isEmpty {
            let (_, more) = sender.pump(now: .seconds(Int64(round)), epoch: 3, reopen: { nil }) { _, frame in
                frames.append(frame)
                return .taken
            }
            effects += more
        }
        let parts = try frames.map(Self.part)
        #expect(parts.map(\.part) == (0..<UInt64(frames.count)).map { $0 })
        #expect(parts.map(\.entries).reduce(0, +) == 25 && parts.count > 1)
        #expect(parts.last?.more == false && parts.dropLast().allSatisfy { $0.more == true })
        #expect(effects == [.streamed(peer: Self.peer, parts: UInt64(frames.count), revision: 9), .ended(peer: Self.peer)])
        #expect(table.closed && sender.isEmpty)
    }

    @Test func `a whole snapshot over the limit is refused oversize; a failed view unavailable`() {
        var sender = SnapshotSender<Table>(partBytes: 1_024, deadline: .seconds(30))
        let big = Table(revision: 2, count: 200, valueBytes: 1_024)
        _ = sender.start(to: Self.peer, whole: true, source: .success(big), now: .zero)
        let (_, effects) = sender.pump(now: .zero, epoch: 1, reopen: { nil }) { _, _ in .taken }
        #expect(effects == [
            .refuse(peer: Self.peer, WireError(.oversize, "the state table is over \(WireMessage.snapshotPartTarget) bytes: ask for it in parts (snapshot-request {\"parts\": true})")),
            .ended(peer: Self.peer),
        ])
        #expect(big.closed)
        let failed = sender.start(to: Self.peer, whole: false, source: .failure(TurnStoreError(code: .lmdb, message: "disk gone")), now: .zero)
        #expect(failed == [.refuse(peer: Self.peer, WireError(.unavailable, "cannot read the state table: disk gone")), .ended(peer: Self.peer)])
    }

    @Test func `a requester that takes nothing for the deadline is given up with its view; a new request replaces the old`() {
        var sender = SnapshotSender<Table>(partBytes: 1_024, deadline: .seconds(30))
        let first = Table(revision: 4, count: 25)
        _ = sender.start(to: Self.peer, whole: false, source: .success(first), now: .zero)
        let second = Table(revision: 5, count: 25)
        #expect(sender.start(to: Self.peer, whole: false, source: .success(second), now: .seconds(1)) == [.count("snapshot-replaced")])
        #expect(first.closed && sender.count == 1)
        // Its socket is full: held until the deadline passes (from the start), then abandoned.
        #expect(sender.pump(now: .seconds(31), epoch: 1, reopen: { nil }) { _, _ in .full }.effects == [])
        #expect(sender.pump(now: .seconds(31) + .milliseconds(1), epoch: 1, reopen: { nil }) { _, _ in .full }.effects == [
            .count("snapshot-abandoned"), .ended(peer: Self.peer),
        ])
        #expect(second.closed && sender.isEmpty)

        // Under the simulator's broken rule it never is.
        var broken = SnapshotSender<Table>(partBytes: 1_024, deadline: .seconds(30))
        broken.neverGivesUp = true
        _ = broken.start(to: Self.peer, whole: false, source: .success(Table(revision: 4, count: 25)), now: .zero)
        #expect(broken.pump(now: .seconds(600), epoch: 1, reopen: { nil }) { _, _ in .full }.effects == [])
        #expect(broken.count == 1 && broken.oldestProgress == .zero)
    }

    @Test func `a view that ends under its stream starts over at a new one; a gone requester ends it`() throws {
        var sender = SnapshotSender<Table>(partBytes: 1_024, deadline: .seconds(30))
        let old = Table(revision: 4, count: 25)
        _ = sender.start(to: Self.peer, whole: false, source: .success(old), now: .zero)
        var frames: [[UInt8]] = []
        _ = sender.pump(now: .seconds(1), epoch: 1, reopen: { nil }) { _, frame in frames.append(frame); return .taken }
        old.ended = true
        let fresh = Table(revision: 6, count: 3)
        _ = sender.pump(now: .seconds(2), epoch: 1, reopen: { fresh }) { _, frame in frames.append(frame); return .taken }
        let (_, effects) = sender.pump(now: .seconds(3), epoch: 1, reopen: { nil }) { _, frame in frames.append(frame); return .taken }
        // The new run begins at part 0, at the new view's revision.
        #expect(try frames.map(Self.part).map(\.part) == [0, 0])
        #expect(effects == [.streamed(peer: Self.peer, parts: 1, revision: 6), .ended(peer: Self.peer)])

        _ = sender.start(to: Self.peer, whole: false, source: .success(Table(revision: 7, count: 25)), now: .seconds(4))
        #expect(sender.pump(now: .seconds(5), epoch: 1, reopen: { nil }) { _, _ in .failed }.effects == [.ended(peer: Self.peer)])
        #expect(sender.isEmpty)
    }
}
