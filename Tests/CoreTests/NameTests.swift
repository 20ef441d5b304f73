import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// One process per worker name (`cogwire.md` §6): the connection that said
/// hello holds it; another takes it over only from a holder that is gone —
/// disconnected or silent past the heartbeat timeout — and what the holder
/// registered retires in a `cogd.nameTakenOver` record.
@MainActor
@Suite("Leader core: worker names")
struct NameTests {
    static let welcome = WireMessage.welcome(epoch: 1, lastRevision: 1, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)

    /// Alice open; worker w held by connection "a", registered over the
    /// accounts (alice: instance 1).
    static func heldName() throws -> CoreHarness {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.send("a", Wire.hello("w", 1)) == [welcome])
        #expect(leader.send("a", Wire.registerAccounts("w")).first?.typeName == "scope-registered")
        return leader
    }

    static func nameInUse(heard seconds: String) -> WireError {
        WireError(.nameInUse, "another process is connected as worker w (heard \(seconds) s ago); each worker needs its own --name")
    }

    @Test func `a hello from another connection while the holder is connected is refused name-in-use`() throws {
        let leader = try Self.heldName()
        leader.tick(at: .milliseconds(700))
        leader.now = .milliseconds(1_200)
        #expect(leader.send("b", Wire.hello("w", 1)) == [.error(Self.nameInUse(heard: "1.2"))])
        // The holder was probed with a welcome, harmless to it.
        #expect(leader.ports.probes.map(\.peer) == [peer("a")])
        #expect(leader.ports.probes.first?.message == Self.welcome)
        // The rival's heartbeats and registrations are refused too; the holder keeps everything.
        #expect(leader.send("b", Wire.heartbeat("w", 1)) == [.error(Self.nameInUse(heard: "1.2"))])
        #expect(leader.send("b", Wire.registerAccounts("w", number: 2)) == [.error(Self.nameInUse(heard: "1.2"))])
        #expect(leader.openInstances == [Wire.instance(1)])
        #expect(leader.send("a", Wire.heartbeat("w", 1)) == [Self.welcome])
        #expect(leader.log.lastRevision == 1, "no record")
        #expect(leader.core.errorCounts == ["name-in-use": 3])
    }

    @Test func `a goodbye from the holder drops the name at once, retiring its instances; from any other connection it is refused and changes nothing`() throws {
        let leader = try Self.heldName()
        let notHolder = WireError(
            .nameInUse, "another connection holds worker w; only the connection that said hello as a name may say goodbye for it")
        #expect(leader.send("b", .goodbye(worker: "w")) == [.error(notHolder)])
        #expect(leader.send("b", .goodbye(worker: "nobody")).map(\.typeName) == ["error"])
        #expect(leader.core.errorCounts == ["name-in-use": 1, "hello-first": 1])
        #expect(leader.openInstances == [Wire.instance(1)] && leader.log.lastRevision == 1, "nothing changed")
        #expect(leader.send("a", Wire.heartbeat("w", 1)) == [Self.welcome], "the holder still holds the name")
        #expect(leader.core.takeEvents().filter { if case .saidGoodbye = $0 { true } else { false } }.isEmpty)

        #expect(leader.send("a", .goodbye(worker: "w")).isEmpty, "no answer")
        let record = try #require(leader.log.records.last)
        #expect(record.revision == 2 && record.name == "cogd.workerGone" && record.writes.isEmpty)
        #expect(record.scopeEvents.map(\.kind) == [.retire] && record.scopeEvents.first?.instance == Wire.instance(1))
        #expect(leader.openInstances.isEmpty)
        #expect(leader.core.takeEvents().contains(.saidGoodbye(worker: "w", tool: false)))
        // Its heartbeat after it: gone (said as what happened: a goodbye, not silence), say hello again;
        // the name is free for another connection.
        #expect(
            leader.send("a", Wire.heartbeat("w", 2))
                == [.error(WireError(.gone, "worker w said goodbye; its scope instances are retired — say hello again"))])
        #expect(leader.outcome("a", try Wire.greet("alice", worker: "w", seq: 1)) == rejected(.retiredScope, "worker w is gone (it said goodbye)"))
        #expect(leader.send("b", Wire.hello("w", 2)).first?.typeName == "welcome")
        #expect(leader.log.lastRevision == 2, "taking a free name over retires nothing more")
    }

    @Test func `a hello from another connection takes the name over from a disconnected holder, retiring its instances`() throws {
        let leader = try Self.heldName()
        leader.ports.disconnected.insert(peer("a"))
        #expect(leader.send("b", Wire.hello("w", 1)) == [.welcome(epoch: 1, lastRevision: 2, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)])
        let record = try #require(leader.log.records.last)
        #expect(record.revision == 2 && record.name == "cogd.nameTakenOver")
        #expect(record.origin.isSystem && record.writes.isEmpty)
        #expect(
            record.scopeEvents == [
                ScopeEvent(kind: .retire, instance: Wire.instance(1), scope: "Test.desk", identity: try Wire.identity("alice"), worker: "w", registration: 1)
            ])
        #expect(leader.openInstances.isEmpty)
        // The old connection is the rival now.
        #expect(leader.send("a", Wire.heartbeat("w", 2)) == [.error(Self.nameInUse(heard: "0.0"))])
        #expect(
            leader.outcome("a", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(1)))
                == rejected(.nameInUse, Self.nameInUse(heard: "0.0").message))
        // The new holder's requests run; an old instance is retired for it too.
        #expect(
            leader.outcome("b", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(1)))
                == rejected(.retiredScope, "scope instance 4294967297 is retired or not owned by w"))
        #expect(leader.outcome("b", try Wire.greet("alice", worker: "w", seq: 2)) == .applied(revision: 3))
    }

    @Test func `a hello from another connection takes the name over from a holder silent past the timeout, without probing it`() throws {
        let leader = try Self.heldName()
        leader.advance(to: .seconds(4), step: .seconds(1))
        #expect(leader.log.lastRevision == 1, "not yet gone")
        leader.now = .seconds(5)
        #expect(leader.send("b", Wire.hello("w", 1)).first?.typeName == "welcome")
        #expect(leader.ports.probes.isEmpty)
        #expect(leader.log.records.last?.name == "cogd.nameTakenOver")
        #expect(leader.log.records.last?.scopeEvents.map(\.instance) == [Wire.instance(1)])
        // Held by "b" now: its heartbeats keep it.
        leader.advance(to: .seconds(9), step: .seconds(1))
        #expect(leader.send("b", Wire.heartbeat("w", 2)).first?.typeName == "welcome")
        #expect(leader.log.lastRevision == 2)
    }

    @Test func `an op in a name held by another connection is rejected name-in-use and leaves no dedup entry`() throws {
        let leader = try Self.heldName()
        let greet = try Wire.greet("alice", worker: "w", seq: 1)
        #expect(leader.outcome("b", greet) == rejected(.nameInUse, Self.nameInUse(heard: "0.0").message))
        #expect(leader.log.dedup.isEmpty && leader.log.lastRevision == 1)
        #expect(leader.ports.noted.count == 1, "its body never ran")
        // The holder's own request with that id still runs.
        #expect(leader.outcome("a", greet) == .applied(revision: 2))
        #expect(try leader.greetings("alice") == 1)
        #expect(leader.core.errorCounts == ["name-in-use": 1])
    }

    @Test func `the holder saying hello again keeps its name and its instances`() throws {
        let leader = try Self.heldName()
        #expect(leader.send("a", Wire.hello("w", 1)) == [Self.welcome])
        #expect(leader.openInstances == [Wire.instance(1)])
        #expect(leader.ports.probes.isEmpty)
        #expect(leader.log.lastRevision == 1)
    }

    @Test func `a hello claiming a revision beyond the log is refused revision-ahead`() throws {
        let leader = try Self.heldName()
        #expect(
            leader.send("b", Wire.hello("v", 2)) == [
                .error(WireError(.revisionAhead, "worker v says it holds revision 2, but this leader's log ends at revision 1; sync again from revision 0"))
            ])
        #expect(leader.send("b", Wire.hello("v", 1)).first?.typeName == "welcome")
    }

    @Test func `after a pause, a rival's hello does not take the name from a holder heard just before it`() throws {
        let leader = try Self.heldName()
        leader.tick(at: .milliseconds(500))
        #expect(leader.send("a", Wire.heartbeat("w", 1)) == [Self.welcome])
        // The leader is stopped for 10 s; on its return a rival says hello first.
        leader.now = .milliseconds(10_500)
        let answer = leader.send("b", Wire.hello("w", 1))
        #expect(answer == [.error(Self.nameInUse(heard: "10.0"))])
        #expect(leader.ports.probes.map(\.peer) == [peer("a")], "the holder is probed")
        #expect(leader.openInstances == [Wire.instance(1)], "its instances stay live")
        #expect(leader.log.lastRevision == 1, "no takeover record")

        // The worker gone rule itself honours the pause: the holder is not expired by a tick.
        #expect(leader.tick(at: .milliseconds(10_600)).commits == 0)
    }
}
