internal import CZMQ
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Watches a socket's security handshakes (a ZeroMQ socket monitor), so a
/// client refused by the leader says why instead of waiting in silence
/// (ZeroMQ itself only reconnects and tries again), and the leader counts
/// the handshakes that fail on its sockets.
///
/// ```swift
/// let watch = try HandshakeWatch(socket)   // before connect
/// try socket.connect(endpoint)
/// if let problem = try watch.problem() { print(problem) }
/// ```
///
/// - Important: create it before `connect` (a handshake that fails first
///   is seen), on the socket's thread; `close()` it with the socket, before
///   the context closes (which waits for every socket). Read `problem()`
///   often (each pass of a loop): ZeroMQ's I/O thread sends the events with
///   a blocking send, so a monitor nobody reads would, once its queue is
///   full, stop every connection of the context. The queue holds
///   `queuedEvents`; closing the watch (or the socket) stops the monitor
///   before the reader goes.
public final class HandshakeWatch {
    /// Why a handshake failed.
    public enum Problem: Equatable, Sendable, CustomStringConvertible {
        /// The leader's ZAP handler refused this key (`status`: 400 unknown
        /// or not allowed on that socket, 300 a temporary failure).
        case refused(status: UInt32)
        /// The two sides use different security mechanisms: the leader
        /// uses CURVE and this side has no key, or the reverse.
        case mechanismMismatch
        /// Another protocol error (ZeroMQ's code).
        case protocolError(UInt32)
        /// The other end closed the connection during the handshake: it is
        /// not a cogd leader (anything that accepts a connection and closes
        /// it), or, under CURVE, the leader key given is not the leader's
        /// (or this side has no key).
        case noDetail(errno: UInt32)

        public var description: String {
            switch self {
            case .refused(let status):
                "the leader refused this key (ZAP status \(status)): it is not in the leader's peers file, or its role may not use this socket"
            case .mechanismMismatch:
                "the leader uses another security mechanism: it authenticates with CURVE and this side has no key (--key and --leader-key, or COGD_KEY and COGD_LEADER_KEY), or the reverse"
            case .protocolError(let code):
                "the security handshake with the leader failed (ZeroMQ protocol error 0x\(String(code, radix: 16)))"
            case .noDetail:
                "the other end closed the connection during the handshake: it is not a cogd leader, or it is one that authenticates "
                    + "with CURVE and the keys do not fit (no key given: --key and --leader-key; or a --leader-key that is not the leader's)"
            }
        }
    }

    private static let counter = Atomic<UInt64>(0)
    /// Events the monitor's queue holds before ZeroMQ's I/O thread waits for
    /// the reader (about 100 bytes each; ZeroMQ adds its own 1,000).
    public static let queuedEvents: Int32 = 100_000
    private let monitor: ZMQSocket
    /// The socket watched: its monitor stops when the watch closes.
    private weak var watched: ZMQSocket?
    /// Whether a handshake has succeeded since the watch began.
    public private(set) var succeeded = false
    /// How many handshakes have succeeded since the watch began (one more
    /// each time the socket connected again: a leader restarted).
    public private(set) var successes: UInt64 = 0
    /// Whether a connection this socket made was set up (TCP connected),
    /// whatever became of its handshake, since the watch began.
    public private(set) var connected = false
    /// Handshakes that failed before authentication could judge them
    /// (another mechanism, a key that does not fit, a garbled exchange), and
    /// those refused by the ZAP handler, since the watch began.
    public private(set) var failed: UInt64 = 0
    public private(set) var refused: UInt64 = 0
    /// Whether a connection was closed before any handshake succeeded
    /// (watched only with `disconnects`): the other end turned it away, with
    /// or without saying why.
    public private(set) var droppedBeforeHandshake = false
    /// The descriptors of the TCP connections the socket has accepted and
    /// not yet lost (watched only with `tracksConnections`: a listener's).
    public private(set) var connections: Set<Int32> = []
    private var lastProblem: Problem?

    /// Watches `socket`; with `disconnects`, also connections closed
    /// (`droppedBeforeHandshake`) — a tool's one connection, not a
    /// listener's many; with `tracksConnections`, the connections it accepts
    /// and loses (`connections`).
    public init(_ socket: ZMQSocket, disconnects: Bool = false, tracksConnections: Bool = false) throws(ZMQError) {
        let number = HandshakeWatch.counter.add(1, ordering: .relaxed).newValue
        let endpoint = "inproc://cogd-handshake-\(getpid())-\(number)"
        let handle = try socket.live("zmq_socket_monitor")
        let events =
            ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
            | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_CONNECTED
            | (disconnects || tracksConnections ? ZMQ_EVENT_DISCONNECTED : 0) | (tracksConnections ? ZMQ_EVENT_ACCEPTED : 0)
        try zmqCall("zmq_socket_monitor") { zmq_socket_monitor(handle, endpoint, events) }
        monitor = try ZMQSocket(socket.context, .pair, linger: .zero)
        try monitor.setOption(ZMQ_RCVHWM, HandshakeWatch.queuedEvents)
        try monitor.connect(endpoint)
        watched = socket
    }

    deinit { close() }

    /// Stops the watched socket's monitor and closes the reader (before the
    /// context closes; later calls do nothing). Stopping comes first: an
    /// event sent to a reader already closed would block ZeroMQ's I/O thread.
    public func close() {
        watched?.stopMonitor()
        watched = nil
        monitor.close()
    }

    /// Reads the events so far: the last failure when no handshake has
    /// succeeded since it (nil when none failed, or one succeeded after).
    public func problem() throws(ZMQError) -> Problem? {
        while let frames = try monitor.receive(), let event = frames.first, event.count >= 6 {
            let kind = Int32(UInt16(event[0]) | UInt16(event[1]) << 8)
            let value = UInt32(event[2]) | UInt32(event[3]) << 8 | UInt32(event[4]) << 16 | UInt32(event[5]) << 24
            switch kind {
            case ZMQ_EVENT_CONNECTED:
                connected = true
            case ZMQ_EVENT_ACCEPTED:
                connections.insert(Int32(bitPattern: value))
            case ZMQ_EVENT_DISCONNECTED:
                connections.remove(Int32(bitPattern: value))
                if !succeeded { droppedBeforeHandshake = true }
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
                succeeded = true
                successes &+= 1
                lastProblem = nil
            case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
                lastProblem = .refused(status: value)
                refused &+= 1
            case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
                lastProblem =
                    (UInt32(ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) == value) ? .mechanismMismatch : .protocolError(value)
                failed &+= 1
            case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                lastProblem = .noDetail(errno: value)
                failed &+= 1
            default:
                break
            }
        }
        return lastProblem
    }
}
