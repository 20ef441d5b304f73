/// A keyed family of states: one independent state per key.
///
/// The automatic form passes the key to its selector; each key computes,
/// caches and settles separately. `box[key]` is a cheap value that names one
/// state; two separately built `box[5]` are equal and refer to one state.
///
/// ```swift
/// let isTrailSavedCogs = CogBox<Bool, TrailID> { c, trailID in
///   c[savedTrailIDsCog].contains(trailID)
/// }
/// let isSaved = cogs[isTrailSavedCogs[id]]
/// ```
///
/// - Important: keys are stored type-erased (`AnyHashable`); use value-type
///   identities (they are shared with the graph's actor).
public struct CogBox<Value, Key: Hashable>: @unchecked Sendable {
    @usableFromInline let descriptor: Descriptor

    /// Declares a box whose values never compare equal (values without `Equatable`).
    @inlinable
    public init(
        _ selector: @escaping @MainActor (Reader<Value>, Key) -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(selector, equalsRule: nil, name: name, fileID: fileID, line: line)
    }

    /// Declares a box whose changes are decided by `equals`.
    @inlinable
    public init(
        _ selector: @escaping @MainActor (Reader<Value>, Key) -> Value,
        equals: @escaping @MainActor (Value, Value) -> Bool,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(selector, equalsRule: equals, name: name, fileID: fileID, line: line)
    }

    /// Declares a named box (`CogBox<Int, Int>(name: "double") { c, key in … }`).
    @inlinable
    public init(
        name: String, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<Value>, Key) -> Value
    ) {
        self.init(selector, equalsRule: nil, name: name, fileID: fileID, line: line)
    }

    @inlinable
    init(
        _ selector: @escaping @MainActor (Reader<Value>, Key) -> Value,
        equalsRule: (@MainActor (Value, Value) -> Bool)?,
        name: String?, fileID: StaticString, line: UInt,
        coding: DurableCoding<Value>? = nil
    ) {
        self.descriptor = ComputedDescriptor<Value>(
            selector: { reader, key in selector(reader, unwrapKey(key, as: Key.self)) },
            equals: equalsRule, name: name, fileID: fileID, line: line, isKeyed: true, coding: coding)
    }

    /// The state for one key.
    public subscript(key: Key) -> Cog<Value> {
        Cog(ref: StateRef(descriptor: descriptor, key: StateKey(key)))
    }

    /// The label used in history and errors.
    public var label: String { descriptor.label }
}

extension CogBox where Value: Equatable {
    /// Declares a box whose changes are decided by `==`.
    @inlinable
    public init(
        _ selector: @escaping @MainActor (Reader<Value>, Key) -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(selector, equalsRule: { $0 == $1 }, name: name, fileID: fileID, line: line)
    }

    /// Declares a named box whose changes are decided by `==`.
    @inlinable
    public init(
        name: String, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<Value>, Key) -> Value
    ) {
        self.init(selector, equalsRule: { $0 == $1 }, name: name, fileID: fileID, line: line)
    }
}

extension CogBox where Value: Codable & Equatable, Key: Codable {
    /// Declares a named box with `Codable` values and keys. Besides everything
    /// a named box does, its members can select scopes across processes: a
    /// worker's `scope` over `box[key]` is tracked by the leader, which
    /// evaluates the same declaration for that key after each turn (the rig's
    /// registration must touch it).
    ///
    /// - Important: to select scopes across processes it must read only
    ///   durable state; the leader has no other (`protocol/cogwire.md` §6).
    @inlinable
    public init(
        name: String, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<Value>, Key) -> Value
    ) {
        self.init(selector, equalsRule: { $0 == $1 }, name: name, fileID: fileID, line: line, coding: .keyed(by: Key.self))
    }
}

extension CogBox {
    /// A keyed family of writable sources, one per key.
    ///
    /// The initial closure may ignore the key or compute from it:
    ///
    /// ```swift
    /// private let _todoTitleCogs = CogBox<String, TodoID>.Manual { "" }
    /// private let _lengthCogs = CogBox<Int, String>.Manual { key in key.count }
    /// ```
    public struct Manual: @unchecked Sendable {
        @usableFromInline let descriptor: ManualDescriptor<Value>

        /// Declares a box whose initial value ignores the key.
        @inlinable
        public init(
            _ initial: @escaping @MainActor () -> Value, lifetime: ManualCogLifetime = .app,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
        ) {
            self.init(keyed: { _ in initial() }, equalsRule: nil, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        /// Declares a box whose initial value is computed from the key.
        @inlinable
        public init(
            _ initial: @escaping @MainActor (Key) -> Value, lifetime: ManualCogLifetime = .app,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
        ) {
            self.init(keyed: initial, equalsRule: nil, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        /// Declares a named box (`CogBox<Int, String>.Manual(name: "accounts") { 0 }`).
        @inlinable
        public init(
            name: String, lifetime: ManualCogLifetime = .app,
            fileID: StaticString = #fileID, line: UInt = #line,
            _ initial: @escaping @MainActor () -> Value
        ) {
            self.init(keyed: { _ in initial() }, equalsRule: nil, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        /// Declares a named box whose initial value is computed from the key.
        @inlinable
        public init(
            name: String, lifetime: ManualCogLifetime = .app,
            fileID: StaticString = #fileID, line: UInt = #line,
            _ initial: @escaping @MainActor (Key) -> Value
        ) {
            self.init(keyed: initial, equalsRule: nil, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        /// Declares a box whose changes are decided by `equals`.
        @inlinable
        public init(
            _ initial: @escaping @MainActor (Key) -> Value,
            equals: @escaping @MainActor (Value, Value) -> Bool,
            lifetime: ManualCogLifetime = .app,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
        ) {
            self.init(keyed: initial, equalsRule: equals, lifetime: lifetime, name: name, fileID: fileID, line: line)
        }

        @inlinable
        init(
            keyed initial: @escaping @MainActor (Key) -> Value,
            equalsRule: (@MainActor (Value, Value) -> Bool)?, lifetime: ManualCogLifetime,
            name: String?, fileID: StaticString, line: UInt, durable: DurableCoding<Value>? = nil
        ) {
            self.descriptor = ManualDescriptor<Value>(
                initial: { key in initial(unwrapKey(key, as: Key.self)) }, equals: equalsRule,
                lifetime: lifetime, name: name, fileID: fileID, line: line, isKeyed: true, durable: durable)
        }

        /// The writable source for one key.
        public subscript(key: Key) -> Cog<Value>.Manual {
            Cog<Value>.Manual(ref: StateRef(descriptor: descriptor, key: StateKey(key)))
        }

        /// A read-only view of the whole box.
        public var readOnly: Projection { Projection(descriptor: descriptor) }

        /// The label used in history and errors.
        public var label: String { descriptor.label }
    }

    /// A read-only projection of a manual box.
    public struct Projection: @unchecked Sendable {
        @usableFromInline let descriptor: Descriptor

        /// The read-only view of one key's source.
        public subscript(key: Key) -> Cog<Value>.Projection {
            Cog<Value>.Projection(ref: StateRef(descriptor: descriptor, key: StateKey(key)))
        }
    }
}

extension CogBox.Manual where Value: Equatable {
    /// Declares a box whose initial value ignores the key, with `==` changes.
    @inlinable
    public init(
        _ initial: @escaping @MainActor () -> Value, lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(keyed: { _ in initial() }, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line)
    }

    /// Declares a box whose initial value is computed from the key, with `==` changes.
    @inlinable
    public init(
        _ initial: @escaping @MainActor (Key) -> Value, lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(keyed: initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line)
    }

    /// Declares a named box with `==` changes.
    @inlinable
    public init(
        name: String, lifetime: ManualCogLifetime = .app,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor () -> Value
    ) {
        self.init(keyed: { _ in initial() }, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line)
    }

    /// Declares a named box whose initial value is computed from the key, with `==` changes.
    @inlinable
    public init(
        name: String, lifetime: ManualCogLifetime = .app,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor (Key) -> Value
    ) {
        self.init(keyed: initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line)
    }
}

extension CogBox.Manual where Value: Codable & Equatable & Sendable, Key: Codable {
    /// Declares a box a durable runtime can persist (with a `name:`); the initial value ignores the key.
    @inlinable
    public init(
        _ initial: @escaping @MainActor () -> Value, lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(
            keyed: { _ in initial() }, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID,
            line: line, durable: .keyed(by: Key.self))
    }

    /// Declares a durable box whose initial value is computed from the key.
    @inlinable
    public init(
        _ initial: @escaping @MainActor (Key) -> Value, lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(
            keyed: initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line,
            durable: .keyed(by: Key.self))
    }

    /// Declares a named durable box (`CogBox<Int, String>.Manual(name: "accounts") { 0 }`).
    @inlinable
    public init(
        name: String, lifetime: ManualCogLifetime = .app,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor () -> Value
    ) {
        self.init(
            keyed: { _ in initial() }, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID,
            line: line, durable: .keyed(by: Key.self))
    }

    /// Declares a named durable box whose initial value is computed from the key.
    @inlinable
    public init(
        name: String, lifetime: ManualCogLifetime = .app,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ initial: @escaping @MainActor (Key) -> Value
    ) {
        self.init(
            keyed: initial, equalsRule: { $0 == $1 }, lifetime: lifetime, name: name, fileID: fileID, line: line,
            durable: .keyed(by: Key.self))
    }
}

extension CogBox.Manual where Value: Codable & Sendable, Key: Codable {
    /// Declares a durable box whose changes are decided by `equals`.
    @inlinable
    public init(
        _ initial: @escaping @MainActor (Key) -> Value,
        equals: @escaping @MainActor (Value, Value) -> Bool,
        lifetime: ManualCogLifetime = .app,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.init(
            keyed: initial, equalsRule: equals, lifetime: lifetime, name: name, fileID: fileID, line: line,
            durable: .keyed(by: Key.self))
    }
}
