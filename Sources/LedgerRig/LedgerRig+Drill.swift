import Cog

/// Traps on demand: its body stops the process that runs it (`fatalError`).
/// Recovery drills and tests send it to prove that a request whose body
/// kills the leader kills it once — the restarted leader answers its retries
/// `rejected("crashed-leader: …")` and never runs it again. Registered only
/// by `LedgerRig.registerTrapOp()` (`cogd leader --trap-op`): an unknown op
/// everywhere else.
let trapOp = RemoteOp<String>(name: "ledger.trap") { _, reason in
    fatalError("ledger.trap: trapping on demand (\(String(reflecting: reason)))")
}

extension LedgerRig {
    /// Registers `ledger.trap`, the op that traps on demand (drills and tests only).
    public static func registerTrapOp() {
        _ = trapOp
    }
}
