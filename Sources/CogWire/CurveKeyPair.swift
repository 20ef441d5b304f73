internal import CZMQ
import CogProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// A CURVE key pair (ZeroMQ RFC 26), its keys as Z85 text, and the key files
/// `cogd keys` writes and the later CURVE options read.
///
/// A key is 32 bytes written as 40 characters of the Z85 alphabet
/// (`0-9 a-z A-Z .-:+=^!/*?&<>()[]{}@%$#`). A key file is UTF-8 text: blank
/// lines and lines starting with `#` are ignored, and exactly one line is
/// `secret-key = KEY` (a secret key file, `NAME.key`, mode 0600) or
/// `public-key = KEY` (a public key file, `NAME.pub`) — `protocol/cogwire.md`,
/// "Security".
///
/// ```swift
/// let pair = try CurveKeyPair.generate()
/// let files = try pair.write(name: "leader", to: "/etc/cogd/keys")   // leader.key, leader.pub
/// let again = try CurveKeyPair.load(secretKeyFile: files.secretKeyFile)
/// ```
///
/// - Important: `secretKey` is the secret; `description` shows only the
///   public key, so printing a pair never prints it. Loading a secret key file
///   that its group or others may read or write is refused.
public struct CurveKeyPair: Equatable, Sendable, CustomStringConvertible {
    /// The public key, 40 Z85 characters: what peers list and connect with.
    public let publicKey: String
    /// The secret key, 40 Z85 characters. Never print or send it.
    public let secretKey: String

    /// The pair whose secret key is `secretKey` (Z85); its public key is
    /// derived with `zmq_curve_public`.
    public init(secretKey: String) throws(CurveKeyError) {
        guard Self.isValidKey(secretKey) else {
            throw CurveKeyError(.invalidKey, "a CURVE secret key is 40 characters of the Z85 alphabet")
        }
        try Self.requireCurve()
        var derived = [CChar](repeating: 0, count: 41)
        let result = secretKey.withCString { zmq_curve_public(&derived, $0) }
        guard result == 0 else {
            throw CurveKeyError(.invalidKey, "zmq_curve_public failed: \(String(cString: zmq_strerror(zmq_errno())))")
        }
        self.publicKey = String(decoding: derived.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        self.secretKey = secretKey
    }

    /// A new pair from ZeroMQ's random source (`zmq_curve_keypair`).
    public static func generate() throws(CurveKeyError) -> CurveKeyPair {
        try requireCurve()
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicText, &secretText) == 0 else {
            throw CurveKeyError(.unsupported, "zmq_curve_keypair failed: \(String(cString: zmq_strerror(zmq_errno())))")
        }
        let secret = String(decoding: secretText.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let pair = try CurveKeyPair(secretKey: secret)
        let generatedPublic = String(decoding: publicText.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard pair.publicKey == generatedPublic else {
            fatalError("internal inconsistency: zmq_curve_public disagrees with zmq_curve_keypair")
        }
        return pair
    }

    public var description: String { "CurveKeyPair(public: \(publicKey))" }

    // MARK: Z85

    /// The Z85 alphabet (ZeroMQ RFC 32), in digit order.
    static let z85Alphabet = CurveKeyText.alphabet

    /// Whether `text` is a Z85 key: 40 characters of the Z85 alphabet whose
    /// every group of five encodes a 32-bit value (32 bytes in all).
    public static func isValidKey(_ text: String) -> Bool { CurveKeyText.isValid(text) }

    /// The Z85 text of a 32-byte key (as a ZAP request carries it).
    public static func z85(_ key: [UInt8]) -> String {
        precondition(key.count % 4 == 0, "internal inconsistency: Z85 encodes groups of 4 bytes")
        var text: [UInt8] = []
        text.reserveCapacity(key.count / 4 * 5)
        for group in stride(from: 0, to: key.count, by: 4) {
            var value = UInt32(key[group]) << 24 | UInt32(key[group + 1]) << 16 | UInt32(key[group + 2]) << 8 | UInt32(key[group + 3])
            var digits = [UInt8](repeating: 0, count: 5)
            for index in stride(from: 4, through: 0, by: -1) {
                digits[index] = z85Alphabet[Int(value % 85)]
                value /= 85
            }
            text += digits
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func requireCurve() throws(CurveKeyError) {
        guard zmq_has("curve") == 1 else {
            throw CurveKeyError(.unsupported, "this ZeroMQ was built without CURVE (zmq_has(\"curve\") is false); install a libzmq with libsodium")
        }
    }
}
