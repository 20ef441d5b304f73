import Foundation
import Testing

@testable import CogLog

/// The state digest's cache of entry hashes: short keys held in place, long
/// ones as arrays, in an open-addressing table that doubles.
@Suite("The entry-hash cache")
struct EntryHashCacheTests {
    @Test func `keys are equal exactly when their bytes are, at every length around the 32 held in place`() {
        let lengths = [0, 1, 7, 8, 9, 31, 32, 33, 64, 600]
        var cache = EntryHashCache()
        for (index, length) in lengths.enumerated() {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            #expect(StoredKey(bytes: bytes) == StoredKey(bytes: Array(bytes)), "\(length) bytes")
            #expect(cache.exchange(UInt128(index + 1), for: StoredKey(bytes: bytes)) == nil, "\(length) bytes: not a shorter key's")
            // A trailing zero is a byte of the key, not padding.
            #expect(StoredKey(bytes: bytes + [0]) != StoredKey(bytes: bytes), "\(length) bytes and a zero")
            if length > 0 {
                var changed = bytes
                changed[length - 1] ^= 0xff
                #expect(StoredKey(bytes: changed) != StoredKey(bytes: bytes), "\(length) bytes, the last one changed")
            }
        }
        #expect(cache.count == lengths.count)
        for (index, length) in lengths.enumerated() {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            #expect(cache.exchange(100, for: StoredKey(bytes: bytes)) == UInt128(index + 1), "\(length) bytes")
        }
        #expect(cache.count == lengths.count)
    }

    @Test func `a plain key built from its name and key is the stored key name, zero, key`() {
        let name = Array("ledger.accounts".utf8)
        for key in [nil, [], [0x6b, 0x61], Array(repeating: UInt8(0x2a), count: 16), Array(repeating: UInt8(0x2b), count: 40)] as [[UInt8]?] {
            let stored = name + [0] + (key ?? [])
            let built = name.withUnsafeBytes { name in
                key.map { key in key.withUnsafeBytes { StoredKey(plainName: name, key: $0) } } ?? StoredKey(plainName: name, key: nil)
            }
            #expect(built == StoredKey(bytes: stored), "key of \(key?.count ?? -1) bytes")
        }
    }

    @Test func `every key keeps its hash through the table's doublings, and removeAll forgets them`() {
        var cache = EntryHashCache()
        func key(_ index: Int) -> StoredKey {
            StoredKey(bytes: Array("ledger.accounts".utf8) + [0] + Array("account-\(index)".utf8) + (index % 7 == 0 ? Array(repeating: 1, count: 30) : []))
        }
        for index in 0..<5_000 { #expect(cache.exchange(UInt128(index) << 64 | 1, for: key(index)) == nil) }
        #expect(cache.count == 5_000)
        var kept = 0
        for index in 0..<5_000 where cache.exchange(0, for: key(index)) == UInt128(index) << 64 | 1 { kept += 1 }
        #expect(kept == 5_000)
        #expect(cache.exchange(7, for: key(5_000)) == nil)
        cache.removeAll()
        #expect(cache.count == 0)
        #expect(cache.exchange(7, for: key(12)) == nil)
        #expect(cache.exchange(8, for: key(12)) == 7)
    }
}
