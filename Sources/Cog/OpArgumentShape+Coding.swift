/// A shape as a worker's `hello` carries it (`protocol/cogwire.md` §7,
/// "Rig versions"): a leaf as its name (`"string"`, `"integer"`,
/// `"number"`, `"boolean"`, `"unknown"`), anything else as a map of one
/// key: `{"array": SHAPE}`, `{"dictionary": SHAPE}`, `{"optional": SHAPE}`,
/// `{"oneOf": [text]}`, `{"opaque": text}`, `{"object": [{"name": text,
/// "shape": SHAPE, "optional": true}]}` (`optional` absent when false).
/// A form this build does not know (a newer peer's) reads as `unknown`.
extension OpArgumentShape: Codable {
    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ text: String) { stringValue = text }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct WireField: Codable {
        var name: String
        var shape: OpArgumentShape
        var optional: Bool?
    }

    public func encode(to encoder: any Encoder) throws {
        let leaf: String? =
            switch self {
            case .string: "string"
            case .integer: "integer"
            case .number: "number"
            case .boolean: "boolean"
            case .unknown: "unknown"
            default: nil
            }
        if let leaf {
            var container = encoder.singleValueContainer()
            try container.encode(leaf)
            return
        }
        var container = encoder.container(keyedBy: Key.self)
        switch self {
        case .array(let element): try container.encode(element, forKey: Key("array"))
        case .dictionary(let value): try container.encode(value, forKey: Key("dictionary"))
        case .optional(let wrapped): try container.encode(wrapped, forKey: Key("optional"))
        case .oneOf(let texts): try container.encode(texts, forKey: Key("oneOf"))
        case .opaque(let type): try container.encode(type, forKey: Key("opaque"))
        case .object(let fields):
            try container.encode(
                fields.map { WireField(name: $0.name, shape: $0.shape, optional: $0.isOptional ? true : nil) }, forKey: Key("object"))
        case .string, .integer, .number, .boolean, .unknown:
            fatalError("internal inconsistency: a leaf shape was not encoded as its name")
        }
    }

    public init(from decoder: any Decoder) throws {
        if let leaf = try? decoder.singleValueContainer().decode(String.self) {
            switch leaf {
            case "string": self = .string
            case "integer": self = .integer
            case "number": self = .number
            case "boolean": self = .boolean
            default: self = .unknown
            }
            return
        }
        let container = try decoder.container(keyedBy: Key.self)
        if container.contains(Key("array")) {
            self = .array(try container.decode(OpArgumentShape.self, forKey: Key("array")))
        } else if container.contains(Key("dictionary")) {
            self = .dictionary(try container.decode(OpArgumentShape.self, forKey: Key("dictionary")))
        } else if container.contains(Key("optional")) {
            self = .optional(try container.decode(OpArgumentShape.self, forKey: Key("optional")))
        } else if container.contains(Key("oneOf")) {
            self = .oneOf(try container.decode([String].self, forKey: Key("oneOf")))
        } else if container.contains(Key("opaque")) {
            self = .opaque(try container.decode(String.self, forKey: Key("opaque")))
        } else if container.contains(Key("object")) {
            let fields = try container.decode([WireField].self, forKey: Key("object"))
            self = .object(fields.map { Field(name: $0.name, shape: $0.shape, isOptional: $0.optional ?? false) })
        } else {
            self = .unknown
        }
    }
}
