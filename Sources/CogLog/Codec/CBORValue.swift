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
