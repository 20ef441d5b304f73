import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Synchronization

/// The leader: owns the authoritative graph and the turn log, admits op
/// requests into one FIFO, runs each as a turn, commits every settled turn to
/// LMDB (many per transaction), then publishes them and replies (`protocol/cogwire.md` §4).
///
/// - Important: `run` blocks the calling thread (the main thread) polling
///   its sockets and running turns there: no thread hop per request. It
///   returns when `stop` is set, after finishing the batch in flight.
@MainActor
public final class Leader {
    public struct Configuration: Sendable {
        public var dataFolder: String
        public var requestsEndpoint: String
        public var turnsEndpoint: String
        /// A worker silent longer than this is gone.
        public var heartbeatTimeout: Duration
        /// Where the serving thread runs (`cogd leader` asks for `.automatic`).
        public var commitAffinity: CommitAffinity
        /// How long after a batch the serving thread keeps looking for the
        /// next request (yielding its CPU between looks) before it sleeps:
        /// a request arriving then skips the wake-up. Zero: it sleeps at once.
        public var spinWait: Duration
        /// About how many bytes each part of a snapshot asked for in parts holds.
        public var snapshotPartBytes: Int
        /// How long a snapshot may wait for its requester to read (no part
        /// could be sent) before it is given up, its LMDB read with it.
        public var snapshotDeadline: Duration = .seconds(30)
        /// The most bytes a turn's record may take; a turn over it is
        /// refused `too-large` and undone (at most 64 MiB, the default).
        public var maximumRecordBytes: Int = 64 << 20
        /// Go on from what data.mdb holds even when it is behind what the
        /// folder's `cogd.identity` remembers (`--accept-data-loss`).
        public var acceptDataLoss = false
        /// The fingerprints of the rigs served: a worker whose hello names
        /// another rig, or an incompatible version of one, is refused
        /// `rig-mismatch` (empty: nothing is compared).
        public var rigs: [CogRig.Fingerprint] = []
        /// CURVE on both sockets and who may connect (`--curve-secret`,
        /// `--peers`); nil: nothing is authenticated (loopback only).
        public var authentication: Authentication?
        /// How much of the turn log to keep (`--retain-turns`, `--retain-age`,
        /// `--retain-bytes`): older records, and the dedup entries stored
        /// before the first revision kept, are removed a bounded number at a
        /// time — in each batch's commit, and between batches while idle
        /// (`protocol/turnlog.md` §2a). Default: everything.
        public var retention: Retention = .everything
        /// Where the serving loop publishes its figures for `--metrics`
        /// (`MetricsServer`; nil: none are kept for anyone).
        public var metricsBoard: MetricsBoard?
        /// The operator's log (`--log-format`, `--log-level`; nil: none).
        public var operatorLog: OperatorLog?
        /// What `status` reports as the version (`cogd`'s, or an app's
        /// name and version with cogd's).
        public var version = CogdVersion.current
        /// The epoch to serve, given by the cluster's arbiter (`--ha`:
        /// epochs are minted in etcd); nil: the next after the folder's own.
        public var epoch: UInt64?
        /// Asked before anything leaves (a reply, a status, a published
        /// turn, a snapshot part): false once the arbiter's lease may have
        /// ended (ha.md §4). The leader then releases nothing more and
        /// `run` throws `LeaderSteppedDown`. Nil: always true (no `--ha`).
        public var releaseGate: (@Sendable () -> Bool)?
        /// More `/metrics` families, published with the leader's own (`--ha`: the arbiter's).
        public var extraMetrics: (@Sendable () -> [MetricFamily])?
        /// Shipping the log to standbys (`--ha`, ha.md §9): the rules, and who
        /// writes etcd's sync key; nil: standbys are refused, nothing is held.
        public var shipping: Shipping?

        public init(
            dataFolder: String, requestsEndpoint: String = "tcp://127.0.0.1:5701",
            turnsEndpoint: String = "tcp://127.0.0.1:5702", heartbeatTimeout: Duration = .seconds(5),
            commitAffinity: CommitAffinity = .unpinned, spinWait: Duration = .zero,
            snapshotPartBytes: Int = WireMessage.snapshotPartTarget
        ) {
            self.dataFolder = dataFolder
            self.requestsEndpoint = requestsEndpoint
            self.turnsEndpoint = turnsEndpoint
            self.heartbeatTimeout = heartbeatTimeout
            self.commitAffinity = commitAffinity
            self.spinWait = spinWait
            self.snapshotPartBytes = snapshotPartBytes
        }
    }

    /// How a leader ships its log to standbys (ha.md §9).
    public struct Shipping: Sendable {
        public var rules: ShipCore.Configuration
        /// Writes etcd's sync key (the arbiter); nil: no key is written, and
        /// a write is taken as done (tests, and a leader outside a cluster).
        public var syncKey: (any SyncKeyWriter)?
        /// The commits this node applied as a standby before it took the
        /// lead, ending at its folder's last revision: kept as if shipped, so
        /// an old leader behind on this log catches up rather than copying.
        public var inherited: KeptCommits?

        public init(rules: ShipCore.Configuration, syncKey: (any SyncKeyWriter)?, inherited: KeptCommits? = nil) {
            self.rules = rules
            self.syncKey = syncKey
            self.inherited = inherited
        }
    }

    /// The leader's CURVE key pair and its peers file (`protocol/cogwire.md` §9).
    public struct Authentication: Sendable {
        public var keyPair: CurveKeyPair
        /// The peers file: read at start, and again by `reloadPeers()` (SIGHUP).
        public var peersFile: String

        public init(keyPair: CurveKeyPair, peersFile: String) {
            self.keyPair = keyPair
            self.peersFile = peersFile
        }
    }

    public let configuration: Configuration
    /// Judges each CURVE handshake (nil when nothing is authenticated).
    private let zap: ZAPHandler?
    /// See the handshakes that fail on the requests socket and the turn
    /// stream before the ZAP handler is asked (empty when nothing is authenticated).
    private var handshakeWatches: [HandshakeWatch] = []
    /// Handshakes failed on sockets closed since (the turn stream re-opened).
    private var earlierFailedHandshakes: UInt64 = 0
    /// Shuts down connections that send without finishing a message (§8).
    private var inboundGuard = InboundGuard()
    let store: TurnStore
    /// The rules: everything the leader decides happens in here.
    private(set) var core: LeaderCore!
    private let context: ZMQContext
    private let router: ZMQSocket
    private var publisher: ZMQSocket
    /// When the driver started: the core's clock counts from here.
    private let start = ContinuousClock.now
    var now: Duration { ContinuousClock.now - start }
    /// What the operator sees: `/metrics` figures, the log's rate limits (`Leader+Operations.swift`).
    var operations = LeaderOperations()
    /// Snapshots asked for in parts, being sent a part at a time between
    /// batches (so a large state does not stop the serving).
    private var snapshots: SnapshotSender<StateSnapshotReader>
    var snapshotStreamCount: Int { snapshots.count }
    /// Shipping to standbys (nil: none, `Leader+Shipping.swift`).
    var shipCore: ShipCore?
    /// What waits for standbys' acknowledgements before it may leave, oldest first.
    var heldReleases: [HeldRelease] = []
    var heldBytes = 0
    /// The shipped commits kept for a standby catching up, newest last (at most the window).
    var recentShipped = KeptCommits(countLimit: 1, byteLimit: Leader.recentShippedLimit)
    /// Why the standby whose hello is being handled is not in step, for the
    /// log line of the copy that hello starts (set and cleared around it, so
    /// names a peer sends are never kept).
    var copyReason: String?
    /// Copies of the log being sent to standbys that were not in step.
    var copyStreams: [CopyStream] = []
    /// Copies of the log being written, each on a thread of its own, for standbys not in step.
    var pendingCopies: [PendingCopy] = []
    /// Numbers the copies' folders.
    var copiesMade = 0
    /// Each standby's TCP connection (the descriptor its messages came in
    /// on), and whether the socket's watch has listed it: once listed, its
    /// leaving the list ends the standby (`ShipCore.gone`) at once, not a
    /// heartbeat timeout later. At most `ShipCore.maximumStandbys` are kept.
    var standbyConnections: [String: (descriptor: Int32, listed: Bool)] = [:]
    /// The standbys' ZeroMQ identities (what their messages' connections are
    /// noted by), one per standby the rules keep.
    var standbyPeers: [[UInt8]: String] = [:] {
        didSet { crashCourier?.setStandbys(Array(standbyPeers.keys)) }
    }
    /// With standbys: tells them which request a crash stopped (`ship-crashed`).
    private var crashCourier: CrashCourier?
    /// The core's events for the operator's log since the last call.
    func takeCoreEvents() -> [LeaderCore.Event] { core.takeEvents() }
    /// A batch takes messages until they reach this many bytes (or 4,096 of them).
    public static let maximumBatchBytes = 16 << 20
    /// Messages ZeroMQ may queue for one peer of the requests socket, and
    /// for one subscriber of the turn stream, before further sends to it are
    /// dropped (a peer that reads nothing holds at most this much).
    public static let requestsSendHighWaterMark: Int32 = 500
    /// The most bytes of turn messages ZeroMQ holds for one subscriber of
    /// the turn stream that reads nothing (`cogwire.md` §8): ZeroMQ bounds a
    /// subscriber's queue in messages only, so the leader bounds the size of
    /// each message (`turnsMessageBytes`) and queues `turnsQueueBytes /
    /// turnsMessageBytes` of them. Past it the subscriber misses turns and
    /// catches up by the gap (§5).
    public nonisolated static let turnsQueueBytes = 16 << 20
    /// The largest turn message the leader publishes: records are packed
    /// into messages up to this size, and a record that does not fit one
    /// alone is not published (counted `turn-unpublished`): subscribers
    /// fetch it with a `catch-up-request`, as any gap.
    public nonisolated static let turnsMessageBytes = 256 << 10
    /// Messages ZeroMQ queues for one subscriber of the turn stream (64):
    /// with messages of at most `turnsMessageBytes`, at most `turnsQueueBytes`.
    public nonisolated static let turnsSendHighWaterMark = Int32(turnsQueueBytes / turnsMessageBytes)
    /// The core's limits and names, where the tools and tests look for them.
    public static let sequenceLimit = LeaderCore.sequenceLimit
    public nonisolated static let maximumRecordBytes = LeaderCore.maximumRecordBytes
    public static let maximumRegistrationsPerWorker = LeaderCore.maximumRegistrationsPerWorker
    public static let maximumWorkerName = LeaderCore.maximumWorkerName
    public static let maximumSnapshotStreams = LeaderCore.maximumSnapshotStreams
    public static let catchUpReplyBytes = LeaderCore.catchUpReplyBytes
    static let pauseAllowance = LeaderCore.pauseAllowance
    public static let workerGoneTurn = LeaderCore.workerGoneTurn
    public static let nameTakenOverTurn = LeaderCore.nameTakenOverTurn
    public static let reregisteredTurn = LeaderCore.reregisteredTurn
    /// Error replies sent, by code (`cogd status`).
    public var errorCounts: [CogdCode: UInt64] {
        var counts = core.errorCounts
        if let refused = zap?.refused, refused > 0 { counts[.handshakeRefused] = refused }
        let failed = handshakeWatches.reduce(earlierFailedHandshakes) { $0 &+ $1.failed }
        if failed > 0 { counts[.handshakeFailed] = failed }
        return counts
    }
    /// `errorCounts` split by kind (`protocol/metrics.md` §3, §5): op
    /// requests answered rejected, by rejection code, and every other error
    /// reply or event, by code (a `hello` refused `name-in-use`, a wire
    /// `error unavailable`, among them).
    var countsByKind: (rejections: [CogdCode: UInt64], errors: [CogdCode: UInt64]) {
        core.countsByKind(adding: errorCounts)
    }
    /// The bound endpoints (wildcard ports resolved).
    public let boundRequestsEndpoint: String
    public let boundTurnsEndpoint: String
    /// Where the serving thread runs, and why.
    public let placement: CommitPlacement
    private var ioPlacement = IOPlacementPolicy()
    private var commitTimes = CommitTimes()
    /// ZeroMQ's I/O threads: the requests' ("ZMQbg/IO/0") and, with a CPU
    /// to spare, the turn stream's ("ZMQbg/IO/1"). Found when first placed
    /// (they name themselves once started).
    private var ioThreads: (requests: [Int32], stream: [Int32]) = ([], [])
    private var ioThreadsPlaced = false
    /// Whether the turn stream has its own I/O thread, on the CPUs the
    /// serving thread leaves free.
    private let streamHasOwnIOThread: Bool
    /// The request whose body runs now, noted where a process crash cannot lose it.
    private let runningNote: RunningRequestNote
    /// A request a previous leader process was running when it crashed (a
    /// fatal signal marked it), or that was running at two outside kills:
    /// answered `rejected("crashed-leader: …")` at this start and never run
    /// again (`protocol/turnlog.md` §1a).
    public private(set) var quarantined: QuarantinedRequest?
    /// A request a previous leader process was running when it was killed
    /// from outside (no fatal signal marked it): not quarantined, its retry
    /// may run once more — quarantined if it is running at another such
    /// death (`protocol/turnlog.md` §1a).
    public private(set) var spared: QuarantinedRequest?

    public var epoch: UInt64 { store.epoch }
    public var lastRevision: UInt64 { store.lastRevision }
    /// The oldest revision the log keeps (1 until retention removed older ones).
    public var firstRevision: UInt64 { store.firstRevision }
    /// The leader's graph (what its op bodies ran on).
    public var cogs: Cogs { core.cogs }

    /// Opens the data folder and binds the sockets. `registry`: the ops it
    /// runs (default: every one declared in this process, a name declared
    /// twice refused here).
    public init(configuration: Configuration, registry: OpRegistry? = nil) throws {
        self.configuration = configuration
        snapshots = SnapshotSender(partBytes: configuration.snapshotPartBytes, deadline: configuration.snapshotDeadline)
        let registry = try registry ?? OpRegistry.declared()
        store = try TurnStore(
            directory: configuration.dataFolder, mode: .writer, createIfMissing: true, acceptDataLoss: configuration.acceptDataLoss,
            epoch: configuration.epoch)
        // Every stored value must decode as its declaration's type now: a
        // field renamed or retyped is refused here, not a trap later.
        let undecodable = try StoredValueAudit.stateTable(of: store)
        guard undecodable.isEmpty else {
            store.close()
            throw UndecodableStateError(findings: undecodable)
        }
        // Before the context: ZeroMQ's threads inherit the placement, so a
        // request's wake-ups stay on the CPUs the commits run on.
        placement = try CommitPlacement.apply(configuration.commitAffinity, dataFolder: configuration.dataFolder)
        // With a CPU to spare, the turn stream gets an I/O thread of its own
        // there: a publication's send (the subscribers' TCP work included)
        // then runs beside the replies' instead of ahead of them.
        streamHasOwnIOThread = !placement.spareCPUs.isEmpty
        context = try ZMQContext(ioThreads: streamHasOwnIOThread ? 2 : 1)
        let peers: PeerTable?
        if let authentication = configuration.authentication {
            do {
                peers = try PeerTable.load(path: authentication.peersFile)
                // Before either socket binds: with no handler, ZeroMQ would
                // accept any client that knows the leader's public key.
                zap = try ZAPHandler(context: context, peers: peers!)
            } catch {
                context.close()
                store.close()
                throw error
            }
        } else {
            peers = nil
            zap = nil
        }
        router = try ZMQSocket(context, .router)
        if let authentication = configuration.authentication {
            try router.makeCurveServer(secretKey: authentication.keyPair.secretKey, domain: ZAPHandler.requestsDomain)
        }
        if streamHasOwnIOThread { try router.setIOThreads(0b01) }
        // A send to a peer that is no longer connected fails (EHOSTUNREACH)
        // instead of vanishing: how a hello learns whether the process that
        // holds its worker name is still there.
        try router.setRouterMandatory(true)
        try router.setMaximumMessageSize(Int64(WireMessage.maximumSize * 4))
        // What ZeroMQ holds from one peer before the leader reads it: 64 frames
        // of at most 4 MiB (a peer that sends faster waits, TCP pushing back).
        try router.setHighWaterMarks(send: Leader.requestsSendHighWaterMark, receive: 64)
        try router.bind(configuration.requestsEndpoint)
        publisher = try Leader.turnStream(
            context, at: configuration.turnsEndpoint, ownIOThread: streamHasOwnIOThread, authentication: configuration.authentication)
        // Handshakes that fail are counted; the connections each socket holds are watched (`InboundGuard`).
        handshakeWatches = [try HandshakeWatch(router, tracksConnections: true), try HandshakeWatch(publisher, tracksConnections: true)]
        boundRequestsEndpoint = try router.lastEndpoint()
        boundTurnsEndpoint = try publisher.lastEndpoint()
        // A request noted as running and never answered stopped the process
        // that ran it. Marked by a fatal signal's handler, its body crashed
        // the process: answered rejected, for good, and never run again (a
        // poison pill must not become a crash loop). Unmarked, the process
        // was killed from outside (SIGKILL) while it ran: it may run once
        // more, and is quarantined if it is running at another such death
        // (`protocol/turnlog.md` §1a).
        runningNote = try RunningRequestNote(dataFolder: configuration.dataFolder)
        let leftOver = try runningNote.leftOver()
        let diedTwice = try leftOver.map { left throws in try runningNote.survivor()?.request == left.entry.request } ?? false
        var settings = LeaderCore.Settings(
            heartbeatTimeout: configuration.heartbeatTimeout, maximumRecordBytes: configuration.maximumRecordBytes,
            turnsEndpoint: boundTurnsEndpoint, rigs: configuration.rigs, peers: peers)
        // Only a worker whose hello names a group (`cogd worker --group`) is placed.
        settings.placesGroups = true
        core = try LeaderCore(log: store, ports: self, registry: registry, settings: settings)
        // The core has rebuilt the replies not yet indexed: it decides whether
        // the request left running has an answer, is quarantined (committed
        // here, before anything is served) or spared.
        var keepAsSurvivor = false
        var forgetSurvivor = false
        if let left = leftOver {
            let crashed = left.entry
            switch try core.settle(LeaderCore.LeftOverRequest(
                request: crashed.request, op: crashed.op, digest: crashed.digest, crashed: left.crashSignal != nil, diedTwice: diedTwice))
            {
            case .answered:
                break
            case .quarantined:
                quarantined = QuarantinedRequest(request: crashed.request, op: crashed.op, crashSignal: left.crashSignal)
                forgetSurvivor = diedTwice
                carryOut(core.step(.endBatch, now: now))
            case .spared:
                spared = QuarantinedRequest(request: crashed.request, op: crashed.op)
                keepAsSurvivor = true
            }
        }
        try runningNote.settle(keepingNoteAsSurvivor: keepAsSurvivor, forgettingSurvivor: forgetSurvivor)
        try runningNote.arm()
        if configuration.shipping != nil { crashCourier = CrashCourier(router: router, note: runningNote, epoch: epoch) }
        if quarantined != nil { core.countRejection(.crashedLeader) }
        startShipping()
        // Replies a crash left unindexed are indexed now.
        if core.hasWork { try serveBatch() }
    }

    /// The turn stream's PUB socket, bound at `endpoint` (a standby's door
    /// holds one too, publishing nothing, so the port is its own before it
    /// may lead).
    nonisolated static func turnStream(
        _ context: ZMQContext, at endpoint: String, ownIOThread: Bool, authentication: Authentication?
    ) throws(ZMQError) -> ZMQSocket {
        let publisher = try ZMQSocket(context, .publisher)
        if ownIOThread { try publisher.setIOThreads(0b10) }
        // A subscriber that falls behind loses turns past this many messages
        // and catches up by the gap (the Clone pattern): its queue is bounded.
        try publisher.setHighWaterMarks(send: Leader.turnsSendHighWaterMark, receive: 1_000)
        if let authentication {
            try publisher.makeCurveServer(secretKey: authentication.keyPair.secretKey, domain: ZAPHandler.turnsDomain)
        }
        try publisher.bind(endpoint)
        return publisher
    }

    /// The turn stream could not be bound again after a reload cut its
    /// readers off: the leader stops (its service manager restarts it).
    public struct TurnStreamLost: Error, CustomStringConvertible {
        public let endpoint: String
        public let cause: ZMQError
        public var description: String {
            "the peers file was reloaded, but the turn stream at \(endpoint) could not be bound again (\(cause)); "
                + "the leader stops rather than serve without publishing"
        }
    }

    /// Whether connections are authenticated (CURVE with a peers file).
    public var authenticates: Bool { zap != nil }

    /// What reading the peers file again changed.
    public struct PeersReload: Sendable, Equatable {
        public var peers: Int
        public var added: Int
        /// Keys listed before and now whose role, name or op patterns differ.
        public var changed: Int
        public var removed: Int
    }

    /// Reads the peers file again (SIGHUP): handshakes and every message
    /// from then on are judged by it, so a removed key's connections are
    /// refused `unknown-key` from their next message. When a key was
    /// removed, the turn stream is opened anew: every subscriber reconnects
    /// (and is judged again) and catches up what it missed by the gap.
    /// A file that cannot be read or is not valid changes nothing.
    public func reloadPeers() throws -> PeersReload {
        guard let authentication = configuration.authentication, let zap, let old = core.peers else {
            throw PeerTableError(path: "-", line: nil, message: "this leader authenticates nothing (no --peers), so there is nothing to reload")
        }
        let table = try PeerTable.load(path: authentication.peersFile)
        let oldKeys = Set(old.peers.map(\.publicKey))
        let newKeys = Set(table.peers.map(\.publicKey))
        let lostStream = old.peers.filter { $0.mayReadTurns && !(table[$0.publicKey]?.mayReadTurns ?? false) }
        zap.replace(table)
        carryOut(core.step(.peers(table), now: now))
        if !lostStream.isEmpty {
            if handshakeWatches.count == 2 {
                _ = try? handshakeWatches[1].problem()
                earlierFailedHandshakes &+= handshakeWatches[1].failed
                handshakeWatches[1].close()
                handshakeWatches.removeLast()
            }
            publisher.close()
            // ZeroMQ closes the old listener in the background: the port is
            // free again within moments. Until the stream is open again,
            // nothing is published (subscribers catch up by the gap).
            let deadline = ContinuousClock.now + .seconds(5)
            var reopened: Result<ZMQSocket, ZMQError>
            repeat {
                reopened = Result { () throws(ZMQError) in
                    try Leader.turnStream(context, at: boundTurnsEndpoint, ownIOThread: streamHasOwnIOThread, authentication: authentication)
                }
                guard case .failure(let error) = reopened, error.code == EADDRINUSE, ContinuousClock.now < deadline else { break }
                usleep(10_000)
            } while true
            do {
                publisher = try reopened.get()
            } catch {
                // The new peers are in force, but nothing can be published:
                // the leader cannot go on (a restart binds the stream anew).
                throw TurnStreamLost(endpoint: boundTurnsEndpoint, cause: error)
            }
            handshakeWatches.append(try HandshakeWatch(publisher, tracksConnections: true))
        }
        let changed = oldKeys.intersection(newKeys).filter { key in
            guard let before = old[key], let now = table[key] else { return false }
            return before.role != now.role || before.name != now.name || before.ops != now.ops
        }
        return PeersReload(
            peers: table.count, added: newKeys.subtracting(oldKeys).count, changed: changed.count,
            removed: oldKeys.subtracting(newKeys).count)
    }

    /// Closes sockets, the context and the store, indexing first the
    /// replies not indexed yet — unless it ships its log: that commit might
    /// reach no standby, and a node whose folder holds a commit the next
    /// leader lacks is sent a whole copy (`protocol/ha.md` §5); the next
    /// start indexes them from the records instead.
    public func close() {
        closeServing(indexingReplies: shipCore == nil)
        store.close()
    }

    /// Closes all but the store; first, unless told not to, indexes the replies not indexed yet.
    private func closeServing(indexingReplies: Bool) {
        let unindexed = core.unindexedReplies
        // Not a loss when it fails: the next start rebuilds these replies from the records (turnlog.md §2, meta.unindexed-from).
        if indexingReplies, !unindexed.isEmpty { _ = try? store.append([], replies: unindexed, index: .indexed) }
        snapshots.closeAll()
        // A copy being written reads the store: it finishes before the store closes.
        for pending in pendingCopies {
            pending.wait()
            try? FileManager.default.removeItem(atPath: pending.folder)
        }
        pendingCopies = []
        for stream in copyStreams { stream.end() }
        copyStreams = []
        crashCourier?.stop()
        router.close()
        publisher.close()
        for watch in handshakeWatches { watch.close() }
        zap?.stop()
        context.close()
    }

    /// What a leader that stepped down did with its last commit (`closeSteppingDown`).
    public enum LastCommitOnStepDown: Sendable {
        /// It had released what it committed (or shipped nothing).
        case released
        /// Its last commit released nothing, and is taken back; `heldBefore`
        /// commits shipped before it released nothing either (they stay: a
        /// next leader whose log lacks them sends this node a copy).
        case takenBack(ShippedTransaction, heldBefore: UInt64)
        /// Its last commit released nothing, but is kept, for this reason.
        case kept(ShippedTransaction, reason: String)
        /// Its last commit released nothing, but every standby that may take
        /// the lead acknowledged it as the node stepped down: it is in their
        /// logs, so it is kept (taking it back would make it theirs alone).
        case acknowledged(ShippedTransaction)
        /// What it shipped last released nothing, but the folder's last
        /// transaction is not that commit (another followed it, or this
        /// process shipped none of its own), so nothing is taken back.
        case notLast
    }

    /// Closes a leader that stepped down (`LeaderSteppedDown`). When its
    /// last commit released nothing — its replies, turns and answers waited
    /// for the standbys' acknowledgement, which did not come — that commit
    /// is taken back (`TurnStore.closeTakingBack`): a standby that took the
    /// lead may never have received it, and a folder that ends before it
    /// catches up with the next leader's log instead of being sent a whole
    /// copy (`protocol/ha.md` §5) — unless every standby that may take the
    /// lead (named in the sync key, or that a write in flight or unanswered
    /// would name) acknowledges it within `stepDownAcknowledgementWait` (it
    /// is in their logs then, and is kept). Whatever the last commit, the
    /// replies not indexed yet are not indexed first (that would be a commit
    /// no standby has): the next start rebuilds them from the records.
    public func closeSteppingDown() -> LastCommitOnStepDown {
        let acknowledged = namedStandbysAcknowledgeLastCommit(within: Leader.stepDownAcknowledgementWait)
        closeServing(indexingReplies: false)
        guard shipCore?.lastCommitHeld == true else {
            store.close()
            return .released
        }
        guard let last = unreleasedLastCommit else {
            store.close()
            return .notLast
        }
        guard !acknowledged else {
            store.close()
            return .acknowledged(last)
        }
        do {
            try store.closeTakingBack(last)
            let heldBefore = shipCore.map { $0.lastSequence - 1 - min($0.releasedThrough, $0.lastSequence - 1) } ?? 0
            return .takenBack(last, heldBefore: heldBefore)
        } catch {
            return .kept(last, reason: error.message)
        }
    }

    /// How long a leader that stepped down listens for its standbys'
    /// acknowledgement of a last commit that released nothing.
    public static let stepDownAcknowledgementWait: Duration = .milliseconds(100)

    /// After the release gate shut, whether every standby the sync key names
    /// or may name acknowledges the last shipped commit within `wait`
    /// (acknowledgements already queued count; `ShipCore.lastCommitAcknowledgedByNamed`).
    /// Reads only `ship-ack`s from each standby's own connection
    /// (`ShipCore.acknowledged`'s rule), and releases nothing:
    /// it only tells whether the commit is in the logs of the nodes that may
    /// take the lead. Other messages read meanwhile are dropped (the node is
    /// stopping; their senders retry elsewhere).
    private func namedStandbysAcknowledgeLastCommit(within wait: Duration) -> Bool {
        guard let rules = shipCore, rules.lastCommitHeld, !rules.named.isEmpty else { return false }
        var late: [String: UInt64] = [:]
        let deadline = ContinuousClock.now + wait
        var key: String?
        var source: Int32 = -1
        while !rules.lastCommitAcknowledgedByNamed(late: late) {
            guard let frames = try? router.receive(userID: &key, source: &source) else {
                guard ContinuousClock.now < deadline else { return false }
                usleep(1_000)
                continue
            }
            guard frames.count == 2, case .shipAck(let node, let sequence)? = try? WireMessage.decode(frames[1]),
                rules.standbys[node]?.peer == frames[0]
            else { continue }
            late[node] = max(late[node] ?? 0, sequence)
        }
        return true
    }

    /// The serving thread's name while it serves (`top -H`, `perf`,
    /// `/proc/PID/task/TID/comm`): `bench cluster` reads its CPU time by it.
    public static let servingThreadName = "cogd-serving"

    /// Serves until `stop` becomes true.
    public func run(until stop: StopFlag, reload: ReloadFlag? = nil, onReload: (Result<PeersReload, any Error>) -> Void = { _ in }) throws {
        if let cpus = placement.cpus { try ThreadAffinity.pin(cpus) }
        let previousName = ThreadAffinity.nameCurrentThread(Leader.servingThreadName)
        defer { if let previousName { ThreadAffinity.nameCurrentThread(previousName) } }
        // Op bodies run on this thread: one that overflows its stack is marked a crash, like any other.
        let signalStack = RunningRequestNote.giveThreadSignalStack()
        defer { RunningRequestNote.releaseThreadSignalStack(signalStack) }
        var lastBatch = ContinuousClock.now
        var snapshotsWaiting = false
        configuration.metricsBoard?.setReadiness(true, "serving at \(boundRequestsEndpoint), epoch \(epoch)")
        defer { configuration.metricsBoard?.setReadiness(false, "stopping") }
        while !stop.isStopped {
            if withheld || configuration.releaseGate?() == false { throw LeaderSteppedDown(epoch: epoch) }
            operationsPass()
            let spinning = configuration.spinWait > .zero && ContinuousClock.now - lastBatch < configuration.spinWait
            let timeout: Duration
            if spinning || (!snapshots.isEmpty && !snapshotsWaiting) || prunedBacklog || !copyStreams.isEmpty {
                timeout = .zero  // look for requests without sleeping: parts (or old records) are ready to go
            } else if !snapshots.isEmpty || !backlogs.isEmpty || !pendingCopies.isEmpty {
                timeout = .milliseconds(1)  // parts and replies wait for room in ZeroMQ's queue; a copy being written is looked at
            } else {
                // Not longer: the inbound guard looks at the connections this often (more often while one fills).
                timeout = inboundGuard.nextLookIn
            }
            let ready = try ZMQSocket.poll([router], timeout: timeout)
            // A leader frozen in the poll past its deadline serves nothing it finds on waking.
            if configuration.releaseGate?() == false { throw LeaderSteppedDown(epoch: epoch) }
            if ready[0] {
                try serveBatch()
                lastBatch = ContinuousClock.now
                if withheld { throw LeaderSteppedDown(epoch: epoch) }
                // Everything the batch did is committed; a restart starts a new epoch.
                if core.instancesExhausted { throw InstancesExhausted(epoch: epoch) }
            }
            // After the batch: a connection whose messages it just read is seen to progress.
            // The watches are read there too (every 10 ms): the failed handshakes they count, the connections they list.
            if inboundGuard.isDue(.now) { guardConnections() }
            if !backlogs.isEmpty { drainBacklogs() }
            if !snapshots.isEmpty {
                // Up to 16 small parts a stream per pass (about 1 MiB), while ZeroMQ takes them.
                var rounds = 0
                repeat {
                    snapshotsWaiting = !sendSnapshotParts()
                    rounds += 1
                } while !snapshotsWaiting && !snapshots.isEmpty && rounds < 16
            } else if spinning && !ready[0] {
                sched_yield()
                continue
            }
            if let reload, reload.take() {
                do {
                    onReload(.success(try reloadPeers()))
                } catch let error as PeerTableError {
                    onReload(.failure(error))  // the peers read before hold
                }
            }
            carryOut(core.step(.tick, now: now))
            tickShipping()
            takeWrittenCopies()
            sendCopyParts()
            // Retirement records (workers gone) commit and go out now.
            if core.hasWork { try serveBatch() }
            if !ready[0] { pruneBetweenBatches() }
        }
        try serveBatch()
        // The last batch's events (a worker's goodbye as everything stops) are logged before the stop line.
        operationsPass()
        // What slow readers are still owed goes out if they read within a second.
        let deadline = ContinuousClock.now + .seconds(1)
        while !backlogs.isEmpty && ContinuousClock.now < deadline {
            drainBacklogs()
            if !backlogs.isEmpty { usleep(1_000) }
        }
    }

    /// Takes everything waiting as one batch: the core runs it, the store
    /// commits it once, then it is published and answered.
    func serveBatch() throws {
        var taken = 0
        var takenBytes = 0
        // A batch ends at 4,096 messages or 16 MiB of them: what one batch
        // holds (its turns, records and replies) stays bounded.
        var key: String?
        var source: Int32 = -1
        while taken < 4_096, takenBytes < Leader.maximumBatchBytes, var frames = try router.receive(userID: &key, source: &source) {
            inboundGuard.messageRead(from: source)
            taken += 1
            takenBytes += frames.reduce(0) { $0 + $1.count }
            let identity = frames.removeFirst()
            if !standbyPeers.isEmpty, let node = standbyPeers[identity] { noteStandbyConnection(node, source) }
            carryOut(core.step(.message(from: identity, frames: frames, key: key), now: now))
        }
        do {
            try runningNote.clear()
        } catch {
            // The note stays: at the next start its request is answered
            // rejected instead of run (never run twice); say so in the counts.
            core.countEvent(.noteFailed)
        }
        guard taken > 0 || core.hasWork else { return }
        if placement.cpus != nil, ioPlacement.observe(batch: taken) != nil || !ioThreadsPlaced { placeIOThreads() }
        carryOut(core.step(.endBatch, now: now))
    }

    /// Reads the sockets' watches (what failed to handshake is counted, the
    /// connections are listed), then shuts down each connection past the
    /// inbound guard's limit, counted as `unfinished-message` (`cogwire.md`
    /// §8); ZeroMQ frees what it held.
    private func guardConnections() {
        var open = Set<Int32>()
        for watch in handshakeWatches {
            _ = try? watch.problem()
            open.formUnion(watch.connections)
        }
        for _ in inboundGuard.look(at: open, now: .now) { core.countEvent(.unfinishedMessage) }
        noteStandbyConnections(open)
    }

    /// Whether the release gate is open (always, without `--ha`); once it
    /// is shut, nothing more leaves and the serving loop stops.
    func mayRelease() -> Bool {
        guard !withheld else { return false }
        guard let gate = configuration.releaseGate, !gate() else { return true }
        withheld = true
        return false
    }

    /// Does what the core asks, in order; a commit's answer goes back to it at once.
    private func carryOut(_ effects: consuming [LeaderCore.Effect]) {
        var effects = effects
        // Each effect is moved out, its place left holding an empty
        // publication (nothing to release when the array goes): iterating
        // copied each one, retaining and releasing its peer and frame again.
        effects.withUnsafeMutableBufferPointer { buffer in
            for index in buffer.indices {
                let effect = buffer.moveElement(from: index)
                buffer.initializeElement(at: index, to: .publish(0..<0))
                carryOut(one: effect)
            }
        }
    }

    private func carryOut(one effect: LeaderCore.Effect) {
        switch effect {
        case .send, .sendStatus, .startSnapshot, .publish:
            guard mayRelease() else { return }
            if holdsForStandbys(effect) { return }
        default:
            break
        }
        switch effect {
        case .send, .sendStatus, .startSnapshot, .publish:
            release(effect, batch: store.lastAppended)
        case .standby(let peer, let message):
            standbyMessage(message, from: peer)
        case .commit(let commit):
            let start = ContinuousClock.now
            let answer: LeaderCore.Input
            do {
                let revisions = try store.append(
                    commit.drafts, replies: commit.replies, index: commit.index, retention: configuration.retention,
                    openings: commit.openings, rejections: commit.rejections)
                if let pruned = store.lastPruned { prunedBacklog = pruned.more }
                Leader.afterCommit?(revisions)
                let took = ContinuousClock.now - start
                commitTimes.record(took, turns: revisions.count)
                noteCommit(took, turns: revisions.count, lastRevision: revisions.upperBound &- 1)
                answer = .committed(revisions)
            } catch {
                answer = .commitFailed(cause: Leader.commitFailureCause(error, dataFolder: configuration.dataFolder))
            }
            carryOut(core.step(answer, now: now))
        }
    }

    /// Lets a reply, a status, a snapshot or a publication leave, now:
    /// `batch` is the commit's records a publication sends.
    func release(_ effect: LeaderCore.Effect, batch: EncodedTurnBatch) {
        switch effect {
        case .send(let peer, let frame):
            deliver(frame, to: peer)
        case .sendStatus(let peer):
            deliver(WireMessage.status(status).encoded(), to: peer)
        case .startSnapshot(let peer, let whole):
            startSnapshot(to: peer, whole: whole)
        case .publish:
            // Packed below the cap by the envelope's few bytes (epoch, count, keys).
            let target = Leader.turnsMessageBytes - 128
            for frame in WireMessage.turnsFrames(epoch: epoch, batch: batch, target: target) {
                guard frame.count <= Leader.turnsMessageBytes else {
                    // One record too large for a turn message: ZeroMQ's queue
                    // for a slow subscriber holds messages of the cap at most
                    // (§8); subscribers fetch it by the gap it leaves.
                    core.countEvent(.turnUnpublished)
                    continue
                }
                do {
                    try publisher.send([frame])
                } catch {
                    core.countEvent(.publishFailed)  // subscribers catch up by the gap
                }
            }
        case .commit, .standby:
            break
        }
    }

    /// With no batch to serve, removes what retention no longer keeps: at
    /// once while the last pass left more (one bounded transaction a pass,
    /// so a request waits for at most one), else once a second (records age
    /// while nothing is committed). A failure is counted (`prune-failed`)
    /// and tried again later; serving goes on.
    private func pruneBetweenBatches() {
        guard configuration.retention != .everything, prunedBacklog || ContinuousClock.now - lastIdlePrune >= .seconds(1) else { return }
        lastIdlePrune = .now
        do {
            prunedBacklog = try store.prune(configuration.retention, now: Date()).more
        } catch {
            prunedBacklog = false
            core.countEvent(.pruneFailed)
        }
    }

    /// Names why a commit failed: a full file system, else the I/O error.
    static func commitFailureCause(_ error: any Error, dataFolder: String) -> String {
        var stats = statvfs()
        if statvfs(dataFolder, &stats) == 0 {
            let (free, overflow) = UInt64(stats.f_bavail).multipliedReportingOverflow(by: UInt64(stats.f_frsize))
            if !overflow, free < 1 << 20 { return "disk full (\(free) bytes free in \(dataFolder))" }
        }
        return "I/O error (\((error as? TurnStoreError)?.message ?? "\(error)"))"
    }

    /// Messages for peers whose ZeroMQ queue was full, in order: sent as
    /// the queue drains (between batches), at most `maximumBacklogBytes` a
    /// peer — past that a peer that reads nothing loses messages (counted
    /// `send-dropped`; a request's retry is answered from dedup).
    struct PeerBacklog {
        var frames: [[UInt8]] = []
        var head = 0
        var bytes = 0
    }
    var backlogs: [[UInt8]: PeerBacklog] = [:]
    /// Whether the last pass of retention stopped at its limit: the serving
    /// loop prunes again at once while no batch comes.
    private var prunedBacklog = false
    /// Set once the release gate shut: nothing more leaves (`LeaderSteppedDown`).
    private var withheld = false
    /// When the serving loop last pruned between batches.
    private var lastIdlePrune = ContinuousClock.now
    /// The most bytes of messages the leader holds for one peer that reads slowly.
    public static let maximumBacklogBytes = 16 << 20

    /// Sends `frame` to `identity`, behind anything it is still owed.
    /// Counts a frame the leader dropped instead of sending (`send-dropped`).
    func countDroppedSend() { core.countEvent(.sendDropped) }

    func deliver(_ frame: [UInt8], to identity: [UInt8]) {
        if backlogs[identity] == nil {
            do {
                if try router.send([identity, frame], wait: false) { return }
            } catch {
                core.countEvent(.sendDropped)  // the peer is gone
                return
            }
        }
        var backlog = backlogs[identity] ?? PeerBacklog()
        guard backlog.bytes + frame.count <= Leader.maximumBacklogBytes else {
            core.countEvent(.sendDropped)
            backlogs[identity] = backlog
            return
        }
        backlog.frames.append(frame)
        backlog.bytes += frame.count
        backlogs[identity] = backlog
    }

    /// Sends what peers are owed as far as their queues take it; returns
    /// whether anything went.
    @discardableResult
    private func drainBacklogs() -> Bool {
        var progressed = false
        for (identity, var backlog) in backlogs {
            var gone = false
            while backlog.head < backlog.frames.count {
                let frame = backlog.frames[backlog.head]
                do {
                    guard try router.send([identity, frame], wait: false) else { break }
                } catch {
                    gone = true
                    break
                }
                backlog.frames[backlog.head] = []
                backlog.head += 1
                backlog.bytes -= frame.count
                progressed = true
            }
            if gone {
                core.countEvent(.sendDropped, by: UInt64(backlog.frames.count - backlog.head))
                backlogs[identity] = nil
            } else if backlog.head == backlog.frames.count {
                backlogs[identity] = nil
            } else {
                if backlog.head > 1_024 && backlog.head * 2 > backlog.frames.count {
                    backlog.frames.removeFirst(backlog.head)
                    backlog.head = 0
                }
                backlogs[identity] = backlog
            }
        }
        return progressed
    }

    /// Puts ZeroMQ's I/O threads where the load asks: the requests' beside
    /// the serving thread and the stream's on the spare CPUs, or, under
    /// load, both on every CPU.
    private func placeIOThreads() {
        guard let cpus = placement.cpus else { return }
        if !ioThreadsPlaced {
            ioThreads = (ThreadAffinity.threads(named: "ZMQbg/IO/0"), ThreadAffinity.threads(named: "ZMQbg/IO/1"))
            ioThreadsPlaced = !ioThreads.requests.isEmpty && (!streamHasOwnIOThread || !ioThreads.stream.isEmpty)
        }
        let spread = ioPlacement.spread
        for thread in ioThreads.requests { try? ThreadAffinity.pin(spread ? placement.processCPUs : cpus, thread: thread) }
        for thread in ioThreads.stream { try? ThreadAffinity.pin(spread ? placement.processCPUs : placement.spareCPUs, thread: thread) }
    }

    // MARK: Snapshot streams

    /// Starts a snapshot for `identity` (`SnapshotSender.start`): parts are
    /// read from one read transaction held open and go out between batches
    /// as ZeroMQ has room for them (`sendSnapshotParts`).
    private func startSnapshot(to identity: [UInt8], whole: Bool) {
        let source = Result { () throws(TurnStoreError) in try store.stateSnapshot() }
        if case .success = source { noteSnapshotStarted() }
        carrySnapshot(snapshots.start(to: identity, whole: whole, source: source, now: now))
    }

    /// Offers the next part of each snapshot to its requester (`SnapshotSender.pump`).
    /// Returns false when none could go (ZeroMQ's queue to each requester is full).
    private func sendSnapshotParts() -> Bool {
        let (sent, effects) = snapshots.pump(
            now: now, epoch: epoch, reopen: { try? store.stateSnapshot() },
            send: { peer, frame in
                do { return try router.send([peer, frame], wait: false) ? .taken : .full } catch { return .failed }
            })
        carrySnapshot(effects)
        return sent
    }

    /// Does what the snapshot sender asks.
    private func carrySnapshot(_ effects: [SnapshotSender<StateSnapshotReader>.Effect]) {
        for effect in effects {
            switch effect {
            case .count(let event):
                core.countEvent(event)
            case .refuse(let peer, let refusal):
                core.countError(refusal)
                // A refusal its requester cannot take (gone, or its queue full) is counted; it asks again.
                if (try? router.send([peer, WireMessage.error(refusal).encoded()], wait: false)) != true { core.countEvent(.sendDropped) }
            case .ended(let peer):
                carryOut(core.step(.snapshotEnded(peer), now: now))
            case .streamed(let peer, let parts, let revision):
                noteSnapshotStreamed(to: peer, parts: parts, revision: revision)
            }
        }
    }

    // MARK: Status

    public var status: LeaderStatus {
        var status = core.status(now: now)
        status.placement = placementDescription
        status.commits = commitTimes.summary
        status.errorCounts = LeaderStatus.byText(errorCounts)
        status.version = configuration.version
        let uptime = now.components
        status.uptimeSeconds = Double(uptime.seconds) + Double(uptime.attoseconds) / 1e18
        let timeout = configuration.heartbeatTimeout.components
        status.heartbeatTimeoutSeconds = Double(timeout.seconds) + Double(timeout.attoseconds) / 1e18
        status.replication = replicationStatus
        // Read on the serving thread, which answers status.
        status.servingAllocations = Leader.countAllocations?()
        return status
    }

    /// The heap allocations the calling thread has made so far, when the
    /// executable counts them (`cogd-lab` sets it at start; nil otherwise):
    /// status then says the serving thread's (`LeaderStatus.servingAllocations`).
    public nonisolated(unsafe) static var countAllocations: (@Sendable () -> UInt64)?

    /// The placement, with where ZeroMQ's I/O threads are now.
    var placementDescription: String { threadsDescription + spinDescription }

    /// How the serving thread waits for work, if it spins (`cogd leader` prints it).
    public var spinDescription: String {
        guard configuration.spinWait > .zero else { return "" }
        let parts = configuration.spinWait.components
        return ", spinning \(parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000) µs after each batch"
    }

    private var threadsDescription: String {
        guard placement.cpus != nil else { return placement.description }
        if ioPlacement.spread {
            return placement.description + ", ZeroMQ I/O on CPU \(CPUList.format(placement.processCPUs)) (under load)"
        }
        guard streamHasOwnIOThread else { return placement.description + ", ZeroMQ I/O beside it" }
        return placement.description + ", requests' I/O beside it, the turn stream's on CPU \(CPUList.format(placement.spareCPUs))"
    }
}

extension Leader: LeaderPorts {
    public func noteRunning(_ request: RequestID, op: String, digest: [UInt8]) throws(TurnStoreError) {
        try runningNote.note(request, op: op, digest: digest)
    }

    public func isConnected(_ peer: [UInt8], probe: [UInt8]) -> Bool {
        do {
            _ = try router.send([peer, probe], wait: false)
            return true
        } catch {
            return error.code != EHOSTUNREACH
        }
    }
}

/// Why a leader stops on its own: its arbiter's lease may have ended
/// (`--ha`), so it released nothing past its deadline (ha.md §4).
public struct LeaderSteppedDown: Error, CustomStringConvertible {
    public let epoch: UInt64
    public var description: String {
        "stepped down from epoch \(epoch): the lease in etcd was not renewed in time, so nothing more was released; "
            + "start it again (systemd does) to rejoin the cluster"
    }
}

/// Why a leader stops on its own: the epoch's scope instance numbers are used up.
public struct InstancesExhausted: Error, CustomStringConvertible {
    public let epoch: UInt64
    public var description: String {
        "epoch \(epoch) has opened 4294967295 scope instances, all its numbers (cogwire §6); the leader stops so that a restart "
            + "begins epoch \(epoch &+ 1), numbering from 1, and the workers register their scopes anew — start it again (systemd does)"
    }
}
