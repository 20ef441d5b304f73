import CogCodec
import CogLog
import Foundation
import Testing

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

private func balance(_ account: String, _ amount: Int?) throws -> TurnDraft {
    TurnDraft(
        name: "set()", writes: [TurnWrite(name: "ledger.balance", key: try cbor(account), value: try amount.map { try cbor($0) })])
}

@Suite("State snapshots read in parts")
struct StateSnapshotTests {
    /// Every entry's size counted as 1: `maximumBytes` is then an entry count.
    private func one(_ entry: StateEntry) -> Int { 1 }

    @Test func `a snapshot read in parts holds its revision while appends go on`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        defer { store.close() }
        try store.append(try ["a", "b", "c", "d", "e"].enumerated().map { try balance($1, $0) })
        let before = try store.stateEntries()
        let snapshot = try store.stateSnapshot()
        #expect(snapshot.revision == 5)
        let first = try snapshot.next(maximumBytes: 2, size: one)
        #expect(first.entries == Array(before[0..<2]))
        #expect(first.more)
        // Changed, released and added behind the reader, and in front of it.
        try store.append([try balance("a", 100), try balance("c", 300), try balance("d", nil), try balance("f", 6)])
        #expect(try store.stateEntries() != before)
        let second = try snapshot.next(maximumBytes: 2, size: one)
        let third = try snapshot.next(maximumBytes: 2, size: one)
        #expect(second.entries == Array(before[2..<4]) && second.more)
        #expect(third.entries == Array(before[4..<5]) && !third.more)
        #expect(snapshot.isFinished)
        #expect(try snapshot.next(maximumBytes: 2, size: one) == ([], false))
        // The store went on as if nothing held it.
        #expect(store.lastRevision == 9)
        #expect(try store.verify().isSound)
    }

    @Test func `a part holds at least one entry, and an empty table is one empty last part`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        defer { store.close() }
        let empty = try store.stateSnapshot()
        #expect(try empty.next(maximumBytes: 1_000, size: one) == ([], false))
        try store.append([try balance("a", 1), try balance("b", 2)])
        let snapshot = try store.stateSnapshot()
        let big = try snapshot.next(maximumBytes: 0, size: { _ in 1_000 })
        #expect(big.entries.map(\.key) == [try cbor("a")] && big.more)
    }

    @Test func `a snapshot the map outgrew is ended, says so, and the store keeps writing`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        defer { store.close() }
        try store.append([try balance("a", 1), try balance("b", 2), try balance("c", 3)])
        let snapshot = try store.stateSnapshot()
        _ = try snapshot.next(maximumBytes: 1, size: one)
        let mapBefore = try store.statistics().mapBytes
        let blob = [UInt8](repeating: 7, count: 1 << 20)
        var index = 0
        while try store.statistics().mapBytes == mapBefore, index < 200 {
            try store.append([TurnDraft(name: "blob", writes: [TurnWrite(name: "blob", key: try cbor(index), value: try cbor(Data(blob)))])])
            index += 1
        }
        #expect(try store.statistics().mapBytes > mapBefore, "the map grew after \(index) blobs")
        #expect(throws: TurnStoreError(code: .snapshotEnded, message: "the state snapshot at revision 3 was given up; take a new one")) {
            try snapshot.next(maximumBytes: 1, size: one)
        }
        let fresh = try store.stateSnapshot()
        #expect(fresh.revision == store.lastRevision)
        #expect(try fresh.next(maximumBytes: 10_000, size: one).entries.count == 3 + index)
        #expect(try store.verify().isSound)
    }
}
