/// Why a CURVE key could not be made, read or written (`CurveKeyPair`).
///
/// A struct with a `Code`, so new reasons do not break callers; `message`
/// says what was wrong and, where there is one, the fix.
public struct CurveKeyError: Error, Equatable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The text is not a Z85 key: 40 characters of the Z85 alphabet.
        public static let invalidKey = Code(name: "invalid-key")
        /// The file is not a key file of the expected kind (`protocol/cogwire.md`, "Security").
        public static let invalidFile = Code(name: "invalid-file")
        /// A secret key file that its group or others may read or write.
        public static let exposedSecret = Code(name: "exposed-secret")
        /// A file to write exists already; nothing is overwritten.
        public static let exists = Code(name: "exists")
        /// A file system call failed (its `errno` text is in the message).
        public static let io = Code(name: "io")
        /// This ZeroMQ has no CURVE (`zmq_has("curve")` is false).
        public static let unsupported = Code(name: "unsupported")
        public var description: String { name }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
