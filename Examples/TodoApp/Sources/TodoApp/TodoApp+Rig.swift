import Cog

extension TodoApp {
    /// The todo rig (`todo worker`, the default): every durable source its
    /// ops write, its ops, the automatic cog its scope selects, and the
    /// mechanisms a worker runs — the estimator (one second an estimate)
    /// and the report.
    public static let rig = CogRig(
        name: "todo",
        summary: "a todo list: open todos estimated with receipts, a report of what is left",
        schemaVersion: 1,  // bump it when a stored type changes in a way older code cannot read
        durableSources: [_todoIDsCog, _todoTitleCogs, _todoIsCompletedCogs, _todoEstimateCogs],
        ops: [addTodoOp, completeTodoOp, removeTodoOp, acceptEstimateOp],
        selectors: [activeTodoIDsCog],
        mechanisms: { host in
            [TodoEstimatorMechanism(estimator: .live(delay: .seconds(1))), TodoReportMechanism(log: host.log)]
        })
}
