import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// Scope instances (`cogwire.md` §6): minted by the leader for each member a
/// registration selects, and opened and retired by the turns that change
/// the selected value — in that turn's own record, retirements first (in
/// opening order), then openings (in collection order).
@MainActor
@Suite("Leader core: scope transitions")
struct ScopeTransitionTests {
    static func id(_ text: String) throws -> [UInt8] { try CBOREncoder().encode(text) }

    static func open(_ n: UInt64, _ identity: [UInt8]?, worker: String = "w", registration: UInt64 = 1, scope: String = "Test.scope") -> ScopeEvent {
        ScopeEvent(kind: .open, instance: Wire.instance(n), scope: scope, identity: identity, worker: worker, registration: registration)
    }

    static func retire(_ n: UInt64, _ identity: [UInt8]?, worker: String = "w", registration: UInt64 = 1, scope: String = "Test.scope") -> ScopeEvent {
        ScopeEvent(kind: .retire, instance: Wire.instance(n), scope: scope, identity: identity, worker: worker, registration: registration)
    }

    /// A leader with worker w said hello on connection "w".
    static func leaderWithWorker() throws -> CoreHarness {
        let leader = try CoreHarness()
        #expect(leader.send("w", Wire.hello("w")).first?.typeName == "welcome")
        return leader
    }

    /// Sets test.members (a batch of its own) and returns the record's scope events.
    static func setMembers(_ leader: CoreHarness, _ members: [String], seq: UInt64) throws -> [ScopeEvent]? {
        guard case .applied(let revision)? = leader.outcome("c", try Wire.test("test.setMembers", members, seq: seq)) else { return nil }
        return leader.log.records[Int(revision) - 1].scopeEvents
    }

    @Test func `a registration returns the members selected now, with their new instances and the revision they belong to`() throws {
        let leader = try Self.leaderWithWorker()
        #expect(try Self.setMembers(leader, ["a", "b"], seq: 1) == [])
        #expect(
            leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each)) == [
                .scopeRegistered(
                    worker: "w", registration: 1, revision: 1,
                    instances: [ScopeMember(identity: try Self.id("a"), instance: Wire.instance(1)), ScopeMember(identity: try Self.id("b"), instance: Wire.instance(2))])
            ])
        // A source never written selects nothing.
        #expect(leader.send("w", Wire.register("w", number: 2, source: "test.chosen", form: .optional)) == [.scopeRegistered(worker: "w", registration: 2, revision: 1, instances: [])])
        #expect(leader.openInstances == [Wire.instance(1), Wire.instance(2)])
        #expect(leader.log.lastRevision == 1, "a registration writes no record")
    }

    @Test func `each: a turn that adds and removes members opens and retires instances in its own record, retirements first`() throws {
        let leader = try Self.leaderWithWorker()
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each))
        #expect(try Self.setMembers(leader, ["a", "b", "c"], seq: 1) == [Self.open(1, try Self.id("a")), Self.open(2, try Self.id("b")), Self.open(3, try Self.id("c"))])
        #expect(try Self.setMembers(leader, ["c", "e", "d", "a"], seq: 2) == [Self.retire(2, try Self.id("b")), Self.open(4, try Self.id("e")), Self.open(5, try Self.id("d"))])
        // Retirements in opening order (not collection order), then openings in collection order.
        #expect(
            try Self.setMembers(leader, ["f"], seq: 3) == [
                Self.retire(1, try Self.id("a")), Self.retire(3, try Self.id("c")), Self.retire(4, try Self.id("e")), Self.retire(5, try Self.id("d")),
                Self.open(6, try Self.id("f")),
            ])
        // A member that left and comes back in a later turn gets a new instance.
        #expect(try Self.setMembers(leader, ["f", "b"], seq: 4) == [Self.open(7, try Self.id("b"))])
        #expect(leader.openInstances == [Wire.instance(6), Wire.instance(7)])
    }

    @Test func `a value that only changes inside one turn changes nothing`() throws {
        let leader = try Self.leaderWithWorker()
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each))
        #expect(try Self.setMembers(leader, ["a", "b"], seq: 1)?.count == 2)
        let outcome = leader.outcome("c", try Wire.test("test.setMembersInSteps", [["a"], [], ["b", "a"], ["a", "b"]], seq: 2))
        #expect(outcome == .unchanged)
        #expect(leader.log.lastRevision == 1)
        #expect(leader.openInstances == [Wire.instance(1), Wire.instance(2)])
        // Changed in steps to another value: only the settled value counts.
        guard case .applied(let revision)? = leader.outcome("c", try Wire.test("test.setMembersInSteps", [[], ["c"], ["b", "c"]], seq: 3)) else {
            Issue.record("not applied")
            return
        }
        #expect(leader.log.records[Int(revision) - 1].scopeEvents == [Self.retire(1, try Self.id("a")), Self.open(3, try Self.id("c"))])
    }

    @Test func `bool: true is one member with no identity, false none`() throws {
        let leader = try Self.leaderWithWorker()
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.flag", form: .bool))
        func events(_ value: Bool, seq: UInt64) throws -> [ScopeEvent]? {
            guard case .applied(let revision)? = leader.outcome("c", try Wire.test("test.setFlag", value, seq: seq)) else { return nil }
            return leader.log.records[Int(revision) - 1].scopeEvents
        }
        #expect(try events(true, seq: 1) == [Self.open(1, nil)])
        #expect(try events(false, seq: 2) == [Self.retire(1, nil)])
        #expect(try events(true, seq: 3) == [Self.open(2, nil)])
        #expect(leader.send("w", Wire.register("w", number: 2, source: "test.flag", form: .bool)) == [.scopeRegistered(worker: "w", registration: 2, revision: 3, instances: [ScopeMember(identity: [], instance: Wire.instance(3))])])
    }

    @Test func `optional: one member unless nil, and another value is another member`() throws {
        let leader = try Self.leaderWithWorker()
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.chosen", form: .optional))
        func events(_ value: String?, seq: UInt64) throws -> [ScopeEvent]? {
            guard case .applied(let revision)? = leader.outcome("c", try Wire.test("test.choose", value, seq: seq)) else { return nil }
            return leader.log.records[Int(revision) - 1].scopeEvents
        }
        #expect(try events("x", seq: 1) == [Self.open(1, try Self.id("x"))])
        #expect(try events("y", seq: 2) == [Self.retire(1, try Self.id("x")), Self.open(2, try Self.id("y"))])
        #expect(try events(nil, seq: 3) == [Self.retire(2, try Self.id("y"))])
        #expect(leader.openInstances.isEmpty)
    }

    @Test func `registrations of two workers over one source each get their own instances, named in the events`() throws {
        let leader = try Self.leaderWithWorker()
        #expect(leader.send("v", Wire.hello("v")).first?.typeName == "welcome")
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each))
        _ = leader.send("v", Wire.register("v", number: 5, source: "test.members", form: .each, path: "Other.scope"))
        // Arrivals open in the order of the registrations' keys (worker, then number).
        #expect(
            try Self.setMembers(leader, ["a"], seq: 1) == [
                Self.open(1, try Self.id("a"), worker: "v", registration: 5, scope: "Other.scope"), Self.open(2, try Self.id("a")),
            ])
        // Each worker's requests may use only its own.
        #expect(leader.outcome("v", try Wire.test("test.setFlag", true, worker: "v", seq: 1).withInstance(Wire.instance(2))) == rejected(.retiredScope, "scope instance 4294967298 is retired or not owned by v"))
        #expect(leader.outcome("v", try Wire.test("test.setFlag", true, worker: "v", seq: 2).withInstance(Wire.instance(1))) == .applied(revision: 2))
    }

    @Test func `a nested registration's instances retire with their parent's, in the same record, and under a dead parent it selects nothing`() throws {
        let leader = try Self.leaderWithWorker()
        #expect(try Self.setMembers(leader, ["a", "b"], seq: 1) == [])
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each, path: "Desk"))  // a: 1, b: 2
        // Peers inside a's desk and inside b's desk.
        #expect(
            leader.send("w", Wire.register("w", number: 2, source: "test.members", form: .each, parent: Wire.instance(1), path: "Desk.peer"))
                == [.scopeRegistered(worker: "w", registration: 2, revision: 1, instances: [ScopeMember(identity: try Self.id("a"), instance: Wire.instance(3)), ScopeMember(identity: try Self.id("b"), instance: Wire.instance(4))])])
        _ = leader.send("w", Wire.register("w", number: 3, source: "test.members", form: .each, parent: Wire.instance(2), path: "Desk.peer"))  // 5, 6
        // a leaves: its desk and every peer in it retire; b's desk loses its peer a.
        #expect(
            try Self.setMembers(leader, ["b", "c"], seq: 2) == [
                Self.retire(1, try Self.id("a"), scope: "Desk"),
                Self.retire(3, try Self.id("a"), registration: 2, scope: "Desk.peer"),
                Self.retire(4, try Self.id("b"), registration: 2, scope: "Desk.peer"),
                Self.retire(5, try Self.id("a"), registration: 3, scope: "Desk.peer"),
                Self.open(7, try Self.id("c"), scope: "Desk"),
                Self.open(8, try Self.id("c"), registration: 3, scope: "Desk.peer"),
            ])
        #expect(leader.openInstances == [2, 6, 7, 8].map { Wire.instance($0) })
        // Registered under the retired desk: nothing, and not kept.
        #expect(
            leader.send("w", Wire.register("w", number: 4, source: "test.members", form: .each, parent: Wire.instance(1), path: "Desk.peer"))
                == [.scopeRegistered(worker: "w", registration: 4, revision: 2, instances: [])])
        #expect(try Self.setMembers(leader, ["b", "c", "d"], seq: 3)?.contains { $0.registration == 4 } == false)
        // Under another worker's instance: nothing either.
        #expect(leader.send("v", Wire.hello("v")).first?.typeName == "welcome")
        #expect(
            leader.send("v", Wire.register("v", number: 1, source: "test.members", form: .each, parent: Wire.instance(2)))
                == [.scopeRegistered(worker: "v", registration: 1, revision: 3, instances: [])])
    }

    @Test func `a registration number sent again replaces the registration in a scopeReregistered record`() throws {
        let leader = try Self.leaderWithWorker()
        #expect(try Self.setMembers(leader, ["a", "b"], seq: 1) == [])
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each))  // 1, 2
        _ = leader.send("w", Wire.register("w", number: 2, source: "test.members", form: .each, parent: Wire.instance(2), path: "Test.nested"))  // 3, 4
        #expect(
            leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each)) == [
                .scopeRegistered(
                    worker: "w", registration: 1, revision: 2,
                    instances: [ScopeMember(identity: try Self.id("a"), instance: Wire.instance(5)), ScopeMember(identity: try Self.id("b"), instance: Wire.instance(6))])
            ])
        let record = try #require(leader.log.records.last)
        #expect(record.revision == 2 && record.name == "cogd.scopeReregistered" && record.origin.isSystem && record.writes.isEmpty)
        #expect(
            record.scopeEvents == [
                Self.retire(1, try Self.id("a")), Self.retire(2, try Self.id("b")),
                Self.retire(3, try Self.id("a"), registration: 2, scope: "Test.nested"), Self.retire(4, try Self.id("b"), registration: 2, scope: "Test.nested"),
            ])
        #expect(leader.openInstances == [Wire.instance(5), Wire.instance(6)])
        #expect(leader.outcome("w", try Wire.test("test.setFlag", true, worker: "w", seq: 1).withInstance(Wire.instance(1))) == rejected(.retiredScope, "scope instance 4294967297 is retired or not owned by w"))
        #expect(leader.outcome("w", try Wire.test("test.setFlag", true, worker: "w", seq: 2).withInstance(Wire.instance(5))) == .applied(revision: 3))
    }

    @Test func `a worker holds at most 4,096 registrations, and may send one it holds again`() throws {
        let leader = try Self.leaderWithWorker()
        var registrations: [(String, WireMessage)] = []
        for number in 1...4_096 as ClosedRange<UInt64> {
            registrations.append(("w", Wire.register("w", number: number, source: "test.chosen", form: .optional)))
        }
        #expect(leader.batch(registrations)["w"].count == 4_096)
        #expect(
            leader.send("w", Wire.register("w", number: 4_097, source: "test.chosen", form: .optional))
                == [.error(WireError(.tooManyRegistrations, "worker w holds 4096 scope registrations, the most a worker may"))])
        #expect(leader.send("w", Wire.register("w", number: 17, source: "test.chosen", form: .optional)) == [.scopeRegistered(worker: "w", registration: 17, revision: 0, instances: [])])
        // Another worker is not limited by w's.
        #expect(leader.send("v", Wire.hello("v")).first?.typeName == "welcome")
        #expect(leader.send("v", Wire.register("v", number: 1, source: "test.chosen", form: .optional)).first?.typeName == "scope-registered")
        #expect(leader.core.errorCounts == ["too-many-registrations": 1])
    }

    @Test func `a registration answered in a batch whose commit fails is asked again, and its instances are given up`() throws {
        let leader = try Self.leaderWithWorker()
        #expect(try Self.setMembers(leader, ["a"], seq: 1) == [])
        leader.log.failingCommits = 1
        let sent = leader.batch([
            ("c", try Wire.test("test.setMembers", ["a", "b"], seq: 2)),
            ("w", Wire.register("w", number: 1, source: "test.members", form: .each)),
        ])
        #expect(sent.errors("w") == [WireError(.registerAgain, "the commit failed: disk full (0 bytes free in /data); register the scopes again")])
        #expect(leader.openInstances.isEmpty)
        #expect(leader.core.errorCounts == ["commit-failed": 1, "register-again": 1, "unavailable": 1])
        // Registered again: as of what is committed.
        #expect(leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each)) == [.scopeRegistered(worker: "w", registration: 1, revision: 1, instances: [ScopeMember(identity: try Self.id("a"), instance: Wire.instance(1))])])
    }

    @Test func `a selector over an automatic cog is evaluated by the leader after each turn`() throws {
        let leader = try Self.leaderWithWorker()
        #expect(leader.outcome("c", try Wire.open("alice", 50, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.outcome("c", try Wire.open("bob", 150, worker: "c", seq: 2)) == .applied(revision: 2))
        #expect(
            leader.send("w", Wire.register("w", number: 1, source: "ledger.wealthy", form: .each, path: "Concierge"))
                == [.scopeRegistered(worker: "w", registration: 1, revision: 2, instances: [ScopeMember(identity: try Self.id("bob"), instance: Wire.instance(1))])])
        _ = leader.send("w", Wire.register("w", number: 2, source: "ledger.isWealthy", form: .bool, key: try Self.id("alice"), path: "Rich"))
        // The transfer writes balances only: the leader recomputes `ledger.wealthy`.
        #expect(leader.outcome("c", try Wire.transfer("bob", "alice", 60, worker: "c", seq: 3)) == .applied(revision: 3))
        #expect(
            leader.log.records[2].scopeEvents == [
                Self.retire(1, try Self.id("bob"), scope: "Concierge"),
                Self.open(2, try Self.id("alice"), scope: "Concierge"),
                Self.open(3, nil, registration: 2, scope: "Rich"),
            ])
    }

    // MARK: Openings no record holds (`turnlog.md` §2c)

    @Test func `a registration's instances are kept with the next commit, before any turn from them, and adds no record`() throws {
        let leader = try Self.leaderWithWorker()
        #expect(try Self.setMembers(leader, ["a", "b"], seq: 1) == [])
        let commitsBefore = leader.commits.count
        _ = leader.send("w", Wire.register("w", number: 1, source: "test.members", form: .each))
        _ = leader.send("w", Wire.register("w", number: 2, source: ScopeRegistration.rootSource, form: .bool, path: "Journal"))
        #expect(leader.commits.count == commitsBefore, "registrations alone commit nothing")
        // The next commit (a turn's) holds them, in registration order; its record holds what it opened.
        #expect(try Self.setMembers(leader, ["a", "b", "c"], seq: 2) == [Self.open(4, try Self.id("c"))])
        #expect(leader.commits.count == commitsBefore + 1)
        #expect(leader.commits.last?.openings == [Self.open(1, try Self.id("a")), Self.open(2, try Self.id("b")), Self.open(3, nil, registration: 2, scope: "Journal")])
        // The one after keeps none.
        _ = try Self.setMembers(leader, ["a"], seq: 3)
        #expect(leader.commits.last?.openings == [])
        #expect(leader.log.lastRevision == 3, "the log holds the three turns only")
    }

    @Test func `kept openings make a commit of their own past 1,024, and a failed commit keeps them for the next`() throws {
        let leader = try Self.leaderWithWorker()
        func root(_ number: UInt64) -> WireMessage {
            Wire.register("w", number: number, source: ScopeRegistration.rootSource, form: .bool, path: "Root\(number)")
        }
        let commitsBefore = leader.commits.count
        for number: UInt64 in 1...1_023 { _ = leader.send("w", root(number)) }
        #expect(leader.commits.count == commitsBefore)
        // The 1,024th fails to commit: nothing is lost, the next registration commits them all.
        leader.log.failingCommits = 1
        let failed = leader.send("w", root(1_024))
        #expect(failed == [.error(WireError(.registerAgain, "the commit failed: disk full (0 bytes free in /data); register the scopes again"))])
        #expect(leader.commits.count == commitsBefore + 1)
        _ = leader.send("w", root(1_024))
        #expect(leader.commits.count == commitsBefore + 2)
        let openings = try #require(leader.commits.last?.openings)
        // 1,023 kept, the failed batch's own (re-minted as the same number), then the retry's.
        #expect(openings.count == 1_025)
        #expect(openings.map(\.scope).suffix(2) == ["Root1024", "Root1024"])
        #expect(openings.last?.instance == Wire.instance(1_024))
        #expect(leader.commits.last?.drafts.isEmpty == true && leader.log.lastRevision == 0)
    }
}

extension WireMessage {
    /// The same op request, stamped with `instance`.
    func withInstance(_ instance: UInt64) -> WireMessage {
        guard case .op(var request) = self else { return self }
        request.instance = instance
        return .op(request)
    }
}
