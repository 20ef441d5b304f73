import CogCodec
import Foundation
import Testing

@testable import CogLog

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

@Suite("State layout (internal)")
struct StateLayoutTests {
    @Test func `SHA-256 matches the FIPS 180-4 examples`() {
        #expect(hex(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hex(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            hex(SHA256.hash([UInt8](repeating: 0x61, count: 1_000_000)))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func `the SHA instructions and the rounds agree on every length, streamed in any pieces, and on the FIPS examples`() {
        #expect(hex(SHA256.softwareHash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hex(SHA256.softwareHash([UInt8](repeating: 0x61, count: 1_000_000)))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        var generator = SplitMix64(seed: 3)
        let bytes = (0..<700).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for count in Array(0...130) + [191, 192, 193, 255, 256, 257, 700] {
            let message = Array(bytes.prefix(count))
            let expected = SHA256.softwareHash(message)
            #expect(SHA256.hash(message) == expected, "\(count) bytes (SHA instructions: \(SHA256.usesHardware))")
            // In three pieces cut anywhere, and as the 16-byte prefix of the one-shot path.
            let cut = count / 3, cut2 = count - count / 5
            var streamed = SHA256()
            message.withUnsafeBytes { all in
                for piece in [all[..<cut], all[cut..<cut2], all[cut2...]] { streamed.update(UnsafeRawBufferPointer(rebasing: piece)) }
            }
            #expect(streamed.finish() == expected, "\(count) bytes in pieces")
            let prefix = SHA256.prefix128(count: count) { out in message.withUnsafeBytes { out.copyMemory(from: $0.baseAddress!, byteCount: count) } }
            #expect(StateDigest(value: prefix).bytes == Array(expected.prefix(16)), "\(count) bytes at once")
        }
    }

    @Test func `a key too long for LMDB is stored under its digest and reads back whole`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let encoder = CBOREncoder()
        let longKey = try encoder.encode(String(repeating: "k", count: 2_000))
        let otherLongKey = try encoder.encode(String(repeating: "k", count: 1_999) + "j")
        func write(_ key: [UInt8], _ value: Int?) throws -> TurnDraft {
            TurnDraft(name: "set", writes: [TurnWrite(name: "ledger.balance", key: key, value: try value.map { try encoder.encode($0) })])
        }
        try store.append([try write(longKey, 1), try write(otherLongKey, 2), try write(try encoder.encode("short"), 3)])
        #expect(try store.value(name: "ledger.balance", key: longKey) == (try encoder.encode(1)))
        #expect(try store.value(name: "ledger.balance", key: otherLongKey) == (try encoder.encode(2)))
        let entries = try store.stateEntries()
        #expect(entries.count == 3)
        #expect(Set(entries.compactMap(\.key)) == [longKey, otherLongKey, try encoder.encode("short")])
        #expect(entries.first { $0.key == longKey }?.value == (try encoder.encode(1)))
        #expect(try store.verify().isSound)
        // The stored key is the name, 0, 0xFF and the digest of the encoded key.
        let stored = Array("ledger.balance".utf8) + [0, 0xFF] + SHA256.hash(longKey)
        #expect(try store.rawRead(database: "state", key: stored) == TurnStore.bytes(UInt64(longKey.count)) + longKey + (try encoder.encode(1)))
        // Released, in a group commit large enough for the sorted path.
        var drafts = try (0..<300).map { (index: Int) in try write(try encoder.encode("a\(index)"), index) }
        drafts.append(try write(longKey, nil))
        drafts.append(try write(otherLongKey, 5))
        try store.append(drafts)
        #expect(try store.value(name: "ledger.balance", key: longKey) == nil)
        #expect(try store.value(name: "ledger.balance", key: otherLongKey) == (try encoder.encode(5)))
        #expect(try store.verify().isSound)
    }
}

@Suite("The log bench's raw baseline with the state table (internal)")
struct RawStatePutsTests {
    private func write(_ account: String, _ balance: Int) throws -> TurnDraft {
        let encoder = CBOREncoder()
        return TurnDraft(
            name: "deposit", writes: [TurnWrite(name: "ledger.balance", key: try encoder.encode(account), value: try encoder.encode(balance))])
    }

    /// The store's state table as stored bytes: key → value.
    private func storedState(_ store: TurnStore) throws -> [[UInt8]: [UInt8]] {
        var table: [[UInt8]: [UInt8]] = [:]
        for entry in try store.stateEntries() {
            let stored = StateLayout.entry(name: entry.name, key: entry.key, value: entry.value)
            table[stored.key] = stored.value
        }
        return table
    }

    @Test func `its puts leave what the store's commit leaves, in key order for a large commit`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        defer { store.close() }
        // Small (write order, repeated keys put each time) and large (key order, each key once).
        let small = try (0..<10).map { try write("s\($0 % 4)", $0) }
        let large = try (0..<600).map { try write("a\(($0 * 7) % 150)", $0) }
        var applied: [[UInt8]: [UInt8]] = [:]
        for drafts in [small, large] {
            try store.append(drafts)
            let puts = RawAppendBaseline.StatePuts(drafts: drafts).puts
            #expect(puts.count == (drafts.count >= StateBatch.sortThreshold ? 150 : 10))
            if drafts.count >= StateBatch.sortThreshold {
                #expect(zip(puts, puts.dropFirst()).allSatisfy { $0.key.lexicographicallyPrecedes($1.key) })
            }
            for put in puts { applied[put.key] = put.value }
            #expect(applied == (try storedState(store)))
        }
        #expect(applied.count == 154)
    }
}
