import Cog

extension TodoApp {
    /// The todo rig (`todo worker`, the default): every durable source its
    /// ops write, its ops, the automatic cog its scope selects, and the
    /// mechanisms a worker runs — the estimator (one second an estimate, or
    /// the worker's `--set estimate-delay=DURATION`, on the host's clock)
    /// and the report.
    public static let rig = CogRig(
        name: "todo",
        summary: "a todo list: open todos estimated with receipts, a report of what is left",
        schemaVersion: 1,  // bump it when a stored type changes in a way older code cannot read
        durableSources: [_todoIDsCog, _todoTitleCogs, _todoIsCompletedCogs, _todoEstimateCogs],
        ops: [addTodoOp, completeTodoOp, removeTodoOp, acceptEstimateOp],
        selectors: [activeTodoIDsCog],
        mechanisms: { host in
            // A setting of the app's own (`todo worker --set estimate-delay=250ms`); a bad value stops the worker, naming it.
            let delay = try host.settings.duration("estimate-delay") ?? .seconds(1)
            return [TodoEstimatorMechanism(estimator: .live(delay: delay, clock: host.clock)), TodoReportMechanism(log: host.log)]
        })
}
