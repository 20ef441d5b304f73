import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A tool's watch on its connection to one of the leader's endpoints, which
/// tells a refused key from an endpoint of the other kind.
///
/// ZeroMQ closes a connection between sockets that do not belong together
/// (a requests client on the turn stream, a subscriber on the requests
/// endpoint) during the handshake, often without an event on this side, so
/// the same mistake would read as silence one run and as a refused key the
/// next. So a handshake that failed, or a connection accepted whose
/// handshake never succeeded by the timeout, is probed once: a short
/// connection of the other kind that completes its handshake shows which
/// endpoint it is. Only then is a failure put down to keys.
struct EndpointHandshake {
    /// The kind of endpoint the tool expects.
    enum Expected {
        /// The leader's requests endpoint (`--leader`, a ROUTER).
        case requests
        /// The leader's turn stream (`--connect`, a PUB).
        case turns
    }

    let watch: HandshakeWatch
    let endpoint: String
    let expected: Expected
    private let context: ZMQContext
    private let curve: CurveClientKeys?
    private var probed = false

    /// Watches `socket` (before it connects).
    init(_ socket: ZMQSocket, context: ZMQContext, endpoint: String, expected: Expected, curve: CurveClientKeys?) throws {
        watch = try HandshakeWatch(socket)
        self.context = context
        self.endpoint = endpoint
        self.expected = expected
        self.curve = curve
    }

    func close() { watch.close() }

    /// Whether a handshake has succeeded.
    var succeeded: Bool { watch.succeeded }

    /// Throws what a failed handshake means: `WrongEndpoint` when the
    /// endpoint is of the other kind, else `HandshakeRefused` — without
    /// keys, a connection closed in the handshake by a leader of the right
    /// kind means it wants keys (a keyless one would have let it in).
    mutating func check() throws {
        guard let problem = try watch.problem() else { return }
        switch problem {
        case .refused, .mechanismMismatch:
            throw ClusterCommands.HandshakeRefused(endpoint: endpoint, problem: problem, withoutKeys: curve == nil)
        case .noDetail, .protocolError:
            try checkKind()
            throw ClusterCommands.HandshakeRefused(endpoint: endpoint, problem: problem, withoutKeys: curve == nil)
        }
    }

    /// After a silent wait: throws `WrongEndpoint` when something accepted
    /// the connection, no handshake succeeded and the endpoint is of the
    /// other kind (nothing listening there costs no probe).
    mutating func checkSilence() throws {
        try check()
        if watch.connected && !watch.succeeded { try checkKind() }
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

    /// Probes once whether the endpoint is of the other kind.
    private mutating func checkKind() throws {
        guard !probed else { return }
        probed = true
        if try answersAsOtherKind() { throw WrongEndpoint(endpoint: endpoint, expected: expected) }
    }

    /// Whether a socket of the other kind completes its handshake within 2 s.
    private func answersAsOtherKind() throws -> Bool {
        try EndpointHandshake.answersAsOtherKind(endpoint, expected: expected, curve: curve, context: context)
    }

    /// Whether a socket of the other kind than `expected` completes its
    /// handshake at `endpoint` within 2 s: the endpoint is the leader's
    /// other one (`cogd worker`, which has no watch of this kind, asks once).
    static func answersAsOtherKind(_ endpoint: String, expected: Expected, curve: CurveClientKeys?, context: ZMQContext) throws -> Bool {
        let probe = try ZMQSocket(context, expected == .requests ? .subscriber : .dealer, linger: .zero)
        defer { probe.close() }
        try probe.useCurve(curve)
        let probeWatch = try HandshakeWatch(probe)
        defer { probeWatch.close() }
        try probe.connect(endpoint)
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            // A failed handshake (keys wanted, or the kind this side expected after all) ends the probe.
            if try probeWatch.problem() != nil { return false }
            if probeWatch.succeeded { return true }
            usleep(10_000)
        }
        return false
    }

    /// The endpoint given is the leader's other endpoint (exit 4, like no answer).
    struct WrongEndpoint: Error, CustomStringConvertible {
        let endpoint: String
        let expected: Expected

        var description: String {
            switch expected {
            case .requests:
                "\(endpoint) is a leader's turn stream, not its requests endpoint: "
                    + "--leader takes the requests endpoint (\(Command.defaultRequestsEndpoint) by default, the leader's --requests), "
                    + "not the turn stream"
            case .turns:
                "\(endpoint) is a leader's requests endpoint, not its turn stream: "
                    + "--connect takes the turn stream (\(Command.defaultTurnsEndpoint) by default, the leader's --turns), "
                    + "not the requests endpoint"
            }
        }
    }
}
