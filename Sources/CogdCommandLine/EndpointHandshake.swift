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
/// endpoint) during the handshake, or before it is even seen; without keys
/// that is never a key's fault. So a failed handshake without keys is
/// waited on, and a failed or silent one is probed once: a short connection
/// of the other kind that completes its handshake shows which endpoint it is.
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
    /// endpoint is of the other kind, `HandshakeRefused` when keys are in
    /// use and the leader refused them; nothing without keys (the failure
    /// is not about keys, and ZeroMQ tries again).
    mutating func check() throws {
        guard let problem = try watch.problem() else { return }
        switch problem {
        case .refused, .mechanismMismatch:
            throw ClusterCommands.HandshakeRefused(endpoint: endpoint, problem: problem)
        case .noDetail, .protocolError:
            try checkKind()
            if curve != nil { throw ClusterCommands.HandshakeRefused(endpoint: endpoint, problem: problem) }
        }
    }

    /// After a silent wait: throws `WrongEndpoint` when no handshake
    /// succeeded and the endpoint is of the other kind.
    mutating func checkSilence() throws {
        try check()
        if !watch.succeeded { try checkKind() }
    }

    /// Probes once whether the endpoint is of the other kind.
    private mutating func checkKind() throws {
        guard !probed else { return }
        probed = true
        if try answersAsOtherKind() { throw WrongEndpoint(endpoint: endpoint, expected: expected) }
    }

    /// Whether a socket of the other kind completes its handshake within a second.
    private func answersAsOtherKind() throws -> Bool {
        let probe = try ZMQSocket(context, expected == .requests ? .subscriber : .dealer, linger: .zero)
        defer { probe.close() }
        try probe.useCurve(curve)
        let probeWatch = try HandshakeWatch(probe)
        defer { probeWatch.close() }
        try probe.connect(endpoint)
        let deadline = ContinuousClock.now + .seconds(1)
        while ContinuousClock.now < deadline {
            _ = try probeWatch.problem()
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
