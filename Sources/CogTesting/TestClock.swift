import Synchronization

/// A logical `Clock` for tests: time moves only when the test calls
/// `advance(by:)`, and sleepers wake in deadline order (ties in the order
/// they started sleeping).
///
/// ```swift
/// let clock = TestClock()
/// let cogs = Cogs.forTesting(mechanisms: [HikeTimerMechanism(clock: clock)])
/// try await clock.waitForScheduledSleep()
/// clock.advance(by: .seconds(1))
/// ```
///
/// - Important: `finish()` cancels every sleeper; call it when a test ends
///   with tasks still sleeping.
public final class TestClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Sendable {
        /// Time since the clock was made.
        public let offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    /// `waitForScheduledSleep(within:)` ran out of real time.
    public struct WaitTimeout: Error, CustomStringConvertible {
        public let description = "no task started sleeping on the TestClock in time"
    }

    private struct Sleeper {
        let deadline: Instant
        let sequence: Int
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var nextSequence = 0
        var finished = false
        var scheduleWaiters: [CheckedContinuation<Void, Never>] = []
        var maximumActiveSleepers = 0
    }

    private let state = Mutex(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// Tasks sleeping on this clock right now.
    public var activeSleeperCount: Int { state.withLock { $0.sleepers.count } }
    /// The most tasks that slept on this clock at once.
    public var maximumActiveSleeperCount: Int { state.withLock { $0.maximumActiveSleepers } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id: Int = state.withLock { state in
            state.nextSequence += 1
            return state.nextSequence
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resumeNow, waiters): (Result<Void, any Error>?, [CheckedContinuation<Void, Never>]) =
                    state.withLock { state in
                        if state.finished || Task.isCancelled { return (.failure(CancellationError()), []) }
                        if deadline <= state.now { return (.success(()), []) }
                        state.sleepers[id] = Sleeper(deadline: deadline, sequence: id, continuation: continuation)
                        state.maximumActiveSleepers = max(state.maximumActiveSleepers, state.sleepers.count)
                        defer { state.scheduleWaiters = [] }
                        return (nil, state.scheduleWaiters)
                    }
                for waiter in waiters { waiter.resume() }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come,
    /// earliest first.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "TestClock.advance(by:) cannot move time backwards (\(duration))")
        let due: [Sleeper] = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.values.filter { $0.deadline <= now }
                .sorted { ($0.deadline, $0.sequence) < ($1.deadline, $1.sequence) }
            for sleeper in due { state.sleepers[sleeper.sequence] = nil }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Waits (in real time, at most `within`) until `count` tasks (one by
    /// default) sleep on this clock. The default is generous: the limit
    /// only turns a hang into a failure, and a test run that keeps the main
    /// actor or both threads of a 2-CPU pool busy (other tests, other
    /// builds) can hold a sleeper back for many seconds.
    public func waitForScheduledSleep(count: Int = 1, within limit: Duration = .seconds(30)) async throws {
        while activeSleeperCount < count {
            if state.withLock({ $0.finished }) { throw WaitTimeout() }
            try await waitForNewSleeper(reaching: count, within: limit)
        }
    }

    private func waitForNewSleeper(reaching count: Int, within limit: Duration) async throws {
        let timedOut = Mutex(false)
        let timer = Task {
            try? await Task.sleep(for: limit)
            guard !Task.isCancelled else { return }
            timedOut.withLock { $0 = true }
            let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
                defer { state.scheduleWaiters = [] }
                return state.scheduleWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state in
                if state.finished || state.sleepers.count >= count { return true }
                state.scheduleWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
        timer.cancel()
        if timedOut.withLock({ $0 }) && activeSleeperCount < count { throw WaitTimeout() }
    }

    /// Cancels every sleeper now and any that start later.
    public func finish() {
        let sleepers: [Sleeper] = state.withLock { state in
            state.finished = true
            defer { state.sleepers = [:] }
            return Array(state.sleepers.values)
        }
        for sleeper in sleepers { sleeper.continuation.resume(throwing: CancellationError()) }
    }
}
