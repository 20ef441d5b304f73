/// The digest of a request's op and argument, kept with its answer: a
/// request id names one request for good, so a retry that carries another
/// op or argument under the same id is refused instead of being answered as
/// if it were the first (`protocol/cogwire.md` §4).
///
/// The first 8 bytes of SHA-256 over the op name's UTF-8, one `0x00` byte,
/// then the argument's bytes as sent.
public enum RequestDigest {
    /// Bytes in a digest.
    public static let size = 8

    /// The digest of `op` with `argument`.
    public static func of(op: String, argument: [UInt8]) -> [UInt8] {
        // SHA-256 of op's UTF-8, a zero byte, the argument: fed in place (no message copied).
        var hasher = SHA256()
        var op = op
        op.withUTF8 { hasher.update(UnsafeRawBufferPointer($0)) }
        withUnsafeBytes(of: UInt8(0)) { hasher.update($0) }
        argument.withUnsafeBytes { hasher.update($0) }
        let prefix = hasher.finishPrefix128() >> 64
        return withUnsafeBytes(of: UInt64(truncatingIfNeeded: prefix).bigEndian) { Array($0) }
    }
}
