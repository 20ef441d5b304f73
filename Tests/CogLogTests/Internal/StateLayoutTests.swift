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
        var drafts = try (0..<300).map { try write(try encoder.encode("a\($0)"), $0) }
        drafts.append(try write(longKey, nil))
        drafts.append(try write(otherLongKey, 5))
        try store.append(drafts)
        #expect(try store.value(name: "ledger.balance", key: longKey) == nil)
        #expect(try store.value(name: "ledger.balance", key: otherLongKey) == (try encoder.encode(5)))
        #expect(try store.verify().isSound)
    }
}
