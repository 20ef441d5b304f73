#if canImport(Glibc)
    import Glibc
#endif

/// Closes a connection that keeps sending without ever finishing a message
/// (`protocol/cogwire.md` §8).
///
/// ZeroMQ hands a multipart message over only once its last frame has come,
/// and limits each frame's size but not how many frames a message has: a
/// peer that sends frames and never the last one makes ZeroMQ hold them all,
/// out of the leader's sight, until the connection closes. What the leader
/// can see is each connection's TCP byte count (`TCP_INFO`) and which
/// connection each message it reads came from (`ZMQ_SRCFD`): a connection
/// that has received more than `limit` bytes since the leader last read a
/// message from it (or, one it never read from, since it connected) is
/// shut down, and ZeroMQ frees what it held. The peers this applies to
/// send one frame at a time: a worker or tool reconnects on its own and
/// retries what went unanswered; a turn-stream subscriber sends a few bytes
/// of subscription, ever.
struct InboundGuard {
    /// Bytes a connection may receive past the last message read from it.
    static let limit: UInt64 = 16 << 20
    /// How often the connections are looked at, at most: what arrives between
    /// two looks adds to the limit.
    static let interval: Duration = .milliseconds(10)
    /// How often while a connection has sent more than a quarter of the
    /// limit unread: it may be filling fast, and what arrives between two
    /// looks is held in memory.
    static let urgentInterval: Duration = .milliseconds(1)

    /// Per connection descriptor, its received byte count when the leader
    /// last read a message from it (0 for one it never read from: from its first byte).
    private var marks: [Int32: UInt64] = [:]
    /// Connections a message was read from since the last look.
    private var progressed: Set<Int32> = []
    /// Connections shut down here that ZeroMQ still lists (it drops one a
    /// little later): not looked at again while they close.
    private var shut: Set<Int32> = []
    private var lastLook = ContinuousClock.now
    /// Whether the last look saw a connection past a quarter of the limit.
    private(set) var urgent = false

    /// How long until the next look is due, at most (the serving loop's longest wait).
    var nextLookIn: Duration { urgent ? InboundGuard.urgentInterval : InboundGuard.interval }

    /// A whole message was read from connection `descriptor`.
    mutating func messageRead(from descriptor: Int32) {
        if descriptor >= 0 { progressed.insert(descriptor) }
    }

    /// Whether `interval` has passed since the last look.
    func isDue(_ now: ContinuousClock.Instant) -> Bool { now - lastLook >= nextLookIn }

    /// Looks at each of `open` (the connections the sockets have accepted and
    /// not lost): one past the limit is shut down and returned with how many
    /// bytes it had sent unread.
    mutating func look(at open: Set<Int32>, now: ContinuousClock.Instant) -> [(descriptor: Int32, unread: UInt64)] {
        lastLook = now
        defer { progressed = [] }
        marks = marks.filter { open.contains($0.key) }
        shut.formIntersection(open)
        var closed: [(Int32, UInt64)] = []
        urgent = false
        for descriptor in open {
            guard let (state, received) = InboundGuard.tcpInfo(descriptor) else { continue }
            if shut.contains(descriptor) {
                // Shut down at an earlier look and not dropped yet: counted once. Established
                // again, the number is a new connection's (ZeroMQ dropped the old one meanwhile).
                guard state == InboundGuard.established else { continue }
                shut.remove(descriptor)
            }
            // First seen (its connection is listed a little after it is made), one
            // that has sent no whole message yet counts from its first byte.
            let mark = marks[descriptor] ?? 0
            guard !progressed.contains(descriptor), received >= mark else {
                // A message since, or a new connection under a reused number: counts from here.
                marks[descriptor] = received
                continue
            }
            marks[descriptor] = mark
            if received - mark > InboundGuard.limit {
                // ZeroMQ's I/O thread owns the descriptor: shutting it down (never
                // closing it) makes ZeroMQ see the connection end and drop it.
                shutdown(descriptor, Int32(SHUT_RDWR))
                marks[descriptor] = nil
                shut.insert(descriptor)
                closed.append((descriptor, received - mark))
            } else if received - mark > InboundGuard.limit / 4 {
                urgent = true
            }
        }
        return closed
    }

    /// `tcpi_state` of a connection still open both ways.
    static let established: UInt8 = 1

    /// A TCP connection's state (`tcpi_state`) and the bytes it has received
    /// (`tcpi_bytes_received`, Linux 4.1 and later); nil when the descriptor
    /// is no TCP connection.
    static func tcpInfo(_ descriptor: Int32) -> (state: UInt8, received: UInt64)? {
        // `struct tcp_info` from <linux/tcp.h>: 232 bytes, the state at offset 0, the count at 128 (on the stack: this runs every 10 ms a connection).
        withUnsafeTemporaryAllocation(byteCount: 232, alignment: 8) { info in
            var length = socklen_t(info.count)
            guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, info.baseAddress, &length) == 0, length >= 136 else { return nil }
            return (info.load(fromByteOffset: 0, as: UInt8.self), info.loadUnaligned(fromByteOffset: 128, as: UInt64.self))
        }
    }
}
