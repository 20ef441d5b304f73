import Cog
import CogCodec
import CogLog
import CogProtocol
import Foundation
import Synchronization

/// Something the leader would release — a reply, a status, a snapshot, a
/// publication — held until the standbys acknowledge the commits it
/// reflects (ha.md §9).
struct HeldRelease {
    /// The last shipped commit when it was made: it leaves once the rules release through it.
    var tag: UInt64
    var effect: LeaderCore.Effect
    /// The records a held publication sends.
    var batch: EncodedTurnBatch
    /// What it holds in memory: the reply's frame, or the publication's records.
    var bytes: Int
    /// When it was held (`cogd_ha_release_wait_seconds`).
    var since: ContinuousClock.Instant
}

/// A copy of the log on its way to a standby that was not in step
/// (`ship-resync`, then `ship-copy` parts): a compacted backup of the
/// leader's folder, read a part at a time from its file.
final class CopyStream {
    let peer: [UInt8]
    let node: String
    /// The last shipped commit the copy holds.
    let sequence: UInt64
    let folder: String
    let file: FileHandle
    let size: UInt64
    var offset: UInt64 = 0

    init(peer: [UInt8], node: String, sequence: UInt64, folder: String) throws {
        self.peer = peer
        self.node = node
        self.sequence = sequence
        self.folder = folder
        file = try FileHandle(forReadingFrom: URL(fileURLWithPath: folder + "/data.mdb"))
        size = try file.seekToEnd()
        try file.seek(toOffset: 0)
    }

    /// Closes the file and removes the copy.
    func end() {
        try? file.close()
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// The bytes of one part.
    static let partBytes = 1 << 20
    /// The most copies sent at once.
    static let maximumStreams = 2
}

/// A copy of the log being written for a standby, on a thread of its own
/// while the leader serves: the store's backup is one LMDB read, which may
/// run beside the writer (`TurnStore.backup(to:)`).
final class PendingCopy: Sendable {
    let peer: [UInt8]
    let node: String
    let folder: String
    /// Why the standby was not in step, for the copy's log line.
    let reason: String?
    private let outcome = Mutex<Result<BackupReport, TurnStoreError>?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    /// Starts writing the copy of `store`'s log into `folder`.
    init(peer: [UInt8], node: String, folder: String, reason: String?, store: TurnStore) {
        self.peer = peer
        self.node = node
        self.folder = folder
        self.reason = reason
        // The thread touches only the store's LMDB environment (a read) and its folder's path, which the serving
        // thread does not change; the leader waits for it before it closes the store (`wait()`).
        let reader = UncheckedStore(store: store)
        Thread.detachNewThread { [self] in
            let result = Result { () throws(TurnStoreError) in try reader.store.backup(to: folder, flushed: false) }
            outcome.withLock { $0 = result }
            finished.signal()
        }
    }

    /// The backup's outcome once written; nil while it is being written.
    var written: Result<BackupReport, TurnStoreError>? { outcome.withLock { $0 } }

    /// Waits until the copy is written.
    func wait() {
        finished.wait()
        finished.signal()
    }

    private struct UncheckedStore: @unchecked Sendable {
        let store: TurnStore
    }
}

/// The leader's side of shipping its log to standbys: the driver of `ShipCore`.
extension Leader {
    /// The shipping rules' clock: seconds since the leader started.
    private var shipNow: Double {
        Double(now.components.seconds) + Double(now.components.attoseconds) / 1e18
    }

    /// The most bytes of shipped commits kept for a standby that is receiving
    /// a copy (past them, it is sent a newer copy): 256 MiB.
    static let recentShippedLimit = 256 << 20
    /// The most bytes of replies and records held for standbys' acknowledgements: 64 MiB.
    static let heldBytesLimit = 64 << 20

    /// With `configuration.shipping`: every commit is shipped, before it runs.
    func startShipping() {
        guard let shipping = configuration.shipping else { return }
        // What this node applied as a standby counts as shipped before its own commits: an old leader behind it on this log catches up from them.
        let inherited = shipping.inherited?.commits ?? []
        shipCore = ShipCore(shipping.rules, inherited: UInt64(inherited.count))
        // Kept from the folder's last commit as this leader found it: a standby at that commit lacks exactly what it ships.
        recentShipped = KeptCommits(
            countLimit: shipping.rules.window, byteLimit: Leader.recentShippedLimit, base: shipping.inherited.map(\.base) ?? store.lastCommit)
        for kept in shipping.inherited?.entries ?? [] { recentShipped.append(kept.commit, firstRevision: kept.firstRevision, name: kept.name) }
        // Copies a stopped leader was sending are of no use now.
        let leftOver = (try? FileManager.default.contentsOfDirectory(atPath: configuration.dataFolder)) ?? []
        for name in leftOver where name.hasPrefix("standby-copy-") {
            try? FileManager.default.removeItem(atPath: configuration.dataFolder + "/" + name)
        }
        store.shipper = { [unowned self] commit in
            MainActor.assumeIsolated { self.ship(commit) }
        }
    }

    /// Called on the serving thread right after a commit went to at least
    /// one standby and before the leader's own commit of it runs, with the
    /// commit's first revision; nil unless the executable sets it at start.
    /// The lab (`cogd-lab`) sets it to die there on cue, so its HA drill can
    /// strike where a standby may hold a commit its leader lacks (ha.md §8);
    /// `cogd` never sets it.
    package nonisolated(unsafe) static var afterShipping: (@Sendable (_ firstRevision: UInt64) -> Void)?

    /// Asked on the serving thread before a commit goes to the standbys,
    /// with its first revision: true keeps it from them (it is counted as
    /// shipped all the same); nil unless the executable sets it at start.
    /// With `afterCommit`, the lab (`cogd-lab`) uses it to freeze where a
    /// leader holds a commit no standby received, as one whose ZeroMQ I/O
    /// thread stopped before sending it (ha.md §5); `cogd` never sets it.
    package nonisolated(unsafe) static var withholdShip: (@Sendable (_ firstRevision: UInt64) -> Bool)?
    /// Called on the serving thread right after each of the leader's own
    /// commits, with its revisions; nil unless the executable sets it at start.
    package nonisolated(unsafe) static var afterCommit: (@Sendable (_ revisions: Range<UInt64>) -> Void)?

    /// The last commit when nothing it reflects has left the node: shipped,
    /// then committed here as the folder's last transaction, and held for the
    /// standbys' acknowledgement, which has not come (`releasedThrough` is
    /// below its sequence, so no reply, publication, snapshot or answer
    /// reflecting it was released).
    var unreleasedLastCommit: ShippedTransaction? {
        guard shipCore?.lastCommitHeld == true else { return nil }
        return store.lastTransactionIfShipped
    }

    private func ship(_ commit: ShippedCommit) {
        guard var rules = shipCore else { return }
        let bytes = commit.encoded()
        // Kept for a standby's catch-up or copy: the window's commits, and at most `recentShippedLimit` bytes of them.
        recentShipped.append(bytes, firstRevision: commit.firstRevision, name: commit.name)
        var effects = rules.shipped(bytes, now: shipNow)
        shipCore = rules
        if let withholdShip = Leader.withholdShip, withholdShip(commit.firstRevision) {
            effects.removeAll { if case .ship = $0 { true } else { false } }
        }
        carryShipping(effects)
        if let afterShipping = Leader.afterShipping, effects.contains(where: { if case .ship = $0 { true } else { false } }) {
            afterShipping(commit.firstRevision)
        }
    }

    /// The shipping as `status` reports it (nil without `--sync`).
    var replicationStatus: LeaderStatus.Replication? {
        guard let rules = shipCore else { return nil }
        let state: String =
            switch rules.state {
            case .sync: "sync"
            case .degraded: "degraded"
            case .held: "held"
            case .async: "async"
            }
        return LeaderStatus.Replication(
            state: state, named: rules.named, shipped: rules.lastSequence, released: rules.releasedThrough,
            standbys: rules.standbys.values.sorted { $0.node < $1.node }.map { .init(node: $0.node, lag: rules.lastSequence - $0.acknowledged) })
    }

    /// Whether `effect` must wait for the standbys (it is then kept, in
    /// order). A status answer never waits: it is how an operator sees why
    /// replies do. Past `heldBytesLimit` of held replies and records, what
    /// would be held is dropped, counted `send-dropped`: a requester's retry
    /// is answered from dedup once released, a subscriber fetches the turns by the gap.
    func holdsForStandbys(_ effect: LeaderCore.Effect) -> Bool {
        guard let rules = shipCore else { return false }
        if case .sendStatus = effect { return false }
        guard !heldReleases.isEmpty || rules.lastSequence > rules.releasedThrough else { return false }
        let size: Int
        switch effect {
        case .send(_, let frame): size = frame.count
        case .publish: size = store.lastAppended.bytes.count
        default: size = 0
        }
        guard heldBytes + size <= Leader.heldBytesLimit else {
            countDroppedSend()
            return true
        }
        heldBytes += size
        heldReleases.append(HeldRelease(tag: rules.lastSequence, effect: effect, batch: store.lastAppended, bytes: size, since: .now))
        return true
    }

    /// A standby's `standby-hello` or `ship-ack`.
    func standbyMessage(_ message: WireMessage, from peer: [UInt8]) {
        guard var rules = shipCore else {
            deliver(WireMessage.error(WireError(.notAllowed, "this leader ships its log to no standby (it runs without --ha)")).encoded(), to: peer)
            return
        }
        let effects: [ShipCore.Effect]
        switch message {
        case .standbyHello(let node, let logID, let standbyEpoch, let revision, let digest, let lastCommit):
            let hello = StandbyMatch.Hello(logID: logID, epoch: standbyEpoch, revision: revision, digest: digest, lastCommit: lastCommit)
            let missed = keptCommits(after: revision, named: lastCommit)
            switch (StandbyMatch.of(hello, standbyLog(at: revision, named: lastCommit, missed: missed)), missed) {
            case (.behind, let missed?):
                // Behind, on this log: the commits it lacks follow, as after a copy (ha.md §9, catch-up).
                configuration.operatorLog?.log(
                    .info, "standby-catch-up",
                    "standby \(TerminalText.escaped(node)) is at revision \(revision) of this log: sending it the \(missed.commits.count) commits after it"
                        + (lastCommit.map { " (its last: \($0))" } ?? ""),
                    ["node": .text(node), "revision": .number(Double(revision)), "commits": .number(Double(missed.commits.count))])
                effects = rules.copied(by: peer, node: node, through: missed.sequence, missed: missed.commits, now: shipNow)
            case (.inStep, _):
                effects = rules.hello(from: peer, node: node, inStep: true, now: shipNow)
            case (.copy(let reason), _):
                // Why a copy follows, for its log line.
                copyReason = reason
                effects = rules.hello(from: peer, node: node, inStep: false, now: shipNow)
            case (.behind, nil):
                // Not reached (behind only while the kept commits reach back to its revision): a copy all the same.
                effects = rules.hello(from: peer, node: node, inStep: false, now: shipNow)
            }
        case .shipAck(let node, let sequence):
            effects = rules.acknowledged(from: peer, node: node, through: sequence, now: shipNow)
        case .standbyCopied(let node, let sequence):
            let count = rules.lastSequence >= sequence ? rules.lastSequence - sequence : UInt64.max
            let missed = recentShipped.last(count)
            effects = rules.copied(by: peer, node: node, through: sequence, missed: missed, now: shipNow)
        default:
            return
        }
        shipCore = rules
        carryShipping(effects)
        copyReason = nil
        noteStandbyMessage(from: message, peer: peer)
    }

    /// Knows a standby's ZeroMQ identity from its message (its connection
    /// is noted from its next one: `noteStandbyConnection`).
    private func noteStandbyMessage(from message: WireMessage, peer: [UInt8]) {
        switch message {
        case .standbyHello(let node, _, _, _, _, _), .shipAck(let node, _), .standbyCopied(let node, _):
            guard shipCore?.standbys[node]?.peer == peer, standbyPeers[peer] != node else { return }
            standbyPeers = standbyPeers.filter { $0.value != node }
            standbyPeers[peer] = node
        default:
            return
        }
    }

    /// The connection a standby's message came in on (-1: ZeroMQ cannot say);
    /// a new one is not listed by the socket's watch yet.
    func noteStandbyConnection(_ node: String, _ descriptor: Int32) {
        guard descriptor >= 0, standbyConnections[node]?.descriptor != descriptor else { return }
        standbyConnections[node] = (descriptor, false)
    }

    /// After the socket's watch listed its connections: a standby whose
    /// connection was listed and no longer is has gone (`ShipCore.gone`:
    /// dropped now, and replaced in the sync key if it was named). One not
    /// listed yet is left to the heartbeat timeout: a descriptor reused by
    /// another connection keeps it too (the timeout still ends it).
    func noteStandbyConnections(_ open: Set<Int32>) {
        guard var rules = shipCore else { return }
        // Only the standbys the rules keep are known (at most 16).
        if standbyPeers.contains(where: { rules.standbys[$0.value]?.peer != $0.key }) {
            standbyPeers = standbyPeers.filter { rules.standbys[$0.value]?.peer == $0.key }
        }
        guard !standbyConnections.isEmpty else { return }
        var effects: [ShipCore.Effect] = []
        for (node, connection) in standbyConnections.sorted(by: { $0.key < $1.key }) {
            if rules.standbys[node] == nil {
                standbyConnections[node] = nil  // dropped otherwise (silent, too far behind)
            } else if open.contains(connection.descriptor) {
                if !connection.listed { standbyConnections[node] = (connection.descriptor, true) }
            } else if connection.listed {
                standbyConnections[node] = nil
                effects += rules.gone(node, now: shipNow)
            }
        }
        shipCore = rules
        carryShipping(effects)
    }

    /// The kept shipped commits a standby at `revision` lacks, and the
    /// sequence before the first of them: those after the kept commit
    /// `named` (nil when none has that name), or for a standby that names
    /// none, every commit whose first revision is above `revision` (nil when
    /// the window no longer holds a commit at or before it, so some commit
    /// after it may be gone, or none follows it).
    private func keptCommits(after revision: UInt64, named: CommitName?) -> (sequence: UInt64, commits: [[UInt8]])? {
        guard let rules = shipCore else { return nil }
        guard let commits = named.map({ recentShipped.after(name: $0) }) ?? recentShipped.after(revision: revision) else { return nil }
        return (rules.lastSequence - UInt64(commits.count), commits)
    }

    /// What this leader's log says at a standby's revision, for log
    /// matching (`StandbyMatch`): its record there, its last commit, and the
    /// commits it keeps after the standby's (`missed`).
    private func standbyLog(at revision: UInt64, named: CommitName?, missed: (sequence: UInt64, commits: [[UInt8]])?) -> StandbyMatch.Log {
        var record: StandbyMatch.Record?
        if revision > 0, revision <= store.lastRevision, let ours = try? store.records(from: revision, limit: 1).first, ours.revision == revision {
            record = StandbyMatch.Record(epoch: ours.epoch, digest: ours.stateDigest)
        }
        // Back to one at or before its revision: for a named commit, every commit after its record is kept.
        let keepsAll = named == nil ? missed != nil : recentShipped.oldestRevision.map { $0 <= revision } ?? false
        return StandbyMatch.Log(
            logID: store.logID, epoch: epoch, lastRevision: store.lastRevision, record: record,
            commitsAfter: recentShipped.following(revision: revision).count > 0, keepsAllAfter: keepsAll,
            oldestKept: recentShipped.oldestRevision, lastCommit: store.lastCommit, keptAfterNamed: named == nil ? nil : missed?.commits.count)
    }

    /// Once per pass of the serving loop: etcd's answers to sync key writes, and the rules' timers.
    func tickShipping() {
        guard var rules = shipCore else { return }
        var effects: [ShipCore.Effect] = []
        while let written = configuration.shipping?.syncKey?.takeSyncAnswer() {
            effects += written ? rules.syncWritten(now: shipNow) : rules.syncWriteFailed(now: shipNow)
        }
        effects += rules.tick(now: shipNow)
        shipCore = rules
        carryShipping(effects)
    }

    private func carryShipping(_ effects: [ShipCore.Effect]) {
        var writtenNow = false
        for effect in effects {
            switch effect {
            case .ship(let peer, let sequence, let commit):
                deliver(WireMessage.ship(epoch: epoch, sequence: sequence, commit: commit).encoded(), to: peer)
            case .welcome(let peer, let sequence):
                deliver(WireMessage.shipWelcome(epoch: epoch, sequence: sequence).encoded(), to: peer)
            case .resync(let peer, let node, let sequence):
                startCopy(to: peer, node: node, sequence: sequence)
            case .writeSync(let standbys):
                if let writer = configuration.shipping?.syncKey {
                    writer.requestSync(standbys: standbys)
                } else {
                    writtenNow = true
                }
                configuration.operatorLog?.log(
                    .info, "sync-key", "asking etcd's sync key to name \(standbys.isEmpty ? "no standby" : standbys.map(TerminalText.escaped).joined(separator: ", "))",
                    ["standbys": .text(standbys.joined(separator: " "))])
            case .release(let through):
                releaseHeld(through: through)
            case .refuse(let peer, let reason):
                deliver(WireMessage.error(WireError(.unavailable, reason)).encoded(), to: peer)
            case .drop(let node, let reason):
                configuration.operatorLog?.log(
                    .warn, "standby-dropped", "standby \(TerminalText.escaped(node)) dropped: \(reason)", ["node": .text(node), "reason": .text(reason)])
            }
        }
        if writtenNow, var rules = shipCore {
            let more = rules.syncWritten(now: shipNow)
            shipCore = rules
            carryShipping(more)
        }
    }

    /// Starts writing a copy of the log for a standby not in step, on a
    /// thread of its own (the serving goes on); `takeWrittenCopies()` answers
    /// `ship-resync` and starts sending it once it is written.
    private func startCopy(to peer: [UInt8], node: String, sequence: UInt64) {
        // A hello again while its copy is being written: that copy will do.
        if pendingCopies.contains(where: { $0.node == node && $0.peer == peer }) { return }
        copyStreams.removeAll { stream in
            guard stream.node == node || stream.peer == peer else { return false }
            stream.end()
            return true
        }
        guard copyStreams.count + pendingCopies.count < CopyStream.maximumStreams else {
            deliver(WireMessage.error(WireError(.unavailable, "the leader is sending copies to other standbys; say hello again later")).encoded(), to: peer)
            return
        }
        copiesMade += 1
        let folder = configuration.dataFolder + "/standby-copy-\(sequence)-\(copiesMade)"
        try? FileManager.default.removeItem(atPath: folder)
        pendingCopies.append(PendingCopy(peer: peer, node: node, folder: folder, reason: copyReason, store: store))
    }

    /// The copies written since the last look: each is answered `ship-resync`
    /// and its parts start, standing for the shipped commits through its last
    /// revision (`copySequence(through:)`).
    func takeWrittenCopies() {
        guard !pendingCopies.isEmpty else { return }
        pendingCopies.removeAll { pending in
            guard let written = pending.written else { return false }
            let node = TerminalText.escaped(pending.node)
            do {
                let report = try written.get()
                guard let sequence = copySequence(through: report.lastRevision) else {
                    throw TurnStoreError(
                        code: .corrupt,
                        message: "the copy ends at revision \(report.lastRevision), which no shipped commit this leader keeps ends at")
                }
                copyStreams.append(try CopyStream(peer: pending.peer, node: pending.node, sequence: sequence, folder: pending.folder))
                deliver(WireMessage.shipResync(epoch: epoch, revision: report.lastRevision).encoded(), to: pending.peer)
                configuration.operatorLog?.log(
                    .info, "standby-copy", "standby \(node) is not in step"
                        + (pending.reason.map { " (\($0))" } ?? "")
                        + ": sending it a copy of the log at revision \(report.lastRevision) (\(report.bytes) bytes)",
                    ["node": .text(pending.node), "revision": .number(Double(report.lastRevision)), "bytes": .number(Double(report.bytes))])
            } catch {
                try? FileManager.default.removeItem(atPath: pending.folder)
                configuration.operatorLog?.log(.error, "standby-copy", "cannot copy the log for standby \(node): \(error)", ["node": .text(pending.node)])
                deliver(WireMessage.error(WireError(.unavailable, "the leader could not copy its log; say hello again later")).encoded(), to: pending.peer)
            }
            return true
        }
    }

    /// The last shipped commit a copy of the log through `revision` holds:
    /// the one before the first kept commit that starts after it (a commit
    /// is one LMDB transaction, so a copy ends where one does), or the last
    /// shipped when none starts after it; nil when `revision` is not where a
    /// kept commit ends.
    private func copySequence(through revision: UInt64) -> UInt64? {
        guard let rules = shipCore else { return nil }
        let following = recentShipped.following(revision: revision)
        guard let first = following.firstRevision else { return rules.lastSequence }
        guard first == revision + 1 else { return nil }
        return rules.lastSequence - UInt64(following.count)
    }

    /// Sends the copies' next parts while the standbys' queues take them (4 a stream a pass).
    func sendCopyParts() {
        guard !copyStreams.isEmpty else { return }
        copyStreams.removeAll { stream in
            for _ in 0..<4 where backlogs[stream.peer] == nil {
                let data: Data
                do {
                    data = try stream.file.read(upToCount: CopyStream.partBytes) ?? Data()
                } catch {
                    stream.end()
                    return true
                }
                let more = stream.offset + UInt64(data.count) < stream.size && !data.isEmpty
                deliver(
                    WireMessage.shipCopy(epoch: epoch, sequence: stream.sequence, offset: stream.offset, data: Array(data), more: more).encoded(),
                    to: stream.peer)
                stream.offset += UInt64(data.count)
                if !more {
                    stream.end()
                    return true
                }
            }
            return false
        }
    }

    /// Lets go, in order, what was held for the commits through `through`.
    private func releaseHeld(through: UInt64) {
        var released = 0
        let now = ContinuousClock.now
        for held in heldReleases {
            guard held.tag <= through else { break }
            released += 1
            heldBytes -= held.bytes
            let waited = now - held.since
            operations.releaseWait.observe(Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18)
            guard mayRelease() else { continue }
            release(held.effect, batch: held.batch)
        }
        heldReleases.removeFirst(released)
    }
}
