import Cog
import CogTesting
import Testing

/// Counts how often a selector or reaction ran.
@MainActor
final class Counter {
    private(set) var count = 0
    func bump() { count += 1 }
}

/// Collects values in order, for asserting what a selector or reaction saw.
@MainActor
final class Recorder<Value> {
    private(set) var values: [Value] = []
    func append(_ value: Value) { values.append(value) }
}

/// The text a trap printed, from an exit test's captured standard error.
func stderrText(_ result: ExitTest.Result?) -> String {
    guard let result else { return "" }
    return String(decoding: result.standardErrorContent, as: UTF8.self)
}

/// The `Mechanism` protocol under a second name, for a file that declares a
/// type named exactly `Mechanism` (the module is also named `Cog`, so
/// `Cog.Mechanism` cannot qualify it).
typealias MechanismProtocol = Mechanism

/// Acknowledgements for the runtime's next `count` async completion checks
/// (a finished run, a delivered stream element, an ended stream).
@MainActor
func completionChecks(_ cogs: Cogs, count: Int) -> [MainActorCleanupAcknowledgement] {
    (0..<count).map { _ in
        let acknowledgement = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextAsyncCompletionCheck(with: acknowledgement)
        return acknowledgement
    }
}

/// Acknowledgements for the next `count` releases by grace.
@MainActor
func releases(_ cogs: Cogs, count: Int = 1) -> [MainActorCleanupAcknowledgement] {
    (0..<count).map { _ in
        let acknowledgement = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextDerivedRelease(with: acknowledgement)
        return acknowledgement
    }
}

@MainActor
func waitAll(_ checks: [MainActorCleanupAcknowledgement]) async throws {
    for check in checks { try await check.wait() }
}

/// The next generation a `ControlledWork` or `ControlledStream` announces.
@MainActor
func nextStart(_ starts: AsyncStream<Int>) async -> Int? {
    var iterator = starts.makeAsyncIterator()
    return await iterator.next()
}

/// A `TestClock` that also announces each sleep as it starts, with its
/// deadline: what shows that a renewal replaced a grace sleeper with one for
/// the new deadline rather than kept the old one asleep.
final class SleepAnnouncingClock: Clock, Sendable {
    typealias Instant = TestClock.Instant
    typealias Duration = Swift.Duration

    /// The clock the sleepers really sleep on (counts, `advance(by:)`).
    let inner = TestClock()
    /// Each sleep's deadline, as an offset from the clock's start.
    let sleeps: AsyncStream<Duration>
    private let announce: AsyncStream<Duration>.Continuation

    init() {
        (sleeps, announce) = AsyncStream.makeStream(of: Duration.self)
    }

    var now: Instant { inner.now }
    var minimumResolution: Duration { inner.minimumResolution }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        announce.yield(deadline.offset)
        try await inner.sleep(until: deadline, tolerance: tolerance)
    }
}
