import Cog

/// Decodes replicated values with the log's codec: what a replica (a
/// worker, the simulator, `cogd ops`) gives `Cogs` as its durable store.
@MainActor
public final class ReplicaCodec: CogDurableStore {
    private let encoder = CBOREncoder()
    private let decoder = CBORDecoder()

    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try encoder.encode(value) }
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try decoder.decode(type, from: bytes) }
    public func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { nil }
    public func commit(_ turn: CogDurableTurn) throws {}
}
