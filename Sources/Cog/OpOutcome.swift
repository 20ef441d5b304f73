/// What became of one `perform`ed op, as its requester learns it: applied
/// at a revision, changed nothing, refused by the op's body, or rejected
/// before its body ran. A mechanism observes it with `perform(_:_:then:)`
/// or `performAndWait(_:_:)`; a plain `perform(_:_:)` stays fire-and-forget.
///
/// ```swift
/// m.perform(transferOp, Transfer(from: "alice", to: "bob", amount: 50)) { outcome in
///   if case .refused(let code, let reason) = outcome { log.warning("transfer refused \(code): \(reason)") }
/// }
/// ```
///
/// On a worker's replica the outcome is the leader's answer
/// (`protocol/cogwire.md` §4), an answer from `dedup` included, or one the
/// worker gave itself for a request it could not send (`rejected`
/// `unavailable`, `bad-argument`, …). In an embedded runtime (and on the
/// leader) it is known when the op's turn ends; see each case.
public enum OpOutcome: Sendable, Equatable, CustomStringConvertible {
    /// The op's turn changed state. On a replica, `revision` is the
    /// leader's revision of the turn (the replica shows it once it has
    /// applied that revision). In an embedded runtime, which keeps no
    /// revisions, it is the runtime's own count of turns that changed
    /// something, this one included: it orders this runtime's applies and
    /// means nothing elsewhere.
    case applied(revision: UInt64)
    /// The op's turn ran and wrote nothing (or only values equal to those
    /// it replaced).
    case unchanged
    /// The op's body refused (`try c.refuse(code, reason)`, `Refusal`):
    /// nothing of its turn was kept. `code` is the app's own.
    case refused(code: String, reason: String)
    /// The request was turned away before its body ran: by the leader
    /// (`retired-scope`, `bad-argument`, `unknown-op`, … —
    /// `protocol/cogwire.md` §4, "Rejection codes") or by the worker itself
    /// (`unavailable` for a request it could not send or no longer waits
    /// for). `detail` is what a person reads.
    case rejected(code: String, detail: String)

    /// `applied at revision 6`, `unchanged`, `refused CODE: REASON`,
    /// `rejected CODE: DETAIL` (text escaped for a terminal).
    public var description: String {
        switch self {
        case .applied(let revision): "applied at revision \(revision)"
        case .unchanged: "unchanged"
        case .refused(let code, let reason): "refused \(TerminalText.escaped(code)): \(TerminalText.escaped(reason))"
        case .rejected(let code, let detail): "rejected \(TerminalText.escaped(code)): \(TerminalText.escaped(detail))"
        }
    }
}
