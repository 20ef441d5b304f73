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
        var message = Array(op.utf8)
        message.append(0)
        message += argument
        return Array(SHA256.hash(message).prefix(size))
    }
}
