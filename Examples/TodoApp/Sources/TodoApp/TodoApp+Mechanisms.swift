import Cog

/// Estimates each open todo in a scope of its own and accepts the estimate
/// with the todo as its receipt. Completing or removing the todo retires
/// the scope: its task is cancelled, and an estimate already on its way is
/// refused — locally by retirement, at the leader by the retired instance,
/// and in the op by the receipt.
struct TodoEstimatorMechanism: Mechanism {
    let estimator: TodoEstimator

    func operate(_ m: MechanismController) {
        m.scope(each: activeTodoIDsCog, name: "estimator") { id, s in
            guard s.peek(todoEstimateCogs[id]) == nil else { return }
            let todoTitle = s.peek(todoTitleCogs[id])
            s.task(name: "estimate") { [weak s, estimator] in
                let minutes = try await estimator.estimate(todoTitle)
                await s?.acceptEstimate(minutes, receipt: id)
            }
        }
    }
}

/// Reports what is left whenever it changes: one line on the worker's output.
struct TodoReportMechanism: Mechanism {
    let log: @Sendable (String) -> Void

    func operate(_ m: MechanismController) {
        m.watch(activeTodoIDsCog, initial: .run, name: "active") { _, activeTodoIDs in
            log("todos open: \(activeTodoIDs.isEmpty ? "none" : activeTodoIDs.map(\.rawValue).joined(separator: ", "))")
        }
        m.watch(remainingMinutesCog, initial: .run, name: "remaining") { _, remainingMinutes in
            log("todos left: \(remainingMinutes) minutes")
        }
    }
}
