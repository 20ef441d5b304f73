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
