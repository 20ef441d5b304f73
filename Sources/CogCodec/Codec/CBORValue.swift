import Foundation

/// One CBOR data item (RFC 8949), as the codec builds and parses it.
///
/// Only what the codec emits exists here: integers, byte and text strings,
/// arrays, maps, tags, booleans, null and floats. Maps keep their entries in
/// insertion order; `CBORWriter` sorts them into deterministic order.
public indirect enum CBORValue: Equatable, Sendable {
    /// Major type 0: a non-negative integer.
    case unsigned(UInt64)
    /// Major type 1: the integer `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    case map([(key: CBORValue, value: CBORValue)])
    case tag(UInt64, CBORValue)
    case bool(Bool)
    case null
    case float(Double)
    /// Already-encoded deterministic CBOR, written verbatim (an embedded item).
    case encoded([UInt8])

    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)), (.negative(let a), .negative(let b)): a == b
        case (.bytes(let a), .bytes(let b)): a == b
        case (.text(let a), .text(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.map(let a), .map(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case (.tag(let ta, let a), .tag(let tb, let b)): ta == tb && a == b
        case (.bool(let a), .bool(let b)): a == b
        case (.null, .null): true
        case (.float(let a), .float(let b)): a.bitPattern == b.bitPattern || (a.isNaN && b.isNaN)
        case (.encoded(let a), .encoded(let b)): a == b
        default: false
        }
    }

    /// A short name of the item's kind, for error messages.
    var kindName: String {
        switch self {
        case .unsigned, .negative: "integer"
        case .bytes: "byte string"
        case .text: "text string"
        case .array: "array"
        case .map: "map"
        case .tag(let tag, _): "tag \(tag)"
        case .bool: "boolean"
        case .null: "null"
        case .float: "float"
        case .encoded: "embedded item"
        }
    }
}

/// CBOR tags the codec uses (IANA registry).
enum CBORTag {
    /// Epoch-based date/time, a number of seconds since 1970-01-01T00:00Z.
    static let epochDate: UInt64 = 1
    /// A UUID as a 16-byte string (RFC 9562).
    static let uuid: UInt64 = 37
}

extension CBORValue: Codable {
    /// With `CBOREncoder` the item is written as it is; other encoders (JSON,
    /// for `cogd tail --json`) get the nearest plain shape: tags are dropped,
    /// byte strings become arrays of bytes, maps need text keys.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .unsigned(let n):
            var container = encoder.singleValueContainer()
            try container.encode(n)
        case .negative(let n):
            var container = encoder.singleValueContainer()
            guard n <= UInt64(Int64.max) else {
                throw EncodingError.invalidValue(self, .init(codingPath: encoder.codingPath, debugDescription: "integer below Int64.min"))
            }
            try container.encode(-1 - Int64(n))
        case .bytes(let bytes):
            var container = encoder.singleValueContainer()
            try container.encode(bytes)
        case .text(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .array(let items):
            var container = encoder.unkeyedContainer()
            for item in items { try container.encode(item) }
        case .map(let entries):
            var container = encoder.container(keyedBy: TextKey.self)
            for entry in entries {
                guard case .text(let key) = entry.key else {
                    throw EncodingError.invalidValue(self, .init(codingPath: encoder.codingPath, debugDescription: "map key is not text"))
                }
                try container.encode(entry.value, forKey: TextKey(key))
            }
        case .tag(_, let item):
            try item.encode(to: encoder)
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .float(let double):
            var container = encoder.singleValueContainer()
            try container.encode(double)
        case .encoded(let bytes):
            try CBORReader.decode(bytes).encode(to: encoder)
        }
    }

    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: TextKey.self) {
            self = .map(try container.allKeys.map { (key: .text($0.stringValue), value: try container.decode(CBORValue.self, forKey: $0)) })
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var items: [CBORValue] = []
            while !container.isAtEnd { items.append(try container.decode(CBORValue.self)) }
            self = .array(items)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let integer = try? container.decode(Int64.self) {
            self = integer < 0 ? .negative(UInt64(-1 - integer)) : .unsigned(UInt64(integer))
        } else if let integer = try? container.decode(UInt64.self) {
            self = .unsigned(integer)
        } else if let double = try? container.decode(Double.self) {
            self = .float(double)
        } else {
            self = .text(try container.decode(String.self))
        }
    }
}

/// A coding key that is any text (maps whose keys are data, not fields).
public struct TextKey: CodingKey {
    public let stringValue: String
    public var intValue: Int? { nil }
    public init(_ text: String) { stringValue = text }
    public init?(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { nil }
}

extension CBORValue {
    /// Parses one CBOR item (the same checks as `CBORDecoder`).
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(CodecError) -> CBORValue {
        do {
            return try CBORReader.decode(bytes)
        } catch {
            throw CodecError(code: .malformed, path: [], message: error.description)
        }
    }

    /// The item's deterministic encoding.
    public var encodedBytes: [UInt8] { CBORWriter.encode(self) }

    /// The value under a text key of a map, if this is a map that has it.
    public subscript(key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        for entry in entries {
            if case .text(let text) = entry.key, text == key { return entry.value }
        }
        return nil
    }

    /// The unsigned integer this is, if it is one.
    public var unsignedValue: UInt64? {
        if case .unsigned(let value) = self { return value }
        return nil
    }

    /// The text this is, if it is a text string.
    public var textValue: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    /// The bytes this is, if it is a byte string.
    public var bytesValue: [UInt8]? {
        if case .bytes(let value) = self { return value }
        return nil
    }
}
