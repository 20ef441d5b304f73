import Cog
import Synchronization

/// A stream a test drives by hand, one generation at a time.
///
/// Each iteration Cog starts over the `Work` it makes is a generation,
/// numbered from 0 in start order; `starts` announces each. `yield(_:to:)`
/// delivers an element to exactly that generation, `finish(_:)` ends it
/// naturally and `fail(_:with:)` ends it with an error. Driving a generation
/// that never started or already ended does nothing. A generation Cog
/// cancels ends with `CancellationError`.
///
/// ```swift
/// let prices = ControlledStream<Int>()
/// let priceCog = Cog<Int>.Async(default: 0) { _ in prices.makeWork() }
/// // … await the start, then:
/// prices.yield(5, to: 0)
/// ```
public final class ControlledStream<Value: Sendable>: Sendable {
    private struct State {
        var started = 0
        var open: [Int: AsyncThrowingStream<Value, any Error>.Continuation] = [:]
    }

    private let state = Mutex(State())
    private let startsContinuation: AsyncStream<Int>.Continuation

    /// The generation number of each stream as Cog starts iterating it.
    public let starts: AsyncStream<Int>

    public init() {
        (starts, startsContinuation) = AsyncStream.makeStream(of: Int.self)
    }

    /// How many generations have started (an upper bound on restarts).
    public var generationCount: Int { state.withLock { $0.started } }

    /// Stream work whose every iteration is a new generation waiting for the test.
    public func makeWork() -> Work<Value> {
        .stream(Generations(owner: self))
    }

    /// Delivers `element` to generation `generation`, if it is running.
    public func yield(_ element: Value, to generation: Int) {
        let continuation = state.withLock { $0.open[generation] }
        continuation?.yield(element)
    }

    /// Ends generation `generation` naturally, if it is running.
    public func finish(_ generation: Int) {
        let continuation = state.withLock { $0.open.removeValue(forKey: generation) }
        continuation?.finish()
    }

    /// Ends generation `generation` with `error`, if it is running.
    public func fail(_ generation: Int, with error: any Error) {
        let continuation = state.withLock { $0.open.removeValue(forKey: generation) }
        continuation?.finish(throwing: error)
    }

    fileprivate func startGeneration() -> (Int, AsyncThrowingStream<Value, any Error>) {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Value.self)
        let generation = state.withLock { state in
            defer { state.started += 1 }
            state.open[state.started] = continuation
            return state.started
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.open.removeValue(forKey: generation) }
        }
        startsContinuation.yield(generation)
        return (generation, stream)
    }

    /// Every iterator is a new generation.
    private struct Generations: AsyncSequence {
        typealias Element = Value
        let owner: ControlledStream<Value>

        func makeAsyncIterator() -> Iterator {
            let (_, stream) = owner.startGeneration()
            return Iterator(base: stream.makeAsyncIterator())
        }

        struct Iterator: AsyncIteratorProtocol {
            var base: AsyncThrowingStream<Value, any Error>.AsyncIterator

            /// A generation cancelled before the test ended it throws
            /// `CancellationError`, as cancelled work does.
            mutating func next() async throws -> Value? {
                let element = try await base.next()
                if element == nil, Task.isCancelled { throw CancellationError() }
                return element
            }
        }
    }
}
