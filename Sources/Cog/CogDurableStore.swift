/// Where a durable runtime keeps its state: the `CogLog` module's store
/// conforms; tests may bring a fake. The graph hands it encoded writes and
/// asks it for encoded values; it never sees Swift values of user types
/// except to encode or decode them.
///
/// - Important: `commit` runs on the main actor inside the flush of a turn,
///   before that turn's reactions run and before its op returns (durable
///   before visible). If it throws, the runtime traps with the store's error:
///   a turn that cannot be made durable must not be seen.
@MainActor
public protocol CogDurableStore: AnyObject {
    /// Encodes a value or key (the log's deterministic codec).
    func encode<T: Encodable>(_ value: T) throws -> [UInt8]
    /// Decodes a value or key encoded by `encode`.
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T
    /// The latest stored value of a durable source (and key).
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]?
    /// Makes one settled turn durable.
    func commit(_ turn: CogDurableTurn) throws
}

/// One settled turn, as a durable store receives it.
public struct CogDurableTurn: Sendable, Equatable {
    /// The turn's composed name.
    public let name: String
    /// The durable writes it settled, in commit order.
    public let writes: [CogDurableWrite]
}

/// One settled write of a durable source.
public struct CogDurableWrite: Sendable, Equatable {
    /// The source's stable `name:`.
    public let name: String
    /// The encoded key, nil for a keyless source.
    public let key: [UInt8]?
    /// The encoded value, nil when the state was released (`discard`).
    public let value: [UInt8]?

    public init(name: String, key: [UInt8]?, value: [UInt8]?) {
        self.name = name
        self.key = key
        self.value = value
    }
}

/// How one declaration's values (and keys) are encoded for a durable store.
/// Built by the `Codable` initializers, where the types are concrete.
@usableFromInline
struct DurableCoding<Value>: @unchecked Sendable {
    let encodeValue: @MainActor (Value, any CogDurableStore) throws -> [UInt8]
    /// `encodeValue` of a node's committed value, in a type that names no
    /// `Value`: a settled write is encoded without the generic metadata
    /// lookups that code over `Value?` made per write (the closure is built
    /// where `Value` is concrete).
    let encodeNodeValue: @MainActor (Node, any CogDurableStore) throws -> [UInt8]
    let decodeValue: @MainActor ([UInt8], any CogDurableStore) throws -> Value
    let encodeKey: (@MainActor (StateKey, any CogDurableStore) throws -> [UInt8])?
    let decodeKey: (@MainActor ([UInt8], any CogDurableStore) throws -> StateKey)?
    /// The shapes of the value and key types (a rig's fingerprint carries
    /// them: `protocol/cogwire.md` §7), derived when asked.
    let valueShape: () -> OpArgumentShape
    let keyShape: (() -> OpArgumentShape)?

    @usableFromInline
    init(
        encodeValue: @escaping @MainActor (Value, any CogDurableStore) throws -> [UInt8],
        decodeValue: @escaping @MainActor ([UInt8], any CogDurableStore) throws -> Value,
        encodeKey: (@MainActor (StateKey, any CogDurableStore) throws -> [UInt8])?,
        decodeKey: (@MainActor ([UInt8], any CogDurableStore) throws -> StateKey)?,
        valueShape: @escaping () -> OpArgumentShape = { .unknown },
        keyShape: (() -> OpArgumentShape)? = nil,
        encodeNodeValue: (@MainActor (Node, any CogDurableStore) throws -> [UInt8])? = nil
    ) {
        self.encodeValue = encodeValue
        self.encodeNodeValue = encodeNodeValue ?? { node, store in try encodeValue(unsafeDowncast(node, to: TypedNode<Value>.self).value, store) }
        self.decodeValue = decodeValue
        self.encodeKey = encodeKey
        self.decodeKey = decodeKey
        self.valueShape = valueShape
        self.keyShape = keyShape
    }
}

extension DurableCoding where Value: Codable {
    /// Coding for a keyless source.
    @inlinable
    static func keyless() -> DurableCoding {
        DurableCoding(
            encodeValue: { value, store in try store.encode(value) },
            decodeValue: { bytes, store in try store.decode(Value.self, from: bytes) },
            encodeKey: nil, decodeKey: nil, valueShape: { OpArgumentShape.of(Value.self) },
            encodeNodeValue: { node, store in try store.encode(unsafeDowncast(node, to: TypedNode<Value>.self).value) })
    }

    /// Coding for a box whose keys are `Key`.
    @inlinable
    static func keyed<Key: Codable & Hashable>(by: Key.Type) -> DurableCoding {
        DurableCoding(
            encodeValue: { value, store in try store.encode(value) },
            decodeValue: { bytes, store in try store.decode(Value.self, from: bytes) },
            encodeKey: { key, store in try store.encode(key.unwrap(as: Key.self)) },
            decodeKey: { bytes, store in StateKey(try store.decode(Key.self, from: bytes)) },
            valueShape: { OpArgumentShape.of(Value.self) }, keyShape: { OpArgumentShape.of(Key.self) },
            encodeNodeValue: { node, store in try store.encode(unsafeDowncast(node, to: TypedNode<Value>.self).value) })
    }
}
