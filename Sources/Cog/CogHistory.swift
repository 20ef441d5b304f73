/// What a debug-history entry records.
public enum CogHistoryEvent: Sendable, Equatable {
    /// A turn started; the entry's name is the turn's (its op's) name.
    case turn
    /// A source committed a changed value; the name is the source's label.
    case write
    /// An automatic cog ran its selector; the name is its label. An async
    /// cog's value is recorded as `label.value` (`forecast.value[home]`)
    /// when first read and in each success turn.
    case recompute
    /// Reserved for observer notices (no UI consumers on Linux).
    case notice
    /// A value was offered to an export (`values(of:)`).
    case offer
    /// A reaction ran; the name is its composed registration name.
    case effect
}

/// One entry of a runtime's debug history.
public struct CogHistoryEntry: Sendable, Equatable {
    public let event: CogHistoryEvent
    /// The number of the turn the entry belongs to (1 for the first turn).
    public let turn: UInt64
    public let name: String
}

/// The last `capacity` events of one runtime, oldest first: which turns ran
/// under which names, what they wrote, what recomputed.
///
/// Use it in tests to check turn names and ordering. It is bounded, so a
/// long-running process keeps only the recent past.
public struct CogHistory: Sendable {
    public let capacity: Int
    public let entries: [CogHistoryEntry]
    public var count: Int { entries.count }

    /// The names of the `turn` entries, oldest first.
    public var turnNames: [String] {
        entries.filter { $0.event == .turn }.map(\.name)
    }
}

/// Fixed-size ring behind `CogHistory`; recording never allocates.
@MainActor
final class HistoryRing {
    let capacity: Int
    private var buffer: ContiguousArray<CogHistoryEntry>
    private var next = 0
    private var filled = 0
    private(set) var turnNumber: UInt64 = 0
    /// The name of the turn running (or last run).
    private(set) var currentTurnName = ""

    init(capacity: Int) {
        self.capacity = capacity
        self.buffer = ContiguousArray(
            repeating: CogHistoryEntry(event: .turn, turn: 0, name: ""), count: capacity)
    }

    func beginTurn(named name: String) {
        turnNumber &+= 1
        currentTurnName = name
        record(.turn, turn: turnNumber, name: name)
    }

    @inline(__always)
    func record(_ event: CogHistoryEvent, turn: UInt64, name: String) {
        buffer[next] = CogHistoryEntry(event: event, turn: turn, name: name)
        next = next + 1 == capacity ? 0 : next + 1
        if filled < capacity { filled += 1 }
    }

    var snapshot: CogHistory {
        var entries: [CogHistoryEntry] = []
        entries.reserveCapacity(filled)
        let start = filled < capacity ? 0 : next
        for offset in 0..<filled {
            entries.append(buffer[(start + offset) % capacity])
        }
        return CogHistory(capacity: capacity, entries: entries)
    }
}
