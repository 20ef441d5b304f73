/// One `performAndWait`: holds the answer or the suspended waiter, and
/// resumes it exactly once, whichever comes first of the outcome, the
/// owner's retirement and the waiting task's cancellation.
@MainActor
final class OutcomeWaiter {
    private var result: Result<OpOutcome, CancellationError>?
    private var continuation: CheckedContinuation<Result<OpOutcome, CancellationError>, Never>?

    /// Ends the wait with `result`; later deliveries are ignored.
    func deliver(_ result: Result<OpOutcome, CancellationError>) {
        guard self.result == nil else { return }
        self.result = result
        if let continuation {
            self.continuation = nil
            continuation.resume(returning: result)
        }
    }

    /// Whether the wait has ended.
    var isAnswered: Bool { result != nil }

    /// Waits for `deliver`; a cancelled task stops waiting with `CancellationError`.
    func wait() async throws(CancellationError) -> OpOutcome {
        let answer = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<OpOutcome, CancellationError>, Never>) in
                if let result = self.result {
                    continuation.resume(returning: result)
                } else {
                    self.continuation = continuation
                }
            }
        } onCancel: {
            Task { @MainActor in self.deliver(.failure(CancellationError())) }
        }
        return try answer.get()
    }
}

extension OpOutcome {
    /// How an embedded runtime's op turn ended.
    init(_ end: Graph.TurnEnd) {
        if let refusal = end.refusal {
            self = .refused(code: refusal.code, reason: refusal.reason)
        } else if end.changed {
            self = .applied(revision: end.changingTurns)
        } else {
            self = .unchanged
        }
    }
}

extension Graph {
    /// Runs `op` as a turn named `name` for `owner`, telling `deliver` how
    /// it ended (not at all when the turn is dropped: its owner retired
    /// before it ran).
    func runObserved<A>(
        _ op: RemoteOp<A>, _ argument: A, named name: String, owner: TurnOwner?, deliver: @escaping @MainActor (OpOutcome) -> Void
    ) {
        turn(named: name, owner: owner) { c in
            RemoteOpRegistry.run(op.body, c, argument)
            c.graph.whenTurnEnds { end in deliver(OpOutcome(end)) }
        }
    }
}
