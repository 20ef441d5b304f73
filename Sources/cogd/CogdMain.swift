import Cog
import CogdCommandLine
import LedgerRig
import TrailsRig

/// `cogd`: the command line (`CogdCommandLine`) with the two example rigs —
/// Trails (the default) and Ledger with its variants.
@main
struct CogdMain {
    /// The rigs `cogd` offers, in `--rig`'s order (`replica` follows them).
    static let rigs: [CogRig] = [TrailsRig.rig] + LedgerRig.rigs

    static func main() async {
        await CogdCommandLine.main(rigs: rigs)
    }
}
