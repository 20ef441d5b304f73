/// How one-shot async work orders its runs instead of replacing them (D24).
///
/// ```swift
/// let saveCog = Cog<Receipt?>.Async(.queue, default: nil) { c in
///   let draft = c[draftCog]
///   return .run { try await store.save(draft) }
/// }
/// ```
public enum OrderedPolicy: Sendable {
    /// One run at a time, in input order; each input runs, and a failure
    /// does not stop the ones behind it.
    case queue
    /// While a run is busy, changes start nothing; when it ends, exactly one
    /// catch-up run starts with the newest input (if any came).
    case exhaustLatest
    /// Every input starts a run at once; runs overlap, and each result is
    /// its own turn in the order results land.
    case merged
}

/// One-shot work for an ordered policy. It has `run` only: streams are
/// latest-wins, so `Cog.Async(.queue, …) { _ in .stream(s) }` does not
/// compile (`RunWork` has no member `stream`).
public struct RunWork<Value: Sendable>: Sendable {
    let operation: @Sendable @isolated(any) () async throws -> Value

    /// The returned value (or thrown error) is the run's result. As with
    /// `Work.run`, the body runs on the caller's actor unless it is marked
    /// `@concurrent`.
    public static func run(
        @_inheritActorContext _ operation: sending @escaping @Sendable @isolated(any) () async throws -> sending Value
    ) -> RunWork {
        RunWork(operation: operation)
    }

    var work: Work<Value> { Work(body: .run(operation)) }
}

/// The policy an async descriptor runs its work under.
enum AsyncRunPolicy: Sendable {
    case latest, queue, exhaustLatest, merged

    init(_ policy: OrderedPolicy) {
        switch policy {
        case .queue: self = .queue
        case .exhaustLatest: self = .exhaustLatest
        case .merged: self = .merged
        }
    }
}

extension Cog.Async {
    /// Declares an async cog with an ordered policy whose accepted values
    /// always count as changes.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: nil, policy: AsyncRunPolicy(policy), name: name, fileID: fileID, line: line,
            { selector($0).work })
    }

    /// The same, with `default:` given as a closure (`default: { Forecast() }`),
    /// run once per state like the expression form.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: nil, policy: AsyncRunPolicy(policy), name: name, fileID: fileID, line: line,
            { selector($0).work })
    }
}

extension Cog.Async where Value: Equatable {
    /// Declares an async cog with an ordered policy whose accepted values are
    /// compared with `==`.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: AsyncRunPolicy(policy), name: name, fileID: fileID,
            line: line, { selector($0).work })
    }

    /// The same, with `default:` given as a closure (`default: { Forecast() }`),
    /// run once per state like the expression form.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: AsyncRunPolicy(policy), name: name, fileID: fileID,
            line: line, { selector($0).work })
    }
}

extension CogBox.Async {
    /// Declares an async box with an ordered policy whose accepted values
    /// always count as changes; each key orders its own runs.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: nil, policy: AsyncRunPolicy(policy), name: name, fileID: fileID, line: line,
            { selector($0, $1).work })
    }

    /// The same, with `default:` given as a closure (`default: { Forecast() }`),
    /// run once per state like the expression form.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: nil, policy: AsyncRunPolicy(policy), name: name, fileID: fileID, line: line,
            { selector($0, $1).work })
    }
}

extension CogBox.Async where Value: Equatable {
    /// Declares an async box with an ordered policy whose accepted values are
    /// compared with `==`; each key orders its own runs.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: AsyncRunPolicy(policy), name: name, fileID: fileID,
            line: line, { selector($0, $1).work })
    }

    /// The same, with `default:` given as a closure (`default: { Forecast() }`),
    /// run once per state like the expression form.
    public init(
        _ policy: OrderedPolicy, default defaultValue: @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> RunWork<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: AsyncRunPolicy(policy), name: name, fileID: fileID,
            line: line, { selector($0, $1).work })
    }
}
