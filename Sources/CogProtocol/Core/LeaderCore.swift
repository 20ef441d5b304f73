import Cog
import CogCodec

/// The leader's rules (`protocol/cogwire.md` §4–§6b) as a state machine with no sockets,
/// no LMDB and no clock: admission, the execution-point instance check,
/// dedup, name holding and takeover, heartbeats and expiry, scope instances
/// and what goes into each record, catch-ups, snapshot admission, and what a
/// failed commit undoes. `Leader` (and `cogd sim`) feed it inputs with the
/// time and carry out the effects it returns.
///
/// A batch: any number of `.message`s (and `.tick`s), then `.endBatch`,
/// which returns `.commit` when the batch wrote anything; the driver commits
/// it and answers `.committed` or `.commitFailed` before anything else.
/// Replies, welcomes and publications come out only after that answer, so
/// nothing of a batch is seen before it is durable.
///
/// It runs op bodies on its graph (`cogs`, in memory) and reads committed
/// state through `LeaderLog`; those are its only references.
@MainActor
public struct LeaderCore {
    /// A peer's routing identity (one connection).
    public typealias Peer = [UInt8]

    public struct Settings: Sendable {
        /// A worker silent longer than this is gone.
        public var heartbeatTimeout: Duration
        /// The most bytes a turn's record may take (`too-large` past it).
        public var maximumRecordBytes: Int
        /// Where turns are published (welcomes name it).
        public var turnsEndpoint: String
        /// Rules switched off, to show the simulator catches their absence.
        public var broken: Set<LeaderRule>
        /// The fingerprints of the rigs served: a hello naming a rig is
        /// refused `rig-mismatch` unless one of them has its name and is
        /// compatible (`CogRig.Fingerprint.incompatibility`). Empty: nothing
        /// is compared.
        public var rigs: [CogRig.Fingerprint]
        /// Who may do what (`cogd leader --peers`): each message is judged
        /// by its connection's key. Nil: nothing is authenticated (loopback).
        public var peers: PeerTable?
        /// Whether a worker's `group` (its hello) is honoured: its top-level
        /// scope registrations join the group's, and each instance is
        /// placed on one member (`cogwire.md` §6a). Off: groups are ignored.
        public var placesGroups = false
        /// How many applied requests' replies wait in their records before
        /// they are indexed into `dedup` together (retention keeps every
        /// record from the oldest of them on). `cogd sim` indexes sooner,
        /// so that its short epochs see records pruned.
        public var indexInterval = LeaderCore.indexInterval

        public init(
            heartbeatTimeout: Duration = .seconds(5), maximumRecordBytes: Int = LeaderCore.maximumRecordBytes,
            turnsEndpoint: String, broken: Set<LeaderRule> = [], rigs: [CogRig.Fingerprint] = [], peers: PeerTable? = nil
        ) {
            self.peers = peers
            self.heartbeatTimeout = heartbeatTimeout
            self.maximumRecordBytes = maximumRecordBytes
            self.turnsEndpoint = turnsEndpoint
            self.broken = broken
            self.rigs = rigs
        }
    }

    public enum Input {
        /// The frames a peer sent as one message (its identity taken off),
        /// and the public key its connection authenticated with (nil: none).
        case message(from: Peer, frames: [[UInt8]], key: String? = nil)
        /// The peers file was read again (SIGHUP): from the next message on,
        /// a key no longer listed is refused `unknown-key`.
        case peers(PeerTable)
        /// Time passed (silent workers expire).
        case tick
        /// The batch ends: commit what it wrote (or, if nothing, answer).
        case endBatch
        /// The last `.commit` is durable; its drafts got these revisions.
        case committed(Range<UInt64>)
        /// The last `.commit` failed; `cause` says why, in words.
        case commitFailed(cause: String)
        /// The snapshot being sent to `peer` ended (sent, given up, or failed).
        case snapshotEnded(Peer)
    }

    public enum Effect {
        /// Send `frame` to `peer`.
        case send(Peer, [UInt8])
        /// Send `peer` the status report (the driver adds what it measures).
        case sendStatus(Peer)
        /// Start sending `peer` the state table as of now: whole, or in parts.
        case startSnapshot(Peer, whole: Bool)
        /// Commit this in one durable transaction, then answer `.committed` or `.commitFailed`.
        case commit(LeaderCommit)
        /// Publish the committed records of these revisions on the turn stream.
        case publish(Range<UInt64>)
        /// A standby's `standby-hello` or `ship-ack` (ha.md §9), for the
        /// driver's shipping; a leader that ships to none refuses it.
        case standby(Peer, WireMessage)
    }

    struct WorkerState {
        var appliedRevision: UInt64
        var lastHeard: Duration
        /// The routing identity of the process that holds the name.
        var identity: Peer
        /// Whether its last heartbeat's state digest agrees with the log's.
        var digest = StateDigestAgreement.unknown
        /// The group its hello named, when the leader places groups (its
        /// top-level registrations join the group's).
        var group: String?
        /// Whether it said hello as a tool (reads the state and closes).
        var tool = false
        /// The keys of the app settings its hello named (nil: none).
        var settings: [String]? = nil
    }

    public let settings: Settings
    let log: any LeaderLog
    unowned let ports: any LeaderPorts
    let registry: OpRegistry
    let durable: LeaderStore
    /// The authoritative graph (op bodies run on it).
    public let cogs: Cogs

    private(set) var workers: [String: WorkerState] = [:]
    /// When the core last stepped, and when it last came back from a pause
    /// (a gap between steps longer than `pauseAllowance`): silence is
    /// measured from then, not across the pause.
    private var lastLook: Duration?
    private var resumedAt: Duration = .zero
    /// Until when a leader that follows an earlier one (epoch above 1)
    /// places no member of a group (`cogwire.md` §6b): a worker may still
    /// act for what the earlier leader placed on it until its lease runs
    /// out, at most the heartbeat timeout after it last heard that leader.
    /// Nil: nothing is held (the first epoch, or the hold is over).
    public private(set) var placementHeldUntil: Duration?
    /// Group registrations that came during the hold, in arrival order
    /// (one per worker and registration number), registered when it ends.
    private var heldRegistrations: [(peer: Peer, spec: ScopeRegistration)] = []
    /// Workers given up for silence (this epoch): their requests are
    /// rejected and their heartbeats answered `gone` until they say hello.
    private var goneWorkers = GoneWorkers(limit: LeaderCore.goneWorkersLimit)
    /// Scope instances minted from the selectors workers registered.
    private(set) var scopes: ScopeTable
    /// The scope instances as of the last commit (what the log says).
    private var scopesAtLastCommit: ScopeTable
    /// Requests answered in the batch being built, for retries inside one batch.
    private var batchReplies: [RequestID: [UInt8]] = [:]
    /// Per requester, the highest sequence already answered (in any epoch).
    private var highestAnswered: [String: UInt64] = [:]
    /// What the batch sends once it is committed, in order.
    private var outgoing: [Effect] = []
    /// Where the batch's op replies, welcomes and registration replies lie
    /// in `outgoing`, and the requests it applied: what a failed commit
    /// must answer differently.
    private var batchOpReplies: [(index: Int, request: RequestID)] = []
    private var batchWelcomes: [(index: Int, worker: String)] = []
    private var batchRegistrations: [Int] = []
    private var batchApplied: [RequestID] = []
    /// The workers whose instances the batch retired (gone, or taken over).
    private var batchDrops: [(worker: String, turn: String)] = []
    private var dedupRows: [(RequestID, [UInt8])] = []
    /// The batch's requests answered rejected or refused (stored answers,
    /// and retries answered from them), kept beside the turns with its
    /// commit (`turnlog.md` §2d).
    private var rejectionRows: [RejectionRecord] = []
    /// Instances opened by registration replies (no record opens them),
    /// kept with the next commit so a log reader can name them
    /// (`turnlog.md` §2c): that commit precedes any turn from them.
    private var pendingOpenings: [ScopeEvent] = []
    /// The peers that asked for a catch-up in the batch being built.
    private var catchUpsThisBatch: Set<Peer> = []
    /// The snapshot the message being handled starts.
    private var snapshotsToStart: [Effect] = []
    /// The peers a snapshot is being sent to.
    private(set) var snapshotPeers: Set<Peer> = []
    /// Replies to applied requests not yet in the dedup table: each one's
    /// record (its `origin.request` and revision) holds it durably, so they
    /// are indexed together every `indexInterval` of them.
    private var unindexed: [RequestID: [UInt8]] = [:]
    /// Quarantined requests' answers (`settle`) not yet committed.
    private var quarantine: [RequestID: (stored: [UInt8], record: RejectionRecord)] = [:]
    /// The commit asked for and not yet answered.
    private var committing: LeaderCommit?
    /// Who may do what, when connections are authenticated (`Settings.peers`, reloaded by `.peers`).
    public private(set) var peers: PeerTable?
    /// Error replies and events, by code (`cogd status`): rejections among
    /// them, under the same code as a wire error that shares it.
    public private(set) var errorCounts: [CogdCode: UInt64] = [:]
    /// Op requests answered rejected, by code: the part of `errorCounts`
    /// that is rejections, so a `hello` refused `name-in-use` is told from
    /// an `op` rejected `name-in-use` (`protocol/metrics.md` §3).
    public private(set) var rejectionCounts: [CogdCode: UInt64] = [:]
    /// Op requests answered, by `RequestOutcome` (`/metrics`).
    public private(set) var requestOutcomes: [RequestOutcome: UInt64] = [:]
    /// Op requests whose body refused, by op and the app's code (`/metrics`,
    /// `cogd status`): at most `maximumRefusalSeries` pairs, the rest
    /// counted under `RefusalSeries.overflow` (`protocol/metrics.md`).
    public private(set) var refusalCounts: [RefusalSeries: UInt64] = [:]
    /// The outcome of the request `run` answered last.
    private var lastOutcome = RequestOutcome.rejected
    /// Events for the operator's log, until the driver takes them.
    private var pendingEvents: [Event] = []
    /// Events not kept because `maximumPendingEvents` were waiting.
    public private(set) var droppedEvents: UInt64 = 0

    /// Starts from what `log` holds: the replies left unindexed by the
    /// previous process (its records name them) are rebuilt and indexed with
    /// the first commit, so a retry after a restart is answered, never run.
    public init(log: any LeaderLog, ports: any LeaderPorts, registry: OpRegistry, settings: Settings) throws(TurnStoreError) {
        self.log = log
        self.ports = ports
        self.registry = registry
        self.settings = settings
        peers = settings.peers
        guard log.epoch <= ScopeTable.highestEpoch else {
            throw TurnStoreError(
                code: .epochTooHigh,
                message: "the log's epoch is \(log.epoch); a leader serves epochs up to \(ScopeTable.highestEpoch) "
                    + "(scope instance numbers hold the epoch in their high 32 bits, cogwire §6)")
        }
        durable = LeaderStore(log: log)
        cogs = Cogs.durable(store: durable)
        scopes = ScopeTable(epoch: log.epoch)
        scopes.readsUnreadableAsEmpty = settings.broken.contains(.selectorEncoding)
        scopesAtLastCommit = scopes
        if log.unindexedFrom != nil {
            unindexed = try LeaderCore.rebuiltReplies(log)
            indexNow = true
        }
    }

    /// The `dedup` rows of the applied requests whose replies `log` holds
    /// only in their records (from `unindexedFrom`), rebuilt from those
    /// records: what a leader indexes as it opens the folder, and `cogd log
    /// compact` before it removes them.
    nonisolated public static func rebuiltReplies(_ log: some LeaderLog) throws(TurnStoreError) -> [RequestID: [UInt8]] {
        guard let first = log.unindexedFrom else { return [:] }
        var rebuilt: [RequestID: [UInt8]] = [:]
        try log.forEachRecord(from: first) { record in
            // A request whose body settled several turns was answered with the first's revision.
            guard let request = record.origin.request, rebuilt[request] == nil else { return }
            rebuilt[request] = LeaderCore.dedupValue(
                digest: record.origin.digest, frame: OpReply(request: request, outcome: .applied(revision: record.revision)).frame())
        }
        return rebuilt
    }

    /// The unindexed replies are indexed at the next commit.
    private var indexNow = false

    public var epoch: UInt64 { log.epoch }

    /// This epoch's scope instance numbers are used up (2^32 − 1 opened):
    /// nothing more opens, and the driver must stop — the next start is a
    /// new epoch, numbering from 1, and every worker registers anew.
    public var instancesExhausted: Bool { scopes.exhausted }

    /// Whether a batch has anything to commit or send (`.endBatch` then does work).
    public var hasWork: Bool {
        !outgoing.isEmpty || !durable.pending.isEmpty || !dedupRows.isEmpty || !rejectionRows.isEmpty || indexNow || !quarantine.isEmpty
    }

    /// Every rule applies one input: see `Input`.
    public mutating func step(_ input: Input, now: Duration) -> [Effect] {
        observe(now)
        switch input {
        case .message(let peer, let frames, let key):
            guard frames.count == 1 else {
                refuse(peer, WireError(.malformed, "expected one frame after the identity, got \(frames.count)"))
                return []
            }
            handle(peer, frames[0], key: key, now: now)
            // A snapshot starts at once, of what is committed before this
            // batch (the requester applies the batch's turns above it).
            defer { snapshotsToStart = [] }
            return snapshotsToStart
        case .tick:
            expireSilentWorkers(now: now)
            releaseHeldRegistrations(now: now)
            return []
        case .endBatch:
            return endBatch()
        case .committed(let revisions):
            return committed(revisions)
        case .commitFailed(let cause):
            return commitFailed(cause: cause)
        case .snapshotEnded(let peer):
            snapshotPeers.remove(peer)
            return []
        case .peers(let table):
            peers = table
            return []
        }
    }

    // MARK: Time

    /// A gap this long between two steps is a pause (the process was
    /// stopped, or a commit stalled): the driver steps at least every 100 ms.
    public static let pauseAllowance: Duration = .seconds(1)

    private mutating func observe(_ now: Duration) {
        if lastLook == nil, log.epoch > 1, settings.placesGroups {
            placementHeldUntil = now + settings.heartbeatTimeout
            let timeout = settings.heartbeatTimeout.components
            note(.placementHeld(seconds: Double(timeout.seconds) + Double(timeout.attoseconds) / 1e18))
        }
        if let lastLook, now - lastLook > LeaderCore.pauseAllowance { resumedAt = now }
        lastLook = now
    }

    /// A worker silent past the heartbeat timeout is gone: its scope
    /// instances retire (in a record of their own), so its queued or late
    /// requests are rejected. Silence counts from the later of what it last
    /// said and the return from a pause: a leader that was stopped did not
    /// hear, which is not the workers' silence.
    private mutating func expireSilentWorkers(now: Duration) {
        guard !settings.broken.contains(.heartbeatExpiry) else { return }
        // Sorted only when someone is silent (this runs at every look), and
        // in name order: the records of one tick come out the same every run.
        let silent = workers.filter { now - max($0.value.lastHeard, resumedAt) >= settings.heartbeatTimeout }.keys
        for name in silent.sorted() {
            if let state = workers[name] {
                note(.timedOut(worker: name, seconds: Double((now - max(state.lastHeard, resumedAt)).components.seconds), tool: state.tool))
            }
            workers[name] = nil
            goneWorkers.insert(name)
            dropWorker(name, named: LeaderCore.workerGoneTurn)
        }
    }

    // MARK: A request left running by the previous process

    /// A request the previous leader process noted as running and never
    /// answered (`turnlog.md` §1a): what the driver read from the note,
    /// handed to the core once it has rebuilt its unindexed replies.
    public struct LeftOverRequest: Sendable, Equatable {
        public var request: RequestID
        public var op: String
        public var digest: [UInt8]?
        /// A fatal signal's handler marked it: its body crashed the process.
        public var crashed: Bool
        /// It was also running at an earlier death from outside (SIGKILL).
        public var diedTwice: Bool

        public init(request: RequestID, op: String, digest: [UInt8]?, crashed: Bool, diedTwice: Bool) {
            self.request = request
            self.op = op
            self.digest = digest
            self.crashed = crashed
            self.diedTwice = diedTwice
        }
    }

    /// What became of a left-over request.
    public enum LeftOverOutcome: Sendable, Equatable {
        /// It has an answer already (indexed, or rebuilt from its record): nothing to do.
        case answered
        /// Answered `rejected(crashed-leader)` for good, in the next commit (the driver commits at once).
        case quarantined
        /// Killed from outside once: its retry may run once more.
        case spared
    }

    /// Decides a left-over request: a crash, or a second death with it
    /// running, quarantines it — its answer `rejected(crashed-leader)` goes
    /// into dedup and the rejections table at the next commit, so a retry
    /// is never run again; one death from outside spares it. A request
    /// that has an answer (in dedup, or among the replies rebuilt from
    /// records not yet indexed) is left as it is. Call before serving, then
    /// `step(.endBatch)` to commit the answer.
    public mutating func settle(_ left: LeftOverRequest) throws(TurnStoreError) -> LeftOverOutcome {
        if unindexed[left.request] != nil || quarantine[left.request] != nil { return .answered }
        if try log.dedupReply(for: left.request) != nil { return .answered }
        guard left.crashed || left.diedTwice else { return .spared }
        let reason = "the leader stopped while running this request (op `\(left.op)`); it is not run again"
        let reply = OpReply(request: left.request, outcome: .rejected(Rejection(.crashedLeader, reason)))
        let stored = LeaderCore.dedupValue(digest: left.digest, frame: reply.frame())
        // On the record too (`turnlog.md` §2d), with the digest as stored (8 zero bytes when unknown).
        let record = RejectionRecord(
            request: left.request, op: left.op, digest: Array(stored.prefix(RequestDigest.size)), kind: .rejected,
            code: CogdCode.crashedLeader.text, reason: reason)
        // Held until a commit stores it (a failed commit does not drop it),
        // and meanwhile the answer to its retries: never run.
        quarantine[left.request] = (stored, record)
        highestAnswered[left.request.worker] = nil
        return .quarantined
    }

    // MARK: Batches and commits

    private mutating func endBatch() -> [Effect] {
        guard committing == nil else { return [] }
        var index: DedupIndexChange?
        if unindexed.count >= settings.indexInterval || (indexNow && !unindexed.isEmpty) {
            dedupRows += LeaderCore.inKeyOrder(unindexed)
            index = .indexed
        } else if indexNow {
            index = .indexed
        } else if !unindexed.isEmpty, log.unindexedFrom == nil, !durable.pending.isEmpty {
            // The first replies left out since the last indexing are this batch's.
            index = .unindexedFrom(log.lastRevision + 1)
        }
        for (request, held) in quarantine.sorted(by: { ($0.key.worker, $0.key.sequence) < ($1.key.worker, $1.key.sequence) }) where !dedupRows.contains(where: { $0.0 == request }) {
            dedupRows.append((request, held.stored))
            rejectionRows.append(held.record)
        }
        let drafts = durable.takePending()
        // Openings ride along with a commit; they make one of their own only
        // past `openingsFlushCount` (so they never pile up while no turn comes).
        guard !drafts.isEmpty || !dedupRows.isEmpty || !rejectionRows.isEmpty || index != nil
            || pendingOpenings.count >= LeaderCore.openingsFlushCount
        else {
            return committed(log.lastRevision + 1..<log.lastRevision + 1)
        }
        let commit = LeaderCommit(drafts: drafts, replies: dedupRows, index: index, openings: pendingOpenings, rejections: rejectionRows)
        pendingOpenings = []
        committing = commit
        return [.commit(commit)]
    }

    private mutating func committed(_ revisions: Range<UInt64>) -> [Effect] {
        // Replies go out only after their batch is durable, and revisions only
        // grow: a commit answered that was never asked for, or with other
        // revisions than its drafts', would acknowledge what is not stored.
        if let committing {
            precondition(
                revisions.count == committing.drafts.count && (revisions.isEmpty || revisions.upperBound &- 1 == log.lastRevision),
                "internal inconsistency: a commit of \(committing.drafts.count) turns answered with revisions \(revisions), the log at \(log.lastRevision)")
        } else {
            precondition(revisions.isEmpty, "internal inconsistency: revisions \(revisions) committed with no commit under way")
        }
        // The quarantined answers rode along with every commit since settling: stored now.
        if committing != nil { quarantine = [:] }
        if committing?.index == .indexed {
            // Kept at its size (bounded by the index interval): it fills again.
            unindexed.removeAll(keepingCapacity: true)
            indexNow = false
        }
        committing = nil
        scopesAtLastCommit = scopes
        batchDrops = []
        dedupRows = []
        rejectionRows = []
        // Kept at its size (bounded by the batch's): built anew, every batch
        // regrew it from empty, rehashing at each doubling.
        batchReplies.removeAll(keepingCapacity: true)
        if highestAnswered.count > LeaderCore.answeredCacheLimit {
            // A cache of what `lastSequence(of:)` reads: one-off names (each
            // `cogd call`) would otherwise pile up in it forever.
            highestAnswered = highestAnswered.filter { workers[$0.key] != nil }
        }
        // The batch's replies are moved, not copied (a copy retained and
        // released each one's peer and frame): the publication goes first.
        var effects = takeOutgoing()
        if !revisions.isEmpty { effects.insert(.publish(revisions), at: 0) }
        return effects
    }

    /// A commit failed (disk full, I/O error): nothing of the batch becomes
    /// visible. Its turns are undone in the graph, the scope instances are
    /// as of the last commit, every request of the batch is answered
    /// `rejected("unavailable: …")` (kept nowhere, so a retry runs afresh),
    /// a registration answered in it is asked for again, and serving goes on.
    private mutating func commitFailed(cause: String) -> [Effect] {
        guard let failed = committing else { return [] }
        committing = nil
        // Kept for the next commit (a registration of the batch is asked for
        // again: its number is minted anew, and the newer opening overwrites).
        pendingOpenings = failed.openings + pendingOpenings
        if pendingOpenings.count > LeaderCore.maximumPendingOpenings {
            // Commits failing on and on, workers registering again: only names are lost.
            pendingOpenings.removeFirst(pendingOpenings.count - LeaderCore.maximumPendingOpenings)
        }
        countEvent(.commitFailed)
        do {
            try durable.restore(cogs, undoing: failed.drafts)
        } catch {
            // The graph would no longer match the store: stop; a restart loads the store.
            fatalError("internal inconsistency: a failed commit cannot be undone (\(cause)): \(error)")
        }
        scopes = scopesAtLastCommit
        let drops = batchDrops
        batchDrops = []
        for request in batchApplied { unindexed[request] = nil }
        dedupRows = []
        // Their requests are answered `unavailable` instead (kept nowhere).
        rejectionRows = []
        batchReplies = [:]
        highestAnswered = [:]
        for (index, request) in batchOpReplies {
            outgoing[index] = .send(
                LeaderCore.peer(of: outgoing[index]),
                unavailable(request, because: "the commit failed: \(cause); nothing of this request was kept"))
        }
        for index in batchRegistrations {
            count(.registerAgain)
            outgoing[index] = .send(
                LeaderCore.peer(of: outgoing[index]),
                WireMessage.error(WireError(.registerAgain, "the commit failed: \(cause); register the scopes again")).encoded())
        }
        for (index, worker) in batchWelcomes {
            // As of what is committed, not of the turns given up.
            let peer = LeaderCore.peer(of: outgoing[index])
            do {
                outgoing[index] = .send(peer, try welcome(worker).encoded())
            } catch {
                count(.unavailable)
                outgoing[index] = .send(
                    peer, WireMessage.error(WireError(.unavailable, "cannot read the dedup table: \(error.message)")).encoded())
            }
        }
        let effects = takeOutgoing()
        // The workers given up (or whose names were taken over) in the batch
        // stay so: their instances retire again, in the next batch's records
        // (after the welcomes above, which name only what is committed).
        for (worker, name) in drops { dropWorker(worker, named: name) }
        return effects
    }

    private static func peer(of effect: Effect) -> Peer {
        switch effect {
        case .send(let peer, _), .sendStatus(let peer), .startSnapshot(let peer, _), .standby(let peer, _): return peer
        case .commit, .publish: return []
        }
    }

    private mutating func takeOutgoing() -> [Effect] {
        defer {
            outgoing = []
            catchUpsThisBatch = []
            batchOpReplies = []
            batchWelcomes = []
            batchRegistrations = []
            batchApplied = []
        }
        return outgoing
    }

    // MARK: Messages

    /// Counts a wire `error` reply.
    private mutating func count(_ code: CogdCode) { errorCounts[code, default: 0] &+= 1 }
    /// Counts an op request answered rejected (in `errorCounts` too).
    private mutating func countRejected(_ code: CogdCode) {
        errorCounts[code, default: 0] &+= 1
        rejectionCounts[code, default: 0] &+= 1
    }

    private mutating func refuse(_ peer: Peer, _ error: WireError) {
        count(error.code)
        outgoing.append(.send(peer, WireMessage.error(error).encoded()))
    }

    private mutating func reject(_ peer: Peer, _ request: RequestID, _ rejection: Rejection) {
        countRejected(rejection.code)
        outgoing.append(.send(peer, OpReply(request: request, outcome: .rejected(rejection)).frame()))
    }

    private mutating func handle(_ peer: Peer, _ frame: [UInt8], key: String?, now: Duration) {
        let message: WireMessage
        do {
            message = try WireMessage.decode(frame)
        } catch {
            refuse(peer, error.wireError)
            return
        }
        var role: PeerTable.Role?
        if let peers {
            // The key the connection authenticated with, not what a frame
            // claims, decides who speaks and in which names.
            switch authorize(message, key: key, in: peers) {
            case .allowed(let allowed):
                role = allowed
            case .denied(let code, let why):
                if case .op(let request) = message {
                    // Refused without a dedup entry: the name's holder's own
                    // request with that id still runs.
                    reject(peer, request.request, Rejection(code.code, why))
                } else {
                    refuse(peer, WireError(code.code, why))
                }
                return
            }
        }
        if let worker = message.workerName, let problem = LeaderCore.workerNameProblem(worker) {
            if case .op(let request) = message {
                reject(peer, request.request, Rejection(.badRequest, problem))
            } else {
                refuse(peer, WireError(.malformed, problem))
            }
            return
        }
        switch message {
        case .hello(let worker, let revision, let rig, let group, let tool, let settingKeys):
            if let rig, let refusal = rigRefusal(rig, worker: worker) {
                note(.rigRefused(worker: worker, reason: refusal.message))
                refuse(peer, refusal)
                return
            }
            if let group, let problem = LeaderCore.groupProblem(group) {
                refuse(peer, WireError(.malformed, problem))
                return
            }
            if let settingKeys, let problem = LeaderCore.settingKeysProblem(settingKeys) {
                refuse(peer, WireError(.malformed, problem))
                return
            }
            hello(
                peer, worker, revision: revision, group: settings.placesGroups ? group : nil, tool: tool,
                settings: settingKeys.map { $0.isEmpty ? nil : $0.sorted() } ?? nil, now: now)
        case .heartbeat(let worker, let revision, let stateDigest):
            heartbeat(peer, worker, revision: revision, stateDigest: stateDigest, now: now)
        case .goodbye(let worker):
            goodbye(peer, worker, now: now)
        case .snapshotRequest(let inParts):
            snapshotRequest(peer, inParts: inParts, observer: role == .observer)
        case .catchUpRequest(let from):
            catchUp(peer, from: from, observer: role == .observer)
        case .op(let request):
            if let holder = workers[request.request.worker], holder.identity != peer {
                // Not this process's name (any more): refused without a dedup
                // entry, so the holder's own request with that id still runs.
                reject(peer, request.request, Rejection(.nameInUse, nameInUse(request.request.worker, holder, now: now).message))
                requestOutcomes[.rejected, default: 0] &+= 1
                note(.nameConflict(worker: request.request.worker))
                return
            }
            lastOutcome = .rejected
            outgoing.append(.send(peer, run(request)))
            requestOutcomes[lastOutcome, default: 0] &+= 1
            batchOpReplies.append((outgoing.count - 1, request.request))
        case .statusRequest:
            outgoing.append(.sendStatus(peer))
        case .scopeRegister(let spec):
            if holdsPlacement(peer, spec, now: now) { return }
            register(peer, spec, now: now)
        case .standbyHello, .shipAck, .standbyCopied:
            outgoing.append(.standby(peer, message))
        default:
            refuse(peer, WireError(.notAllowed, "`\(message.typeName)` is not a request the leader serves"))
        }
    }

    // MARK: Who may speak (authenticated connections)

    enum Authorization {
        case allowed(PeerTable.Role)
        case denied(Denial, String)
    }

    /// Whether the connection that authenticated with `key` may send
    /// `message` (`protocol/cogwire.md` §9): its key must be listed, its
    /// role allow the message, and every worker name it acts in be its own.
    func authorize(_ message: WireMessage, key: String?, in peers: PeerTable) -> Authorization {
        guard let key else {
            return .denied(
                .unknownKey, "this connection is not authenticated; the leader takes only CURVE connections with a key in its peers file")
        }
        guard let holder = peers[key] else {
            return .denied(.unknownKey, "key \(key) is not in the leader's peers file (removed since it connected?)")
        }
        let who = "key \(key) (\(holder.role.rawValue) \(holder.name), line \(holder.line) of the peers file)"
        func forbidden(_ what: String) -> Authorization { .denied(.roleForbids, "\(who) may not \(what)") }
        func own(_ worker: String) -> Authorization? {
            holder.mayUse(name: worker)
                ? nil : .denied(.notYourName, "\(who) may act only as \(holder.name), not as \(worker)")
        }
        switch message {
        case .statusRequest:
            break
        case .hello(let worker, _, _, _, let tool, _):
            // A client says hello only as a tool (`cogd call --name` learns its name's last sequence): it gains no reading.
            guard holder.role == .worker || (tool && holder.role == .client) else {
                return forbidden("say hello: only a worker key may (a client key only as a tool)")
            }
            if let denial = own(worker) { return denial }
        case .heartbeat(let worker, _, _):
            guard holder.role == .worker else { return forbidden("say hello or heartbeat: only a worker key may") }
            if let denial = own(worker) { return denial }
        case .goodbye(let worker):
            guard holder.role != .standby else { return forbidden("say goodbye: a standby key holds no worker name") }
            // Whoever holds the name says it; the core refuses anyone else.
            if let denial = own(worker) { return denial }
        case .scopeRegister(let spec):
            guard holder.role == .worker else { return forbidden("register scopes: only a worker key may") }
            if let denial = own(spec.worker) { return denial }
        case .standbyHello(let node, _, _, _, _, _), .shipAck(let node, _), .standbyCopied(let node, _):
            // Only a standby key follows the log (ha.md §9), as the node its line names.
            guard holder.role == .standby else { return forbidden("follow the log as a standby: only a standby key may") }
            if let denial = own(node) { return denial }
        case .snapshotRequest, .catchUpRequest:
            guard holder.role == .worker || holder.role == .observer else {
                return forbidden("read the state or the turns: only worker and observer keys may")
            }
        case .op(let request):
            guard holder.role != .observer else { return forbidden("run ops: an observer only reads") }
            guard holder.role != .standby else { return forbidden("run ops: a standby key only follows the log") }
            if let denial = own(request.request.worker) { return denial }
            guard holder.mayRun(op: request.op) else {
                let patterns = holder.ops.map(\.text).joined(separator: " ")
                return forbidden("run `\(request.op)`: its op patterns are \(patterns)")
            }
        default:
            break  // Not a request: refused `not-allowed` as from anyone.
        }
        return .allowed(holder.role)
    }

    // MARK: Names: hello, heartbeats, holding

    /// The refusal of a hello from a worker running `rig`, when no rig
    /// served has its name or the one that has is not compatible; nil when
    /// it may join (or no rigs are compared).
    private func rigRefusal(_ rig: CogRig.Fingerprint, worker: String) -> WireError? {
        guard !settings.rigs.isEmpty else { return nil }
        guard let served = settings.rigs.first(where: { $0.name == rig.name }) else {
            let names = settings.rigs.map { "`\($0.name)`" }.joined(separator: ", ")
            return WireError(.rigMismatch, "worker \(worker) runs rig `\(rig.name)`, which this leader does not serve (it serves \(names))")
        }
        return rig.incompatibility(with: served).map { WireError(.rigMismatch, "worker \(worker)'s \($0)") }
    }

    private mutating func hello(
        _ peer: Peer, _ worker: String, revision: UInt64, group: String?, tool: Bool = false, settings settingKeys: [String]? = nil, now: Duration
    ) {
        guard revision <= log.lastRevision else {
            // Its replica holds turns this log does not: another history.
            refuse(peer, WireError(
                .revisionAhead,
                "worker \(worker) says it holds revision \(revision), but this leader's log ends at revision \(log.lastRevision); sync again from revision 0"))
            return
        }
        if let holder = workers[worker], holder.identity != peer {
            guard !holdsName(holder, worker, now: now) else {
                refuse(peer, nameInUse(worker, holder, now: now))
                note(.nameConflict(worker: worker))
                return
            }
            note(.nameTakenOver(worker: worker))
            // The name's earlier process is gone (disconnected, or silent
            // past the timeout): this one takes the name over, and what the
            // earlier one held retires with it.
            dropWorker(worker, named: LeaderCore.nameTakenOverTurn)
        }
        goneWorkers.remove(worker)
        if let held = workers[worker], held.identity == peer, held.group != group {
            // The same process, now in another group: what it held was placed for the old one.
            dropWorker(worker, named: LeaderCore.reregisteredTurn)
        }
        if workers[worker]?.identity != peer { note(.joined(worker: worker, group: group, revision: revision, tool: tool)) }
        workers[worker] = WorkerState(appliedRevision: revision, lastHeard: now, identity: peer, group: group, tool: tool, settings: settingKeys)
        sendWelcome(worker, to: peer)
    }

    /// The connection holding `worker` gives the name up (it closes): the
    /// name is dropped at once, as at the heartbeat timeout — a worker's
    /// scope instances retire in a `cogd.workerGone` record and a later
    /// heartbeat of it is told `gone`. Only the holder may say it: from a
    /// connection that holds no name it is refused `hello-first`, for a name
    /// another connection holds `name-in-use`; nothing changes then.
    private mutating func goodbye(_ peer: Peer, _ worker: String, now: Duration) {
        guard let holder = workers[worker] else {
            refuse(peer, helloFirst("goodbye", worker: worker))
            return
        }
        guard holder.identity == peer else {
            refuse(peer, WireError(
                .nameInUse,
                "another connection holds worker \(worker); only the connection that said hello as a name may say goodbye for it"))
            return
        }
        workers[worker] = nil
        note(.saidGoodbye(worker: worker, tool: holder.tool))
        // A tool's name is its own, never used again; a worker's heartbeat after its goodbye rejoins.
        if !holder.tool { goneWorkers.insert(worker, reason: .saidGoodbye) }
        dropWorker(worker, named: LeaderCore.workerGoneTurn)
    }

    private mutating func heartbeat(_ peer: Peer, _ worker: String, revision: UInt64, stateDigest: StateDigest?, now: Duration) {
        if let gone = goneWorkers.reason(worker) {
            // Heard again after being given up: it must rejoin (hello, then
            // register its scopes anew) before its work is admitted.
            refuse(peer, WireError(.gone, "worker \(worker) \(gone.words); its scope instances are retired — say hello again"))
            return
        }
        guard let holder = workers[worker] else {
            refuse(peer, helloFirst("heartbeat", worker: worker))
            return
        }
        guard holder.identity == peer else {
            refuse(peer, nameInUse(worker, holder, now: now))
            return
        }
        workers[worker] = WorkerState(
            appliedRevision: revision, lastHeard: now, identity: peer, digest: digestAgreement(revision, stateDigest),
            group: holder.group, tool: holder.tool, settings: holder.settings)
        sendWelcome(worker, to: peer)
    }

    /// Compares the state digest a worker reports for `revision` with the
    /// one the log holds for it. A record that cannot be read makes it
    /// `unknown`: nothing is decided on it.
    private func digestAgreement(_ revision: UInt64, _ reported: StateDigest?) -> StateDigestAgreement {
        guard let reported, revision <= log.lastRevision else { return .unknown }
        guard let expected = try? log.stateDigest(at: revision) else { return .unknown }
        return expected == reported ? .agrees : .differs
    }

    /// Whether the connection `peer` said hello and holds a worker name.
    private func holdsAName(_ peer: Peer) -> Bool {
        workers.values.contains { $0.identity == peer }
    }

    /// Whether the process holding `worker`'s name is still there: heard
    /// within the heartbeat timeout and still connected.
    private mutating func holdsName(_ holder: WorkerState, _ worker: String, now: Duration) -> Bool {
        // Silence counts from the return from a pause, as for expiry.
        guard now - max(holder.lastHeard, resumedAt) < settings.heartbeatTimeout else { return false }
        // A welcome (committed revision only) is harmless to a live holder;
        // the transport refuses it if the holder has disconnected.
        let probe = WireMessage.welcome(
            epoch: epoch, lastRevision: log.lastRevision, turnsEndpoint: settings.turnsEndpoint,
            lastSequence: (try? lastSequence(of: worker)) ?? 0)  // the holder keeps the higher of its own and this
        return ports.isConnected(holder.identity, probe: probe.encoded())
    }

    private func nameInUse(_ worker: String, _ holder: WorkerState, now: Duration) -> WireError {
        let silence = (now - holder.lastHeard).components
        let tenths = silence.seconds * 10 + silence.attoseconds / 100_000_000_000_000_000
        return WireError(
            .nameInUse,
            "another process is connected as worker \(worker) (heard \(tenths / 10).\(tenths % 10) s ago); each worker needs its own --name")
    }

    /// The refusal of a worker's message from a connection that has not said
    /// hello (or no longer holds a name).
    private func helloFirst(_ type: String, worker: String?) -> WireError {
        WireError(
            .helloFirst,
            "`\(type)` needs a worker that said hello on this connection\(worker.map { " (worker \($0) has not)" } ?? ""); say hello first")
    }

    /// The answer to `worker`'s hello or heartbeat. It carries the highest
    /// sequence answered in that name, so a worker restarted under the same
    /// name numbers its requests above it: a new request is never mistaken
    /// for a retry of an old one.
    private mutating func welcome(_ worker: String) throws(TurnStoreError) -> WireMessage {
        .welcome(
            epoch: epoch, lastRevision: durable.nextRevision - 1, turnsEndpoint: settings.turnsEndpoint,
            lastSequence: try lastSequence(of: worker), group: workers[worker]?.group)
    }

    /// Sends `worker`'s welcome, or `unavailable` when the highest sequence
    /// answered in its name cannot be read.
    private mutating func sendWelcome(_ worker: String, to peer: Peer) {
        do {
            outgoing.append(.send(peer, try welcome(worker).encoded()))
            batchWelcomes.append((outgoing.count - 1, worker))
        } catch {
            refuse(peer, WireError(.unavailable, "cannot read the dedup table: \(error.message)"))
        }
    }

    // MARK: Snapshots and catch-ups

    private mutating func snapshotRequest(_ peer: Peer, inParts: Bool, observer: Bool) {
        guard holdsAName(peer) || observer else {
            refuse(peer, helloFirst("snapshot-request", worker: nil))
            return
        }
        // One snapshot per peer: asking again replaces the one under way.
        guard snapshotPeers.contains(peer) || snapshotPeers.count < LeaderCore.maximumSnapshotStreams else {
            refuse(peer, WireError(
                .unavailable, "\(LeaderCore.maximumSnapshotStreams) snapshots are being sent, the most at once; ask again later"))
            return
        }
        snapshotPeers.insert(peer)
        snapshotsToStart.append(.startSnapshot(peer, whole: !inParts))
    }

    private mutating func catchUp(_ peer: Peer, from: UInt64, observer: Bool) {
        guard holdsAName(peer) || observer else {
            refuse(peer, helloFirst("catch-up-request", worker: nil))
            return
        }
        guard catchUpsThisBatch.insert(peer).inserted else {
            // One catch-up per peer per batch: a peer that asks faster than
            // it reads cannot make the leader build reply after reply.
            refuse(peer, WireError(.busy, "one catch-up per batch; ask again once the answer to the first arrives"))
            return
        }
        let first = log.firstRevision
        if from < first, first > 1 {
            // Retention removed those records: only a snapshot brings this peer up.
            refuse(peer, WireError(
                .compacted,
                "revision \(from) is no longer in the log: it keeps revisions \(first) to \(log.lastRevision); "
                    + "sync from a snapshot (snapshot-request)"))
            return
        }
        do {
            let records = try log.records(from: from, limit: 10_000, maximumBytes: LeaderCore.catchUpReplyBytes)
            outgoing.append(.send(peer, WireMessage.turns(epoch: epoch, records: records).encoded()))
        } catch {
            refuse(peer, WireError(.unavailable, "cannot read the turn log: \(error.message)"))
        }
    }

    // MARK: Scopes

    private mutating func register(_ peer: Peer, _ spec: ScopeRegistration, now: Duration) {
        guard let holder = workers[spec.worker] else {
            // Instances live and die with a worker's heartbeats: a name that
            // never said hello on this connection registers nothing.
            refuse(peer, helloFirst("scope-register", worker: spec.worker))
            return
        }
        guard holder.identity == peer else {
            refuse(peer, nameInUse(spec.worker, holder, now: now))
            return
        }
        guard scopes.registrationCount(of: spec.worker) < LeaderCore.maximumRegistrationsPerWorker
            || scopes.isRegistered(spec.worker, spec.registration)
        else {
            refuse(peer, WireError(
                .tooManyRegistrations,
                "worker \(spec.worker) holds \(LeaderCore.maximumRegistrationsPerWorker) scope registrations, the most a worker may"))
            return
        }
        let computed = Cogs.hasSelector(named: spec.source)
        let current: [UInt8]?
        if spec.isRoot {
            // A mechanism's root: one member, always selected (§6a).
            current = [0xf5]
        } else if computed {
            // One that does not encode opens nothing yet (nothing is open to
            // keep); it opens what it selects at the first turn it reads.
            if case .encoded(let value) = evaluateSelector(spec.source, spec.key) { current = value } else { current = nil }
        } else {
            do {
                current = try durable.currentValueOrThrow(name: spec.source, key: spec.key)
            } catch {
                // Unknown members: nothing is registered; the worker registers anew.
                refuse(peer, WireError(.registerAgain, "cannot read the state table: \(error); register the scopes again"))
                return
            }
        }
        let (instances, replaced, moved) = scopes.register(
            spec, group: holder.group, currentValue: current, computed: computed,
            exclusive: !settings.broken.contains(.exclusivePlacement))
        // A registration number sent again replaces the registration: its
        // earlier instances retire, in a record of their own.
        recordRetirements(replaced, named: LeaderCore.reregisteredTurn)
        // A worker joining its group's registration takes members over from
        // the others: retired there and opened here, in a record of their own.
        recordRetirements(moved, named: LeaderCore.scopesMovedTurn)
        pendingOpenings += instances.map {
            ScopeEvent(
                kind: .open, instance: $0.instance, scope: spec.path, identity: $0.identity.isEmpty ? nil : $0.identity,
                worker: spec.worker, registration: spec.registration)
        }
        outgoing.append(.send(
            peer,
            WireMessage.scopeRegistered(
                worker: spec.worker, registration: spec.registration, revision: durable.nextRevision - 1, instances: instances
            ).encoded()))
        batchRegistrations.append(outgoing.count - 1)
    }

    /// Keeps a group's top-level registration for when the placement hold
    /// ends (true), or says it may register now (false). A registration
    /// number sent again replaces the one kept.
    private mutating func holdsPlacement(_ peer: Peer, _ spec: ScopeRegistration, now: Duration) -> Bool {
        guard let until = placementHeldUntil, now < until, spec.parent == nil, let holder = workers[spec.worker],
            holder.identity == peer, holder.group != nil
        else { return false }
        heldRegistrations.removeAll { $0.spec.worker == spec.worker && $0.spec.registration == spec.registration }
        guard heldRegistrations.count(where: { $0.spec.worker == spec.worker }) < LeaderCore.maximumRegistrationsPerWorker else {
            refuse(peer, WireError(
                .tooManyRegistrations,
                "worker \(spec.worker) holds \(LeaderCore.maximumRegistrationsPerWorker) scope registrations, the most a worker may"))
            return true
        }
        heldRegistrations.append((peer, spec))
        return true
    }

    /// The hold is over: the registrations kept register now, in order (a
    /// worker gone or replaced meanwhile is refused, as at any time).
    private mutating func releaseHeldRegistrations(now: Duration) {
        guard let until = placementHeldUntil, now >= until else { return }
        placementHeldUntil = nil
        let held = heldRegistrations
        heldRegistrations = []
        note(.placementReleased(registrations: held.count))
        for (peer, spec) in held { register(peer, spec, now: now) }
    }

    /// Retires every instance `worker` holds, in a system record named `name`.
    private mutating func dropWorker(_ worker: String, named name: String) {
        batchDrops.append((worker, name))
        recordRetirements(scopes.dropWorker(worker), named: name)
    }

    /// Scope instances that retire without a turn causing them (a worker
    /// gone, its name taken over, a registration replaced) go into a system
    /// record of their own, committed with the batch.
    private func recordRetirements(_ events: [ScopeEvent], named name: String) {
        guard !events.isEmpty else { return }
        durable.appendSystemRecord(named: name, scopeEvents: events)
    }

    /// A named automatic cog's value as the graph has it now, encoded — or
    /// that it did not encode (then what it selects is unknown, and the
    /// scope table keeps what is open: never "no members").
    private func evaluateSelector(_ name: String, _ key: [UInt8]?) -> SelectorReading {
        LeaderCore.evaluateSelector(name, key, in: cogs, codec: durable)
    }

    /// A static form for the per-turn scope pass: a closure over `self`
    /// would copy the whole core (dozens of references) at every turn.
    private static func evaluateSelector(_ name: String, _ key: [UInt8]?, in cogs: Cogs, codec: LeaderStore) -> SelectorReading {
        do {
            return .encoded(try cogs.encodedSelectorValue(named: name, key: key, codec: codec))
        } catch {
            return .failed("\(error)")
        }
    }

    // MARK: Requests

    /// The highest request sequence answered for `worker`: this run's, else
    /// the dedup table's. A failed read is thrown (the caller must not guess,
    /// or a retry could run twice) and not cached.
    private mutating func lastSequence(of worker: String) throws(TurnStoreError) -> UInt64 {
        if let highest = highestAnswered[worker] { return highest }
        var stored = try log.lastDedupSequence(worker: worker) ?? 0
        for request in unindexed.keys where request.worker == worker { stored = max(stored, request.sequence) }
        for request in quarantine.keys where request.worker == worker { stored = max(stored, request.sequence) }
        highestAnswered[worker] = stored
        return stored
    }

    /// Admission, then the op's body as a turn: applied, unchanged or
    /// rejected. Returns the reply frame (also kept for dedup).
    private mutating func run(_ request: OpRequest) -> [UInt8] {
        let id = request.request
        guard (1..<LeaderCore.sequenceLimit).contains(id.sequence) else {
            // Sequences stay far below 2^64 so a worker numbering above the
            // highest answered one can never overflow.
            countRejected(.badRequest)
            return OpReply(request: id, outcome: .rejected(Rejection(.badRequest, "request sequences are 1 to 2^63-1; this one is \(id.sequence)"))).frame()
        }
        let digest = RequestDigest.of(op: request.op, argument: request.argument)
        let highest: UInt64
        do {
            highest = try lastSequence(of: id.worker)
        } catch {
            return unavailable(id, because: "cannot read the dedup table: \(error.message)")
        }
        if id.sequence <= highest, !settings.broken.contains(.dedup) {
            // A retry: answered in this batch, or stored. (Neither: a request
            // sent late, after its scope child's instance became known.)
            if let answered = batchReplies[id] ?? unindexed[id] ?? quarantine[id]?.stored {
                return answer(request, stored: answered, digest: digest)
            }
            do {
                if let stored = try log.dedupReply(for: id) {
                    return answer(request, stored: stored, digest: digest)
                }
                if let expired = try log.expiredSequence(worker: id.worker), id.sequence <= expired {
                    // Answered before retention removed the answer: a retry
                    // that can no longer be answered the same is not run again.
                    countRejected(.expired)
                    return OpReply(
                        request: id,
                        outcome: .rejected(Rejection(
                            .expired,
                            "request \(id) was answered long ago and its answer is no longer kept (the leader's retention or `cogd log compact` removed "
                                + "answers up to \(id.worker)#\(expired)); it is not run again — a new request needs a new sequence"))
                    ).frame()
                }
            } catch {
                // Unknown whether it ran: never run it on a guess.
                return unavailable(id, because: "cannot read the dedup table: \(error.message)")
            }
        }
        highestAnswered[id.worker] = max(highest, id.sequence)
        let outcome: OpReply.Outcome
        switch admit(request) {
        case .failure(let rejection):
            countRejected(rejection.code)
            outcome = .rejected(rejection)
        case .success(let runner):
            do {
                try ports.noteRunning(id, op: request.op, digest: digest)
            } catch {
                // Unnoted, a body that traps would run again after the restart.
                return unavailable(id, because: "cannot note the running request: \(error.message)")
            }
            switch execute(request, runner, digest: digest) {
            case .success(let result): outcome = result
            case .failure(let rejection):
                countRejected(rejection.code)
                outcome = .rejected(rejection)
            }
        }
        switch outcome {
        case .applied: lastOutcome = .applied
        case .unchanged: lastOutcome = .unchanged
        case .rejected: lastOutcome = .rejected
        case .refused(let code, _):
            lastOutcome = .refused
            countRefusal(op: request.op, code: code)
        }
        let frame = OpReply(request: id, outcome: outcome).frame()
        let stored = LeaderCore.dedupValue(digest: digest, frame: frame)
        // Exactly once: a request id answered by running is never run again
        // (its retries are answered above, from what was stored).
        // (Unless the simulator broke the dedup rule, to see its checker catch that.)
        let ranBefore = batchReplies.updateValue(stored, forKey: id) != nil
        precondition(!ranBefore || settings.broken.contains(.dedup), "internal inconsistency: request \(id) ran twice in one batch")
        if case .applied = outcome {
            let appliedBefore = unindexed.updateValue(stored, forKey: id) != nil
            precondition(!appliedBefore || settings.broken.contains(.dedup), "internal inconsistency: request \(id) applied twice")
            batchApplied.append(id)
        } else {
            dedupRows.append((id, stored))
            noteRejection(request, digest: digest, outcome: outcome, earlier: false)
        }
        return frame
    }

    /// Keeps a rejected or refused answer to `request` for the batch's
    /// commit (`turnlog.md` §2d); other outcomes are not kept there.
    private mutating func noteRejection(_ request: OpRequest, digest: [UInt8], outcome: OpReply.Outcome, earlier: Bool) {
        let kind: RejectionRecord.Kind
        let code: String, reason: String
        switch outcome {
        case .applied, .unchanged: return
        case .rejected(let rejectedCode, let detail): (kind, code, reason) = (.rejected, rejectedCode.text, detail)
        case .refused(let refusedCode, let refusedReason): (kind, code, reason) = (.refused, refusedCode, refusedReason)
        }
        rejectionRows.append(
            RejectionRecord(request: request.request, op: request.op, digest: digest, kind: kind, code: code, reason: reason, earlier: earlier))
    }

    /// The execution-point checks: the requester is not given up, the scope
    /// instance it acts in is live and its own, and the op exists.
    private func admit(_ request: OpRequest) -> Result<OpRegistry.Entry, Rejection> {
        let worker = request.request.worker
        if let gone = goneWorkers.reason(worker) {
            // A worker given up (silent, or gone with a goodbye): all its work,
            // its mechanisms' and its scopes', ended with it until it says hello again.
            return .failure(Rejection(.retiredScope, "worker \(worker) is gone (it \(gone.words))"))
        }
        if let instance = request.instance, !settings.broken.contains(.instanceCheck), !scopes.isLive(instance, for: worker) {
            return .failure(Rejection(.retiredScope, "scope instance \(instance) is retired or not owned by \(worker)"))
        }
        guard let runner = registry.entry(named: request.op) else {
            return .failure(Rejection(.unknownOp, "no op named `\(request.op)` is registered"))
        }
        return .success(runner)
    }

    /// Runs the body as a turn; what it settled is buffered as the next
    /// record, with the scope events its writes cause — unless its record
    /// would be too large, when it is undone before anyone sees it.
    private mutating func execute(_ request: OpRequest, _ runner: OpRegistry.Entry, digest: [UInt8]) -> Result<OpReply.Outcome, Rejection> {
        let turns: [CogDurableTurn]
        do {
            turns = try runner.run(cogs, request.argument, durable, request.name ?? request.op)
        } catch let refusal as Refusal {
            // The body said no: its turn kept nothing (`Refusal` checked the code and reason).
            return .success(.refused(code: refusal.code, reason: refusal.reason))
        } catch {
            return .failure(Rejection(.badArgument, "\(error)"))
        }
        guard !turns.isEmpty else { return .success(.unchanged) }
        let origin = TurnOrigin(worker: request.request.worker, instance: request.instance, request: request.request, digest: digest)
        let drafts = turns.map { LeaderStore.draft($0, origin: origin) }
        if let size = drafts.lazy.map(LeaderStore.recordBytesBound).max(), size > settings.maximumRecordBytes {
            // No reader could take its record: the turn is undone, nothing written.
            do {
                try durable.restore(cogs, undoing: drafts)
            } catch {
                // The graph would no longer match the store: stop, and restart
                // from the store (this request is quarantined).
                fatalError("internal inconsistency: cannot undo a too-large turn: \(error)")
            }
            return .failure(Rejection(
                .tooLarge, "the turn's record would take about \(size) bytes; a record holds at most \(settings.maximumRecordBytes)"))
        }
        let revision = durable.nextRevision
        let unreadable = scopes.unreadableSelections
        let cogs = cogs, durable = durable
        for draft in drafts {
            durable.buffer(draft)
            durable.attachScopeEvents(scopes.apply(durable.lastPendingWrites) { LeaderCore.evaluateSelector($0, $1, in: cogs, codec: durable) })
        }
        if scopes.unreadableSelections != unreadable {
            countEvent(.selectorUnreadable, by: scopes.unreadableSelections &- unreadable)
        }
        return .success(.applied(revision: revision))
    }

    /// What `dedup` keeps for a request: the digest of its op and argument
    /// (8 zero bytes when unknown), then the reply frame (`turnlog.md` §2).
    nonisolated public static func dedupValue(digest: [UInt8]?, frame: [UInt8]) -> [UInt8] {
        // A digest read from a file or record of another size is unknown, not trusted.
        (digest.flatMap { $0.count == RequestDigest.size ? $0 : nil } ?? unknownDigest) + frame
    }

    nonisolated static let unknownDigest = [UInt8](repeating: 0, count: RequestDigest.size)

    /// The stored answer to a retry — unless the retry carries another op or
    /// argument than the request first answered under its id: then it is
    /// refused `request-mismatch` (and that refusal is kept nowhere).
    private mutating func answer(_ op: OpRequest, stored: [UInt8], digest: [UInt8]) -> [UInt8] {
        let request = op.request
        guard stored.count > RequestDigest.size else {
            lastOutcome = .deduplicated
            return LeaderCore.answeredEarlier(stored)  // not written by this leader: answered as stored
        }
        let storedDigest = Array(stored.prefix(RequestDigest.size))
        guard storedDigest == digest || storedDigest == LeaderCore.unknownDigest else {
            lastOutcome = .rejected
            countRejected(.requestMismatch)
            return OpReply(
                request: request,
                outcome: .rejected(Rejection(
                    .requestMismatch, "request \(request) was answered for another op or argument; a new request needs a new sequence"))
            ).frame()
        }
        lastOutcome = .deduplicated
        let frame = Array(stored.dropFirst(RequestDigest.size))
        guard let reply = OpReply(scanning: frame) else { return frame }
        // A retry of a rejected or refused request is on the record too, marked earlier.
        noteRejection(op, digest: digest, outcome: reply.outcome, earlier: true)
        return reply.answeredEarlier.frame()
    }

    /// A stored reply frame marked `earlier` (`protocol/cogwire.md` §4):
    /// only retries pay for it. A frame the scanner cannot read is sent as stored.
    private static func answeredEarlier(_ frame: [UInt8]) -> [UInt8] {
        OpReply(scanning: frame)?.answeredEarlier.frame() ?? frame
    }

    /// Refuses a request the leader cannot run safely now; not kept in
    /// `dedup`, so a retry is looked at afresh.
    private mutating func unavailable(_ request: RequestID, because cause: String) -> [UInt8] {
        countRejected(.unavailable)
        return OpReply(request: request, outcome: .rejected(Rejection(.unavailable, cause))).frame()
    }

    /// Rows in the dedup table's key order (worker, then sequence).
    nonisolated public static func inKeyOrder(_ replies: [RequestID: [UInt8]]) -> [(RequestID, [UInt8])] {
        // Grouped by worker first: the names (a few) are compared as UTF-8
        // once per pair of workers, not at every comparison of the sort.
        var byWorker: [String: [(sequence: UInt64, reply: [UInt8])]] = [:]
        for (id, reply) in replies { byWorker[id.worker, default: []].append((id.sequence, reply)) }
        var rows: [(RequestID, [UInt8])] = []
        rows.reserveCapacity(replies.count)
        for worker in byWorker.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            for row in byWorker[worker]!.sorted(by: { $0.sequence < $1.sequence }) {
                rows.append((RequestID(worker: worker, sequence: row.sequence), row.reply))
            }
        }
        return rows
    }

    /// The replies not yet indexed, in key order (a driver closing the log indexes them).
    public var unindexedReplies: [(RequestID, [UInt8])] { LeaderCore.inKeyOrder(unindexed) }

    // MARK: Status

    /// The workers as the leader sees them now, and the open instances.
    public func status(now: Duration) -> LeaderStatus {
        var status = LeaderStatus(
            epoch: epoch, revision: log.lastRevision, workers: workerStatus(now: now), errorCounts: errorCounts, openScopeInstances: scopes.openInstances)
        if !refusalCounts.isEmpty {
            status.refusals = refusalCounts.sorted { ($0.key.op, $0.key.code) < ($1.key.op, $1.key.code) }
                .map { LeaderStatus.RefusalCount(op: $0.key.op, code: $0.key.code, count: $0.value) }
        }
        return status
    }

    /// How many scope instances are open now.
    public var openScopeInstanceCount: Int { scopes.live.count }

    /// The workers as the leader sees them now, in name order.
    public func workerStatus(now: Duration) -> [LeaderStatus.Worker] {
        let last = log.lastRevision
        var owned: [String: UInt64] = [:]
        for owner in scopes.live.values { owned[owner, default: 0] += 1 }
        let roots = scopes.rootsByWorker
        return workers.sorted { $0.key < $1.key }.map { name, state in
            let since = (now - state.lastHeard).components
            return LeaderStatus.Worker(
                name: name, appliedRevision: state.appliedRevision,
                lag: last > state.appliedRevision ? last - state.appliedRevision : 0,
                secondsSinceHeard: Double(since.seconds) + Double(since.attoseconds) / 1e18,
                digest: state.digest.rawValue, group: state.group, instances: owned[name] ?? 0, roots: roots[name],
                tool: state.tool ? true : nil, settings: state.settings)
        }
    }

    // MARK: Operator events and outcomes (`/metrics`, the leader's log)

    /// What became of an op request: the reply's outcome, or answered from dedup.
    public enum RequestOutcome: String, Sendable, CaseIterable {
        case applied, unchanged, rejected, refused, deduplicated
    }

    /// One series of refusals: the op and the code its body refused with.
    public struct RefusalSeries: Hashable, Sendable {
        public var op: String
        public var code: String

        public init(op: String, code: String) {
            self.op = op
            self.code = code
        }

        /// Where refusals past `maximumRefusalSeries` distinct pairs are
        /// counted (no refusal code has `_`, so none is mistaken for it).
        public static let overflow = RefusalSeries(op: "_other", code: "_other")
    }

    /// The most distinct (op, code) pairs counted apart: a code is the
    /// app's, so a label set of its own per pair is bounded.
    public nonisolated static let maximumRefusalSeries = 256

    /// Counts one refusal under its op and code, or under `overflow` once
    /// `maximumRefusalSeries` pairs are counted.
    private mutating func countRefusal(op: String, code: String) {
        var series = RefusalSeries(op: op, code: code)
        if refusalCounts[series] == nil, refusalCounts.count >= LeaderCore.maximumRefusalSeries - 1 {
            series = .overflow
        }
        refusalCounts[series, default: 0] &+= 1
    }

    /// Something about the workers an operator wants in the log.
    public enum Event: Sendable, Equatable {
        /// A process said hello as `worker` (first, or after being given up
        /// or replaced); `tool`: as a tool that reads the state and closes.
        case joined(worker: String, group: String?, revision: UInt64, tool: Bool = false)
        /// Silent past the heartbeat timeout: given up, its instances retired
        /// (`tool`: a tool that closed; it held none).
        case timedOut(worker: String, seconds: Double, tool: Bool = false)
        /// The connection holding the name said goodbye: dropped at once
        /// (`tool`: a tool closing; it held nothing).
        case saidGoodbye(worker: String, tool: Bool)
        /// A new process took over the name of one that is gone.
        case nameTakenOver(worker: String)
        /// A process was refused a name another live process holds.
        case nameConflict(worker: String)
        /// A worker's hello was refused `rig-mismatch`: why, naming the op or source.
        case rigRefused(worker: String, reason: String)
        /// This leader follows an earlier one: group members are placed only
        /// after this many seconds (`cogwire.md` §6b).
        case placementHeld(seconds: Double)
        /// The hold is over: the group registrations kept meanwhile are registered now.
        case placementReleased(registrations: Int)
    }

    /// The most events kept until the driver takes them (more are counted in `droppedEvents`).
    public static let maximumPendingEvents = 1_024

    /// Appends `event` for the driver, while fewer than `maximumPendingEvents` wait.
    private mutating func note(_ event: Event) {
        guard pendingEvents.count < LeaderCore.maximumPendingEvents else {
            droppedEvents &+= 1
            return
        }
        pendingEvents.append(event)
    }

    /// The events since the last call, oldest first.
    public mutating func takeEvents() -> [Event] {
        guard !pendingEvents.isEmpty else { return [] }
        defer { pendingEvents = [] }
        return pendingEvents
    }

    /// The counts split by kind (`protocol/metrics.md` §3): op requests
    /// answered rejected, by rejection code, and every other error reply or
    /// event, by code — a `hello` refused `name-in-use` and a wire `error
    /// unavailable` among the errors, though their codes are rejection codes
    /// too. `all` is `errorCounts` with the driver's own events added.
    public func countsByKind(adding all: [CogdCode: UInt64]? = nil) -> (rejections: [CogdCode: UInt64], errors: [CogdCode: UInt64]) {
        var errors: [CogdCode: UInt64] = [:]
        for (code, total) in all ?? errorCounts {
            let other = total &- min(total, rejectionCounts[code] ?? 0)
            if other > 0 { errors[code] = other }
        }
        return (rejectionCounts, errors)
    }

    /// Counts an event the driver saw (`send-dropped`, …) with the core's.
    public mutating func countEvent(_ event: CogdCode, by amount: UInt64 = 1) {
        errorCounts[event, default: 0] &+= amount
    }

    /// Counts an `error` the driver sent on the core's behalf (a snapshot refused `oversize`, …).
    public mutating func countError(_ error: WireError) {
        errorCounts[error.code, default: 0] &+= 1
    }

    /// Counts a rejection the driver answered (`crashed-leader`, stored at
    /// start) with the core's.
    public mutating func countRejection(_ code: CogdCode) {
        countRejected(code)
    }

    // MARK: Limits and names

    /// Request sequences are below this (2^63).
    public nonisolated static let sequenceLimit: UInt64 = 1 << 63
    /// The most bytes a turn record may take (`protocol/turnlog.md` §3).
    public nonisolated static let maximumRecordBytes = 64 << 20
    /// The most scope registrations one worker may hold.
    public static let maximumRegistrationsPerWorker = 4_096
    /// The longest worker name (UTF-8 bytes) admitted.
    public nonisolated static let maximumWorkerName = 255

    /// Why the leader refuses `name` as a worker name (`cogwire.md` §3), or
    /// nil when it admits it; `cogd worker --name` applies the same rule.
    public nonisolated static func workerNameProblem(_ name: String) -> String? {
        // Names key the dedup table (name, 0, sequence; LMDB keys hold at most 511 bytes).
        if name.utf8.contains(0) { return "worker names hold no NUL character" }
        guard name.isEmpty || name.utf8.count > maximumWorkerName else { return nil }
        return "worker names are 1 to \(maximumWorkerName) bytes of UTF-8; this one has \(name.utf8.count)"
    }

    /// Whether `scalar` is a control character as `protocol/cogwire.md`
    /// means it (§6a, §9): Unicode's general category Cc — the C0 controls
    /// (U+0000–U+001F), DEL (U+007F) and the C1 controls (U+0080–U+009F,
    /// U+009B the one-byte CSI among them). Format characters (U+200E,
    /// U+202E …) and the line and paragraph separators (U+2028, U+2029)
    /// are not: they are admitted, and escaped wherever cogd prints them
    /// (`TerminalText`).
    public nonisolated static func isControlCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// Why the leader refuses `group` as a `hello`'s group (`cogwire.md`
    /// §6a), or nil when it admits it; `cogd worker --group` applies the
    /// same rule.
    /// Why a hello's `settings` (the keys of a worker's app settings,
    /// `cogwire.md` §3) cannot be taken, or nil: at most 256 keys, each as
    /// `cogd worker --set` takes them, none twice.
    public nonisolated static func settingKeysProblem(_ keys: [String]) -> String? {
        guard keys.count <= CogRig.Settings.maximumCount else {
            return "a hello names at most \(CogRig.Settings.maximumCount) settings, not \(keys.count)"
        }
        for key in keys {
            if let problem = CogRig.Settings.keyProblem(key) { return "a hello's settings are keys: \(problem)" }
        }
        guard Set(keys).count == keys.count else { return "a hello's settings name each key once" }
        return nil
    }

    public nonisolated static func groupProblem(_ group: String) -> String? {
        // No control characters: a group names a key of the scope table (`\u{1}` separates its parts) and is printed.
        guard group.isEmpty || group.utf8.count > maximumWorkerName || group.unicodeScalars.contains(where: isControlCharacter) else { return nil }
        return "a group is 1 to \(maximumWorkerName) bytes of UTF-8 with no control characters"
    }
    /// The most snapshots sent at once (each holds an LMDB read).
    public static let maximumSnapshotStreams = 64
    /// The records a catch-up reply holds past its first: about this many bytes.
    public static let catchUpReplyBytes = 64 << 10
    /// How many given-up worker names are remembered (the newest).
    static let goneWorkersLimit = 10_000
    /// Past this many names, the answered-sequence cache keeps only connected workers'.
    static let answeredCacheLimit = 10_000
    /// Applied requests' replies are indexed together every this many.
    nonisolated static let indexInterval = 1_024
    /// Registration openings kept back for the next commit make a commit of
    /// their own once this many have gathered.
    static let openingsFlushCount = 1_024
    /// The most openings kept back while commits fail (the oldest go first).
    static let maximumPendingOpenings = 65_536

    /// The names of the system records of retirements (`protocol/cogwire.md` §6).
    public static let workerGoneTurn = "cogd.workerGone"
    public static let nameTakenOverTurn = "cogd.nameTakenOver"
    public static let reregisteredTurn = "cogd.scopeReregistered"
    /// The system record of scope instances moved to a worker that joined
    /// its group's registration (retired on their owner, opened on it).
    public static let scopesMovedTurn = "cogd.scopesMoved"
}

/// Whether a worker's replica holds the state the log says it should at the
/// revision it applied: its heartbeat's state digest against the record's
/// (`cogd status`, `protocol/cogwire.md` §3).
enum StateDigestAgreement: String, Sendable {
    case agrees, differs
    /// The heartbeat carried no digest (an older worker), or the leader
    /// cannot read the digest of that revision.
    case unknown
}

/// A rule of the leader core that `cogd sim --break` can switch off, to show
/// that the simulator's checker notices its absence.
public enum LeaderRule: String, Sendable, CaseIterable {
    /// The execution-point check that an op's scope instance is live and the requester's.
    case instanceCheck = "instance-check"
    /// Answering a retry from the dedup table instead of running it again.
    case dedup
    /// Giving up workers silent past the heartbeat timeout.
    case heartbeatExpiry = "heartbeat-expiry"
    /// Placing each member of a group's registration on one worker (broken:
    /// a worker joining a group gets every member, beside their owners).
    case exclusivePlacement = "exclusive-placement"
    /// Keeping what is open under a selector that cannot be read (broken:
    /// read as no members, which retires every instance it had open).
    case selectorEncoding = "selector-encoding"
}
