import Cog

/// Traps on demand: its body stops the process that runs it (`fatalError`).
/// Recovery drills and tests send it to prove that a request whose body
/// kills the leader kills it once — the restarted leader answers its retries
/// `rejected("crashed-leader: …")` and never runs it again. Served only by
/// a leader given `LedgerRig.trapOp` (`cogd leader --trap-op`): an unknown
/// op everywhere else.
let _trapOp = RemoteOp<String>(
    name: "ledger.trap", summary: "stops the leader that runs it, once (drills and tests; the argument: a reason)",
    example: "drill"
) { _, reason in
    fatalError("ledger.trap: trapping on demand (\(String(reflecting: reason)))")
}

extension LedgerRig {
    /// `ledger.trap`, an op whose body traps on demand, for drills and
    /// tests: in no rig, so a leader serves it only when given it too
    /// (`cogd leader --trap-op`).
    public static var trapOp: any RemoteOpDeclaration { _trapOp }
}
