import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Dispatch
import Foundation

/// A worker: keeps a replica of the leader's graph from the durable turn
/// stream, hosts mechanisms, and sends ops to the leader (`protocol/cogwire.md` §5–§6).
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
        /// The leader's requests endpoint; for an HA cluster, every node's,
        /// separated by commas (`ha.md` §10): the worker uses one at a time
        /// and goes to another when a standby answers `not-leader` or the
        /// one it uses is silent for its lease.
        public var leaderEndpoint: String
        public var heartbeatInterval: Duration
        /// The fingerprint of the rig it runs, sent with each hello (nil: none is sent).
        public var rig: CogRig.Fingerprint?
        /// Its key and the leader's public key, for a leader that
        /// authenticates (CURVE, `protocol/cogwire.md` §9); nil: none.
        public var keys: CurveClientKeys?
        /// The worker group it joins (`cogwire.md` §6a): with a leader that
        /// places groups, each scope child of a top-level selector opens on
        /// one worker of the group only. Nil: every child opens here.
        public var group: String?
        /// The keys of its app settings (`cogd worker --set`), named in its
        /// hello so `cogd status` shows them; never the values. Nil: none.
        public var settingKeys: [String]?
        /// The leader's heartbeat timeout (`cogd leader --heartbeat-timeout`,
        /// 5 s unless set): the worker's lease is this less its margin
        /// (`ReplicaCore.lease(heartbeatTimeout:)`, `cogwire.md` §6b). Past
        /// the lease with no welcome, the instances placed here stop their
        /// effects until one comes.
        public var leaderHeartbeatTimeout: Duration = .seconds(5)

        public init(
            name: String, leaderEndpoint: String = "tcp://127.0.0.1:5701", heartbeatInterval: Duration = .seconds(1),
            rig: CogRig.Fingerprint? = nil
        ) {
            self.name = name
            self.leaderEndpoint = leaderEndpoint
            self.heartbeatInterval = heartbeatInterval
            self.rig = rig
        }
    }

    public let configuration: Configuration
    /// The endpoints `configuration.leaderEndpoint` lists, and the one in use.
    public let leaderEndpoints: [String]
    public private(set) var currentLeaderEndpoint: String
    /// How many times the worker went to another node (`not-leader`, or silence).
    public private(set) var leaderSwitches: UInt64 = 0
    /// The newest `not-leader` answer: the node it named and its epoch (empty, 0: none leads).
    public private(set) var lastNotLeader: (leader: String, epoch: UInt64)?
    /// When the worker last went to another node.
    private var lastSwitch = ContinuousClock.now
    /// A `not-leader` that came within `switchPause` of the last switch: acted on when the pause ends.
    private var pendingSwitch: String?
    /// The node last left because it was silent for the lease, and when (ha.md §10).
    private var leftSilent: (endpoint: String, at: ContinuousClock.Instant)?
    /// Whether the node asked now is one left for silence that a standby's
    /// `not-leader` sent the worker back to (it names a dead leader until
    /// etcd lets its key go): it is given `probeSilence`, not a lease.
    public private(set) var probing = false
    /// How long a node probed may stay silent before the worker moves on.
    public static let probeSilence: Duration = .seconds(1)
    /// The shortest time between two switches: while no node leads, each
    /// standby's `not-leader` does not send the worker round at network speed.
    public static let switchPause: Duration = .milliseconds(500)
    /// The replica: changed only by applied turns.
    public let cogs: Cogs
    private let context: ZMQContext
    private let dealer: ZMQSocket
    /// Sees the requests connection's handshakes fail (a refused key).
    private let handshakes: HandshakeWatch
    /// The turn stream's endpoint and its handshakes.
    private var subscribedEndpoint: String?
    private var subscriberHandshakes: HandshakeWatch?
    /// When the worker last connected again after a failed handshake.
    private var lastHandshakeRetry = ContinuousClock.now
    /// ZeroMQ gives up a connection whose security handshake failed (it does
    /// not reconnect after a refusal); the worker connects again this often
    /// while the failure lasts, so a key added to the peers file (and
    /// reloaded) lets it in without a restart.
    public static let handshakeRetryInterval: Duration = .seconds(5)
    private var subscriber: ZMQSocket?
    private let mechanisms: [any Mechanism]
    private let replicaCodec = ReplicaCodec()

    /// The sync rules: everything about following the leader happens in here.
    private(set) var core: ReplicaCore
    /// When the worker started: the core's clock counts from here.
    private let start = ContinuousClock.now
    private var now: Duration { ContinuousClock.now - start }

    /// What the replica's operator is told since the last call, oldest
    /// first (`ReplicaCore.Event`; `cogd worker` logs each).
    public func takeEvents() -> [ReplicaCore.Event] { core.takeEvents() }
    /// Events the core could not keep between two `takeEvents` (more than `ReplicaCore.maximumEvents`).
    public var droppedEvents: UInt64 { core.droppedEvents }

    /// The newest revision applied to the replica.
    public var appliedRevision: UInt64 { core.appliedRevision }
    /// The leader epoch the replica follows.
    public var epoch: UInt64? { core.epoch }
    /// Whether the first snapshot has been applied (mechanisms operate then).
    public var isSynced: Bool { core.isSynced }
    /// The epoch of the last snapshot applied.
    public var syncedEpoch: UInt64? { core.syncedEpoch }
    /// The revision of the last snapshot applied (what "synced at" reports;
    /// the replica may have applied more since, in the same pass).
    public var syncedRevision: UInt64 { core.syncedRevision }
    /// How many parts the last snapshot applied came in.
    public var syncedParts: UInt64 { core.syncedParts }
    /// Why the leader refuses this process the worker name (another process
    /// holds it), until a welcome: meanwhile it says hello again, 0.5 s
    /// doubling to 5 s apart (`ReplicaCore.nameRetryInitial`).
    public var displaced: WireError? { core.displaced }
    /// Why the leader refuses the rig this worker runs (`rig-mismatch`),
    /// until a welcome: meanwhile it says hello every 5 s.
    public var rigRefused: WireError? { core.rigRefused }
    /// Why the leader refuses this worker's key the name or what it asks
    /// (`unknown-key`, `not-your-name`, `role-forbids`), until a welcome:
    /// meanwhile it says hello every 5 s.
    public var accessRefused: WireError? { core.accessRefused }
    /// How many times the replica was discarded because the leader's log
    /// holds less than it (`revision-ahead`), and the last time, in detail
    /// (`cogd worker` logs each).
    public var startOvers: UInt64 { core.startOvers }
    public var lastStartOver: ReplicaCore.StartOver? { core.lastStartOver }
    /// Whether the leader welcomed this worker and has not refused or dropped it since.
    public var hasJoined: Bool { core.hasJoined }
    /// How many times the leader gave this worker up (`gone`; `cogd worker` logs each).
    public var timesGivenUp: UInt64 { core.timesGivenUp }
    /// Whether the lease has run out (no welcome within it): the instances
    /// placed here have their tasks cancelled and their reactions held until
    /// a welcome renews it (`cogwire.md` §6b; `cogd worker` logs
    /// `lease-expired` and `lease-renewed`).
    public var isSuspended: Bool { core.isSuspended }
    /// How many times the lease ran out, and was renewed after that.
    public var leaseExpiries: UInt64 { core.leaseExpiries }
    public var leaseRenewals: UInt64 { core.leaseRenewals }
    /// The lease: the leader's heartbeat timeout less the margin.
    public var lease: Duration? { core.settings.lease }
    /// The state digest of the replica (`protocol/turnlog.md`).
    public var stateDigest: StateDigest { core.stateDigest }
    /// How many applied records (and snapshots) carried another state
    /// digest than the replica's; a record's mismatch re-syncs from a snapshot.
    public var digestMismatches: Int { core.digestMismatches }
    /// The last mismatch, in words (`cogd worker` logs it).
    public var lastDigestMismatch: String? { core.lastDigestMismatch }
    /// How many catch-ups the leader answered `compacted` (the records were
    /// no longer in its log, `protocol/cogwire.md` §5), each followed by a snapshot.
    public var compactedCatchUps: Int { core.compactedCatchUps }
    /// The replies to this worker's newest requests (the last 1,024 to 2,048
    /// of them: a long-running worker keeps no history of every request).
    public private(set) var replies: [RequestID: OpReply] = [:]
    /// `replies`' keys, oldest first.
    private var replyOrder: [RequestID] = []
    /// What waits for the answer to a request (`perform(_:_:then:)`), and
    /// the requests in the order they were sent (answered ones too, until
    /// compacted; those before `pendingOutcomeHead` are done with).
    private var pendingOutcomes: [RequestID: @MainActor (OpOutcome) -> Void] = [:]
    private var pendingOutcomeOrder: [RequestID] = []
    private var pendingOutcomeHead = 0
    /// `close` was called: no answer is waited for any more.
    private var isClosed = false
    /// Error messages the leader sent this worker.
    public private(set) var errors: [WireError] = []
    /// Messages from the leader this worker could not decode (dropped).
    public private(set) var undecodableMessages: UInt64 = 0
    /// Scope registrations with the leader, by this worker's number.
    private var scopes: [UInt64: WorkerScope] = [:]
    private var nextRegistration: UInt64 = 0
    /// Requests whose scope child retired before the leader named its
    /// instance, to answer at the next pass (`answerAbandonedRequests`).
    private var abandonedRequests: [(request: RequestID, about: WorkerRejections.Sent)] = []
    /// Which instance each member of each registration has, as of the
    /// applied revision (`ReplicaScopes`: the rules; the scopes here fill
    /// and drop their child slots as it says).
    private var scopeBook = ReplicaScopes()
    /// The event loop's read sources on the sockets' notification descriptors.
    private var sources: [any DispatchSourceRead] = []
    private var watchedDescriptors: [Int32] = []
    /// The suspended wait of `run`, resumed by a signal.
    private var wake: CheckedContinuation<Void, Never>?
    /// A signal arrived while no wait was under way.
    private var signalled = false
    /// Counts waits, so a timer knows whether its wait is still the current one.
    private var waits: UInt64 = 0
    /// When the leader last sent this worker anything (its start, before then).
    public private(set) var lastHeardFromLeader = ContinuousClock.now
    /// Whether the leader ever sent this worker anything (a refusal too).
    public private(set) var hasHeardFromLeader = false
    /// A pass of `run` that came this long after the previous one means the
    /// process itself did not run meanwhile (stopped with SIGSTOP, a
    /// suspended VM, a starved host, a mechanism blocking the main actor):
    /// passes are normally 10 ms apart at most.
    public static let stallThreshold: Duration = .seconds(1)
    /// The newest such stall of this process: how long, and when it ended.
    public private(set) var lastStall: (duration: Duration, endedAt: ContinuousClock.Instant)?
    /// When `run` last began a pass.
    private var lastPass: ContinuousClock.Instant?
    /// How long the leader has been silent, counted from this process's own
    /// last stall when that ended later (as the leader counts a worker's
    /// silence from its own return): a worker that was itself stopped does
    /// not blame the leader for the time it did not listen.
    public var leaderSilence: Duration {
        let since = max(lastHeardFromLeader, lastStall?.endedAt ?? lastHeardFromLeader)
        return ContinuousClock.now - since
    }
    /// How many of this worker's messages the leader refused `malformed`
    /// (its build and the leader disagree on the protocol, or its name or
    /// group breaks the leader's rules), and the newest such refusal.
    public private(set) var malformedRefusals: UInt64 = 0
    public private(set) var lastMalformedRefusal: WireError?
    /// What the operator sees (`/metrics`, `Worker+Operations.swift`).
    public internal(set) var operations = WorkerOperations()
    /// The rejections of this worker's own requests: kept for the log,
    /// counted by op and code (`takeRejections`, `/metrics`).
    public internal(set) var rejections = WorkerRejections()

    /// The rejections of this worker's requests since the last call (each
    /// to be logged), and how many more there were (past
    /// `WorkerRejections.reportsKept`; all of them are counted).
    public func takeRejections() -> (rejections: [WorkerRejections.Rejection], dropped: UInt64) {
        rejections.take()
    }

    public init(configuration: Configuration, mechanisms: [any Mechanism]) throws {
        self.configuration = configuration
        self.mechanisms = mechanisms
        leaderEndpoints = Worker.endpoints(configuration.leaderEndpoint)
        currentLeaderEndpoint = leaderEndpoints.first ?? configuration.leaderEndpoint
        var replicaSettings = ReplicaCore.Settings(
            name: configuration.name, heartbeatInterval: configuration.heartbeatInterval, rig: configuration.rig, group: configuration.group,
            lease: ReplicaCore.lease(heartbeatTimeout: configuration.leaderHeartbeatTimeout))
        replicaSettings.settingKeys = configuration.settingKeys
        core = ReplicaCore(settings: replicaSettings)
        cogs = Cogs.replica()
        context = try ZMQContext()
        dealer = try ZMQSocket(context, .dealer)
        try dealer.setHighWaterMarks(send: Worker.sendQueueLimit, receive: 1_000)
        // The name, then a suffix of this process's own: the leader (not
        // ZeroMQ, which would refuse the connection silently) decides which
        // process may speak as the name.
        try dealer.setIdentity(Worker.routingIdentity(name: configuration.name, suffix: UInt32.random(in: 0...UInt32.max)))
        try dealer.setReconnect(initial: 100, maximum: 2_000)
        try dealer.useCurve(configuration.keys)
        handshakes = try HandshakeWatch(dealer)
        try dealer.connect(currentLeaderEndpoint)
        cogs.remoteLink = self
        try carryOut(core.step(.start, now: now))
    }

    /// The requests connection's routing identity (`cogwire.md` §1): the
    /// name, `/` and a suffix of this process's own, within ZeroMQ's 255
    /// bytes — a name too long for that (over 246 bytes) gives its first
    /// whole characters that fit (the leader reads names from messages, never
    /// from identities).
    static func routingIdentity(name: String, suffix: UInt32) -> String {
        let tail = "/" + String(suffix, radix: 16)
        var head = Substring(name)
        while head.utf8.count + tail.utf8.count > 255 { head = head.dropLast() }
        return head + tail
    }

    /// The endpoints a `--leader` value lists: split at commas, blanks trimmed, empty ones dropped.
    public nonisolated static func endpoints(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Goes to another node of the cluster: `named` when the list holds it,
    /// else the next one. Nothing goes anywhere the list does not name.
    private func switchLeader(toward named: String) throws {
        guard leaderEndpoints.count > 1 else { return }
        guard ContinuousClock.now - lastSwitch >= Worker.switchPause else {
            pendingSwitch = named
            return
        }
        pendingSwitch = nil
        let index = leaderEndpoints.firstIndex(of: currentLeaderEndpoint) ?? 0
        let target =
            leaderEndpoints.contains(named) && named != currentLeaderEndpoint
            ? named : leaderEndpoints[(index + 1) % leaderEndpoints.count]
        try? dealer.disconnect(currentLeaderEndpoint)
        // Back, within twice its lease, to a node left for its silence: only probed.
        probing = leftSilent.map { $0.endpoint == target && ContinuousClock.now - $0.at < core.lowerEpochWindow * 2 } ?? false
        currentLeaderEndpoint = target
        try dealer.connect(target)
        // One instant for both: a node heard from after it (`lastHeardFromLeader > lastSwitch`) answered since the switch.
        let switched = ContinuousClock.now
        lastSwitch = switched
        lastHeardFromLeader = switched
        leaderSwitches &+= 1
        try carryOut(core.step(.reconnected, now: now))
    }

    /// With several nodes listed: a `not-leader` waiting out the pause, or
    /// a node silent for the worker's lease, sends it to another.
    private func followLeaderIfNeeded() throws {
        guard leaderEndpoints.count > 1 else { return }
        // A node probed that answered since the switch is a node like any other.
        if probing, lastHeardFromLeader > lastSwitch { probing = false }
        let limit = probing ? Worker.probeSilence : core.lowerEpochWindow
        if let pendingSwitch, ContinuousClock.now - lastSwitch >= Worker.switchPause {
            try switchLeader(toward: pendingSwitch)
        } else if leaderSilence >= limit, ContinuousClock.now - lastSwitch >= limit {
            if !probing { leftSilent = (currentLeaderEndpoint, .now) }
            try switchLeader(toward: "")
        }
    }

    /// Connects again where a handshake was refused or broke the protocol
    /// (at most every `handshakeRetryInterval`): ZeroMQ stops there, while
    /// after a dropped connection it reconnects by itself (and a second
    /// connection beside it would be refused its identity).
    private func retryFailedHandshakes() {
        guard ContinuousClock.now - lastHandshakeRetry >= Worker.handshakeRetryInterval else { return }
        func givenUp(_ watch: HandshakeWatch?) -> Bool {
            switch (try? watch?.problem()) ?? nil {
            case .refused?, .mechanismMismatch?, .protocolError?: true
            case .noDetail?, nil: false
            }
        }
        if givenUp(handshakes) {
            lastHandshakeRetry = .now
            try? dealer.disconnect(currentLeaderEndpoint)
            try? dealer.connect(currentLeaderEndpoint)
        }
        if let subscriber, let endpoint = subscribedEndpoint, givenUp(subscriberHandshakes) {
            lastHandshakeRetry = .now
            try? subscriber.disconnect(endpoint)
            try? subscriber.connect(endpoint)
        }
    }

    /// Why the leader's security handshake fails, until one succeeds
    /// (a key not in its peers file, a wrong leader key, no key for a
    /// leader that authenticates): ZeroMQ meanwhile keeps trying.
    public func handshakeProblem() -> HandshakeWatch.Problem? {
        (try? handshakes.problem()) ?? nil
    }

    /// Gives the name up as the process stops cleanly (`goodbye`,
    /// `cogwire.md` §3): the leader drops it at once and its scope instances
    /// retire in a `cogd.workerGone` record, as at the heartbeat timeout. Sent
    /// only once the leader welcomed it (a leader that finds another
    /// connection holding the name refuses it and changes nothing); `close`
    /// waits up to half a second to send it.
    public func sayGoodbye() {
        guard core.hasJoined else { return }
        dealer.sayGoodbye(as: configuration.name)
    }

    public func close() {
        isClosed = true
        abandonPendingOutcomes()
        watch([])
        dealer.close()
        handshakes.close()
        subscriber?.close()
        subscriberHandshakes?.close()
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
            notePass()
            var worked = try pump()
            afterPump()
            watch(try [dealer.notificationDescriptor()] + (subscriber.map { [try $0.notificationDescriptor()] } ?? []))
            // Drain what arrived while working, then wait for a signal.
            while worked, !stop.isStopped {
                await Task.yield()
                notePass()
                worked = try pump()
                afterPump()
            }
            await waitForSignal(tick: tick)
        }
    }

    /// Notes a pass of `run`, and a stall when it comes long after the last.
    private func notePass() {
        let instant = ContinuousClock.now
        if let lastPass, instant - lastPass >= Worker.stallThreshold { lastStall = (instant - lastPass, instant) }
        lastPass = instant
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
        var worked = answerAbandonedRequests()
        while let frames = try dealer.receive() {
            worked = true
            lastHeardFromLeader = .now
            hasHeardFromLeader = true
            guard let frame = frames.last, let message = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
            else {
                undecodableMessages += 1
                continue
            }
            if case .welcome(_, let lastRevision, _, _, _) = message { operations.sawRevision(lastRevision) }
            if case .error(let error) = message, error.code == .malformed {
                malformedRefusals &+= 1
                lastMalformedRefusal = error
            }
            try carryOut(core.step(.leader(message), now: now))
        }
        if let subscriber {
            while let frames = try subscriber.receive() {
                worked = true
                guard let frame = frames.last,
                    case .turns(let epoch, let records)? = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
                else {
                    undecodableMessages += 1
                    continue
                }
                if let last = records.last { operations.sawRevision(last.revision) }
                try carryOut(core.step(.published(epoch: epoch, records: records), now: now))
            }
        }
        retryFailedHandshakes()
        try followLeaderIfNeeded()
        try carryOut(core.step(.tick, now: now))
        retryUnsentRegistrations()
        return worked
    }

    /// Does what the core asks, in order.
    private func carryOut(_ effects: [ReplicaCore.Effect]) throws {
        for effect in effects {
            switch effect {
            case .send(let message):
                if case .hello = message { operations.hellos &+= 1 }
                try send(message)
            case .subscribe(let turnsEndpoint):
                // Stop watching the old socket's descriptor before it closes
                // (a new socket may get the same number).
                watch([])
                subscriber?.close()
                subscriberHandshakes?.close()
                let socket = try ZMQSocket(context, .subscriber)
                try socket.subscribeToAll()
                try socket.setHighWaterMarks(send: 1_000, receive: 100_000)
                try socket.useCurve(configuration.keys)
                subscriberHandshakes = try HandshakeWatch(socket)
                try socket.connect(turnsEndpoint)
                subscriber = socket
                subscribedEndpoint = turnsEndpoint
            case .applySnapshot(_, let entries, let absent):
                // What the snapshot lacks holds its initial value again (as on
                // the leader, where it has no entry), in the same turn.
                do {
                    try cogs.restoreDurableState(
                        named: "sync",
                        writes: absent.map { CogDurableWrite(name: $0.name, key: $0.key, value: nil) }
                            + entries.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                        codec: replicaCodec)
                } catch {
                    throw ReplicaDecodeError(at: "the snapshot of revision \(core.syncedRevision)", error)
                }
                scopeBook.snapshotApplied()
                operations.snapshotsApplied &+= 1
            case .apply(let record):
                let scopes = self.scopes
                // The events' instances before the turn's writes reach the graph, the replies it reaches after.
                var placementsChanged = perform(scopeBook.applied(record, worker: configuration.name) { scopes[$0]?.slotInstance($1) })
                defer { for scope in placementsChanged { scope.placementChanged() } }
                do {
                    try cogs.applyReplicatedTurn(
                        named: record.name, writes: record.writes.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                        codec: replicaCodec)
                } catch {
                    throw ReplicaDecodeError(at: "revision \(record.revision) (\(record.name))", error)
                }
                for scope in perform(scopeBook.reached(record.revision)) where !placementsChanged.contains(where: { $0 === scope }) {
                    placementsChanged.append(scope)
                }
            case .firstSync:
                cogs.operateReplicaMechanisms(mechanisms)
            case .registerScopesAnew:
                registerScopesAnew()
            case .forgetInstances:
                scopeBook.forgetInstances()
                for scope in scopes.values { scope.forgetInstances() }
                for scope in scopes.values where scope.isPlaced { scope.placementChanged() }
            case .reply(let reply):
                answer(reply)
            case .registered(let registration, let revision, let members):
                for scope in perform(scopeBook.replied(registration: registration, revision: revision, members: members, applied: core.appliedRevision)) {
                    scope.placementChanged()
                }
            case .suspendEffects, .resumeEffects:
                // Placed instances are placed here only while the lease holds
                // (`WorkerScope.owns`): the scope machinery retires their
                // lifetimes now — tasks cancelled, reactions stopped, requests
                // dropped — before anything later in this pass is applied, and
                // opens them again on renewal, as after a placement (`cogwire.md` §6b).
                for scope in scopes.values where scope.isPlaced { scope.placementChanged() }
            case .followLeader(let endpoint, let epoch):
                lastNotLeader = (endpoint, epoch)
                try switchLeader(toward: endpoint)
            case .refused(let error):
                errors.append(error)
                // The newest ones only: a refused worker hears one every few seconds for as long as it is refused.
                if errors.count > 100 { errors.removeFirst(errors.count - 100) }
            }
        }
    }

    /// A request answered (by the leader, or here for one that could not
    /// go): counted by outcome, a rejection noted for the log and counted by
    /// op and code, and the reply kept. `about` names a request answered
    /// before it was sent.
    ///
    /// What waits for the request's outcome is told last, with the worker's
    /// own books already kept; `tellingWaiter` false for an answer whose id
    /// is not the request's own (the sequence ran out), which must not reach
    /// the waiter of the request that holds that id.
    private func answer(_ reply: OpReply, about: WorkerRejections.Sent? = nil, tellingWaiter: Bool = true) {
        operations.count(reply.outcome)
        rejections.answered(reply, op: about)
        keep(reply)
        if tellingWaiter, let observer = pendingOutcomes.removeValue(forKey: reply.request) { observer(OpOutcome(reply.outcome)) }
    }

    /// Keeps `observer` until `request` is answered, answering the oldest
    /// waiter `unavailable` past `pendingOutcomesLimit`.
    private func awaitOutcome(of request: RequestID, _ observer: @escaping @MainActor (OpOutcome) -> Void) {
        if pendingOutcomes.updateValue(observer, forKey: request) == nil { pendingOutcomeOrder.append(request) }
        var evicted: [@MainActor (OpOutcome) -> Void] = []
        while pendingOutcomes.count > Worker.pendingOutcomesLimit, pendingOutcomeHead < pendingOutcomeOrder.count {
            let oldest = pendingOutcomeOrder[pendingOutcomeHead]
            pendingOutcomeHead += 1
            if let old = pendingOutcomes.removeValue(forKey: oldest) { evicted.append(old) }
        }
        // The order keeps answered requests until it is compacted: at most twice the limit.
        if pendingOutcomeOrder.count > 2 * Worker.pendingOutcomesLimit {
            pendingOutcomeOrder = pendingOutcomeOrder[pendingOutcomeHead...].filter { pendingOutcomes[$0] != nil }
            pendingOutcomeHead = 0
        }
        for old in evicted {
            old(
                .rejected(
                    code: CogdCode.unavailable.text,
                    detail: "no longer waited for: more than \(Worker.pendingOutcomesLimit) requests of this worker await answers; it may still be applied"))
        }
    }

    /// Answers every waiter `unavailable`: the worker stops listening.
    private func abandonPendingOutcomes() {
        let waiting = pendingOutcomeOrder[pendingOutcomeHead...].compactMap { pendingOutcomes.removeValue(forKey: $0) }
        pendingOutcomes = [:]
        pendingOutcomeOrder = []
        pendingOutcomeHead = 0
        for observer in waiting {
            observer(.rejected(code: CogdCode.unavailable.text, detail: "the worker closed before the answer; it may still be applied"))
        }
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
    private func registerScopesAnew() {
        scopeBook.dropUnsent()
        scopeBook.forgetInstances()
        for scope in scopes.values { scope.forgetInstances() }
        pruneRetiredScopes()
        for scope in scopes.values.sorted(by: { $0.spec.registration < $1.spec.registration }) {
            register(scope)
        }
    }

    // MARK: CogRemoteLink

    public var codec: any CogDurableStore { replicaCodec }

    public func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?) {
        submit(op: name, argument: argument, owner: owner, observer: nil)
    }

    public func submit(
        op name: String, argument: any Encodable & Sendable, owner: MechanismController?, outcome: @escaping @MainActor (OpOutcome) -> Void
    ) {
        submit(op: name, argument: argument, owner: owner, observer: outcome)
    }

    /// How many answers this worker waits for on behalf of
    /// `perform(_:_:then:)` and `performAndWait` callers (as many as it
    /// remembers unanswered requests, `WorkerRejections.requestsRemembered`).
    /// Past it the oldest waiter is answered here, `rejected`
    /// `unavailable` ("no longer waited for"), though its request may
    /// still be applied: a leader that stops answering cannot make the
    /// worker's memory grow.
    public static let pendingOutcomesLimit = WorkerRejections.requestsRemembered

    /// How many answers are waited for now (`perform(_:_:then:)`).
    public var pendingOutcomeCount: Int { pendingOutcomes.count }

    private func submit(
        op name: String, argument: any Encodable & Sendable, owner: MechanismController?, observer: (@MainActor (OpOutcome) -> Void)?
    ) {
        // A root placed elsewhere (§6a): its request is not sent.
        if owner?.owningSlot?.isRetired == true {
            observer?(
                .rejected(
                    code: CogdCode.retiredScope.text,
                    detail: "not sent: the scope instance that owns it has retired or is placed on another worker"))
            return
        }
        guard let sequence = core.nextSequence() else {
            // The leader never answers a sequence this high (a request in
            // this name claimed it): refuse locally instead of overflowing.
            let reply = OpReply(
                request: RequestID(worker: configuration.name, sequence: core.sequence),
                outcome: .rejected(Rejection(.badRequest, "the worker name \(configuration.name) has used every request sequence; choose another --name")))
            answer(
                reply, about: WorkerRejections.Sent(op: name, turnName: owner.map { "\($0.path).\(name)" }, instance: owner?.owningSlot?.instance),
                tellingWaiter: false)
            observer?(OpOutcome(reply.outcome))
            return
        }
        let request = RequestID(worker: configuration.name, sequence: sequence)
        if let observer {
            // Asked from code that ran as the worker closed (an answer's callback): not sent.
            guard !isClosed else {
                observer(.rejected(code: CogdCode.unavailable.text, detail: "not sent: the worker closed"))
                return
            }
            awaitOutcome(of: request, observer)
        }
        let turnName = owner.map { "\($0.path).\(name)" } ?? name
        let bytes: [UInt8]
        do {
            bytes = try CBOREncoder().encode(argument)
        } catch {
            answer(
                OpReply(request: request, outcome: .rejected(Rejection(.badArgument, "the argument of \(name) does not encode: \(error)"))),
                about: WorkerRejections.Sent(op: name, turnName: turnName, instance: owner?.owningSlot?.instance))
            return
        }
        guard let slot = owner?.owningSlot else {
            sendRequest(OpRequest(request: request, op: name, argument: bytes, instance: nil, name: turnName))
            return
        }
        if let instance = slot.instance {
            sendRequest(OpRequest(request: request, op: name, argument: bytes, instance: instance, name: turnName))
            return
        }
        // Sent once the leader has told this child's instance; a child that
        // retires first has its request answered here, never left unanswered.
        let about = WorkerRejections.Sent(op: name, turnName: turnName, instance: nil)
        slot.wait(
            CogInstanceSlot.Waiter(
                send: { [weak self] instance in
                    self?.sendRequest(OpRequest(request: request, op: name, argument: bytes, instance: instance, name: turnName))
                },
                abandon: { [weak self] in
                    // Answered at the next pass, not inside the retirement that abandoned it.
                    self?.abandonedRequests.append((request, about))
                    self?.signal()
                }))
    }

    /// Answers the requests whose scope child retired before the leader
    /// named its instance: rejected `retired-scope` here, as the leader
    /// would have (`protocol/cogwire.md` §6), never left unanswered.
    private func answerAbandonedRequests() -> Bool {
        guard !abandonedRequests.isEmpty else { return false }
        let abandoned = abandonedRequests
        abandonedRequests = []
        for (request, about) in abandoned {
            answer(
                OpReply(request: request, outcome: .rejected(Rejection(.retiredScope, "not sent: its scope instance retired before the leader named it"))),
                about: about)
        }
        return true
    }

    /// How many messages the socket queues for the leader while it is away
    /// or not reading (ZeroMQ's send high-water mark); past it a request is
    /// answered here, rejected `unavailable` (`protocol/cogwire.md` §8).
    public static let sendQueueLimit: Int32 = 1_000

    /// Sends an op request; one the socket refuses or cannot take now (its
    /// queue to the leader is full: the leader is away or not reading) is
    /// answered here, rejected `unavailable`, counted and kept with the
    /// replies — never dropped unanswered. It is not sent later: the
    /// mechanism decides whether to ask again.
    private func sendRequest(_ request: OpRequest) {
        rejections.sent(request.request, op: request.op, turnName: request.name, instance: request.instance)
        let why: String
        do {
            if try send(.op(request)) { return }
            why = "the queue to the leader is full (\(Worker.sendQueueLimit) messages): the leader is away or not reading"
        } catch {
            why = "the socket refused it: \(error)"
        }
        operations.unsentRequests &+= 1
        answer(OpReply(request: request.request, outcome: .rejected(Rejection(.unavailable, "not sent: \(why)"))))
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
        register(scope)
        return scope
    }

    public func placeRoot(mechanism: String, gate: CogRootGate) -> Bool {
        guard core.placedGroup != nil else { return false }
        pruneRetiredScopes()
        nextRegistration += 1
        let spec = ScopeRegistration(
            worker: configuration.name, registration: nextRegistration, path: mechanism, source: ScopeRegistration.rootSource,
            key: nil, form: .bool)
        // The leader holds the root selected (one member, identity empty).
        let scope = WorkerScope(spec: spec, parent: nil, worker: self, currentEncoding: { [0xf5] })
        scope.whenPlacementChanges { [weak scope, weak gate] in
            guard let scope else { return }
            gate?.place(scope.instance(of: []))
        }
        scopes[nextRegistration] = scope
        register(scope)
        return true
    }

    /// Fills and drops the scopes' child slots as the book says; returns
    /// the placed scopes whose placement may have changed.
    private func perform<Changes: Sequence<ReplicaScopes.Change>>(_ changes: Changes) -> [WorkerScope] {
        var placed: [WorkerScope] = []
        for change in changes {
            guard let scope = scopes[change.registration] else { continue }
            switch change {
            case .adopted(_, let identity, let instance): scope.adopted(identity, instance: instance)
            case .opened(_, let identity, let instance): scope.opened(identity, instance: instance)
            case .retired(_, let identity, _): scope.retired(identity)
            case .replyAdopted: break
            }
            if scope.isPlaced, !placed.contains(where: { $0 === scope }) { placed.append(scope) }
        }
        return placed
    }

    /// Sends a registration; a nested one waits until its parent's instance
    /// of the current epoch is known, and is not sent once the parent retired.
    private func register(_ scope: WorkerScope) {
        scopeBook.registering(scope.spec.registration, applied: core.appliedRevision)
        switch ReplicaScopes.sending(scope.spec, parent: scope.parent.map { ($0.instance, $0.isRetired) }, epoch: epoch) {
        case .send(let registration):
            sendRegistration(registration)
        case .drop:
            return
        case .waitForParent:
            scope.parent?.wait(
                CogInstanceSlot.Waiter(
                    send: { [weak self, weak scope] instance in
                        guard let self, let scope, self.scopes[scope.spec.registration] === scope else { return }
                        self.sendRegistration(scope.registration(parent: instance))
                    },
                    // The parent retired first: the registration is pruned with it.
                    abandon: {}))
        }
    }

    /// Sends a registration; one the socket cannot take now is kept
    /// (`ReplicaScopes.notSent`) and sent again on every pass until it goes.
    private func sendRegistration(_ registration: ScopeRegistration) {
        if (try? send(.scopeRegister(registration))) == true { return }
        operations.registrationRetries &+= 1
        scopeBook.notSent(registration)
    }

    /// Sends the registrations kept unsent, in order, until one is refused again.
    private func retryUnsentRegistrations() {
        let scopes = self.scopes
        // A scope that was forgotten (pruned, or registered anew) needs nothing.
        while let registration = scopeBook.nextUnsent(wanted: { scopes[$0.registration].map { !($0.parent?.isRetired ?? false) } ?? false }) {
            guard (try? send(.scopeRegister(registration))) == true else { return }
            scopeBook.sentAgain()
        }
    }

    /// Forgets registrations made inside scope children that have retired
    /// (the leader dropped them with their parent instance).
    private func pruneRetiredScopes() {
        for (number, scope) in scopes where scope.parent?.isRetired == true {
            scopes[number] = nil
            scopeBook.drop(number)
        }
    }

    /// The instance the member of a registration is paired with now.
    func instance(registration: UInt64, identity: [UInt8]) -> UInt64? {
        scopeBook.instance(registration: registration, identity: identity)
    }

    /// The encoded value of a durable state on the replica.
    func encodedValue(_ name: String, _ key: [UInt8]?) -> [UInt8]? {
        core.encodedValue(name, key)
    }

    /// Sends without waiting; false when the socket's queue to the leader
    /// is full (`sendQueueLimit` messages).
    @discardableResult
    private func send(_ message: WireMessage) throws -> Bool {
        let sent = try dealer.send([message.encoded()], wait: false)
        // Sending can consume the socket's notification of a reply already
        // waiting; look again rather than wait for the next one.
        signal()
        return sent
    }
}

/// A replicated value this worker's build cannot read (a durable type
/// renamed or retyped since the log was written): the worker stops, saying
/// where, instead of following the log wrongly.
public struct ReplicaDecodeError: Error, CustomStringConvertible {
    public let description: String

    init(at place: String, _ error: any Error) {
        description =
            "\(place) holds a value this worker's build cannot read: \(error). Its durable types differ from the ones the log "
            + "was written with (a field renamed or retyped); run a build that reads them, or bump the rig's schemaVersion so "
            + "the leader refuses this build at hello"
    }
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
    /// The child slots opened here, by member (their instances come from
    /// the worker's `ReplicaScopes`).
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
        // A value that does not read selects no child here; the leader keeps
        // the instances it opened (counted selector-unreadable there).
        return ScopeTable.members(of: value, form: spec.form) ?? []
    }

    func childSlot(identity: [UInt8]) -> CogInstanceSlot {
        let slot = CogInstanceSlot(instance: worker.instance(registration: spec.registration, identity: identity))
        slots[identity] = slot
        return slot
    }

    /// A top-level selector of a worker whose leader places its group's
    /// scopes: a child opens only for a member placed here.
    var isPlaced: Bool { spec.parent == nil && worker.core.placedGroup != nil }

    /// Whether the member is placed here and may act: not while the lease
    /// has run out (`Worker.isSuspended`).
    func owns(_ identity: [UInt8]) -> Bool { instance(of: identity) != nil }

    /// The instance the member `identity` is placed here with (nil while
    /// the lease has run out: the root's lifetime is retired meanwhile).
    func instance(of identity: [UInt8]) -> UInt64? {
        worker.isSuspended ? nil : worker.instance(registration: spec.registration, identity: identity)
    }

    /// The instance the member's slot holds (it may hold one the book no
    /// longer pairs, after the registration was sent again).
    func slotInstance(_ identity: [UInt8]) -> UInt64? { slots[identity]?.instance }

    private var placementActions: [@MainActor () -> Void] = []

    func whenPlacementChanges(_ action: @escaping @MainActor () -> Void) { placementActions.append(action) }

    /// What is placed here changed (a reply, an open or retire event, instances forgotten).
    func placementChanged() {
        for action in placementActions { action() }
    }

    /// The leader retired every instance of this worker: the children's
    /// requests wait for the instances the new registration brings.
    func forgetInstances() {
        for slot in slots.values where !slot.isRetired { slot.instance = nil }
    }

    /// A registration reply's member, as of the revision the replica has reached.
    func adopted(_ identity: [UInt8], instance: UInt64) {
        guard let slot = slots[identity], !slot.isRetired else { return }
        slot.resolve(instance)
    }

    /// An open event minted `instance` for `identity`.
    func opened(_ identity: [UInt8], instance: UInt64) {
        guard let slot = slots[identity], !slot.isRetired else { return }
        // A slot still holding a dead epoch's instance takes the new one.
        if slot.instance.map({ ScopeTable.epoch(of: $0) < ScopeTable.epoch(of: instance) }) ?? true { slot.resolve(instance) }
    }

    /// The leader retired the member's instance (the one the book paired
    /// it with): its slot is done with.
    func retired(_ identity: [UInt8]) {
        if let slot = slots[identity], slot.isRetired || slot.instance != nil { slots[identity] = nil }
    }
}
