/// Observing what became of a `perform`ed op (`OpOutcome`).
///
/// Why two extra spellings and not a result on `perform`: `perform(op,
/// arg)` is how verbs send ops, called from reactions and turns that must
/// not wait, and most callers never look at the answer, so it stays
/// exactly as it was (fire-and-forget, nothing kept per request). A
/// caller that wants the answer says so: `perform(_:_:then:)` takes a
/// callback (the shape of `watch` and `run`: synchronous mechanism code on
/// the main actor reacts to the answer when it comes), and
/// `performAndWait(_:_:)` awaits it from a task (`m.task { … }`). An async
/// overload of `perform` itself would be ambiguous with the synchronous
/// one in every `async` context.
///
/// When the answer comes:
/// - In an embedded runtime (and on the leader) the op runs as a turn here
///   and the outcome is known when that turn ends: called from idle code,
///   before `perform` returns; called from a reaction or a turn's body,
///   when the queued (or enclosing) turn ends. An op joined into a running
///   turn shares that turn's outcome.
/// - On a worker's replica, when the leader's reply arrives (the replica
///   may not yet show an `applied` revision), or at once for a request the
///   worker answers itself (`rejected` `unavailable`, `bad-argument`).
///
/// - Important: the callback runs on the main actor, at most once. It is
///   not called once the controller that performed is retired (inert, like
///   every call through a retired controller), and a request
///   whose turn is dropped because its scope ended is not answered. An
///   awaiter is never left hanging by its scope: when the controller
///   retires, or the waiting task is cancelled, `performAndWait` throws
///   `CancellationError` (the request may still have been applied: the
///   caller stopped listening, the leader did not stop running it). A
///   worker waits for at most `Worker`'s `pendingOutcomesLimit` answers;
///   past that, the oldest waiters are answered `rejected` `unavailable`
///   at once (their requests may still be applied), so memory stays bounded.
extension MechanismController {
    /// Performs `op` like `perform(_:_:)` and calls `observe` with its
    /// outcome (see the extension's notes for when). Inert once retired.
    ///
    /// ```swift
    /// m.perform(holdOp, Hold(seat: seat, show: show)) { outcome in
    ///   if case .refused("sold-out", _) = outcome { notifier.soldOut(show) }
    /// }
    /// ```
    public func perform<A>(_ op: RemoteOp<A>, _ argument: A, then observe: @escaping @MainActor (OpOutcome) -> Void) {
        guard !isRetired else { return }
        performObserved(op, argument) { [weak self] outcome in
            guard let self, !self.isRetired else { return }
            observe(outcome)
        }
    }

    /// Performs `op` like `perform(_:_:)` and waits for its outcome.
    ///
    /// ```swift
    /// m.task {
    ///   let outcome = try await m.performAndWait(transferOp, transfer)
    ///   if case .applied(let revision) = outcome { log.info("moved at revision \(revision)") }
    /// }
    /// ```
    ///
    /// - Throws: `CancellationError` when this controller is retired (or
    ///   already was) or the waiting task is cancelled before the answer.
    public func performAndWait<A>(_ op: RemoteOp<A>, _ argument: A) async throws(CancellationError) -> OpOutcome {
        guard !isRetired else { throw CancellationError() }
        let waiter = OutcomeWaiter()
        outcomeWaiters.append(waiter)
        performObserved(op, argument) { [weak self] outcome in
            waiter.deliver(.success(outcome))
            self?.outcomeWaiters.removeAll { $0 === waiter }
        }
        defer { outcomeWaiters.removeAll { $0 === waiter } }
        return try await waiter.wait()
    }

    /// Runs or sends `op`, telling `deliver` its outcome.
    private func performObserved<A>(_ op: RemoteOp<A>, _ argument: A, deliver: @escaping @MainActor (OpOutcome) -> Void) {
        if let link = graph.remoteLink {
            link.submit(op: op.name, argument: argument, owner: self, outcome: deliver)
        } else {
            graph.runObserved(op, argument, named: "\(path).\(op.name)", owner: self, deliver: deliver)
        }
    }

    /// Ends the waits of `performAndWait` calls made through this
    /// controller: it is retiring.
    func cancelOutcomeWaiters() {
        let waiters = outcomeWaiters
        outcomeWaiters = []
        for waiter in waiters { waiter.deliver(.failure(CancellationError())) }
    }
}

extension Cogs {
    /// Performs `op` like `perform(_:_:)` and calls `observe` with its
    /// outcome (see `MechanismController`'s outcome notes for when).
    ///
    /// ```swift
    /// cogs.perform(depositOp, Deposit(account: "alice", amount: 0)) { print($0) }  // refused bad-amount: …
    /// ```
    public func perform<A>(_ op: RemoteOp<A>, _ argument: A, then observe: @escaping @MainActor (OpOutcome) -> Void) {
        if let link = remoteLink {
            link.submit(op: op.name, argument: argument, owner: nil, outcome: observe)
        } else {
            graph.runObserved(op, argument, named: op.name, owner: nil, deliver: observe)
        }
    }

    /// Performs `op` like `perform(_:_:)` and waits for its outcome.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled
    ///   before the answer (the request may still be applied).
    public func performAndWait<A>(_ op: RemoteOp<A>, _ argument: A) async throws(CancellationError) -> OpOutcome {
        let waiter = OutcomeWaiter()
        perform(op, argument) { outcome in waiter.deliver(.success(outcome)) }
        return try await waiter.wait()
    }
}
