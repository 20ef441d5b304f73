import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Testing

/// Worker groups in the leader core (`cogwire.md` §6a): a top-level
/// selector registered by a group's workers is one registration, each
/// member placed on one live worker, moved with fencing when one goes or
/// joins.
@MainActor
@Suite("Leader core: worker groups place each instance on one member")
struct GroupPlacementTests {
    static func id(_ text: String) throws -> [UInt8] { try CBOREncoder().encode(text) }

    static func event(_ kind: ScopeEvent.Kind, _ n: UInt64, _ member: String, _ worker: String, _ registration: UInt64) throws -> ScopeEvent {
        ScopeEvent(kind: kind, instance: Wire.instance(n), scope: "Test.scope", identity: try id(member), worker: worker, registration: registration)
    }

    /// Sets test.members (a batch of its own) and returns the record's scope events.
    static func setMembers(_ leader: CoreHarness, _ members: [String], seq: UInt64) throws -> [ScopeEvent]? {
        guard case .applied(let revision)? = leader.outcome("c", try Wire.test("test.setMembers", members, seq: seq)) else { return nil }
        return leader.log.records[Int(revision) - 1].scopeEvents
    }

    static func grouped(_ worker: String) -> WireMessage { .hello(worker: worker, lastRevision: 0, group: "g") }

    @Test func `two members of a group share a selector: each member on one worker, balanced by count, moves recorded`() throws {
        let leader = try CoreHarness(placesGroups: true)
        #expect(try Self.setMembers(leader, ["a", "b", "c", "d"], seq: 1) == [])
        guard case .welcome(_, _, _, _, let group)? = leader.send("w1", Self.grouped("w1")).first else {
            Issue.record("w1 welcomed")
            return
        }
        #expect(group == "g", "the welcome says the leader places this worker's scopes in group g")
        let first = leader.send("w1", Wire.register("w1", number: 1, source: "test.members", form: .each))
        #expect(first == [.scopeRegistered(worker: "w1", registration: 1, revision: 1, instances: try ["a", "b", "c", "d"].enumerated().map {
            ScopeMember(identity: try Self.id($0.element), instance: Wire.instance(UInt64($0.offset + 1)))
        })])

        // w2 joins with its own number (5): the newest members of w1 move to it until 2 and 2.
        #expect(leader.send("w2", Self.grouped("w2")).first?.typeName == "welcome")
        let second = leader.send("w2", Wire.register("w2", number: 5, source: "test.members", form: .each))
        #expect(second == [.scopeRegistered(worker: "w2", registration: 5, revision: 2, instances: [
            ScopeMember(identity: try Self.id("c"), instance: Wire.instance(6)), ScopeMember(identity: try Self.id("d"), instance: Wire.instance(5)),
        ])])
        let moved = try #require(leader.log.records.last)
        #expect(moved.name == LeaderCore.scopesMovedTurn)
        #expect(moved.scopeEvents == [
            try Self.event(.retire, 3, "c", "w1", 1), try Self.event(.retire, 4, "d", "w1", 1),
            try Self.event(.open, 5, "d", "w2", 5), try Self.event(.open, 6, "c", "w2", 5),
        ])
        #expect(leader.openInstances == [1, 2, 5, 6].map { Wire.instance(UInt64($0)) })

        // A new member goes to the least loaded (a tie: the earliest to subscribe).
        #expect(try Self.setMembers(leader, ["a", "b", "c", "d", "e"], seq: 2) == [try Self.event(.open, 7, "e", "w1", 1)])
        // A departure retires on its owner.
        #expect(try Self.setMembers(leader, ["a", "b", "c", "e"], seq: 3) == [try Self.event(.retire, 5, "d", "w2", 5)])

        // The owner's op is admitted; another member's op on that instance is retired-scope.
        #expect(leader.outcome("w2", try Wire.greet("x", worker: "w2", seq: 1, instance: Wire.instance(6))) != nil)
        #expect(leader.outcome("w1", try Wire.greet("x", worker: "w1", seq: 1, instance: Wire.instance(6)))?.rejection?.code == .retiredScope)
    }

    @Test func `when a member goes silent its instances retire and open on the others, in the workerGone record`() throws {
        let leader = try CoreHarness(heartbeatTimeout: .seconds(5), placesGroups: true)
        _ = try Self.setMembers(leader, ["a", "b", "c"], seq: 1)
        _ = leader.send("w1", Self.grouped("w1"))
        _ = leader.send("w1", Wire.register("w1", number: 1, source: "test.members", form: .each))
        _ = leader.send("w2", Self.grouped("w2"))
        _ = leader.send("w2", Wire.register("w2", number: 2, source: "test.members", form: .each))
        // w1: a, b (1, 2); w2: c (moved: 4).
        #expect(leader.openInstances == [1, 2, 4].map { Wire.instance(UInt64($0)) })
        // w2 heartbeats every second; w1 says nothing past the 5 s timeout.
        for second in 1...6 {
            leader.now = .seconds(second)
            _ = leader.send("w2", Wire.heartbeat("w2"))
            _ = leader.tick(at: .seconds(second))
        }
        let gone = try #require(leader.log.records.last)
        #expect(gone.name == LeaderCore.workerGoneTurn)
        #expect(gone.scopeEvents == [
            try Self.event(.retire, 1, "a", "w1", 1), try Self.event(.retire, 2, "b", "w1", 1),
            try Self.event(.open, 5, "a", "w2", 2), try Self.event(.open, 6, "b", "w2", 2),
        ])
        #expect(leader.openInstances == [4, 5, 6].map { Wire.instance(UInt64($0)) })
        // The last member gone: the group's registration goes with it.
        for second in 7...13 { _ = leader.tick(at: .seconds(second)) }
        #expect(leader.openInstances == [])
    }

    @Test func `a group with a control character (C0, DEL or C1), or empty, is malformed; format characters are not control characters`() throws {
        let leader = try CoreHarness(placesGroups: true)
        for group in ["", "g\u{1}x", "tab\there", "del\u{7F}", "csi\u{9B}2J", "c1\u{80}", "c1\u{9F}"] {
            let refusal = leader.error("w", .hello(worker: "w", lastRevision: 0, group: group))
            #expect(refusal?.code == "malformed", "\(group.unicodeScalars.map(\.value))")
            #expect(refusal?.message == "a group is 1 to 255 bytes of UTF-8 with no control characters")
        }
        #expect(leader.send("w", Self.grouped("w")).first?.typeName == "welcome")
        // Format characters and separators (cogwire §6a) are admitted: the group is echoed as sent.
        for (index, group) in ["ltr\u{200E}mark", "line\u{2028}sep", "\u{A0}nbsp"].enumerated() {
            guard case .welcome(_, _, _, _, let echoed)? = leader.send("f\(index)", .hello(worker: "f\(index)", lastRevision: 0, group: group)).first else {
                Issue.record("no welcome for \(group.unicodeScalars.map(\.value))")
                continue
            }
            #expect(echoed == group)
        }
    }

    @Test func `without group placement a group is ignored: each worker's registration is its own, as before`() throws {
        let leader = try CoreHarness()
        _ = try Self.setMembers(leader, ["a"], seq: 1)
        guard case .welcome(_, _, _, _, let group)? = leader.send("w1", Self.grouped("w1")).first else { return }
        #expect(group == nil)
        _ = leader.send("w2", Self.grouped("w2"))
        #expect(leader.send("w1", Wire.register("w1", number: 1, source: "test.members", form: .each)).count == 1)
        #expect(leader.send("w2", Wire.register("w2", number: 1, source: "test.members", form: .each)) == [
            .scopeRegistered(worker: "w2", registration: 1, revision: 1, instances: [ScopeMember(identity: try Self.id("a"), instance: Wire.instance(2))])
        ])
        #expect(leader.log.lastRevision == 1, "nothing moved")
    }

    static func root(_ worker: String, number: UInt64) -> WireMessage {
        .scopeRegister(ScopeRegistration(worker: worker, registration: number, path: "Herald", source: ScopeRegistration.rootSource, key: nil, form: .bool))
    }

    static func root(_ worker: String, number: UInt64, mechanism: String) -> WireMessage {
        .scopeRegister(ScopeRegistration(worker: worker, registration: number, path: mechanism, source: ScopeRegistration.rootSource, key: nil, form: .bool))
    }

    static func rootEvent(_ kind: ScopeEvent.Kind, _ n: UInt64, _ worker: String, _ registration: UInt64) -> ScopeEvent {
        ScopeEvent(kind: kind, instance: Wire.instance(n), scope: "Herald", identity: nil, worker: worker, registration: registration)
    }

    @Test func `a mechanism's root is one member placed on one worker: a join leaves it, a silent owner's root opens on a survivor, the old owner's root requests are retired`() throws {
        let leader = try CoreHarness(heartbeatTimeout: .seconds(5), placesGroups: true)
        _ = leader.send("w1", Self.grouped("w1"))
        // Selected whatever the state table holds (no source `cogd.root` exists): one member, identity empty.
        #expect(leader.send("w1", Self.root("w1", number: 1)) == [
            .scopeRegistered(worker: "w1", registration: 1, revision: 0, instances: [ScopeMember(identity: [], instance: Wire.instance(1))])
        ])
        _ = leader.send("w2", Self.grouped("w2"))
        #expect(leader.send("w2", Self.root("w2", number: 3)) == [.scopeRegistered(worker: "w2", registration: 3, revision: 0, instances: [])])
        #expect(leader.log.lastRevision == 0, "a join moves no root (its owner holds 1, the newcomer 0)")
        #expect(leader.outcome("w1", try Wire.greet("x", worker: "w1", seq: 1, instance: Wire.instance(1)))?.rejection == nil, "the owner's root request is admitted")
        #expect(leader.outcome("w2", try Wire.greet("x", worker: "w2", seq: 1, instance: Wire.instance(1)))?.rejection?.code == .retiredScope)
        let before = leader.log.lastRevision
        for second in 1...6 {
            leader.now = .seconds(second)
            _ = leader.send("w2", Wire.heartbeat("w2"))
            _ = leader.tick(at: .seconds(second))
        }
        let gone = try #require(leader.log.records.last)
        #expect(gone.revision == before + 1 && gone.name == LeaderCore.workerGoneTurn)
        #expect(gone.scopeEvents == [Self.rootEvent(.retire, 1, "w1", 1), Self.rootEvent(.open, 2, "w2", 3)])
        #expect(leader.openInstances == [Wire.instance(2)])
        // w1 comes back: its late request on the old root is refused; the root stays on w2.
        #expect(leader.send("w1", Self.grouped("w1")).first?.typeName == "welcome")
        #expect(leader.outcome("w1", try Wire.greet("x", worker: "w1", seq: 2, instance: Wire.instance(1)))?.rejection?.code == .retiredScope)
        #expect(leader.send("w1", Self.root("w1", number: 1)) == [.scopeRegistered(worker: "w1", registration: 1, revision: gone.revision, instances: [])])
        #expect(leader.openInstances == [Wire.instance(2)])
    }

    @Test func `roots spread by count of the group's roots: a join takes one from a member holding two more, a dropped owner's go to the fewest`() throws {
        let leader = try CoreHarness(heartbeatTimeout: .seconds(5), placesGroups: true)
        let mechanisms = ["Audit", "Herald", "Timer"]
        _ = leader.send("w1", Self.grouped("w1"))
        for (index, mechanism) in mechanisms.enumerated() {
            #expect(leader.send("w1", Self.root("w1", number: UInt64(index + 1), mechanism: mechanism)).first?.typeName == "scope-registered")
        }
        #expect(leader.openInstances.count == 3 && leader.log.lastRevision == 0, "all three on w1, the only member")
        // w2 joins: Audit moves (w1 holds 3, w2 0); then w1 holds 2, w2 1, and nothing more moves.
        _ = leader.send("w2", Self.grouped("w2"))
        for (index, mechanism) in mechanisms.enumerated() {
            _ = leader.send("w2", Self.root("w2", number: UInt64(10 + index), mechanism: mechanism))
        }
        let moved = leader.log.records.filter { $0.name == LeaderCore.scopesMovedTurn }.flatMap(\.scopeEvents)
        #expect(moved.map { "\($0.kind == .open ? "open" : "retire") \($0.scope) \($0.worker ?? "")" } == ["retire Audit w1", "open Audit w2"])
        #expect(leader.rootsByWorker == ["w1": ["Herald", "Timer"], "w2": ["Audit"]])
        // w3 joins: one root from w1 (2 against 0); then every member holds one.
        _ = leader.send("w3", Self.grouped("w3"))
        for (index, mechanism) in mechanisms.enumerated() {
            _ = leader.send("w3", Self.root("w3", number: UInt64(20 + index), mechanism: mechanism))
        }
        #expect(leader.rootsByWorker == ["w1": ["Timer"], "w2": ["Audit"], "w3": ["Herald"]])
        // w1 falls silent: its root goes to the member holding fewest (a tie: the earliest to subscribe, w2).
        for second in 1...6 {
            leader.now = .seconds(second)
            _ = leader.send("w2", Wire.heartbeat("w2"))
            _ = leader.send("w3", Wire.heartbeat("w3"))
            _ = leader.tick(at: .seconds(second))
        }
        #expect(leader.log.records.last?.name == LeaderCore.workerGoneTurn)
        #expect(leader.rootsByWorker == ["w2": ["Audit", "Timer"], "w3": ["Herald"]])
        #expect(leader.openInstances.count == 3, "one instance per root, never two")
    }
}
