/// The JSON shape of a remote op's argument, as `cogd call` takes it:
/// derived from the argument's `Codable` type, so `cogd ops` can say what to
/// send without the op's author writing it down.
///
/// ```swift
/// OpArgumentShape.of(Transfer.self).description
/// // {"from": string, "to": string, "amount": integer}
/// ```
///
/// Derived by decoding the type once from a probe that answers every
/// request with a placeholder and notes what was asked for, so it sees what
/// the type's `init(from:)` reads — the synthesized one, or one written by
/// hand — in the order it reads it. What it cannot see is `unknown`: a type
/// whose decoding depends on the values it reads (an enum with associated
/// values, a validating initializer), or one nested deeper than
/// `maximumDepth`. Give such an op an `example:` (`RemoteOp`).
public indirect enum OpArgumentShape: Hashable, Sendable, CustomStringConvertible {
    case string
    case integer
    case number
    case boolean
    /// A JSON array of one shape (a Swift array or set).
    case array(OpArgumentShape)
    /// A JSON object of named fields, in the order the type reads them.
    case object([Field])
    /// A JSON object with text keys and values of one shape (a `[String: V]`).
    case dictionary(OpArgumentShape)
    /// One of these texts (a `CaseIterable` enum with `String` raw values).
    case oneOf([String])
    /// The shape or `null` (an `Optional` that is not a field of an object).
    case optional(OpArgumentShape)
    /// A type the log's codec writes in a form JSON cannot express (a
    /// `Date`, `UUID` or `Data`), so `cogd call` cannot send it.
    case opaque(String)
    /// Not derived: see the op's example.
    case unknown

    /// One field of an object.
    public struct Field: Hashable, Sendable {
        public let name: String
        public let shape: OpArgumentShape
        /// The field may be left out (an `Optional` property).
        public let isOptional: Bool

        public init(name: String, shape: OpArgumentShape, isOptional: Bool) {
            self.name = name
            self.shape = shape
            self.isOptional = isOptional
        }
    }

    /// How deep the probe follows nested types before it says `unknown`
    /// (a type that contains itself would otherwise never end).
    public static let maximumDepth = 12

    /// The shape of `type`'s JSON form.
    public static func of<T: Decodable>(_ type: T.Type) -> OpArgumentShape {
        ShapeProbe.shape(of: type, depth: 0)
    }

    /// Whether anything in the shape is `unknown` or `opaque`: an example
    /// made from it would not be accepted.
    public var isComplete: Bool {
        switch self {
        case .string, .integer, .number, .boolean, .oneOf: true
        case .array(let element), .dictionary(let element), .optional(let element): element.isComplete
        case .object(let fields): fields.allSatisfy(\.shape.isComplete)
        case .opaque, .unknown: false
        }
    }

    /// The shape in a compact, TypeScript-like notation:
    /// `{"from": string, "amount": integer, "note"?: string}`, `[integer]`,
    /// `"open" | "closed"`, `integer | null`, `{string: integer}`.
    public var description: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .number: "number"
        case .boolean: "boolean"
        case .array(let element): "[\(element)]"
        case .object(let fields):
            "{" + fields.map { "\(Self.quoted($0.name))\($0.isOptional ? "?" : ""): \($0.shape)" }.joined(separator: ", ") + "}"
        case .dictionary(let value): "{string: \(value)}"
        case .oneOf(let texts): texts.map(Self.quoted).joined(separator: " | ")
        case .optional(let wrapped): "\(wrapped) | null"
        case .opaque(let type): "<\(TerminalText.escaped(type)): not expressible in JSON>"
        case .unknown: "<not derived from the type>"
        }
    }

    /// A JSON string literal of `text`, control characters escaped (names
    /// come from declarations, or from a peer's fingerprint).
    static func quoted(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case _ where scalar.value < 0x20 || TerminalText.isUnsafe(scalar):
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }
}
