import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// A `Worker` in this process against a scripted leader (a raw ROUTER and
/// PUB on loopback): what the worker sends, and when, for messages the test
/// controls exactly.
@MainActor
@Suite("Worker against a scripted leader", .serialized, .timeLimit(.minutes(10)))
struct WorkerProtocolTests {
    @MainActor
    final class ScriptedLeader {
        let context: ZMQContext
        let router: ZMQSocket
        let publisher: ZMQSocket
        let requests: String
        let turns: String
        var worker: [UInt8] = []

        init() throws {
            context = try ZMQContext()
            router = try ZMQSocket(context, .router, linger: .zero)
            publisher = try ZMQSocket(context, .publisher, linger: .zero)
            // Ports the kernel picks at bind time (no window for another test to take them).
            try router.bind("tcp://127.0.0.1:*")
            try publisher.bind("tcp://127.0.0.1:*")
            requests = try router.lastEndpoint()
            turns = try publisher.lastEndpoint()
        }

        func close() {
            router.close()
            publisher.close()
            context.close()
        }

        func send(_ message: WireMessage) throws {
            _ = try router.send([worker, message.encoded()])
        }

        /// A `Worker` named w1 on the ledger rig, pointed at this leader.
        func replica(_ mechanisms: [any Mechanism] = LedgerRig.mechanisms()) throws -> Worker {
            LedgerRig.register()
            return try Worker(configuration: Worker.Configuration(name: "w1", leaderEndpoint: requests), mechanisms: mechanisms)
        }

        /// Answers the worker's hello with a welcome and waits for its
        /// snapshot request (in parts); false (recorded) if either is missing.
        func welcome(_ replica: Worker, lastRevision: UInt64 = 0, lastSequence: UInt64 = 0) throws -> Bool {
            guard case .hello? = try next(pumping: replica) else {
                Issue.record("no hello")
                return false
            }
            try send(.welcome(epoch: 1, lastRevision: lastRevision, turnsEndpoint: turns, lastSequence: lastSequence))
            guard case .snapshotRequest(inParts: true)? = try next(pumping: replica) else {
                Issue.record("no snapshot request (in parts)")
                return false
            }
            return true
        }

        /// `welcome`, then an empty state at revision 0.
        func join(_ replica: Worker, lastRevision: UInt64 = 0, lastSequence: UInt64 = 0) throws -> Bool {
            guard try welcome(replica, lastRevision: lastRevision, lastSequence: lastSequence) else { return false }
            try send(.snapshot(epoch: 1, revision: 0, entries: []))
            return true
        }

        /// The next message from the worker, pumping it meanwhile (bounded).
        func next(
            pumping replica: Worker, within timeout: Duration = .seconds(10), matching accept: (WireMessage) -> Bool = { _ in true }
        ) throws -> WireMessage? {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                try replica.pump()
                while let frames = try router.receive() {
                    worker = frames[0]
                    if let message = try? WireMessage.decode(frames[frames.count - 1]), accept(message) { return message }
                }
                usleep(1_000)
            }
            return nil
        }
    }

    @Test func `a worker refused hello-first or gone says hello at each refusal, so a hello lost with a stopped leader is sent again`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica()
        defer { replica.close() }
        guard try leader.join(replica) else { return }
        let isHello: (WireMessage) -> Bool = { if case .hello = $0 { true } else { false } }
        // A restarted leader does not know the connection; the first hello
        // is lost (never answered), the next heartbeat is refused again.
        for code: CogdCode in ["hello-first", "hello-first", "gone", "gone"] {
            try leader.send(.error(WireError(code: code, message: "scripted")))
            #expect(try leader.next(pumping: replica, matching: isHello) != nil, "a hello after `\(code)`")
        }
        // Welcomed at last (same epoch): it registers its scopes anew (the
        // ledger rig's greeter-less audit has none, so nothing more) and
        // heartbeats as before.
        try leader.send(.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: leader.turns))
        let isHeartbeat: (WireMessage) -> Bool = { if case .heartbeat = $0 { true } else { false } }
        #expect(try leader.next(pumping: replica, within: .seconds(5), matching: isHeartbeat) != nil)
    }

    @Test func `a request the socket cannot take while the leader is away is answered here rejected unavailable, never dropped`() throws {
        let leader = try ScriptedLeader()
        let replica = try leader.replica([])
        defer { replica.close() }
        guard try leader.join(replica) else { return }
        // The leader goes away: the worker's socket queues what it sends, up to its limit.
        leader.close()
        let sent = Int(Worker.sendQueueLimit) + 100
        for index in 0..<sent {
            replica.submit(op: "ledger.open", argument: Opening(account: "a\(index)", balance: 1), owner: nil)
        }
        let local = replica.replies.values.sorted { $0.request.sequence < $1.request.sequence }
        // What did not fit is answered here, each once, and counted; what fit waits in the queue for the leader.
        #expect(local.count >= 100 && local.count <= sent, "\(local.count) answered here")
        #expect(replica.operations.unsentRequests == UInt64(local.count))
        #expect(replica.operations.rejected == UInt64(local.count))
        for reply in local {
            #expect(
                reply.outcome
                    == .rejected(
                        code: "unavailable", detail: "not sent: the queue to the leader is full (1000 messages): the leader is away or not reading"))
        }
        // The latest requests are the ones refused: the queue took the first ones in order.
        #expect(local.last?.request.sequence == UInt64(sent))
        let metrics = MetricFamily.exposition(replica.metricFamilies())
        #expect(metrics.contains("cogd_worker_requests_unsent_total \(local.count)\n"), "\(metrics)")
    }

    @Test func `a worker numbers its requests above the last sequence the welcome names`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica()
        defer { replica.close() }
        // An earlier run of "w1" had requests up to 41 answered.
        guard try leader.join(replica, lastSequence: 41) else { return }
        let isOp: (WireMessage) -> Bool = { if case .op = $0 { true } else { false } }
        var sequences: [UInt64] = []
        for amount in 1...2 {
            replica.submit(op: "ledger.transfer", argument: Transfer(from: "a", to: "b", amount: amount), owner: nil)
            if case .op(let request)? = try leader.next(pumping: replica, matching: isOp) { sequences.append(request.request.sequence) }
        }
        #expect(sequences == [42, 43])
        // A heartbeat's welcome naming a lower sequence never moves the numbering back.
        try leader.send(.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: leader.turns, lastSequence: 5))
        _ = try leader.next(pumping: replica, within: .milliseconds(300), matching: { _ in false })
        replica.submit(op: "ledger.transfer", argument: Transfer(from: "a", to: "b", amount: 3), owner: nil)
        guard case .op(let third)? = try leader.next(pumping: replica, matching: isOp) else {
            Issue.record("no third op")
            return
        }
        #expect(third.request.sequence == 44)
    }

    @Test func `a worker behind its leader asks for the rest as soon as a catch-up reply stops short`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica()
        defer { replica.close() }
        guard try leader.join(replica) else { return }
        // The heartbeat's answer says the leader is at revision 5.
        try leader.send(.welcome(epoch: 1, lastRevision: 5, turnsEndpoint: leader.turns))
        let isCatchUp: (WireMessage) -> Bool = { if case .catchUpRequest = $0 { true } else { false } }
        guard case .catchUpRequest(let from)? = try leader.next(pumping: replica, matching: isCatchUp) else {
            Issue.record("no catch-up request")
            return
        }
        #expect(from == 1)
        let encoder = CBOREncoder()
        let records = try (UInt64(1)...2).map { (revision: UInt64) -> TurnRecord in
            let write = TurnWrite(name: "ledger.balance", key: try encoder.encode("a"), value: try encoder.encode(Int(revision)))
            return TurnRecord(
                revision: revision, epoch: 1, time: Date(), name: "ledger.noop", writes: [write],
                stateDigest: StateDigest(entries: [(name: write.name, key: write.key, value: write.value!)]))
        }
        // A reply cut short (as the leader cuts them at about a megabyte). This
        // scripted leader answers no heartbeat, so only the reply itself can
        // prompt the next request.
        try leader.send(.turns(epoch: 1, records: records))
        guard case .catchUpRequest(let next)? = try leader.next(pumping: replica, matching: isCatchUp) else {
            Issue.record("no second catch-up request")
            return
        }
        #expect(next == 3)
        #expect(replica.appliedRevision == 2)
    }

    @Test func `a worker keeps only the replies to its newest requests`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica()
        defer { replica.close() }
        guard try leader.join(replica) else { return }
        let count: UInt64 = 3_000
        // In rounds of 100, each taken in before the next is sent (a ROUTER
        // drops what passes its high-water mark).
        for round in stride(from: UInt64(1), through: count, by: 100) {
            for sequence in round..<(round + 100) {
                try leader.send(.reply(OpReply(request: RequestID(worker: "w1", sequence: sequence), outcome: .unchanged)))
            }
            let deadline = ContinuousClock.now + .seconds(10)
            while replica.replies[RequestID(worker: "w1", sequence: round + 99)] == nil, ContinuousClock.now < deadline {
                try replica.pump()
                usleep(1_000)
            }
        }
        #expect(replica.replies[RequestID(worker: "w1", sequence: count)] == OpReply(request: RequestID(worker: "w1", sequence: count), outcome: .unchanged))
        #expect(replica.replies.count <= 2_048)
        #expect(replica.replies[RequestID(worker: "w1", sequence: 1)] == nil, "the oldest replies are let go")
    }

    @Test func `a worker assembles a snapshot sent in parts, and asks again when one goes missing`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica()
        defer { replica.close() }
        let encoder = CBOREncoder()
        guard try leader.welcome(replica, lastRevision: 9) else { return }
        let isSnapshotRequest: (WireMessage) -> Bool = { $0 == .snapshotRequest(inParts: true) }
        let names = (0..<6).map { "account-\($0)" }
        var entries = [SnapshotEntry(name: "ledger.accounts", key: nil, value: try encoder.encode(names))]
        entries += try names.map { SnapshotEntry(name: "ledger.balance", key: try encoder.encode($0), value: try encoder.encode(10)) }
        let parts = WireMessage.snapshotParts(epoch: 1, revision: 9, entries: entries, target: 100)
        #expect(parts.count == 7)
        // Part 1 goes missing: part 2 is not taken for it, the worker asks again.
        try leader.send(parts[0])
        try leader.send(parts[2])
        #expect(try leader.next(pumping: replica, matching: isSnapshotRequest) != nil, "asked again after the gap")
        // The rest of that run is ignored: no request per stale part.
        try leader.send(parts[3])
        #expect(try leader.next(pumping: replica, within: .milliseconds(300), matching: isSnapshotRequest) == nil)
        #expect(!replica.isSynced)
        for part in parts { try leader.send(part) }
        let deadline = ContinuousClock.now + .seconds(10)
        while !replica.isSynced, ContinuousClock.now < deadline { try replica.pump(waitingUpTo: .milliseconds(50)) }
        #expect(replica.isSynced && replica.syncedRevision == 9 && replica.syncedParts == 7)
        #expect(replica.cogs[accountsCog] == names)
        #expect(replica.cogs[totalMoneyCog] == 60)
    }

    @Test func `a registration reply above the replica's revision is adopted only once the replica reaches it`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica(LedgerRig.mechanisms(greeter: true))
        defer { replica.close() }
        let encoder = CBOREncoder()
        guard try leader.welcome(replica, lastRevision: 1) else { return }
        let accounts = try encoder.encode(["alice"])
        try leader.send(.snapshot(epoch: 1, revision: 1, entries: [SnapshotEntry(name: "ledger.accounts", key: nil, value: accounts)]))
        // The greeter registers its scope; alice's child opens locally and asks to greet.
        guard case .scopeRegister(let spec)? = try leader.next(pumping: replica, matching: { if case .scopeRegister = $0 { true } else { false } }) else {
            Issue.record("no scope registration")
            return
        }
        #expect(spec.source == "ledger.accounts")
        // The leader minted alice's instance at revision 2, which this replica has not applied yet.
        let instance: UInt64 = 1 << 32 | 7
        try leader.send(.scopeRegistered(
            worker: "w1", registration: spec.registration, revision: 2,
            instances: [ScopeMember(identity: try encoder.encode("alice"), instance: instance)]))
        let early = try leader.next(pumping: replica, within: .seconds(1), matching: { if case .op = $0 { true } else { false } })
        #expect(early == nil, "no op is sent before the replica reaches the reply's revision")

        // Revision 2 arrives (published until the subscription has joined).
        let write = TurnWrite(name: "ledger.balance", key: try encoder.encode("alice"), value: try encoder.encode(3))
        let record = TurnRecord(
            revision: 2, epoch: 1, time: Date(), name: "ledger.noop", writes: [write],
            stateDigest: StateDigest(entries: [(name: "ledger.accounts", key: nil, value: accounts), (name: write.name, key: write.key, value: write.value!)]))
        var stamped: OpRequest?
        let deadline = ContinuousClock.now + .seconds(10)
        while stamped == nil, ContinuousClock.now < deadline {
            try leader.publisher.send([WireMessage.turns(epoch: 1, records: [record]).encoded()])
            for _ in 0..<20 where stamped == nil {
                try replica.pump()
                while let frames = try leader.router.receive() {
                    if case .op(let request)? = try? WireMessage.decode(frames[frames.count - 1]) { stamped = request }
                }
                usleep(1_000)
            }
        }
        #expect(replica.appliedRevision == 2)
        #expect(stamped?.instance == instance, "the child's op carries the instance adopted at revision 2")
    }

    @Test func `records that come in one message open each child with its own member's instance`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica(LedgerRig.mechanisms(greeter: true))
        defer { replica.close() }
        let encoder = CBOREncoder()
        guard try leader.welcome(replica, lastRevision: 1) else { return }
        try leader.send(.snapshot(epoch: 1, revision: 1, entries: [SnapshotEntry(name: "ledger.accounts", key: nil, value: try encoder.encode(["alice"]))]))
        guard case .scopeRegister(let spec)? = try leader.next(pumping: replica, matching: { if case .scopeRegister = $0 { true } else { false } }) else {
            Issue.record("no scope registration")
            return
        }
        func instance(_ n: UInt64) -> UInt64 { 1 << 32 | n }
        try leader.send(.scopeRegistered(
            worker: "w1", registration: spec.registration, revision: 1,
            instances: [ScopeMember(identity: try encoder.encode("alice"), instance: instance(1))]))
        // Bob opens at revision 2; alice closes and carol opens at revision 3 — both records in one message,
        // so the replica's table is at revision 3 while its graph applies revision 2 (bob is second in both lists).
        func event(_ kind: ScopeEvent.Kind, _ n: UInt64, _ account: String) throws -> ScopeEvent {
            ScopeEvent(
                kind: kind, instance: instance(n), scope: "LedgerGreeter.greeter", identity: try encoder.encode(account), worker: "w1",
                registration: spec.registration)
        }
        func accounts(_ names: [String]) throws -> TurnWrite { TurnWrite(name: "ledger.accounts", key: nil, value: try encoder.encode(names)) }
        let second = try accounts(["alice", "bob"])
        let third = try accounts(["bob", "carol"])
        let records = [
            TurnRecord(
                revision: 2, epoch: 1, time: Date(), name: "ledger.open", writes: [second], scopeEvents: [try event(.open, 2, "bob")],
                stateDigest: StateDigest(entries: [(name: second.name, key: nil, value: second.value!)])),
            TurnRecord(
                revision: 3, epoch: 1, time: Date(), name: "ledger.open", writes: [third],
                scopeEvents: [try event(.retire, 1, "alice"), try event(.open, 3, "carol")],
                stateDigest: StateDigest(entries: [(name: third.name, key: nil, value: third.value!)])),
        ]
        var greetings: [String: UInt64?] = [:]
        let deadline = ContinuousClock.now + .seconds(10)
        while greetings.count < 3, ContinuousClock.now < deadline {
            if replica.appliedRevision < 3 { try leader.publisher.send([WireMessage.turns(epoch: 1, records: records).encoded()]) }
            for _ in 0..<20 {
                try replica.pump()
                while let frames = try leader.router.receive() {
                    guard case .op(let request)? = try? WireMessage.decode(frames[frames.count - 1]), request.op == "ledger.greet" else { continue }
                    greetings[try CBORDecoder().decode(String.self, from: request.argument)] = request.instance
                }
                usleep(1_000)
            }
        }
        #expect(replica.appliedRevision == 3)
        #expect(greetings == ["alice": instance(1), "bob": instance(2), "carol": instance(3)], "each greeting carries its own member's instance")
    }

    @Test func `a replica whose state differs from the leader's counts the mismatch and re-syncs from a snapshot, dropping what it held wrongly`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica()
        defer { replica.close() }
        let encoder = CBOREncoder()
        guard try leader.welcome(replica, lastRevision: 1) else { return }
        // The replica is given an account the leader's state does not hold (a
        // snapshot without a digest, as an older leader sends: nothing to check it by).
        try leader.send(.snapshot(
            epoch: 1, revision: 1, entries: [SnapshotEntry(name: "ledger.accounts", key: nil, value: try encoder.encode(["mallory"]))]))
        let deadline = ContinuousClock.now + .seconds(10)
        while !replica.isSynced, ContinuousClock.now < deadline { try replica.pump(waitingUpTo: .milliseconds(50)) }
        #expect(replica.cogs[accountsCog] == ["mallory"])
        #expect(replica.digestMismatches == 0)

        // Revision 2 carries the digest of the leader's state after it: alice's balance alone.
        let write = TurnWrite(name: "ledger.balance", key: try encoder.encode("alice"), value: try encoder.encode(3))
        let leaders = StateDigest(entries: [(name: write.name, key: write.key, value: write.value!)])
        let record = TurnRecord(revision: 2, epoch: 1, time: Date(), name: "ledger.noop", writes: [write], stateDigest: leaders)
        let isSnapshotRequest: (WireMessage) -> Bool = { $0 == .snapshotRequest(inParts: true) }
        var asked = false
        // Published until the subscription has joined (bounded).
        for _ in 0..<200 where !asked {
            try leader.publisher.send([WireMessage.turns(epoch: 1, records: [record]).encoded()])
            asked = try leader.next(pumping: replica, within: .milliseconds(50), matching: isSnapshotRequest) != nil
        }
        #expect(asked, "a snapshot request follows the mismatch")
        var replicas = leaders
        replicas.apply(name: "ledger.accounts", key: nil, old: nil, new: try encoder.encode(["mallory"]))
        #expect(replica.digestMismatches == 1)
        #expect(
            replica.lastDigestMismatch
                == "state digest mismatch at revision 2: the record says \(leaders), the replica has \(replicas); re-syncing from a snapshot")
        #expect(replica.appliedRevision == 2)
        #expect(replica.stateDigest == replicas, "the replica's digest is its own until it re-syncs")

        // The snapshot at revision 2: the replica drops the account the leader never had.
        try leader.send(.snapshot(
            epoch: 1, revision: 2, entries: [SnapshotEntry(name: write.name, key: write.key, value: write.value!)], stateDigest: leaders))
        let resynced = ContinuousClock.now + .seconds(10)
        while replica.stateDigest != leaders, ContinuousClock.now < resynced { try replica.pump(waitingUpTo: .milliseconds(50)) }
        #expect(replica.stateDigest == leaders)
        #expect(replica.cogs[accountsCog] == [], "its initial value: the snapshot does not hold it")
        #expect(replica.digestMismatches == 1, "the snapshot agrees with its digest")
        // Its heartbeat now reports the leader's digest at revision 2.
        let heartbeat = try leader.next(pumping: replica, within: .seconds(5)) { if case .heartbeat(_, 2, _) = $0 { true } else { false } }
        #expect(heartbeat == .heartbeat(worker: "w1", revision: 2, stateDigest: leaders))
    }

    @Test func `a snapshot whose entries do not add up to its digest is counted, and not asked for again`() throws {
        let leader = try ScriptedLeader()
        defer { leader.close() }
        let replica = try leader.replica()
        defer { replica.close() }
        let encoder = CBOREncoder()
        guard try leader.welcome(replica, lastRevision: 1) else { return }
        let accounts = SnapshotEntry(name: "ledger.accounts", key: nil, value: try encoder.encode(["alice"]))
        let claimed = StateDigest(value: 42)
        try leader.send(.snapshot(epoch: 1, revision: 1, entries: [accounts], stateDigest: claimed))
        let deadline = ContinuousClock.now + .seconds(10)
        while !replica.isSynced, ContinuousClock.now < deadline { try replica.pump(waitingUpTo: .milliseconds(50)) }
        #expect(replica.isSynced)
        #expect(replica.digestMismatches == 1)
        #expect(replica.lastDigestMismatch?.hasPrefix("state digest mismatch in the snapshot at revision 1: the leader says \(claimed), its entries give ") == true)
        // The leader's records follow from the digest it sent: the replica takes it, and asks for no other snapshot (it would be the same).
        #expect(replica.stateDigest == claimed)
        #expect(try leader.next(pumping: replica, within: .milliseconds(300), matching: { $0 == .snapshotRequest(inParts: true) }) == nil)
    }
}
