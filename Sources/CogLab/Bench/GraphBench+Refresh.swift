import CogdCommandLine
import Cog

/// The `refresh` shape of `cogd-lab bench graph`: an async cog whose work
/// returns at once, watched, refreshed 2,000 times one after another (each
/// awaited: its pending turn, the work's task, its success turn and the
/// watch) — ns per refresh, beside the same by hand: a main-actor task per
/// refresh whose value is stored and handed to a watcher closure when it
/// changed ("baselineKind": "hand-written").
extension GraphBench {
    static let refreshes = 2_000

    /// Median ns per refresh and per hand-written refresh, interleaved runs
    /// after one warm-up of each; both sides must end on the same value.
    func measureRefresh() async -> Figure {
        var graph: [Double] = []
        var hand: [Double] = []
        for run in 0...options.runs {
            let (graphTime, graphRuns) = await refreshTurns(Self.refreshes)
            let (handTime, handRuns) = await handWrittenRefreshes(Self.refreshes)
            precondition(
                graphRuns == Self.refreshes && handRuns == Self.refreshes,
                "internal inconsistency: \(Self.refreshes) refreshes watched \(graphRuns) new values through the graph, \(handRuns) by hand")
            guard run > 0 else { continue }
            graph.append(graphTime)
            hand.append(handTime)
        }
        return Figure(
            name: "graph.refresh", value: BenchFigure.median(graph), unit: "ns/refresh", baseline: BenchFigure.median(hand),
            baselineName: "hand-written")
    }

    /// A fresh runtime with a watched async cog counting its runs; `count`
    /// refreshes, each awaited. Returns ns per refresh and how far the
    /// watched value moved meanwhile (one a refresh).
    private func refreshTurns(_ count: Int) async -> (Double, Int) {
        let runs = RunCounter()
        let counterCog = Cog<Int>.Async(default: 0) { _ in .run { runs.next() } }
        let cogs = Cogs()
        let seen = BenchSink()
        cogs.operate([RefreshWatch(counterCog: counterCog, seen: seen)])
        _ = await cogs.refresh(counterCog).outcome  // the first run, outside the clock
        let before = seen.value
        let start = ContinuousClock.now
        for _ in 0..<count {
            _ = await cogs.refresh(counterCog).outcome
        }
        let elapsed = ContinuousClock.now - start
        sink.value = seen.value
        return (nanoseconds(elapsed) / Double(count), seen.value - before)
    }

    /// The same by hand: each refresh a main-actor task, its value stored and
    /// handed to a watcher when it changed.
    private func handWrittenRefreshes(_ count: Int) async -> (Double, Int) {
        let runs = RunCounter()
        let seen = BenchSink()
        var stored = 0
        let watcher: @MainActor (Int) -> Void = { seen.value = $0 }
        func refresh() async {
            let value = await Task { @MainActor in runs.next() }.value
            if value != stored {
                stored = value
                watcher(value)
            }
        }
        // As the graph's: the watch's first read starts a run, then one refresh, outside the clock.
        await refresh()
        await refresh()
        let before = seen.value
        let start = ContinuousClock.now
        for _ in 0..<count { await refresh() }
        let elapsed = ContinuousClock.now - start
        sink.value = seen.value
        return (nanoseconds(elapsed) / Double(count), seen.value - before)
    }
}

/// Numbers the runs of a refresh's work: 1, 2, …
@MainActor
private final class RunCounter {
    private var count = 0
    func next() -> Int {
        count += 1
        return count
    }
}

/// Watches the refreshed cog, keeping its last value.
@MainActor
private struct RefreshWatch: Mechanism {
    let counterCog: Cog<Int>.Async
    let seen: BenchSink

    func operate(_ m: MechanismController) {
        m.watch(counterCog, initial: .skip, name: "refreshed") { [seen] _, value in seen.value = value }
    }
}
