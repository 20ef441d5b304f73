import Synchronization

/// Asks a running leader or worker to stop; set from a signal handler's
/// queue or another thread, read by the serving loop.
public final class StopFlag: Sendable {
    private let stopped = Atomic<Bool>(false)

    public init() {}

    public func stop() { stopped.store(true, ordering: .relaxed) }
    public var isStopped: Bool { stopped.load(ordering: .relaxed) }
}

/// Asks a running leader to read its peers file again (SIGHUP); set from a
/// signal handler's queue, taken by the serving loop.
public final class ReloadFlag: Sendable {
    private let requested = Atomic<Bool>(false)

    public init() {}

    public func request() { requested.store(true, ordering: .relaxed) }
    /// Whether a reload was asked for since the last call.
    public func take() -> Bool { requested.exchange(false, ordering: .relaxed) }
}
