final class AsyncDescriptor<Value: Sendable>: Descriptor, @unchecked Sendable {
    let selector: @MainActor (Reader<CogStatus<Value>>, StateKey) -> Work<Value>
    /// Makes the value a state shows before its first success; it runs once
    /// per state, when the state's node is made (again after a release).
    let makeDefault: @MainActor () -> Value
    let equals: (@MainActor (Value, Value) -> Bool)?
    let policy: AsyncRunPolicy

    init(
        selector: @escaping @MainActor (Reader<CogStatus<Value>>, StateKey) -> Work<Value>,
        makeDefault: @escaping @MainActor () -> Value, equals: (@MainActor (Value, Value) -> Bool)?,
        policy: AsyncRunPolicy,
        name: String?, fileID: StaticString, line: UInt, isKeyed: Bool
    ) {
        self.selector = selector
        self.makeDefault = makeDefault
        self.equals = equals
        self.policy = policy
        super.init(name: name, fileID: fileID, line: line, isKeyed: isKeyed)
    }

    @MainActor override func makeNode(key: StateKey, graph: Graph) -> Node {
        AsyncNode<Value>(descriptor: self, key: key)
    }
}

/// Lets `Reader.curr` see an async node's status without its value type.
@MainActor
protocol AsyncStatusProviding: AnyObject {
    var currentStatusAny: Any { get }
}

/// An async state. The node itself is the *driver*: a computation that runs
/// the selector, starts a generation of work, and never reports a change. Its
/// value and status live in two cells that only system turns write, so value
/// readers stay quiet across reloads while status readers see every step.
///
/// Consumers track the driver as well as a cell: a dependency change flags
/// them, and settling them settles the driver, which restarts the work.
@MainActor
final class AsyncNode<Value: Sendable>: Node, AsyncStatusProviding {
    let selector: @MainActor (Reader<CogStatus<Value>>, StateKey) -> Work<Value>
    let valueCell: ManualNode<Value>
    let statusCell: ManualNode<CogStatus<Value>>

    let policy: AsyncRunPolicy
    /// `==` for an `Equatable` value: a stream drops an element equal to the one before it.
    let elementEquals: (@MainActor (Value, Value) -> Bool)?

    /// The generation in flight or last finished (`.latest`), or the newest
    /// input (ordered policies); -1 before the first.
    var generation = -1
    /// The `.latest` generation's task.
    var task: Task<Void, Never>?
    /// Ordered policies: the runs in flight, by generation.
    var runs: [Int: Task<Void, Never>] = [:]
    /// Ordered policies: inputs waiting for a run (`.queue`: in input order;
    /// `.exhaustLatest`: at most the newest one).
    var waiting: [(generation: Int, work: Work<Value>)] = []
    var refreshes: [(generation: Int, handle: CogRefresh<Value>)] = []
    /// Whether a system turn has published this state's status yet. The
    /// first `pending` restates the resting status; every later one is a
    /// new turn status consumers see (ASYNC-32, STREAM-03).
    var publishedStatus = false
    #if DEBUG
        /// The name debug history gives this state's value: `label.value`,
        /// or `label.value[key]` for a box's state (`forecast.value[home]`).
        let valueHistoryLabel: String
        /// Whether the value has been read, so history shows it: its first
        /// read records the value it finds, each later success one more.
        var valueReadRecorded = false
    #endif

    init(descriptor: AsyncDescriptor<Value>, key: StateKey) {
        self.selector = descriptor.selector
        self.policy = descriptor.policy
        self.elementEquals = descriptor.equals
        let label = descriptor.label(for: key)
        #if DEBUG
            self.valueHistoryLabel = descriptor.valueLabel(for: key)
        #endif
        let equals = descriptor.equals
        let defaultValue = descriptor.makeDefault()
        self.valueCell = ManualNode(cellLabel: label, value: defaultValue, equals: equals)
        self.statusCell = ManualNode(
            cellLabel: "\(label).status",
            value: CogStatus(kind: .pending, value: defaultValue, hasSucceeded: false, error: nil),
            equals: { old, new in
                guard old.kind == new.kind, old.hasSucceeded == new.hasSucceeded,
                    old.error == nil, new.error == nil
                else { return false }
                // A pending status carries the value it replaced, so pending
                // over pending restates it, even with no equality rule; a
                // replacement pending is published as a change regardless.
                if new.kind == .pending { return true }
                guard let equals else { return false }
                return equals(old.value, new.value)
            })
        super.init(kind: .computed, descriptor: descriptor, key: key, label: label, state: .dirty)
    }

    var currentStatusAny: Any { statusCell.value }

    override func recompute(graph: Graph) -> Bool {
        let work = graph.tracking(self) { selector(Reader(graph: graph, node: self), key) }
        graph.accept(work, into: self)
        return false
    }

    /// Cancels every run and stream this state has in flight and forgets
    /// the inputs waiting for one; their late results are dropped because
    /// the caller marks the node released (or starts a newer generation).
    func cancelAllWork() {
        task?.cancel()
        task = nil
        for run in runs.values { run.cancel() }
        runs = [:]
        waiting = []
    }
}

extension Graph {
    func asyncNode<Value: Sendable>(_ ref: StateRef, as: Value.Type) -> AsyncNode<Value> {
        unsafeDowncast(node(for: ref), to: AsyncNode<Value>.self)
    }

    /// The async value: settles the driver (starting work on first demand or
    /// after a dependency change) and reads the value cell.
    func readAsyncValue<Value: Sendable>(_ ref: StateRef, as: Value.Type, trackedBy observer: Node?) -> Value {
        let node = asyncNode(ref, as: Value.self)
        if node.state != .clean || node.busy { settle(node) }
        #if DEBUG
            if !node.valueReadRecorded {
                node.valueReadRecorded = true
                history.record(.recompute, turn: history.turnNumber, name: node.valueHistoryLabel)
            }
        #endif
        if let observer {
            track(node, into: observer)
            track(node.valueCell, into: observer)
        } else if node.observers.isEmpty && !node.pinned {
            demandedOnce(node)
        }
        return node.valueCell.value
    }

    /// The async status: as `readAsyncValue`, through the status cell.
    func readAsyncStatus<Value: Sendable>(_ ref: StateRef, as: Value.Type, trackedBy observer: Node?) -> CogStatus<Value> {
        let node = asyncNode(ref, as: Value.self)
        if node.state != .clean || node.busy { settle(node) }
        if let observer {
            track(node, into: observer)
            track(node.statusCell, into: observer)
        } else if node.observers.isEmpty && !node.pinned {
            demandedOnce(node)
        }
        return node.statusCell.value
    }

    func currentStatus(of node: Node) -> Any? {
        (node as? any AsyncStatusProviding)?.currentStatusAny
    }

    /// Starts a new generation of `node`'s work: cancels the one in flight
    /// (its late result will be dropped, and it publishes no failure),
    /// resolves older refresh handles as superseded, and publishes `pending`.
    func startGeneration<Value: Sendable>(of node: AsyncNode<Value>, running work: Work<Value>) {
        node.task?.cancel()
        node.generation += 1
        let generation = node.generation
        resolveRefreshes(of: node, through: generation - 1, with: .superseded)
        switch work.body {
        case .run(let operation):
            node.task = oneShotTask(operation, node: node) { graph, node, result in
                graph.deliver(result, generation: generation, to: node)
            }
        case .stream(let iterate):
            node.task = streamTask(iterate, generation: generation, node: node)
        }
        publishPending(of: node)
    }

    /// Whether `generation` is still `node`'s current `.latest` run: not
    /// released, not replaced, and not made stale by a dependency change
    /// that nothing has settled yet (a state with no consumer stays dirty
    /// until one returns, which then starts the newest work; ASYNC-24). A
    /// state flagged only `check` (a change further up) first settles what
    /// it reads, without running its selector, to learn which it is.
    func isCurrent<Value: Sendable>(_ generation: Int, of node: AsyncNode<Value>) -> Bool {
        guard !node.released, generation == node.generation else { return false }
        if node.state == .check { settleSources(of: node) }
        return node.state != .dirty
    }

    /// Publishes a finished generation's result, unless a newer generation
    /// replaced it, a dependency change made it stale, or the state was released.
    func deliver<Value: Sendable>(_ result: Result<Value, any Error>, generation: Int, to node: AsyncNode<Value>) {
        defer { acknowledgeAsyncCompletionCheck() }
        guard isCurrent(generation, of: node) else { return }
        node.task = nil
        publish(result, of: node)
        resolveRefreshes(of: node, through: generation, with: CogRefresh<Value>.Outcome(result))
    }

    /// One result as its own system turn, named `label success` or `label
    /// failure` as Cog names them (`forecast[94110] success`): a success sets
    /// the value and the status, a failure only the status (keeping the last
    /// good value). Status consumers see every result turn, even a success
    /// equal to the one before it (overlapping `.merged` runs; ASYNC-32);
    /// value consumers only a changed value.
    func publish<Value: Sendable>(_ result: Result<Value, any Error>, of node: AsyncNode<Value>) {
        node.publishedStatus = true
        switch result {
        case .success(let value):
            systemTurn(named: "\(node.label) success") { [unowned self] _ in
                self.stage(value, into: node.valueCell)
                #if DEBUG
                    if node.valueReadRecorded { self.publishedAsyncValues.append(node.valueHistoryLabel) }
                #endif
                self.stage(
                    CogStatus(kind: .success, value: value, hasSucceeded: true, error: nil), into: node.statusCell)
                node.statusCell.stagedIsChange = true
            }
        case .failure(let error):
            systemTurn(named: "\(node.label) failure") { [unowned self] _ in
                let current = node.statusCell.staged ?? node.statusCell.value
                self.stage(
                    CogStatus(kind: .failure, value: current.value, hasSucceeded: current.hasSucceeded, error: error),
                    into: node.statusCell)
            }
        }
    }

    func resolveRefreshes<Value: Sendable>(
        of node: AsyncNode<Value>, through generation: Int, with outcome: CogRefresh<Value>.Outcome
    ) {
        guard !node.refreshes.isEmpty else { return }
        node.refreshes.removeAll { entry in
            guard entry.generation <= generation else { return false }
            entry.handle.resolve(outcome)
            return true
        }
    }

    /// `refresh`: a new generation with no dependency change. The selector
    /// runs again, reading its synchronous dependencies anew, and its new
    /// work is the generation's (ASYNC-23; a stream's sequence may be
    /// single-pass, so stored work is never run twice). Refreshing a
    /// never-read (or out-of-date) cog is its one pending load, not a load
    /// followed by a replacement.
    func refresh<Value: Sendable>(_ ref: StateRef, as: Value.Type) -> CogRefresh<Value> {
        if let node = computingNode {
            fatalError(
                TrapMessage.turnDuringComputation("refresh(\(ref.label))", computing: node, instead: "refresh"))
        }
        let node = asyncNode(ref, as: Value.self)
        let generation = node.generation
        if node.state != .clean { settle(node) }
        if node.generation == generation {
            // Settling started nothing (the state was up to date, or only
            // flagged and its dependencies had not changed): run it again.
            node.state = .dirty
            settle(node)
        }
        let handle = CogRefresh<Value>()
        node.refreshes.append((node.generation, handle))
        if node.observers.isEmpty && !node.pinned { demandedOnce(node) }
        runDeferredWorkIfIdle()
        return handle
    }
}
