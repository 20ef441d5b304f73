import CogCodec
import Foundation
import Testing

@testable import CogLog

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

@Suite("Schema 3 and 4: nil values, checksums, state digests, upgrades (internal)")
struct SchemaThreeTests {
    private let nilValue: [UInt8] = [0xf6]

    /// trails.loaded = 5, then nil (a value), then ledger["a"] = 1, then released.
    private func writeLog(_ folder: TemporaryFolder) throws {
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try store.append([TurnDraft(name: "load()", writes: [TurnWrite(name: "trails.loaded", key: nil, value: try cbor(5))])])
        try store.append([TurnDraft(name: "closeScreen()", writes: [TurnWrite(name: "trails.loaded", key: nil, value: nilValue)])])
        try store.append([TurnDraft(name: "open()", writes: [TurnWrite(name: "ledger", key: try cbor("a"), value: try cbor(1))])])
        try store.append([TurnDraft(name: "discard", writes: [TurnWrite(name: "ledger", key: try cbor("a"), value: nil)])])
    }

    @Test func `CRC-32C gives the standard check value`() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xff, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum(Array(0..<32).map(UInt8.init)) == 0x46DD_794E)
    }

    @Test func `the CRC32 instruction and the tables agree on every length and offset`() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<1_100).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes.withUnsafeBytes { all in
            for start in 0..<9 {
                for count in [0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 200, 1_000] {
                    let slice = UnsafeRawBufferPointer(rebasing: all[start..<(start + count)])
                    #expect(CRC32C.update(0xFFFF_FFFF, slice) == CRC32C.softwareUpdate(0xFFFF_FFFF, slice), "offset \(start), \(count) bytes")
                }
            }
        }
    }

    @Test func `a nil value is stored, read back and replayed as a value; a release as a release`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try writeLog(folder)
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try store.value(name: "trails.loaded", key: nil) == nilValue)
        #expect(try store.value(name: "ledger", key: try cbor("a")) == nil)
        let records = try store.records(from: 1)
        #expect(records[1].writes == [TurnWrite(name: "trails.loaded", key: nil, value: nilValue)])
        #expect(records[1].writes[0].isRelease == false)
        #expect(records[3].writes[0].isRelease == true)
        #expect(try store.verify().problem == nil)
        #expect(records[1].displayLines[1] == "    trails.loaded = null")
        #expect(records[3].displayLines[1] == "    ledger[\"a\"] = released")
        #expect(records[1].jsonLine.contains(#"{"name": "trails.loaded", "key": null, "value": null, "released": false}"#))
        #expect(records[3].jsonLine.contains(#"{"name": "ledger", "key": "a", "value": null, "released": true}"#))
        // On disk: a write always has `value`; a release has `released: true` and no `value`.
        let nilRecord = try #require(try store.rawRead(database: "turns", key: TurnStore.bytes(2)))
        #expect(nilRecord.starts(with: [0xa9, 0x63, 0x63, 0x72, 0x63, 0x44]))
        #expect(nilRecord.suffix(7) == ArraySlice(Array("\u{65}value".utf8) + [0xf6]))
        let releaseRecord = try #require(try store.rawRead(database: "turns", key: TurnStore.bytes(4)))
        #expect(releaseRecord.suffix(10) == ArraySlice([0x68] + Array("released".utf8) + [0xf5]))
    }

    @Test func `a schema 2 folder is refused by the writer and by readers, naming the upgrade`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try writeLog(folder)
        try TurnStore.rewriteAsOlderSchema(directory: folder.path, schema: 2)
        let expected =
            "data folder \(folder.path) has schema version 2; this cogd reads schemas 4 and 5 only (its records cannot tell a nil value from a release) — run `cogd log upgrade --data \(folder.path)` to rewrite it"
        for mode in [TurnStore.Mode.writer, .reader] {
            do {
                _ = try TurnStore(directory: folder.path, mode: mode)
                Issue.record("opened a schema 2 folder as \(mode)")
            } catch {
                #expect(error.code == .olderSchema)
                #expect(error.message == expected)
            }
        }
    }

    @Test func `the upgrade rewrites a schema 2 folder: checksums, null writes as releases, state as the replay`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try writeLog(folder)
        try TurnStore.rewriteAsOlderSchema(directory: folder.path, schema: 2)
        let report = try TurnStore.upgrade(directory: folder.path)
        #expect(report == UpgradeReport(fromSchema: 2, recordsRewritten: 4, nullWritesAsReleases: 2, stateEntriesRemoved: 1))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try store.rawRead(database: "meta", key: Array("schema".utf8)) == TurnStore.bytes(4))
        #expect(try store.verify().problem == nil, "every record carries the digest of the replay")
        let records = try store.records(from: 1)
        #expect(records.map { $0.writes[0].isRelease } == [false, true, false, true], "schema 2's null read as a release")
        #expect(try store.value(name: "trails.loaded", key: nil) == nil, "the state table follows the log it now holds")
        #expect(try store.value(name: "trails.loaded", key: nil) == nil)
        // Again: nothing to do.
        store.close()
        #expect(try TurnStore.upgrade(directory: folder.path).fromSchema == 4)
        let writer = try TurnStore(directory: folder.path, mode: .writer)
        #expect(writer.lastRevision == 4)
    }

    @Test func `a schema 3 folder is refused until upgraded; the upgrade gives every record the digest of the state after it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try writeLog(folder)
        let written = try TurnStore(directory: folder.path, mode: .reader).records(from: 1)
        try TurnStore.rewriteAsOlderSchema(directory: folder.path, schema: 3)
        do {
            _ = try TurnStore(directory: folder.path, mode: .reader)
            Issue.record("opened a schema 3 folder")
        } catch {
            #expect(error.code == .olderSchema)
            #expect(error.message.contains("has schema version 3; this cogd reads schemas 4 and 5 only (its records carry no state digest) — run `cogd log upgrade"))
        }
        // Its records start `a8 …` (8 keys: no `state`), which only the upgrade reads.
        let data = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/data.mdb"))
        #expect(data.range(of: Data([0xa8, 0x63, 0x63, 0x72, 0x63, 0x44])) != nil)
        let report = try TurnStore.upgrade(directory: folder.path)
        #expect(report == UpgradeReport(fromSchema: 3, recordsRewritten: 4, nullWritesAsReleases: 0, stateEntriesRemoved: 0))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try store.records(from: 1) == written, "the same records, digests included")
        #expect(try store.verify().problem == nil)
    }

    @Test func `the upgrade of a schema 1 folder also drops last-revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try writeLog(folder)
        try TurnStore.rewriteAsOlderSchema(directory: folder.path, schema: 1)
        #expect(try TurnStore.upgrade(directory: folder.path).fromSchema == 1)
        let store = try TurnStore(directory: folder.path, mode: .writer)
        #expect(try store.rawRead(database: "meta", key: Array("last-revision".utf8)) == nil)
        #expect(store.unindexedFrom == nil)
        #expect(try store.verify().problem == nil)
    }

    @Test func `an interrupted upgrade is run again: records already rewritten are kept`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try writeLog(folder)
        // As if the first chunk had committed: record 1 is schema 3 already.
        try TurnStore.rewriteAsOlderSchema(directory: folder.path, schema: 2, except: [1])
        let report = try TurnStore.upgrade(directory: folder.path)
        #expect(report.recordsRewritten == 3)
        #expect(try TurnStore(directory: folder.path, mode: .reader).verify().problem == nil)
    }

    @Test func `a bit flipped anywhere inside an old record of a real store file is caught, naming its revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        do {
            let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
            for batch in 0..<20 {
                try store.append(
                    (0..<10).map { index in
                        let n = batch * 10 + index
                        return TurnDraft(
                            name: "deposit(\(n))", origin: n % 3 == 0 ? .system : TurnOrigin(worker: "w\(n % 4)", request: RequestID(worker: "w\(n % 4)", sequence: UInt64(n))),
                            writes: [
                                TurnWrite(name: "ledger", key: try cbor("a\(n % 7)"), value: n % 5 == 4 ? nil : try cbor(n)),
                                TurnWrite(name: "trails.loaded", key: nil, value: n % 2 == 0 ? nilValue : try cbor(["name": "Ridge \(n)"])),
                            ])
                    })
            }
        }
        let path = folder.path + "/data.mdb"
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        var generator = SplitMix64(seed: 13)
        var caught = 0
        for _ in 0..<64 {
            let revision = UInt64.random(in: 1...150, using: &generator)
            let stored = try TurnStore(directory: folder.path, mode: .reader).records(from: revision, limit: 1)[0].encoded()
            // LMDB copies pages on write: a record may also lie in pages no
            // longer in use. The same bit is flipped in every copy.
            var copies: [Int] = []
            var searchFrom = original.startIndex
            while let range = original.range(of: Data(stored), in: searchFrom..<original.endIndex) {
                copies.append(range.lowerBound)
                searchFrom = range.upperBound
            }
            #expect(!copies.isEmpty, "record \(revision) lies in the file as it is")
            let bit = Int.random(in: 0..<(stored.count * 8), using: &generator)
            var damaged = original
            for start in copies { damaged[start + bit / 8] ^= 1 << UInt8(bit % 8) }
            try damaged.write(to: URL(fileURLWithPath: path))
            let reader = try TurnStore(directory: folder.path, mode: .reader)
            let problem = try reader.verify().problem
            #expect(problem?.hasPrefix("turn \(revision) is damaged: ") == true, "bit \(bit) of turn \(revision): \(problem ?? "not caught")")
            do {
                _ = try reader.records(from: 1)
                Issue.record("a damaged record was read")
            } catch {
                #expect(error.code == .corrupt)
                #expect(error.message.hasPrefix("turn \(revision) in \(folder.path) is damaged"))
                caught += 1
            }
            reader.close()
        }
        try original.write(to: URL(fileURLWithPath: path))
        #expect(caught == 64)
        #expect(try TurnStore(directory: folder.path, mode: .reader).verify().problem == nil)
    }
}

@Suite("Out-of-range metadata (internal)")
struct OutOfRangeMetadataTests {
    private func folderWithTwoTurns() throws -> TemporaryFolder {
        let folder = TemporaryFolder()
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try store.append([TurnDraft(name: "a", writes: [TurnWrite(name: "x", key: nil, value: [1])])])
        try store.append([TurnDraft(name: "b", writes: [TurnWrite(name: "x", key: nil, value: [2])])])
        return folder
    }

    private func rawWrite(_ folder: TemporaryFolder, _ database: String, _ key: [UInt8], _ value: [UInt8]?) throws {
        let store = try TurnStore(directory: folder.path, mode: .writer)
        try store.rawWrite(database: database, key: key, value: value)
    }

    private func refusal(_ folder: TemporaryFolder, _ mode: TurnStore.Mode) -> TurnStoreError? {
        do {
            _ = try TurnStore(directory: folder.path, mode: mode)
            return nil
        } catch {
            return error
        }
    }

    @Test func `an epoch of 2^64-1 is refused by the writer, not a trap`() throws {
        let folder = try folderWithTwoTurns()
        defer { folder.cleanUp() }
        try rawWrite(folder, "meta", Array("epoch".utf8), TurnStore.bytes(.max))
        #expect(refusal(folder, .writer)?.message == "data folder \(folder.path): meta.epoch is 18446744073709551615, the largest there is; no new epoch can follow it")
        #expect(try TurnStore(directory: folder.path, mode: .reader).epoch == .max, "a reader only reads it")
    }

    @Test func `a huge schema number is refused as newer`() throws {
        let folder = try folderWithTwoTurns()
        defer { folder.cleanUp() }
        try rawWrite(folder, "meta", Array("schema".utf8), TurnStore.bytes(.max))
        for mode in [TurnStore.Mode.writer, .reader] {
            #expect(refusal(folder, mode)?.code == .newerSchema)
        }
    }

    @Test func `a meta value of the wrong length is refused, naming it`() throws {
        let folder = try folderWithTwoTurns()
        defer { folder.cleanUp() }
        try rawWrite(folder, "meta", Array("epoch".utf8), [1, 2, 3])
        for mode in [TurnStore.Mode.writer, .reader] {
            #expect(refusal(folder, mode)?.message == "data folder \(folder.path): meta.epoch is 3 bytes, expected 8")
        }
    }

    @Test func `a revision key of the wrong length is refused, naming it`() throws {
        let folder = try folderWithTwoTurns()
        defer { folder.cleanUp() }
        try rawWrite(folder, "turns", TurnStore.bytes(2) + [0], [0xa0])
        for mode in [TurnStore.Mode.writer, .reader] {
            #expect(refusal(folder, mode)?.message == "data folder \(folder.path): a `turns` key is 9 bytes (0 0 0 0 0 0 0 2 0), not an 8-byte revision from 1")
        }
    }

    @Test func `a digest state entry claiming a key of 2^64-1 bytes reads as a mismatch, not a trap`() throws {
        let folder = try folderWithTwoTurns()
        defer { folder.cleanUp() }
        let key = [UInt8](repeating: 0x41, count: 600)
        let stored = StateLayout.entry(name: "big", key: key, value: [1]).key
        try rawWrite(folder, "state", stored, TurnStore.bytes(.max) + [1, 2, 3])
        let store = try TurnStore(directory: folder.path, mode: .reader)
        _ = try store.value(name: "big", key: key)  // before: `8 + length` trapped
        #expect(try store.stateEntries().map(\.name) == ["big", "x"])
        #expect(try store.verify().problem == "state holds big, which no turn in the log wrote")
    }

    @Test func `a last revision of 2^64-1 refuses the next append instead of trapping`() throws {
        let folder = try folderWithTwoTurns()
        defer { folder.cleanUp() }
        try rawWrite(folder, "turns", TurnStore.bytes(.max), [0xa0])
        let store = try TurnStore(directory: folder.path, mode: .writer)
        #expect(store.lastRevision == .max)
        #expect(throws: TurnStoreError.self) { try store.append([TurnDraft(name: "c", writes: [TurnWrite(name: "x", key: nil, value: [3])])]) }
        #expect(try store.verify().problem == "revision 3 is missing (the next stored one is 18446744073709551615)")
    }

}

/// A small seeded generator (SplitMix64), so a failure can be replayed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
