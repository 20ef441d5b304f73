import CogCodec
import CogLog
import Foundation
import Testing

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

/// A model of the state: what replaying the writes leaves, by name and key.
private struct ModelState {
    private var entries: [String: (name: String, key: [UInt8]?, value: [UInt8])] = [:]

    mutating func apply(_ write: TurnWrite) {
        let id = write.name + "\u{0}" + (write.key.map { $0.map { String($0) }.joined(separator: ",") } ?? "")
        if let value = write.value { entries[id] = (write.name, write.key, value) } else { entries[id] = nil }
    }

    /// The digest recomputed from scratch.
    var digest: StateDigest { StateDigest(entries: entries.values) }
}

/// Random writes over a few names and keys: values, `nil` values (`f6`),
/// releases, and a key too long for LMDB (stored under its digest).
private func randomWrite(_ generator: inout SplitMix64) throws -> TurnWrite {
    let longKey = try cbor(String(repeating: "k", count: 600))
    switch Int.random(in: 0..<4, using: &generator) {
    case 0: return TurnWrite(name: "trails.loaded", key: nil, value: Bool.random(using: &generator) ? [0xf6] : try cbor(Int.random(in: 0..<5, using: &generator)))
    case 1: return TurnWrite(name: "ledger.long", key: longKey, value: Bool.random(using: &generator) ? nil : try cbor(Int.random(in: 0..<3, using: &generator)))
    default:
        let key = try cbor("a\(Int.random(in: 0..<6, using: &generator))")
        let roll = Int.random(in: 0..<10, using: &generator)
        return TurnWrite(name: "ledger.accounts", key: key, value: roll < 2 ? nil : roll < 3 ? [0xf6] : try cbor(["balance": roll]))
    }
}

@Suite("State digest")
struct StateDigestTests {
    @Test func `kept incrementally it equals the digest recomputed from scratch, through writes, releases and nil values`() throws {
        var generator = SplitMix64(seed: 5)
        var model = ModelState()
        var held: [String: (name: String, key: [UInt8]?, value: [UInt8]?)] = [:]
        var digest = StateDigest()
        for step in 0..<2_000 {
            let write = try randomWrite(&generator)
            let id = write.name + "/" + (write.key.map { "\($0)" } ?? "")
            digest.apply(name: write.name, key: write.key, old: held[id]?.value, new: write.value)
            held[id] = (write.name, write.key, write.value)
            model.apply(write)
            #expect(digest == model.digest, "step \(step)")
            guard digest == model.digest else { break }
        }
        #expect(digest != StateDigest())
        // Releasing everything gives the empty state's digest back.
        for entry in held.values { digest.apply(name: entry.name, key: entry.key, old: entry.value, new: nil) }
        #expect(digest == StateDigest())
        #expect(StateDigest(bytes: model.digest.bytes) == model.digest)
        #expect(StateDigest(bytes: [1, 2, 3]) == nil, "a digest is 16 bytes")
    }

    @Test func `every record the store commits carries the digest of the state after it, across batches and reopening`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        var generator = SplitMix64(seed: 11)
        var model = ModelState()
        var expected: [StateDigest] = []
        for round in 0..<4 {
            let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
            for _ in 0..<6 {
                // Batches of 1 to 40 turns of 0 to 3 writes: a key written twice in one batch, a turn writing nothing.
                let drafts = try (0..<Int.random(in: 1...40, using: &generator)).map { _ in
                    TurnDraft(name: "t", writes: try (0..<Int.random(in: 0...3, using: &generator)).map { _ in try randomWrite(&generator) })
                }
                try store.append(drafts)
                for draft in drafts {
                    for write in draft.writes { model.apply(write) }
                    expected.append(model.digest)
                }
                #expect(try store.currentStateDigest() == model.digest, "round \(round)")
            }
            store.close()
        }
        let reader = try TurnStore(directory: folder.path, mode: .reader)
        let records = try reader.records(from: 1)
        #expect(records.map(\.stateDigest) == expected)
        let table = try reader.stateEntries().map { (name: $0.name, key: $0.key, value: $0.value) }
        #expect(StateDigest(entries: table) == expected.last)
        #expect(try reader.currentStateDigest() == expected.last)
        #expect(try reader.stateDigest(at: 3) == expected[2])
        #expect(try reader.stateDigest(at: 0) == StateDigest())
        #expect(try reader.stateDigest(at: UInt64(expected.count) + 1) == nil)
        let report = try reader.verify()
        #expect(report.problem == nil)
        #expect(report.stateDigest == expected.last)
        let snapshot = try reader.stateSnapshot()
        #expect(snapshot.revision == UInt64(expected.count))
        #expect(snapshot.stateDigest == expected.last)
        snapshot.close()
    }

    @Test func `a record round-trips its state digest, a system record keeps it unchanged, a nil value beside scope events counts as a value`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try store.append([TurnDraft(name: "open()", writes: [TurnWrite(name: "ledger.openCount", key: nil, value: try cbor(1))])])
        try store.append([TurnDraft(name: "cogd.workerGone", writes: [], scopeEvents: [
            ScopeEvent(kind: .retire, instance: 1 << 32 | 1, scope: "Bank.desk", identity: nil, worker: "w1", registration: 1)
        ])])
        // A nil value in a record with scope events (read by the general decoder, not the scanner).
        try store.append([TurnDraft(name: "close()", writes: [TurnWrite(name: "trails.loaded", key: nil, value: [0xf6])], scopeEvents: [
            ScopeEvent(kind: .retire, instance: 1 << 32 | 2, scope: "Trails.screen", identity: try cbor(5), worker: "w1", registration: 2)
        ])])
        let records = try store.records(from: 1)
        let after = StateDigest(entries: [(name: "ledger.openCount", key: nil, value: try cbor(1))])
        var closed = after
        closed.apply(name: "trails.loaded", key: nil, old: nil, new: [0xf6])
        #expect(records.map(\.stateDigest) == [after, after, closed])
        #expect(records[2].writes == [TurnWrite(name: "trails.loaded", key: nil, value: [0xf6])])
        for record in records {
            #expect(try TurnRecord.decode(record.encoded()) == record)
        }
    }
}
