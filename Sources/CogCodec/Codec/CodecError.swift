/// Why a value could not be encoded or decoded. `path` names where, in the
/// value's own terms (`accounts.3.balance`).
public struct CodecError: Error, Equatable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        /// The bytes are not CBOR the codec accepts (truncated, garbage, indefinite lengths, trailing bytes).
        public static let malformed = Code(name: "malformed")
        /// The CBOR is well formed but does not have the shape the type needs.
        public static let typeMismatch = Code(name: "type-mismatch")
        /// A field the type requires is missing.
        public static let missingField = Code(name: "missing-field")
        /// A number does not fit the type, or a value is otherwise invalid for it.
        public static let invalidValue = Code(name: "invalid-value")
        /// The value's own `encode(to:)` failed.
        public static let encodingFailed = Code(name: "encoding-failed")
        public var description: String { name }
    }

    public let code: Code
    /// Coding-path components from the root (`["accounts", "3", "balance"]`).
    public let path: [String]
    public let message: String

    public init(code: Code, path: [String], message: String) {
        self.code = code
        self.path = path
        self.message = message
    }

    /// `accounts.3.balance`, or `(root)`.
    public var pathText: String { path.isEmpty ? "(root)" : path.joined(separator: ".") }

    public var description: String { "\(code) at \(pathText): \(message)" }

    init(encoding error: EncodingError) {
        switch error {
        case .invalidValue(_, let context):
            self.init(code: .encodingFailed, path: context.codingPath.map(\.stringValue), message: context.debugDescription)
        @unknown default:
            self.init(code: .encodingFailed, path: [], message: "\(error)")
        }
    }

    init(decoding error: DecodingError) {
        switch error {
        case .typeMismatch(_, let context):
            self.init(code: .typeMismatch, path: context.codingPath.map(\.stringValue), message: context.debugDescription)
        case .valueNotFound(_, let context):
            self.init(code: .typeMismatch, path: context.codingPath.map(\.stringValue), message: context.debugDescription)
        case .keyNotFound(let key, let context):
            self.init(
                code: .missingField, path: (context.codingPath + [key]).map(\.stringValue),
                message: "required field `\(key.stringValue)` is missing")
        case .dataCorrupted(let context):
            self.init(code: .invalidValue, path: context.codingPath.map(\.stringValue), message: context.debugDescription)
        @unknown default:
            self.init(code: .invalidValue, path: [], message: "\(error)")
        }
    }
}
