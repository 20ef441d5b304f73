import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback TCP relay between one worker and the leader's requests socket
/// that a drill can cut: while cut it moves no byte either way and the
/// connections stay open, as across a network partition (what was sent
/// waits in the kernel's buffers, or is held here), then it carries on.
/// A worker given the relay's endpoint as `--leader` hears nothing from
/// the leader while cut, and the leader nothing from it; the turn stream
/// (whose endpoint the welcome names) is not relayed.
///
/// One thread polls the listening socket and every pair; each pair holds
/// at most `bufferLimit` bytes a way that its receiver has not taken yet,
/// and reads no more from the sender until it has (TCP's own back-pressure).
final class LinkRelay: Sendable {
    /// What the worker connects to: `tcp://127.0.0.1:PORT`.
    let endpoint: String
    private let state: Mutex<State>
    private let listener: Int32
    private let targetPort: Int
    /// Bytes held a way, at most.
    static let bufferLimit = 1 << 20

    private struct State: Sendable {
        var cutUntil: ContinuousClock.Instant?
        var stopped = false
        var cuts = 0
    }

    /// Listens on 127.0.0.1:`port` and relays to 127.0.0.1:`targetPort`.
    init(port: Int, targetPort: Int) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw LabError(message: "cannot make a socket for the link relay: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = LinkRelay.loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw LabError(message: "the link relay cannot listen on 127.0.0.1:\(port): \(reason)")
        }
        listener = descriptor
        self.targetPort = targetPort
        endpoint = "tcp://127.0.0.1:\(port)"
        state = Mutex(State())
        let thread = Thread { [self] in self.serve() }
        thread.name = "link-relay-\(port)"
        thread.start()
    }

    /// Cuts the link for `duration` from now (a cut under way is lengthened, never shortened).
    func cut(for duration: Duration) {
        state.withLock { state in
            let until = ContinuousClock.now + duration
            state.cutUntil = max(state.cutUntil ?? until, until)
            state.cuts += 1
        }
    }

    /// Whether the link is cut now.
    var isCut: Bool { state.withLock { state in state.cutUntil.map { ContinuousClock.now < $0 } ?? false } }

    /// Stops relaying and closes every connection (the thread ends within 20 ms).
    func stop() {
        state.withLock { $0.stopped = true }
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    /// One worker connection and its connection to the leader, with what
    /// each way holds for its receiver.
    private final class Pair {
        let worker: Int32
        let leader: Int32
        var toLeader: [UInt8] = []
        var toWorker: [UInt8] = []
        var closed = false

        init(worker: Int32, leader: Int32) {
            self.worker = worker
            self.leader = leader
        }
    }

    private func connectToTarget() -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = LinkRelay.loopback(targetPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        return descriptor
    }

    private func serve() {
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        var pairs: [Pair] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        defer {
            for pair in pairs {
                close(pair.worker)
                close(pair.leader)
            }
            close(listener)
        }
        while true {
            let (stopped, cut) = state.withLock { state in (state.stopped, state.cutUntil.map { ContinuousClock.now < $0 } ?? false) }
            if stopped { return }
            // Accept new connections at any time; while cut they are held, not relayed.
            while true {
                let worker = accept(listener, nil, nil)
                guard worker >= 0 else { break }
                _ = fcntl(worker, F_SETFL, fcntl(worker, F_GETFL) | O_NONBLOCK)
                if let leader = connectToTarget() {
                    pairs.append(Pair(worker: worker, leader: leader))
                } else {
                    close(worker)
                }
            }
            var polled: [pollfd] = []
            if !cut {
                for pair in pairs {
                    // Read from a side only while the other way has room; write where something waits.
                    polled.append(pollfd(fd: pair.worker, events: Int16((pair.toLeader.count < Self.bufferLimit ? POLLIN : 0) | (pair.toWorker.isEmpty ? 0 : POLLOUT)), revents: 0))
                    polled.append(pollfd(fd: pair.leader, events: Int16((pair.toWorker.count < Self.bufferLimit ? POLLIN : 0) | (pair.toLeader.isEmpty ? 0 : POLLOUT)), revents: 0))
                }
            }
            polled.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0))
            _ = poll(&polled, nfds_t(polled.count), 10)
            guard !cut else { continue }
            for (index, pair) in pairs.enumerated() {
                let workerEvents = polled[2 * index].revents
                let leaderEvents = polled[2 * index + 1].revents
                if workerEvents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { relay(from: pair.worker, into: &pair.toLeader, pair, &buffer) }
                if leaderEvents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { relay(from: pair.leader, into: &pair.toWorker, pair, &buffer) }
                flush(&pair.toLeader, to: pair.leader, pair)
                flush(&pair.toWorker, to: pair.worker, pair)
            }
            pairs.removeAll { pair in
                guard pair.closed else { return false }
                close(pair.worker)
                close(pair.leader)
                return true
            }
        }
    }

    private func relay(from descriptor: Int32, into held: inout [UInt8], _ pair: Pair, _ buffer: inout [UInt8]) {
        let room = min(buffer.count, Self.bufferLimit - held.count)
        guard room > 0 else { return }
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, room) }
        if count > 0 {
            held.append(contentsOf: buffer[0..<count])
        } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
            pair.closed = true
        }
    }

    private func flush(_ held: inout [UInt8], to descriptor: Int32, _ pair: Pair) {
        guard !held.isEmpty else { return }
        let count = held.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if count > 0 {
            held.removeFirst(count)
        } else if count < 0, errno != EAGAIN, errno != EINTR {
            pair.closed = true
        }
    }
}
