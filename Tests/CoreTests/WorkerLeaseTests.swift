import CogCodec
import Foundation
import CogProtocol
import CogWire
import Testing

/// A worker's lease (`cogwire.md` §6b): a worker that hears no welcome for
/// the leader's heartbeat timeout less a margin suspends its placed
/// instances' effects until a welcome renews it; a leader that follows
/// another places no group member for the heartbeat timeout. Time is an
/// input.
@MainActor
@Suite("Worker lease: a cut-off worker stops its effects before it is replaced")
struct WorkerLeaseTests {
    static let endpoint = "tcp://127.0.0.1:5702"

    static func welcome() -> ReplicaCore.Input {
        .leader(.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: endpoint))
    }

    /// The lease effects among `effects`, in order.
    static func lease(_ effects: [ReplicaCore.Effect]) -> [ReplicaCore.Effect] {
        effects.filter { $0 == .suspendEffects || $0 == .resumeEffects }
    }

    /// A replica (lease 4 s) that said hello at 0, was welcomed at 10 ms
    /// and synced at 20 ms.
    static func welcomed() -> ReplicaCore {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false, lease: .seconds(4)))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(welcome(), now: .milliseconds(10))
        _ = replica.step(.leader(.snapshot(epoch: 1, revision: 0, entries: [], part: 0, more: false)), now: .milliseconds(20))
        return replica
    }

    static func record(_ revision: UInt64) -> TurnRecord {
        TurnRecord(revision: revision, epoch: 1, time: Date(timeIntervalSince1970: 0), name: "t", writes: [])
    }

    @Test func `the lease is the heartbeat timeout less a fifth of it, at least 1 s, at most half`() {
        #expect(ReplicaCore.leaseMargin(heartbeatTimeout: .seconds(5)) == .seconds(1))
        #expect(ReplicaCore.lease(heartbeatTimeout: .seconds(5)) == .seconds(4))
        #expect(ReplicaCore.lease(heartbeatTimeout: .seconds(3)) == .seconds(2))
        #expect(ReplicaCore.lease(heartbeatTimeout: .seconds(30)) == .seconds(24))
        #expect(ReplicaCore.lease(heartbeatTimeout: .seconds(1)) == .milliseconds(500))
        #expect(ReplicaCore.Settings(name: "w1").lease == .seconds(4), "on by default, for the leader's default timeout")
    }

    @Test func `no welcome for the lease, counted from the hello it answered: the placed instances' effects are suspended once`() {
        var replica = Self.welcomed()
        // Heartbeats go out every second; none is answered (the leader is stopped or cut off).
        for millis in stride(from: 500, through: 3_500, by: 500) {
            #expect(Self.lease(replica.step(.tick, now: .milliseconds(Int64(millis)))) == [], "within the lease at \(millis) ms")
        }
        #expect(!replica.isSuspended)
        // 4 s after the hello (not the welcome, 10 ms later): the leader may count from then.
        #expect(Self.lease(replica.step(.tick, now: .seconds(4))) == [.suspendEffects])
        #expect(replica.isSuspended && replica.leaseExpiries == 1)
        #expect(Self.lease(replica.step(.tick, now: .seconds(5))) == [], "told once")
        #expect(replica.summary.contains("lease expired"))
    }

    @Test func `a welcome to a heartbeat sent after the lease ran out resumes the effects`() {
        var replica = Self.welcomed()
        _ = replica.step(.tick, now: .seconds(4))
        #expect(replica.isSuspended)
        // The heartbeat of 4 s is answered at 4.2 s: the lease runs from 4 s again.
        #expect(Self.lease(replica.step(Self.welcome(), now: .milliseconds(4_200))) == [.resumeEffects])
        #expect(!replica.isSuspended && replica.leaseRenewals == 1 && replica.leaseStart == .seconds(4))
        #expect(Self.lease(replica.step(.tick, now: .milliseconds(7_900))) == [])
    }

    @Test func `a renewing welcome that names revisions the replica has not applied resumes the effects once it has applied them`() {
        var replica = Self.welcomed()
        _ = replica.step(.tick, now: .seconds(4))
        #expect(replica.isSuspended)
        // Answered at 4.2 s, naming revision 3: the records up to it may retire what the replica holds (it was given up meanwhile).
        let welcome = replica.step(.leader(.welcome(epoch: 1, lastRevision: 3, turnsEndpoint: Self.endpoint)), now: .milliseconds(4_200))
        #expect(Self.lease(welcome) == [] && replica.isSuspended)
        #expect(Self.lease(replica.step(.published(epoch: 1, records: [Self.record(1), Self.record(2)]), now: .milliseconds(4_300))) == [])
        // Revision 3 applied: its retirements reach the driver before the effects resume.
        let caughtUp = replica.step(.published(epoch: 1, records: [Self.record(3)]), now: .milliseconds(4_400))
        #expect(caughtUp.filter { if case .apply = $0 { true } else { $0 == .resumeEffects } } == [.apply(Self.record(3)), .resumeEffects])
        #expect(!replica.isSuspended && replica.leaseRenewals == 1)
        #expect(replica.takeEvents().suffix(2) == [.leaseExpired(expiries: 1), .leaseRenewed(renewals: 1)])
    }

    @Test func `a welcome that may answer a heartbeat older than the lease does not resume: a stopped worker waits for a fresh one`() {
        var replica = Self.welcomed()
        // A heartbeat at 1 s, then the worker itself is stopped until 10 s;
        // the welcome answering that heartbeat was on its way meanwhile.
        _ = replica.step(.tick, now: .seconds(1))
        let late = replica.step(Self.welcome(), now: .seconds(10))
        #expect(Self.lease(late) == [.suspendEffects], "the lease is looked at before the welcome: it ran out at 5 s")
        #expect(replica.isSuspended && replica.leaseStart == .seconds(1))
        // A second welcome with no heartbeat sent since the first renews nothing.
        #expect(Self.lease(replica.step(Self.welcome(), now: .milliseconds(10_010))) == [])
        // The heartbeat of this pass, answered: effects start again.
        let beat = replica.step(.tick, now: .milliseconds(10_020))
        #expect(beat.contains { if case .send(.heartbeat) = $0 { true } else { false } })
        #expect(Self.lease(replica.step(Self.welcome(), now: .milliseconds(10_050))) == [.resumeEffects])
    }

    @Test func `the lease counts from the first heartbeat a welcome may answer, never from a later one`() {
        var replica = Self.welcomed()
        // Heartbeats at 1 s and 2 s; the welcome at 2.5 s may answer the first only.
        _ = replica.step(.tick, now: .seconds(1))
        _ = replica.step(.tick, now: .seconds(2))
        _ = replica.step(Self.welcome(), now: .milliseconds(2_500))
        #expect(replica.leaseStart == .seconds(1))
        // Unanswered after that: suspended 4 s after the heartbeat of 1 s.
        #expect(Self.lease(replica.step(.tick, now: .milliseconds(4_999))) == [])
        #expect(Self.lease(replica.step(.tick, now: .seconds(5))) == [.suspendEffects])
    }

    @Test func `a lease shorter than two heartbeat intervals brings heartbeats every half lease, so an answered worker never runs out`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false, lease: .seconds(1)))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(Self.welcome(), now: .milliseconds(10))
        func beats(_ effects: [ReplicaCore.Effect]) -> Int { effects.filter { if case .send(.heartbeat) = $0 { true } else { false } }.count }
        #expect(beats(replica.step(.tick, now: .milliseconds(490))) == 0)
        #expect(beats(replica.step(.tick, now: .milliseconds(500))) == 1)
        // Each heartbeat answered 50 ms later: the lease never runs out.
        for half in 1...10 {
            _ = replica.step(Self.welcome(), now: .milliseconds(Int64(half * 500 + 50)))
            let effects = replica.step(.tick, now: .milliseconds(Int64((half + 1) * 500)))
            #expect(beats(effects) == 1 && Self.lease(effects) == [], "at \((half + 1) * 500) ms")
        }
        #expect(replica.leaseExpiries == 0)
    }

    @Test func `without a lease (cogd-lab sim --break worker-lease) nothing is ever suspended`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false, lease: nil))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(Self.welcome(), now: .milliseconds(10))
        #expect(Self.lease(replica.step(.tick, now: .seconds(60))) == [])
        #expect(!replica.isSuspended && replica.leaseExpiries == 0)
    }

    @Test func `before the first welcome there is no lease to run out`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false, lease: .seconds(4)))
        _ = replica.step(.start, now: .zero)
        #expect(Self.lease(replica.step(.tick, now: .seconds(30))) == [])
        #expect(replica.leaseStart == nil)
    }

    // MARK: The leader

    static func grouped(_ worker: String) -> WireMessage { .hello(worker: worker, lastRevision: 0, group: "g") }

    @Test func `a leader that follows another places no group member until its heartbeat timeout has passed`() throws {
        let leader = try CoreHarness(heartbeatTimeout: .seconds(3), placesGroups: true)
        _ = leader.send("c", try Wire.test("test.setMembers", ["a", "b"], seq: 1))
        try leader.restart()
        #expect(leader.core.epoch == 2)
        #expect(leader.send("w1", Self.grouped("w1")).first?.typeName == "welcome")
        // Registered during the hold: kept, not answered (a worker of the earlier
        // leader may still act for these members until its lease runs out).
        #expect(leader.send("w1", Wire.register("w1", number: 1, source: "test.members", form: .each)) == [])
        #expect(leader.core.placementHeldUntil == .seconds(3))
        #expect(leader.core.takeEvents().contains(.placementHeld(seconds: 3)), "the leader says so at its start")
        // Its heartbeats keep it; the registration stays held.
        leader.now = .seconds(2)
        #expect(leader.send("w1", Wire.heartbeat("w1")).first?.typeName == "welcome")
        #expect(leader.tick(at: .milliseconds(2_900))["w1"] == [])
        // At the timeout the registration is placed and answered.
        let released = leader.tick(at: .seconds(3))["w1"]
        guard case .scopeRegistered(_, 1, _, let instances)? = released.first else {
            Issue.record("the held registration is answered at the end of the hold, got \(released)")
            return
        }
        #expect(instances.map(\.instance) == [Wire.instance(1, epoch: 2), Wire.instance(2, epoch: 2)])
        #expect(leader.core.placementHeldUntil == nil)
        #expect(leader.core.takeEvents().contains(.placementReleased(registrations: 1)))
    }

    @Test func `the first leader of a log and a worker's own scopes are never held`() throws {
        let leader = try CoreHarness(placesGroups: true)
        _ = leader.send("c", try Wire.test("test.setMembers", ["a"], seq: 1))
        #expect(leader.core.placementHeldUntil == nil)
        #expect(leader.send("w1", Self.grouped("w1")).first?.typeName == "welcome")
        #expect(leader.send("w1", Wire.register("w1", number: 1, source: "test.members", form: .each)).first?.typeName == "scope-registered")
        try leader.restart()
        // Epoch 2, but no group: a worker's own registration is answered at once.
        #expect(leader.send("w2", .hello(worker: "w2", lastRevision: 1)).first?.typeName == "welcome")
        #expect(leader.send("w2", Wire.register("w2", number: 1, source: "test.members", form: .each)).first?.typeName == "scope-registered")
    }
}
