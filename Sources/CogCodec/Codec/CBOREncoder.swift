import Foundation

/// Encodes `Encodable` values as deterministic CBOR (RFC 8949 §4.2.1): equal
/// values always give equal bytes, so records can be compared and hashed as
/// bytes and checked against `protocol/vectors/`.
///
/// Mapping (normative in `protocol/turnlog.md`): structs and keyed
/// containers are maps with text keys (`CodingKey.stringValue`); arrays and
/// unkeyed containers are arrays; `nil` is null and an absent optional field
/// is left out; `Date` is tag 1 over seconds since 1970 as a float; `UUID` is
/// tag 37 over its 16 bytes; `Data` and `[UInt8]` are byte strings.
///
/// ```swift
/// let bytes = try CBOREncoder().encode(account)
/// ```
public struct CBOREncoder: Sendable {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws(CodecError) -> [UInt8] {
        // Scalars skip the container machinery (keys and values are often one).
        // Written straight into bytes of their size: one allocation, no tree.
        if T.self == Int.self {
            let number = value as! Int
            var writer = CBORWriter(reservingCapacity: 9)
            if number < 0 { writer.appendHead(major: 1, UInt64(-1 - Int64(number))) } else { writer.appendHead(major: 0, UInt64(number)) }
            return writer.bytes
        }
        if T.self == String.self {
            let text = value as! String
            var writer = CBORWriter(reservingCapacity: 9 + text.utf8.count)
            writer.appendText(text)
            return writer.bytes
        }
        if T.self == Bool.self { return [(value as! Bool) ? 0xf5 : 0xf4] }
        if T.self == UInt64.self {
            var writer = CBORWriter(reservingCapacity: 9)
            writer.appendHead(major: 0, value as! UInt64)
            return writer.bytes
        }
        return CBORWriter.encode(try encodeTree(value))
    }

    /// The value as a CBOR item, before serialization.
    public func encodeTree<T: Encodable>(_ value: T) throws(CodecError) -> CBORValue {
        let node = EncodingNode()
        do {
            try EncodingNode.encode(value, into: node, path: .root)
        } catch let error as CodecError {
            throw error
        } catch let error as EncodingError {
            throw CodecError(encoding: error)
        } catch {
            throw CodecError(code: .encodingFailed, path: [], message: "\(error)")
        }
        return node.finish()
    }
}

/// A value being built by the encoder; containers fill it in place (a map's
/// keys and children, or an array's items, grow where they are).
final class EncodingNode {
    enum Kind { case unset, value, map, array }

    private(set) var kind = Kind.unset
    private var value = CBORValue.null
    /// A map's keys, parallel to `children`.
    private var keys: [String] = []
    /// A map's values or an array's items.
    private var children: [EncodingNode] = []
    /// A large map whose keys were appended without a search (duplicates, if
    /// any, are dropped at `finish`, keeping the last).
    private var unchecked = false

    func set(_ value: CBORValue) {
        kind = .value
        self.value = value
    }

    func becomeMap() { if kind == .unset { kind = .map } }

    func becomeArray() { if kind == .unset { kind = .array } }

    var count: Int { children.count }

    /// The child for `key`, replacing an earlier value of the same key.
    func child(forKey key: String) -> EncodingNode {
        precondition(kind == .map, "internal inconsistency: keyed container over a non-map value")
        let child = EncodingNode()
        if keys.count <= 16, let existing = keys.firstIndex(of: key) {
            children[existing] = child
        } else {
            if keys.count > 16 { unchecked = true }
            keys.append(key)
            children.append(child)
        }
        return child
    }

    /// A new last item.
    func nextItem() -> EncodingNode {
        precondition(kind == .array, "internal inconsistency: unkeyed container over a non-array value")
        let child = EncodingNode()
        children.append(child)
        return child
    }

    func finish() -> CBORValue {
        switch kind {
        case .unset:
            return .null
        case .value:
            return value
        case .array:
            return .array(children.map { $0.finish() })
        case .map:
            guard unchecked else {
                return .map(zip(keys, children).map { (key: CBORValue.text($0), value: $1.finish()) })
            }
            var last: [String: Int] = [:]
            for (position, key) in keys.enumerated() { last[key] = position }
            return .map(keys.indices.compactMap { position in
                last[keys[position]] == position ? (key: CBORValue.text(keys[position]), value: children[position].finish()) : nil
            })
        }
    }

    /// Encodes one value, giving the codec's own form to `Date`, `UUID` and
    /// `Data` (exact type checks: `as [UInt8]` would also match an empty array
    /// of any element type).
    static func encode<T: Encodable>(_ value: T, into node: EncodingNode, path: CodingPath) throws {
        if T.self == [UInt8].self {
            node.set(.bytes(value as! [UInt8]))
        } else if T.self == Date.self {
            node.set(.tag(CBORTag.epochDate, .float((value as! Date).timeIntervalSince1970)))
        } else if T.self == UUID.self {
            node.set(.tag(CBORTag.uuid, .bytes(withUnsafeBytes(of: (value as! UUID).uuid) { Array($0) })))
        } else if T.self == Data.self {
            node.set(.bytes(Array(value as! Data)))
        } else if T.self == CBORValue.self {
            node.set(value as! CBORValue)
        } else {
            try value.encode(to: NodeEncoder(node: node, path: path))
        }
    }
}

/// A coding path kept as the parent's path and the last key, put together
/// only when asked for (an error, or user code reading `codingPath`).
struct CodingPath {
    let parent: [any CodingKey]
    let last: (any CodingKey)?

    static let root = CodingPath(parent: [], last: nil)

    var keys: [any CodingKey] {
        guard let last else { return parent }
        return parent + [last]
    }
}

struct NodeEncoder: Encoder {
    let node: EncodingNode
    let path: CodingPath
    var codingPath: [any CodingKey] { path.keys }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeMap()
        return KeyedEncodingContainer(KeyedNodeEncoder(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeArray()
        return UnkeyedNodeEncoder(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeEncoder(node: node, path: path)
    }
}

/// CBOR for the primitive types Codable hands over.
enum Primitive {
    static func integer<T: BinaryInteger>(_ value: T) -> CBORValue {
        value < 0 ? .negative(UInt64(-1 - Int64(value))) : .unsigned(UInt64(value))
    }
}

struct KeyedNodeEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    private func child(for key: Key) -> EncodingNode { node.child(forKey: key.stringValue) }

    private func path(_ key: Key) -> CodingPath { CodingPath(parent: codingPath, last: key) }

    private func set(_ value: CBORValue, for key: Key) { child(for: key).set(value) }

    mutating func encodeNil(forKey key: Key) throws { set(.null, for: key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), for: key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.text(value), for: key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(.float(value), for: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(.float(Double(value)), for: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(Primitive.integer(value), for: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(Primitive.integer(value), for: key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try EncodingNode.encode(value, into: child(for: key), path: path(key))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        NodeEncoder(node: child(for: key), path: path(key)).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        NodeEncoder(node: child(for: key), path: path(key)).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        NodeEncoder(node: child(for: Key(stringValue: "super")!), path: CodingPath(parent: codingPath, last: nil))
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        NodeEncoder(node: child(for: key), path: path(key))
    }
}

struct UnkeyedNodeEncoder: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    var count: Int { node.count }

    private func next() -> EncodingNode { node.nextItem() }

    private func nextPath() -> CodingPath { CodingPath(parent: codingPath, last: IndexKey(count)) }

    private func append(_ value: CBORValue) { next().set(value) }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.text(value)) }
    mutating func encode(_ value: Double) throws { append(.float(value)) }
    mutating func encode(_ value: Float) throws { append(.float(Double(value))) }
    mutating func encode(_ value: Int) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: Int8) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: Int16) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: Int32) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: Int64) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: UInt) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: UInt8) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: UInt16) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: UInt32) throws { append(Primitive.integer(value)) }
    mutating func encode(_ value: UInt64) throws { append(Primitive.integer(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let path = nextPath()
        try EncodingNode.encode(value, into: next(), path: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath()
        return NodeEncoder(node: next(), path: path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath()
        return NodeEncoder(node: next(), path: path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath()
        return NodeEncoder(node: next(), path: path)
    }
}

struct SingleNodeEncoder: SingleValueEncodingContainer {
    let node: EncodingNode
    let path: CodingPath
    var codingPath: [any CodingKey] { path.keys }

    private func set(_ value: CBORValue) { node.set(value) }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.text(value)) }
    mutating func encode(_ value: Double) throws { set(.float(value)) }
    mutating func encode(_ value: Float) throws { set(.float(Double(value))) }
    mutating func encode(_ value: Int) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: Int8) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: Int16) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: Int32) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: Int64) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: UInt) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: UInt8) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: UInt16) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: UInt32) throws { set(Primitive.integer(value)) }
    mutating func encode(_ value: UInt64) throws { set(Primitive.integer(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try EncodingNode.encode(value, into: node, path: path)
    }
}

/// The coding key of an array element: its index.
struct IndexKey: CodingKey {
    let intValue: Int?
    let stringValue: String

    init(_ index: Int) {
        intValue = index
        stringValue = String(index)
    }

    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.init(intValue) }
}
