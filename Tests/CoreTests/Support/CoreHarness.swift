import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// A peer's routing identity, written as a readable name in the tests.
typealias Peer = LeaderCore.Peer

func peer(_ name: String) -> Peer { Array(name.utf8) }

/// The ports a leader core asks of its driver: which peers are still
/// connected (a probe to a closed one fails) and the running-request note,
/// which can be made to fail on cue.
@MainActor
final class FakePorts: LeaderPorts {
    /// Peers whose connection has closed: a probe to them fails.
    var disconnected: Set<Peer> = []
    /// The probes the core sent, in order: to whom, and what.
    private(set) var probes: [(peer: Peer, message: WireMessage?)] = []
    /// The requests noted as running, in order.
    private(set) var noted: [RequestID] = []
    /// Notes fail while this is above zero (each failure counts it down).
    var failingNotes = 0

    func noteRunning(_ request: RequestID, op: String, digest: [UInt8]) throws(TurnStoreError) {
        if failingNotes > 0 {
            failingNotes -= 1
            throw TurnStoreError(code: .lmdb, message: "simulated: the note could not be written")
        }
        noted.append(request)
    }

    func isConnected(_ peer: [UInt8], probe: [UInt8]) -> Bool {
        probes.append((peer, try? WireMessage.decode(probe, limit: WireMessage.maximumLeaderMessageSize)))
        return !disconnected.contains(peer)
    }
}

/// The leader core's view of a `MemoryLog`, whose reads can be made to
/// fail on cue (an LMDB read error): each kind fails while its count is
/// above zero, counting down.
final class FlakyReads: LeaderLog {
    let log: MemoryLog
    var failingValueReads = 0
    var failingDedupReads = 0
    var failingRecordReads = 0

    init(_ log: MemoryLog) {
        self.log = log
    }

    var epoch: UInt64 { log.epoch }
    var lastRevision: UInt64 { log.lastRevision }
    var firstRevision: UInt64 { log.firstRevision }
    var unindexedFrom: UInt64? { log.unindexedFrom }

    private static func fail(_ count: inout Int, _ what: String) throws(TurnStoreError) {
        guard count > 0 else { return }
        count -= 1
        throw TurnStoreError(code: .lmdb, message: "simulated: cannot read \(what)")
    }

    func value(name: String, key: [UInt8]?) throws(TurnStoreError) -> [UInt8]? {
        try Self.fail(&failingValueReads, "the state table")
        return try log.value(name: name, key: key)
    }

    func stateDigest(at revision: UInt64) throws(TurnStoreError) -> StateDigest? {
        try Self.fail(&failingRecordReads, "the turn log")
        return try log.stateDigest(at: revision)
    }

    func dedupReply(for request: RequestID) throws(TurnStoreError) -> [UInt8]? {
        try Self.fail(&failingDedupReads, "the dedup table")
        return try log.dedupReply(for: request)
    }

    func lastDedupSequence(worker: String) throws(TurnStoreError) -> UInt64? {
        try Self.fail(&failingDedupReads, "the dedup table")
        return try log.lastDedupSequence(worker: worker)
    }

    func expiredSequence(worker: String) throws(TurnStoreError) -> UInt64? {
        try Self.fail(&failingDedupReads, "the dedup table")
        return try log.expiredSequence(worker: worker)
    }

    func records(from revision: UInt64, limit: Int, maximumBytes: Int) throws(TurnStoreError) -> [TurnRecord] {
        try Self.fail(&failingRecordReads, "the turn log")
        return try log.records(from: revision, limit: limit, maximumBytes: maximumBytes)
    }
}

/// What one step or batch of the leader core sent, decoded, in order.
struct Sent {
    /// Every message sent, with its peer, in order.
    var messages: [(peer: Peer, message: WireMessage)] = []
    /// Snapshots started: to whom, whole or in parts, and the committed
    /// state they are of (read when the core asked, as the driver does).
    var snapshots: [(peer: Peer, whole: Bool, revision: UInt64, entries: [StateEntry])] = []
    /// Peers that asked for the status report.
    var statusRequests: [Peer] = []
    /// The revisions published.
    var published: [Range<UInt64>] = []
    /// Whether a commit was asked for, and whether it failed.
    var commits = 0
    var failedCommits = 0

    /// The messages sent to `name`, in order.
    subscript(_ name: String) -> [WireMessage] {
        messages.filter { $0.peer == peer(name) }.map(\.message)
    }

    /// The outcomes of the op replies sent to `name`, in order.
    func outcomes(_ name: String) -> [OpReply.Outcome] {
        self[name].compactMap { message in
            guard case .reply(let reply) = message else { return nil }
            return reply.outcome
        }
    }

    /// The error messages sent to `name`, in order.
    func errors(_ name: String) -> [WireError] {
        self[name].compactMap { message in
            guard case .error(let error) = message else { return nil }
            return error
        }
    }

    static func + (a: Sent, b: Sent) -> Sent {
        var sum = a
        sum.messages += b.messages
        sum.snapshots += b.snapshots
        sum.statusRequests += b.statusRequests
        sum.published += b.published
        sum.commits += b.commits
        sum.failedCommits += b.failedCommits
        return sum
    }
}

/// A leader core over a `MemoryLog` with fake ports, driven the way
/// `Leader` drives it: messages, then the end of the batch; a commit is
/// appended to the log and answered at once; what the core sends is
/// decoded and returned. Time is `now`, set by the test.
@MainActor
final class CoreHarness {
    let log: MemoryLog
    /// What the core reads the log through (reads fail on cue).
    let reads: FlakyReads
    let ports = FakePorts()
    let registry: OpRegistry
    let settings: LeaderCore.Settings
    var core: LeaderCore
    /// The time of the next step.
    var now: Duration = .zero
    /// What a failed append is reported as.
    var commitCause = "disk full (0 bytes free in /data)"
    /// The key each peer's connection authenticated with (none: unauthenticated).
    var keys: [String: String] = [:]
    /// Every commit the core asked for, in order (failed ones too).
    private(set) var commits: [LeaderCommit] = []

    /// The time every record is stamped with (whole seconds: exact through the codec).
    static let recordTime = Date(timeIntervalSince1970: 1_700_000_000)

    init(
        log: MemoryLog = MemoryLog(), registry: OpRegistry? = nil, heartbeatTimeout: Duration = .seconds(5),
        maximumRecordBytes: Int = LeaderCore.maximumRecordBytes, rigs: [CogRig.Fingerprint] = [], peers: PeerTable? = nil,
        placesGroups: Bool = false
    ) throws {
        self.log = log
        reads = FlakyReads(log)
        self.registry = registry ?? CoreHarness.ledgerRegistry()
        var settings = LeaderCore.Settings(
            heartbeatTimeout: heartbeatTimeout, maximumRecordBytes: maximumRecordBytes, turnsEndpoint: CoreHarness.turnsEndpoint,
            rigs: rigs, peers: peers)
        settings.placesGroups = placesGroups
        self.settings = settings
        core = try LeaderCore(log: reads, ports: ports, registry: self.registry, settings: settings)
        if core.hasWork { _ = endBatch() }
    }

    static let turnsEndpoint = "tcp://127.0.0.1:5702"

    /// The ledger rig's ops and the test rig's.
    static func ledgerRegistry() -> OpRegistry { TestRig.registry() }

    /// A leader restart: the log opens again under the next epoch and a new
    /// core starts over it (indexing, like `Leader`, what the previous one
    /// left unindexed — unless `indexing` is false).
    func restart(indexing: Bool = true) throws {
        log.reopen()
        core = try LeaderCore(log: reads, ports: ports, registry: registry, settings: settings)
        if indexing, core.hasWork { _ = endBatch() }
    }

    // MARK: Stepping

    /// One batch: each message from its peer, then the end of the batch.
    func batch(_ messages: [(String, WireMessage)]) -> Sent {
        batch(frames: messages.map { ($0.0, [$0.1.encoded()]) })
    }

    /// One batch of raw frames.
    func batch(frames messages: [(String, [[UInt8]])]) -> Sent {
        var sent = Sent()
        for (name, frames) in messages {
            carryOut(core.step(.message(from: peer(name), frames: frames, key: keys[name]), now: now), into: &sent)
        }
        return sent + endBatch()
    }

    /// A batch of one message; what went back to its sender.
    func send(_ name: String, _ message: WireMessage) -> [WireMessage] {
        batch([(name, message)])[name]
    }

    /// The outcome of one op in a batch of its own (nil: no reply).
    func outcome(_ name: String, _ message: WireMessage) -> OpReply.Outcome? {
        batch([(name, message)]).outcomes(name).first
    }

    /// The one error `name` got for `message` in a batch of its own.
    func error(_ name: String, _ message: WireMessage) -> WireError? {
        batch([(name, message)]).errors(name).first
    }

    /// Ends the batch (committing what it wrote).
    func endBatch() -> Sent {
        var sent = Sent()
        carryOut(core.step(.endBatch, now: now), into: &sent)
        return sent
    }

    /// A tick at `time`; what it wrote (workers gone) commits and goes out
    /// at once, as `Leader` does.
    @discardableResult
    func tick(at time: Duration) -> Sent {
        now = time
        var sent = Sent()
        carryOut(core.step(.tick, now: now), into: &sent)
        if core.hasWork { sent = sent + endBatch() }
        return sent
    }

    /// Ticks every `step` (never a pause) up to and including `time`.
    @discardableResult
    func advance(to time: Duration, step: Duration = .milliseconds(500)) -> Sent {
        var sent = Sent()
        while now + step < time { sent = sent + tick(at: now + step) }
        return sent + tick(at: time)
    }

    /// The snapshot sent to `name` ended.
    func snapshotEnded(_ name: String) {
        var sent = Sent()
        carryOut(core.step(.snapshotEnded(peer(name)), now: now), into: &sent)
    }

    private func carryOut(_ effects: [LeaderCore.Effect], into sent: inout Sent) {
        for effect in effects {
            switch effect {
            case .send(let peer, let frame):
                do {
                    sent.messages.append((peer, try WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)))
                } catch {
                    Issue.record("the core sent a frame that does not decode: \(error)")
                }
            case .sendStatus(let peer):
                sent.statusRequests.append(peer)
            case .startSnapshot(let peer, let whole):
                sent.snapshots.append((peer, whole, log.lastRevision, log.stateEntries))
            case .publish(let revisions):
                sent.published.append(revisions)
            case .standby(let peer, let message):
                sent.messages.append((peer, message))  // what the core hands its driver's shipping
            case .commit(let commit):
                commits.append(commit)
                sent.commits += 1
                let answer: LeaderCore.Input
                do {
                    answer = .committed(try log.append(commit, secondsSince1970: CoreHarness.recordTime.timeIntervalSince1970))
                } catch {
                    sent.failedCommits += 1
                    answer = .commitFailed(cause: commitCause)
                }
                carryOut(core.step(answer, now: now), into: &sent)
            }
        }
    }

    // MARK: What the log holds

    /// An account's committed balance (nil: none stored).
    func balance(_ account: String) throws -> Int? {
        guard let bytes = try log.value(name: "ledger.balance", key: CBOREncoder().encode(account)) else { return nil }
        return try CBORDecoder().decode(Int.self, from: bytes)
    }

    /// How many greetings an account has, committed.
    func greetings(_ account: String) throws -> Int {
        guard let bytes = try log.value(name: "ledger.greeted", key: CBOREncoder().encode(account)) else { return 0 }
        return try CBORDecoder().decode(Int.self, from: bytes)
    }

    /// The committed open accounts.
    func accounts() throws -> [String] {
        guard let bytes = try log.value(name: "ledger.accounts", key: nil) else { return [] }
        return try CBORDecoder().decode([String].self, from: bytes)
    }

    /// The open scope instances, as the core reports them.
    var openInstances: [UInt64] { core.status(now: now).openScopeInstances }
    /// The mechanisms whose root each worker owns (workers owning none left out).
    var rootsByWorker: [String: [String]] {
        Dictionary(uniqueKeysWithValues: core.workerStatus(now: now).compactMap { worker in worker.roots.map { (worker.name, $0) } })
    }
}

// MARK: Messages

/// Builds the wire messages of the ledger rig and of workers.
enum Wire {
    static func hello(_ worker: String, _ lastRevision: UInt64 = 0) -> WireMessage {
        .hello(worker: worker, lastRevision: lastRevision)
    }

    static func heartbeat(_ worker: String, _ revision: UInt64 = 0) -> WireMessage {
        .heartbeat(worker: worker, revision: revision)
    }

    static func op(_ op: String, _ argument: [UInt8], worker: String, seq: UInt64, instance: UInt64? = nil) -> WireMessage {
        .op(OpRequest(request: RequestID(worker: worker, sequence: seq), op: op, argument: argument, instance: instance))
    }

    static func open(_ account: String, _ balance: Int, worker: String, seq: UInt64, instance: UInt64? = nil) throws -> WireMessage {
        op("ledger.open", try CBOREncoder().encode(Opening(account: account, balance: balance)), worker: worker, seq: seq, instance: instance)
    }

    static func transfer(_ from: String, _ to: String, _ amount: Int, worker: String, seq: UInt64, instance: UInt64? = nil) throws -> WireMessage {
        op("ledger.transfer", try CBOREncoder().encode(Transfer(from: from, to: to, amount: amount)), worker: worker, seq: seq, instance: instance)
    }

    static func close(_ account: String, worker: String, seq: UInt64, instance: UInt64? = nil) throws -> WireMessage {
        op("ledger.close", try CBOREncoder().encode(account), worker: worker, seq: seq, instance: instance)
    }

    static func greet(_ account: String, worker: String, seq: UInt64, instance: UInt64? = nil) throws -> WireMessage {
        op("ledger.greet", try CBOREncoder().encode(account), worker: worker, seq: seq, instance: instance)
    }

    /// One of the test rig's ops.
    static func test<A: Encodable>(_ op: String, _ argument: A, worker: String = "c", seq: UInt64) throws -> WireMessage {
        self.op(op, try CBOREncoder().encode(argument), worker: worker, seq: seq)
    }

    /// A registration of `worker`'s over a test rig source.
    static func register(
        _ worker: String, number: UInt64, source: String, form: ScopeRegistration.Form, key: [UInt8]? = nil, parent: UInt64? = nil,
        path: String = "Test.scope"
    ) -> WireMessage {
        .scopeRegister(ScopeRegistration(worker: worker, registration: number, path: path, source: source, key: key, form: form, parent: parent))
    }

    /// A registration of `worker`'s over the open accounts (`each`).
    static func registerAccounts(_ worker: String, number: UInt64 = 1, parent: UInt64? = nil, path: String = "Test.desk") -> WireMessage {
        .scopeRegister(ScopeRegistration(
            worker: worker, registration: number, path: path, source: "ledger.accounts", key: nil, form: .each, parent: parent))
    }

    /// An account name as a scope member's identity (its encoding).
    static func identity(_ account: String) throws -> [UInt8] { try CBOREncoder().encode(account) }

    /// Instance `n` of epoch `epoch`.
    static func instance(_ n: UInt64, epoch: UInt64 = 1) -> UInt64 { epoch << 32 | n }
}

/// A rejection as it goes on the wire.
func rejected(_ code: CogdCode, _ detail: String) -> OpReply.Outcome {
    .rejected(Rejection(code, detail))
}
