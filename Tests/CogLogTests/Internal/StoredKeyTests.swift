import Foundation
import Testing

@testable import CogLog

/// The state digest's cache key: short keys held in place, long ones as arrays.
@Suite("Stored keys in the entry-hash cache")
struct StoredKeyTests {
    @Test func `keys are equal exactly when their bytes are, at every length around the 32 held in place`() {
        let lengths = [0, 1, 7, 8, 9, 31, 32, 33, 64, 600]
        var keys: [StoredKey] = []
        var set = Set<StoredKey>()
        for length in lengths {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            keys.append(StoredKey(bytes: bytes))
            #expect(StoredKey(bytes: bytes) == StoredKey(bytes: Array(bytes)), "\(length) bytes")
            #expect(set.insert(StoredKey(bytes: bytes)).inserted, "\(length) bytes: not equal to a shorter key")
            // A trailing zero is a byte of the key, not padding.
            #expect(StoredKey(bytes: bytes + [0]) != StoredKey(bytes: bytes), "\(length) bytes and a zero")
            if length > 0 {
                var changed = bytes
                changed[length - 1] ^= 0xff
                #expect(StoredKey(bytes: changed) != StoredKey(bytes: bytes), "\(length) bytes, the last one changed")
            }
        }
        #expect(Set(keys).count == lengths.count)
    }
}
