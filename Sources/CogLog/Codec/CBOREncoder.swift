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
        if T.self == Int.self { return CBORWriter.encode(Primitive.integer(value as! Int)) }
        if T.self == String.self { return CBORWriter.encode(.text(value as! String)) }
        if T.self == Bool.self { return CBORWriter.encode(.bool(value as! Bool)) }
        if T.self == UInt64.self { return CBORWriter.encode(.unsigned(value as! UInt64)) }
        return CBORWriter.encode(try encodeTree(value))
    }

    /// The value as a CBOR item, before serialization.
    public func encodeTree<T: Encodable>(_ value: T) throws(CodecError) -> CBORValue {
        let node = EncodingNode()
        do {
            try EncodingNode.encode(value, into: node, codingPath: [])
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

/// A value being built by the encoder; containers fill it in place.
final class EncodingNode {
    enum Content {
        case unset
        case value(CBORValue)
        case map([(key: String, node: EncodingNode)])
        case array([EncodingNode])
    }

    var content = Content.unset

    func finish() -> CBORValue {
        switch content {
        case .unset: .null
        case .value(let value): value
        case .map(let entries): .map(entries.map { (key: CBORValue.text($0.key), value: $0.node.finish()) })
        case .array(let items): .array(items.map { $0.finish() })
        }
    }

    /// Encodes one value, giving the codec's own form to `Date`, `UUID` and `Data`.
    static func encode<T: Encodable>(_ value: T, into node: EncodingNode, codingPath: [any CodingKey]) throws {
        // An exact type check: `as [UInt8]` would also match an empty array of any element type.
        if T.self == [UInt8].self {
            node.content = .value(.bytes(value as! [UInt8]))
            return
        }
        switch value {
        case let date as Date:
            node.content = .value(.tag(CBORTag.epochDate, .float(date.timeIntervalSince1970)))
        case let uuid as UUID:
            node.content = .value(.tag(CBORTag.uuid, .bytes(withUnsafeBytes(of: uuid.uuid) { Array($0) })))
        case let data as Data:
            node.content = .value(.bytes(Array(data)))
        case let item as CBORValue:
            node.content = .value(item)
        default:
            try value.encode(to: NodeEncoder(node: node, codingPath: codingPath))
        }
    }
}

struct NodeEncoder: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .unset = node.content { node.content = .map([]) }
        return KeyedEncodingContainer(KeyedNodeEncoder(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .unset = node.content { node.content = .array([]) }
        return UnkeyedNodeEncoder(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeEncoder(node: node, codingPath: codingPath)
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

    private func child(for key: Key) -> EncodingNode {
        let child = EncodingNode()
        guard case .map(var entries) = node.content else {
            fatalError("internal inconsistency: keyed container over a non-map value")
        }
        entries.removeAll { $0.key == key.stringValue }
        entries.append((key.stringValue, child))
        node.content = .map(entries)
        return child
    }

    private func set(_ value: CBORValue, for key: Key) { child(for: key).content = .value(value) }

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
        try EncodingNode.encode(value, into: child(for: key), codingPath: codingPath + [key])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        NodeEncoder(node: child(for: key), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        NodeEncoder(node: child(for: key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        NodeEncoder(node: child(for: Key(stringValue: "super")!), codingPath: codingPath)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        NodeEncoder(node: child(for: key), codingPath: codingPath + [key])
    }
}

struct UnkeyedNodeEncoder: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    var count: Int {
        guard case .array(let items) = node.content else { return 0 }
        return items.count
    }

    private func next() -> EncodingNode {
        let child = EncodingNode()
        guard case .array(var items) = node.content else {
            fatalError("internal inconsistency: unkeyed container over a non-array value")
        }
        items.append(child)
        node.content = .array(items)
        return child
    }

    private func append(_ value: CBORValue) { next().content = .value(value) }

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
        let index = count
        try EncodingNode.encode(value, into: next(), codingPath: codingPath + [IndexKey(index)])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let index = count
        return NodeEncoder(node: next(), codingPath: codingPath + [IndexKey(index)]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let index = count
        return NodeEncoder(node: next(), codingPath: codingPath + [IndexKey(index)]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let index = count
        return NodeEncoder(node: next(), codingPath: codingPath + [IndexKey(index)])
    }
}

struct SingleNodeEncoder: SingleValueEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    private func set(_ value: CBORValue) { node.content = .value(value) }

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
        try EncodingNode.encode(value, into: node, codingPath: codingPath)
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
