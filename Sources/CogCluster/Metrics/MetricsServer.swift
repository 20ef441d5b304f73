import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The small HTTP/1.1 server behind `--metrics HOST:PORT`: `GET /metrics`
/// (Prometheus text format 0.0.4), `GET /healthz`, `GET /readyz`
/// (`protocol/metrics.md`). It is a trust boundary and bounded as one:
/// one thread, at most `maximumConnections` open at once (more are
/// answered 503 and closed), a request head of at most `maximumHeadBytes`
/// with its closing blank line (431 past it, however the bytes arrive), `readTimeout` for the whole head (408), one request per
/// connection (`Connection: close`), a body never read. Nothing it is sent
/// is printed or kept.
public final class MetricsServer: Sendable {
    public static let maximumConnections = 16
    public static let maximumHeadBytes = 8_192
    public static let readTimeout: Duration = .seconds(5)
    /// How long a reply may take to be read before the connection is dropped.
    public static let writeTimeout: Duration = .seconds(10)
    /// The serving loop must have gone round this recently for `/healthz` to say 200.
    public static let stallLimit: Double = 30

    /// The address it listens on, the port resolved (`HOST:PORT`).
    public let boundAddress: String
    private let listener: Int32
    private let board: MetricsBoard
    private let stopped = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let counters = Mutex(Counters())

    struct Counters {
        var byStatus: [Int: UInt64] = [:]
    }

    /// Replies sent, by HTTP status (also on `/metrics` as `cogd_metrics_http_responses_total`).
    public var responsesByStatus: [Int: UInt64] { counters.withLock { $0.byStatus } }

    public struct AddressError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Binds `address` (`HOST:PORT`, `[IPv6]:PORT`; port 0 picks a free
    /// one) and starts serving `board` on a thread of its own.
    public init(address: String, board: MetricsBoard) throws(AddressError) {
        self.board = board
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw AddressError(description: "--metrics takes HOST:PORT (like 127.0.0.1:9464), not '\(address)'")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { host = "0.0.0.0" }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let info = found else {
            throw AddressError(description: "--metrics: cannot resolve '\(host)': \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw AddressError(description: "--metrics: socket(): \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0, listen(fd, 64) == 0 else {
            let cause = String(cString: strerror(errno))
            close(fd)
            throw AddressError(description: "--metrics: cannot listen on \(address): \(cause)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let boundPort = withUnsafeMutablePointer(to: &storage) { pointer -> UInt16 in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
            if Int32(pointer.pointee.ss_family) == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        listener = fd
        boundAddress = (host.contains(":") ? "[\(host)]" : host) + ":\(boundPort)"
        let thread = Thread { [self] in serve() }
        thread.name = "cogd-metrics"
        thread.start()
    }

    /// Stops serving and closes the listener (waits up to a second for the thread).
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        let deadline = ContinuousClock.now + .seconds(1)
        while !finished.load(ordering: .relaxed) && ContinuousClock.now < deadline { usleep(5_000) }
    }

    /// One connection: what it sent so far, then what it is owed.
    private struct Connection {
        let fd: Int32
        var head: [UInt8] = []
        var reply: [UInt8]?
        var sent = 0
        var deadline: ContinuousClock.Instant
    }

    private func serve() {
        var connections: [Connection] = []
        defer {
            for connection in connections { close(connection.fd) }
            close(listener)
            finished.store(true, ordering: .relaxed)
        }
        while !stopped.load(ordering: .relaxed) {
            var polled = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            for connection in connections {
                polled.append(pollfd(fd: connection.fd, events: Int16(connection.reply == nil ? POLLIN : POLLOUT), revents: 0))
            }
            _ = poll(&polled, nfds_t(polled.count), 100)
            let now = ContinuousClock.now
            var kept: [Connection] = []
            for (index, var connection) in connections.enumerated() {
                let events = polled[index + 1].revents
                if events != 0 { advance(&connection) }
                if connection.reply != nil && connection.sent == connection.reply!.count {
                    close(connection.fd)
                } else if now > connection.deadline {
                    if connection.reply == nil {
                        // Too slow to send its request: told so, in one try, and dropped.
                        let reply = response(408, "request head not received within \(Int(MetricsServer.readTimeout.components.seconds)) s\n")
                        _ = reply.withUnsafeBytes { send(connection.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    }
                    close(connection.fd)
                } else if connection.fd >= 0 {
                    kept.append(connection)
                }
            }
            connections = kept
            if polled[0].revents != 0 { acceptWaiting(into: &connections) }
        }
    }

    private func acceptWaiting(into connections: inout [Connection]) {
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            guard connections.count < MetricsServer.maximumConnections else {
                let reply = response(503, "too many connections (at most \(MetricsServer.maximumConnections))\n")
                _ = reply.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
                continue
            }
            connections.append(Connection(fd: fd, deadline: .now + MetricsServer.readTimeout))
        }
    }

    /// Reads what arrived (answering once the head is whole or too long),
    /// or sends what is owed.
    private func advance(_ connection: inout Connection) {
        if connection.reply == nil {
            var chunk = [UInt8](repeating: 0, count: 4_096)
            while connection.reply == nil {
                let read = chunk.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
                if read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    connection.reply = []  // gone before asking: nothing owed
                    return
                }
                guard read > 0 else { break }
                connection.head += chunk[0..<read]
                // The limit holds wherever the head ends: a read may bring a
                // whole head longer than the limit (its blank line included).
                let end = MetricsServer.headEnd(connection.head)
                if (end ?? connection.head.count) > MetricsServer.maximumHeadBytes {
                    connection.reply = response(431, "request head over \(MetricsServer.maximumHeadBytes) bytes\n")
                } else if let end {
                    connection.reply = answer(head: Array(connection.head[..<end]))
                }
            }
            guard connection.reply != nil else { return }
            connection.head = []
            connection.deadline = .now + MetricsServer.writeTimeout
        }
        guard let reply = connection.reply else { return }
        while connection.sent < reply.count {
            let sent = reply.withUnsafeBytes {
                send(connection.fd, $0.baseAddress! + connection.sent, $0.count - connection.sent, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                connection.sent += sent
            } else if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                return
            } else {
                connection.sent = reply.count  // the peer is gone
            }
        }
    }

    /// Where the head ends (past its blank line), if it has.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index + 4
        }
        return nil
    }

    /// The reply to a whole request head.
    private func answer(head: [UInt8]) -> [UInt8] {
        guard let lineEnd = head.firstIndex(of: 13), let line = String(validating: head[..<lineEnd], as: UTF8.self) else {
            return response(400, "malformed request line\n")
        }
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0", parts[1].hasPrefix("/"),
            !parts[0].isEmpty, parts[0].allSatisfy({ $0.isLetter && $0.isUppercase })
        else {
            return response(400, "malformed request line (expected METHOD /PATH HTTP/1.1)\n")
        }
        let method = parts[0]
        let path = parts[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard ["/metrics", "/healthz", "/readyz"].contains(path) else {
            return response(404, "not found: this server serves /metrics, /healthz and /readyz\n", head: method == "HEAD")
        }
        guard method == "GET" || method == "HEAD" else {
            return response(405, "method not allowed: GET or HEAD\n", extra: "Allow: GET, HEAD\r\n")
        }
        let headOnly = method == "HEAD"
        switch path {
        case "/metrics":
            var families = board.scrape()
            families.append(requestsFamily())
            return response(
                200, MetricFamily.exposition(families), contentType: "text/plain; version=0.0.4; charset=utf-8", head: headOnly)
        case "/healthz":
            let stalled = board.secondsSincePass
            guard stalled < MetricsServer.stallLimit else {
                return response(503, "stalled: the serving loop has not gone round for \(Int(stalled)) s\n", head: headOnly)
            }
            return response(200, "ok\n", head: headOnly)
        default:
            let (ready, reason) = board.readiness
            return response(ready ? 200 : 503, (ready ? "ready: " : "not ready: ") + reason + "\n", head: headOnly)
        }
    }

    private func requestsFamily() -> MetricFamily {
        let byStatus = counters.withLock { $0.byStatus }
        return .labelled(
            "cogd_metrics_http_responses_total", .counter, help: "Replies of this metrics server, by HTTP status (this scrape's not yet counted).",
            label: "code", byStatus.sorted { $0.key < $1.key }.map { (String($0.key), Double($0.value)) })
    }

    private func response(_ status: Int, _ body: String, contentType: String = "text/plain; charset=utf-8", extra: String = "", head: Bool = false)
        -> [UInt8]
    {
        counters.withLock { $0.byStatus[status, default: 0] += 1 }
        let reasons = [
            200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            431: "Request Header Fields Too Large", 503: "Service Unavailable",
        ]
        let bodyBytes = Array(body.utf8)
        let headText =
            "HTTP/1.1 \(status) \(reasons[status] ?? "Error")\r\nContent-Type: \(contentType)\r\nContent-Length: \(bodyBytes.count)\r\n"
            + "Connection: close\r\n\(extra)\r\n"
        return Array(headText.utf8) + (head ? [] : bodyBytes)
    }
}
