import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Worker groups with the real binaries (`protocol/cogwire.md` §6a): the
/// ledger-greeter rig opens a greeter child per account, and each greeting
/// is a turn (`ledger.greeted[account]` counts them).
@Suite("worker groups: each scope child on one worker of the group", .serialized, .timeLimit(.minutes(10)))
struct WorkerGroupTests {
    let folder = TemporaryFolder()
    let ports = ClusterPorts()

    func startGrouped(_ name: String) throws -> CogdProcess {
        // No --group: workers of one rig form the group named after it.
        let worker = try CogdProcess(["worker", "--leader", ports.requests, "--name", name, "--rig", "ledger-greeter"])
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

    /// The mechanism roots each worker owns, from `cogd status --json`.
    func rootsByWorker() throws -> [String: [String]] {
        let status = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        let workers = object?["workers"] as? [[String: Any]] ?? []
        return Dictionary(uniqueKeysWithValues: workers.compactMap { worker in
            (worker["name"] as? String).map { ($0, worker["roots"] as? [String] ?? []) }
        })
    }

    func records() throws -> [TurnRecord] {
        let store = try TurnStore(directory: folder.path, mode: .reader)
        defer { store.close() }
        return try store.records(from: 1, limit: 10_000)
    }

    @Test func `a hello whose group holds a C1 control character is refused malformed like C0 and DEL; a format character is welcomed`() throws {
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        for group in ["csi\u{9B}2J", "c1\u{85}", "c0\u{1B}", "del\u{7F}"] {
            let peer = try RawPeer(endpoint: ports.requests)
            guard case .error(let refusal)? = try peer.exchange(.hello(worker: "probe", lastRevision: 0, group: group)) else {
                Issue.record("no error reply to the group \(group.unicodeScalars.map(\.value))")
                continue
            }
            #expect(refusal.code == "malformed")
            #expect(refusal.message == "a group is 1 to 255 bytes of UTF-8 with no control characters")
        }
        // U+200E and U+2028 are format and separator characters, not control characters (cogwire §6a).
        let peer = try RawPeer(endpoint: ports.requests)
        guard case .welcome(_, _, _, _, let echoed)? = try peer.exchange(.hello(worker: "marked", lastRevision: 0, group: "ltr\u{200E}line\u{2028}")) else {
            Issue.record("no welcome for a group holding U+200E and U+2028")
            return
        }
        #expect(echoed == "ltr\u{200E}line\u{2028}")
        #expect(try ports.errorCounts()["malformed"] == 4)
        #expect(leader.process.isRunning)
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
        // One instance per account (not one per worker), and the group's two mechanism roots.
        #expect(try ports.openScopeInstances().count == 6 + 2, "one instance per account, not one per worker")
        let status = try runCogd(["status", "--leader", ports.requests])
        // The group's two mechanism roots are spread too: one each.
        #expect(status.stdout.contains("group     ledger-greeter: 2 members (instances owned: g1 4, g2 4)"), "\(status.stdout)")
        let roots = try rootsByWorker()
        #expect(roots["g1"]?.count == 1 && roots["g2"]?.count == 1, "\(roots)")
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
        // g1's root moves to g2 with its accounts.
        #expect(gone.scopeEvents.filter { $0.kind == .open }.map(\.worker) == Array(repeating: "g2", count: 4))
        #expect(gone.scopeEvents.filter { $0.kind == .open && $0.identity == nil }.map(\.scope) == roots["g1"])
        #expect(try greetings(accounts).filter { !g1Accounts.contains($0.key) }.values.allSatisfy { $0 == 1 }, "g2's own accounts were not touched")

        // A third worker joins: members move to it until the counts are within
        // one, and one of g2's two roots (in a record of its own).
        // Counted before g3 starts: its moves may be committed by the time it says it synced.
        let killedAt = try records().count
        let third = try startGrouped("g3")
        defer { third.stop() }
        func movedToThird() throws -> [ScopeEvent] {
            try records().dropFirst(killedAt).filter { $0.name == "cogd.scopesMoved" }.flatMap(\.scopeEvents).filter { $0.kind == .open }
        }
        #expect(waitUntil { (try? movedToThird())?.count == 4 }, "\(String(describing: try? movedToThird()))")
        let moved = try movedToThird()
        #expect(moved.map(\.worker) == ["g3", "g3", "g3", "g3"])
        #expect(moved.filter { $0.identity == nil }.count == 1, "one root moved")
        #expect(try rootsByWorker().mapValues(\.count) == ["g2": 1, "g3": 1])
        #expect(waitUntil { (try? records())?.filter { $0.name.hasSuffix("ledger.greet") && $0.origin.worker == "g3" }.count == 3 })
        #expect(try ports.openScopeInstances().count == 6 + 2)
    }

    func startHerald(_ name: String, group: [String] = []) throws -> CogdProcess {
        let worker = try CogdProcess(["worker", "--leader", ports.requests, "--name", name, "--rig", "ledger-herald"] + group)
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(name) synced: \(worker.lines)")
        return worker
    }

    /// The `ledger.greet` records (the herald's greetings), in log order.
    func heraldGreetings() throws -> [TurnRecord] { try records().filter { $0.name.hasSuffix("ledger.greet") } }

    @Test func `two workers of one rig form one group with no flag: the mechanism's top-level reaction runs on one of them and moves when it is killed`() throws {
        defer { folder.cleanUp() }
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 2)
        defer { leader.stop() }
        let first = try startHerald("h1")
        defer { first.stop() }
        #expect(first.lines.contains { $0.hasSuffix(", group ledger-herald") }, "the rig's name is the default group: \(first.lines)")
        let second = try startHerald("h2")
        defer { second.stop() }
        // The group's two roots spread, one on each member, before any account opens.
        #expect(waitUntil { (try? rootsByWorker())?.mapValues(\.count) == ["h1": 1, "h2": 1] }, "\(String(describing: try? rootsByWorker()))")
        let roots = try rootsByWorker()
        let heraldOwner = try #require(roots.first { $0.value == ["LedgerHerald"] }?.key, "\(roots)")
        let auditOwner = heraldOwner == "h1" ? "h2" : "h1"
        #expect(roots[auditOwner] == ["LedgerAudit"], "\(roots)")
        let processes = ["h1": first, "h2": second]
        let (herald, audit) = (processes[heraldOwner]!, processes[auditOwner]!)
        let accounts = ["alice", "bob", "carol", "dave"]
        for account in accounts { #expect(try ports.call("ledger.open", #"{"account": "\#(account)", "balance": 5}"#).hasPrefix("applied")) }
        #expect(waitUntil { (try? greetings(accounts))?.values.allSatisfy { $0 >= 1 } == true }, "every account heralded")
        usleep(500_000)  // a second greeting would come now, were the reaction running on both workers
        #expect(try greetings(accounts) == Dictionary(uniqueKeysWithValues: accounts.map { ($0, 1) }), "the herald ran once per account")
        let greeted = try heraldGreetings()
        // Only the herald root's owner greets, each greeting stamped with the root's instance.
        #expect(Set(greeted.map { $0.origin.worker ?? "" }) == [heraldOwner], "\(greeted.map(\.origin))")
        let rootInstance = try #require(greeted.first?.origin.instance, "the herald's requests are stamped")
        #expect(greeted.allSatisfy { $0.origin.instance == rootInstance })
        // The audit is a top-level reaction too: only its root's owner prints the totals.
        let status = try runCogd(["status", "--leader", ports.requests]).stdout
        #expect(
            status.contains(
                "group     ledger-herald: 2 members (instances owned: h1 1, h2 1)\n          roots: LedgerAudit on \(auditOwner), LedgerHerald on \(heraldOwner)\n"),
            "\(status)")
        #expect(audit.waitForLine { $0.hasSuffix(": ledger total 20") } != nil, "\(audit.lines)")
        #expect(!herald.lines.contains { $0.hasSuffix(": ledger total 20") }, "\(herald.lines)")

        // The herald's owner killed: past the heartbeat timeout its root opens on
        // the other member, which heralds what opens next, once.
        herald.killHard()
        #expect(waitUntil(timeout: .seconds(20)) { (try? records())?.contains { $0.name == "cogd.workerGone" } == true })
        let gone = try #require(try records().last { $0.name == "cogd.workerGone" })
        let rootEvents = gone.scopeEvents.filter { $0.identity == nil }
        #expect(rootEvents.filter { $0.kind == .retire }.map { "\($0.scope) \($0.worker ?? "")" } == ["LedgerHerald \(heraldOwner)"])
        #expect(rootEvents.filter { $0.kind == .open }.map { "\($0.scope) \($0.worker ?? "")" } == ["LedgerHerald \(auditOwner)"])
        #expect(rootEvents.contains { $0.kind == .retire && $0.instance == rootInstance })
        let newRoot = try #require(rootEvents.first { $0.kind == .open && $0.scope == "LedgerHerald" }?.instance)
        #expect(try ports.call("ledger.open", #"{"account": "erin", "balance": 5}"#).hasPrefix("applied"))
        #expect(waitUntil { (try? greetings(["erin"]))?["erin"] == 1 })
        usleep(500_000)
        #expect(
            try greetings(accounts + ["erin"]) == Dictionary(uniqueKeysWithValues: (accounts + ["erin"]).map { ($0, 1) }),
            "heralded once, by the survivor only")
        let last = try #require(try heraldGreetings().last)
        #expect(last.origin.worker == auditOwner && last.origin.instance == newRoot)
        let moved = try runCogd(["status", "--leader", ports.requests, "--json"]).stdout
        #expect(
            moved.contains(#"{"name": "\#(auditOwner)", "#)
                && moved.contains(#""group": "ledger-herald", "instances": 2, "roots": ["LedgerAudit", "LedgerHerald"]}"#), "\(moved)")
        let tail = try runCogd(["tail", "--data", folder.path])
        #expect(
            tail.stdout.contains("    retires LedgerHerald (root) #\(rootInstance >> 32).\(rootInstance & 0xffff_ffff) on \(heraldOwner)"),
            "\(tail.stdout)")
        #expect(tail.stdout.contains("    opens  LedgerHerald (root) #\(newRoot >> 32).\(newRoot & 0xffff_ffff) on \(auditOwner)"), "\(tail.stdout)")
        // The first greetings came from a root a registration reply placed (no
        // record opened it): the record that retired it names it, so tail names
        // their scope too.
        let whole = try runCogd(["tail", "--data", folder.path, "--from", "1"])
        let firstGreeting = whole.stdout.split(separator: "\n").first { $0.contains("ledger.greet") && $0.contains("(worker \(heraldOwner), ") }
        #expect(
            firstGreeting?.contains(
                "(worker \(heraldOwner), scope LedgerHerald (root) #\(rootInstance >> 32).\(rootInstance & 0xffff_ffff), request ") == true,
            "\(whole.stdout)")
    }

    @Test func `a worker stopped by SIGTERM says goodbye: its instances move to the other member at once, not at the heartbeat timeout`() throws {
        defer { folder.cleanUp() }
        // A heartbeat timeout longer than every wait here: whatever moves, the goodbye moved it.
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 300)
        defer { leader.stop() }
        let first = try startHerald("h1")
        defer { first.stop() }
        let second = try startHerald("h2")
        defer { second.stop() }
        // The group's two roots spread, one on each member; h1 is stopped, so its root moves to h2.
        #expect(waitUntil { (try? rootsByWorker())?.mapValues(\.count) == ["h1": 1, "h2": 1] }, "\(String(describing: try? rootsByWorker()))")
        let moving = try #require(try rootsByWorker()["h1"]?.first)
        let staying = moving == "LedgerAudit" ? "LedgerHerald" : "LedgerAudit"

        first.process.terminate()  // SIGTERM
        waitForExit(first.process, timeout: .seconds(10))
        #expect(first.process.terminationStatus == 0, "\(first.lines)")
        #expect(leader.waitForLine { $0.hasSuffix(" INFO  cogd leader: worker h1 left (said goodbye as it stopped); its scope instances retire") } != nil, "\(leader.lines)")
        #expect(waitUntil(timeout: .seconds(20)) { (try? records())?.contains { $0.name == "cogd.workerGone" } == true })
        let gone = try #require(try records().last { $0.name == "cogd.workerGone" })
        let roots = gone.scopeEvents.filter { $0.identity == nil }
        #expect(roots.filter { $0.kind == .retire }.map { "\($0.scope) \($0.worker ?? "")" } == ["\(moving) h1"], "\(gone)")
        #expect(roots.filter { $0.kind == .open }.map { "\($0.scope) \($0.worker ?? "")" } == ["\(moving) h2"], "\(gone)")
        #expect(waitUntil { (try? rootsByWorker()) == ["h2": [moving, staying].sorted()] }, "\(String(describing: try? rootsByWorker()))")
        // The audit now runs on h2: it prints the total of what opens next.
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied"))
        #expect(second.waitForLine { $0.hasSuffix(": ledger total 5") } != nil, "\(second.lines)")
        #expect(!leader.lines.contains { $0.contains("timed out") || $0.contains("silent for") }, "\(leader.lines)")
    }

    @Test func `a root's owner given up for silence: its late requests, stamped with the old root instance, are rejected as retired`() throws {
        defer { folder.cleanUp() }
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 1)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        // A scripted member of the group registers the herald's root first, so it owns it.
        let peer = try RawPeer(endpoint: ports.requests)
        #expect(try peer.exchange(.hello(worker: "r1", lastRevision: 0, group: "ledger-herald"))?.typeName == "welcome")
        let root = ScopeRegistration(worker: "r1", registration: 1, path: "LedgerHerald", source: ScopeRegistration.rootSource, key: nil, form: .bool)
        guard case .scopeRegistered(_, _, _, let members)? = try peer.exchange(.scopeRegister(root)), let old = members.first?.instance else {
            Issue.record("the root was not placed on r1")
            return
        }
        #expect(members.map(\.identity) == [[]], "the root is one member with an empty identity")
        let worker = try startHerald("h2")
        defer { worker.stop() }
        // r1 never heartbeats: past the timeout its root opens on h2, which heralds the next account.
        #expect(waitUntil(timeout: .seconds(20)) { (try? records())?.contains { $0.name == "cogd.workerGone" } == true })
        let gone = try #require(try records().last { $0.name == "cogd.workerGone" })
        #expect(gone.scopeEvents.map { "\($0.kind == .open ? "open" : "retire") \($0.scope) \($0.worker ?? "")" } == ["retire LedgerHerald r1", "open LedgerHerald h2"])
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 5}"#).hasPrefix("applied"))
        #expect(waitUntil { (try? greetings(["bob"]))?["bob"] == 1 })
        // r1 comes back and sends what it had in flight, stamped with its root instance: refused.
        #expect(try peer.exchange(.hello(worker: "r1", lastRevision: 0, group: "ledger-herald"))?.typeName == "welcome")
        guard case .reply(let late)? = try peer.exchange([try RobustnessTests.greetFrame("bob", worker: "r1", sequence: 1, instance: old)]) else {
            Issue.record("no reply")
            return
        }
        #expect(late.outcome == .rejected(code: "retired-scope", detail: "scope instance \(old) is retired or not owned by r1"))
        #expect(try greetings(["alice", "bob"]) == ["alice": 0, "bob": 1], "no effect of the moved root was applied")
    }
}
