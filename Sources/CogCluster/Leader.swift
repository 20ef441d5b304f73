import Cog
import CogLog
import CogWire
import Foundation
import Synchronization

/// The leader: owns the authoritative graph and the turn log, admits op
/// requests into one FIFO, runs each as a turn, commits every settled turn to
/// LMDB (many per transaction), then publishes them and replies (DESIGN §5).
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

    struct WorkerState {
        var appliedRevision: UInt64
        var lastHeard: ContinuousClock.Instant
        /// The routing identity of the process that holds the name.
        var identity: [UInt8]
        /// Whether its last heartbeat's state digest agrees with the log's (`Leader+StateDigest`).
        var digest = StateDigestAgreement.unknown
    }

    public let configuration: Configuration
    let durable: LeaderStore
    let cogs: Cogs
    private let context: ZMQContext
    private let router: ZMQSocket
    private let publisher: ZMQSocket
    private var workers: [String: WorkerState] = [:]
    /// When the serving loop last looked at its sockets, and when it last
    /// came back from a pause (stopped, or stalled) longer than a heartbeat
    /// interval: silence is measured from then, not across the pause.
    private var lastLook = ContinuousClock.now
    private var resumedAt = ContinuousClock.now
    /// Workers given up for silence (this epoch): their requests are rejected
    /// and their heartbeats answered `gone` until they say hello again.
    private var goneWorkers = GoneWorkers(limit: Leader.goneWorkersLimit)
    /// How many given-up worker names the leader remembers (the newest).
    static let goneWorkersLimit = 10_000
    /// Scope instances minted from the selectors workers registered.
    private var scopes: ScopeTable
    /// Requests answered in the batch being built, for retries inside one batch.
    private var batchReplies: [RequestID: [UInt8]] = [:]
    /// Per requester, the highest sequence already answered (in any epoch): a
    /// higher one is new and needs no dedup lookup.
    private var highestAnswered: [String: UInt64] = [:]
    /// Past this many names, the cache keeps only connected workers' (after a commit).
    static let answeredCacheLimit = 10_000
    private var outgoing: [(identity: [UInt8], frame: [UInt8])] = []
    /// Where the batch's op replies, welcomes and registration replies lie
    /// in `outgoing`, and the requests it applied: what a failed commit
    /// must answer differently.
    private var batchOpReplies: [(index: Int, request: RequestID)] = []
    private var batchWelcomes: [(index: Int, worker: String)] = []
    private var batchRegistrations: [Int] = []
    private var batchApplied: [RequestID] = []
    /// The scope instances as of the last commit (what the log says).
    private var scopesAtLastCommit: ScopeTable
    /// Snapshots asked for in parts, being sent a part at a time between
    /// batches (so a large state does not stop the serving).
    private var snapshotStreams: [SnapshotStream] = []
    private var dedupRows: [(RequestID, [UInt8])] = []
    /// The peers that asked for a catch-up in the batch being built.
    private var catchUpsThisBatch: Set<[UInt8]> = []
    /// The records a catch-up reply holds past its first: about this many
    /// bytes (what ZeroMQ may hold for a peer that reads nothing is at most
    /// `requestsSendHighWaterMark` messages of this size or a snapshot part's).
    public static let catchUpReplyBytes = 64 << 10
    /// A batch takes messages until they reach this many bytes (or 4,096 of them).
    public static let maximumBatchBytes = 16 << 20
    /// The most snapshots sent at once (each holds an LMDB read).
    public static let maximumSnapshotStreams = 64
    /// Messages ZeroMQ may queue for one peer of the requests socket, and
    /// for one subscriber of the turn stream, before further sends to it are
    /// dropped (a peer that reads nothing holds at most this much).
    public static let requestsSendHighWaterMark: Int32 = 500
    /// A turn message holds up to about 1 MiB of records, so a subscriber
    /// that reads nothing holds about 32 MiB (100 held 78 MiB: over the
    /// 64 MiB a peer may cost, `MemoryBoundTests`).
    public static let turnsSendHighWaterMark: Int32 = 32
    /// Replies to applied requests not yet in the `dedup` table: each one's
    /// record (its `origin.request` and revision) holds it durably, so they
    /// are stored together, every `indexInterval` of them, in one batch's
    /// commit — a commit then dirties no dedup pages. The first commit that
    /// leaves one out marks `unindexed-from`; a leader opening a folder so
    /// marked rebuilds them from the records.
    private var unindexed: [RequestID: [UInt8]] = [:]
    static let indexInterval = 1_024
    /// A gap this long between two looks at the sockets is a pause (the
    /// process was stopped, or a commit stalled): the loop never sleeps
    /// longer than 100 ms on its own.
    static let pauseAllowance: Duration = .seconds(1)
    /// Request sequences are below this (2^63).
    public static let sequenceLimit: UInt64 = 1 << 63
    /// The most bytes a turn record may take (`protocol/turnlog.md` §3): far
    /// below what any reader accepts in one message (256 MiB).
    public nonisolated static let maximumRecordBytes = 64 << 20
    /// The most scope registrations one worker may hold.
    public static let maximumRegistrationsPerWorker = 4_096
    /// The longest worker name (UTF-8 bytes) the leader admits.
    public static let maximumWorkerName = 255
    /// Error replies sent, by code (`cogd status`).
    public private(set) var errorCounts: [String: UInt64] = [:]
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
    /// A request a previous leader process was running when it stopped
    /// (its body trapped, or the process was killed then): answered
    /// `rejected("crashed-leader: …")` at this start and never run again.
    public private(set) var quarantined: QuarantinedRequest?

    public var epoch: UInt64 { durable.store.epoch }
    public var lastRevision: UInt64 { durable.store.lastRevision }

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        let store = try TurnStore(
            directory: configuration.dataFolder, mode: .writer, createIfMissing: true, acceptDataLoss: configuration.acceptDataLoss)
        durable = LeaderStore(store: store)
        scopes = ScopeTable(epoch: store.epoch)
        scopesAtLastCommit = scopes
        cogs = Cogs.durable(store: durable)
        // Before the context: ZeroMQ's threads inherit the placement, so a
        // request's wake-ups stay on the CPUs the commits run on.
        placement = try CommitPlacement.apply(configuration.commitAffinity, dataFolder: configuration.dataFolder)
        // With a CPU to spare, the turn stream gets an I/O thread of its own
        // there: a publication's send (the subscribers' TCP work included)
        // then runs beside the replies' instead of ahead of them.
        streamHasOwnIOThread = !placement.spareCPUs.isEmpty
        context = try ZMQContext(ioThreads: streamHasOwnIOThread ? 2 : 1)
        router = try ZMQSocket(context, .router)
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
        publisher = try ZMQSocket(context, .publisher)
        if streamHasOwnIOThread { try publisher.setIOThreads(0b10) }
        // A subscriber that falls behind loses turns past this many messages
        // and catches up by the gap (the Clone pattern): its queue is bounded.
        try publisher.setHighWaterMarks(send: Leader.turnsSendHighWaterMark, receive: 1_000)
        try publisher.bind(configuration.turnsEndpoint)
        boundRequestsEndpoint = try router.lastEndpoint()
        boundTurnsEndpoint = try publisher.lastEndpoint()
        // Applied requests a crash or a kill left unindexed: their replies,
        // rebuilt from their records and indexed now.
        if var next = store.unindexedFrom {
            var rebuilt: [RequestID: [UInt8]] = [:]
            while next <= store.lastRevision {
                let records = try store.records(from: next, limit: 10_000)
                guard let last = records.last else { break }
                for record in records {
                    guard let request = record.origin.request else { continue }
                    rebuilt[request] = Leader.dedupValue(
                        digest: record.origin.digest, frame: OpReply(request: request, outcome: .applied(revision: record.revision)).frame())
                }
                next = last.revision + 1
            }
            try durable.flush(replies: Leader.inKeyOrder(rebuilt), index: .indexed)
        }
        // A request noted as running and never answered: its body stopped the
        // process that ran it. It is answered rejected, for good, and never
        // run again (a poison pill must not become a crash loop).
        runningNote = try RunningRequestNote(dataFolder: configuration.dataFolder)
        if let crashed = try runningNote.leftOver() {
            if try store.dedupReply(for: crashed.request) == nil {
                let reply = OpReply(
                    request: crashed.request,
                    outcome: .rejected(
                        reason: "crashed-leader: the leader stopped while running this request (op `\(crashed.op)`); it is not run again"))
                try durable.flush(replies: [(crashed.request, Leader.dedupValue(digest: crashed.digest, frame: reply.frame()))])
                quarantined = QuarantinedRequest(request: crashed.request, op: crashed.op)
                errorCounts["crashed-leader", default: 0] += 1
            }
            try runningNote.clear()
        }
    }

    /// Rows in the dedup table's key order (worker, then sequence), so the
    /// puts walk its pages in order.
    private static func inKeyOrder(_ replies: [RequestID: [UInt8]]) -> [(RequestID, [UInt8])] {
        replies.sorted { a, b in
            guard a.key.worker == b.key.worker else { return a.key.worker.utf8.lexicographicallyPrecedes(b.key.worker.utf8) }
            return a.key.sequence < b.key.sequence
        }.map { ($0.key, $0.value) }
    }

    /// Closes sockets, the context and the store (indexing what is not yet).
    public func close() {
        if !unindexed.isEmpty {
            _ = try? durable.flush(replies: Leader.inKeyOrder(unindexed), index: .indexed)
            unindexed = [:]
        }
        for stream in snapshotStreams { stream.reader.close() }
        snapshotStreams = []
        router.close()
        publisher.close()
        context.close()
        durable.store.close()
    }

    /// Serves until `stop` becomes true.
    public func run(until stop: StopFlag) throws {
        if let cpus = placement.cpus { try ThreadAffinity.pin(cpus) }
        var lastBatch = ContinuousClock.now
        var snapshotsWaiting = false
        while !stop.isStopped {
            let spinning = configuration.spinWait > .zero && ContinuousClock.now - lastBatch < configuration.spinWait
            let timeout: Duration
            if spinning || (!snapshotStreams.isEmpty && !snapshotsWaiting) {
                timeout = .zero  // look for requests without sleeping: parts are ready to go
            } else if !snapshotStreams.isEmpty || !backlogs.isEmpty {
                timeout = .milliseconds(1)  // parts and replies wait for room in ZeroMQ's queue
            } else {
                timeout = .milliseconds(100)
            }
            let ready = try ZMQSocket.poll([router], timeout: timeout)
            let looked = ContinuousClock.now
            if looked - lastLook > Leader.pauseAllowance { resumedAt = looked }
            lastLook = looked
            if ready[0] {
                try serveBatch()
                lastBatch = ContinuousClock.now
            }
            if !backlogs.isEmpty { drainBacklogs() }
            if !snapshotStreams.isEmpty {
                // Up to 16 small parts a stream per pass (about 1 MiB), while ZeroMQ takes them.
                var rounds = 0
                repeat {
                    snapshotsWaiting = !sendSnapshotParts()
                    rounds += 1
                } while !snapshotsWaiting && !snapshotStreams.isEmpty && rounds < 16
            } else if spinning && !ready[0] {
                sched_yield()
                continue
            }
            expireSilentWorkers(now: ContinuousClock.now)
            // Retirement records (workers gone) commit and go out now.
            if !durable.pending.isEmpty { try serveBatch() }
        }
        try serveBatch()
        // What slow readers are still owed goes out if they read within a second.
        let deadline = ContinuousClock.now + .seconds(1)
        while !backlogs.isEmpty && ContinuousClock.now < deadline {
            drainBacklogs()
            if !backlogs.isEmpty { usleep(1_000) }
        }
    }

    /// Takes everything waiting as one batch: runs it, commits it once, then
    /// publishes and replies.
    func serveBatch() throws {
        var taken = 0
        var takenBytes = 0
        // A batch ends at 4,096 messages or 16 MiB of them: what one batch
        // holds (its turns, records and replies) stays bounded.
        while taken < 4_096, takenBytes < Leader.maximumBatchBytes, let frames = try router.receive() {
            taken += 1
            takenBytes += frames.reduce(0) { $0 + $1.count }
            guard frames.count == 2 else {
                if let identity = frames.first {
                    refuse(identity, WireError(code: "malformed", message: "expected one frame after the identity, got \(frames.count - 1)"))
                }
                continue
            }
            handle(identity: frames[0], frame: frames[1])
        }
        do {
            try runningNote.clear()
        } catch {
            // The note stays: at the next start its request is answered
            // rejected instead of run (never run twice); say so in the counts.
            errorCounts["note-failed", default: 0] += 1
        }
        guard taken > 0 || !outgoing.isEmpty || !durable.pending.isEmpty else { return }
        if placement.cpus != nil, ioPlacement.observe(batch: taken) != nil || !ioThreadsPlaced { placeIOThreads() }
        var index: DedupIndexChange?
        if unindexed.count >= Leader.indexInterval {
            dedupRows += Leader.inKeyOrder(unindexed)
            index = .indexed
        } else if !unindexed.isEmpty, durable.store.unindexedFrom == nil {
            // The first replies left out since the last indexing are this batch's.
            index = .unindexedFrom(durable.store.lastRevision + 1)
        }
        let committing = !durable.pending.isEmpty || !dedupRows.isEmpty || index != nil
        let start = ContinuousClock.now
        let drafts = durable.pending
        let revisions: Range<UInt64>
        do {
            revisions = try durable.flush(replies: dedupRows, index: index)
        } catch {
            failCommit(of: drafts, because: error)
            return
        }
        if committing { commitTimes.record(ContinuousClock.now - start, turns: revisions.count) }
        scopesAtLastCommit = scopes
        endBatch()
        if index == .indexed { unindexed = [:] }
        dedupRows = []
        batchReplies = [:]
        if highestAnswered.count > Leader.answeredCacheLimit {
            // A cache of what `lastSequence(of:)` reads from the dedup table
            // and the unindexed replies: one-off names (each `cogd call`)
            // would otherwise pile up in it forever.
            highestAnswered = highestAnswered.filter { workers[$0.key] != nil }
        }
        if !revisions.isEmpty {
            for frame in WireMessage.turnsFrames(epoch: epoch, batch: durable.store.lastAppended) { try publisher.send([frame]) }
        }
        sendOutgoing()
    }

    /// Sends the batch's messages (behind what each peer is still owed).
    private func sendOutgoing() {
        for (identity, frame) in outgoing { deliver(frame, to: identity) }
        outgoing = []
        catchUpsThisBatch = []
    }

    /// Forgets what the batch just committed (or given up) noted about its messages.
    private func endBatch() {
        batchOpReplies = []
        batchWelcomes = []
        batchRegistrations = []
        batchApplied = []
    }

    /// A commit failed (disk full, I/O error): nothing of the batch becomes
    /// visible. Its turns are undone in the graph, the scope instances are
    /// as of the last commit, every request of the batch is answered
    /// `rejected("unavailable: …")` (kept nowhere, so a retry runs afresh),
    /// a registration answered in it is asked for again, and the leader goes
    /// on serving: the next batch commits once the disk allows it.
    private func failCommit(of drafts: [TurnDraft], because error: any Error) {
        let cause = Leader.commitFailureCause(error, dataFolder: configuration.dataFolder)
        errorCounts["commit-failed", default: 0] += 1
        do {
            try durable.restore(cogs, undoing: drafts)
        } catch {
            // The graph would no longer match the store: stop; a restart loads the store.
            fatalError("internal inconsistency: a failed commit cannot be undone (\(cause)): \(error)")
        }
        scopes = scopesAtLastCommit
        for request in batchApplied { unindexed[request] = nil }
        dedupRows = []
        batchReplies = [:]
        highestAnswered = [:]
        for (index, request) in batchOpReplies {
            outgoing[index].frame = unavailable(request, because: "the commit failed: \(cause); nothing of this request was kept")
        }
        for index in batchRegistrations {
            errorCounts["register-again", default: 0] += 1
            outgoing[index].frame = WireMessage.error(
                WireError(code: "register-again", message: "the commit failed: \(cause); register the scopes again")
            ).encoded()
        }
        for (index, worker) in batchWelcomes {
            // As of what is committed, not of the turns given up.
            do {
                outgoing[index].frame = try welcome(worker).encoded()
            } catch {
                errorCounts["unavailable", default: 0] += 1
                outgoing[index].frame = WireMessage.error(
                    WireError(code: "unavailable", message: "cannot read the dedup table: \(error.message)")
                ).encoded()
            }
        }
        endBatch()
        sendOutgoing()
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
    private var backlogs: [[UInt8]: PeerBacklog] = [:]
    /// The most bytes of messages the leader holds for one peer that reads slowly.
    public static let maximumBacklogBytes = 16 << 20

    /// Sends `frame` to `identity`, behind anything it is still owed.
    private func deliver(_ frame: [UInt8], to identity: [UInt8]) {
        if backlogs[identity] == nil {
            do {
                if try router.send([identity, frame], wait: false) { return }
            } catch {
                errorCounts["send-dropped", default: 0] += 1  // the peer is gone
                return
            }
        }
        var backlog = backlogs[identity] ?? PeerBacklog()
        guard backlog.bytes + frame.count <= Leader.maximumBacklogBytes else {
            errorCounts["send-dropped", default: 0] += 1
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
                errorCounts["send-dropped", default: 0] += UInt64(backlog.frames.count - backlog.head)
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

    /// A snapshot being sent in parts to one requester.
    struct SnapshotStream {
        let identity: [UInt8]
        var reader: StateSnapshotReader
        /// A snapshot asked for whole: one message, no `part`/`more`.
        var whole = false
        var part: UInt64 = 0
        /// The next part, encoded, if ZeroMQ had no room for it yet.
        var unsent: [UInt8]?
        var isLast = false
        /// When a part last went out (or the stream began).
        var progress = ContinuousClock.now
    }

    /// Drops the snapshot being sent to `identity`, if any (it asked again).
    private func endSnapshot(to identity: [UInt8]) {
        snapshotStreams.removeAll { stream in
            guard stream.identity == identity else { return false }
            stream.reader.close()
            return true
        }
    }

    /// Sends the next part of each snapshot being streamed. Returns false
    /// when none could go (ZeroMQ's queue to each requester is full).
    private func sendSnapshotParts() -> Bool {
        var sent = false
        for index in snapshotStreams.indices.reversed() {
            var stream = snapshotStreams[index]
            if stream.unsent == nil {
                do {
                    let limit = stream.whole ? WireMessage.snapshotPartTarget : configuration.snapshotPartBytes
                    let (entries, more) = try stream.reader.next(maximumBytes: limit) {
                        WireMessage.snapshotEntrySize(name: $0.name, key: $0.key, value: $0.value)
                    }
                    if stream.whole && more {
                        // A whole snapshot is at most one part: a larger state
                        // comes only in parts (the leader never builds it whole).
                        stream.reader.close()
                        snapshotStreams.remove(at: index)
                        let refusal = WireError(
                            code: "oversize",
                            message: "the state table is over \(WireMessage.snapshotPartTarget) bytes: ask for it in parts (snapshot-request {\"parts\": true})")
                        errorCounts[refusal.code, default: 0] += 1
                        _ = try? router.send([stream.identity, WireMessage.error(refusal).encoded()], wait: false)
                        continue
                    }
                    let snapshotEntries = entries.map { SnapshotEntry(name: $0.name, key: $0.key, value: $0.value) }
                    stream.unsent =
                        stream.whole
                        ? WireMessage.snapshot(
                            epoch: epoch, revision: stream.reader.revision, entries: snapshotEntries,
                            stateDigest: stream.reader.stateDigest
                        ).encoded()
                        : WireMessage.snapshot(
                            epoch: epoch, revision: stream.reader.revision, entries: snapshotEntries, part: stream.part, more: more,
                            stateDigest: stream.reader.stateDigest
                        ).encoded()
                    stream.isLast = !more
                } catch {
                    stream.reader.close()
                    // The map grew under the view: start over at the newest
                    // revision (the requester takes a part 0 as the start of
                    // a new run). Any other failure ends the snapshot.
                    guard error.code == .snapshotEnded, let reader = try? durable.store.stateSnapshot() else {
                        let refusal = WireError(code: "unavailable", message: "cannot read the state table: \(error.message)")
                        errorCounts[refusal.code, default: 0] += 1
                        _ = try? router.send([stream.identity, WireMessage.error(refusal).encoded()], wait: false)
                        snapshotStreams.remove(at: index)
                        continue
                    }
                    snapshotStreams[index] = SnapshotStream(identity: stream.identity, reader: reader, whole: stream.whole)
                    continue
                }
            }
            do {
                guard try router.send([stream.identity, stream.unsent!], wait: false) else {
                    if ContinuousClock.now - stream.progress > configuration.snapshotDeadline {
                        // Its requester reads nothing: the held read (and the
                        // file growth it pins) is given up; it may ask again.
                        stream.reader.close()
                        snapshotStreams.remove(at: index)
                        errorCounts["snapshot-abandoned", default: 0] += 1
                        continue
                    }
                    snapshotStreams[index] = stream
                    continue
                }
            } catch {
                // The requester is gone (or the part cannot be sent): it asks again.
                stream.reader.close()
                snapshotStreams.remove(at: index)
                continue
            }
            sent = true
            stream.unsent = nil
            stream.part += 1
            stream.progress = .now
            if stream.isLast {
                stream.reader.close()
                snapshotStreams.remove(at: index)
            } else {
                snapshotStreams[index] = stream
            }
        }
        return sent || snapshotStreams.isEmpty
    }

    private func refuse(_ identity: [UInt8], _ error: WireError) {
        errorCounts[error.code, default: 0] += 1
        outgoing.append((identity, WireMessage.error(error).encoded()))
    }

    private func handle(identity: [UInt8], frame: [UInt8]) {
        let message: WireMessage
        do {
            message = try WireMessage.decode(frame)
        } catch {
            refuse(identity, WireError(code: error.code, message: error.message))
            return
        }
        if let worker = message.workerName, worker.utf8.count > Leader.maximumWorkerName || worker.isEmpty || worker.utf8.contains(0) {
            // Names key the dedup table (name, 0, sequence; LMDB keys hold at most 511 bytes).
            let problem =
                worker.utf8.contains(0)
                ? "worker names hold no NUL character"
                : "worker names are 1 to \(Leader.maximumWorkerName) bytes of UTF-8; this one has \(worker.utf8.count)"
            if case .op(let request) = message {
                errorCounts["bad-request", default: 0] += 1
                outgoing.append((identity, OpReply(request: request.request, outcome: .rejected(reason: "bad-request: \(problem)")).frame()))
            } else {
                refuse(identity, WireError(code: "malformed", message: problem))
            }
            return
        }
        switch message {
        case .hello(let worker, let revision):
            guard revision <= durable.store.lastRevision else {
                // Its replica holds turns this log does not: another history.
                refuse(identity, WireError(
                    code: "revision-ahead",
                    message: "worker \(worker) says it holds revision \(revision), but this leader's log ends at revision \(durable.store.lastRevision); sync again from revision 0"))
                return
            }
            if let holder = workers[worker], holder.identity != identity {
                guard !holdsName(holder, worker) else {
                    refuse(identity, nameInUse(worker, holder))
                    return
                }
                // The name's earlier process is gone (disconnected, or silent
                // past the timeout): this one takes the name over, and what the
                // earlier one held retires with it.
                recordRetirements(scopes.dropWorker(worker), named: Leader.nameTakenOverTurn)
            }
            goneWorkers.remove(worker)
            workers[worker] = WorkerState(appliedRevision: revision, lastHeard: .now, identity: identity)
            sendWelcome(worker, to: identity)
        case .heartbeat(let worker, let revision, let stateDigest):
            guard !goneWorkers.contains(worker) else {
                // Heard again after being given up: it must rejoin (hello, then
                // register its scopes anew) before its work is admitted.
                refuse(identity, WireError(
                    code: "gone",
                    message: "worker \(worker) was silent past the heartbeat timeout; its scope instances are retired — say hello again"))
                return
            }
            guard let holder = workers[worker] else {
                refuse(identity, helloFirst("heartbeat", worker: worker))
                return
            }
            guard holder.identity == identity else {
                refuse(identity, nameInUse(worker, holder))
                return
            }
            workers[worker] = WorkerState(
                appliedRevision: revision, lastHeard: .now, identity: identity, digest: digestAgreement(revision, stateDigest))
            sendWelcome(worker, to: identity)
        case .snapshotRequest(let inParts):
            guard holdsAName(identity) else {
                refuse(identity, helloFirst("snapshot-request", worker: nil))
                return
            }
            // One snapshot per peer: asking again replaces the one under way.
            // Parts (and a whole snapshot, at most one part's size) are read
            // from one read transaction held open and go out between batches
            // as ZeroMQ has room for them (`sendSnapshotParts`).
            endSnapshot(to: identity)
            guard snapshotStreams.count < Leader.maximumSnapshotStreams else {
                refuse(identity, WireError(
                    code: "unavailable",
                    message: "\(Leader.maximumSnapshotStreams) snapshots are being sent, the most at once; ask again later"))
                return
            }
            do {
                snapshotStreams.append(SnapshotStream(identity: identity, reader: try durable.store.stateSnapshot(), whole: !inParts))
            } catch {
                refuse(identity, WireError(code: "unavailable", message: "cannot read the state table: \(error.message)"))
            }
        case .catchUpRequest(let from):
            guard holdsAName(identity) else {
                refuse(identity, helloFirst("catch-up-request", worker: nil))
                return
            }
            guard catchUpsThisBatch.insert(identity).inserted else {
                // One catch-up per peer per batch: a peer that asks faster
                // than it reads cannot make the leader build reply after reply.
                refuse(identity, WireError(code: "busy", message: "one catch-up per batch; ask again once the answer to the first arrives"))
                return
            }
            do {
                let records = try durable.store.records(from: from, limit: 10_000, maximumBytes: Leader.catchUpReplyBytes)
                outgoing.append((identity, WireMessage.turns(epoch: epoch, records: records).encoded()))
            } catch {
                refuse(identity, WireError(code: "unavailable", message: "cannot read the turn log: \(error.message)"))
            }
        case .op(let request):
            if let holder = workers[request.request.worker], holder.identity != identity {
                // Not this process's name (any more): refused without a dedup
                // entry, so the holder's own request with that id still runs.
                errorCounts["name-in-use", default: 0] += 1
                let reason = "name-in-use: \(nameInUse(request.request.worker, holder).message)"
                outgoing.append((identity, OpReply(request: request.request, outcome: .rejected(reason: reason)).frame()))
                return
            }
            outgoing.append((identity, run(request)))
            batchOpReplies.append((outgoing.count - 1, request.request))
        case .statusRequest:
            outgoing.append((identity, WireMessage.status(status).encoded()))
        case .scopeRegister(let spec):
            guard let holder = workers[spec.worker] else {
                // Instances live and die with a worker's heartbeats: a name
                // that never said hello on this connection registers nothing.
                refuse(identity, helloFirst("scope-register", worker: spec.worker))
                return
            }
            guard holder.identity == identity else {
                refuse(identity, nameInUse(spec.worker, holder))
                return
            }
            guard scopes.registrationCount(of: spec.worker) < Leader.maximumRegistrationsPerWorker
                || scopes.isRegistered(spec.worker, spec.registration)
            else {
                refuse(identity, WireError(
                    code: "too-many-registrations",
                    message: "worker \(spec.worker) holds \(Leader.maximumRegistrationsPerWorker) scope registrations, the most a worker may"))
                return
            }
            let computed = Cogs.hasSelector(named: spec.source)
            let current = computed ? evaluateSelector(spec.source, spec.key) : durable.currentValue(name: spec.source, key: spec.key)
            let (instances, replaced) = scopes.register(spec, currentValue: current, computed: computed)
            // A registration number sent again replaces the registration: its
            // earlier instances retire, in a record of their own.
            recordRetirements(replaced, named: Leader.reregisteredTurn)
            outgoing.append((
                identity,
                WireMessage.scopeRegistered(
                    worker: spec.worker, registration: spec.registration, revision: durable.nextRevision - 1,
                    instances: instances
                ).encoded()
            ))
            batchRegistrations.append(outgoing.count - 1)
        default:
            refuse(identity, WireError(code: "not-allowed", message: "`\(message.typeName)` is not a request the leader serves"))
        }
    }

    /// Whether the connection `identity` said hello and holds a worker name.
    private func holdsAName(_ identity: [UInt8]) -> Bool {
        workers.values.contains { $0.identity == identity }
    }

    /// The refusal of a worker's message from a connection that has not said
    /// hello (or no longer holds a name).
    private func helloFirst(_ type: String, worker: String?) -> WireError {
        WireError(
            code: "hello-first",
            message: "`\(type)` needs a worker that said hello on this connection\(worker.map { " (worker \($0) has not)" } ?? ""); say hello first")
    }

    /// Scope instances that retire without a turn causing them (a worker
    /// gone, its name taken over, a registration replaced) go into a system
    /// record of their own, committed with the batch, so a log reader sees
    /// every instance end.
    private func recordRetirements(_ events: [ScopeEvent], named name: String) {
        guard !events.isEmpty else { return }
        durable.appendSystemRecord(named: name, scopeEvents: events)
    }

    /// The names of the system records of retirements (`protocol/cogwire.md` §6).
    public static let workerGoneTurn = "cogd.workerGone"
    public static let nameTakenOverTurn = "cogd.nameTakenOver"
    public static let reregisteredTurn = "cogd.scopeReregistered"

    /// Whether the process holding `worker`'s name is still there: heard
    /// within the heartbeat timeout and still connected.
    private func holdsName(_ holder: WorkerState, _ worker: String) -> Bool {
        guard ContinuousClock.now - holder.lastHeard < configuration.heartbeatTimeout else { return false }
        // A welcome (committed revision only) is harmless to a live holder;
        // the mandatory ROUTER refuses it if the holder has disconnected.
        let probe = WireMessage.welcome(
            epoch: epoch, lastRevision: durable.store.lastRevision, turnsEndpoint: boundTurnsEndpoint,
            lastSequence: (try? lastSequence(of: worker)) ?? 0)  // the holder keeps the higher of its own and this
        do {
            _ = try router.send([holder.identity, probe.encoded()], wait: false)
            return true
        } catch {
            return error.code != EHOSTUNREACH
        }
    }

    private func nameInUse(_ worker: String, _ holder: WorkerState) -> WireError {
        let silence = (ContinuousClock.now - holder.lastHeard).components
        let heard = String(format: "%.1f", Double(silence.seconds) + Double(silence.attoseconds) / 1e18)
        return WireError(
            code: "name-in-use",
            message: "another process is connected as worker \(worker) (heard \(heard) s ago); each worker needs its own --name")
    }

    /// The answer to `worker`'s hello or heartbeat. It carries the highest
    /// sequence answered in that name, so a worker restarted under the same
    /// name numbers its requests above it: a new request is never mistaken
    /// for a retry of an old one (and answered with the old reply).
    private func welcome(_ worker: String) throws(TurnStoreError) -> WireMessage {
        .welcome(
            epoch: epoch, lastRevision: durable.nextRevision - 1, turnsEndpoint: boundTurnsEndpoint,
            lastSequence: try lastSequence(of: worker))
    }

    /// Sends `worker`'s welcome, or `unavailable` when the highest sequence
    /// answered in its name cannot be read (a welcome without it could make
    /// the worker reuse request ids).
    private func sendWelcome(_ worker: String, to identity: [UInt8]) {
        do {
            outgoing.append((identity, try welcome(worker).encoded()))
            batchWelcomes.append((outgoing.count - 1, worker))
        } catch {
            refuse(identity, WireError(code: "unavailable", message: "cannot read the dedup table: \(error.message)"))
        }
    }

    /// The highest request sequence answered for `worker`: this run's, else
    /// the dedup table's. A failed read is not cached (and is thrown: the
    /// caller must not guess, or a retry could run twice).
    private func lastSequence(of worker: String) throws(TurnStoreError) -> UInt64 {
        if let highest = highestAnswered[worker] { return highest }
        var stored = try durable.store.lastDedupSequence(worker: worker) ?? 0
        for request in unindexed.keys where request.worker == worker { stored = max(stored, request.sequence) }
        highestAnswered[worker] = stored
        return stored
    }

    /// Admission, then the op's body as a turn: applied, unchanged or
    /// rejected. Returns the reply frame (also kept for dedup).
    private func run(_ request: OpRequest) -> [UInt8] {
        let worker = request.request.worker
        guard (1..<Leader.sequenceLimit).contains(request.request.sequence) else {
            // Sequences stay far below 2^64 so a worker numbering above the
            // highest answered one can never overflow.
            errorCounts["bad-request", default: 0] += 1
            return OpReply(
                request: request.request,
                outcome: .rejected(reason: "bad-request: request sequences are 1 to 2^63-1; this one is \(request.request.sequence)")
            ).frame()
        }
        let digest = RequestDigest.of(op: request.op, argument: request.argument)
        let highest: UInt64
        do {
            highest = try lastSequence(of: worker)
        } catch {
            return unavailable(request.request, because: "cannot read the dedup table: \(error.message)")
        }
        if request.request.sequence <= highest {
            // A retry: answered in this batch, or stored. (Neither: a request
            // sent late, after its scope child's instance became known.)
            if let answered = batchReplies[request.request] ?? unindexed[request.request] {
                return answer(request.request, stored: answered, digest: digest)
            }
            do {
                if let stored = try durable.store.dedupReply(for: request.request) {
                    return answer(request.request, stored: stored, digest: digest)
                }
            } catch {
                // Unknown whether it ran: never run it on a guess.
                return unavailable(request.request, because: "cannot read the dedup table: \(error.message)")
            }
        }
        highestAnswered[worker] = max(highest, request.request.sequence)
        let reply: OpReply
        if goneWorkers.contains(worker) {
            // A worker given up for silence: all its work, its mechanisms' and
            // its scopes', ended with it (DESIGN §6) until it says hello again.
            errorCounts["retired-scope", default: 0] += 1
            reply = OpReply(
                request: request.request,
                outcome: .rejected(reason: "retired-scope: worker \(worker) is gone (silent past the heartbeat timeout)"))
        } else if let instance = request.instance, !scopes.isLive(instance, for: request.request.worker) {
            errorCounts["retired-scope", default: 0] += 1
            reply = OpReply(
                request: request.request,
                outcome: .rejected(reason: "retired-scope: scope instance \(instance) is retired or not owned by \(request.request.worker)"))
        } else if let runner = RemoteOpRegistry.runner(named: request.op) {
            let before = durable.pending.count
            let revision = durable.nextRevision
            durable.currentOrigin = TurnOrigin(
                worker: request.request.worker, instance: request.instance, request: request.request, digest: digest)
            defer { durable.currentOrigin = .system }
            do {
                try runningNote.note(request.request, op: request.op, digest: digest)
            } catch {
                // Unnoted, a body that traps would run again after the restart.
                return unavailable(request.request, because: "cannot note the running request: \(error.message)")
            }
            do {
                try runner(cogs, request.argument, durable, request.name ?? request.op)
                if durable.pending.count > before, durable.lastPendingRecordBytes > configuration.maximumRecordBytes {
                    // No reader could take its record: the turn is undone
                    // before anyone sees it, and nothing is written.
                    let size = durable.lastPendingRecordBytes
                    let draft = durable.dropLastPending()
                    do {
                        try durable.restore(cogs, undoing: draft.map { [$0] } ?? [])
                    } catch {
                        // The graph would no longer match the store: stop, and
                        // restart from the store (this request is quarantined).
                        fatalError("internal inconsistency: cannot undo a too-large turn: \(error)")
                    }
                    errorCounts["too-large", default: 0] += 1
                    reply = OpReply(
                        request: request.request,
                        outcome: .rejected(
                            reason: "too-large: the turn's record would take about \(size) bytes; a record holds at most \(configuration.maximumRecordBytes)"))
                } else {
                    if durable.pending.count > before {
                        durable.attachScopeEvents(scopes.apply(durable.lastPendingWrites, evaluate: evaluateSelector))
                    }
                    reply = OpReply(
                        request: request.request,
                        outcome: durable.pending.count > before ? .applied(revision: revision) : .unchanged)
                }
            } catch {
                errorCounts["bad-argument", default: 0] += 1
                reply = OpReply(request: request.request, outcome: .rejected(reason: "bad-argument: \(error)"))
            }
        } else {
            errorCounts["unknown-op", default: 0] += 1
            reply = OpReply(request: request.request, outcome: .rejected(reason: "unknown-op: no op named `\(request.op)` is registered"))
        }
        let frame = reply.frame()
        let stored = Leader.dedupValue(digest: digest, frame: frame)
        batchReplies[request.request] = stored
        if case .applied = reply.outcome {
            unindexed[request.request] = stored
            batchApplied.append(request.request)
        } else {
            dedupRows.append((request.request, stored))
        }
        return frame
    }

    /// What `dedup` keeps for a request: the digest of its op and argument
    /// (8 zero bytes when unknown), then the reply frame (`turnlog.md` §2).
    static func dedupValue(digest: [UInt8]?, frame: [UInt8]) -> [UInt8] {
        // A digest read from a file or record of another size is unknown, not trusted.
        (digest.flatMap { $0.count == RequestDigest.size ? $0 : nil } ?? Leader.unknownDigest) + frame
    }

    static let unknownDigest = [UInt8](repeating: 0, count: RequestDigest.size)

    /// The stored answer to a retry — unless the retry carries another op
    /// or argument than the request first answered under its id: then it
    /// is refused `request-mismatch` (and that refusal is kept nowhere).
    private func answer(_ request: RequestID, stored: [UInt8], digest: [UInt8]) -> [UInt8] {
        guard stored.count > RequestDigest.size else { return stored }  // not written by this leader: answered as stored
        let storedDigest = Array(stored.prefix(RequestDigest.size))
        guard storedDigest == digest || storedDigest == Leader.unknownDigest else {
            errorCounts["request-mismatch", default: 0] += 1
            return OpReply(
                request: request,
                outcome: .rejected(
                    reason: "request-mismatch: request \(request) was answered for another op or argument; a new request needs a new sequence")
            ).frame()
        }
        return Array(stored.dropFirst(RequestDigest.size))
    }

    /// Refuses a request the leader cannot run safely now; not kept in
    /// `dedup`, so a retry is looked at afresh.
    private func unavailable(_ request: RequestID, because cause: String) -> [UInt8] {
        errorCounts["unavailable", default: 0] += 1
        return OpReply(request: request, outcome: .rejected(reason: "unavailable: \(cause)")).frame()
    }

    /// A named automatic cog's value as the leader's graph has it now, encoded
    /// (nil when it does not encode).
    private func evaluateSelector(_ name: String, _ key: [UInt8]?) -> [UInt8]? {
        (try? cogs.encodedSelectorValue(named: name, key: key, codec: durable)) ?? nil
    }

    /// A worker silent past the heartbeat timeout is gone: its scope
    /// instances retire (in a record of their own), so its queued or late
    /// requests are rejected. Silence counts from the later of what it last
    /// said and the leader's return from a pause: a leader that was stopped
    /// (SIGSTOP) or stalled did not hear, which is not the workers' silence.
    private func expireSilentWorkers(now: ContinuousClock.Instant) {
        // Stopped or stalled since the last look at the sockets (inside a
        // batch, say): what the workers sent meanwhile is still unread.
        if now - lastLook > Leader.pauseAllowance {
            resumedAt = now
            return
        }
        for (name, state) in workers where now - max(state.lastHeard, resumedAt) >= configuration.heartbeatTimeout {
            workers[name] = nil
            goneWorkers.insert(name)
            recordRetirements(scopes.dropWorker(name), named: Leader.workerGoneTurn)
        }
    }

    public var status: LeaderStatus {
        let now = ContinuousClock.now
        let last = durable.store.lastRevision
        return LeaderStatus(
            epoch: epoch, revision: last,
            workers: workers.sorted { $0.key < $1.key }.map { name, state in
                let since = now - state.lastHeard
                return LeaderStatus.Worker(
                    name: name, appliedRevision: state.appliedRevision,
                    lag: last > state.appliedRevision ? last - state.appliedRevision : 0,
                    secondsSinceHeard: Double(since.components.seconds) + Double(since.components.attoseconds) / 1e18,
                    digest: state.digest.rawValue)
            },
            errorCounts: errorCounts, openScopeInstances: scopes.openInstances, placement: placementDescription,
            commits: commitTimes.summary)
    }

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
