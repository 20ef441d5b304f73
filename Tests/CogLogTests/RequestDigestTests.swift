import CogCodec
import Testing

/// `RequestDigest.of` hashes in place what the documents define: SHA-256 of
/// the op's UTF-8, a zero byte and the argument, its first 8 bytes
/// (`protocol/turnlog.md`), whatever the lengths.
@Suite("request digest")
struct RequestDigestTests {
    @Test func `the digest is the first 8 bytes of SHA-256 over op, a zero byte and the argument, across block sizes`() {
        for (op, count) in [("ledger.open", 0), ("ledger.transfer", 23), ("é.ñ", 55), ("trails.accept", 64), (String(repeating: "o", count: 70), 300)] {
            let argument = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let whole = Array(op.utf8) + [0] + argument
            #expect(RequestDigest.of(op: op, argument: argument) == Array(SHA256.hash(whole).prefix(RequestDigest.size)), "\(op) \(count)")
        }
        // Fixed: a known value, so a change of the definition shows.
        #expect(RequestDigest.of(op: "", argument: []) == Array(SHA256.hash([0]).prefix(8)))
        #expect(RequestDigest.of(op: "", argument: []) == [0x6e, 0x34, 0x0b, 0x9c, 0xff, 0xb3, 0x7a, 0x98])
    }
}
