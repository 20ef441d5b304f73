import Synchronization

/// Process-wide table of durable declarations by stable name, filled as each
/// one is declared, so a replica can apply writes it receives by name.
enum DurableRegistry {
    private static let table = Mutex<[String: Descriptor]>([:])
    /// Every site that declared each name (more than one: a duplicate,
    /// refused by `OpRegistry.declared()`).
    private static let declarationSites = Mutex<[String: [String]]>([:])

    static func register(_ descriptor: Descriptor) {
        guard let name = descriptor.stableName else { return }
        table.withLock { $0[name] = $0[name] ?? descriptor }
        declarationSites.withLock { $0[name, default: []].append(descriptor.site) }
    }

    static var sites: [String: [String]] { declarationSites.withLock { $0 } }

    static func descriptor(named name: String) -> Descriptor? {
        table.withLock { $0[name] }
    }
}

/// Process-wide table of named automatic cogs and boxes whose values (and
/// keys) can be encoded, filled as each is declared: the leader evaluates the
/// ones workers register as scope selectors (`protocol/cogwire.md` §6).
enum SelectorRegistry {
    private static let table = Mutex<[String: any EncodableSelector]>([:])
    private static let declarationSites = Mutex<[String: [String]]>([:])

    static func register(_ selector: any EncodableSelector & Descriptor) {
        guard let name = selector.stableName else { return }
        table.withLock { $0[name] = $0[name] ?? selector }
        declarationSites.withLock { $0[name, default: []].append(selector.site) }
    }

    static var sites: [String: [String]] { declarationSites.withLock { $0 } }

    static func selector(named name: String) -> (any EncodableSelector)? {
        table.withLock { $0[name] }
    }
}

/// An automatic cog (or box member) whose current value can be read as
/// deterministic bytes, its key given as bytes too.
protocol EncodableSelector: AnyObject, Sendable {
    /// The encoded key of one member (nil for a keyless cog).
    @MainActor func encodedKey(_ key: StateKey, codec: any CogDurableStore) throws -> [UInt8]?
    /// The value of the member with encoded key `key` (nil: keyless), encoded.
    @MainActor func encodedValue(key: [UInt8]?, graph: Graph, codec: any CogDurableStore) throws -> [UInt8]?
}

extension ComputedDescriptor: EncodableSelector {
    @MainActor func encodedKey(_ key: StateKey, codec: any CogDurableStore) throws -> [UInt8]? {
        guard key != .none else { return nil }
        return try coding?.encodeKey?(key, codec)
    }

    @MainActor func encodedValue(key: [UInt8]?, graph: Graph, codec: any CogDurableStore) throws -> [UInt8]? {
        guard let coding else { return nil }
        let stateKey: StateKey
        switch (key, coding.decodeKey) {
        case (nil, _) where !isKeyed: stateKey = .none
        case (let bytes?, let decodeKey?) where isKeyed: stateKey = try decodeKey(bytes, codec)
        default: return nil  // a key for a keyless cog, or none for a box
        }
        return try coding.encodeValue(graph.peek(StateRef(descriptor: self, key: stateKey), as: Value.self), codec)
    }
}

extension Cogs {
    /// Whether a named automatic cog or box with `Codable` values (and keys)
    /// is declared in this process (one the leader can evaluate for a
    /// worker's scope).
    public static func hasSelector(named name: String) -> Bool {
        SelectorRegistry.selector(named: name) != nil
    }

    /// The deterministic encoding of the named automatic cog's current value
    /// here (of the box member with encoded key `key`); nil when no such
    /// declaration exists in this process or the key does not fit it.
    public func encodedSelectorValue(named name: String, key: [UInt8]? = nil, codec: any CogDurableStore) throws -> [UInt8]? {
        try SelectorRegistry.selector(named: name)?.encodedValue(key: key, graph: graph, codec: codec)
    }
}

/// Whether a stored value still decodes as the type its declaration has now.
public enum StoredValueCheck: Equatable, Sendable {
    /// It decodes.
    case decodes
    /// No declaration in this process has that durable name (nothing here reads it).
    case undeclared
    /// It does not decode: why, and where the declaration is (`fileID:line`).
    case fails(reason: String, site: String)
}

extension Cogs {
    /// Checks that `value` (and `key`), stored under the durable name
    /// `name`, decode as the declaration of that name in this process has
    /// its types now — what a leader does with every state entry before it
    /// serves, so a field renamed or retyped is refused at start instead of
    /// trapping when an op first reads the value.
    @MainActor
    public static func checkStoredValue(named name: String, key: [UInt8]?, value: [UInt8], codec: any CogDurableStore) -> StoredValueCheck {
        guard let descriptor = DurableRegistry.descriptor(named: name) as? ReplicableDescriptor & Descriptor else { return .undeclared }
        do {
            try descriptor.checkDecodes(key: key, value: value, codec: codec)
            return .decodes
        } catch {
            return .fails(reason: "\(error)", site: descriptor.site)
        }
    }
}

/// Decodes and stages one replicated write, without the value's Swift type.
protocol ReplicableDescriptor: AnyObject {
    /// Decodes a stored key and value without staging them (throws when they do not decode).
    @MainActor func checkDecodes(key: [UInt8]?, value: [UInt8], codec: any CogDurableStore) throws

    /// `value` nil: released, or — `absentIsInitial` — the source has no
    /// stored value and holds its initial one.
    @MainActor func stageReplicated(
        key: [UInt8]?, value: [UInt8]?, graph: Graph, codec: any CogDurableStore, absentIsInitial: Bool) throws
}

extension ManualDescriptor: ReplicableDescriptor {
    @MainActor func checkDecodes(key: [UInt8]?, value: [UInt8], codec: any CogDurableStore) throws {
        guard let durable else { throw NotDurable(label: label, site: site, hasName: stableName != nil) }
        if let key {
            guard let decodeKey = durable.decodeKey else {
                throw ReplicationError(message: "`\(label)` is keyless but the entry has a key")
            }
            _ = try decodeKey(key, codec)
        }
        _ = try durable.decodeValue(value, codec)
    }

    @MainActor func stageReplicated(
        key: [UInt8]?, value: [UInt8]?, graph: Graph, codec: any CogDurableStore, absentIsInitial: Bool
    ) throws {
        guard let durable else { throw NotDurable(label: label, site: site, hasName: stableName != nil) }
        let stateKey: StateKey
        if let key {
            guard let decodeKey = durable.decodeKey else {
                throw ReplicationError(message: "`\(label)` is keyless but a write carries a key")
            }
            stateKey = try decodeKey(key, codec)
        } else {
            stateKey = .none
        }
        let ref = StateRef(descriptor: self, key: stateKey)
        if let value {
            let decoded = try durable.decodeValue(value, codec)
            graph.stage(decoded, into: unsafeDowncast(graph.node(for: ref), to: ManualNode<Value>.self))
        } else if absentIsInitial {
            graph.stage(initial(stateKey), into: unsafeDowncast(graph.node(for: ref), to: ManualNode<Value>.self))
        } else {
            graph.releaseReplicated(ref)
        }
    }
}

/// A replicated write that cannot be applied.
public struct ReplicationError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}

extension Cogs {
    /// Applies a turn settled elsewhere (a replica applying the leader's turn
    /// record): its writes, by durable name, as one system turn named `name`;
    /// reactions run after it as after any turn.
    ///
    /// - Important: writes to names no declaration in this process has are
    ///   skipped (nothing here can read them); an undecodable key or value of
    ///   a known one throws.
    public func applyReplicatedTurn(named name: String, writes: [CogDurableWrite], codec: any CogDurableStore) throws {
        try stageByName(named: name, writes: writes, codec: codec, absentIsInitial: false)
    }

    /// Puts durable sources back to stored values — `value` nil: the source
    /// has no stored value and holds its initial one — as one system turn
    /// named `name`. For a writer whose turns could not be made durable (a
    /// refused or failed commit): what it settled must not stay visible.
    ///
    /// - Important: the caller's store must not record this turn (it is
    ///   already what the store holds).
    public func restoreDurableState(named name: String, writes: [CogDurableWrite], codec: any CogDurableStore) throws {
        try stageByName(named: name, writes: writes, codec: codec, absentIsInitial: true)
    }

    private func stageByName(named name: String, writes: [CogDurableWrite], codec: any CogDurableStore, absentIsInitial: Bool) throws {
        var resolved: [(ReplicableDescriptor, CogDurableWrite)] = []
        for write in writes {
            // A name no declaration in this process has (another rig's, a tool's)
            // is not materialized here: nothing in this process can read it.
            guard let descriptor = DurableRegistry.descriptor(named: write.name) as? ReplicableDescriptor else { continue }
            resolved.append((descriptor, write))
        }
        var failure: (any Error)?
        graph.turn(named: name, owner: nil) { [graph] _ in
            for (descriptor, write) in resolved {
                do {
                    try descriptor.stageReplicated(
                        key: write.key, value: write.value, graph: graph, codec: codec, absentIsInitial: absentIsInitial)
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
    }
}

/// Encodes a durable declaration's key without its Swift types.
protocol DurableKeyEncoding: AnyObject {
    @MainActor func encodedKey(_ key: StateKey, codec: any CogDurableStore) throws -> [UInt8]?
    /// The graph's current value of the state, encoded as the log stores it.
    @MainActor func encodedValue(_ key: StateKey, graph: Graph, codec: any CogDurableStore) throws -> [UInt8]?
}

extension ManualDescriptor: DurableKeyEncoding {
    @MainActor func encodedKey(_ key: StateKey, codec: any CogDurableStore) throws -> [UInt8]? {
        guard let durable else { throw NotDurable(label: label, site: site, hasName: stableName != nil) }
        return try durable.encodeKey?(key, codec)
    }

    @MainActor func encodedValue(_ key: StateKey, graph: Graph, codec: any CogDurableStore) throws -> [UInt8]? {
        guard let durable else { return nil }
        return try durable.encodeValue(graph.peek(StateRef(descriptor: self, key: key), as: Value.self), codec)
    }
}
