import Cog
import CogLog
import CogWire
import Dispatch
import Foundation

/// A worker: keeps a replica of the leader's graph from the durable turn
/// stream, hosts mechanisms, and sends ops to the leader (DESIGN §6).
///
/// Sync follows the Clone pattern: hello, then subscribe to the turn stream,
/// then fetch a snapshot; turns published meanwhile are buffered and applied
/// above the snapshot's revision; a gap asks for the missing records.
///
/// - Important: runs on the main actor (its replica's reactions and tasks
///   live there); `run` polls its sockets and yields between polls.
@MainActor
public final class Worker: CogRemoteLink {
    public struct Configuration: Sendable {
        public var name: String
        public var leaderEndpoint: String
        public var heartbeatInterval: Duration

        public init(name: String, leaderEndpoint: String = "tcp://127.0.0.1:5701", heartbeatInterval: Duration = .seconds(1)) {
            self.name = name
            self.leaderEndpoint = leaderEndpoint
            self.heartbeatInterval = heartbeatInterval
        }
    }

    public let configuration: Configuration
    /// The replica: changed only by applied turns.
    public let cogs: Cogs
    private let context: ZMQContext
    private let dealer: ZMQSocket
    private var subscriber: ZMQSocket?
    private let mechanisms: [any Mechanism]
    private let replicaCodec = ReplicaCodec()

    /// The newest revision applied to the replica.
    public private(set) var appliedRevision: UInt64 = 0
    /// The leader epoch the replica follows.
    public private(set) var epoch: UInt64?
    /// Whether the first snapshot has been applied (mechanisms operate then).
    public private(set) var isSynced = false
    /// The epoch of the last snapshot applied.
    public private(set) var syncedEpoch: UInt64?
    /// The revision of the last snapshot applied (what "synced at" reports;
    /// the replica may have applied more since, in the same pass).
    public private(set) var syncedRevision: UInt64 = 0
    /// The replies to this worker's newest requests (the last 1,024 to 2,048
    /// of them: a long-running worker keeps no history of every request).
    public private(set) var replies: [RequestID: OpReply] = [:]
    /// `replies`' keys, oldest first.
    private var replyOrder: [RequestID] = []
    /// Error messages the leader sent this worker.
    public private(set) var errors: [WireError] = []
    private var buffered: [UInt64: TurnRecord] = [:]
    /// The encoded value of every durable state applied, by `name` + key (scope members come from it).
    private var encodedState: [[UInt8]: [UInt8]] = [:]
    /// The state digest of `encodedState` (`StateDigest`), checked against
    /// every applied record's and reported with each heartbeat.
    public private(set) var stateDigest = StateDigest()
    /// How many applied records (and snapshots) carried another state
    /// digest than the replica's; a record's mismatch re-syncs from a snapshot.
    public private(set) var digestMismatches = 0
    /// The last mismatch, in words (`cogd worker` logs it).
    public private(set) var lastDigestMismatch: String?
    /// Scope registrations with the leader, by this worker's number.
    private var scopes: [UInt64: WorkerScope] = [:]
    private var nextRegistration: UInt64 = 0
    /// Registration replies above the replica's revision, adopted once it
    /// reaches theirs (DESIGN §6: the members they list are as of that revision).
    private var pendingReplies: [(registration: UInt64, revision: UInt64, members: [ScopeMember])] = []
    private var awaitingSnapshot = false
    /// The parts of the snapshot being received: its revision, the next
    /// part expected, and the entries so far.
    private var snapshotParts: (revision: UInt64, next: UInt64, entries: [SnapshotEntry])?
    /// When the snapshot last made progress (requested, or a part came):
    /// silence past `snapshotPatience` asks again (a part lost with a
    /// connection), waiting twice as long each time (a leader reading a very
    /// large state table may simply be slow) up to ten minutes.
    private var snapshotProgress = ContinuousClock.now
    private var snapshotPatience = Worker.initialSnapshotPatience
    static let initialSnapshotPatience: Duration = .seconds(30)
    /// How many parts the last snapshot applied came in.
    public private(set) var syncedParts: UInt64 = 0
    private var catchUpFrom: UInt64?
    /// The newest revision the leader has named (its welcomes), this epoch.
    private var leaderRevision: UInt64 = 0
    private var sequence: UInt64 = 0
    private var lastHeartbeat = ContinuousClock.now
    /// The event loop's read sources on the sockets' notification descriptors.
    private var sources: [any DispatchSourceRead] = []
    private var watchedDescriptors: [Int32] = []
    /// The suspended wait of `run`, resumed by a signal.
    private var wake: CheckedContinuation<Void, Never>?
    /// A signal arrived while no wait was under way.
    private var signalled = false
    /// Counts waits, so a timer knows whether its wait is still the current one.
    private var waits: UInt64 = 0
    /// Rejoining after the leader answered `gone`, `hello-first` or
    /// `revision-ahead`, until its next welcome.
    private var rejoining = false
    /// The scopes register anew on the next welcome of the same epoch.
    private var registerOnWelcome = false
    /// When the leader last sent this worker anything (its start, before then).
    public private(set) var lastHeardFromLeader = ContinuousClock.now
    /// Why the leader refuses this process the worker name (another process
    /// holds it), until a welcome: meanwhile it says hello every 250 ms.
    public private(set) var displaced: WireError?

    public init(configuration: Configuration, mechanisms: [any Mechanism]) throws {
        self.configuration = configuration
        self.mechanisms = mechanisms
        cogs = Cogs.replica()
        context = try ZMQContext()
        dealer = try ZMQSocket(context, .dealer)
        // The name, then a suffix of this process's own: the leader (not
        // ZeroMQ, which would refuse the connection silently) decides which
        // process may speak as the name.
        try dealer.setIdentity("\(configuration.name)/\(String(UInt32.random(in: 0...UInt32.max), radix: 16))")
        try dealer.setReconnect(initial: 100, maximum: 2_000)
        try dealer.connect(configuration.leaderEndpoint)
        cogs.remoteLink = self
        try send(.hello(worker: configuration.name, lastRevision: 0))
    }

    public func close() {
        watch([])
        dealer.close()
        subscriber?.close()
        context.close()
    }

    /// Serves until `stop` is set: handles what the leader sends as soon as
    /// its sockets signal (their notification descriptors, watched on the
    /// main queue), and at least every `tick` (heartbeats; a safety net for
    /// ZeroMQ's edge-like notifications). `afterPump` runs after each pass.
    ///
    /// - Important: runs on the main actor and yields between passes, so the
    ///   mechanisms' tasks run in between.
    public func run(
        until stop: StopFlag, tick: Duration = .milliseconds(10), afterPump: @MainActor () -> Void = {}
    ) async throws {
        defer { watch([]) }
        while !stop.isStopped {
            var worked = try pump()
            afterPump()
            watch(try [dealer.notificationDescriptor()] + (subscriber.map { [try $0.notificationDescriptor()] } ?? []))
            // Drain what arrived while working, then wait for a signal.
            while worked, !stop.isStopped {
                await Task.yield()
                worked = try pump()
                afterPump()
            }
            await waitForSignal(tick: tick)
        }
    }

    /// Watches `descriptors` (the sockets' notification descriptors) with
    /// read sources on the main queue; a signal ends the current wait.
    private func watch(_ descriptors: [Int32]) {
        guard descriptors != watchedDescriptors else { return }
        for source in sources { source.cancel() }
        watchedDescriptors = descriptors
        sources = descriptors.map { descriptor in
            let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: .main)
            source.setEventHandler { [weak self] in MainActor.assumeIsolated { self?.signal() } }
            source.resume()
            return source
        }
    }

    /// Suspends until a socket signals, a send asks for a look, or `tick` passes.
    private func waitForSignal(tick: Duration) async {
        if signalled {
            signalled = false
            return
        }
        waits &+= 1
        let wait = waits
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            wake = continuation
            let seconds = Double(tick.components.seconds) + Double(tick.components.attoseconds) / 1e18
            DispatchQueue.main.asyncAfter(deadline: .now() + seconds) { [weak self] in
                // Only this wait's timer ends it; an older one is stale.
                MainActor.assumeIsolated { if let self, self.waits == wait { self.signal() } }
            }
        }
        signalled = false
    }

    /// Ends the current wait (or the next one, if none is under way).
    private func signal() {
        if let wake {
            self.wake = nil
            wake.resume()
        } else {
            signalled = true
        }
    }

    /// Handles what is waiting; if nothing is, blocks up to `timeout` for the
    /// leader's sockets and handles what arrived. For callers with their own
    /// loop (tests, benchmarks, embedding); `run` is the event loop.
    @discardableResult
    public func pump(waitingUpTo timeout: Duration) throws -> Bool {
        if try pump() { return true }
        _ = try ZMQSocket.poll([dealer] + (subscriber.map { [$0] } ?? []), timeout: timeout)
        return try pump()
    }

    /// Handles everything waiting now; returns whether anything was.
    @discardableResult
    public func pump() throws -> Bool {
        var worked = false
        while let frames = try dealer.receive() {
            worked = true
            lastHeardFromLeader = .now
            guard let frame = frames.last, let message = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
            else { continue }
            try handle(message)
        }
        if let subscriber {
            while let frames = try subscriber.receive() {
                worked = true
                guard let frame = frames.last,
                    case .turns(let epoch, let records)? = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
                else { continue }
                if epoch != self.epoch { continue }
                try receive(records)
            }
        }
        if ContinuousClock.now - lastHeartbeat >= (displaced == nil ? configuration.heartbeatInterval : .milliseconds(250)) {
            lastHeartbeat = .now
            if displaced == nil {
                try send(.heartbeat(worker: configuration.name, revision: appliedRevision, stateDigest: stateDigest))
            } else {
                try send(.hello(worker: configuration.name, lastRevision: appliedRevision))
            }
        }
        return worked
    }

    private func handle(_ message: WireMessage) throws {
        switch message {
        case .welcome(let epoch, let lastRevision, let turnsEndpoint, let lastSequence):
            rejoining = false
            if registerOnWelcome {
                registerOnWelcome = false
                // Same epoch: the leader had dropped this worker; a new epoch
                // registers anew once the snapshot is applied.
                if self.epoch == epoch, isSynced { try registerScopesAnew() }
            }
            leaderRevision = max(self.epoch == epoch ? leaderRevision : 0, lastRevision)
            // Refused the name before, it now holds it: what it registered
            // under the name retired with the holder it replaced.
            let takesOver = displaced != nil && isSynced && self.epoch == epoch
            displaced = nil
            if takesOver { try registerScopesAnew() }
            // A worker restarted under the same name continues above the
            // requests its earlier run sent (the leader answers those from dedup).
            sequence = max(sequence, lastSequence)
            if self.epoch != epoch {
                // First contact or a new leader epoch: (re)subscribe, then fetch the state.
                self.epoch = epoch
                // Stop watching the old socket's descriptor before it closes
                // (a new socket may get the same number).
                watch([])
                subscriber?.close()
                let socket = try ZMQSocket(context, .subscriber)
                try socket.subscribeToAll()
                try socket.setHighWaterMarks(send: 1_000, receive: 100_000)
                try socket.connect(turnsEndpoint)
                subscriber = socket
                buffered = [:]
                catchUpFrom = nil
                try requestSnapshot()
            } else if awaitingSnapshot, ContinuousClock.now - snapshotProgress > snapshotPatience {
                snapshotPatience = min(snapshotPatience * 2, .seconds(600))
                try requestSnapshot()
            } else if !awaitingSnapshot, lastRevision > appliedRevision, catchUpFrom == nil {
                catchUpFrom = appliedRevision + 1
                try send(.catchUpRequest(from: appliedRevision + 1))
            }
        case .snapshot(let epoch, let revision, let part, let partNumber, let more, let snapshotDigest):
            guard epoch == self.epoch, awaitingSnapshot else { return }
            // Revisions stay far below 2^64 (the replica counts on from them):
            // a snapshot claiming more is refused, never trusted.
            guard revision < Leader.sequenceLimit else {
                errors.append(WireError(code: "malformed", message: "a snapshot claims revision \(revision); revisions are below 2^63"))
                return
            }
            snapshotProgress = .now
            // Parts come in order over one connection, each request's as one
            // run. A gap starts the snapshot over (once: the rest of that run
            // is ignored until a part 0 begins another).
            var entries = part
            if partNumber > 0 || more {
                if partNumber == 0 { snapshotParts = (revision, 0, []) }
                guard var parts = snapshotParts else { return }
                guard parts.revision == revision, parts.next == partNumber else {
                    try requestSnapshot()
                    return
                }
                parts.entries += part
                parts.next += 1
                snapshotParts = parts
                guard !more else { return }
                entries = parts.entries
            }
            syncedParts = partNumber + 1
            snapshotParts = nil
            snapshotPatience = Worker.initialSnapshotPatience
            awaitingSnapshot = false
            let absent = statesAbsent(from: entries)
            encodedState = [:]
            for entry in entries { encodedState[Worker.stateKey(entry.name, entry.key)] = entry.value }
            adoptSnapshotDigest(entries, snapshotDigest, revision: revision)
            let resync = isSynced
            // What the snapshot lacks holds its initial value again (as on the leader, where it has no entry).
            try cogs.restoreDurableState(
                named: "sync", writes: absent + entries.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                codec: replicaCodec)
            appliedRevision = revision
            syncedEpoch = epoch
            syncedRevision = revision
            pendingReplies = []
            let held = buffered.values.sorted { $0.revision < $1.revision }
            buffered = [:]
            try receive(held)
            if !isSynced {
                isSynced = true
                cogs.operateReplicaMechanisms(mechanisms)
            } else if resync {
                // A new leader epoch: every instance of the old one is dead;
                // register again (nested ones once their parents' new
                // instances are known).
                try registerScopesAnew()
            }
        case .turns(let epoch, let records):
            guard epoch == self.epoch else { return }
            catchUpFrom = nil
            try receive(records)
            // A catch-up reply stops at about a megabyte: ask on at once while
            // the leader is known to be further.
            if !awaitingSnapshot, catchUpFrom == nil, appliedRevision < leaderRevision {
                catchUpFrom = appliedRevision + 1
                try send(.catchUpRequest(from: appliedRevision + 1))
            }
        case .reply(let reply):
            keep(reply)
        case .scopeRegistered(_, let registration, let revision, let members):
            pendingReplies.append((registration, revision, members))
            adoptRegistrationReplies()
        case .error(let error):
            errors.append(error)
            // The newest ones only: a refused worker hears one every 250 ms.
            if errors.count > 100 { errors.removeFirst(errors.count - 100) }
            if error.code == "gone" || error.code == "hello-first", displaced == nil {
                // The leader gave this worker up (it was silent too long) and
                // retired its instances, or does not know this connection (it
                // restarted, or forgot a worker it gave up long ago): say hello
                // — again at each such answer, since a hello can be lost with
                // a leader that stops — and register the scopes anew once
                // welcomed (a new epoch re-syncs first). Meanwhile the
                // children's requests wait for their new instances.
                rejoining = true
                registerOnWelcome = true
                for scope in scopes.values { scope.forgetInstances() }
                try send(.hello(worker: configuration.name, lastRevision: appliedRevision))
            } else if error.code == "register-again", displaced == nil, isSynced {
                // The leader's commit failed: the registration it answered in
                // that batch was given up with it.
                try registerScopesAnew()
            } else if error.code == "revision-ahead", !rejoining {
                // The replica holds turns the leader's log does not (its data
                // folder went back): start over from the leader's state.
                rejoining = true
                epoch = nil
                appliedRevision = 0
                try send(.hello(worker: configuration.name, lastRevision: 0))
            } else if error.code == "name-in-use", displaced == nil {
                // Another process holds the name (this one started second, or
                // was replaced while frozen): its instances, if any, are gone;
                // say hello until the name is free.
                displaced = error
                for scope in scopes.values { scope.forgetInstances() }
            }
        default:
            break
        }
    }

    /// Asks for the whole state, in parts (any earlier parts are dropped).
    private func requestSnapshot() throws {
        awaitingSnapshot = true
        snapshotParts = nil
        snapshotProgress = .now
        try send(.snapshotRequest(inParts: true))
    }

    private func keep(_ reply: OpReply) {
        if replies.updateValue(reply, forKey: reply.request) == nil { replyOrder.append(reply.request) }
        if replyOrder.count > 2_048 {
            for request in replyOrder.prefix(1_024) { replies[request] = nil }
            replyOrder.removeFirst(1_024)
        }
    }

    /// Forgets every scope child's instance and registers the selectors
    /// again (the leader dropped them, or a new epoch did): open children get
    /// new instances, and their requests wait for them.
    private func registerScopesAnew() throws {
        for scope in scopes.values { scope.forgetInstances() }
        pruneRetiredScopes()
        for scope in scopes.values.sorted(by: { $0.spec.registration < $1.spec.registration }) {
            try register(scope)
        }
    }

    /// Applies records in revision order; holds back those above a gap and
    /// asks for what is missing.
    private func receive(_ records: [TurnRecord]) throws {
        for record in records where record.revision > appliedRevision {
            buffered[record.revision] = record
        }
        guard !awaitingSnapshot else { return }
        while let next = buffered.removeValue(forKey: appliedRevision + 1) {
            for write in next.writes {
                let key = Worker.stateKey(write.name, write.key)
                stateDigest.apply(name: write.name, key: write.key, old: encodedState[key], new: write.value)
                encodedState[key] = write.value
            }
            for event in next.scopeEvents where event.worker == configuration.name {
                guard let registration = event.registration, let scope = scopes[registration] else { continue }
                switch event.kind {
                case .open: scope.opened(event.identity ?? [], instance: event.instance)
                case .retire: scope.forget(event.identity ?? [], instance: event.instance)
                }
            }
            try cogs.applyReplicatedTurn(
                named: next.name, writes: next.writes.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                codec: replicaCodec)
            appliedRevision = next.revision
            adoptRegistrationReplies()
            if try digestDiffers(from: next) { break }
        }
        if !buffered.isEmpty, catchUpFrom == nil, !awaitingSnapshot {
            catchUpFrom = appliedRevision + 1
            try send(.catchUpRequest(from: appliedRevision + 1))
        }
        // Report progress soon (not only on the heartbeat), so the leader's lag figure is fresh.
        if displaced == nil, ContinuousClock.now - lastHeartbeat >= .milliseconds(100) {
            lastHeartbeat = .now
            try send(.heartbeat(worker: configuration.name, revision: appliedRevision, stateDigest: stateDigest))
        }
    }

    // MARK: State digest

    /// Whether the replica's state digest differs from the one `record`
    /// carries (the state after it): then the mismatch is counted, described
    /// and the replica re-syncs from a snapshot (records above wait for it).
    private func digestDiffers(from record: TurnRecord) throws -> Bool {
        guard record.stateDigest != stateDigest else { return false }
        digestMismatches += 1
        lastDigestMismatch =
            "state digest mismatch at revision \(record.revision): the record says \(record.stateDigest), "
            + "the replica has \(stateDigest); re-syncing from a snapshot"
        try requestSnapshot()
        return true
    }

    /// Sets the replica's digest after a snapshot: the one the leader sent
    /// with it (its records' digests follow from it). Entries that do not
    /// add up to it are a mismatch, counted and described — not re-synced:
    /// the leader would send the same.
    private func adoptSnapshotDigest(_ entries: [SnapshotEntry], _ sent: StateDigest?, revision: UInt64) {
        let computed = StateDigest(entries: entries.lazy.map { (name: $0.name, key: $0.key, value: $0.value) })
        stateDigest = sent ?? computed
        guard let sent, sent != computed else { return }
        digestMismatches += 1
        lastDigestMismatch =
            "state digest mismatch in the snapshot at revision \(revision): the leader says \(sent), its entries give \(computed) "
            + "(its state table may differ from its log: run `cogd log verify` on its data folder)"
    }

    /// The states the replica holds that `entries` (a snapshot) lacks, in
    /// key order, as writes of no value: a re-sync puts them back to their
    /// initial values.
    private func statesAbsent(from entries: [SnapshotEntry]) -> [CogDurableWrite] {
        guard !encodedState.isEmpty else { return [] }
        let kept = Set(entries.map { Worker.stateKey($0.name, $0.key) })
        return encodedState.keys.filter { !kept.contains($0) }.sorted { $0.lexicographicallyPrecedes($1) }.map { stored in
            let split = stored.firstIndex(of: 0) ?? stored.count
            let key = split < stored.count ? Array(stored[(split + 1)...]) : []
            return CogDurableWrite(name: String(decoding: stored[..<split], as: UTF8.self), key: key.isEmpty ? nil : key, value: nil)
        }
    }

    // MARK: CogRemoteLink

    public var codec: any CogDurableStore { replicaCodec }

    public func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?) {
        guard sequence < Leader.sequenceLimit - 1 else {
            // The leader never answers a sequence this high (a request in
            // this name claimed it): refuse locally instead of overflowing.
            keep(
                OpReply(
                    request: RequestID(worker: configuration.name, sequence: sequence),
                    outcome: .rejected(reason: "bad-request: the worker name \(configuration.name) has used every request sequence; choose another --name")))
            return
        }
        sequence += 1
        let request = RequestID(worker: configuration.name, sequence: sequence)
        guard let bytes = try? CBOREncoder().encode(argument) else {
            keep(OpReply(request: request, outcome: .rejected(reason: "argument does not encode")))
            return
        }
        let turnName = owner.map { "\($0.path).\(name)" } ?? name
        guard let slot = owner?.owningSlot else {
            try? send(.op(OpRequest(request: request, op: name, argument: bytes, instance: nil, name: turnName)))
            return
        }
        if let instance = slot.instance {
            try? send(.op(OpRequest(request: request, op: name, argument: bytes, instance: instance, name: turnName)))
        } else {
            // The leader has not told us this child's instance yet: send once it has.
            slot.waiting.append { [weak self] instance in
                try? self?.send(.op(OpRequest(request: request, op: name, argument: bytes, instance: instance, name: turnName)))
            }
        }
    }

    public func registerScope(
        path: String, source: String, key: [UInt8]?, form: CogScopeForm, parent: CogInstanceSlot?,
        currentEncoding: (@MainActor () -> [UInt8]?)?
    ) -> (any CogRemoteScope)? {
        pruneRetiredScopes()
        nextRegistration += 1
        let spec = ScopeRegistration(
            worker: configuration.name, registration: nextRegistration, path: path, source: source, key: key,
            form: ScopeRegistration.Form(rawValue: form.rawValue) ?? .each)
        let scope = WorkerScope(spec: spec, parent: parent, worker: self, currentEncoding: currentEncoding)
        scopes[nextRegistration] = scope
        try? register(scope)
        return scope
    }

    /// Adopts the registration replies the replica has caught up with.
    private func adoptRegistrationReplies() {
        guard !pendingReplies.isEmpty else { return }
        var later: [(registration: UInt64, revision: UInt64, members: [ScopeMember])] = []
        for reply in pendingReplies {
            if reply.revision > appliedRevision {
                later.append(reply)
            } else {
                scopes[reply.registration]?.adopt(reply.members)
            }
        }
        pendingReplies = later
    }

    /// Sends a registration; a nested one waits until its parent's instance
    /// of the current epoch is known, and is not sent once the parent retired.
    private func register(_ scope: WorkerScope) throws {
        scope.willRegister()
        guard let parent = scope.parent else {
            try send(.scopeRegister(scope.spec))
            return
        }
        guard !parent.isRetired else { return }
        if let instance = parent.instance, let epoch, ScopeTable.epoch(of: instance) == epoch {
            try send(.scopeRegister(scope.registration(parent: instance)))
        } else {
            parent.waiting.append { [weak self, weak scope] instance in
                guard let self, let scope, self.scopes[scope.spec.registration] === scope else { return }
                try? self.send(.scopeRegister(scope.registration(parent: instance)))
            }
        }
    }

    /// Forgets registrations made inside scope children that have retired
    /// (the leader dropped them with their parent instance).
    private func pruneRetiredScopes() {
        for (number, scope) in scopes where scope.parent?.isRetired == true { scopes[number] = nil }
    }

    /// The encoded value of a durable state on the replica.
    func encodedValue(_ name: String, _ key: [UInt8]?) -> [UInt8]? {
        encodedState[Worker.stateKey(name, key)]
    }

    static func stateKey(_ name: String, _ key: [UInt8]?) -> [UInt8] {
        Array(name.utf8) + [0] + (key ?? [])
    }

    private func send(_ message: WireMessage) throws {
        try dealer.send([message.encoded()], wait: false)
        // Sending can consume the socket's notification of a reply already
        // waiting; look again rather than wait for the next one.
        signal()
    }
}

/// Decodes replicated values with the log's codec.
@MainActor
final class ReplicaCodec: CogDurableStore {
    private let encoder = CBOREncoder()
    private let decoder = CBORDecoder()

    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try encoder.encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try decoder.decode(type, from: bytes) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { nil }
    func commit(_ turn: CogDurableTurn) throws {}
}

/// One scope registration on the worker: maps members to the instances the
/// leader minted for them and fills the slots of the children opened locally.
@MainActor
final class WorkerScope: CogRemoteScope {
    let spec: ScopeRegistration
    /// The instance of the scope child this selector was declared in.
    let parent: CogInstanceSlot?
    unowned let worker: Worker
    /// Encodes an automatic selector's value on the replica (nil for a durable source).
    private let currentEncoding: (@MainActor () -> [UInt8]?)?
    private var instances: [[UInt8]: UInt64] = [:]
    private var slots: [[UInt8]: CogInstanceSlot] = [:]

    init(spec: ScopeRegistration, parent: CogInstanceSlot?, worker: Worker, currentEncoding: (@MainActor () -> [UInt8]?)?) {
        self.spec = spec
        self.parent = parent
        self.worker = worker
        self.currentEncoding = currentEncoding
    }

    /// The registration as sent, under the parent's current instance.
    func registration(parent instance: UInt64) -> ScopeRegistration {
        var spec = spec
        spec.parent = instance
        return spec
    }

    func memberIdentities() -> [[UInt8]] {
        let value = currentEncoding.map { $0() } ?? worker.encodedValue(spec.source, spec.key)
        return ScopeTable.members(of: value, form: spec.form)
    }

    func childSlot(identity: [UInt8]) -> CogInstanceSlot {
        let slot = CogInstanceSlot(instance: instances[identity])
        slots[identity] = slot
        return slot
    }

    /// Identities an event changed since the registration was (re)sent: a
    /// registration reply that arrives later is older news for them.
    private var touched: Set<[UInt8]> = []

    /// The leader retired every instance of this worker: the children's
    /// requests wait for the instances the new registration brings.
    func forgetInstances() {
        instances = [:]
        for slot in slots.values where !slot.isRetired { slot.instance = nil }
    }

    /// The registration is being (re)sent (a new epoch's instances replace the old).
    func willRegister() {
        touched = []
        instances = [:]
    }

    /// The registration reply's members, as of the revision the replica has
    /// now reached (or passed: members an event changed since are skipped).
    func adopt(_ members: [ScopeMember]) {
        for member in members where !touched.contains(member.identity) {
            instances[member.identity] = member.instance
            guard let slot = slots[member.identity], !slot.isRetired else { continue }
            slot.resolve(member.instance)
        }
    }

    /// An open event minted `instance` for `identity`.
    func opened(_ identity: [UInt8], instance: UInt64) {
        touched.insert(identity)
        instances[identity] = instance
        guard let slot = slots[identity], !slot.isRetired else { return }
        // A slot still holding a dead epoch's instance takes the new one.
        if slot.instance.map({ ScopeTable.epoch(of: $0) < ScopeTable.epoch(of: instance) }) ?? true { slot.resolve(instance) }
    }

    /// The leader retired the member's instance. A retirement of an
    /// instance this scope no longer pairs with the member (the registration
    /// was sent again, or dropped, since) is old news and changes nothing.
    func forget(_ identity: [UInt8], instance: UInt64) {
        guard (instances[identity] ?? slots[identity]?.instance) == instance else { return }
        touched.insert(identity)
        instances[identity] = nil
        if let slot = slots[identity], slot.isRetired || slot.instance != nil { slots[identity] = nil }
    }
}
