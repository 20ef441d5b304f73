import CogdCommandLine
import CCogdSupport
import Cog

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab bench graph`: ns per turn for each graph shape, median of repeated
/// runs, each shape set up once and then driven turn after turn.
@MainActor
struct GraphBench {
    let options: BenchOptions

    nonisolated static let shapeNames = [
        "steady", "deep", "broad", "diamond", "keyed", "keyed-single-10", "keyed-single-10000", "cold",
        "scopes", "quiet-reactions", "grace", "stream",
    ]
    let sink = BenchSink()

    struct Figure {
        let name: String
        let value: Double
        let unit: String
        /// What the figure is compared with (the grace and stream shapes) and,
        /// when it is not the raw figure without Cog, its name.
        var baseline: Double? = nil
        var baselineName: String? = nil
    }

    func run() async {
        var figures: [Figure] = []
        let shapes = options.only.isEmpty ? GraphBench.shapeNames : options.only
        #if DEBUG
            if !options.json {
                print("warning: this is a debug build; measure with `swift build -c release`")
            }
        #endif
        for shape in shapes {
            let shapeFigures: [Figure]
            if shape == "grace" {
                shapeFigures = await measureGrace()
            } else if shape == "stream" {
                let (elementTurn, raw) = await measureStream()
                shapeFigures = [Figure(name: "graph.stream", value: elementTurn, unit: "ns/element-turn", baseline: raw)]
            } else {
                shapeFigures = measure(shape)
            }
            for figure in shapeFigures {
                report(figure)
            }
            figures += shapeFigures
        }
        let peak = Figure(name: "graph.peak-rss", value: Double(cogd_peak_rss_bytes()) / 1_048_576, unit: "MiB")
        report(peak)
    }

    private func report(_ figure: Figure) {
        if figure.baselineName == nil, let baseline = figure.baseline {
            BenchFigure(name: figure.name, value: figure.value, unit: figure.unit, baseline: baseline)
                .report(json: options.json, nameWidth: 34)
            return
        }
        if options.json, let baseline = figure.baseline, let kind = figure.baselineName {
            let ratio = baseline == 0 ? "null" : formatted(figure.value / baseline)
            print(
                "{\"name\": \"\(figure.name)\", \"value\": \(formatted(figure.value)), \"unit\": \"\(figure.unit)\", "
                    + "\"baseline\": \(formatted(baseline)), \"ratio\": \(ratio), \"baselineKind\": \"\(kind)\"}")
        } else if options.json {
            print("{\"name\": \"\(figure.name)\", \"value\": \(formatted(figure.value)), \"unit\": \"\(figure.unit)\"}")
        } else if let baseline = figure.baseline, let kind = figure.baselineName {
            let name = padded(figure.name, to: 34)
            let ratio = baseline == 0 ? "" : "   ratio \(formatted(figure.value / baseline))"
            print("\(name) \(formatted(figure.value)) \(figure.unit)   \(kind) \(formatted(baseline)) \(figure.unit)\(ratio)")
        } else {
            let name = padded(figure.name, to: 34)
            print("\(name) \(formatted(figure.value)) \(figure.unit)")
        }
        fflush(nil)
    }

    private func formatted(_ value: Double) -> String {
        if value >= 100 || value == value.rounded() { return String(Int(value.rounded())) }
        return String((value * 100).rounded() / 100)
    }

    /// A runtime driven by the bench mechanism for `shape`.
    private func runtime(_ shape: BenchMechanism.Shape, seeding: (Cogs) -> Void = { _ in }) -> Cogs {
        let cogs = Cogs()
        seeding(cogs)
        cogs.operate([BenchMechanism(shape: shape, sink: sink)])
        return cogs
    }

    private func measure(_ shape: String) -> [Figure] {
        switch shape {
        case "steady":
            let cogs = runtime(.steady)
            let turns = 100_000
            var allocations: [Double] = []
            let time = timed(turns: turns) {
                let before = cogd_allocation_count()
                for _ in 0..<turns { cogs.incrementSteadySource() }
                allocations.append(Double(cogd_allocation_count() - before) / Double(turns))
            }
            return [
                Figure(name: "graph.steady", value: time, unit: "ns/turn"),
                Figure(name: "graph.steady.allocations", value: median(allocations), unit: "allocs/turn"),
            ]
        case "deep":
            let links = 1_000
            let cogs = runtime(.deep(links: links)) { cogs in
                for depth in 0..<links { _ = cogs.peek(BenchRig.deepLinkCogs[depth]) }
            }
            let turns = 300
            let time = timed(turns: turns) {
                for _ in 0..<turns { cogs.incrementDeepHead() }
            }
            return [Figure(name: "graph.deep", value: time, unit: "ns/turn")]
        case "broad":
            let cogs = runtime(.broad(width: 1_000))
            let turns = 300
            let time = timed(turns: turns) {
                for _ in 0..<turns { cogs.incrementBroadSource() }
            }
            return [Figure(name: "graph.broad", value: time, unit: "ns/turn")]
        case "diamond":
            let cogs = runtime(.diamond)
            let turns = 100_000
            let time = timed(turns: turns) {
                for _ in 0..<turns { cogs.incrementDiamondSource() }
            }
            return [Figure(name: "graph.diamond", value: time, unit: "ns/turn")]
        case "keyed":
            let keys = 10_000
            let cogs = runtime(.keyed) { $0.installKeyedValues(count: keys) }
            let turns = 200
            var next = 0
            let time = timed(turns: turns) {
                for _ in 0..<turns {
                    cogs.incrementKeyedValue(next)
                    next = (next + 1) % keys
                }
            }
            return [Figure(name: "graph.keyed", value: time, unit: "ns/turn")]
        case "keyed-single-10", "keyed-single-10000":
            let others = shape == "keyed-single-10" ? 10 : 10_000
            let cogs = runtime(.keyedSingle) { cogs in
                cogs.installSingleValues(count: others + 1)
                for key in 1...others { _ = cogs[BenchRig.singleReadCogs[key]] }
            }
            let turns = 100_000
            let time = timed(turns: turns) {
                for _ in 0..<turns { cogs.incrementSingleValue(0) }
            }
            return [Figure(name: "graph.\(shape)", value: time, unit: "ns/turn")]
        case "cold":
            let cogs = Cogs()
            _ = cogs.peek(BenchRig.coldDoubleCog)
            let turns = 10_000
            var reads: [Double] = []
            let time = timed(turns: turns) {
                for _ in 0..<turns { cogs.incrementColdSource() }
                let start = ContinuousClock.now
                _ = cogs.peek(BenchRig.coldDoubleCog)
                reads.append(nanoseconds(ContinuousClock.now - start))
            }
            return [
                Figure(name: "graph.cold", value: time, unit: "ns/unread-turn"),
                Figure(name: "graph.cold.read", value: median(reads), unit: "ns"),
            ]
        case "scopes":
            let cogs = runtime(.scopes)
            let children = 1_000
            let ids = Array(0..<children)
            let time = timed(turns: children) {
                cogs.setChildIDs(ids)
                cogs.setChildIDs([])
            }
            return [Figure(name: "graph.scopes.open-and-retire", value: time / 1_000, unit: "us/child")]
        case "quiet-reactions":
            let one = runtime(.quiet(reactions: 1))
            let hundred = runtime(.quiet(reactions: 100))
            let turns = 100_000
            let alone = timed(turns: turns) { for _ in 0..<turns { one.incrementSteadySource() } }
            let crowded = timed(turns: turns) { for _ in 0..<turns { hundred.incrementSteadySource() } }
            return [
                Figure(name: "graph.reactions.1-woken-of-1", value: alone, unit: "ns/turn"),
                Figure(name: "graph.reactions.1-woken-of-100", value: crowded, unit: "ns/turn"),
                Figure(name: "graph.reactions.quiet-growth", value: (crowded / alone - 1) * 100, unit: "%"),
            ]
        default:
            fatalError("internal inconsistency: unknown shape \(shape)")
        }
    }

    /// Runs `body` once to warm up, then `options.runs` times; the median of
    /// the timed runs, in ns per turn.
    private func timed(turns: Int, _ body: () -> Void) -> Double {
        body()
        var samples: [Double] = []
        for _ in 0..<options.runs {
            let start = ContinuousClock.now
            body()
            samples.append(nanoseconds(ContinuousClock.now - start) / Double(turns))
        }
        return median(samples)
    }

    func nanoseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
    }

    func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}
