import CogWire

/// A tool's socket connected to one of a leader's endpoints, with the
/// watch on its handshakes (`EndpointHandshake`): a subscriber (subscribed
/// to everything) for the turn stream, a dealer for the requests endpoint.
/// `tail --connect` holds one per node of a cluster, so a refused key or an
/// endpoint of the other kind is told apart per node: one socket connected
/// to every node would mix their handshake events.
///
/// - Important: `close()` it before its context closes (the watch first,
///   then the socket).
final class WatchedConnection {
    let endpoint: String
    let socket: ZMQSocket
    var handshakes: EndpointHandshake

    /// Connects to `endpoint` (a requests connection under `identity` when
    /// given); `timeout` is the tool's, which no probe of the endpoint outlasts.
    init(
        context: ZMQContext, endpoint: String, expected: EndpointHandshake.Expected, curve: CurveClientKeys?, timeout: Duration,
        identity: String? = nil
    ) throws {
        self.endpoint = endpoint
        socket = try ZMQSocket(context, expected == .turns ? .subscriber : .dealer, linger: .zero)
        if expected == .turns { try socket.subscribeToAll() }
        if let identity { try socket.setIdentity(identity) }
        try socket.useCurve(curve)
        // A leader that refuses this key says so in the handshake: watched before the socket connects.
        handshakes = try EndpointHandshake(socket, context: context, endpoint: endpoint, expected: expected, curve: curve, timeout: timeout)
        try socket.connect(endpoint)
    }

    /// Closes the watch, then the socket.
    func close() {
        handshakes.close()
        socket.close()
    }
}
