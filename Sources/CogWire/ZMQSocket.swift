internal import CZMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Owns one ZeroMQ socket, closed exactly once (explicitly or in `deinit`).
///
/// - Important: a socket lives on one thread; do not share it. Linger is
///   bounded (100 ms by default), so closing never hangs on unsent messages.
public final class ZMQSocket {
    public enum Kind: Sendable {
        case router, dealer, publisher, subscriber, pair, reply

        var rawValue: Int32 {
            switch self {
            case .router: ZMQ_ROUTER
            case .dealer: ZMQ_DEALER
            case .publisher: ZMQ_PUB
            case .subscriber: ZMQ_SUB
            case .pair: ZMQ_PAIR
            case .reply: ZMQ_REP
            }
        }
    }

    public let kind: Kind
    let context: ZMQContext
    private var handle: UnsafeMutableRawPointer?

    public init(_ context: ZMQContext, _ kind: Kind, linger: Duration = .milliseconds(100)) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, kind.rawValue) else {
            throw ZMQError(operation: "zmq_socket(\(kind))")
        }
        self.context = context
        self.kind = kind
        self.handle = handle
        try setOption(ZMQ_LINGER, Int32(linger.components.seconds * 1_000 + linger.components.attoseconds / 1_000_000_000_000_000))
    }

    deinit { close() }

    /// Closes the socket; later calls do nothing.
    public func close() {
        guard let handle else { return }
        // A monitor (`HandshakeWatch`) stops first: ZeroMQ's I/O thread sends
        // the socket's events with a blocking send, and one sent while the
        // socket closes to a reader already gone would block that thread —
        // every connection of the context — for good.
        zmq_socket_monitor(handle, nil, 0)
        zmq_close(handle)
        self.handle = nil
    }

    /// Stops the socket's monitor, if any: no event is sent after this returns.
    func stopMonitor() {
        guard let handle else { return }
        zmq_socket_monitor(handle, nil, 0)
    }

    func live(_ operation: String) throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else {
            errno = ENOTSOCK
            throw ZMQError(operation: operation)
        }
        return handle
    }

    func setOption(_ option: Int32, _ value: Int32) throws(ZMQError) {
        var value = value
        let socket = try live("zmq_setsockopt")
        try zmqCall("zmq_setsockopt(\(option))") { zmq_setsockopt(socket, option, &value, MemoryLayout<Int32>.size) }
    }

    func setOption(_ option: Int32, _ value: Int64) throws(ZMQError) {
        var value = value
        let socket = try live("zmq_setsockopt")
        try zmqCall("zmq_setsockopt(\(option))") { zmq_setsockopt(socket, option, &value, MemoryLayout<Int64>.size) }
    }

    func setOption(_ option: Int32, bytes: [UInt8]) throws(ZMQError) {
        let socket = try live("zmq_setsockopt")
        try zmqCall("zmq_setsockopt(\(option))") {
            bytes.withUnsafeBytes { zmq_setsockopt(socket, option, $0.baseAddress, $0.count) }
        }
    }

    /// Sets the routing identity a ROUTER peer sees (before `connect`).
    /// How long closing waits to send what is queued (a goodbye sent just before).
    public func setLinger(_ linger: Duration) throws(ZMQError) {
        try setOption(ZMQ_LINGER, Int32(linger.components.seconds * 1_000 + linger.components.attoseconds / 1_000_000_000_000_000))
    }

    public func setIdentity(_ identity: String) throws(ZMQError) { try setOption(ZMQ_ROUTING_ID, bytes: Array(identity.utf8)) }
    /// Drops inbound messages larger than `bytes` (the peer is disconnected).
    public func setMaximumMessageSize(_ bytes: Int64) throws(ZMQError) { try setOption(ZMQ_MAXMSGSIZE, bytes) }
    /// High-water marks (messages queued per peer before dropping or blocking).
    public func setHighWaterMarks(send: Int32, receive: Int32) throws(ZMQError) {
        try setOption(ZMQ_SNDHWM, send)
        try setOption(ZMQ_RCVHWM, receive)
    }
    /// Reconnect backoff: first delay, then doubling up to the maximum.
    public func setReconnect(initial: Int32, maximum: Int32) throws(ZMQError) {
        try setOption(ZMQ_RECONNECT_IVL, initial)
        try setOption(ZMQ_RECONNECT_IVL_MAX, maximum)
    }
    /// Makes a ROUTER fail sends to unknown peers instead of dropping them silently.
    /// Which of the context's I/O threads serve this socket's connections
    /// (bit N: thread N); set before bind or connect.
    public func setIOThreads(_ mask: UInt64) throws(ZMQError) { try setOption(ZMQ_AFFINITY, Int64(bitPattern: mask)) }

    public func setRouterMandatory(_ on: Bool) throws(ZMQError) { try setOption(ZMQ_ROUTER_MANDATORY, Int32(on ? 1 : 0)) }
    /// Subscribes to every message (SUB sockets).
    public func subscribeToAll() throws(ZMQError) { try setOption(ZMQ_SUBSCRIBE, bytes: []) }

    public func bind(_ endpoint: String) throws(ZMQError) {
        let socket = try live("zmq_bind")
        try zmqCall("zmq_bind(\(endpoint))") { zmq_bind(socket, endpoint) }
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        let socket = try live("zmq_connect")
        try zmqCall("zmq_connect(\(endpoint))") { zmq_connect(socket, endpoint) }
    }

    /// Drops the connection to `endpoint` made by `connect`.
    public func disconnect(_ endpoint: String) throws(ZMQError) {
        let socket = try live("zmq_disconnect")
        try zmqCall("zmq_disconnect(\(endpoint))") { zmq_disconnect(socket, endpoint) }
    }

    /// The endpoint actually bound (after binding a wildcard port).
    public func lastEndpoint() throws(ZMQError) -> String {
        let socket = try live("zmq_getsockopt")
        var buffer = [CChar](repeating: 0, count: 256)
        var size = buffer.count
        try zmqCall("zmq_getsockopt(LAST_ENDPOINT)") { zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, &buffer, &size) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The socket's notification descriptor (`ZMQ_FD`): it becomes readable
    /// when the socket's events may have changed, so an event loop can wait
    /// on it and then receive until nothing is left (it is edge-like: read
    /// everything each time, and look again after sending).
    public func notificationDescriptor() throws(ZMQError) -> Int32 {
        let socket = try live("zmq_getsockopt")
        var descriptor: Int32 = -1
        var size = MemoryLayout<Int32>.size
        try zmqCall("zmq_getsockopt(FD)") { zmq_getsockopt(socket, ZMQ_FD, &descriptor, &size) }
        return descriptor
    }

    /// Sends one multipart message. Returns false when it would block (`DONTWAIT`).
    @discardableResult
    public func send(_ frames: [[UInt8]], wait: Bool = true) throws(ZMQError) -> Bool {
        let socket = try live("zmq_send")
        for (index, frame) in frames.enumerated() {
            var flags: Int32 = index < frames.count - 1 ? ZMQ_SNDMORE : 0
            if !wait { flags |= ZMQ_DONTWAIT }
            let sent = try zmqCall("zmq_send") {
                frame.withUnsafeBytes { zmq_send(socket, $0.baseAddress, $0.count, flags) }
            }
            if !sent { return false }
        }
        return true
    }

    /// Receives one multipart message; nil when none is waiting and `wait` is false.
    public func receive(wait: Bool = false) throws(ZMQError) -> [[UInt8]]? {
        var ignored: String?
        return try receive(wait: wait, userID: &ignored)
    }

    /// Receives one multipart message and the user id its connection was
    /// authenticated as (the ZAP handler's answer, `ZMQ_CURVE`: the peer's
    /// public key in Z85); `userID` is nil on a connection no ZAP handler
    /// answered.
    public func receive(wait: Bool = false, userID: inout String?) throws(ZMQError) -> [[UInt8]]? {
        var ignored: Int32 = -1
        return try receive(wait: wait, userID: &userID, source: &ignored)
    }

    /// `receive(wait:userID:)`, also giving the descriptor of the TCP
    /// connection the message came in on (`ZMQ_SRCFD`; -1 when ZeroMQ
    /// cannot say): what `InboundGuard` counts a connection's progress by.
    public func receive(wait: Bool = false, userID: inout String?, source: inout Int32) throws(ZMQError) -> [[UInt8]]? {
        let socket = try live("zmq_msg_recv")
        var frames: [[UInt8]] = []
        frames.reserveCapacity(2)  // a ROUTER's identity and one frame: most messages
        var message = zmq_msg_t()
        zmq_msg_init(&message)
        defer { zmq_msg_close(&message) }
        while true {
            let flags: Int32 = (wait || !frames.isEmpty) ? 0 : ZMQ_DONTWAIT
            let received = try zmqCall("zmq_msg_recv") { zmq_msg_recv(&message, socket, flags) }
            if !received { return nil }
            let size = zmq_msg_size(&message)
            frames.append(Array(UnsafeRawBufferPointer(start: zmq_msg_data(&message), count: size)))
            guard zmq_msg_more(&message) != 0 else {
                // The last frame came from the peer's connection (a ROUTER
                // makes the first itself): it carries the connection's metadata.
                userID = zmq_msg_gets(&message, "User-Id").map {
                    String(decoding: UnsafeRawBufferPointer(start: $0, count: strlen($0)), as: UTF8.self)
                }
                source = zmq_msg_get(&message, ZMQ_SRCFD)
                return frames
            }
        }
    }

    /// Waits up to `timeout` (nil: forever) for any of `sockets` to be readable;
    /// returns which are.
    public static func poll(_ sockets: [ZMQSocket], timeout: Duration?) throws(ZMQError) -> [Bool] {
        var items = [zmq_pollitem_t]()
        for socket in sockets {
            items.append(zmq_pollitem_t(socket: try socket.live("zmq_poll"), fd: 0, events: Int16(ZMQ_POLLIN), revents: 0))
        }
        let milliseconds = timeout.map { Int($0.components.seconds * 1_000 + $0.components.attoseconds / 1_000_000_000_000_000) } ?? -1
        let count = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), milliseconds) }
        if count < 0 {
            if zmq_errno() == EINTR { return sockets.map { _ in false } }
            throw ZMQError(operation: "zmq_poll")
        }
        return items.map { $0.revents & Int16(ZMQ_POLLIN) != 0 }
    }
}
