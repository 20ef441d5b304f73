import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// The execution-point check (`protocol/cogwire.md` §6): an op stamped
/// with a scope instance runs only while that instance is live and the
/// requester's own; otherwise `retired-scope`, no revision, nothing written.
@MainActor
@Suite("Leader core: the execution-point instance check")
struct InstanceCheckTests {
    /// A leader with alice (5) and bob (0) open, and worker w (peer "w")
    /// registered over the accounts: alice is instance 1, bob instance 2.
    static func ledgerWithDesks() throws -> CoreHarness {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.outcome("c", try Wire.open("bob", 0, worker: "c", seq: 2)) == .applied(revision: 2))
        #expect(leader.send("w", Wire.hello("w", 2)).first?.typeName == "welcome")
        #expect(
            leader.send("w", Wire.registerAccounts("w")) == [
                .scopeRegistered(
                    worker: "w", registration: 1, revision: 2,
                    instances: [
                        ScopeMember(identity: try Wire.identity("alice"), instance: Wire.instance(1)),
                        ScopeMember(identity: try Wire.identity("bob"), instance: Wire.instance(2)),
                    ])
            ])
        return leader
    }

    @Test func `an op stamped with a live instance of its own runs, and its record names the instance`() throws {
        let leader = try Self.ledgerWithDesks()
        #expect(leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(1))) == .applied(revision: 3))
        let record = try #require(leader.log.records.last)
        #expect(record.origin.worker == "w" && record.origin.instance == Wire.instance(1))
        #expect(record.origin.request == RequestID(worker: "w", sequence: 1))
        #expect(try leader.greetings("alice") == 1)
    }

    @Test func `an op stamped with an instance whose member left the source is retired-scope and writes nothing`() throws {
        let leader = try Self.ledgerWithDesks()
        #expect(leader.outcome("c", try Wire.close("bob", worker: "c", seq: 3)) == .applied(revision: 3))
        #expect(leader.log.records.last?.scopeEvents.map(\.instance) == [Wire.instance(2)])
        let greet = try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(2))
        #expect(leader.outcome("w", greet) == rejected(.retiredScope, "scope instance 4294967298 is retired or not owned by w"))
        #expect(leader.log.lastRevision == 3)
        #expect(try leader.greetings("alice") == 0)
        #expect(leader.ports.noted.count == 3, "the body never ran (only the three ledger ops were noted)")
        #expect(leader.core.errorCounts == ["retired-scope": 1])
    }

    @Test func `the check is at the execution point: a turn earlier in the same batch retires the instance`() throws {
        let leader = try Self.ledgerWithDesks()
        let sent = leader.batch([
            ("w", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(2))),  // admitted: bob is open
            ("c", try Wire.close("bob", worker: "c", seq: 3)),
            ("w", try Wire.greet("alice", worker: "w", seq: 2, instance: Wire.instance(2))),  // bob closed just before
        ])
        #expect(sent.outcomes("w") == [.applied(revision: 3), rejected(.retiredScope, "scope instance 4294967298 is retired or not owned by w")])
        #expect(sent.outcomes("c") == [.applied(revision: 4)])
        #expect(leader.log.records.map(\.name) == ["ledger.open", "ledger.open", "ledger.greet", "ledger.close"])
        #expect(try leader.greetings("alice") == 1)
    }

    @Test func `an op stamped with another worker's instance is retired-scope`() throws {
        let leader = try Self.ledgerWithDesks()
        #expect(leader.send("v", Wire.hello("v", 2)).first?.typeName == "welcome")
        #expect(
            leader.outcome("v", try Wire.greet("alice", worker: "v", seq: 1, instance: Wire.instance(1)))
                == rejected(.retiredScope, "scope instance 4294967297 is retired or not owned by v"))
        // Never minted at all.
        #expect(
            leader.outcome("v", try Wire.greet("alice", worker: "v", seq: 2, instance: Wire.instance(99)))
                == rejected(.retiredScope, "scope instance 4294967395 is retired or not owned by v"))
        #expect(leader.log.lastRevision == 2)
        #expect(try leader.greetings("alice") == 0)
    }

    @Test func `an op stamped with an instance of an older epoch is retired-scope after a restart`() throws {
        let leader = try Self.ledgerWithDesks()
        try leader.restart()
        #expect(leader.core.epoch == 2)
        #expect(leader.openInstances.isEmpty, "a new epoch starts with no instance")
        #expect(leader.send("w", Wire.hello("w", 2)).first == .welcome(epoch: 2, lastRevision: 2, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0))
        #expect(
            leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 1, instance: Wire.instance(1)))
                == rejected(.retiredScope, "scope instance 4294967297 is retired or not owned by w"))
        #expect(leader.log.lastRevision == 2)
        // Registered again, alice gets an instance of epoch 2, which runs.
        guard case .scopeRegistered(_, _, _, let members)? = leader.send("w", Wire.registerAccounts("w")).first else {
            Issue.record("no registration reply")
            return
        }
        #expect(members.map(\.instance) == [Wire.instance(1, epoch: 2), Wire.instance(2, epoch: 2)])
        #expect(leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 2, instance: Wire.instance(1, epoch: 2))) == .applied(revision: 3))
    }

    @Test func `an op without an instance is the worker's own and needs none`() throws {
        let leader = try Self.ledgerWithDesks()
        #expect(leader.outcome("w", try Wire.greet("alice", worker: "w", seq: 1)) == .applied(revision: 3))
        #expect(leader.log.records.last?.origin.instance == nil)
    }
}
