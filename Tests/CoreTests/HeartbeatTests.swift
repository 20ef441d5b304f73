import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// Heartbeats and expiry (`cogwire.md` §6): a worker silent past the
/// timeout is gone — its instances retire in a `cogd.workerGone` record,
/// its heartbeats are answered `gone` and its requests `retired-scope`
/// until it says hello again — and silence is measured from the later of
/// its last message and the leader's return from a pause.
@MainActor
@Suite("Leader core: heartbeats and expiry")
struct HeartbeatTests {
    /// Alice and bob open; worker w (connection "w") heard at 0 and
    /// registered over the accounts: instances 1 (alice) and 2 (bob).
    static func registeredWorker() throws -> CoreHarness {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.outcome("c", try Wire.open("bob", 0, worker: "c", seq: 2)) == .applied(revision: 2))
        #expect(leader.send("w", Wire.hello("w", 2)).first?.typeName == "welcome")
        #expect(leader.send("w", Wire.registerAccounts("w")).first?.typeName == "scope-registered")
        return leader
    }

    @Test func `a worker heard within the timeout is kept; silent past it, it is gone in a record of its own`() throws {
        let leader = try Self.registeredWorker()
        #expect(leader.advance(to: .milliseconds(4_900), step: .milliseconds(700)).commits == 0)
        #expect(leader.openInstances == [Wire.instance(1), Wire.instance(2)])
        let sent = leader.tick(at: .seconds(5))
        #expect(sent.commits == 1 && sent.published == [3..<4])
        let record = try #require(leader.log.records.last)
        #expect(record.revision == 3 && record.name == "cogd.workerGone")
        #expect(record.origin.isSystem && record.writes.isEmpty)
        #expect(
            record.scopeEvents == [
                ScopeEvent(kind: .retire, instance: Wire.instance(1), scope: "Test.desk", identity: try Wire.identity("alice"), worker: "w", registration: 1),
                ScopeEvent(kind: .retire, instance: Wire.instance(2), scope: "Test.desk", identity: try Wire.identity("bob"), worker: "w", registration: 1),
            ])
        #expect(leader.openInstances.isEmpty)
        #expect(leader.core.status(now: leader.now).workers.isEmpty)
        // Later ticks write nothing more.
        #expect(leader.advance(to: .seconds(12)).commits == 0)
    }

    @Test func `heartbeats keep a worker, and report its revision`() throws {
        let leader = try Self.registeredWorker()
        for second in 1...20 {
            leader.tick(at: .seconds(second))
            if second % 3 == 0 {
                #expect(
                    leader.send("w", Wire.heartbeat("w", 2))
                        == [.welcome(epoch: 1, lastRevision: 2, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)])
            }
        }
        #expect(leader.log.lastRevision == 2)
        let status = leader.core.status(now: leader.now)
        #expect(status.workers.map(\.name) == ["w"] && status.workers[0].appliedRevision == 2 && status.workers[0].lag == 0)
        #expect(status.workers[0].secondsSinceHeard == 2)
    }

    @Test func `a gone worker's heartbeats are answered gone and its requests retired-scope until it says hello again`() throws {
        let leader = try Self.registeredWorker()
        leader.advance(to: .seconds(6))
        #expect(leader.log.records.last?.name == "cogd.workerGone")
        let gone = WireError(.gone, "worker w was silent past the heartbeat timeout; its scope instances are retired — say hello again")
        #expect(leader.send("w", Wire.heartbeat("w", 3)) == [.error(gone)])
        #expect(leader.send("w", Wire.heartbeat("w", 3)) == [.error(gone)], "at each heartbeat")
        let goneReason = rejected(.retiredScope, "worker w is gone (it was silent past the heartbeat timeout)")
        #expect(leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(1))) == goneReason)
        #expect(leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 2)) == goneReason, "its own requests too")
        #expect(
            leader.send("w", Wire.registerAccounts("w")) == [
                .error(WireError(.helloFirst, "`scope-register` needs a worker that said hello on this connection (worker w has not); say hello first"))
            ])
        #expect(leader.log.lastRevision == 3)
        #expect(leader.core.errorCounts == ["gone": 2, "retired-scope": 2, "hello-first": 1])

        // Hello again: served, with new instances once registered again.
        #expect(
            leader.send("w", Wire.hello("w", 3)) == [.welcome(epoch: 1, lastRevision: 3, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 2)])
        #expect(leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 3, instance: Wire.instance(1))) == rejected(.retiredScope, "scope instance 4294967297 is retired or not owned by w"))
        guard case .scopeRegistered(_, _, _, let members)? = leader.send("w", Wire.registerAccounts("w")).first else {
            Issue.record("no registration reply")
            return
        }
        #expect(members.map(\.instance) == [Wire.instance(3), Wire.instance(4)])
        #expect(leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 4, instance: Wire.instance(3))) == .applied(revision: 4))
    }

    @Test func `a gap between steps over one second is a pause: workers heard just before it get a whole timeout from the return`() throws {
        let leader = try Self.registeredWorker()
        leader.tick(at: .milliseconds(900))
        // Stopped for 20 s: the first tick after it expires no one.
        #expect(leader.tick(at: .seconds(21)).commits == 0)
        #expect(leader.advance(to: .milliseconds(25_900), step: .milliseconds(500)).commits == 0)
        #expect(leader.openInstances == [Wire.instance(1), Wire.instance(2)])
        // Still silent a whole timeout after the return: gone.
        #expect(leader.tick(at: .seconds(26)).commits == 1)
        #expect(leader.log.records.last?.name == "cogd.workerGone")
    }

    @Test func `a gap of exactly one second is not a pause`() throws {
        let leader = try Self.registeredWorker()
        for second in 1...4 { #expect(leader.tick(at: .seconds(second)).commits == 0) }
        #expect(leader.tick(at: .seconds(5)).commits == 1)
    }

    @Test func `a message after a pause counts as the return too`() throws {
        let leader = try Self.registeredWorker()
        // Another worker's hello is the first step after 8 s of nothing.
        leader.now = .seconds(8)
        #expect(leader.send("v", Wire.hello("v", 2)).first?.typeName == "welcome")
        #expect(leader.advance(to: .milliseconds(12_900)).commits == 0, "w has a whole timeout from 8 s")
        #expect(leader.tick(at: .seconds(13)).commits == 1)
        #expect(leader.log.records.last?.scopeEvents.allSatisfy { $0.worker == "w" } == true)
    }

    @Test func `a failed commit of a worker-gone record still ends the worker's instances`() throws {
        let leader = try Self.registeredWorker()
        leader.log.failingCommits = 1
        leader.advance(to: .seconds(5))
        #expect(leader.log.lastRevision == 2, "the record was not committed")
        #expect(leader.core.errorCounts["commit-failed"] == 1)
        // Serving goes on; the worker comes back.
        leader.advance(to: .seconds(7))
        #expect(leader.send("w", Wire.hello("w", 2)).first?.typeName == "welcome")
        let stale = leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(1)))
        #expect(stale == rejected(.retiredScope, "scope instance 4294967297 is retired or not owned by w"))
        #expect(leader.openInstances.isEmpty)
        #expect(leader.log.records.contains { $0.name == "cogd.workerGone" && $0.scopeEvents.map(\.instance) == [Wire.instance(1), Wire.instance(2)] })

    }

    @Test func `a failed commit of a name takeover still ends the old holder's instances`() throws {
        let leader = try Self.registeredWorker()
        leader.ports.disconnected.insert(peer("w"))
        leader.log.failingCommits = 1
        let sent = leader.batch([("w2", Wire.hello("w", 2))])
        #expect(sent.failedCommits == 1)
        #expect(sent["w2"] == [.welcome(epoch: 1, lastRevision: 2, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)], "welcomed as of what is committed")
        #expect(leader.log.lastRevision == 2)
        let stale = leader.outcome("w2", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(1)))
        #expect(stale == rejected(.retiredScope, "scope instance 4294967297 is retired or not owned by w"))
        #expect(leader.openInstances.isEmpty)
        #expect(leader.log.records.contains { $0.name == "cogd.nameTakenOver" })

    }
}
