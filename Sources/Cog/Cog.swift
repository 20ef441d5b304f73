/// An automatic cog: a cached value computed from what its selector reads.
///
/// Declaring one runs nothing; the first read computes it, and later reads
/// reuse the cached value until something it read changes. Recomputes are
/// glitch-free (a join never sees old and new inputs together) and
/// equality-gated (an equal result wakes nothing below it).
///
/// ```swift
/// let activeTodoCountCog = Cog<Int> { c in
///   let todoIDs = c[todoIDsCog]
///   return todoIDs.filter { !c[todoIsCompletedCogs[$0]] }.count
/// }
/// ```
///
/// The same type names one key of a `CogBox`: `box[key]` is a cheap value,
/// equal for equal keys.
///
/// - Important: selectors run on the main actor and must not write; a turn
///   attempted during a computation traps, naming the cog.
public struct Cog<Value>: Sendable {
    @usableFromInline let ref: StateRef

    init(ref: StateRef) { self.ref = ref }

    /// Declares an automatic cog whose value is never considered equal to the
    /// previous one (use this for values without `Equatable`).
    @inlinable
    public init(
        _ selector: @escaping @MainActor (Reader<Value>) -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(selector, equalsRule: nil, name: name, fileID: fileID, line: line)
    }

    /// Declares an automatic cog whose changes are decided by `equals`.
    @inlinable
    public init(
        _ selector: @escaping @MainActor (Reader<Value>) -> Value,
        equals: @escaping @MainActor (Value, Value) -> Bool,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(selector, equalsRule: equals, name: name, fileID: fileID, line: line)
    }

    /// Declares a named automatic cog (`Cog<Int>(name: "total") { c in … }`).
    @inlinable
    public init(
        name: String, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<Value>) -> Value
    ) {
        self.init(selector, equalsRule: nil, name: name, fileID: fileID, line: line)
    }

    @inlinable
    init(
        _ selector: @escaping @MainActor (Reader<Value>) -> Value,
        equalsRule: (@MainActor (Value, Value) -> Bool)?,
        name: String?, fileID: StaticString, line: UInt,
        coding: DurableCoding<Value>? = nil
    ) {
        let descriptor = ComputedDescriptor<Value>(
            selector: { reader, _ in selector(reader) }, equals: equalsRule,
            name: name, fileID: fileID, line: line, isKeyed: false, coding: coding)
        self.ref = StateRef(descriptor: descriptor, key: .none)
    }

    /// The label used in history and errors: `name:`, or `fileID:line`, with `[key]` for box members.
    public var label: String { ref.label }
}

extension Cog where Value: Equatable {
    /// Declares an automatic cog whose changes are decided by `==`.
    @inlinable
    public init(
        _ selector: @escaping @MainActor (Reader<Value>) -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(selector, equalsRule: { $0 == $1 }, name: name, fileID: fileID, line: line)
    }

    /// Declares a named automatic cog whose changes are decided by `==`.
    @inlinable
    public init(
        name: String, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<Value>) -> Value
    ) {
        self.init(selector, equalsRule: { $0 == $1 }, name: name, fileID: fileID, line: line)
    }
}

extension Cog where Value: Codable & Equatable {
    /// Declares a named automatic cog with a `Codable` value. Besides
    /// everything a named cog does, it can select scopes across processes: a
    /// worker's `scope` over it is tracked by the leader, which evaluates the
    /// same declaration after each turn (both link the same rig; the rig's
    /// registration must touch it).
    ///
    /// - Important: to select scopes across processes it must read only
    ///   durable state; the leader has no other (`protocol/cogwire.md` §6).
    @inlinable
    public init(
        name: String, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<Value>) -> Value
    ) {
        self.init(selector, equalsRule: { $0 == $1 }, name: name, fileID: fileID, line: line, coding: .keyless())
    }
}

extension Cog: Equatable {
    public static func == (lhs: Cog, rhs: Cog) -> Bool { lhs.ref == rhs.ref }
}

extension Cog: Hashable {
    public func hash(into hasher: inout Hasher) { hasher.combine(ref) }
}
