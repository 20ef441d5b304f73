/// A bank of accounts: the rig the drills (and the cluster tests) run.
/// Money moves only by transfers that refuse overdrafts, so the total is
/// conserved by construction once the accounts are open.
public enum LedgerRig {
    /// Touches every declaration of the rig so its durable sources and remote
    /// ops are registered in this process: the same as building `rig`, which
    /// is what a leader or worker uses (kept for code that only needs the
    /// declarations registered).
    public static func register() {
        _ = rig
    }

    /// The mechanisms a worker runs for this rig; `greeter` adds a scope
    /// child per open account that greets it (its requests carry the child's
    /// scope instance); `peers` adds a desk per account with a nested peer
    /// child per account that greets it; `concierge` greets each wealthy
    /// account from a scope over an automatic cog.
    public static func mechanisms(
        greeter: Bool = false, peers: Bool = false, concierge: Bool = false, herald: Bool = false,
        onTotalChange: @escaping @MainActor (Int) -> Void = { _ in }
    ) -> [any Mechanism] {
        var mechanisms: [any Mechanism] = [LedgerAuditMechanism(onTotalChange: onTotalChange)]
        if greeter { mechanisms.append(LedgerGreeterMechanism()) }
        if peers { mechanisms.append(LedgerPeersMechanism()) }
        if concierge { mechanisms.append(LedgerConciergeMechanism()) }
        if herald { mechanisms.append(LedgerHeraldMechanism()) }
        return mechanisms
    }
}

import Cog

/// Opening an account with a starting balance.
public struct Opening: Codable, Equatable, Sendable {
    public var account: String
    public var balance: Int

    public init(account: String, balance: Int) {
        self.account = account
        self.balance = balance
    }
}

/// Moving money between two accounts.
public struct Transfer: Codable, Equatable, Sendable {
    public var from: String
    public var to: String
    public var amount: Int

    public init(from: String, to: String, amount: Int) {
        self.from = from
        self.to = to
        self.amount = amount
    }
}

/// A transfer made for an account's scope, with that account as its receipt.
public struct TellerTransfer: Codable, Equatable, Sendable {
    public var transfer: Transfer
    public var receipt: String

    public init(transfer: Transfer, receipt: String) {
        self.transfer = transfer
        self.receipt = receipt
    }
}
