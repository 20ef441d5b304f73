/// The text form of a CURVE key (ZeroMQ RFC 26): 32 bytes as 40
/// characters of the Z85 alphabet (ZeroMQ RFC 32). Here, not beside `CurveKeyPair` in
/// `CogWire`, because the peers file (`PeerTable`) checks its keys without
/// ZeroMQ; `CurveKeyPair.isValidKey` asks this.
public enum CurveKeyText {
    /// The Z85 alphabet, digit 0 first.
    package static let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)

    private static let digits: [UInt8: UInt64] = Dictionary(
        uniqueKeysWithValues: alphabet.enumerated().map { ($0.element, UInt64($0.offset)) })

    /// Whether `text` is a Z85 key: 40 characters of the Z85 alphabet whose
    /// every group of five encodes a 32-bit value (32 bytes in all).
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 40 else { return false }
        for group in stride(from: 0, to: 40, by: 5) {
            var value: UInt64 = 0
            for byte in bytes[group..<group + 5] {
                guard let digit = digits[byte] else { return false }
                value = value * 85 + digit
            }
            guard value <= UInt64(UInt32.max) else { return false }
        }
        return true
    }
}
