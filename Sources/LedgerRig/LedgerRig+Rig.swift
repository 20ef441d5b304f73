import Cog

extension LedgerRig {
    /// The Ledger rig (`--rig ledger`): accounts opened, closed and moved
    /// between by ops; a worker runs the audit, which logs `ledger total N`
    /// whenever the bank's total changes.
    public static let rig = CogRig(
        name: "ledger",
        summary: "accounts, transfers and an audit of the total (the drills' rig)",
        schemaVersion: 1,
        durableSources: [_balanceCogs, _accountsCog, _greetedCogs],
        ops: [openAccountOp, transferOp, closeAccountOp, greetOp, tellerTransferOp],
        selectors: [wealthyAccountsCog, isWealthyCogs],
        mechanisms: { host in mechanisms(onTotalChange: audit(host)) })

    /// `ledger` plus a greeter scope child per open account (`scope(each:)`
    /// over a durable source), whose requests carry its scope instance.
    public static let greeterRig = rig.variant(
        named: "ledger-greeter", summary: "ledger plus a greeter scope child per open account",
        mechanisms: { host in mechanisms(greeter: true, onTotalChange: audit(host)) })

    /// `ledger` plus a desk per account with a nested peer child per account.
    public static let peersRig = rig.variant(
        named: "ledger-peers", summary: "ledger plus a desk per account with nested peer scopes",
        mechanisms: { host in mechanisms(peers: true, onTotalChange: audit(host)) })

    /// `ledger` plus a concierge greeting each wealthy account (a scope over
    /// an automatic cog the leader evaluates).
    public static let conciergeRig = rig.variant(
        named: "ledger-concierge", summary: "ledger plus a concierge scope over the wealthy accounts (an automatic cog)",
        mechanisms: { host in mechanisms(concierge: true, onTotalChange: audit(host)) })

    /// `ledger` plus a herald: a top-level reaction greeting each account
    /// opened while it runs (one member of a worker group runs it).
    public static let heraldRig = rig.variant(
        named: "ledger-herald", summary: "ledger plus a herald greeting each new account from a top-level reaction",
        mechanisms: { host in mechanisms(herald: true, onTotalChange: audit(host)) })

    /// `ledger` and its variants, in the order `cogd` offers them.
    public static let rigs = [rig, greeterRig, peersRig, conciergeRig, heraldRig]

    /// The audit's report: one line per total.
    private static func audit(_ host: CogRig.Host) -> @MainActor (Int) -> Void {
        { total in host.log("ledger total \(total)") }
    }
}
