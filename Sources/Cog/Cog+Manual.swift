extension Cog {
    /// A writable source: a fact the app sets through ops.
    ///
    /// Declare it private and underscored, and expose its `.readOnly`
    /// projection. The initial value is a closure, run once per state per
    /// runtime (so two runtimes never share a reference-type initial value).
    ///
    /// ```swift
    /// private let _todoFilterCog = Cog<TodoFilter>.Manual { .all }
    /// let todoFilterCog = _todoFilterCog.readOnly
    /// ```
    ///
    /// - Important: write it only inside a turn (`c[_todoFilterCog] = …` or
    ///   `turn(_todoFilterCog, to: …)`), from an op in an `extension CogOps`.
    public struct Manual: Sendable, Hashable {
        @usableFromInline let ref: StateRef

        init(ref: StateRef) { self.ref = ref }

        /// Declares a source whose every write counts as a change (for values
        /// without `Equatable`).
        public init(
            _ initial: @escaping @MainActor () -> Value, lifetime: ManualCogLifetime = .app,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
        ) {
            self.init(initial, equalsRule: nil, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        /// Declares a named source (`Cog<Int>.Manual(name: "count") { 0 }`).
        public init(
            name: String, lifetime: ManualCogLifetime = .app,
            fileID: StaticString = #fileID, line: UInt = #line,
            _ initial: @escaping @MainActor () -> Value
        ) {
            self.init(initial, equalsRule: nil, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        /// Declares a source with a lifetime (`.Manual(lifetime: .whileObserved(resetToInitial: true)) { "" }`).
        public init(
            lifetime: ManualCogLifetime, fileID: StaticString = #fileID, line: UInt = #line,
            _ initial: @escaping @MainActor () -> Value
        ) {
            self.init(initial, equalsRule: nil, lifetime: lifetime, name: nil, fileID: fileID, line: line)
        }

        /// Declares a source whose changes are decided by `equals`.
        public init(
            _ initial: @escaping @MainActor () -> Value,
            equals: @escaping @MainActor (Value, Value) -> Bool,
            lifetime: ManualCogLifetime = .app,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
        ) {
            self.init(initial, equalsRule: equals, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        @inlinable
        init(
            _ initial: @escaping @MainActor () -> Value,
            equalsRule: (@MainActor (Value, Value) -> Bool)?, lifetime: ManualCogLifetime,
            name: String?, fileID: StaticString, line: UInt, durable: DurableCoding<Value>? = nil
        ) {
            let descriptor = ManualDescriptor<Value>(
                initial: { _ in initial() }, equals: equalsRule, lifetime: lifetime,
                name: name, fileID: fileID, line: line, isKeyed: false, durable: durable)
            self.ref = StateRef(descriptor: descriptor, key: .none)
        }

        /// A read-only view of this source, for the rest of the app to read and watch.
        public var readOnly: Projection { Projection(ref: ref) }

        /// The label used in history and errors.
        public var label: String { ref.label }
    }

    /// A read-only projection of a manual source: reads and watches see the
    /// source itself, and it cannot be written.
    public struct Projection: Sendable, Hashable {
        @usableFromInline let ref: StateRef

        /// The label used in history and errors.
        public var label: String { ref.label }
    }
}

extension Cog.Manual where Value: Equatable {
    /// Declares a source whose changes are decided by `==`.
    public init(
        _ initial: @escaping @MainActor () -> Value, lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line)
    }

    /// Declares a named source whose changes are decided by `==`.
    public init(
        name: String, lifetime: ManualCogLifetime = .app,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor () -> Value
    ) {
        self.init(initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line)
    }

    /// Declares a source with a lifetime whose changes are decided by `==`.
    public init(
        lifetime: ManualCogLifetime, fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor () -> Value
    ) {
        self.init(initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: nil, fileID: fileID, line: line)
    }
}

extension Cog.Manual where Value: Codable & Equatable & Sendable {
    /// Declares a source a durable runtime can persist (with a `name:`), whose changes are decided by `==`.
    @inlinable
    public init(
        _ initial: @escaping @MainActor () -> Value, lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(
            initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line,
            durable: .keyless())
    }

    /// Declares a named durable source (`Cog<Int>.Manual(name: "count") { 0 }`).
    @inlinable
    public init(
        name: String, lifetime: ManualCogLifetime = .app,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor () -> Value
    ) {
        self.init(
            initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line,
            durable: .keyless())
    }

    /// Declares a durable source with a lifetime.
    @inlinable
    public init(
        lifetime: ManualCogLifetime, fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor () -> Value
    ) {
        self.init(
            initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: nil, fileID: fileID, line: line,
            durable: .keyless())
    }
}

extension Cog.Manual where Value: Codable & Sendable {
    /// Declares a durable source whose changes are decided by `equals`.
    @inlinable
    public init(
        _ initial: @escaping @MainActor () -> Value,
        equals: @escaping @MainActor (Value, Value) -> Bool,
        lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(
            initial, equalsRule: equals, lifetime: lifetime, name: name, fileID: fileID, line: line,
            durable: .keyless())
    }
}
