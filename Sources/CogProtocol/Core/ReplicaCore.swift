import Cog
import CogCodec

/// A worker's sync rules (`protocol/cogwire.md` §5, §6a) as a state machine with no
/// sockets and no clock: hello and welcome, epochs, the snapshot (in parts,
/// asked again when it stalls), turns buffered above a gap and the catch-up
/// that fills it, rejoining after `gone`/`hello-first`/`revision-ahead`,
/// a name held by another process, heartbeats, and request sequences.
/// `Worker` (and `cogd sim`) feed it what the leader sends with the time
/// and carry out its effects: send, subscribe, apply to the replica's
/// graph, and what the worker's scopes must do.
///
/// It keeps the encoded value of every durable entry it applied (scope
/// members come from it).
public struct ReplicaCore: Sendable {
    public struct Settings: Sendable {
        /// The worker name it says hello as.
        public var name: String
        /// How often it tells the leader it is alive.
        public var heartbeatInterval: Duration
        /// How long a snapshot may make no progress before it is asked for
        /// again (twice as long each time, up to ten minutes).
        public var snapshotPatience: Duration
        /// Whether each applied record's state digest is checked (off only
        /// in `cogd sim --break digest-check`, to show the checker notices).
        public var checksDigest: Bool
        /// The fingerprint of the rig the worker runs, sent with each hello
        /// (nil: none is sent, nothing is compared).
        public var rig: CogRig.Fingerprint?
        /// The worker group named in each hello (`cogwire.md` §6a; nil: none).
        public var group: String?
        /// The keys of the app settings named in each hello (`cogwire.md` §3; nil: none).
        public var settingKeys: [String]?
        /// The worker's lease (`cogwire.md` §6b): how long after the hello
        /// or heartbeat that a `welcome` answered the worker's placed
        /// instances may act. Past it, unanswered, their effects are
        /// suspended until a welcome renews it. The leader's heartbeat
        /// timeout less `leaseMargin(heartbeatTimeout:)`
        /// (`lease(heartbeatTimeout:)`); nil: no lease, effects run until
        /// the leader says `gone` (only `cogd-lab sim --break worker-lease`,
        /// to show the checker notices).
        public var lease: Duration?

        public init(
            name: String, heartbeatInterval: Duration = .seconds(1), snapshotPatience: Duration = .seconds(30), checksDigest: Bool = true,
            rig: CogRig.Fingerprint? = nil, group: String? = nil, lease: Duration? = ReplicaCore.lease(heartbeatTimeout: .seconds(5))
        ) {
            self.lease = lease
            self.group = group
            self.name = name
            self.heartbeatInterval = heartbeatInterval
            self.snapshotPatience = snapshotPatience
            self.checksDigest = checksDigest
            self.rig = rig
        }
    }

    public enum Input: Sendable {
        /// The worker starts: it says hello.
        case start
        /// A message from the leader's requests socket.
        case leader(WireMessage)
        /// Records from the turn stream.
        case published(epoch: UInt64, records: [TurnRecord])
        /// Time passed (heartbeats, a stalled snapshot).
        case tick
        /// The driver connected to another node of an HA cluster (a
        /// `not-leader` named it, or the one it used fell silent): say hello
        /// there, as to a leader that restarted (`ha.md` §10).
        case reconnected
    }

    public enum Effect: Sendable, Equatable {
        /// Send this to the leader.
        case send(WireMessage)
        /// (Re)subscribe to the turn stream at this endpoint (a new epoch).
        case subscribe(String)
        /// Replace the replica's durable state with these entries, as of
        /// `revision` (a sync): what the replica holds and the snapshot lacks
        /// (`absent`, writes of no value) goes back to its initial value.
        case applySnapshot(revision: UInt64, entries: [SnapshotEntry], absent: [TurnWrite] = [])
        /// Apply this record to the replica (the next revision).
        case apply(TurnRecord)
        /// The first snapshot (and the records held during it) is applied:
        /// mechanisms may operate now.
        case firstSync
        /// Every scope instance this worker knew is dead (a new epoch, a
        /// name taken over, the leader gave it up or lost a registration):
        /// register the scopes again.
        case registerScopesAnew
        /// The leader retired this worker's instances: the children's
        /// requests wait for new ones.
        case forgetInstances
        /// The leader answered a request.
        case reply(OpReply)
        /// The leader answered a scope registration (members as of `revision`).
        case registered(registration: UInt64, revision: UInt64, members: [ScopeMember])
        /// The leader refused something (kept for display; the core has acted on it).
        case refused(WireError)
        /// The lease ran out (no welcome answered a hello or heartbeat sent
        /// within it): stop the effects of the instances placed here —
        /// cancel their tasks, hold their reactions — before the leader
        /// moves them to another worker (`cogwire.md` §6b).
        case suspendEffects
        /// A welcome renewed the lease: the placed instances' effects start
        /// again, as after a placement.
        case resumeEffects
        /// A standby answered `not-leader`: connect to the node that leads
        /// (`endpoint`, empty when none is known: the next one the driver
        /// knows), then step `.reconnected` (`ha.md` §10).
        case followLeader(endpoint: String, epoch: UInt64)
    }

    /// What the worker's operator is told (`protocol/metrics.md` §5, the
    /// worker's lines), said by the core as it happens: the driver takes
    /// them (`takeEvents`) and logs each, so none is missed or told twice
    /// however the driver's looks fall. At most `maximumEvents` wait; more
    /// are counted in `droppedEvents`, not kept.
    public enum Event: Sendable, Equatable {
        /// The leader refuses this process the worker name (`name-in-use`).
        case nameRefused(WireError)
        /// A welcome after `nameRefused`: this process holds the name.
        case nameFree
        /// The leader refuses this worker's key what it asks (`unknown-key`, `not-your-name`, `role-forbids`).
        case keyRefused(WireError)
        /// A welcome after `keyRefused`.
        case keyAccepted
        /// The leader refuses this worker's rig (`rig-mismatch`).
        case rigRefused(WireError)
        /// A welcome after `rigRefused`.
        case rigAccepted
        /// The replica was discarded: the leader's log is behind it (`revision-ahead`).
        case startedOver(StartOver)
        /// A snapshot was applied.
        case synced(Sync)
        /// The leader gave this worker up (`gone`), in its words.
        case givenUp(WireError)
        /// Welcomed again after `givenUp`, at this applied revision.
        case rejoined(revision: UInt64)
        /// The lease ran out: the placed instances' effects are suspended.
        case leaseExpired(expiries: UInt64)
        /// A welcome renewed the lease after it ran out.
        case leaseRenewed(renewals: UInt64)
        /// A record or snapshot carried another state digest than the replica's, in words, and how many so far.
        case digestMismatch(String, count: Int)
    }

    /// A snapshot applied, and why it was asked for.
    public struct Sync: Sendable, Equatable {
        public var revision: UInt64
        public var epoch: UInt64
        /// How many parts it came in.
        public var parts: UInt64
        /// The first snapshot this replica applied.
        public var first: Bool
        /// Of another epoch than the snapshot before it (a new leader epoch).
        public var newEpoch: Bool
        /// The revision a start-over discarded, when this is the sync after it.
        public var startedOverFrom: UInt64?
        /// Asked for because a catch-up was answered `compacted` (retention removed the records it lacked).
        public var afterCompaction: Bool

        public init(revision: UInt64, epoch: UInt64, parts: UInt64, first: Bool, newEpoch: Bool, startedOverFrom: UInt64?, afterCompaction: Bool) {
            self.revision = revision
            self.epoch = epoch
            self.parts = parts
            self.first = first
            self.newEpoch = newEpoch
            self.startedOverFrom = startedOverFrom
            self.afterCompaction = afterCompaction
        }
    }

    /// The most events kept for the driver between two `takeEvents`.
    public static let maximumEvents = 1_024

    /// A replica discarded because the leader's log is behind it.
    public struct StartOver: Sendable, Equatable {
        /// The revision and epoch the replica had reached.
        public var discardedRevision: UInt64
        public var discardedEpoch: UInt64?
        /// The leader's refusal, in its words.
        public var reason: String

        public init(discardedRevision: UInt64, discardedEpoch: UInt64?, reason: String) {
            self.discardedRevision = discardedRevision
            self.discardedEpoch = discardedEpoch
            self.reason = reason
        }
    }

    public let settings: Settings
    /// The newest revision applied to the replica.
    public private(set) var appliedRevision: UInt64 = 0
    /// The leader epoch the replica follows.
    public private(set) var epoch: UInt64?
    /// Whether the first snapshot has been applied.
    public private(set) var isSynced = false
    /// The epoch and revision of the last snapshot applied, and its parts.
    public private(set) var syncedEpoch: UInt64?
    public private(set) var syncedRevision: UInt64 = 0
    public private(set) var syncedParts: UInt64 = 0
    /// Why the leader refuses this process the worker name (another process
    /// holds it), until a welcome: meanwhile it says hello again after
    /// `nameRetryInitial`, each wait twice the last, up to `nameRetryMaximum`.
    public private(set) var displaced: WireError?
    /// The first wait before a hello refused `name-in-use` is said again
    /// (`cogwire.md` §6): the holder may be leaving.
    public static let nameRetryInitial: Duration = .milliseconds(500)
    /// The longest wait between hellos refused `name-in-use`: a refused
    /// process costs the leader at most a refusal every 5 s once it has
    /// waited a while, and takes the name within 5 s of its holder leaving.
    public static let nameRetryMaximum: Duration = .seconds(5)
    /// The wait before the next hello while the name is refused.
    private var nameRetry = ReplicaCore.nameRetryInitial
    /// Why the leader refuses the rig this worker runs (`rig-mismatch`),
    /// until a welcome: meanwhile it sends nothing but a hello every
    /// `rigRetryInterval` (a leader upgraded meanwhile takes it).
    public private(set) var rigRefused: WireError?
    /// Why the leader refuses this worker's key what it asks (`unknown-key`,
    /// `not-your-name`, `role-forbids`: the peers file does not give its key
    /// this name or role), until a welcome: meanwhile it sends nothing but a
    /// hello every `rigRetryInterval` (the peers file may be mended and
    /// reloaded meanwhile).
    public private(set) var accessRefused: WireError?
    /// The group the leader places this worker's scopes in (its last
    /// `welcome`'s `group`; nil: each registration is this worker's own).
    public private(set) var placedGroup: String?
    /// Whether the leader refused the rig or the key: only hellos go out.
    private var heldOff: Bool { rigRefused != nil || accessRefused != nil }
    /// How often a worker whose rig or key was refused says hello again.
    public static let rigRetryInterval: Duration = .seconds(5)
    /// The encoded value of every durable entry applied, by name, 0, key.
    public private(set) var encodedState: [[UInt8]: [UInt8]] = [:]
    /// The highest request sequence used (or answered) in this name.
    public private(set) var sequence: UInt64 = 0
    /// The state digest of `encodedState`, checked against every applied
    /// record's and reported with each heartbeat.
    public private(set) var stateDigest = StateDigest()
    /// How many applied records (and snapshots) carried another state digest
    /// than the replica's; a record's mismatch re-syncs from a snapshot.
    public private(set) var digestMismatches = 0
    /// The last mismatch, in words (`cogd worker` logs it).
    public private(set) var lastDigestMismatch: String?
    /// How many catch-ups the leader answered `compacted` (the records were
    /// no longer in its log), each followed by a snapshot.
    public private(set) var compactedCatchUps = 0
    /// How many times the worker joined the leader again after it had
    /// joined: a welcome to the hello it said because the leader no longer
    /// knew it (`hello-first`: the leader restarted, the connection set up
    /// anew), gave it up (`gone`), holds less history (`revision-ahead`), or
    /// refused it meanwhile (its name, key or rig). Hellos retried while
    /// refused, and welcomes to heartbeats, do not count
    /// (`cogd_worker_reconnects_total`, `protocol/metrics.md`).
    public private(set) var rejoins: UInt64 = 0
    /// How many times the replica was discarded because the leader's log
    /// holds less than it (`revision-ahead`: the leader's data folder went
    /// back, or was replaced), and the last such start-over.
    public private(set) var startOvers: UInt64 = 0
    public private(set) var lastStartOver: StartOver?
    /// How many times the leader told this worker it had given it up
    /// (`gone`: silent past its heartbeat timeout, its scope instances
    /// retired); once per rejoin, however many `gone` answers come.
    public private(set) var timesGivenUp: UInt64 = 0
    /// Whether a welcome ever came.
    private var joined = false
    /// When the last welcome of the followed epoch came.
    private var lastWelcome: Duration?
    /// Welcomes of an epoch below the followed one that were ignored
    /// (`ha.md` §10): a deposed leader does not pull the worker back.
    public private(set) var lowerEpochWelcomesIgnored: UInt64 = 0
    /// How long after a welcome of the followed epoch a welcome of a lower
    /// one is ignored: the lease (5 s without one). Past it the leader of
    /// the higher epoch is gone, and a lower epoch is followed again (a
    /// leader restarted from a backup may serve one).
    public var lowerEpochWindow: Duration { settings.lease ?? .seconds(5) }
    /// Whether the lease has run out: the placed instances' effects are
    /// suspended until a welcome renews it.
    public private(set) var isSuspended = false
    /// How many times the lease ran out (`cogd_worker_lease_expiries_total`,
    /// `protocol/metrics.md`), and how many times a welcome renewed it
    /// after that (`lease-renewed` in the worker's log).
    public private(set) var leaseExpiries: UInt64 = 0
    public private(set) var leaseRenewals: UInt64 = 0
    /// When the lease began: the time the worker sent the hello or heartbeat
    /// that the newest welcome may answer, at the earliest (nil before the
    /// first welcome). The leader heard that message no sooner, so it counts
    /// the worker's silence from later than this.
    public private(set) var leaseStart: Duration?
    /// The first hello or heartbeat sent since the last welcome.
    private var firstUnanswered: Duration?
    /// A suspension a welcome renewed ends once the replica has applied
    /// this revision (the one that welcome named).
    private var resumeAt: UInt64?
    /// Whether the leader welcomed this worker and has not refused or dropped it since.
    public var hasJoined: Bool { joined && !rejoining && !registerOnWelcome && displaced == nil && !heldOff }

    private var buffered: [UInt64: TurnRecord] = [:]
    private var awaitingSnapshot = false
    /// The parts of the snapshot being received: its revision, the next part
    /// expected, and the entries so far.
    private var snapshotParts: (revision: UInt64, received: [UInt64: [SnapshotEntry]], last: UInt64?)?
    private var snapshotProgress: Duration = .zero
    private var snapshotPatience: Duration
    private var catchUpFrom: UInt64?
    private var catchUpAskedAt: Duration = .zero
    /// A catch-up unanswered this long is asked for again.
    public static let catchUpPatience: Duration = .seconds(2)
    /// The newest revision the leader has named (its welcomes), this epoch.
    private var leaderRevision: UInt64 = 0
    private var lastHeartbeat: Duration = .zero
    /// Rejoining after `gone`, `hello-first` or `revision-ahead`, until a welcome.
    private var rejoining = false
    /// The scopes register anew on the next welcome of the same epoch.
    private var registerOnWelcome = false
    private var effects: [Effect] = []
    private var events: [Event] = []
    /// Events not kept because `maximumEvents` were waiting.
    public private(set) var droppedEvents: UInt64 = 0
    /// Said with the next sync: a start-over's discarded revision, a catch-up answered `compacted`.
    private var syncAfterStartOver: UInt64?
    private var syncAfterCompaction = false
    /// A `gone` was told: `rejoined` is told at the welcome that joins again.
    private var rejoinToTell = false

    public init(settings: Settings) {
        self.settings = settings
        snapshotPatience = settings.snapshotPatience
    }

    public mutating func step(_ input: Input, now: Duration) -> [Effect] {
        // The lease is looked at before anything else: what this step
        // applies must not reach an instance whose lease has already run out.
        checkLease(now: now)
        switch input {
        case .start:
            lastHeartbeat = now
            sayHello(lastRevision: 0)
        case .leader(let message):
            handle(message, now: now)
        case .published(let epoch, let records):
            if epoch == self.epoch { receive(records, now: now) }
        case .reconnected:
            lastHeartbeat = now
            if joined { rejoin() } else { sayHello(lastRevision: appliedRevision) }
        case .tick:
            if awaitingSnapshot, snapshotParts != nil, now - snapshotProgress >= ReplicaCore.catchUpPatience {
                // Some parts came, then none: the rest was lost (a connection broke).
                requestSnapshot(now: now)
            } else if awaitingSnapshot, now - snapshotProgress > snapshotPatience {
                // Nothing came: a leader reading a very large state table may
                // be slow; ask again, waiting twice as long each time (to 10 min).
                snapshotPatience = min(snapshotPatience * 2, .seconds(600))
                requestSnapshot(now: now)
            }
            if catchUpFrom != nil, now - catchUpAskedAt >= ReplicaCore.catchUpPatience {
                // The request or its answer was lost (a connection broke): ask again.
                askForCatchUp(now: now)
            }
            let interval = heldOff ? ReplicaCore.rigRetryInterval : displaced == nil ? heartbeatInterval : nameRetry
            if now - lastHeartbeat >= interval {
                lastHeartbeat = now
                if displaced == nil && !heldOff {
                    send(.heartbeat(worker: settings.name, revision: appliedRevision, stateDigest: stateDigest))
                } else {
                    if displaced != nil, !heldOff { nameRetry = min(nameRetry * 2, ReplicaCore.nameRetryMaximum) }
                    sayHello(lastRevision: appliedRevision)
                }
            }
        }
        defer { effects = [] }
        return effects
    }

    /// The events since the last call, oldest first (`Event`).
    public mutating func takeEvents() -> [Event] {
        defer { events = [] }
        return events
    }

    private mutating func tell(_ event: Event) {
        guard events.count < ReplicaCore.maximumEvents else {
            droppedEvents &+= 1
            return
        }
        events.append(event)
    }

    /// The sequence of the next request, or nil when the name has used
    /// every sequence the leader admits.
    public mutating func nextSequence() -> UInt64? {
        guard sequence < LeaderCore.sequenceLimit - 1 else { return nil }
        sequence += 1
        return sequence
    }

    /// Where the sync stands, in words (the simulator's traces).
    public var summary: String {
        var parts = ["epoch \(epoch.map(String.init) ?? "none")", "applied \(appliedRevision)", "leader said \(leaderRevision)"]
        if awaitingSnapshot { parts.append("awaiting a snapshot\(snapshotParts.map { " (\($0.received.count) parts here)" } ?? "")") }
        if let catchUpFrom { parts.append("catching up from \(catchUpFrom)") }
        if !buffered.isEmpty { parts.append("\(buffered.count) records held") }
        if rejoining { parts.append("rejoining") }
        if displaced != nil { parts.append("displaced") }
        if isSuspended { parts.append("lease expired") }
        if rigRefused != nil { parts.append("rig refused") }
        if accessRefused != nil { parts.append("key refused") }
        return parts.joined(separator: ", ")
    }

    /// The encoded value of a durable entry on the replica.
    public func encodedValue(_ name: String, _ key: [UInt8]?) -> [UInt8]? {
        encodedState[TurnWrite.entryKey(name: name, key: key)]
    }


    private mutating func send(_ message: WireMessage) {
        switch message {
        case .hello, .heartbeat:
            // A welcome to come may answer this, or a later one: the lease
            // it renews counts from the first one not yet answered.
            if firstUnanswered == nil { firstUnanswered = stepTime }
        default:
            break
        }
        effects.append(.send(message))
    }

    /// The time of the step under way (what `send` notes a hello or heartbeat at).
    private var stepTime: Duration = .zero

    // MARK: The lease

    /// How often a heartbeat goes out: the configured interval, or half the
    /// lease when that is shorter, so a welcome renews the lease well before
    /// it runs out (a lease no longer than the interval would run out before
    /// every answer).
    private var heartbeatInterval: Duration {
        guard let lease = settings.lease else { return settings.heartbeatInterval }
        return min(settings.heartbeatInterval, lease / 2)
    }

    /// The margin by which a worker's lease is shorter than the leader's
    /// heartbeat timeout: a fifth of it, at least one second, at most half.
    /// It covers what the lease's start cannot see (`cogwire.md` §6b): a
    /// welcome that answers a heartbeat sent before the one the lease counts
    /// from (one heartbeat interval, 1 s), and a worker that looks at its
    /// lease only between passes.
    public static func leaseMargin(heartbeatTimeout: Duration) -> Duration {
        min(max(heartbeatTimeout / 5, .seconds(1)), heartbeatTimeout / 2)
    }

    /// The lease of a worker whose leader gives a worker up after
    /// `heartbeatTimeout` of silence: the timeout less its margin.
    public static func lease(heartbeatTimeout: Duration) -> Duration {
        heartbeatTimeout - leaseMargin(heartbeatTimeout: heartbeatTimeout)
    }

    /// Suspends the placed instances' effects once the lease has run out.
    private mutating func checkLease(now: Duration) {
        stepTime = now
        guard !isSuspended, let lease = settings.lease, let leaseStart, now - leaseStart >= lease else { return }
        resumeAt = nil
        isSuspended = true
        leaseExpiries &+= 1
        effects.append(.suspendEffects)
        tell(.leaseExpired(expiries: leaseExpiries))
    }

    /// A welcome came: the lease runs from the first hello or heartbeat it
    /// may answer (never back), and effects suspended resume if it has
    /// not run out from there.
    private mutating func renewLease(now: Duration) {
        if let said = firstUnanswered {
            leaseStart = max(leaseStart ?? said, said)
            firstUnanswered = nil
        }
        guard isSuspended, let leaseStart, now - leaseStart < settings.lease ?? .zero else { return }
        // The replica may be behind what the welcome named: the records it
        // has yet to apply may retire what it holds (it was given up, its
        // members placed elsewhere). Resume once it has applied them — those
        // the first renewing welcome named: a later move needs another
        // heartbeat timeout of silence, which the lease covers.
        resumeAt = resumeAt ?? leaderRevision
        resumeIfCaughtUp(now: now)
    }

    /// Ends a suspension a welcome renewed, once the replica has applied
    /// the revision that welcome named and the lease still holds (`cogwire.md` §6b).
    private mutating func resumeIfCaughtUp(now: Duration) {
        guard isSuspended, let target = resumeAt, appliedRevision >= target, !awaitingSnapshot,
            let leaseStart, now - leaseStart < settings.lease ?? .zero
        else { return }
        resumeAt = nil
        isSuspended = false
        leaseRenewals &+= 1
        effects.append(.resumeEffects)
        tell(.leaseRenewed(renewals: leaseRenewals))
    }

    /// Says hello, with the rig's fingerprint when the worker runs one.
    private mutating func sayHello(lastRevision: UInt64) {
        send(.hello(worker: settings.name, lastRevision: lastRevision, rig: settings.rig, group: settings.group, settings: settings.settingKeys))
    }

    private mutating func handle(_ message: WireMessage, now: Duration) {
        switch message {
        case .welcome(let epoch, let lastRevision, let turnsEndpoint, let lastSequence, let group):
            if let followed = self.epoch, epoch < followed, let lastWelcome, now - lastWelcome < lowerEpochWindow {
                lowerEpochWelcomesIgnored &+= 1
                return
            }
            lastWelcome = now
            placedGroup = group
            welcome(epoch: epoch, lastRevision: lastRevision, turnsEndpoint: turnsEndpoint, lastSequence: lastSequence, now: now)
            renewLease(now: now)
        case .snapshot(let epoch, let revision, let part, let partNumber, let more, let digest):
            snapshot(epoch: epoch, revision: revision, part: part, partNumber: partNumber, more: more, digest: digest, now: now)
        case .turns(let epoch, let records):
            guard epoch == self.epoch else { return }
            catchUpFrom = nil
            receive(records, now: now)
            // A catch-up reply stops at about 64 KiB: ask on at once while
            // the leader is known to be further.
            if !awaitingSnapshot, catchUpFrom == nil, appliedRevision < leaderRevision { askForCatchUp(now: now) }
        case .reply(let reply):
            effects.append(.reply(reply))
        case .scopeRegistered(_, let registration, let revision, let members):
            effects.append(.registered(registration: registration, revision: revision, members: members))
        case .error(let error):
            refused(error, now: now)
        case .notLeader(let leader, let epoch):
            effects.append(.followLeader(endpoint: leader, epoch: epoch))
        default:
            break
        }
    }

    private mutating func welcome(epoch: UInt64, lastRevision: UInt64, turnsEndpoint: String, lastSequence: UInt64, now: Duration) {
        if joined && (rejoining || registerOnWelcome || displaced != nil || heldOff) { rejoins &+= 1 }
        // A snapshot asked for while the leader did not know this worker
        // (given up, or refused the name) was refused `hello-first`, or never
        // came: ask again now, rather than after the snapshot patience.
        let unknownMeanwhile = rejoining || displaced != nil
        joined = true
        rejoining = false
        // Same epoch and the leader had dropped this worker, or this process
        // was refused the name and now holds it (what it registered retired
        // with the holder it replaced): register anew, once. A new epoch
        // registers anew once the snapshot is applied.
        let dropped = registerOnWelcome || displaced != nil
        registerOnWelcome = false
        if displaced != nil { tell(.nameFree) }
        if rigRefused != nil { tell(.rigAccepted) }
        if accessRefused != nil { tell(.keyAccepted) }
        displaced = nil
        rigRefused = nil
        accessRefused = nil
        if rejoinToTell, hasJoined {
            rejoinToTell = false
            tell(.rejoined(revision: appliedRevision))
        }
        if dropped, self.epoch == epoch, isSynced { effects.append(.registerScopesAnew) }
        leaderRevision = max(self.epoch == epoch ? leaderRevision : 0, lastRevision)
        // A worker restarted under the same name continues above the
        // requests its earlier run sent (the leader answers those from dedup).
        sequence = max(sequence, lastSequence)
        if self.epoch != epoch {
            // First contact or a new leader epoch: (re)subscribe, then fetch the state.
            self.epoch = epoch
            effects.append(.subscribe(turnsEndpoint))
            buffered = [:]
            catchUpFrom = nil
            requestSnapshot(now: now)
        } else if awaitingSnapshot, unknownMeanwhile {
            requestSnapshot(now: now)
        } else if !awaitingSnapshot, lastRevision > appliedRevision, catchUpFrom == nil {
            askForCatchUp(now: now)
        }
    }

    private mutating func snapshot(
        epoch: UInt64, revision: UInt64, part: [SnapshotEntry], partNumber: UInt64, more: Bool, digest: StateDigest?, now: Duration
    ) {
        guard epoch == self.epoch, awaitingSnapshot else { return }
        // Revisions stay far below 2^64 (the replica counts on from them): a
        // snapshot claiming more is refused, never trusted.
        guard revision < LeaderCore.sequenceLimit else {
            effects.append(.refused(WireError(.malformed, "a snapshot claims revision \(revision); revisions are below 2^63")))
            return
        }
        snapshotProgress = now
        // A part came: the leader is sending, not slow — a later stall is a
        // loss, asked for again soon, not after a longer patience.
        snapshotPatience = settings.snapshotPatience
        // Parts of one run share a revision; a newer revision is a new run
        // (the leader started over), an older one is left over. Parts may
        // come in any order: the run is whole once the last part (`more`
        // false) and every one before it are here.
        var entries = part
        let total: UInt64
        if partNumber > 0 || more {
            if let current = snapshotParts, current.revision > revision { return }
            if snapshotParts?.revision != revision { snapshotParts = (revision, [:], nil) }
            guard var parts = snapshotParts else { return }
            parts.received[partNumber] = part
            if !more { parts.last = partNumber }
            snapshotParts = parts
            // (In UInt64: a part number from the leader may be anything.)
            guard let last = parts.last, UInt64(parts.received.count) - 1 == last else { return }
            entries = (0...last).flatMap { parts.received[$0] ?? [] }
            total = last + 1
        } else {
            total = 1
        }
        syncedParts = total
        snapshotParts = nil
        snapshotPatience = settings.snapshotPatience
        awaitingSnapshot = false
        let absent = statesAbsent(from: entries)
        encodedState = [:]
        for entry in entries { encodedState[TurnWrite.entryKey(name: entry.name, key: entry.key)] = entry.value }
        tell(.synced(Sync(
            revision: revision, epoch: epoch, parts: total, first: !isSynced, newEpoch: isSynced && syncedEpoch != epoch,
            startedOverFrom: syncAfterStartOver, afterCompaction: syncAfterCompaction)))
        syncAfterStartOver = nil
        syncAfterCompaction = false
        adoptSnapshotDigest(entries, digest, revision: revision)
        effects.append(.applySnapshot(revision: revision, entries: entries, absent: absent))
        appliedRevision = revision
        syncedEpoch = epoch
        syncedRevision = revision
        let held = buffered.values.sorted { $0.revision < $1.revision }
        buffered = [:]
        receive(held, now: now)
        if !isSynced {
            isSynced = true
            effects.append(.firstSync)
        } else {
            // A new leader epoch (or a re-sync): every instance of the old one
            // is dead; register again.
            effects.append(.registerScopesAnew)
        }
    }

    /// Says hello to a leader that does not know this worker (any more),
    /// and registers the scopes anew once welcomed.
    private mutating func rejoin() {
        rejoining = true
        registerOnWelcome = true
        effects.append(.forgetInstances)
        sayHello(lastRevision: appliedRevision)
    }

    private mutating func refused(_ error: WireError, now: Duration) {
        effects.append(.refused(error))
        // Every code is decided here: a new one does not compile until it is.
        switch error.code {
        case .compacted:
            // The records it asked for are no longer in the leader's log
            // (retention removed them): the state comes from a snapshot, and
            // the records held above it apply after it.
            catchUpFrom = nil
            compactedCatchUps += 1
            syncAfterCompaction = true
            if !awaitingSnapshot { requestSnapshot(now: now) }
        case .gone, .helloFirst:
            guard displaced == nil else { return }
            if error.code == .gone, !rejoining {
                timesGivenUp &+= 1
                rejoinToTell = true
                tell(.givenUp(error))
            }
            // The leader gave this worker up (silent too long) and retired its
            // instances, or does not know this connection (it restarted, or
            // forgot a worker it gave up long ago): say hello — again at each
            // such answer, since a hello can be lost with a leader that stops
            // — and register the scopes anew once welcomed (a new epoch
            // re-syncs first). Meanwhile the children's requests wait.
            rejoin()
        case .registerAgain:
            guard displaced == nil, isSynced else { return }
            // The leader's commit failed: the registration it answered in
            // that batch was given up with it.
            effects.append(.registerScopesAnew)
        case .revisionAhead:
            guard epoch != nil || appliedRevision > 0 else { return }
            // The replica holds turns the leader's log does not (its data
            // folder went back): start over from the leader's state (unless
            // it already has: a second answer to an earlier hello).
            startOvers &+= 1
            let startOver = StartOver(discardedRevision: appliedRevision, discardedEpoch: epoch, reason: error.message)
            lastStartOver = startOver
            syncAfterStartOver = startOver.discardedRevision
            tell(.startedOver(startOver))
            rejoining = true
            epoch = nil
            appliedRevision = 0
            sayHello(lastRevision: 0)
        case .rigMismatch:
            // The leader serves another version of this rig (or none of its
            // name): nothing this worker would do is safe. Say hello now and
            // then (the leader may be upgraded meanwhile); its instances, if
            // any, are gone.
            if !heldOff { effects.append(.forgetInstances) }
            if rigRefused == nil { tell(.rigRefused(error)) }
            rigRefused = error
        case .unknownKey, .notYourName, .roleForbids:
            // The peers file does not give this key what it asked for: the
            // same holds for everything it would send. Say hello now and then
            // (the file may be mended and reloaded meanwhile).
            if !heldOff { effects.append(.forgetInstances) }
            if accessRefused == nil { tell(.keyRefused(error)) }
            accessRefused = error
        case .nameInUse:
            guard displaced == nil else { return }
            // Another process holds the name (this one started second, or was
            // replaced while frozen): its instances, if any, are gone; say
            // hello until the name is free.
            displaced = error
            tell(.nameRefused(error))
            nameRetry = ReplicaCore.nameRetryInitial
            effects.append(.forgetInstances)
        case .unavailable, .busy:
            // Transient: the request that met it is asked again at its own
            // pace (a snapshot or catch-up after its wait, a hello at the
            // next heartbeat); nothing changes here.
            break
        case .malformed, .version, .oversize, .unknownType, .notAllowed, .tooManyRegistrations:
            // This worker sent what the leader does not take: a bug or a
            // version mismatch on one message, said to the driver (`.refused`),
            // which logs it; the replica's state is unchanged.
            break
        case .unknownOp, .badArgument, .badRequest, .retiredScope, .tooLarge, .requestMismatch, .crashedLeader,
            .expired, .refused:
            // Rejection codes answer op requests in `reply` outcomes, never
            // as an `error`; one that came as an error is only reported.
            break
        case .sendDropped, .noteFailed, .pruneFailed, .publishFailed, .turnUnpublished, .unfinishedMessage,
            .snapshotReplaced, .snapshotAbandoned, .commitFailed, .selectorUnreadable, .handshakeRefused,
            .handshakeFailed:
            // The leader's own events are counted, never sent.
            break
        case .other:
            // A newer leader's code: reported, nothing decided on it.
            break
        }
    }

    /// Asks for the whole state, in parts (any earlier parts are dropped).
    private mutating func requestSnapshot(now: Duration) {
        awaitingSnapshot = true
        snapshotParts = nil
        snapshotProgress = now
        send(.snapshotRequest(inParts: true))
    }

    private mutating func askForCatchUp(now: Duration) {
        catchUpFrom = appliedRevision + 1
        catchUpAskedAt = now
        send(.catchUpRequest(from: appliedRevision + 1))
    }

    /// Applies records in revision order; holds back those above a gap and
    /// asks for what is missing.
    private mutating func receive(_ records: [TurnRecord], now: Duration) {
        for record in records where record.revision > appliedRevision {
            buffered[record.revision] = record
        }
        guard !awaitingSnapshot else { return }
        while let next = buffered.removeValue(forKey: appliedRevision + 1) {
            for write in next.writes {
                let key = write.entryKey
                stateDigest.apply(name: write.name, key: write.key, old: encodedState[key], new: write.value)
                encodedState[key] = write.value
            }
            effects.append(.apply(next))
            appliedRevision = next.revision
            if digestDiffers(from: next, now: now) { break }
        }
        if !buffered.isEmpty, catchUpFrom == nil, !awaitingSnapshot { askForCatchUp(now: now) }
        resumeIfCaughtUp(now: now)
        // Report progress soon (not only on the heartbeat), so the leader's lag figure is fresh.
        if displaced == nil, !heldOff, now - lastHeartbeat >= .milliseconds(100) {
            lastHeartbeat = now
            send(.heartbeat(worker: settings.name, revision: appliedRevision, stateDigest: stateDigest))
        }
    }

    // MARK: State digest

    /// Whether the replica's state digest differs from the one `record`
    /// carries (the state after it): then the mismatch is counted, described
    /// and the replica re-syncs from a snapshot (records above wait for it).
    private mutating func digestDiffers(from record: TurnRecord, now: Duration) -> Bool {
        guard settings.checksDigest, record.stateDigest != stateDigest else { return false }
        digestMismatches += 1
        lastDigestMismatch =
            "state digest mismatch at revision \(record.revision): the record says \(record.stateDigest), "
            + "the replica has \(stateDigest); re-syncing from a snapshot"
        tell(.digestMismatch(lastDigestMismatch ?? "", count: digestMismatches))
        requestSnapshot(now: now)
        return true
    }

    /// Sets the replica's digest after a snapshot: the one the leader sent
    /// with it (its records' digests follow from it). Entries that do not add
    /// up to it are a mismatch, counted and described — not re-synced: the
    /// leader would send the same.
    private mutating func adoptSnapshotDigest(_ entries: [SnapshotEntry], _ sent: StateDigest?, revision: UInt64) {
        let computed = StateDigest(entries: entries.lazy.map { (name: $0.name, key: $0.key, value: $0.value) })
        stateDigest = sent ?? computed
        guard let sent, sent != computed else { return }
        digestMismatches += 1
        lastDigestMismatch =
            "state digest mismatch in the snapshot at revision \(revision): the leader says \(sent), its entries give \(computed) "
            + "(its state table may differ from its log: run `cogd log verify` on its data folder)"
        tell(.digestMismatch(lastDigestMismatch ?? "", count: digestMismatches))
    }

    /// The states the replica holds that `entries` (a snapshot) lacks, in key
    /// order, as writes of no value: a re-sync puts them back to their
    /// initial values.
    private func statesAbsent(from entries: [SnapshotEntry]) -> [TurnWrite] {
        guard !encodedState.isEmpty else { return [] }
        let kept = Set(entries.map { TurnWrite.entryKey(name: $0.name, key: $0.key) })
        return encodedState.keys.filter { !kept.contains($0) }.sorted { $0.lexicographicallyPrecedes($1) }.map { stored in
            let split = stored.firstIndex(of: 0) ?? stored.count
            let key = split < stored.count ? Array(stored[(split + 1)...]) : []
            return TurnWrite(name: String(decoding: stored[..<split], as: UTF8.self), key: key.isEmpty ? nil : key, value: nil)
        }
    }

    /// Spoils one entry of the replica's state without telling anyone:
    /// `cogd sim`'s memory fault, which the digest check must catch.
    public mutating func corruptState(_ pick: (Int) -> Int) {
        let keys = encodedState.keys.sorted { $0.lexicographicallyPrecedes($1) }
        guard !keys.isEmpty else { return }
        let key = keys[pick(keys.count)]
        let split = key.firstIndex(of: 0) ?? key.count
        let name = String(decoding: key[..<split], as: UTF8.self)
        let entryKey = split < key.count - 1 ? Array(key[(split + 1)...]) : nil
        let old = encodedState[key]
        let spoiled = (old ?? []) + [0xff]
        // The replica's bookkeeping follows its (wrong) state, as after a
        // write applied wrongly: only the next record's digest can tell.
        stateDigest.apply(name: name, key: entryKey, old: old, new: spoiled)
        encodedState[key] = spoiled
    }
}
