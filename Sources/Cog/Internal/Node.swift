/// One state (or consumer) living in one runtime.
///
/// Propagation is push-flags / pull-values: a committed change marks its
/// direct observers `dirty` and everything below them `check`; reading a node
/// settles it by walking its sources in the order it last read them. Edges
/// are kept twice (a `SourceLink` in the reader, an `ObserverLink` in the
/// source), each remembering the other's slot, so relinking is O(1).
///
/// - Important: links hold `unowned(unsafe)` references. A node is kept alive
///   by its runtime's tables (or by its owner, for consumers); it is removed
///   only once nothing observes it and after its own source links are cut.
@MainActor
@usableFromInline
class Node {
    @usableFromInline enum State: UInt8 { case clean, check, dirty }
    enum Kind: UInt8 { case manual, computed, consumer }

    final let kind: Kind
    @usableFromInline final let descriptor: Descriptor?
    @usableFromInline final let key: StateKey
    /// `key`, summarized for the re-tracking fast path.
    final let keySummary: KeySummary
    /// `label` or `label[key]`, made once so history entries need no allocation.
    final let label: String

    @exclusivity(unchecked) final var state: State
    /// On the settle stack or computing: reading it now means a cycle.
    @exclusivity(unchecked) final var busy = false
    /// Next source to check while settling (the settle stack is explicit).
    @exclusivity(unchecked) final var cursor = 0
    /// Next expected source while the node's selector runs (re-tracking).
    @exclusivity(unchecked) @usableFromInline final var trackIndex = 0
    /// Kept alive by a pinning read (`cogs[x]`) until `discard`.
    @exclusivity(unchecked) final var pinned = false
    /// Removed from its runtime (by `discard` or grace); any later use is a bug.
    @exclusivity(unchecked) final var released = false
    /// How long the state outlives its last consumer; nil: it never expires
    /// (`.app` sources, cells, consumers). Set by the graph when it is made.
    @exclusivity(unchecked) final var grace: Duration?
    /// When the graph releases it unless a consumer or a one-shot read comes
    /// first (an offset on the runtime's grace clock); nil: not waiting.
    @exclusivity(unchecked) final var graceDeadline: Duration?
    /// The Observation boundary a pinning read made for this state (its
    /// registrar and the consumer that sends its change notices); nil until
    /// the first pinning read.
    @exclusivity(unchecked) final var boundary: BoundaryLink?

    @exclusivity(unchecked) final var sources = LinkList<SourceLink>()
    @exclusivity(unchecked) final var observers = LinkList<ObserverLink>()

    init(kind: Kind, descriptor: Descriptor?, key: StateKey, label: String, state: State) {
        self.kind = kind
        self.descriptor = descriptor
        self.key = key
        self.keySummary = KeySummary(key)
        self.label = label
        self.state = state
    }

    isolated deinit {
        sources.deallocate()
        observers.deallocate()
    }

    /// Runs the node's computation (computed nodes, consumers). Returns whether
    /// its value changed, so the caller can wake its observers.
    func recompute(graph: Graph) -> Bool {
        fatalError("internal inconsistency: \(label) cannot recompute")
    }

    /// Commits the value staged by the current turn (manual nodes). Returns
    /// whether it differs from the committed one.
    func commitStaged() -> Bool {
        fatalError("internal inconsistency: \(label) has nothing staged")
    }

    /// Drops the value staged by the current turn (a refused turn keeps nothing).
    func discardStaged() {}

    /// Drops the cached value of a released node (a later read makes a new node).
    func resetValue() {}

    /// The durable write for this node's committed value (or its release).
    func durableWrite(released: Bool, store: any CogDurableStore) throws -> CogDurableWrite? { nil }
}

struct SourceLink {
    /// The source, borrowed (+0): its runtime's tables own it.
    let handle: Unmanaged<Node>
    /// Where this edge sits in the source's `observers`.
    var observerSlot: Int

    init(node: Node, observerSlot: Int) {
        self.handle = Unmanaged.passUnretained(node)
        self.observerSlot = observerSlot
    }

    var node: Node { handle.takeUnretainedValue() }
}

struct ObserverLink {
    /// The observer, borrowed (+0): its runtime's tables (or owner) own it.
    let handle: Unmanaged<Node>
    /// Where this edge sits in the observer's `sources`.
    var sourceSlot: Int

    init(node: Node, sourceSlot: Int) {
        self.handle = Unmanaged.passUnretained(node)
        self.sourceSlot = sourceSlot
    }

    var node: Node { handle.takeUnretainedValue() }
}

/// A node that holds a value of one type.
@MainActor
@usableFromInline
class TypedNode<Value>: Node {
    @exclusivity(unchecked) @usableFromInline final var storage: Value?
    final let equals: (@MainActor (Value, Value) -> Bool)?

    init(
        kind: Kind, descriptor: Descriptor?, key: StateKey, label: String,
        state: State, equals: (@MainActor (Value, Value) -> Bool)?
    ) {
        self.equals = equals
        super.init(kind: kind, descriptor: descriptor, key: key, label: label, state: state)
    }

    @inlinable final var value: Value {
        storage.unsafelyUnwrapped
    }

    /// Whether `new` counts as a change from `old`: the declaration's `equals:`
    /// (or `==`) when it has one, otherwise every write is a change.
    @inline(__always) final func isChange(from old: Value, to new: Value) -> Bool {
        guard let equals else { return true }
        return !equals(old, new)
    }
}

/// A writable source: a manual cog, a manual box's key, or one of the cells an
/// async state publishes into (written only by system turns).
@MainActor
@usableFromInline
final class ManualNode<Value>: TypedNode<Value> {
    @exclusivity(unchecked) @usableFromInline var staged: Value?
    /// Set by a turn that publishes `staged` as a change even if it equals
    /// the committed value (an async state's replacement `pending`).
    @exclusivity(unchecked) var stagedIsChange = false
    /// The declaration, typed (nil for cells the graph owns).
    let manualDescriptor: ManualDescriptor<Value>?
    /// This state's key as the durable store encodes it, kept from its first
    /// durable write (a key never changes, and the codec is deterministic):
    /// later writes reuse the bytes instead of encoding the key again.
    @exclusivity(unchecked) private var encodedKey: [UInt8]?
    init(descriptor: ManualDescriptor<Value>, key: StateKey) {
        manualDescriptor = descriptor
        super.init(
            kind: .manual, descriptor: descriptor, key: key, label: descriptor.label(for: key),
            state: .clean, equals: descriptor.equals)
    }

    /// A cell owned by another node (async value and status).
    init(cellLabel: String, value: Value, equals: (@MainActor (Value, Value) -> Bool)?) {
        manualDescriptor = nil
        super.init(kind: .manual, descriptor: nil, key: .none, label: cellLabel, state: .clean, equals: equals)
        self.storage = value
    }

    override func commitStaged() -> Bool {
        guard let new = staged else { return false }
        staged = nil
        if stagedIsChange {
            stagedIsChange = false
            storage = new
            return true
        }
        guard isChange(from: value, to: new) else { return false }
        storage = new
        return true
    }

    override func discardStaged() {
        staged = nil
        stagedIsChange = false
    }

    override func resetValue() {
        staged = nil
        stagedIsChange = false
        storage = nil
    }

    override func durableWrite(released: Bool, store: any CogDurableStore) throws -> CogDurableWrite? {
        guard let descriptor = manualDescriptor else { return nil }
        return try descriptor.durableWrite(of: self, released: released, store: store, encodedKey: &encodedKey)
    }
}

/// An automatic cog's state: a cached value recomputed from what it reads.
@MainActor
@usableFromInline
final class ComputedNode<Value>: TypedNode<Value> {
    let evaluate: @MainActor (Graph, ComputedNode<Value>) -> Bool

    init(descriptor: ComputedDescriptor<Value>, key: StateKey) {
        self.evaluate = descriptor.evaluate
        super.init(
            kind: .computed, descriptor: descriptor, key: key, label: descriptor.label(for: key),
            state: .dirty, equals: nil)
    }

    override func recompute(graph: Graph) -> Bool {
        evaluate(graph, self)
    }

    override func resetValue() {
        storage = nil
        state = .dirty
    }
}
