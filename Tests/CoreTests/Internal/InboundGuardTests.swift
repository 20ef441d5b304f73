import Foundation
import Testing

@testable import CogCluster

#if canImport(Glibc)
    import Glibc
#endif

/// The leader's guard against a message that never ends (cogwire §8), on a
/// real loopback TCP connection: it shuts such a connection down and counts
/// it once, however long ZeroMQ goes on listing it.
@Suite("The inbound guard")
struct InboundGuardTests {
    /// A loopback TCP connection: the accepted end (what the guard looks at) and the connecting end, both non-blocking.
    static func connection() throws -> (accepted: Int32, peer: Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound, "loopback listener: errno \(errno)")
        let peer = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(peer, $0, length) == 0 }
        }
        try #require(connected, "connect: errno \(errno)")
        let accepted = accept(listener, nil, nil)
        try #require(accepted >= 0, "accept: errno \(errno)")
        for descriptor in [accepted, peer] { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        return (accepted, peer)
    }

    @Test func `a connection past the limit is shut down and counted once, though it is still listed at the next looks`() throws {
        let (accepted, peer) = try Self.connection()
        defer {
            close(accepted)
            close(peer)
        }
        var inboundGuard = InboundGuard()
        // The peer sends 17 MiB that end no message; the accepted end reads and drops them, as ZeroMQ's I/O thread would hold them.
        let target = Int(InboundGuard.limit) + (1 << 20)
        let chunk = [UInt8](repeating: 0x5a, count: 1 << 16)
        var sink = [UInt8](repeating: 0, count: 1 << 16)
        var sent = 0
        var received = 0
        let deadline = ContinuousClock.now + .seconds(30)
        while received < target, ContinuousClock.now < deadline {
            if sent < target {
                let count = chunk.withUnsafeBytes { send(peer, $0.baseAddress, min(chunk.count, target - sent), Int32(MSG_NOSIGNAL)) }
                if count > 0 { sent += count }
            }
            let count = sink.withUnsafeMutableBytes { recv(accepted, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += count }
        }
        try #require(received >= target, "\(received) of \(target) bytes arrived")

        let first = inboundGuard.look(at: [accepted], now: .now)
        #expect(first.count == 1 && first.first?.descriptor == accepted)
        #expect((first.first?.unread ?? 0) > InboundGuard.limit)
        // ZeroMQ drops the connection a little later: until then it is listed, and not counted again.
        #expect(inboundGuard.look(at: [accepted], now: .now).isEmpty)
        #expect(inboundGuard.look(at: [accepted], now: .now).isEmpty)
        // The peer sees the connection end.
        var byte: UInt8 = 0
        var ended = false
        while !ended, ContinuousClock.now < deadline {
            let count = recv(peer, &byte, 1, 0)
            ended = count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            if !ended { usleep(1_000) }
        }
        #expect(ended)
    }
}
