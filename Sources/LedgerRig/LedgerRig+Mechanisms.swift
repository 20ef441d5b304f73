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

/// One scope child per open account, which greets it: on a worker its
/// request carries the child's scope instance, minted by the leader.
struct LedgerGreeterMechanism: Mechanism {
    func operate(_ m: MechanismController) {
        m.scope(each: accountsCog, name: "greeter") { account, s in
            s.greet(account: account)
        }
    }
}
