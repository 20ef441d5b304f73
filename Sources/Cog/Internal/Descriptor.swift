import Synchronization

/// The identity of one declaration: every `Cog…`/`CogBox…` value made by one
/// initializer call shares one descriptor. Descriptors are immutable and made
/// once (file-scope `let`s), so a runtime can index its node tables by `id`.
///
/// - Important: subclasses hold only `@MainActor` closures and immutable
///   values, which is what makes the `@unchecked Sendable` honest.
@usableFromInline
class Descriptor: @unchecked Sendable {
    private static let nextID = Atomic<Int>(0)

    /// Dense, process-wide number used as an index into per-runtime tables.
    let id: Int
    /// `name:` when given, otherwise `fileID:line`; used in history and errors.
    let label: String
    /// Whether the declaration is a box (`CogBox…`), whose states carry a key.
    let isKeyed: Bool
    /// The explicit `name:`, which durable runtimes use as the stable name.
    let stableName: String?
    /// Where it was declared: `fileID:line`.
    let site: String

    @usableFromInline
    init(name: String?, fileID: StaticString, line: UInt, isKeyed: Bool) {
        self.id = Descriptor.nextID.add(1, ordering: .relaxed).oldValue
        self.site = "\(fileID):\(line)"
        self.label = name ?? site
        self.stableName = name
        self.isKeyed = isKeyed
    }

    /// Makes the runtime node for one state of this declaration.
    @MainActor func makeNode(key: StateKey, graph: Graph) -> Node {
        fatalError("internal inconsistency: \(type(of: self)) does not make nodes")
    }

    #if DEBUG
        /// The history label of an async state's value: `label.value` or
        /// `label.value[key]`.
        func valueLabel(for key: StateKey) -> String {
            switch key {
            case .none: "\(label).value"
            case .int(let value): "\(label).value[\(value)]"
            case .string(let value): "\(label).value[\(value)]"
            case .other(let value): "\(label).value[\(value.base)]"
            }
        }
    #endif

    /// The label of one state: `label` or `label[key]`.
    func label(for key: StateKey) -> String {
        switch key {
        case .none: label
        case .int(let value): "\(label)[\(value)]"
        case .string(let value): "\(label)[\(value)]"
        case .other(let value): "\(label)[\(value.base)]"
        }
    }
}

/// The key of one state of a box, stored without allocating for the common
/// key types (`Int`, `String`) and type-erased otherwise.
@usableFromInline
enum StateKey: Hashable, @unchecked Sendable {
    /// A keyless declaration's one state.
    case none
    case int(Int)
    case string(String)
    case other(AnyHashable)

    @inlinable
    init<Key: Hashable>(_ key: Key) {
        if Key.self == Int.self {
            self = .int(unsafeBitCast(key, to: Int.self))
        } else if Key.self == String.self {
            self = .string(unsafeBitCast(key, to: String.self))
        } else {
            self = .other(AnyHashable(key))
        }
    }

    @inlinable
    static func == (lhs: StateKey, rhs: StateKey) -> Bool {
        switch lhs {
        case .none:
            if case .none = rhs { return true }
        case .int(let left):
            if case .int(let right) = rhs { return left == right }
        case .string(let left):
            if case .string(let right) = rhs { return left == right }
        case .other(let left):
            if case .other(let right) = rhs { return left == right }
        }
        return false
    }

    @inlinable
    func hash(into hasher: inout Hasher) {
        switch self {
        case .none: hasher.combine(0 as UInt8)
        case .int(let value): hasher.combine(value)
        case .string(let value): hasher.combine(value)
        case .other(let value): hasher.combine(value)
        }
    }

    /// The typed key a box's closures receive.
    @inlinable
    func unwrap<Key>(as: Key.Type) -> Key {
        switch self {
        case .int(let value) where Key.self == Int.self:
            return unsafeBitCast(value, to: Key.self)
        case .string(let value) where Key.self == String.self:
            return unsafeBitCast(value, to: Key.self)
        case .other(let value):
            if let key = value.base as? Key { return key }
        default:
            break
        }
        fatalError("internal inconsistency: a keyed state has no \(Key.self) key")
    }
}

/// A trivially copyable summary of a key: enough to decide equality for
/// keyless states and `Int` keys without touching reference-counted payloads.
struct KeySummary: Equatable {
    /// 0 keyless, 1 `Int`, 2 anything else (compare the keys themselves).
    let kind: UInt8
    let bits: Int

    @inline(__always)
    init(_ key: StateKey) {
        switch key {
        case .none: (kind, bits) = (0, 0)
        case .int(let value): (kind, bits) = (1, value)
        default: (kind, bits) = (2, 0)
        }
    }
}

/// Identifies one state in any runtime: a declaration plus, for boxes, a key.
/// Building one allocates nothing for `Int` and `String` keys.
@usableFromInline
struct StateRef: Hashable, @unchecked Sendable {
    @usableFromInline let descriptor: Descriptor
    @usableFromInline let key: StateKey

    @inlinable
    init(descriptor: Descriptor, key: StateKey) {
        self.descriptor = descriptor
        self.key = key
    }

    @usableFromInline
    static func == (lhs: StateRef, rhs: StateRef) -> Bool {
        lhs.descriptor === rhs.descriptor && lhs.key == rhs.key
    }

    @usableFromInline
    func hash(into hasher: inout Hasher) {
        hasher.combine(descriptor.id)
        hasher.combine(key)
    }

    var label: String { descriptor.label(for: key) }
}

/// How a manual source is kept: `.app` (the default) lives as long as its
/// runtime; `.whileObserved(resetToInitial: true)` may be released by
/// `discard`, after which the next read starts again from the initial closure.
public enum ManualCogLifetime: Sendable, Equatable {
    case app
    case whileObserved(resetToInitial: Bool, grace: Duration? = nil)

    /// Rejects `.whileObserved(resetToInitial: false)`, which Cog does not
    /// support: a released manual value can only come back as its initial one.
    func validated(label: String) -> ManualCogLifetime {
        if case .whileObserved(let reset, _) = self, !reset {
            fatalError(
                "`\(label)` asks for .whileObserved(resetToInitial: false); a released manual "
                    + "source restarts from its initial value, so write "
                    + ".whileObserved(resetToInitial: true) or keep the default .app")
        }
        return self
    }

    var allowsRelease: Bool {
        if case .whileObserved = self { return true }
        return false
    }
}

@usableFromInline
final class ManualDescriptor<Value>: Descriptor, @unchecked Sendable {
    let initial: @MainActor (StateKey) -> Value
    let equals: (@MainActor (Value, Value) -> Bool)?
    let lifetime: ManualCogLifetime
    /// Present when the value (and key) types are `Codable`.
    let durable: DurableCoding<Value>?
    /// `durable`'s value and key encoders, kept where reading them needs no
    /// `DurableCoding<Value>` metadata (`durableWrite(of:released:store:encodedKey:)`).
    private let encodeNodeValue: (@MainActor (Node, any CogDurableStore) throws -> [UInt8])?
    private let encodeKey: (@MainActor (StateKey, any CogDurableStore) throws -> [UInt8])?

    @usableFromInline
    init(
        initial: @escaping @MainActor (StateKey) -> Value,
        equals: (@MainActor (Value, Value) -> Bool)?,
        lifetime: ManualCogLifetime,
        name: String?, fileID: StaticString, line: UInt, isKeyed: Bool,
        durable: DurableCoding<Value>? = nil
    ) {
        self.initial = initial
        self.equals = equals
        self.lifetime = lifetime
        self.durable = durable
        self.encodeNodeValue = durable?.encodeNodeValue
        self.encodeKey = durable?.encodeKey
        super.init(name: name, fileID: fileID, line: line, isKeyed: isKeyed)
        _ = lifetime.validated(label: label)
        if durable != nil { DurableRegistry.register(self) }
    }

    @MainActor override func makeNode(key: StateKey, graph: Graph) -> Node {
        let node = ManualNode<Value>(descriptor: self, key: key)
        if let store = graph.durableStore, let value = graph.loadDurable(self, key: key, from: store) {
            node.storage = value
        } else {
            node.storage = initial(key)
        }
        return node
    }

    /// The stored value of one state, decoded; nil when the store has none.
    @MainActor func load(key: StateKey, from store: any CogDurableStore) throws -> Value? {
        guard let durable, let name = stableName else { return nil }
        let encodedKey = try durable.encodeKey?(key, store)
        guard let bytes = try store.storedValue(name: name, key: encodedKey) else { return nil }
        return try durable.decodeValue(bytes, store)
    }

    /// The durable write of `node`'s committed value (`released`: of its
    /// release). `encodedKey`: the key's bytes from an earlier write of the
    /// same state, filled in here on the first. Nothing here names `Value`
    /// (this runs unspecialized, once per settled write).
    @MainActor func durableWrite(
        of node: Node, released: Bool, store: any CogDurableStore, encodedKey: inout [UInt8]?
    ) throws -> CogDurableWrite {
        guard let encodeNodeValue, let name = stableName else {
            throw NotDurable(label: label(for: node.key), site: site, hasName: stableName != nil)
        }
        if encodedKey == nil, let encodeKey { encodedKey = try encodeKey(node.key, store) }
        return CogDurableWrite(name: name, key: encodedKey, value: released ? nil : try encodeNodeValue(node, store))
    }
}

@usableFromInline
final class ComputedDescriptor<Value>: Descriptor, @unchecked Sendable {
    /// Runs the selector for one node and stores the result; returns whether
    /// the value changed. Built where `Value` is concrete (the declaration's
    /// inlinable initializer), so the hot path runs specialized code.
    @usableFromInline let evaluate: @MainActor (Graph, ComputedNode<Value>) -> Bool
    /// Present for a named cog (or box) whose value and key are `Codable`: it
    /// can select scopes across processes (the leader evaluates it by name
    /// and encoded key, `protocol/cogwire.md` §6).
    @usableFromInline let coding: DurableCoding<Value>?

    @inlinable
    init(
        selector: @escaping @MainActor (Reader<Value>, StateKey) -> Value,
        equals: (@MainActor (Value, Value) -> Bool)?,
        name: String?, fileID: StaticString, line: UInt, isKeyed: Bool,
        coding: DurableCoding<Value>? = nil
    ) {
        self.coding = coding
        self.evaluate = { graph, node in
            let new = graph.tracking(node) { selector(Reader(graph: graph, node: node), node.key) }
            guard let old = node.storage else {
                node.storage = new
                return true
            }
            if let equals, equals(old, new) { return false }
            node.storage = new
            return true
        }
        super.init(name: name, fileID: fileID, line: line, isKeyed: isKeyed)
        if coding != nil { registerAsSelector() }
    }

    @usableFromInline
    func registerAsSelector() {
        SelectorRegistry.register(self)
    }

    @MainActor override func makeNode(key: StateKey, graph: Graph) -> Node {
        ComputedNode<Value>(descriptor: self, key: key)
    }
}

/// A durable runtime was asked to write a source it cannot persist.
struct NotDurable: Error, CustomStringConvertible {
    let label: String
    let site: String
    let hasName: Bool

    var description: String {
        hasName
            ? "`\(label)` (declared at \(site)) is written in a durable runtime, but its value or key type is not Codable & Equatable & Sendable (keys Codable & Hashable)"
            : "`\(label)` (declared at \(site)) is written in a durable runtime but has no stable name; give the declaration a `name:`"
    }
}

/// Makes a `Key`-typed closure callable with the erased key a state carries.
@inlinable
func unwrapKey<Key>(_ key: StateKey, as: Key.Type) -> Key {
    key.unwrap(as: Key.self)
}
