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
    private let store: TurnStore
    private let note: Note
    private let context: ZMQContext
    private var socket: ZMQSocket?
    private var endpoint: String?
    /// The last shipped commit applied, once welcomed (nil: not in step).
    private var applied: UInt64?
    private var lastHello = ContinuousClock.now - .seconds(60)
    /// After `ship-resync`: no hello before this (a copy cannot be synced yet).
    private var quietUntil = ContinuousClock.now
    private var closed = false

    /// Opens `dataFolder` as a standby's copy (made if missing).
    public init(node: String, dataFolder: String, note: @escaping Note) throws {
        self.node = node
        self.note = note
        store = try TurnStore(directory: dataFolder, mode: .standby, createIfMissing: true)
        context = try ZMQContext()
    }

    deinit { close() }

    /// The copy's last revision and epoch.
    public var revision: UInt64 { store.lastRevision }
    public var epoch: UInt64 { store.epoch }

    /// Follows the leader at `leaderEndpoint` (nil or empty: none known):
    /// connects when it changes, says hello until welcomed, applies what
    /// came within `timeout`.
    public func pass(leaderEndpoint: String?, timeout: Duration) {
        let wanted = leaderEndpoint.flatMap { $0.isEmpty ? nil : $0 }
        if wanted != endpoint { connect(to: wanted) }
        guard let socket else {
            usleep(UInt32(max(0, timeout.components.seconds * 1_000_000 + timeout.components.attoseconds / 1_000_000_000_000)))
            return
        }
        if applied == nil, ContinuousClock.now >= quietUntil, ContinuousClock.now - lastHello >= .seconds(1) { hello() }
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
            if let acknowledge { _ = try socket.send([WireMessage.shipAck(node: node, sequence: acknowledge).encoded()], wait: false) }
        } catch {
            note("standby", "the connection to the leader failed: \(error); connecting again", true)
            connect(to: endpoint)
        }
    }

    /// Handles one message from the leader; returns the sequence to acknowledge, if any.
    private func take(_ message: WireMessage) -> UInt64? {
        switch message {
        case .shipWelcome(let leaderEpoch, let sequence):
            applied = sequence
            note("standby-in-step", "in step with the leader of epoch \(leaderEpoch) at revision \(store.lastRevision); applying what it ships", false)
            return nil
        case .ship(_, let sequence, let bytes):
            guard let last = applied else { return nil }
            guard sequence == last &+ 1 else {
                return outOfStep("commit \(sequence) came after \(last): one was lost on the way")
            }
            do {
                try store.apply(ShippedCommit.decode(bytes))
            } catch {
                return outOfStep("shipped commit \(sequence) was refused: \(error)")
            }
            applied = sequence
            return sequence
        case .shipResync(let leaderEpoch, let revision):
            applied = nil
            quietUntil = .now + .seconds(5)
            note(
                "standby-resync",
                "the leader of epoch \(leaderEpoch) says this copy (revision \(revision)) is not its log; this node cannot sync a copy yet "
                    + "(restore the leader's backup into its folder), and asks again in 5 s", true)
            return nil
        case .error(let error):
            applied = nil
            quietUntil = .now + .seconds(5)
            note("standby-refused", "the leader refused this standby: \(TerminalText.escaped(error.message))", true)
            return nil
        default:
            return nil
        }
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
        let message = WireMessage.standbyHello(
            node: node, logID: store.logID, epoch: store.epoch, revision: store.lastRevision, stateDigest: digest)
        _ = try? socket?.send([message.encoded()], wait: false)
    }

    private func connect(to wanted: String?) {
        socket?.close()
        socket = nil
        applied = nil
        endpoint = wanted
        guard let wanted else { return }
        do {
            let socket = try ZMQSocket(context, .dealer, linger: .zero)
            try socket.connect(wanted)
            self.socket = socket
            lastHello = .now - .seconds(60)
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
