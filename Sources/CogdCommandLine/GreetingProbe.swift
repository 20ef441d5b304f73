import Foundation
import CogCluster

#if canImport(Glibc)
    import Glibc
#endif

/// What answers at a `tcp://` endpoint, read from the first bytes of the
/// ZeroMQ greeting (ZMTP 3, rfc.zeromq.org/spec/23): a tool that saw its
/// connection closed or left without a handshake tells a service that is
/// not ZeroMQ at all from a ZeroMQ socket that uses CURVE. One plain TCP
/// connection sends the greeting's signature and major version (11 bytes)
/// and reads at most 64 bytes back, bounded by a time limit.
enum GreetingProbe {
    enum Peer: Equatable {
        /// A ZeroMQ socket whose greeting names `mechanism` (`NULL`, `CURVE`, `PLAIN`).
        case zeroMQ(mechanism: String)
        /// It closed the connection before sending a byte.
        case closedSilently
        /// It sent bytes that are not a ZeroMQ greeting (an HTTP server answers a request it cannot read, for one).
        case notZeroMQ
    }

    /// The greeting this side sends: signature, version 3.0, mechanism `NULL`, not a server.
    static let greeting: [UInt8] = [0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0] + Array("NULL".utf8) + [UInt8](repeating: 0, count: 16)
        + [0] + [UInt8](repeating: 0, count: 31)

    /// What answers at `endpoint` within `limit`; nil when it cannot be
    /// told (not `tcp://`, nothing listening, or too slow to say).
    static func peer(at endpoint: String, within limit: Duration) -> Peer? {
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") else { return nil }
        var host = String(endpoint[endpoint.index(endpoint.startIndex, offsetBy: 6)..<colon])
        let port = String(endpoint[endpoint.index(after: colon)...])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "*" { host = "127.0.0.1" }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, port, &hints, &found) == 0, let address = found else { return nil }
        defer { freeaddrinfo(found) }
        let descriptor = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        let deadline = ContinuousClock.now + limit
        // Non-blocking connect and reads, each wait bounded by what is left of the limit.
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        if connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) != 0 {
            guard errno == EINPROGRESS, SocketWait.ready(descriptor, for: Int16(POLLOUT), until: deadline) else { return nil }
            var failure: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &failure, &length) == 0, failure == 0 else { return nil }
        }
        // As ZeroMQ itself does: the signature, then (once the peer's came) the major version, which
        // makes a ZeroMQ peer send the rest of its greeting, mechanism included. Nothing more is sent,
        // so the peer never judges a mechanism of this side's. A peer that closes at once may refuse
        // the bytes (EPIPE, no SIGPIPE): what it sent, if anything, still tells.
        func say(_ bytes: ArraySlice<UInt8>) { _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
        say(greeting[0..<10])
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while received.count < 32 {
            guard SocketWait.ready(descriptor, for: Int16(POLLIN), until: deadline) else { break }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, 64 - received.count, 0) }
            if count <= 0 { return received.isEmpty && (count == 0 || errno == ECONNRESET) ? .closedSilently : classify(received) }
            let before = received.count
            received += buffer[0..<count]
            if received.first != 0xFF || (received.count >= 10 && received[9] != 0x7F) { return .notZeroMQ }
            if before < 10 && received.count >= 10 { say(greeting[10..<11]) }
        }
        return classify(received)
    }

    /// What the bytes read show; nil when too few to tell.
    private static func classify(_ bytes: [UInt8]) -> Peer? {
        guard let first = bytes.first else { return nil }
        guard first == 0xFF, bytes.count < 10 || bytes[9] == 0x7F else { return .notZeroMQ }
        guard bytes.count >= 32 else { return nil }
        let mechanism = bytes[12..<32].prefix { $0 != 0 }
        return .zeroMQ(mechanism: String(decoding: mechanism, as: UTF8.self))
    }

}
