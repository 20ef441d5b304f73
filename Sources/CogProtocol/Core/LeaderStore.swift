import Cog
import CogCodec

/// The leader core's durable store: the turns an op settles come back from
/// the call that ran it (`Cogs.settle`) and are buffered here with the
/// origin of their request, then committed together (group commit) when the
/// batch ends. The leader hosts no reactions, so nothing observes a turn
/// before that commit.
@MainActor
final class LeaderStore: CogDurableStore {
    let log: any LeaderLog
    private let encoder = CBOREncoder()
    private let decoder = CBORDecoder()
    private(set) var pending: [TurnDraft] = []

    init(log: any LeaderLog) {
        self.log = log
    }

    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try encoder.encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try decoder.decode(type, from: bytes) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { try log.value(name: name, key: key) }

    /// Nothing: the leader's turns are settled with `Cogs.settle`, which
    /// hands them to the caller, and putting the graph back to what the
    /// store holds (`restore`) records nothing.
    func commit(_ turn: CogDurableTurn) throws {}

    /// Buffers a turn's draft (`draft(_:origin:)`) as the next record.
    func buffer(_ draft: TurnDraft) {
        pending.append(draft)
    }

    static func draft(_ turn: CogDurableTurn, origin: TurnOrigin) -> TurnDraft {
        TurnDraft(name: turn.name, origin: origin, writes: turn.writes.map { TurnWrite(name: $0.name, key: $0.key, value: $0.value) })
    }

    /// Buffers a system record that writes nothing: scope events no turn
    /// caused (a worker gone, a name taken over, a registration replaced).
    func appendSystemRecord(named name: String, scopeEvents: [ScopeEvent]) {
        pending.append(TurnDraft(name: name, origin: .system, writes: [], scopeEvents: scopeEvents))
    }

    /// Puts every durable source `drafts` wrote back to its value now (the
    /// buffered turns' newest, else the store's; none: its initial value),
    /// as a turn the store does not record: what they settled is gone.
    func restore(_ cogs: Cogs, undoing drafts: [TurnDraft]) throws {
        var seen = Set<[UInt8]>()
        var writes: [CogDurableWrite] = []
        for draft in drafts {
            for write in draft.writes where seen.insert(write.entryKey).inserted {
                writes.append(CogDurableWrite(name: write.name, key: write.key, value: try currentValueOrThrow(name: write.name, key: write.key)))
            }
        }
        guard !writes.isEmpty else { return }
        try cogs.restoreDurableState(named: "cogd.restore", writes: writes, codec: self)
    }

    /// `currentValue`, with a failed store read thrown instead of read as none.
    func currentValueOrThrow(name: String, key: [UInt8]?) throws -> [UInt8]? {
        for draft in pending.reversed() {
            if let write = draft.writes.last(where: { $0.name == name && $0.key == key }) { return write.value }
        }
        return try log.value(name: name, key: key)
    }

    /// The writes of the newest buffered turn.
    var lastPendingWrites: [TurnWrite] { pending.last?.writes ?? [] }

    /// Puts scope events into the newest buffered turn's record.
    func attachScopeEvents(_ events: [ScopeEvent]) {
        guard !events.isEmpty, !pending.isEmpty else { return }
        pending[pending.count - 1].scopeEvents += events
    }

    /// The revision the next buffered turn will get.
    var nextRevision: UInt64 { log.lastRevision + UInt64(pending.count) + 1 }

    /// Hands over every buffered turn (to be committed), in order.
    func takePending() -> [TurnDraft] {
        defer { pending = [] }
        return pending
    }

    /// An upper bound of a turn's record size (its writes' names, keys and
    /// values, and room for the rest).
    static func recordBytesBound(_ draft: TurnDraft) -> Int {
        draft.writes.reduce(draft.name.utf8.count + 1_024) { total, write in
            total + write.name.utf8.count + (write.key?.count ?? 0) + (write.value?.count ?? 0) + 32
        }
    }
}
