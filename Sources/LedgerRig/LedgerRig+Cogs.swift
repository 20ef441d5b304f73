import Cog

/// Each account's balance, keyed by account name.
let _balanceCogs = CogBox<Int, String>.Manual(name: "ledger.balance") { 0 }
public let balanceCogs = _balanceCogs.readOnly

/// The open accounts, in opening order.
let _accountsCog = Cog<[String]>.Manual(name: "ledger.accounts") { [] }
public let accountsCog = _accountsCog.readOnly

/// The accounts holding at least 100, in opening order: an automatic cog
/// (named, `Codable`), so a worker's scope over it is tracked by the leader,
/// which evaluates the same declaration after each turn.
public let wealthyAccountsCog = Cog<[String]>(name: "ledger.wealthy") { c in
    c[accountsCog].filter { c[balanceCogs[$0]] >= 100 }
}

/// Whether one account holds at least 100: a named box with `Codable` values
/// and keys, so a worker's scope over one member is tracked by the leader.
public let isWealthyCogs = CogBox<Bool, String>(name: "ledger.isWealthy") { c, account in
    c[balanceCogs[account]] >= 100
}

/// All the money in the bank. `ledger.open` refuses a balance that would
/// make it overflow, so it always fits; on a state that breaks that rule (a
/// log an older build wrote) it saturates at `Int.max` (or `Int.min`)
/// instead of trapping.
public let totalMoneyCog = Cog<Int>(name: "ledger.total") { c in
    bankTotal(c[accountsCog]) { c[balanceCogs[$0]] }.total
}

/// The sum of the balances of `accounts`, added with overflow checks: on
/// overflow it saturates at `Int.max` (or `Int.min`) and `exact` is false.
/// Money is summed this way everywhere, so no state can trap a process.
func bankTotal(_ accounts: [String], balance: (String) -> Int) -> (total: Int, exact: Bool) {
    var total = 0
    for account in accounts {
        let amount = balance(account)
        let (sum, overflow) = total.addingReportingOverflow(amount)
        if overflow { return (amount > 0 ? Int.max : Int.min, false) }
        total = sum
    }
    return (total, true)
}

/// How many greetings an account received from workers' greeter scopes.
let _greetedCogs = CogBox<Int, String>.Manual(name: "ledger.greeted") { 0 }
public let greetedCogs = _greetedCogs.readOnly

/// Counts one greeting for an open account (a count that would overflow
/// stays where it is).
let greetOp = RemoteOp<String>(
    name: "ledger.greet", summary: "counts one greeting for an open account (the argument: its name)", example: "alice"
) { c, account in
    guard c[_accountsCog].contains(account) else { return }
    let (count, overflow) = c[_greetedCogs[account]].addingReportingOverflow(1)
    guard !overflow else { return }
    c[_greetedCogs[account]] = count
}

/// A transfer a scope child makes on behalf of an account: no change
/// unless the receipt's account is still open — the receipt check inside
/// the writer body; then refused as `ledger.transfer` refuses.
let tellerTransferOp = RemoteOp<TellerTransfer>(
    name: "ledger.tellerTransfer",
    summary: "a transfer made for an account's scope; changes nothing unless the receipt's account is still open, then refuses as ledger.transfer does",
    example: TellerTransfer(transfer: Transfer(from: "alice", to: "bob", amount: 5), receipt: "alice")
) { c, request in
    guard c[_accountsCog].contains(request.receipt) else { return }
    try move(request.transfer, in: c)
}

/// Opens an account once; opening it again changes nothing. Refuses a
/// negative balance and one that would make the bank's total overflow, so
/// the total (and with it every balance) always fits in an `Int`.
let openAccountOp = RemoteOp<Opening>(
    name: "ledger.open",
    summary: "opens an account with a starting balance (0 or more); opening it again changes nothing",
    example: Opening(account: "alice", balance: 100)
) { c, opening in
    let accounts = c[_accountsCog]
    guard !accounts.contains(opening.account), opening.balance >= 0 else { return }
    let (total, exact) = bankTotal(accounts) { c[_balanceCogs[$0]] }
    guard exact, !total.addingReportingOverflow(opening.balance).overflow else { return }
    c[_accountsCog].append(opening.account)
    c[_balanceCogs[opening.account]] = opening.balance
}

/// Closes an open account whose balance is zero (money stays conserved).
let closeAccountOp = RemoteOp<String>(
    name: "ledger.close", summary: "closes an open account whose balance is 0 (the argument: its name)", example: "bob"
) { c, account in
    guard c[_accountsCog].contains(account), c[_balanceCogs[account]] == 0 else { return }
    c[_accountsCog].removeAll { $0 == account }
}

/// Moves money between open accounts. Refuses `unknown-account` for an
/// account not open and `insufficient-funds` for an overdraft, naming the
/// balance; an amount under 1, a transfer to the same account or a balance
/// that would overflow changes nothing.
let transferOp = RemoteOp<Transfer>(
    name: "ledger.transfer",
    summary: "moves money between two open accounts; refuses unknown-account and insufficient-funds; an amount under 1 changes nothing",
    example: Transfer(from: "alice", to: "bob", amount: 30)
) { c, transfer in
    try move(transfer, in: c)
}

/// Moves money between two open accounts, or writes nothing: refuses
/// (`Refusal`) an unknown account and an overdraft; a non-positive amount,
/// the same account twice and a balance that would overflow change nothing
/// (checked arithmetic: a peer chooses the amount).
@MainActor
func move(_ transfer: Transfer, in c: Writer) throws(Refusal) {
    guard transfer.amount > 0, transfer.from != transfer.to else { return }
    let accounts = c[_accountsCog]
    for account in [transfer.from, transfer.to] where !accounts.contains(account) {
        try c.refuse("unknown-account", "no open account named \(Refusal.shortened(account, toBytes: 100))")
    }
    let balance = c[_balanceCogs[transfer.from]]
    let (from, underflow) = balance.subtractingReportingOverflow(transfer.amount)
    guard !underflow, from >= 0 else {
        try c.refuse(
            "insufficient-funds", "\(Refusal.shortened(transfer.from, toBytes: 100)) has \(balance), the transfer needs \(transfer.amount)")
    }
    let (to, overflow) = c[_balanceCogs[transfer.to]].addingReportingOverflow(transfer.amount)
    guard !overflow else { return }
    c[_balanceCogs[transfer.from]] = from
    c[_balanceCogs[transfer.to]] = to
}

extension CogOps {
    /// Opens an account with a starting balance.
    public func open(account: String, with balance: Int) { perform(openAccountOp, Opening(account: account, balance: balance)) }

    /// Moves `amount` from one account to another; refuses an overdraft
    /// (`insufficient-funds`) and an account not open (`unknown-account`).
    public func transfer(from: String, to: String, amount: Int) {
        perform(transferOp, Transfer(from: from, to: to, amount: amount))
    }

    /// Closes an empty account.
    public func close(account: String) { perform(closeAccountOp, account) }

    /// Welcomes an open account.
    public func greet(account: String) { perform(greetOp, account) }

    /// Moves money on behalf of `receipt`'s account, only while it is open.
    public func tellerTransfer(from: String, to: String, amount: Int, receipt: String) {
        perform(tellerTransferOp, TellerTransfer(transfer: Transfer(from: from, to: to, amount: amount), receipt: receipt))
    }
}

extension CogOps {
    /// Opens an account like `open(account:with:)` and tells `observe`
    /// what became of it (`OpOutcome`; opening it again is `unchanged`).
    public func open(account: String, with balance: Int, then observe: @escaping @MainActor (OpOutcome) -> Void) {
        perform(openAccountOp, Opening(account: account, balance: balance), then: observe)
    }

    /// Moves money like `transfer(from:to:amount:)` and tells `observe`
    /// what became of it: `applied`, or `refused` `insufficient-funds` /
    /// `unknown-account` with the reason.
    ///
    /// ```swift
    /// m.transfer(from: "alice", to: "bob", amount: 50) { outcome in
    ///   if case .refused("insufficient-funds", let reason) = outcome { host.report("no: \(reason)") }
    /// }
    /// ```
    public func transfer(from: String, to: String, amount: Int, then observe: @escaping @MainActor (OpOutcome) -> Void) {
        perform(transferOp, Transfer(from: from, to: to, amount: amount), then: observe)
    }
}
