/// One runtime: the graph of declared state, its turns and its history.
///
/// An app assembles exactly one (`Cogs.assemble(mechanisms:)`); each test
/// makes its own isolated one with `Cogs.forTesting()` (module `CogTesting`).
/// Reads are subscripts, writes are named ops on `CogOps`.
///
/// ```swift
/// let cogs = Cogs.assemble(mechanisms: [TodoMechanism(store: .live)])
/// cogs.addTodo()
/// let count = cogs[activeTodoCountCog]
/// ```
///
/// - Important: confined to the main actor. A read `cogs[x]` pins the state
///   for the runtime's lifetime (the Linux stand-in for a UI read); only
///   `discard` undoes the pin. Use `peek` for one-time reads.
@MainActor
public final class Cogs: CogOps {
    @usableFromInline let graph: Graph
    var mechanisms: [any Mechanism] = []
    var controllers: [MechanismController] = []
    var exports: [Export] = []
    /// Acknowledged at the end of this runtime's teardown (`CogTesting`'s
    /// `acknowledgeDeinitCleanup(with:)`).
    var deinitCleanupAcknowledgements: [MainActorCleanupAcknowledgement] = []

    package init(durableStore: (any CogDurableStore)? = nil) {
        graph = Graph(durableStore: durableStore)
    }

    /// A runtime whose unobserved states expire after `whileObservedGrace`
    /// on `clock` (tests inject a `TestClock`; the default is 30 s).
    package init(
        durableStore: (any CogDurableStore)? = nil, clock: any Clock<Duration>, whileObservedGrace: Duration,
        parksDurableSources: Bool = false, externalObservationTracking: ExternalObservationTrackingMode = .automatic
    ) {
        graph = Graph(
            durableStore: durableStore,
            lifetimes: Lifetimes(
                clock: clock, whileObservedGrace: whileObservedGrace, parksDurableSources: parksDurableSources))
        graph.externalObservationTracking = externalObservationTracking
    }

    /// Teardown, on the main actor wherever the last reference went: every
    /// scope of every mechanism is retired first, in two passes over all of
    /// them (every controller marked, then each torn down: reactions
    /// unregistered, tasks cancelled), exports finish, and only then are the
    /// retained mechanism values released, and what they own after them. A
    /// cancellation handler or `deinit` that runs during the teardown finds
    /// every controller already inert.
    isolated deinit {
        graph.lifetimes.stop()
        graph.cancelExternalBridges()
        let roots = controllers.reversed()
        for controller in roots { controller.markRetired(.runtimeEnded) }
        for controller in roots { controller.tearDown() }
        controllers = []
        for export in exports {
            graph.unregister(export.node)
            export.finish()
        }
        exports = []
        mechanisms = []
        for acknowledgement in deinitCleanupAcknowledgements { acknowledgement.acknowledge() }
    }

    // MARK: Pinning reads

    /// How many times a reaction's body (`run`, `watch`) has run in this graph.
    public var reactionsRun: UInt64 { graph.reactionsRun }

    /// Reads an automatic cog and keeps it alive (a pinning read).
    @inlinable
    public subscript<V>(_ cog: Cog<V>) -> V { graph.pinningRead(cog.ref, as: V.self) }
    /// Reads a manual source and keeps it alive (a pinning read).
    @inlinable
    public subscript<V>(_ cog: Cog<V>.Manual) -> V { graph.pinningRead(cog.ref, as: V.self) }
    /// Reads through a projection and keeps the source alive (a pinning read).
    @inlinable
    public subscript<V>(_ cog: Cog<V>.Projection) -> V { graph.pinningRead(cog.ref, as: V.self) }
    /// Reads an async cog's last accepted value (or its default), starting its work on first demand.
    public subscript<V: Sendable>(_ cog: Cog<V>.Async) -> V {
        graph.pin(cog.ref)
        let value = graph.readAsyncValue(cog.ref, as: V.self, trackedBy: nil)
        graph.asyncBoundary(cog.ref, as: V.self).access(.value)
        graph.runDeferredWorkIfIdle()
        return value
    }

    // MARK: CogOps

    public func turn(named name: String, _ body: @escaping (Writer) -> Void) {
        graph.turn(named: name, owner: nil, body)
    }

    /// Runs `body` as a turn (and any turn it queues) and returns the
    /// durable turns they settled, in order, instead of committing them to
    /// the durable store: the caller (the leader) decides where they go.
    /// None: the turn changed nothing durable.
    package func settle(named name: String, _ body: @escaping (Writer) -> Void) -> [CogDurableTurn] {
        settleOp(named: name, body).turns
    }

    /// `settle`, and the refusal of the turn it ran (an op body that
    /// refused: it settled nothing of its own).
    package func settleOp(named name: String, _ body: @escaping (Writer) -> Void) -> (turns: [CogDurableTurn], refusal: Refusal?) {
        collectingDurableTurns { graph.turn(named: name, owner: nil, body) }
    }

    /// `settleOp` for a body that need not escape, when the graph runs it
    /// at once (it is idle, as it is between a leader's ops); nil when it
    /// would queue it, and the caller then gives `settleOp` an escaping body.
    package func settleOpAtOnce(named name: String, _ body: (Writer) -> Void) -> (turns: [CogDurableTurn], refusal: Refusal?)? {
        guard graph.runsTurnsAtOnce else { return nil }
        return collectingDurableTurns { graph.turnAtOnce(named: name, body) }
    }

    private func collectingDurableTurns(_ run: () -> Refusal?) -> (turns: [CogDurableTurn], refusal: Refusal?) {
        let outer = graph.collectedDurableTurns
        graph.collectedDurableTurns = []
        defer { graph.collectedDurableTurns = outer }
        let refusal = run()
        return (graph.collectedDurableTurns ?? [], refusal)
    }

    /// The refusal that ended the last turn this runtime ran, or nil when
    /// that turn did not refuse (or none ran yet). A test sees an op refuse
    /// here: the op's turn is the last one unless it caused others, and a
    /// refused turn changes nothing, so causes none.
    ///
    /// ```swift
    /// cogs.transfer(from: "alice", to: "bob", amount: 50)
    /// #expect(cogs.lastRefusal?.code == "insufficient-funds")
    /// ```
    ///
    /// - Important: on a worker's replica an op runs on the leader, not
    ///   here: its refusal is the leader's answer, never seen here.
    public var lastRefusal: Refusal? { graph.lastRefusal }

    @inlinable
    public func peek<V>(_ cog: Cog<V>) -> V { graph.peek(cog.ref, as: V.self) }
    @inlinable
    public func peek<V>(_ cog: Cog<V>.Manual) -> V { graph.peek(cog.ref, as: V.self) }
    @inlinable
    public func peek<V>(_ cog: Cog<V>.Projection) -> V { graph.peek(cog.ref, as: V.self) }
    public func peek<V: Sendable>(_ cog: Cog<V>.Async) -> V {
        let value = graph.readAsyncValue(cog.ref, as: V.self, trackedBy: nil)
        graph.runDeferredWorkIfIdle()
        return value
    }

    @discardableResult
    public func refresh<V: Sendable>(_ cog: Cog<V>.Async) -> CogRefresh<V> { graph.refresh(cog.ref, as: V.self) }

    public func discard<V>(_ cog: Cog<V>.Manual) { graph.discard(cog.ref) }
    public func discard<V>(_ cog: Cog<V>) { graph.discard(cog.ref) }

    // MARK: Status

    /// The async status lens: `cogs.status[weatherCogs[zip]].isLoading`.
    public var status: Status { Status(graph: graph) }

    /// Reads of an async cog's full status (`kind`, `value`, `hasSucceeded`, `error`, `isLoading`).
    @MainActor
    public struct Status {
        let graph: Graph

        /// The async cog's status; starts its work on first demand and, like
        /// any `cogs[x]` read, keeps the state alive until the runtime ends.
        public subscript<V: Sendable>(_ cog: Cog<V>.Async) -> CogStatus<V> {
            graph.pin(cog.ref)
            let status = graph.readAsyncStatus(cog.ref, as: V.self, trackedBy: nil)
            let boundary = graph.asyncBoundary(cog.ref, as: V.self)
            graph.runDeferredWorkIfIdle()
            return status.observed(by: boundary)
        }

        /// The async cog's status, without pinning.
        public func peek<V: Sendable>(_ cog: Cog<V>.Async) -> CogStatus<V> {
            let status = graph.readAsyncStatus(cog.ref, as: V.self, trackedBy: nil)
            graph.runDeferredWorkIfIdle()
            return status
        }
    }

    // MARK: Replication

    /// The worker link of a replica (remote ops are sent through it), or nil.
    public var remoteLink: (any CogRemoteLink)? {
        get { graph.remoteLink }
        set { graph.remoteLink = newValue }
    }

    // MARK: Diagnostics

    /// The last 256 history events of this runtime: turns, writes, recomputes.
    public var debugHistory: CogHistory { graph.history.snapshot }

    /// How many registrations are live: reactions, watches and scope
    /// selectors of every live controller, plus exports. A scope family is one
    /// registration however many children come and go.
    public var liveRegistrationCount: Int {
        func count(_ controller: MechanismController) -> Int {
            controller.reactions.count + controller.children.reduce(0) { $0 + count($1) }
        }
        return controllers.reduce(exports.count) { $0 + count($1) }
    }

    /// What the runaway turn-chain guard has seen (a chain of more than 64
    /// turns without going idle raises one warning).
    public var turnChainDiagnostic: CogTurnChainDiagnostic {
        CogTurnChainDiagnostic(
            warningCount: graph.turnChain.warningCount, lastWarning: graph.turnChain.lastWarning,
            isIdle: graph.turnChain.isIdle)
    }
}
