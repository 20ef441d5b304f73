internal import CFileAccess
import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation

/// A standby's side of shipping (ha.md §9): while another node leads, it
/// keeps this node's data folder a copy of the leader's log — it says
/// `standby-hello`, applies every `ship` in order (`TurnStore.apply`) and
/// acknowledges each after its own commit.
///
/// Driven by the waiting command line, a bounded `pass` at a time; the
/// folder stays open (locked) as a standby's until `close()`, which a node
/// that takes the lead calls before it opens the folder as a writer.
public final class StandbyFollower {
    /// What the operator's log hears: an event name, a message, and its level (true: a warning).
    public typealias Note = (_ event: String, _ message: String, _ warning: Bool) -> Void

    private let node: String
    private var store: TurnStore
    private let dataFolder: String
    /// A copy of the leader's log being received (after `ship-resync`).
    private var incoming: (sequence: UInt64, file: FileHandle, written: UInt64)?
    /// Where a copy is received, inside the data folder.
    private var incomingFolder: String { dataFolder + "/standby-incoming" }
    private let note: Note
    private let context: ZMQContext
    private var socket: ZMQSocket?
    private var endpoint: String?
    /// The epoch of the leader followed (nil: unknown).
    private var followedEpoch: UInt64?
    /// The last shipped commit applied, once welcomed (nil: not in step).
    private var applied: UInt64?
    /// The shipped commits applied last, and the revision the newest ends at.
    private var kept = KeptCommits(countLimit: StandbyFollower.keptCountLimit, byteLimit: StandbyFollower.keptByteLimit)
    private var keptThrough: UInt64?
    /// What a standby keeps of the commits it applied (ha.md §9): the leader's window, and 64 MiB.
    public static let keptCountLimit = ShipCore.defaultWindow
    public static let keptByteLimit = 64 << 20

    /// The commits applied last, when the newest ends at the folder's last
    /// revision: a node that takes the lead ships them to an old leader
    /// behind it on this log (catch-up) rather than a copy.
    public var keptCommits: KeptCommits? {
        kept.count > 0 && keptThrough == store.lastRevision ? kept : nil
    }
    private var lastHello = ContinuousClock.now - .seconds(60)
    /// After `ship-resync`: no hello before this (a copy cannot be synced yet).
    private var quietUntil = ContinuousClock.now
    private var closed = false

    /// Its standby key and the leader's public key, under CURVE (`ha.md` §9); nil: none.
    private let keys: CurveClientKeys?

    /// Opens `dataFolder` as a standby's copy (made if missing).
    public init(
        node: String, dataFolder: String, keys: CurveClientKeys? = nil, refusalLogInterval: Duration = .seconds(60), note: @escaping Note
    ) throws {
        self.node = node
        self.refusalLogInterval = refusalLogInterval
        self.keys = keys
        self.note = note
        self.dataFolder = dataFolder
        store = try TurnStore(directory: dataFolder, mode: .standby, createIfMissing: true)
        kept.removeAll(base: store.lastCommit)
        try? FileManager.default.removeItem(atPath: dataFolder + "/standby-incoming")
        context = try ZMQContext()
    }

    deinit { close() }

    /// Whether the copy holds a log (a copy received, or a commit applied).
    public var holdsLog: Bool { store.logID != nil }

    /// The copy's last revision and epoch.
    public var revision: UInt64 { store.lastRevision }
    public var epoch: UInt64 { store.epoch }

    /// Follows the leader at `leaderEndpoint` (nil or empty: none known):
    /// connects when it changes, says hello until welcomed, applies what
    /// came within `timeout`.
    /// A new `leaderEpoch` at the same endpoint (the same node leading again
    /// after a restart) is a new leader too: connected anew, hello again.
    public func pass(leaderEndpoint: String?, leaderEpoch: UInt64? = nil, timeout: Duration) {
        let wanted = leaderEndpoint.flatMap { $0.isEmpty ? nil : $0 }
        if wanted != endpoint || leaderEpoch != followedEpoch {
            followedEpoch = leaderEpoch
            connect(to: wanted)
        }
        guard let socket else {
            usleep(UInt32(max(0, timeout.components.seconds * 1_000_000 + timeout.components.attoseconds / 1_000_000_000_000)))
            return
        }
        if applied == nil, ContinuousClock.now >= quietUntil, ContinuousClock.now - lastHello >= .seconds(1) { hello() }
        keepAlive(socket)
        do {
            guard try ZMQSocket.poll([socket], timeout: timeout)[0] else { return }
            var acknowledge: UInt64?
            // At most 256 messages a pass: the waiting loop keeps its other duties.
            for _ in 0..<256 {
                guard let frames = try socket.receive() else { break }
                guard let frame = frames.last, let message = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize) else {
                    continue
                }
                if let sequence = take(message) { acknowledge = sequence }
            }
            if let acknowledge, try socket.send([WireMessage.shipAck(node: node, sequence: acknowledge).encoded()], wait: false) {
                lastAcknowledged = .now
            }
        } catch {
            note("standby", "the connection to the leader failed: \(error); connecting again", true)
            connect(to: endpoint)
        }
    }

    /// How often a standby in step repeats its last acknowledgement when
    /// nothing is shipped: the leader drops a standby silent for its
    /// heartbeat timeout (ha.md §9), and an idle log ships nothing.
    public static let keepAliveInterval: Duration = .milliseconds(500)
    private var lastAcknowledged = ContinuousClock.now

    /// In step and quiet for `keepAliveInterval`: says its last acknowledgement again.
    private func keepAlive(_ socket: ZMQSocket) {
        guard let applied, ContinuousClock.now - lastAcknowledged >= StandbyFollower.keepAliveInterval else { return }
        if (try? socket.send([WireMessage.shipAck(node: node, sequence: applied).encoded()], wait: false)) == true {
            lastAcknowledged = .now
        }
    }

    /// Handles one message from the leader; returns the sequence to acknowledge, if any.
    private func take(_ message: WireMessage) -> UInt64? {
        switch message {
        case .shipWelcome(let leaderEpoch, let sequence):
            applied = sequence
            refusal = nil
            note("standby-in-step", "in step with the leader of epoch \(leaderEpoch) at revision \(store.lastRevision); applying what it ships", false)
            return nil
        case .ship(_, let sequence, let bytes):
            guard let last = applied else { return nil }
            guard sequence == last &+ 1 else {
                return outOfStep("commit \(sequence) came after \(last): one was lost on the way")
            }
            do {
                let commit = try ShippedCommit.decode(bytes)
                try store.apply(commit)
                kept.append(bytes, firstRevision: commit.firstRevision, name: commit.name)
                keptThrough = store.lastRevision
            } catch {
                return outOfStep("shipped commit \(sequence) was refused: \(error)")
            }
            applied = sequence
            return sequence
        case .shipResync(let leaderEpoch, let revision):
            applied = nil
            quietUntil = .now + .seconds(30)  // the copy's parts follow; hello again only if they stop
            note(
                "standby-resync",
                "this copy (revision \(store.lastRevision)) is not the log of the leader of epoch \(leaderEpoch); receiving its copy at revision \(revision)",
                false)
            startIncoming()
            return nil
        case .shipCopy(_, let sequence, let offset, let data, let more):
            receive(sequence: sequence, offset: offset, data: data, more: more)
            return nil
        case .shipCrashed(let leaderEpoch, let request, let op, let digest, let signal):
            keepCrash(epoch: leaderEpoch, request: request, op: op, digest: digest, signal: UInt8(truncatingIfNeeded: signal))
            return nil
        case .error(let error):
            applied = nil
            // Hello again at the usual pace (a second): a standby the leader dropped is back in step at once, and one
            // refused for a cause that lasts (copies in progress, standbys enough) asks no faster than that.
            quietUntil = .now + .seconds(1)
            noteRefusal(error.message)
            return nil
        default:
            return nil
        }
    }

    /// The last refusal logged: its reason, when, and how many times it came again since.
    private var refusal: (reason: String, logged: ContinuousClock.Instant, repeats: Int)?
    /// How often a refusal for the same reason is logged again while it lasts (60 s unless a test says otherwise).
    private let refusalLogInterval: Duration

    /// Logs a refusal (`standby-refused`, a warning): a new reason at once, the
    /// same reason again once a `refusalLogInterval`, saying how many times
    /// it came meanwhile; a standby asks every second, and a cause that lasts
    /// would otherwise fill the log (ha.md §9).
    private func noteRefusal(_ reason: String) {
        let now = ContinuousClock.now
        if var last = refusal, last.reason == reason, now - last.logged < refusalLogInterval {
            last.repeats += 1
            refusal = last
            return
        }
        var message = "the leader refused this standby: \(TerminalText.escaped(reason))"
        if let last = refusal, last.reason == reason, last.repeats > 0 {
            message += " (refused \(last.repeats) more \(last.repeats == 1 ? "time" : "times") for this reason since it was logged)"
        }
        refusal = (reason, now, 0)
        note("standby-refused", message, true)
    }

    /// Keeps the request whose body crashed the leader in this folder's
    /// running-request note, marked: should this node take the lead, it
    /// quarantines that request at start instead of running it (ha.md §9).
    private func keepCrash(epoch leaderEpoch: UInt64, request: RequestID, op: String, digest: [UInt8], signal: UInt8) {
        guard leaderEpoch >= store.epoch else { return }  // a deposed leader's: this copy has applied a later epoch
        let signalName = QuarantinedRequest(request: request, op: op, crashSignal: Int32(signal)).signalName ?? "signal \(signal)"
        do {
            try RunningRequestNote(dataFolder: dataFolder).record(request, op: op, digest: digest, signal: signal)
            note(
                "leader-crashed",
                "the leader of epoch \(leaderEpoch) died of \(signalName) while running request \(TerminalText.quoted(request.description)) "
                    + "(op \(TerminalText.quoted(op))): should this node lead, it answers that request rejected(crashed-leader) and does not run it",
                true)
        } catch {
            note("leader-crashed", "the leader of epoch \(leaderEpoch) crashed running a request this node could not note: \(error)", true)
        }
    }

    private func startIncoming() {
        incoming.map { try? $0.file.close() }
        incoming = nil
        try? FileManager.default.removeItem(atPath: incomingFolder)
        do {
            try FileManager.default.createDirectory(atPath: incomingFolder, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: incomingFolder + "/data.mdb", contents: nil) else {
                throw TurnStoreError(code: .notWritable, message: "cannot create \(incomingFolder)/data.mdb")
            }
            incoming = (0, try FileHandle(forWritingTo: URL(fileURLWithPath: incomingFolder + "/data.mdb")), 0)
        } catch {
            note("standby-copy-failed", "cannot receive the leader's copy in \(incomingFolder): \(error)", true)
            quietUntil = .now + .seconds(5)
        }
    }

    /// Writes one part of the leader's copy; the last puts the copy in the folder's place.
    private func receive(sequence: UInt64, offset: UInt64, data: [UInt8], more: Bool) {
        guard var copy = incoming, offset == copy.written else {
            // A part out of order (one dropped on the way): start over.
            incoming.map { try? $0.file.close() }
            incoming = nil
            quietUntil = .now
            return
        }
        do {
            try copy.file.write(contentsOf: data)
            // Its writeback starts now, while the next parts travel: the flush after the last has less to wait for.
            // (A failure here costs only that overlap; the flush below decides.)
            _ = cogd_start_writeback(copy.file.fileDescriptor, Int64(clamping: copy.written), Int64(data.count))
            copy.written += UInt64(data.count)
            copy.sequence = sequence
            incoming = copy
            guard !more else { return }
            try copy.file.synchronize()
            try copy.file.close()
            incoming = nil
            try takeCopy()
            note("standby-copied", "the leader's copy is in place at revision \(store.lastRevision) (\(copy.written) bytes)", false)
            _ = try socket?.send([WireMessage.standbyCopied(node: node, sequence: sequence).encoded()], wait: false)
            quietUntil = .now + .seconds(5)
        } catch {
            incoming = nil
            note("standby-copy-failed", "the leader's copy could not be taken: \(error); asking again", true)
            quietUntil = .now
        }
    }

    /// Closes the folder, puts the received copy in place of its log, and opens it again.
    private func takeCopy() throws {
        kept.removeAll(base: nil)
        keptThrough = nil
        store.close()
        let manager = FileManager.default
        for name in ["data.mdb", "lock.mdb", "cogd.identity"] { try? manager.removeItem(atPath: dataFolder + "/" + name) }
        try manager.moveItem(atPath: incomingFolder + "/data.mdb", toPath: dataFolder + "/data.mdb")
        try? manager.removeItem(atPath: incomingFolder)
        store = try TurnStore(directory: dataFolder, mode: .standby)
        kept.removeAll(base: store.lastCommit)
    }

    private func outOfStep(_ why: String) -> UInt64? {
        note("standby-out-of-step", "\(why); saying hello again", true)
        applied = nil
        hello()
        return nil
    }

    private func hello() {
        lastHello = .now
        let digest = store.lastRevision > 0 ? (try? store.stateDigest(at: store.lastRevision)) ?? nil : nil
        // The record it names is its last revision and that record's epoch (ha.md §9): not the folder's epoch,
        // which is above it when this node led an epoch and wrote nothing in it, or was welcomed and shipped nothing.
        let lastEpoch = store.lastRevision > 0 ? (try? store.records(from: store.lastRevision, limit: 1).first?.epoch) ?? store.epoch : 0
        let message = WireMessage.standbyHello(
            node: node, logID: store.logID, epoch: lastEpoch, revision: store.lastRevision, stateDigest: digest, lastCommit: store.lastCommit)
        _ = try? socket?.send([message.encoded()], wait: false)
    }

    private func connect(to wanted: String?) {
        socket?.close()
        socket = nil
        applied = nil
        refusal = nil
        endpoint = wanted
        guard let wanted else { return }
        do {
            let socket = try ZMQSocket(context, .dealer, linger: .zero)
            try socket.useCurve(keys)
            try socket.connect(wanted)
            self.socket = socket
            // A new leader (or epoch) is greeted at once: a wait for the last one's copy or welcome does not carry over.
            lastHello = .now - .seconds(60)
            quietUntil = .now
        } catch {
            note("standby", "cannot connect to the leader at \(TerminalText.escaped(wanted)): \(error)", true)
        }
    }

    /// Closes the connection and the folder (before the node opens it as a leader).
    public func close() {
        guard !closed else { return }
        closed = true
        socket?.close()
        socket = nil
        store.close()
        context.close()
    }
}
