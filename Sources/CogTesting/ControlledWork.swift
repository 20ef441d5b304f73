import Cog
import Synchronization

/// Async work a test drives by hand, one generation at a time.
///
/// Each run of the `Work` it makes is a generation, numbered from 0 in the
/// order the runs start; `starts` announces each. `succeed(_:with:)` and
/// `fail(_:with:)` finish exactly that generation; finishing one that never
/// started, or finishing one twice, does nothing. A cancelled run ends with
/// `CancellationError`.
///
/// ```swift
/// let work = ControlledWork<Int>()
/// let forecastCog = Cog<Int>.Async(default: 0) { _ in work.makeWork() }
/// ```
public final class ControlledWork<Value: Sendable>: Sendable {
    private struct State {
        var started = 0
        var waiting: [Int: CheckedContinuation<Value, any Error>] = [:]
        var finished: Set<Int> = []
    }

    private let state = Mutex(State())
    private let startsContinuation: AsyncStream<Int>.Continuation

    /// The generation number of each run as it starts.
    public let starts: AsyncStream<Int>

    public init() {
        (starts, startsContinuation) = AsyncStream.makeStream(of: Int.self)
    }

    /// How many generations have started.
    public var generationCount: Int { state.withLock { $0.started } }

    /// Work whose every run is a new generation waiting for the test.
    public func makeWork() -> Work<Value> {
        .run { [self] in try await self.runGeneration() }
    }

    /// The same, for an async cog with an ordered policy (`.queue`,
    /// `.exhaustLatest`, `.merged`), whose selector returns `RunWork`.
    public func makeWork() -> RunWork<Value> {
        .run { [self] in try await self.runGeneration() }
    }

    /// Finishes generation `generation` with `value`.
    public func succeed(_ generation: Int, with value: Value) {
        finish(generation, with: .success(value))
    }

    /// Finishes generation `generation` with `error`.
    public func fail(_ generation: Int, with error: any Error) {
        finish(generation, with: .failure(error))
    }

    private func finish(_ generation: Int, with result: Result<Value, any Error>) {
        let continuation: CheckedContinuation<Value, any Error>? = state.withLock { state in
            guard !state.finished.contains(generation),
                let waiting = state.waiting.removeValue(forKey: generation)
            else { return nil }
            state.finished.insert(generation)
            return waiting
        }
        continuation?.resume(with: result)
    }

    private func runGeneration() async throws -> Value {
        let generation = state.withLock { state in
            defer { state.started += 1 }
            return state.started
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let cancelled = Task.isCancelled
                state.withLock { state in
                    if !cancelled { state.waiting[generation] = continuation }
                }
                startsContinuation.yield(generation)
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = state.withLock { state in
                state.finished.insert(generation)
                return state.waiting.removeValue(forKey: generation)
            }
            continuation?.resume(throwing: CancellationError())
        }
    }
}
