/// The capability to ask the graph for things: turns, one-shot reads,
/// refreshes and releases. `Cogs` and (later) mechanism controllers conform.
///
/// App code never calls the primitives inline: every mutation is a named verb
/// in an `extension CogOps`, so one definition works on the runtime and on a
/// controller.
///
/// ```swift
/// extension CogOps {
///   func selectTodoFilter(_ filter: TodoFilter) {
///     turn(_todoFilterCog, to: filter)
///   }
/// }
/// ```
@MainActor
public protocol CogOps {
    /// Runs `body` as one atomic turn named `name`. Inside another turn's body
    /// it joins that turn; while a turn flushes it waits in the FIFO and runs
    /// after, to completion, in arrival order.
    func turn(named name: String, _ body: @escaping (Writer) -> Void)

    /// The settled value, with no dependency recorded.
    func peek<V>(_ cog: Cog<V>) -> V
    /// The current value of a manual source.
    func peek<V>(_ cog: Cog<V>.Manual) -> V
    /// The current value through a projection.
    func peek<V>(_ cog: Cog<V>.Projection) -> V
    /// The last accepted value of an async cog, or its default.
    func peek<V: Sendable>(_ cog: Cog<V>.Async) -> V

    /// Starts a new generation of an async cog's work.
    @discardableResult func refresh<V: Sendable>(_ cog: Cog<V>.Async) -> CogRefresh<V>

    /// Releases a `.whileObserved(resetToInitial: true)` manual state.
    func discard<V>(_ cog: Cog<V>.Manual)
    /// Releases an automatic state; it recomputes on its next read.
    func discard<V>(_ cog: Cog<V>)

    /// Runs a remote op as a turn here, or (on a worker's replica) sends it
    /// to the leader. Verbs call it like `turn`.
    func perform<A>(_ op: RemoteOp<A>, _ argument: A)

    /// `perform(_:_:)`, then `observe` is told what became of the op
    /// (`OpOutcome`): a verb that lets its caller react to the answer.
    ///
    /// ```swift
    /// extension CogOps {
    ///   func hold(_ seat: Seat, then observe: @escaping @MainActor (OpOutcome) -> Void) { perform(holdOp, seat, then: observe) }
    /// }
    /// ```
    func perform<A>(_ op: RemoteOp<A>, _ argument: A, then observe: @escaping @MainActor (OpOutcome) -> Void)

    /// `perform(_:_:)`, waiting for what became of the op (`OpOutcome`);
    /// throws `CancellationError` when the waiting task is cancelled or the
    /// controller retires first.
    func performAndWait<A>(_ op: RemoteOp<A>, _ argument: A) async throws(CancellationError) -> OpOutcome
}

extension CogOps {
    /// Runs `body` as one turn named after the calling op.
    public func turn(_ name: String = #function, _ body: @escaping (Writer) -> Void) {
        turn(named: name, body)
    }

    /// Writes one source in one turn named after the calling op.
    public func turn<V>(_ cog: Cog<V>.Manual, to value: V, name: String = #function) {
        turn(named: name) { c in c[cog] = value }
    }
}
