extension Cog where Value: Sendable {
    /// A value that arrives from outside the process.
    ///
    /// The selector reads its dependencies synchronously and returns `Work`,
    /// which runs on the main actor unless its body is `@concurrent`
    /// (ASYNC-15). A plain read is total: the last
    /// accepted value, or `default` before one exists. `cogs.status[x]` gives
    /// the full `CogStatus`. Latest wins: a dependency change or a `refresh`
    /// starts a new generation, cancels the one in flight and drops its late
    /// result.
    ///
    /// `default:` is evaluated once per state, when the state is made: each key
    /// of a box gets its own, and a state recreated after a grace release
    /// evaluates it again. It may be an expression or a closure
    /// (`default: Forecast()` or `default: { Forecast() }`).
    ///
    /// ```swift
    /// let forecastCog = Cog<Forecast?>.Async(default: nil) { c in
    ///   let zip = c[zipCog]
    ///   return .run { try await weather.forecast(for: zip) }
    /// }
    /// ```
    public struct Async: Sendable, Hashable {
        let ref: StateRef

        init(ref: StateRef) { self.ref = ref }

        /// Declares an async cog whose accepted values always count as changes.
        public init(
            _ policy: LatestPolicy = .latest, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
            _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> Work<Value>
        ) {
            self.init(defaultValue, equalsRule: nil, policy: .latest, name: name, fileID: fileID, line: line, selector)
        }

        /// The same, with `default:` given as a closure (`default: { Forecast() }`),
        /// run once per state like the expression form.
        public init(
            _ policy: LatestPolicy = .latest, default defaultValue: @escaping @MainActor () -> Value,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
            _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> Work<Value>
        ) {
            self.init(defaultValue, equalsRule: nil, policy: .latest, name: name, fileID: fileID, line: line, selector)
        }

        init(
            _ defaultValue: @escaping @MainActor () -> Value, equalsRule: (@MainActor (Value, Value) -> Bool)?,
            policy: AsyncRunPolicy, name: String?, fileID: StaticString, line: UInt,
            _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> Work<Value>
        ) {
            let descriptor = AsyncDescriptor<Value>(
                selector: { reader, _ in selector(reader) }, makeDefault: defaultValue, equals: equalsRule,
                policy: policy,
                name: name, fileID: fileID, line: line, isKeyed: false)
            self.ref = StateRef(descriptor: descriptor, key: .none)
        }

        /// The label used in history and errors.
        public var label: String { ref.label }
    }
}

extension Cog.Async where Value: Equatable {
    /// Declares an async cog whose accepted values are compared with `==`.
    public init(
        _ policy: LatestPolicy = .latest, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> Work<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: .latest, name: name, fileID: fileID, line: line, selector)
    }

    /// The same, with `default:` given as a closure (`default: { Forecast() }`),
    /// run once per state like the expression form.
    public init(
        _ policy: LatestPolicy = .latest, default defaultValue: @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>) -> Work<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: .latest, name: name, fileID: fileID, line: line, selector)
    }
}

extension CogBox where Value: Sendable {
    /// A keyed family of async values; each key loads and publishes independently.
    public struct Async: @unchecked Sendable {
        let descriptor: Descriptor

        /// Declares an async box whose accepted values always count as changes.
        public init(
            _ policy: LatestPolicy = .latest, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
            _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> Work<Value>
        ) {
            self.init(defaultValue, equalsRule: nil, policy: .latest, name: name, fileID: fileID, line: line, selector)
        }

        /// The same, with `default:` given as a closure (`default: { Forecast() }`),
        /// run once per state like the expression form.
        public init(
            _ policy: LatestPolicy = .latest, default defaultValue: @escaping @MainActor () -> Value,
            name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
            _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> Work<Value>
        ) {
            self.init(defaultValue, equalsRule: nil, policy: .latest, name: name, fileID: fileID, line: line, selector)
        }

        init(
            _ defaultValue: @escaping @MainActor () -> Value, equalsRule: (@MainActor (Value, Value) -> Bool)?,
            policy: AsyncRunPolicy, name: String?, fileID: StaticString, line: UInt,
            _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> Work<Value>
        ) {
            self.descriptor = AsyncDescriptor<Value>(
                selector: { reader, key in selector(reader, unwrapKey(key, as: Key.self)) },
                makeDefault: defaultValue, equals: equalsRule, policy: policy,
                name: name, fileID: fileID, line: line, isKeyed: true)
        }

        /// The async state for one key.
        public subscript(key: Key) -> Cog<Value>.Async {
            Cog<Value>.Async(ref: StateRef(descriptor: descriptor, key: StateKey(key)))
        }
    }
}

extension CogBox.Async where Value: Equatable {
    /// Declares an async box whose accepted values are compared with `==`.
    public init(
        _ policy: LatestPolicy = .latest, default defaultValue: @autoclosure @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> Work<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: .latest, name: name, fileID: fileID, line: line, selector)
    }

    /// The same, with `default:` given as a closure (`default: { Forecast() }`),
    /// run once per state like the expression form.
    public init(
        _ policy: LatestPolicy = .latest, default defaultValue: @escaping @MainActor () -> Value,
        name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ selector: @escaping @MainActor (Reader<CogStatus<Value>>, Key) -> Work<Value>
    ) {
        self.init(
            defaultValue, equalsRule: { $0 == $1 }, policy: .latest, name: name, fileID: fileID, line: line, selector)
    }
}
