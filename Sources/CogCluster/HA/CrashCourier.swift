internal import CCrashMark
import CogCodec
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Tells the standbys, as a leader dies of a crash, which request's body
/// was running (`ship-crashed`, `protocol/ha.md` §9), so the standby that
/// takes the lead quarantines it instead of running it again: a poison
/// pill crashes one leader, not each in turn.
///
/// A thread of its own waits on a pipe. The crash handler
/// (`cogd_crash_mark_courier`) marks the running-request note, wakes this
/// thread with the signal's number and waits for it, at most
/// `handlerWaitMilliseconds`, before the process dies. This thread sends
/// the note on the requests socket to each standby and gives ZeroMQ's I/O
/// thread `flushMilliseconds` to put the bytes on the wire. The serving
/// thread, the socket's owner, is stopped in the handler meanwhile, so the
/// socket has one user at a time (the pipe orders the two).
///
/// Best effort, by design: a standby whose queue is full, or a crash that
/// leaves the process no time, misses the message, and its next start
/// finds nothing to quarantine (the request then runs once more there).
/// An outside kill (SIGKILL) runs no handler and sends nothing.
final class CrashCourier: @unchecked Sendable {
    /// The most the crash handler waits for the courier.
    static let handlerWaitMilliseconds: Int32 = 500
    /// How long the courier lets ZeroMQ send before the process goes on dying.
    static let flushMilliseconds: UInt32 = 100

    private let router: ZMQSocket
    private let note: RunningRequestNote
    private let epoch: UInt64
    private let wake: (read: Int32, write: Int32)
    private let done: (read: Int32, write: Int32)
    private let lock = NSLock()
    /// The standbys' ZeroMQ identities (the leader's `standbyPeers`).
    private var standbys: [[UInt8]] = []
    private let finished = DispatchSemaphore(value: 0)
    private var stopped = false

    /// Starts the courier's thread and installs it in the crash handler;
    /// nil when the pipes cannot be made (the leader serves without it).
    init?(router: ZMQSocket, note: RunningRequestNote, epoch: UInt64) {
        var wakePipe: [Int32] = [-1, -1]
        var donePipe: [Int32] = [-1, -1]
        guard pipe(&wakePipe) == 0 else { return nil }
        guard pipe(&donePipe) == 0 else {
            close(wakePipe[0])
            close(wakePipe[1])
            return nil
        }
        // Not inherited by a process the leader starts.
        for descriptor in wakePipe + donePipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        self.router = router
        self.note = note
        self.epoch = epoch
        wake = (wakePipe[0], wakePipe[1])
        done = (donePipe[0], donePipe[1])
        let thread = Thread { [self] in serve() }
        thread.name = "cogd-courier"
        thread.start()
        cogd_crash_mark_courier(wake.write, done.read, CrashCourier.handlerWaitMilliseconds)
    }

    /// The standbys a crash is told to (set on the serving thread).
    func setStandbys(_ identities: [[UInt8]]) {
        lock.withLock { standbys = identities }
    }

    /// Takes the courier out of the crash handler, ends its thread and closes its pipes.
    func stop() {
        guard !stopped else { return }
        stopped = true
        cogd_crash_mark_courier_release(wake.write)
        var end: UInt8 = 0
        if write(wake.write, &end, 1) == 1 { finished.wait() }
        for descriptor in [wake.read, wake.write, done.read, done.write] { close(descriptor) }
    }

    private func serve() {
        defer { finished.signal() }
        while true {
            var signal: UInt8 = 0
            let read = Glibc.read(wake.read, &signal, 1)
            if read < 0, errno == EINTR { continue }
            guard read == 1, signal != 0 else { return }
            tell(signal: signal)
            var answer: UInt8 = 1
            _ = write(done.write, &answer, 1)
        }
    }

    /// Sends the noted request, if a body was running, to every standby.
    private func tell(signal: UInt8) {
        guard let running = try? note.leftOver()?.entry, let digest = running.digest, digest.count == RequestDigest.size else { return }
        let frame = WireMessage.shipCrashed(
            epoch: epoch, request: running.request, op: running.op, digest: digest, signal: UInt64(signal)
        ).encoded()
        let identities = lock.withLock { standbys }
        guard !identities.isEmpty else { return }
        for identity in identities { _ = try? router.send([identity, frame], wait: false) }
        usleep(CrashCourier.flushMilliseconds * 1_000)
    }
}
