import Cog

/// Watches the total money, so a worker can show (and a drill can check)
/// that transfers conserve it.
struct LedgerAuditMechanism: Mechanism {
    let onTotalChange: @MainActor (Int) -> Void

    func operate(_ m: MechanismController) {
        m.watch(totalMoneyCog, initial: .run, name: "total") { _, total in
            onTotalChange(total)
        }
    }
}

/// One scope child per open account, which greets it and then moves one
/// unit between the bank's first two accounts on its behalf (the account is
/// the receipt): on a worker these requests carry the child's scope
/// instance, minted by the leader, so a child retired before its request
/// executes is refused.
struct LedgerGreeterMechanism: Mechanism {
    func operate(_ m: MechanismController) {
        m.scope(each: accountsCog, name: "greeter") { account, s in
            s.greet(account: account)
            s.tellerTransfer(from: "acct0", to: "acct1", amount: 1, receipt: account)
        }
    }
}

/// One desk per open account, and inside each desk one peer child per open
/// account that greets it: a nested `scope(each:)`. On a worker the peers'
/// instances are minted inside their desk's instance, so closing an account
/// retires its desk and every peer in it at once, on the leader too.
struct LedgerPeersMechanism: Mechanism {
    func operate(_ m: MechanismController) {
        m.scope(each: accountsCog, name: "desk") { _, desk in
            desk.scope(each: accountsCog, name: "peer") { peer, p in
                p.greet(account: peer)
            }
        }
    }
}

/// Greets each wealthy account (balance ≥ 100) once per stretch of wealth: a
/// `scope(each:)` over an automatic cog. On a worker the leader evaluates the
/// same cog after each turn and mints the children's instances, so an
/// account that drops below 100 retires its child there too.
struct LedgerConciergeMechanism: Mechanism {
    func operate(_ m: MechanismController) {
        m.scope(each: wealthyAccountsCog, name: "concierge") { account, s in
            s.greet(account: account)
        }
    }
}

/// Greets each account opened while it runs, once, from a top-level
/// reaction of its own (no scope): in a worker group the leader places the
/// mechanism's root on one member, so each new account is greeted once by
/// the group, and after its owner goes, by the member the root moved to
/// (`cogwire.md` §6a). Its requests carry the root's instance.
struct LedgerHeraldMechanism: Mechanism {
    func operate(_ m: MechanismController) {
        m.watch(accountsCog, initial: .skip, name: "herald") { [weak m] old, new in
            for account in new where !old.contains(account) { m?.greet(account: account) }
        }
    }
}
