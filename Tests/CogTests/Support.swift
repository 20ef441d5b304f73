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
func waitAll(_ checks: [MainActorCleanupAcknowledgement]) async {
    for check in checks { await check.wait() }
}

/// The next generation a `ControlledWork` or `ControlledStream` announces.
@MainActor
func nextStart(_ starts: AsyncStream<Int>) async -> Int? {
    var iterator = starts.makeAsyncIterator()
    return await iterator.next()
}
