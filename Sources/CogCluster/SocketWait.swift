#if canImport(Glibc)
    import Glibc
#endif

/// Waits on one socket descriptor with `poll`, bounded by a deadline: the
/// non-blocking connects, sends and reads of the small TCP clients (etcd's
/// gateway, the greeting probe).
public enum SocketWait {
    /// Waits for `events` on `descriptor` until `deadline`; false when they
    /// do not come in time (or `poll` fails other than by `EINTR`).
    public static func ready(_ descriptor: Int32, for events: Int16, until deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            let milliseconds = Int32(clamping: left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            var poller = pollfd(fd: descriptor, events: events, revents: 0)
            let ready = poll(&poller, 1, milliseconds)
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { return false }
        }
    }
}
