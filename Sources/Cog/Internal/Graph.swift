/// The engine behind one `Cogs` runtime: node tables, settlement, tracking,
/// turns and their FIFO. Everything runs on the main actor; nothing here
/// allocates on a steady turn once the buffers have grown.
@MainActor
@usableFromInline
final class Graph {
    // MARK: Node tables

    /// Keyless states, indexed by descriptor id.
    private var singles = ContiguousArray<Node?>()
    /// Keyed states, one table per box, indexed by descriptor id.
    private var keyed = ContiguousArray<KeyedTable?>()

    final class KeyedTable {
        var nodes: [StateKey: Node] = [:]
    }

    // MARK: Settlement state

    /// Nodes being settled or computed, outermost first. Reading one of them
    /// again closes a cycle; the slice from it to the top is the cycle's path.
    @exclusivity(unchecked) private var settleStack = ContiguousArray<Unmanaged<Node>>()
    /// Scratch stack for pushing `check` flags downstream.
    @exclusivity(unchecked) private var pushStack = ContiguousArray<Unmanaged<Node>>()
    /// Nodes whose selector is running, outermost first.
    @exclusivity(unchecked) private var computingStack = ContiguousArray<Unmanaged<Node>>()

    /// The node whose selector is running now, if any.
    var computingNode: Node? { computingStack.last?.takeUnretainedValue() }

    /// The automatic cog computing now, if the innermost running code is one
    /// (a reaction may write through ops; a computation may not).
    var computingComputation: Node? {
        guard let node = computingNode, node.kind != .consumer else { return nil }
        return node
    }

    @inline(__always)
    private func isComputing(_ node: Node) -> Bool {
        computingStack.last?.toOpaque() == Unmanaged.passUnretained(node).toOpaque()
    }
    /// Whether graph code is running now (a settle, a computation, the FIFO).
    var isBusyWithGraphWork: Bool {
        !computingStack.isEmpty || !settleStack.isEmpty || draining || runningReactions
    }

    /// The deepest nesting of computations a cold read may cause.
    static let maximumNestedComputations = 128

    // MARK: Turn state

    enum Phase { case idle, body, flush }
    @exclusivity(unchecked) private(set) var phase = Phase.idle
    /// Identifies the turn a `Writer` belongs to; bumped for every turn run.
    @exclusivity(unchecked) private(set) var turnSerial: UInt64 = 0
    /// Sources staged by the running turn, in first-write order.
    @exclusivity(unchecked) private var stagedNodes = ContiguousArray<Node>()
    @exclusivity(unchecked) private var changedNodes = ContiguousArray<Node>()
    /// The refusal that ends the running turn (`refuseTurn`), if any.
    @exclusivity(unchecked) private var turnRefusal: Refusal?
    /// The refusal that ended the last turn run, or nil when it did not refuse.
    @exclusivity(unchecked) private(set) var lastRefusal: Refusal?
    /// Told how the running turn ended (`whenTurnEnds`), then forgotten.
    @exclusivity(unchecked) private var turnEndHandlers: [(TurnEnd) -> Void] = []
    /// Whether the last flush committed a change.
    @exclusivity(unchecked) private var lastTurnChanged = false
    /// Turns run here that changed something (an embedded runtime's
    /// `OpOutcome.applied` revision).
    @exclusivity(unchecked) private(set) var changingTurns: UInt64 = 0
    /// Turns requested while a turn flushes, run one at a time in order.
    @exclusivity(unchecked) private var queue = TurnQueue()
    @exclusivity(unchecked) private var draining = false
    /// Consumers flagged or registered, waiting for the flush to run them.
    @exclusivity(unchecked) private var pendingReactions = ContiguousArray<ReactionNode>()
    @exclusivity(unchecked) private var reactionSequence = 0
    @exclusivity(unchecked) private var runningReactions = false
    /// Watches turn → reaction → turn chains for runaways.
    let turnChain = TurnChainGuard()
    /// Live Observation boundaries (`ObservationBoundary.swift`).
    var observationBoundaryCount = 0
    /// How `c.track` follows outside models, and its bridges (`ExternalObservation.swift`).
    var externalObservationTracking = ExternalObservationTrackingMode.automatic
    var externalBridges: [ExternalBridgeKey: ExternalBridgeEntry] = [:]
    var externalObservationRearmAcknowledgements: [MainActorCleanupAcknowledgement] = []

    let history = HistoryRing(capacity: 256)
    #if DEBUG
        /// The value labels (`forecast.value[home]`) of the async states the
        /// running turn published a value for: recorded as `recompute`
        /// entries after the turn's writes, before its reactions.
        var publishedAsyncValues: [String] = []
    #endif

    /// Hooks the async layer and tests attach to (see `Graph+Async`).
    var asyncCompletionCheckAcknowledgements: [MainActorCleanupAcknowledgement] = []

    /// Set on a worker's replica: remote ops go to the leader.
    weak var remoteLink: (any CogRemoteLink)?

    /// The store of a durable runtime; nil for an in-memory one.
    let durableStore: (any CogDurableStore)?
    /// While set (`Cogs.settle`), settled durable turns are collected here
    /// for the caller instead of committed to `durableStore`.
    var collectedDurableTurns: [CogDurableTurn]?
    /// The longest durable name (UTF-8 bytes): a `state` key (name, 0, 0xFF,
    /// a 32-byte digest) must fit LMDB's 511 bytes.
    static let maximumDurableName = 400
    /// Stable names seen by this durable runtime, to catch two declarations sharing one.
    private var durableNames: [String: Descriptor] = [:]
    /// Releases of durable states made by the running turn.
    private var durableReleases: [CogDurableWrite] = []

    /// Grace expiry: states waiting to be released, and the one timer.
    let lifetimes: Lifetimes

    init(durableStore: (any CogDurableStore)? = nil, lifetimes: Lifetimes = Lifetimes()) {
        self.durableStore = durableStore
        self.lifetimes = lifetimes
    }

    /// Loads a durable source's stored value, checking its name is its own.
    func loadDurable<Value>(_ descriptor: ManualDescriptor<Value>, key: StateKey, from store: any CogDurableStore) -> Value? {
        if let name = descriptor.stableName {
            // The log keys state by name (LMDB keys hold at most 511 bytes).
            precondition(
                name.utf8.count <= Graph.maximumDurableName,
                "the durable name of the declaration at \(descriptor.site) is \(name.utf8.count) bytes long; "
                    + "durable names hold at most \(Graph.maximumDurableName) bytes")
            if let other = durableNames[name], other !== descriptor {
                fatalError(
                    "two declarations are named `\(name)`: one at \(other.site), one at \(descriptor.site); "
                        + "durable names must be unique — rename one of them")
            }
            durableNames[name] = descriptor
        }
        do {
            return try descriptor.load(key: key, from: store)
        } catch {
            fatalError("the stored value of `\(descriptor.label(for: key))` (declared at \(descriptor.site)) does not decode: \(error)")
        }
    }

    // MARK: Lookup

    /// The node for `ref`, created (running its initial closure) on first use.
    @usableFromInline
    func node(for ref: StateRef) -> Node {
        let id = ref.descriptor.id
        if case .none = ref.key {
            if id < singles.count, let node = singles[id] { return node }
        } else if id < keyed.count, let table = keyed[id], let node = table.nodes[ref.key] {
            return node
        }
        return create(ref)
    }

    /// How many states this runtime holds now (the bench's leak check).
    var liveStateCount: Int {
        singles.reduce(0) { $0 + ($1 == nil ? 0 : 1) } + keyed.reduce(0) { $0 + ($1?.nodes.count ?? 0) }
    }

    /// The node for `ref` if this runtime has made it.
    func existingNode(for ref: StateRef) -> Node? {
        let id = ref.descriptor.id
        if case .none = ref.key {
            guard id < singles.count else { return nil }
            return singles[id]
        }
        guard id < keyed.count, let table = keyed[id] else { return nil }
        return table.nodes[ref.key]
    }

    private func create(_ ref: StateRef) -> Node {
        let node = makeNode(for: ref)
        node.grace = lifetimes.grace(of: ref.descriptor)
        let id = ref.descriptor.id
        if case .none = ref.key {
            while singles.count <= id { singles.append(nil) }
            singles[id] = node
        } else {
            while keyed.count <= id { keyed.append(nil) }
            let table = keyed[id] ?? KeyedTable()
            keyed[id] = table
            table.nodes[ref.key] = node
        }
        return node
    }

    func removeFromTable(_ node: Node) {
        guard let descriptor = node.descriptor else { return }
        let id = descriptor.id
        if case .none = node.key {
            singles[id] = nil
        } else {
            keyed[id]?.nodes[node.key] = nil
        }
    }

    // MARK: Reads

    /// Finds, settles and (when `observer` is computing) tracks the node for
    /// `ref`. While a selector re-reads what it read last time, in the same
    /// order, the node comes from its own edge list with no table lookup.
    @usableFromInline
    func resolve(_ ref: StateRef, trackedBy observer: Node?) -> Node {
        if let observer {
            let index = observer.trackIndex
            if index < observer.sources.count {
                let expected = observer.sources[index].node
                let summary = KeySummary(ref.key)
                if expected.descriptor === ref.descriptor && expected.keySummary == summary
                    && (summary.kind != 2 || expected.key == ref.key)
                {
                    if expected.state != .clean || expected.busy { settle(expected) }
                    guard isComputing(observer) else { failStaleReader(observer) }
                    observer.trackIndex = index + 1
                    return expected
                }
            }
            let node = node(for: ref)
            if node.state != .clean || node.busy { settle(node) }
            track(node, into: observer)
            return node
        }
        let node = node(for: ref)
        if node.state != .clean || node.busy { settle(node) }
        if node.observers.isEmpty && node.grace != nil && !node.pinned { demandedOnce(node) }
        return node
    }

    /// Settles `ref` and returns its value, recording an edge when `observer`
    /// is the node whose selector is running.
    @inlinable
    func read<Value>(_ ref: StateRef, as: Value.Type, trackedBy observer: Node?) -> Value {
        unsafeDowncast(resolve(ref, trackedBy: observer), to: TypedNode<Value>.self).value
    }

    /// A pinning read: like `peek`, and the state stays alive until `discard`.
    @inlinable
    func pinningRead<Value>(_ ref: StateRef, as: Value.Type) -> Value {
        let node = resolvePinned(ref)
        return unsafeDowncast(node, to: TypedNode<Value>.self).value
    }

    @usableFromInline
    func resolvePinned(_ ref: StateRef) -> Node {
        let node = node(for: ref)
        node.pinned = true
        if node.graceDeadline != nil { graceInterrupted(node) }
        if node.state != .clean || node.busy { settle(node) }
        observedRead(of: node, ref)
        runDeferredWorkIfIdle()
        return node
    }

    /// An untracked read from outside any computation (`peek`).
    @inlinable
    func peek<Value>(_ ref: StateRef, as: Value.Type) -> Value {
        let node = resolve(ref, trackedBy: nil)
        runDeferredWorkIfIdle()
        return unsafeDowncast(node, to: TypedNode<Value>.self).value
    }

    // MARK: Settle

    /// Brings `root` up to date with every committed write. Walks old sources
    /// with an explicit stack (a warm chain of any length uses no native
    /// stack); only a computation's reads of cold states nest.
    func settle(_ root: Node) {
        if root.busy { failCycle(closingAt: root) }
        guard root.state != .clean else { return }
        let base = settleStack.count
        root.busy = true
        settleStack.append(Unmanaged.passUnretained(root))
        while settleStack.count > base {
            // Nodes are owned by the tables; the stack borrows them (+0).
            unowned(unsafe) let node = settleStack[settleStack.count - 1].takeUnretainedValue()
            // Settle every old source first, so a recompute never nests into
            // a warm one (and a check node learns whether anything changed).
            var pushed = false
            while node.cursor < node.sources.count {
                unowned(unsafe) let source = node.sources[node.cursor].node
                if source.state != .clean {
                    if source.busy { failCycle(closingAt: source) }
                    source.busy = true
                    settleStack.append(Unmanaged.passUnretained(source))
                    pushed = true
                    break
                }
                node.cursor += 1
            }
            if pushed { continue }
            if node.state == .dirty {
                recompute(node)
            } else {
                node.state = .clean
            }
            node.cursor = 0
            node.busy = false
            settleStack.removeLast()
        }
    }

    /// Settles what a `check` node reads without running it: afterwards it
    /// is clean (nothing it reads changed) or dirty (something did, and its
    /// next settle runs it).
    func settleSources(of node: Node) {
        var index = 0
        while index < node.sources.count && node.state == .check {
            let source = node.sources[index].node
            if source.state != .clean || source.busy { settle(source) }
            index += 1
        }
        if node.state == .check { node.state = .clean }
    }

    private func recompute(_ node: Node) {
        if computingStack.count >= Graph.maximumNestedComputations {
            let innermost = computingStack.suffix(4).map { $0.takeUnretainedValue().label } + [node.label]
            fatalError(
                TrapMessage.coldNesting(
                    depth: computingStack.count + 1, limit: Graph.maximumNestedComputations, innermost: innermost))
        }
        computingStack.append(Unmanaged.passUnretained(node))
        let changed = node.recompute(graph: self)
        computingStack.removeLast()
        node.state = .clean
        if node.kind != .consumer {
            #if DEBUG
                history.record(.recompute, turn: history.turnNumber, name: node.label)
            #endif
            if changed { markObserversDirty(node) }
        }
    }

    /// Runs `body` as `node`'s computation, re-tracking what it reads.
    @inlinable
    func tracking<T>(_ node: Node, _ body: () -> T) -> T {
        node.trackIndex = 0
        let result = body()
        trimSources(of: node, to: node.trackIndex)
        return result
    }

    // MARK: Edges

    private func failStaleReader(_ observer: Node) -> Never {
        fatalError(
            "a reader of `\(observer.label)` was used outside its computation; read through the "
                + "`c` passed to the selector, and only while the selector runs")
    }

    func track(_ source: Node, into observer: Node) {
        guard isComputing(observer) else { failStaleReader(observer) }
        let index = observer.trackIndex
        if index < observer.sources.count {
            if observer.sources[index].node === source {
                observer.trackIndex = index + 1
                return
            }
            if index > 0 && observer.sources[index - 1].node === source { return }
            unlinkObserver(observer.sources[index])
            if source.graceDeadline != nil { graceInterrupted(source) }
            source.observers.append(ObserverLink(node: observer, sourceSlot: index))
            observer.sources[index] = SourceLink(node: source, observerSlot: source.observers.count - 1)
        } else {
            if index > 0 && observer.sources[index - 1].node === source { return }
            if source.graceDeadline != nil { graceInterrupted(source) }
            source.observers.append(ObserverLink(node: observer, sourceSlot: index))
            observer.sources.append(SourceLink(node: source, observerSlot: source.observers.count - 1))
        }
        observer.trackIndex = index + 1
    }

    /// Cuts `observer`'s edges from position `count` on (a source left with
    /// no consumer starts its grace).
    @usableFromInline
    func trimSources(of observer: Node, to count: Int) {
        var index = observer.sources.count
        guard index > count else { return }
        while index > count {
            index -= 1
            unlinkObserver(observer.sources[index])
        }
        observer.sources.removeLast(observer.sources.count - count)
    }

    /// Removes the observer side of one edge, keeping slots consistent.
    private func unlinkObserver(_ link: SourceLink) {
        let source = link.node
        let slot = link.observerSlot
        let last = source.observers.count - 1
        if slot != last {
            let moved = source.observers[last]
            source.observers[slot] = moved
            moved.node.sources[moved.sourceSlot].observerSlot = slot
        }
        source.observers.removeLast()
        if last == 0 && source.grace != nil { lastConsumerLeft(source) }
    }

    // MARK: Push

    func markObserversDirty(_ node: Node) {
        var index = 0
        while index < node.observers.count {
            markDirty(node.observers[index].node)
            index += 1
        }
    }

    private func markDirty(_ node: Node) {
        switch node.state {
        case .dirty:
            return
        case .check:
            node.state = .dirty
        case .clean:
            node.state = .dirty
            if node.kind == .consumer { enqueueReaction(node) }
            pushCheck(below: node)
        }
    }

    private func pushCheck(below start: Node) {
        pushStack.append(Unmanaged.passUnretained(start))
        while let top = pushStack.popLast() {
            unowned(unsafe) let node = top.takeUnretainedValue()
            var index = 0
            while index < node.observers.count {
                unowned(unsafe) let observer = node.observers[index].node
                if observer.state == .clean {
                    observer.state = .check
                    if observer.kind == .consumer { enqueueReaction(observer) }
                    pushStack.append(Unmanaged.passUnretained(observer))
                }
                index += 1
            }
        }
    }

    // MARK: Cycles

    /// The path a read of `node` would close, if it is being settled now.
    func cyclePath(closingAt node: Node) -> [String]? {
        let handle = Unmanaged.passUnretained(node).toOpaque()
        guard node.busy, let start = settleStack.lastIndex(where: { $0.toOpaque() == handle }) else { return nil }
        return settleStack[start...].map { $0.takeUnretainedValue().label } + [node.label]
    }

    private func failCycle(closingAt node: Node) -> Never {
        let path = cyclePath(closingAt: node) ?? [node.label, node.label]
        fatalError(TrapMessage.cycle(path))
    }

    // MARK: Turns

    /// Runs `body` as a turn now, joins the running turn, or queues it, as the
    /// Cog's write model requires (see `CogOps.turn(named:_:)`).
    /// Returns the refusal of the turn it ran itself (nil when it did not
    /// refuse, joined the running turn or was queued).
    @discardableResult
    func turn(named name: String, owner: TurnOwner?, _ body: @escaping (Writer) -> Void) -> Refusal? {
        if let node = computingComputation {
            fatalError(TrapMessage.turnDuringComputation(name, computing: node))
        }
        switch phase {
        case .body:
            body(Writer(graph: self, serial: turnSerial))
            return nil
        case .flush:
            queue.append(QueuedTurn(name: name, owner: owner, body: body))
            return nil
        case .idle:
            if let owner, !owner.admitsTurns { return nil }
            return turnAtOnce(named: name, body)
        }
    }

    /// Whether a turn asked for now runs before `turn` returns (the graph
    /// idle, no computation running): its body then need not escape.
    var runsTurnsAtOnce: Bool { phase == .idle && computingComputation == nil }

    /// An owner-less turn when `runsTurnsAtOnce`: `body` runs before this
    /// returns, so it may live on the caller's stack (no closure context
    /// allocated for it).
    func turnAtOnce(named name: String, _ body: (Writer) -> Void) -> Refusal? {
        precondition(runsTurnsAtOnce, "internal inconsistency: a turn run at once while the graph is not idle")
        runTurn(named: name, body)
        let refusal = lastRefusal
        drain()
        return refusal
    }

    /// A turn the graph itself asks for (async publication, discard): it
    /// carries no owner and runs as soon as graph work is safe.
    func systemTurn(named name: String, _ body: @escaping (Writer) -> Void) {
        if phase == .idle && computingStack.isEmpty && settleStack.isEmpty && !draining {
            runTurn(named: name, body)
            drain()
        } else {
            queue.append(QueuedTurn(name: name, owner: nil, body: body))
        }
    }

    private func runTurn(named name: String, _ body: (Writer) -> Void) {
        turnSerial &+= 1
        history.beginTurn(named: name)
        turnChain.turnStarted(named: name)
        phase = .body
        turnRefusal = nil
        body(Writer(graph: self, serial: turnSerial))
        if turnRefusal != nil {
            // Refused: nothing of the turn is kept (the flush then commits nothing).
            for node in stagedNodes { node.discardStaged() }
            stagedNodes.removeAll(keepingCapacity: true)
        }
        lastRefusal = turnRefusal
        turnRefusal = nil
        flush()
        if !turnEndHandlers.isEmpty { endTurn() }
    }

    /// How a turn ended, for `whenTurnEnds`.
    struct TurnEnd {
        /// The refusal that ended it; nil when it did not refuse.
        var refusal: Refusal?
        /// Whether it committed a change.
        var changed: Bool
        /// `changingTurns` after it.
        var changingTurns: UInt64
    }

    /// Runs `handler` once the running turn has ended (flushed, its
    /// reactions run): the caller must be inside a turn's body. Handlers
    /// run in flush order rules: turns they request are queued.
    func whenTurnEnds(_ handler: @escaping (TurnEnd) -> Void) {
        precondition(phase == .body, "internal inconsistency: whenTurnEnds outside a turn's body")
        turnEndHandlers.append(handler)
    }

    private func endTurn() {
        let handlers = turnEndHandlers
        turnEndHandlers = []
        let end = TurnEnd(refusal: lastRefusal, changed: lastTurnChanged, changingTurns: changingTurns)
        phase = .flush
        for handler in handlers { handler(end) }
        phase = .idle
    }

    /// Marks the running turn refused (an op body threw `refusal`): its
    /// staged writes are dropped when the body returns. The first refusal
    /// of a turn is the one answered.
    func refuseTurn(_ refusal: Refusal, serial: UInt64) {
        guard phase == .body, serial == turnSerial else {
            fatalError(
                "internal inconsistency: a refusal (\(refusal)) arrived outside the body of its turn; an op refuses only inside its body")
        }
        if turnRefusal == nil { turnRefusal = refusal }
    }

    /// Commits the staged writes, pushes flags from the real changes, then
    /// runs exports and reactions whose inputs changed (Cog's flush order).
    private func flush() {
        phase = .flush
        for node in stagedNodes where node.commitStaged() {
            changedNodes.append(node)
            history.record(.write, turn: history.turnNumber, name: node.label)
        }
        stagedNodes.removeAll(keepingCapacity: true)
        #if DEBUG
            if !publishedAsyncValues.isEmpty {
                for name in publishedAsyncValues { history.record(.recompute, turn: history.turnNumber, name: name) }
                publishedAsyncValues.removeAll(keepingCapacity: true)
            }
        #endif
        lastTurnChanged = !changedNodes.isEmpty
        if lastTurnChanged { changingTurns &+= 1 }
        if let durableStore { commitDurably(to: durableStore) }
        for node in changedNodes { markObserversDirty(node) }
        changedNodes.removeAll(keepingCapacity: true)
        runPendingReactions()
        phase = .idle
    }

    /// Makes the settled writes durable before anyone sees them.
    private func commitDurably(to store: any CogDurableStore) {
        guard !changedNodes.isEmpty || !durableReleases.isEmpty else { return }
        var writes: [CogDurableWrite] = []
        writes.reserveCapacity(changedNodes.count + durableReleases.count)
        do {
            for node in changedNodes {
                if let write = try node.durableWrite(released: false, store: store) { writes.append(write) }
            }
        } catch let error as NotDurable {
            fatalError(error.description)
        } catch {
            fatalError("a settled write could not be encoded for the durable store: \(error)")
        }
        writes += durableReleases
        durableReleases.removeAll()
        guard !writes.isEmpty else { return }
        let turn = CogDurableTurn(name: history.currentTurnName, writes: writes)
        if collectedDurableTurns != nil {
            collectedDurableTurns!.append(turn)
            return
        }
        do {
            try store.commit(turn)
        } catch {
            fatalError("turn `\(history.currentTurnName)` could not be made durable, so it must not be seen: \(error)")
        }
    }

    /// Runs queued turns one at a time, dropping those whose owner retired,
    /// then goes idle (which ends the turn chain).
    private func drain() {
        guard !draining else { return }
        draining = true
        while let entry = queue.popFirst() {
            if entry.hasOwner {
                guard let owner = entry.owner, owner.admitsTurns else { continue }
            }
            runTurn(named: entry.name, entry.body)
        }
        draining = false
        turnChain.wentIdle()
    }

    /// Runs what reads deferred (async publications) once nothing is running.
    @usableFromInline
    func runDeferredWorkIfIdle() {
        guard !queue.isEmpty, phase == .idle, computingStack.isEmpty, settleStack.isEmpty else { return }
        drain()
    }

    // MARK: Reactions

    /// Registers a consumer. Idle (assembly, an op's caller): it runs now to
    /// learn its dependencies, with anything it registers in turn. During a
    /// flush it waits behind the consumers already scheduled.
    func register(_ node: ReactionNode) {
        reactionSequence += 1
        node.sequence = reactionSequence
        guard phase == .idle, computingStack.isEmpty, settleStack.isEmpty, !runningReactions else {
            enqueueReaction(node)
            return
        }
        phase = .flush
        let mark = pendingReactions.count
        enqueueReaction(node)
        runReactions(from: mark)
        phase = .idle
        drain()
    }

    @inline(__always)
    private func enqueueReaction(_ node: Node) {
        let reaction = unsafeDowncast(node, to: ReactionNode.self)
        guard !reaction.queued, !reaction.retired else { return }
        reaction.queued = true
        pendingReactions.append(reaction)
    }

    /// Runs every scheduled consumer in (exports first, then) registration
    /// order; consumers registered meanwhile join the end.
    private func runPendingReactions() {
        guard !pendingReactions.isEmpty else { return }
        if pendingReactions.count > 1 {
            pendingReactions.sort { ($0.order, $0.sequence) < ($1.order, $1.sequence) }
        }
        runReactions(from: 0)
    }

    private func runReactions(from start: Int) {
        let wasRunning = runningReactions
        runningReactions = true
        var index = start
        while index < pendingReactions.count {
            let reaction = pendingReactions[index]
            index += 1
            reaction.queued = false
            guard !reaction.retired else { continue }
            settle(reaction)
        }
        pendingReactions.removeLast(pendingReactions.count - start)
        runningReactions = wasRunning
    }

    /// Reaction bodies run so far (`Cogs.reactionsRun`; a worker's `/metrics`).
    @usableFromInline var reactionsRun: UInt64 = 0

    /// Called by a consumer just before its body runs.
    func reactionWillRun(_ node: ReactionNode) {
        if node.countsRun { reactionsRun &+= 1 }
        if node.recordsEffect {
            history.record(.effect, turn: history.turnNumber, name: node.label)
            turnChain.reactionRan(named: node.label)
        }
    }

    /// Stops a consumer: it never runs again and holds no edges.
    func unregister(_ node: ReactionNode) {
        guard !node.retired else { return }
        node.retired = true
        if node.busy {
            node.unlinkAfterRun = true
        } else {
            trimSources(of: node, to: 0)
            node.release()
        }
    }

    // MARK: Writer support

    /// Traps unless the writer of turn `serial` is used inside its own
    /// turn's body (TURN-07): the message names the cog and
    /// whether it was read or written.
    @usableFromInline
    func checkWriter(_ serial: UInt64, _ ref: StateRef, writing: Bool) {
        guard phase == .body, serial == turnSerial else {
            fatalError(TrapMessage.escapedWriter(ref.label, writing: writing))
        }
    }

    /// The value `ref` has in the running turn: staged if written, else committed.
    @inlinable
    func staged<Value>(_ ref: StateRef, as: Value.Type, serial: UInt64) -> Value {
        checkWriter(serial, ref, writing: false)
        let node = unsafeDowncast(node(for: ref), to: ManualNode<Value>.self)
        if let staged = node.staged { return staged }
        return node.value
    }

    @inlinable
    func stage<Value>(_ value: Value, into ref: StateRef, serial: UInt64) {
        checkWriter(serial, ref, writing: true)
        stage(value, into: unsafeDowncast(node(for: ref), to: ManualNode<Value>.self))
    }

    /// Stages a write into a source or a cell the graph owns (async value and status).
    @inlinable
    func stage<Value>(_ value: Value, into node: ManualNode<Value>) {
        if node.staged == nil { noteStaged(node) }
        node.staged = value
    }

    @usableFromInline
    func noteStaged(_ node: Node) {
        stagedNodes.append(node)
    }

    // MARK: Seeding

    /// Places a value with no turn, history or reaction; dependents are
    /// flagged so they re-check on the next real turn.
    func seed<Value>(_ ref: StateRef, to value: Value) {
        guard phase == .idle, computingStack.isEmpty, settleStack.isEmpty else {
            fatalError(TrapMessage.seedOutsideSetup(ref.label, place: seedPlace()))
        }
        let node = unsafeDowncast(node(for: ref), to: ManualNode<Value>.self)
        guard node.isChange(from: node.value, to: value) else { return }
        node.storage = value
        markObserversDirty(node)
    }

    /// Where a misplaced `seed` was called, for its trap (SEED-08).
    private func seedPlace() -> String {
        if let node = computingNode {
            return node.kind == .consumer
                ? "while the reaction \(TrapMessage.cog(node.label)) was running"
                : "while the \(TrapMessage.computing(node)) was computing"
        }
        if phase == .body { return "in the body of turn \(TerminalText.quoted(history.currentTurnName))" }
        return "while turn \(TerminalText.quoted(history.currentTurnName)) was settling"
    }

    // MARK: Discard

    /// Releases one state as its own system turn, unless something still
    /// observes it. A state never created needs nothing.
    func discard(_ ref: StateRef) {
        if let node = computingComputation {
            fatalError(
                TrapMessage.turnDuringComputation("discard(\(ref.label))", computing: node, instead: "discard"))
        }
        guard let node = existingNode(for: ref) else { return }
        if let manual = ref.descriptor as? ManualDescriptorLifetime, !manual.lifetime.allowsRelease {
            fatalError(
                "discard(\(node.label)) releases state declared with the default .app lifetime; declare it with "
                    + "lifetime: .whileObserved(resetToInitial: true) to allow release")
        }
        systemTurn(named: "discard(\(node.label))") { [unowned self] _ in
            self.release(node)
        }
    }

    /// Releases a replicated state (a release the leader logged).
    func releaseReplicated(_ ref: StateRef) {
        lifetimes.forgetParked(ref)
        guard let node = existingNode(for: ref) else { return }
        release(node)
    }

    private func release(_ node: Node) {
        detachBoundaryIfLastConsumer(of: node)
        guard !node.released, node.observers.isEmpty else { return }
        if let durableStore, node.kind == .manual {
            do {
                if let write = try node.durableWrite(released: true, store: durableStore) { durableReleases.append(write) }
            } catch {
                fatalError("\(error)")
            }
        }
        trimSources(of: node, to: 0)
        cancelClosureBridges(of: node)
        removeFromTable(node)
        node.pinned = false
        node.released = true
        node.resetValue()
    }
}

/// Lets `discard` see a manual declaration's lifetime without its value type.
protocol ManualDescriptorLifetime: AnyObject {
    var lifetime: ManualCogLifetime { get }
}

extension ManualDescriptor: ManualDescriptorLifetime {}

/// Who asked for a turn; the FIFO drops an entry whose owner has retired.
/// Scopes (mechanisms) conform; runtime and system turns carry none.
@MainActor
protocol TurnOwner: AnyObject {
    var admitsTurns: Bool { get }
}

struct QueuedTurn {
    let name: String
    /// Held weakly in spirit: an owner that is gone can no longer admit.
    weak var owner: (any TurnOwner)?
    let hasOwner: Bool
    let body: (Writer) -> Void

    init(name: String, owner: (any TurnOwner)?, body: @escaping (Writer) -> Void) {
        self.name = name
        self.owner = owner
        self.hasOwner = owner != nil
        self.body = body
    }
}

/// A FIFO of queued turns that reuses its storage.
struct TurnQueue {
    private var entries = ContiguousArray<QueuedTurn>()
    private var head = 0

    var isEmpty: Bool { head == entries.count }

    mutating func append(_ entry: QueuedTurn) { entries.append(entry) }

    mutating func popFirst() -> QueuedTurn? {
        guard head < entries.count else { return nil }
        let entry = entries[head]
        head += 1
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        }
        return entry
    }
}
