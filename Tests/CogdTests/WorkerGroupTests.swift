import CogLog
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Worker groups with the real binaries (`protocol/cogwire.md` §6a): the
/// ledger-greeter rig opens a greeter child per account, and each greeting
/// is a turn (`ledger.greeted[account]` counts them).
@Suite("worker groups: each scope child on one worker of the group", .serialized, .timeLimit(.minutes(3)))
struct WorkerGroupTests {
    let folder = TemporaryFolder()
    let ports = ClusterPorts()

    func startGrouped(_ name: String) throws -> CogdProcess {
        let worker = try CogdProcess(["worker", "--leader", ports.requests, "--name", name, "--rig", "ledger-greeter", "--group", "greeters"])
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(name) synced: \(worker.lines)")
        return worker
    }

    func greetings(_ accounts: [String]) throws -> [String: Int] {
        let store = try TurnStore(directory: folder.path, mode: .reader)
        defer { store.close() }
        var counts: [String: Int] = [:]
        for account in accounts { counts[account] = try store.greetings(of: account) ?? 0 }
        return counts
    }

    func records() throws -> [TurnRecord] {
        let store = try TurnStore(directory: folder.path, mode: .reader)
        defer { store.close() }
        return try store.records(from: 1, limit: 10_000)
    }

    @Test func `two workers greet each account once; a killed one's accounts move to the other; a third takes a share`() throws {
        defer { folder.cleanUp() }
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 2)
        defer { leader.stop() }
        let first = try startGrouped("g1")
        defer { first.stop() }
        let second = try startGrouped("g2")
        defer { second.stop() }
        // Both have registered the greeter selector (the leader lists them) before any account opens.
        #expect(waitUntil { (try? ports.errorCounts()) != nil && ((try? runCogd(["status", "--leader", ports.requests]).stdout) ?? "").contains("g2: applied") })
        let accounts = ["alice", "bob", "carol", "dave", "erin", "frank"]
        for account in accounts { #expect(try ports.call("ledger.open", #"{"account": "\#(account)", "balance": 5}"#).hasPrefix("applied")) }
        #expect(waitUntil { (try? greetings(accounts))?.values.allSatisfy { $0 >= 1 } == true }, "every account greeted")
        usleep(500_000)  // a second greeting would come now, were any child open twice
        #expect(try greetings(accounts) == Dictionary(uniqueKeysWithValues: accounts.map { ($0, 1) }), "each greeter ran once")
        let greeters = try records().filter { $0.name.hasSuffix("ledger.greet") }
        let byWorker = Dictionary(grouping: greeters, by: { $0.origin.worker ?? "" }).mapValues(\.count)
        #expect(byWorker == ["g1": 3, "g2": 3], "spread across the group, balanced: \(byWorker)")
        #expect(try ports.openScopeInstances().count == 6, "one instance per account, not one per worker")
        let status = try runCogd(["status", "--leader", ports.requests])
        #expect(status.stdout.contains("group     greeters: 2 members (instances owned: g1 3, g2 3)"), "\(status.stdout)")
        let tail = try runCogd(["tail", "--data", folder.path])
        // Each opening names its owner (one that came with a registration reply, not a turn, is in no record).
        let opens = tail.stdout.split(separator: "\n").filter { $0.hasPrefix("    opens  LedgerGreeter.greeter[") }
        #expect(!opens.isEmpty && opens.allSatisfy { $0.hasSuffix(" on g1") || $0.hasSuffix(" on g2") }, "\(tail.stdout)")

        // g1 killed: after the heartbeat timeout its accounts open on g2 (a new lifetime: greeted again).
        let g1Accounts = Set(greeters.filter { $0.origin.worker == "g1" }.flatMap { $0.writes.compactMap { try? CBORDecoder().decode(String.self, from: $0.key ?? []) } })
        first.killHard()
        #expect(waitUntil(timeout: .seconds(20)) { (try? greetings(accounts))?.filter { g1Accounts.contains($0.key) }.values.allSatisfy { $0 == 2 } == true })
        let gone = try #require(try records().last { $0.name == "cogd.workerGone" })
        #expect(gone.scopeEvents.filter { $0.kind == .retire }.allSatisfy { $0.worker == "g1" })
        #expect(gone.scopeEvents.filter { $0.kind == .open }.map(\.worker) == Array(repeating: "g2", count: 3))
        #expect(try greetings(accounts).filter { !g1Accounts.contains($0.key) }.values.allSatisfy { $0 == 1 }, "g2's own accounts were not touched")

        // A third worker joins: members move to it until the counts are within one.
        let third = try startGrouped("g3")
        defer { third.stop() }
        #expect(waitUntil { (try? records())?.contains { $0.name == "cogd.scopesMoved" } == true })
        let moved = try #require(try records().last { $0.name == "cogd.scopesMoved" })
        #expect(moved.scopeEvents.filter { $0.kind == .open }.map(\.worker) == ["g3", "g3", "g3"])
        #expect(waitUntil { (try? records())?.filter { $0.name.hasSuffix("ledger.greet") && $0.origin.worker == "g3" }.count == 3 })
        #expect(try ports.openScopeInstances().count == 6)
    }
}
