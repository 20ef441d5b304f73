import Cog
import LedgerRig

/// The simulator's own declarations, served beside the Ledger and Trails
/// rigs: a selector over the open accounts that the simulation can make
/// unreadable for a while, as a fault. The leader evaluates it after every
/// turn like any named automatic cog (`protocol/cogwire.md` §6); while it
/// is spoiled its value's encoding throws, which the leader's scope table
/// must take as "unknown", never as "no members" (`ScopeTable`,
/// `selector-unreadable`).
enum SimRig {
    /// `sim.accounts`, the selector of the simulated workers' desk scopes.
    static let selectorName = "sim.accounts"
    /// The op that spoils (argument true) or mends (false) the selector.
    static let spoilOp = "sim.spoilSelector"
    /// The durable source that says whether the selector is spoiled.
    static let spoiledName = "sim.selectorSpoiled"

    static let rig = CogRig(
        name: "sim",
        summary: "the simulator's faults: a selector over the open accounts whose encoding fails while spoiled",
        schemaVersion: 1,
        durableSources: [_selectorSpoiledCog],
        ops: [spoilSelectorOp],
        selectors: [spoilableAccountsCog])
}

/// Whether `sim.accounts` is spoiled now.
let _selectorSpoiledCog = Cog<Bool>.Manual(name: SimRig.spoiledName) { false }

/// Spoils (true) or mends (false) `sim.accounts`.
let spoilSelectorOp = RemoteOp<Bool>(
    name: SimRig.spoilOp, summary: "makes sim.accounts unreadable (true) or readable again (false)", example: true
) { c, spoiled in
    c[_selectorSpoiledCog] = spoiled
}

/// The open accounts, in opening order; its value cannot be encoded while
/// the selector is spoiled.
let spoilableAccountsCog = Cog<SpoilableAccounts>(name: SimRig.selectorName) { c in
    SpoilableAccounts(accounts: c[accountsCog], spoiled: c[_selectorSpoiledCog])
}

/// The open accounts, encoded as their list (as `ledger.accounts` is); the
/// encoding throws while `spoiled`.
struct SpoilableAccounts: Codable, Equatable, Sendable {
    var accounts: [String]
    var spoiled: Bool

    init(accounts: [String], spoiled: Bool) {
        self.accounts = accounts
        self.spoiled = spoiled
    }

    init(from decoder: any Decoder) throws {
        accounts = try [String](from: decoder)
        spoiled = false
    }

    func encode(to encoder: any Encoder) throws {
        guard !spoiled else {
            throw EncodingError.invalidValue(
                self, EncodingError.Context(codingPath: encoder.codingPath, debugDescription: "sim.accounts is spoiled (a simulated fault)"))
        }
        try accounts.encode(to: encoder)
    }
}
