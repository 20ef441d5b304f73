import Synchronization

/// A handle on one generation started by `refresh`: its `outcome` resolves
/// for that generation only and never moves on to a later one.
///
/// ```swift
/// let handle = cogs.refreshForecast(for: zip)
/// if case .failure(let error) = await handle.outcome { … }
/// ```
public final class CogRefresh<Value: Sendable>: Sendable {
    /// How the generation ended.
    public enum Outcome: Sendable {
        case success(Value)
        case failure(any Error)
        /// A newer refresh or a dependency change replaced it.
        case superseded
        /// The state left the graph before the generation ended.
        case released
    }

    private struct State {
        var outcome: Outcome?
        var waiters: [CheckedContinuation<Outcome, Never>] = []
    }

    private let state = Mutex(State())

    init() {}

    /// Waits for the generation to end.
    public var outcome: Outcome {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Outcome? = state.withLock { state in
                    if let outcome = state.outcome { return outcome }
                    state.waiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }

    /// Resolves the handle once; later calls do nothing.
    func resolve(_ outcome: Outcome) {
        let waiters: [CheckedContinuation<Outcome, Never>] = state.withLock { state in
            guard state.outcome == nil else { return [] }
            state.outcome = outcome
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }
}

/// A one-shot signal a test can wait for: the runtime acknowledges it when
/// the event the test registered it for happens (for example the next async
/// completion check).
public final class MainActorCleanupAcknowledgement: Sendable {
    private struct State {
        var acknowledged = false
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    public var hasBeenAcknowledged: Bool { state.withLock { $0.acknowledged } }

    /// Marks the event as happened and wakes every waiter.
    public func acknowledge() {
        let waiters: [CheckedContinuation<Void, any Error>] = state.withLock { state in
            state.acknowledged = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until `acknowledge()` has been called (returning at once if it
    /// already was).
    ///
    /// - Throws: `CancellationError` if the waiting task is cancelled first,
    ///   so a cancelled test stops waiting instead of hanging.
    public func wait() async throws {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let early: Result<Void, any Error>? = state.withLock { state in
                    if state.acknowledged { return .success(()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let early { continuation.resume(with: early) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
