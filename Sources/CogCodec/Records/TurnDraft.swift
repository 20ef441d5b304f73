/// A turn to append: the store gives it its revision, epoch and time.
public struct TurnDraft: Sendable, Equatable {
    public var name: String
    public var origin: TurnOrigin
    public var writes: [TurnWrite]
    public var scopeEvents: [ScopeEvent]

    public init(name: String, origin: TurnOrigin = .system, writes: [TurnWrite], scopeEvents: [ScopeEvent] = []) {
        self.name = name
        self.origin = origin
        self.writes = writes
        self.scopeEvents = scopeEvents
    }
}
