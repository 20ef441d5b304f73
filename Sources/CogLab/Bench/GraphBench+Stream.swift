import CogdCommandLine
import Cog

/// The `stream` shape of `cogd-lab bench graph`: one `Work.stream` delivering
/// 10,000 distinct, already-buffered elements, each its own turn that wakes
/// one watch — ns per element turn, beside the raw cost of iterating the
/// same buffered `AsyncStream` on the main actor without Cog.
extension GraphBench {
    static let streamElements = 10_000

    /// Median ns per element turn and per raw element, interleaved runs
    /// after one warm-up of each.
    func measureStream() async -> (elementTurn: Double, raw: Double) {
        var turns: [Double] = []
        var raw: [Double] = []
        for run in 0...options.runs {
            let turn = await streamElementTurns(Self.streamElements)
            let plain = await rawStreamElements(Self.streamElements)
            guard run > 0 else { continue }
            turns.append(turn)
            raw.append(plain)
        }
        return (BenchFigure.median(turns), BenchFigure.median(raw))
    }

    /// A fresh runtime whose async cog streams `count` elements into a watch;
    /// timed from the first read to the watch seeing the last element.
    private func streamElementTurns(_ count: Int) async -> Double {
        let elements = Self.bufferedElements(count)
        let streamCog = Cog<Int>.Async(default: 0) { _ in .stream(elements) }
        let cogs = Cogs()
        let start = ContinuousClock.now
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            cogs.operate([StreamWatch(streamCog: streamCog, last: count, sink: sink, done: done)])
        }
        return nanoseconds(ContinuousClock.now - start) / Double(count)
    }

    /// The same buffered elements iterated on the main actor, each stored.
    private func rawStreamElements(_ count: Int) async -> Double {
        let elements = Self.bufferedElements(count)
        let start = ContinuousClock.now
        for await element in elements { sink.value = element }
        return nanoseconds(ContinuousClock.now - start) / Double(count)
    }

    private static func bufferedElements(_ count: Int) -> AsyncStream<Int> {
        let (elements, continuation) = AsyncStream.makeStream(of: Int.self)
        for element in 1...count { continuation.yield(element) }
        continuation.finish()
        return elements
    }
}

/// Watches the bench stream and resumes the bench at its last element.
@MainActor
private struct StreamWatch: Mechanism {
    let streamCog: Cog<Int>.Async
    let last: Int
    let sink: BenchSink
    let done: CheckedContinuation<Void, Never>

    func operate(_ m: MechanismController) {
        m.watch(streamCog, initial: .skip, name: "element") { [sink, last, done] _, value in
            sink.value = value
            if value == last { done.resume() }
        }
    }
}
