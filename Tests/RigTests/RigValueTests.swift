import Cog
import LedgerRig
import Testing
import TrailsRig

/// Two declarations of one op name (distinct sites) and a durable source
/// with a name of its own, for the duplicate checks. Their names are this
/// test's own, so no other registry in this process meets them.
let rigTestsBumpOp = RemoteOp<Int>(name: "rigTests.bump") { _, _ in }
let rigTestsBumpAgainOp = RemoteOp<Int>(name: "rigTests.bump") { _, _ in }
let rigTestsOtherOp = RemoteOp<Int>(name: "rigTests.other") { _, _ in }
let _rigTestsCountCog = Cog<Int>.Manual(name: "rigTests.count") { 0 }
let _rigTestsCountAgainCog = Cog<Int>.Manual(name: "rigTests.count") { 0 }

@Suite("a rig is a value")
struct RigValueTests {
    /// What building a registry refused (nil: it did not).
    func refusal(_ build: () throws -> OpRegistry) -> DuplicateDeclaration? {
        do {
            _ = try build()
            return nil
        } catch {
            return error as? DuplicateDeclaration
        }
    }

    @Test func `the Ledger rig lists the declarations its register() touched`() {
        let rig = LedgerRig.rig
        #expect(rig.name == "ledger" && rig.schemaVersion == 1)
        #expect(rig.durableSources.map(\.name) == ["ledger.balance", "ledger.accounts", "ledger.greeted"])
        #expect(rig.opNames == ["ledger.open", "ledger.transfer", "ledger.close", "ledger.greet", "ledger.tellerTransfer"])
        #expect(rig.selectors.map(\.name) == ["ledger.wealthy", "ledger.isWealthy"])
        #expect(rig.durableSources.allSatisfy { $0.site.hasPrefix("LedgerRig/LedgerRig+Cogs.swift:") })
        // The variants cogd offers: the same declarations, other mechanisms.
        #expect(LedgerRig.rigs.map(\.name) == ["ledger", "ledger-greeter", "ledger-peers", "ledger-concierge", "ledger-herald"])
        for variant in LedgerRig.rigs {
            #expect(variant.durableSources == rig.durableSources && variant.selectors == rig.selectors)
            #expect(variant.ops.map(\.site) == rig.ops.map(\.site))
        }
        // The op that traps on demand is in no rig.
        #expect(LedgerRig.trapOp.name == "ledger.trap")
        #expect(!LedgerRig.rigs.contains { $0.opNames.contains("ledger.trap") })
    }

    @Test func `the Trails rig lists the declarations its register() touched`() {
        let rig = TrailsRig.rig
        #expect(rig.name == "trails")
        #expect(
            rig.durableSources.map(\.name) == [
                "trails.openScreens", "trails.screenTrail", "trails.loaded", "trails.isLoggingHike", "trails.hikeSeconds", "trails.journal",
            ])
        #expect(
            rig.opNames == [
                "trails.openScreen", "trails.closeScreen", "trails.accept", "trails.startHike", "trails.stopHike", "trails.tickHike",
                "trails.journal",
            ])
        #expect(rig.selectors.isEmpty)
    }

    @Test @MainActor func `the shipped rigs' mechanisms are the ones a worker ran before`() throws {
        let host = CogRig.Host(workerName: "w") { _ in }
        #expect(try TrailsRig.rig.mechanisms(host).map(\.name) == ["TrailScreens", "HikeTimer", "Journal"])
        #expect(try LedgerRig.rig.mechanisms(host).map(\.name) == ["LedgerAudit"])
        #expect(try LedgerRig.greeterRig.mechanisms(host).map(\.name) == ["LedgerAudit", "LedgerGreeter"])
        #expect(try LedgerRig.peersRig.mechanisms(host).map(\.name) == ["LedgerAudit", "LedgerPeers"])
        #expect(try LedgerRig.conciergeRig.mechanisms(host).map(\.name) == ["LedgerAudit", "LedgerConcierge"])
    }

    @Test func `a registry built from the shipped rigs serves every op of each, once`() throws {
        let registry = try OpRegistry(rigs: [TrailsRig.rig] + LedgerRig.rigs)
        #expect(registry.names == (TrailsRig.rig.opNames + LedgerRig.rig.opNames).sorted())
        let replica = CogRig.replica(of: [TrailsRig.rig] + LedgerRig.rigs)
        #expect(replica.name == "replica")
        #expect(replica.opNames == TrailsRig.rig.opNames + LedgerRig.rig.opNames)
        #expect(replica.durableSources == TrailsRig.rig.durableSources + LedgerRig.rig.durableSources)
        #expect(replica.selectors == LedgerRig.rig.selectors)
        #expect(try OpRegistry(rigs: [replica]).names == registry.names)
    }

    @Test func `two rigs that give one op name to two declarations are refused, naming both sites`() {
        let one = CogRig(name: "one", ops: [rigTestsBumpOp])
        let two = CogRig(name: "two", ops: [rigTestsOtherOp, rigTestsBumpAgainOp])
        #expect(rigTestsBumpOp.site != rigTestsBumpAgainOp.site)
        let refused = refusal { try OpRegistry(rigs: [one, two]) }
        #expect(refused?.kind == "remote op" && refused?.name == "rigTests.bump")
        #expect(refused?.sites == [rigTestsBumpOp.site, rigTestsBumpAgainOp.site])
        #expect(
            refused?.description
                == "the remote op name `rigTests.bump` is declared 2 times: at \(rigTestsBumpOp.site) and at \(rigTestsBumpAgainOp.site); each name needs exactly one declaration"
        )
        // Within one rig, too.
        #expect(refusal { try OpRegistry(rigs: [CogRig(name: "both", ops: [rigTestsBumpOp, rigTestsBumpAgainOp])]) } == refused)
    }

    @Test func `one declaration listed by two rigs is one declaration`() throws {
        let one = CogRig(name: "one", ops: [rigTestsOtherOp])
        let registry = try OpRegistry(rigs: [one, one.variant(named: "one-more", summary: "", mechanisms: { _ in [] })])
        #expect(registry.names == ["rigTests.other"])
    }

    @Test func `two durable sources with one name are refused, naming both sites`() {
        let one = CogRig(name: "one", durableSources: [_rigTestsCountCog])
        let two = CogRig(name: "two", durableSources: [_rigTestsCountAgainCog])
        let sites = [one.durableSources[0].site, two.durableSources[0].site]
        #expect(sites[0] != sites[1])
        let refused = refusal { try OpRegistry(rigs: [one, two]) }
        #expect(refused?.kind == "durable source" && refused?.name == "rigTests.count" && refused?.sites == sites)
        // Even when only one is listed: the other is declared in the process, and a replica applies by name.
        #expect(refusal { try OpRegistry(rigs: [one]) } == refused)
    }

    @Test func `listing a source without a name stops the process, saying so`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = CogRig(name: "unnamed", durableSources: [Cog<Int>.Manual { 0 }])
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("rig `unnamed`: the durable source declared at RigTests/RigValueTests.swift:"), "\(message)")
        #expect(message.contains("has no stable name; give the declaration a `name:`"), "\(message)")
    }

    @Test func `a rig's fingerprint is its name, schema version, durable names and op names, sorted`() {
        let fingerprint = LedgerRig.rig.fingerprint
        #expect(fingerprint.name == "ledger" && fingerprint.schemaVersion == 1)
        #expect(fingerprint.durableSources == ["ledger.accounts", "ledger.balance", "ledger.greeted"])
        #expect(fingerprint.ops == ["ledger.close", "ledger.greet", "ledger.open", "ledger.tellerTransfer", "ledger.transfer"])
        #expect(LedgerRig.greeterRig.fingerprint.ops == fingerprint.ops && LedgerRig.greeterRig.fingerprint.name == "ledger-greeter")
        #expect(fingerprint.incompatibility(with: fingerprint) == nil)
    }

    @Test func `a worker may lack what the leader adds, nothing else`() {
        let leader = CogRig.Fingerprint(name: "todos", schemaVersion: 3, durableSources: ["todos.ids", "todos.title"], ops: ["todos.add", "todos.remove"])
        // Added at the leader: an op, a durable source.
        #expect(CogRig.Fingerprint(name: "todos", schemaVersion: 3, durableSources: ["todos.ids"], ops: ["todos.add"]).incompatibility(with: leader) == nil)
        // Removed or renamed at the leader.
        let renamed = CogRig.Fingerprint(name: "todos", schemaVersion: 3, durableSources: ["todos.ids", "todos.name"], ops: ["todos.add", "todos.delete"])
        #expect(
            renamed.incompatibility(with: leader)
                == "rig todos differs from the leader's: durable sources the leader does not declare: `todos.name`; "
                + "ops the leader does not serve: `todos.delete` (a worker may lack what the leader adds, nothing else; run the leader's version of the rig)")
        // A schema version bumped on either side.
        let older = CogRig.Fingerprint(name: "todos", schemaVersion: 2, durableSources: ["todos.ids", "todos.title"], ops: ["todos.add", "todos.remove"])
        #expect(older.incompatibility(with: leader)?.contains("its schema version is 2, the leader's 3") == true)
        #expect(leader.incompatibility(with: older)?.contains("its schema version is 3, the leader's 2") == true)
        // A long list is cut (a peer chooses it).
        let many = CogRig.Fingerprint(name: "todos", schemaVersion: 3, durableSources: [], ops: (1...20).map { "op\($0)" })
        #expect(many.incompatibility(with: leader)?.contains("and 12 more") == true)
    }
}
