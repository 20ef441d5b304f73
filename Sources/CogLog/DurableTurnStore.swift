import Cog
import CogCodec
import Foundation

/// The durable store of an embedded (single-process) runtime: every settled
/// turn becomes a `TurnRecord` committed to LMDB before its reactions run.
///
/// ```swift
/// let store = try DurableTurnStore(directory: "data")
/// let cogs = Cogs.assemble(store: store, mechanisms: [TodoMechanism()])
/// ```
///
/// - Important: holds the data folder's writer lock while open; each turn
///   costs one durable LMDB commit (about 0.3 ms on this class of disk).
@MainActor
public final class DurableTurnStore: CogDurableStore {
    public let store: TurnStore
    private let encoder = CBOREncoder()
    private let decoder = CBORDecoder()
    /// Records committed through this store, newest last (for tests and tools).
    public private(set) var committedCount = 0

    /// Opens (creating when missing) the data folder as its writer.
    public init(directory: String, createIfMissing: Bool = true) throws(TurnStoreError) {
        store = try TurnStore(directory: directory, mode: .writer, createIfMissing: createIfMissing)
    }

    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try encoder.encode(value) }

    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try decoder.decode(type, from: bytes)
    }

    public func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? {
        try store.value(name: name, key: key)
    }

    public func commit(_ turn: CogDurableTurn) throws {
        let writes = turn.writes.map { TurnWrite(name: $0.name, key: $0.key, value: $0.value) }
        try store.append([TurnDraft(name: turn.name, writes: writes)])
        committedCount += 1
    }
}
