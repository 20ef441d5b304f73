import Cog
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A tool's watch on its connection to one of the leader's endpoints, which
/// tells a refused key from an endpoint of the other kind, and from
/// something that is not a leader at all.
///
/// ZeroMQ closes a connection between sockets that do not belong together
/// (a requests client on the turn stream, a subscriber on the requests
/// endpoint) during the handshake, often without an event on this side, so
/// the same mistake would read as silence one run and as a refused key the
/// next. So as soon as a connection fails its handshake, is closed before
/// one, or stays without one for `probeAfter`, a short connection of the
/// other kind is tried beside it: one that completes its handshake shows
/// which endpoint it is. The probe runs while the tool waits, and never
/// past the tool's `--timeout` from the start: the tool ends within it,
/// whatever answers. Only then is a failure put down to keys.
struct EndpointHandshake {
    /// The kind of endpoint the tool expects.
    enum Expected {
        /// The leader's requests endpoint (`--leader`, a ROUTER).
        case requests
        /// The leader's turn stream (`--connect`, a PUB).
        case turns
    }

    /// How long a connection may stay without a handshake before the probe starts.
    static let probeAfter: Duration = .milliseconds(300)
    /// How long a probe may take (less when the tool's timeout ends first).
    static let probeLimit: Duration = .seconds(2)

    let watch: HandshakeWatch
    let endpoint: String
    let expected: Expected
    private let context: ZMQContext
    private let curve: CurveClientKeys?
    /// The tool's `--timeout`, and that from the start: no probe waits past it.
    private let timeout: Duration
    private let deadline: ContinuousClock.Instant
    private var probe: Probe?
    /// What the greeting probe saw (run once, when a handshake is unclear).
    private var greeting: GreetingProbe.Peer??
    /// When this side first saw the connection set up.
    private var connectedAt: ContinuousClock.Instant?

    /// A socket of the other kind, connected to the endpoint.
    private final class Probe {
        let socket: ZMQSocket
        let watch: HandshakeWatch
        let started = ContinuousClock.now
        /// true: it completed its handshake (the endpoint is of the other kind); false: it failed; nil: undecided.
        var verdict: Bool?

        init(_ endpoint: String, expected: Expected, curve: CurveClientKeys?, context: ZMQContext) throws {
            socket = try ZMQSocket(context, expected == .requests ? .subscriber : .dealer, linger: .zero)
            try socket.useCurve(curve)
            watch = try HandshakeWatch(socket, disconnects: true)
            try socket.connect(endpoint)
        }

        /// Reads its events; its verdict once there is one.
        func poll() throws -> Bool? {
            guard verdict == nil else { return verdict }
            // A failed handshake (keys wanted, or the kind the tool expected after all) ends the probe.
            if try watch.problem() != nil || watch.droppedBeforeHandshake { verdict = false }
            if watch.succeeded { verdict = true }
            return verdict
        }

        func close() {
            watch.close()
            socket.close()
        }
    }

    /// Watches `socket` (before it connects); `timeout` is the tool's.
    init(
        _ socket: ZMQSocket, context: ZMQContext, endpoint: String, expected: Expected, curve: CurveClientKeys?,
        timeout: Duration = EndpointHandshake.probeLimit
    ) throws {
        watch = try HandshakeWatch(socket, disconnects: true)
        self.context = context
        self.endpoint = endpoint
        self.expected = expected
        self.curve = curve
        self.timeout = timeout
        deadline = .now + timeout
    }

    func close() {
        probe?.close()
        watch.close()
    }

    /// Whether a handshake has succeeded.
    var succeeded: Bool { watch.succeeded }
    /// How many handshakes have succeeded (read by `check`).
    var successes: UInt64 { watch.successes }

    /// Throws what a failed handshake means: `WrongEndpoint` when the
    /// endpoint is of the other kind, else `HandshakeRefused` — without
    /// keys, a connection closed in the handshake by a leader of the right
    /// kind means it wants keys (a keyless one would have let it in).
    mutating func check() throws {
        let problem = try watch.problem()
        if watch.connected && connectedAt == nil { connectedAt = .now }
        if !watch.succeeded {
            // A refused key or another mechanism says all there is: no probe.
            let unclear: Bool?
            switch problem {
            case .noDetail?, .protocolError?: unclear = true
            case nil: unclear = false
            default: unclear = nil
            }
            let waiting = connectedAt.map { ContinuousClock.now - $0 >= EndpointHandshake.probeAfter } ?? false
            if let unclear, probe == nil && (unclear || watch.droppedBeforeHandshake || waiting) {
                probe = try Probe(endpoint, expected: expected, curve: curve, context: context)
                // No ZeroMQ greeting at all: not a leader, whatever the keys.
                if let peer = greetingPeer(), peer == .closedSilently || peer == .notZeroMQ {
                    throw NotALeader(endpoint: endpoint, expected: expected, peer: peer, waited: nil)
                }
            }
        }
        if try probe?.poll() == true { throw WrongEndpoint(endpoint: endpoint, expected: expected) }
        guard let problem else { return }
        switch problem {
        case .refused, .mechanismMismatch:
            throw ClusterCommands.HandshakeRefused(endpoint: endpoint, problem: problem, withoutKeys: curve == nil)
        case .noDetail, .protocolError:
            try awaitProbe()
            // A ZeroMQ socket that offers CURVE, met without a key, is a mismatch of mechanisms whichever way ZeroMQ reported it.
            if case .zeroMQ("CURVE")? = greetingPeer(), curve == nil {
                throw ClusterCommands.HandshakeRefused(endpoint: endpoint, problem: .mechanismMismatch, withoutKeys: true)
            }
            throw ClusterCommands.HandshakeRefused(endpoint: endpoint, problem: problem, withoutKeys: curve == nil, peer: greetingPeer())
        }
    }

    /// What answers at the endpoint, from its ZeroMQ greeting (asked once,
    /// within a second and the tool's timeout while that is ahead).
    private mutating func greetingPeer() -> GreetingProbe.Peer? {
        if let greeting { return greeting }
        let left = deadline - ContinuousClock.now
        let peer = GreetingProbe.peer(at: endpoint, within: left > .zero ? min(left, .seconds(1)) : .seconds(1))
        greeting = .some(peer)
        return peer
    }

    /// After a silent wait (the tool's timeout): throws `WrongEndpoint` when
    /// something accepted the connection, no handshake succeeded and the
    /// endpoint is of the other kind, `NotALeader` when it is not
    /// (nothing listening there: nothing thrown).
    mutating func checkSilence() throws {
        try check()
        guard watch.connected && !watch.succeeded else { return }
        // The tool's time is up: the probe gets only a moment more.
        try awaitProbe(until: max(deadline, .now) + .milliseconds(50))
        throw NotALeader(endpoint: endpoint, expected: expected, peer: greeting ?? nil, waited: timeout)
    }

    /// Waits for the probe's verdict (throwing `WrongEndpoint` when it
    /// completes its handshake): at most `probeLimit` from its start, and
    /// until the tool's deadline while that is ahead.
    private func awaitProbe(until end: ContinuousClock.Instant? = nil) throws {
        guard let probe else { return }
        var limit = probe.started + EndpointHandshake.probeLimit
        if ContinuousClock.now < deadline { limit = min(limit, deadline) }
        if let end { limit = min(limit, end) }
        while try probe.poll() == nil && ContinuousClock.now < limit { usleep(10_000) }
        if probe.verdict == true { throw WrongEndpoint(endpoint: endpoint, expected: expected) }
    }

    /// Sends `frame` on the watched `socket` within `timeout`; false when
    /// it could not be queued by then. A DEALER has nowhere to queue while
    /// its only connection is being torn down after a failed handshake, and
    /// a blocking send would then wait for good: this one gives up, saying
    /// first what the handshake showed (`check`, `checkSilence`).
    mutating func send(_ frame: [UInt8], on socket: ZMQSocket, within timeout: Duration) throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try socket.send([frame], wait: false) { return true }
            try check()
            guard ContinuousClock.now < deadline else {
                try checkSilence()
                return false
            }
            usleep(10_000)
        }
    }

    /// Whether a socket of the other kind than `expected` completes its
    /// handshake at `endpoint` within 2 s: the endpoint is the leader's
    /// other one (`cogd worker`, which has no watch of this kind, asks once).
    static func answersAsOtherKind(_ endpoint: String, expected: Expected, curve: CurveClientKeys?, context: ZMQContext) throws -> Bool {
        let probe = try Probe(endpoint, expected: expected, curve: curve, context: context)
        defer { probe.close() }
        let deadline = ContinuousClock.now + probeLimit
        while try probe.poll() == nil && ContinuousClock.now < deadline { usleep(10_000) }
        return probe.verdict == true
    }

    /// Something accepted the connection and is not a cogd leader: it sent
    /// no ZeroMQ greeting, or completed no handshake by the timeout (exit 4,
    /// like no answer).
    struct NotALeader: Error, CustomStringConvertible {
        let endpoint: String
        let expected: Expected
        /// What its greeting showed (nil: nothing could be told).
        let peer: GreetingProbe.Peer?
        /// How long the tool waited for a handshake (nil: it did not wait for its timeout).
        let waited: Duration?

        var description: String {
            let wanted =
                expected == .requests
                ? "a cogd leader's requests endpoint (its --requests, \(Command.defaultRequestsEndpoint) by default)"
                : "a cogd leader's turn stream (its --turns, \(Command.defaultTurnsEndpoint) by default)"
            let something = "something at \(TerminalText.escaped(endpoint))"
            switch peer {
            case .closedSilently?:
                return "\(something) accepted the connection and closed it without a ZeroMQ greeting: it is not \(wanted)"
            case .notZeroMQ?:
                return "\(something) answers, but not with a ZeroMQ greeting: it is not \(wanted) — another service "
                    + "(an HTTP port, such as a --metrics one?)"
            default:
                let seconds = waited.map { " within \(Command.secondsText($0)) s" } ?? ""
                // A stopped (SIGSTOP) or wedged leader's kernel still accepts: both readings are named.
                return "\(something) accepted the connection but completed no ZeroMQ handshake\(seconds): it is not \(wanted) — "
                    + "another service (an HTTP port, such as a --metrics one?) — or a leader that is stopped or stalled"
            }
        }
    }

    /// The endpoint given is the leader's other endpoint (exit 4, like no answer).
    struct WrongEndpoint: Error, CustomStringConvertible {
        let endpoint: String
        let expected: Expected
        /// Where the requests endpoint came from: `--leader`, or `COGD_LEADER` when no `--leader` was given.
        var source = "--leader"

        /// The error, naming `source` as where the requests endpoint came from.
        func from(_ source: String) -> WrongEndpoint {
            var named = self
            named.source = source
            return named
        }

        var description: String {
            switch expected {
            case .requests:
                "\(endpoint) is a leader's turn stream, not its requests endpoint: "
                    + "\(source) takes the requests endpoint (\(Command.defaultRequestsEndpoint) by default, the leader's --requests), "
                    + "not the turn stream"
            case .turns:
                "\(endpoint) is a leader's requests endpoint, not its turn stream: "
                    + "--connect takes the turn stream (\(Command.defaultTurnsEndpoint) by default, the leader's --turns), "
                    + "not the requests endpoint"
            }
        }
    }
}
