import Cog

/// Traps on demand: its body stops the process that runs it (`fatalError`;
/// given the reason `stack overflow`, by recursing until the thread's
/// stack runs out). Recovery drills and tests send it to prove that a
/// request whose body kills the leader kills it once — the restarted leader
/// answers its retries `rejected("crashed-leader: …")` and never runs it
/// again. Served only by a leader given `LedgerRig.trapOp` (`cogd leader
/// --trap-op`): an unknown op everywhere else.
let _trapOp = RemoteOp<String>(
    name: "ledger.trap",
    summary: "stops the leader that runs it, once (drills and tests; the argument: a reason, `stack overflow` to overflow the stack)",
    example: "drill"
) { _, reason in
    if reason == "stack overflow" { _ = exhaustStack(1) }
    fatalError("ledger.trap: trapping on demand (\(String(reflecting: reason)))")
}

/// Recurses, 2 KiB of stack a call, until the stack runs out (the guard
/// page's fault, SIGSEGV). The next depth is read back from the frame and
/// the call's result is used after it, so the optimizer can neither drop
/// the frames nor make the recursion a loop; it returns only if `depth`
/// wraps to 0, which it does not before the stack ends.
@inline(never) private func exhaustStack(_ depth: Int) -> Int {
    if depth == 0 { return 0 }
    return withUnsafeTemporaryAllocation(of: Int.self, capacity: 256) { frame in
        frame.initialize(repeating: depth)
        return exhaustStack(frame[depth & 255] &+ 1) &+ frame[0]
    }
}

extension LedgerRig {
    /// `ledger.trap`, an op whose body traps on demand, for drills and
    /// tests: in no rig, so a leader serves it only when given it too
    /// (`cogd leader --trap-op`).
    public static var trapOp: any RemoteOpDeclaration { _trapOp }
}
