import CogProtocol
import CogWire
import Foundation

/// A standby's requests endpoint (ha.md §10): while another node leads, the
/// node listens where it will serve once it leads and answers every request
/// — a worker's hello or heartbeat, an op, a status request, a snapshot or
/// catch-up request — with `not-leader`, naming the node etcd says leads and
/// its epoch, so workers and tools that know several nodes go there at once
/// instead of waiting out a timeout. Nothing is run or kept.
///
/// Under CURVE it takes the leader's keys and peers file: only a listed key
/// is answered. Driven by the waiting command line, a bounded `pass` at a
/// time; closed (the endpoint freed) before the node binds it as the leader.
public final class StandbyDoor {
    private let context: ZMQContext
    private let router: ZMQSocket
    /// The node's turn stream endpoint, held while it stands by: a node
    /// that could not serve its turns does not campaign, win and exit.
    private var turns: ZMQSocket?
    private let zap: ZAPHandler?
    private var closed = false
    /// Requests answered `not-leader` so far (`cogd_ha_not_leader_answers_total`).
    public private(set) var answered: UInt64 = 0
    /// Frames that were not a cogwire message (answered `error`, as a leader would).
    public private(set) var malformed: UInt64 = 0

    /// Binds `endpoint` (the node's `--requests`), with CURVE when `authentication` is given.
    public init(endpoint: String, turnsEndpoint: String? = nil, authentication: Leader.Authentication?) throws {
        context = try ZMQContext()
        do {
            if let authentication {
                zap = try ZAPHandler(context: context, peers: try PeerTable.load(path: authentication.peersFile))
            } else {
                zap = nil
            }
        } catch {
            context.close()
            throw error
        }
        do {
            router = try ZMQSocket(context, .router, linger: .zero)
        } catch {
            zap?.stop()
            context.close()
            throw error
        }
        do {
            if let authentication {
                try router.makeCurveServer(secretKey: authentication.keyPair.secretKey, domain: ZAPHandler.requestsDomain)
            }
            try router.setMaximumMessageSize(Int64(WireMessage.maximumSize))
            try router.setHighWaterMarks(send: 1_000, receive: 64)
            try router.bind(endpoint)
            if let turnsEndpoint {
                turns = try Leader.turnStream(context, at: turnsEndpoint, ownIOThread: false, authentication: authentication)
            }
        } catch {
            turns?.close()
            router.close()
            zap?.stop()
            context.close()
            throw error
        }
    }

    deinit { close() }

    /// Answers what arrived within `timeout` (at most 256 requests a pass):
    /// `not-leader` naming `leader` (its requests endpoint, empty when no
    /// node leads) and `epoch`.
    public func pass(leader: String?, epoch: UInt64, timeout: Duration) {
        guard !closed else { return }
        do {
            guard try ZMQSocket.poll([router], timeout: timeout)[0] else { return }
            for _ in 0..<256 {
                guard let frames = try router.receive(), frames.count >= 2, let frame = frames.last else { break }
                let answer: WireMessage
                switch Result(catching: { () throws(WireDecodeError) in try WireMessage.decode(frame) }) {
                case .success(.goodbye):
                    continue  // Nothing to answer: the peer is leaving.
                case .success:
                    answered &+= 1
                    answer = .notLeader(leader: leader ?? "", epoch: leader == nil ? 0 : epoch)
                case .failure(let error):
                    malformed &+= 1
                    answer = .error(error.wireError)
                }
                // A peer gone or slow loses its answer; the door never waits on one.
                _ = try? router.send([frames[0], answer.encoded()], wait: false)
            }
        } catch {
            usleep(10_000)
        }
    }

    /// Frees the endpoint (before this node binds it as the leader).
    public func close() {
        guard !closed else { return }
        closed = true
        turns?.close()
        router.close()
        zap?.stop()
        context.close()
    }
}
