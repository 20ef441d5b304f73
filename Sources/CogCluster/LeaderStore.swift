import Cog
import CogLog

/// The leader's durable store: turns settled by its graph are buffered with
/// the origin of the request that caused them and committed together (group
/// commit) when the leader flushes its batch. The leader hosts no reactions,
/// so nothing observes a turn before that commit.
@MainActor
final class LeaderStore: CogDurableStore {
    let store: TurnStore
    private let encoder = CBOREncoder()
    private let decoder = CBORDecoder()
    /// The origin stamped on turns the graph settles now.
    var currentOrigin = TurnOrigin.system
    private(set) var pending: [TurnDraft] = []

    init(store: TurnStore) {
        self.store = store
    }

    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try encoder.encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try decoder.decode(type, from: bytes) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { try store.value(name: name, key: key) }

    func commit(_ turn: CogDurableTurn) throws {
        // Putting the graph back to what the store holds records nothing.
        guard !restoring else { return }
        pending.append(
            TurnDraft(
                name: turn.name, origin: currentOrigin,
                writes: turn.writes.map { TurnWrite(name: $0.name, key: $0.key, value: $0.value) }))
    }

    /// The value a source (and key) has now: the newest buffered write, else the store's.
    func currentValue(name: String, key: [UInt8]?) -> [UInt8]? {
        (try? currentValueOrThrow(name: name, key: key)) ?? nil
    }

    /// Buffers a system record that writes nothing: scope events no turn
    /// caused (a worker gone, a name taken over, a registration replaced).
    func appendSystemRecord(named name: String, scopeEvents: [ScopeEvent]) {
        pending.append(TurnDraft(name: name, origin: .system, writes: [], scopeEvents: scopeEvents))
    }

    /// Set while the graph is put back to stored values (`restore`).
    private var restoring = false

    /// Drops the newest buffered turn (its record would be too large).
    func dropLastPending() -> TurnDraft? { pending.popLast() }

    /// Puts every durable source `drafts` wrote back to its value now (the
    /// buffered turns' newest, else the store's; none: its initial value),
    /// as a turn the store does not record: what they settled is gone.
    func restore(_ cogs: Cogs, undoing drafts: [TurnDraft]) throws {
        var seen = Set<[UInt8]>()
        var writes: [CogDurableWrite] = []
        for draft in drafts {
            for write in draft.writes where seen.insert(Array(write.name.utf8) + [0] + (write.key ?? [])).inserted {
                writes.append(CogDurableWrite(name: write.name, key: write.key, value: try currentValueOrThrow(name: write.name, key: write.key)))
            }
        }
        guard !writes.isEmpty else { return }
        restoring = true
        defer { restoring = false }
        try cogs.restoreDurableState(named: "cogd.restore", writes: writes, codec: self)
    }

    /// `currentValue`, with a failed store read thrown instead of read as none.
    private func currentValueOrThrow(name: String, key: [UInt8]?) throws -> [UInt8]? {
        for draft in pending.reversed() {
            if let write = draft.writes.last(where: { $0.name == name && $0.key == key }) { return write.value }
        }
        return try store.value(name: name, key: key)
    }

    /// The writes of the newest buffered turn.
    var lastPendingWrites: [TurnWrite] { pending.last?.writes ?? [] }

    /// Puts scope events into the newest buffered turn's record.
    func attachScopeEvents(_ events: [ScopeEvent]) {
        guard !events.isEmpty, !pending.isEmpty else { return }
        pending[pending.count - 1].scopeEvents += events
    }

    /// The revision the next buffered turn will get.
    var nextRevision: UInt64 { store.lastRevision + UInt64(pending.count) + 1 }

    /// Commits every buffered turn and the batch's replies in one
    /// transaction, with what changes about the dedup index.
    @discardableResult
    func flush(replies: [(RequestID, [UInt8])], index: DedupIndexChange? = nil) throws -> Range<UInt64> {
        let drafts = pending
        pending = []
        return try store.append(drafts, replies: replies, index: index)
    }

    /// An upper bound of the newest buffered turn's record size (its writes'
    /// names, keys and values, and room for the rest).
    var lastPendingRecordBytes: Int {
        guard let draft = pending.last else { return 0 }
        return draft.writes.reduce(draft.name.utf8.count + 1_024) { total, write in
            total + write.name.utf8.count + (write.key?.count ?? 0) + (write.value?.count ?? 0) + 32
        }
    }
}
