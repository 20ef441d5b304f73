import CogProtocol
import CogWire
import Foundation
import Synchronization

/// The leader's ZAP handler (ZeroMQ RFC 27): judges each CURVE connection
/// to the requests socket and the turn stream against the peers file, on a
/// thread of its own, so a handshake never waits on a batch.
///
/// Under domain `requests` any key in the table is accepted; under `turns`,
/// a key whose role may read the stream (`worker`, `observer`). Everything
/// else — an unknown key, another mechanism, another domain — is answered
/// 400, and the client's handshake fails with that status. An accepted
/// connection's user id is its public key, which every message from it
/// carries (`ZMQSocket.receive(userID:)`): the leader decides by that key,
/// never by what a frame claims.
///
/// - Important: start it before binding a CURVE socket in the same context:
///   with no handler bound, ZeroMQ accepts any client that knows the
///   server's public key. Call `stop()` before closing the context.
public final class ZAPHandler: Sendable {
    /// The ZAP domains the leader's two sockets use.
    public static let requestsDomain = "requests"
    public static let turnsDomain = "turns"

    private let table: Mutex<PeerTable>
    private let stopped = Atomic<Bool>(false)
    private let refusals = Atomic<UInt64>(0)
    private let finished = DispatchSemaphore(value: 0)

    /// Binds `inproc://zeromq.zap.01` in `context` and starts answering.
    public init(context: ZMQContext, peers: PeerTable) throws(ZMQError) {
        table = Mutex(peers)
        let socket = try ZMQSocket(context, .reply, linger: .zero)
        try socket.bind("inproc://zeromq.zap.01")
        // The socket moves to the handler's thread here and is used only there.
        let handed = HandedSocket(socket: socket)
        let thread = Thread { [self] in
            serve(handed.socket)
            handed.socket.close()
            finished.signal()
        }
        thread.name = "cogd-zap"
        thread.start()
    }

    /// Replaces the table (a reloaded peers file): later handshakes are judged by it.
    public func replace(_ peers: PeerTable) { table.withLock { $0 = peers } }

    /// Handshakes refused so far.
    public var refused: UInt64 { refusals.load(ordering: .relaxed) }

    /// Stops the thread and closes its socket (returns once it has).
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }

    private func serve(_ socket: ZMQSocket) {
        while !stopped.load(ordering: .relaxed) {
            do {
                guard try ZMQSocket.poll([socket], timeout: .milliseconds(100))[0], let request = try socket.receive() else { continue }
                try socket.send(answer(request))
            } catch {
                if error.isTerminated { return }
            }
        }
    }

    /// The reply to one ZAP request: version, request id, status code,
    /// status text, user id, metadata (RFC 27).
    func answer(_ request: [[UInt8]]) -> [[UInt8]] {
        func reply(_ status: String, _ text: String, user: String = "") -> [[UInt8]] {
            if status != "200" { refusals.add(1, ordering: .relaxed) }
            return [Array("1.0".utf8), request.count > 1 ? request[1] : [], Array(status.utf8), Array(text.utf8), Array(user.utf8), []]
        }
        // version, request id, domain, address, routing id, mechanism, credentials…
        guard request.count >= 7, request[0] == Array("1.0".utf8) else { return reply("400", "malformed ZAP request") }
        guard request[5] == Array("CURVE".utf8), request[6].count == 32 else { return reply("400", "only CURVE is accepted") }
        let key = CurveKeyPair.z85(request[6])
        let domain = String(decoding: request[2], as: UTF8.self)
        guard let peer = table.withLock({ $0[key] }) else { return reply("400", "key not in the peers file") }
        switch domain {
        case ZAPHandler.requestsDomain: return reply("200", "OK", user: key)
        case ZAPHandler.turnsDomain where peer.mayReadTurns: return reply("200", "OK", user: key)
        case ZAPHandler.turnsDomain: return reply("400", "role \(peer.role.rawValue) may not read the turn stream")
        default: return reply("400", "unknown domain")
        }
    }
}

private struct HandedSocket: @unchecked Sendable {
    let socket: ZMQSocket
}
