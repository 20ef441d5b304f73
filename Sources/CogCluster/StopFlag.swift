import Synchronization

/// Asks a running leader or worker to stop; set from a signal handler's
/// queue or another thread, read by the serving loop.
public final class StopFlag: Sendable {
    private let stopped = Atomic<Bool>(false)

    public init() {}

    public func stop() { stopped.store(true, ordering: .relaxed) }
    public var isStopped: Bool { stopped.load(ordering: .relaxed) }
}
