import CogdCommandLine
import CCogdSupport
import Cog

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab bench graph`: ns per turn for each graph shape, median of repeated
/// runs, each shape set up once and then driven turn after turn, beside the
/// same computation written by hand without a graph (`HandWritten`), measured
/// in the same run, interleaved, and held to compute the same values.
@MainActor
struct GraphBench {
    let options: BenchOptions

    nonisolated static let shapeNames = [
        "steady", "deep", "broad", "diamond", "keyed", "keyed-single-10", "keyed-single-10000", "cold",
        "scopes", "quiet-reactions", "grace", "stream", "refresh",
    ]
    let sink = BenchSink()

    struct Figure {
        let name: String
        let value: Double
        let unit: String
        /// What the figure is compared with (its hand-written baseline; the
        /// grace shape's own; stream's raw iteration) and, when it is not the
        /// raw figure without Cog, its name (`hand-written`).
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
            } else if shape == "refresh" {
                shapeFigures = [await measureRefresh()]
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

    /// A runtime driven by the bench mechanism for `shape`, its reactions leaving their results in `sink`.
    private func runtime(_ shape: BenchMechanism.Shape, sink: BenchSink, seeding: (Cogs) -> Void = { _ in }) -> Cogs {
        let cogs = Cogs()
        seeding(cogs)
        cogs.operate([BenchMechanism(shape: shape, sink: sink)])
        return cogs
    }

    /// A figure beside its hand-written baseline (`HandWritten`) of the same run.
    private func handWritten(_ name: String, _ value: Double, _ baseline: Double, unit: String) -> Figure {
        Figure(name: name, value: value, unit: unit, baseline: baseline, baselineName: "hand-written")
    }

    /// Stops the bench when a hand-written baseline did not compute what the graph did.
    private func agree(_ shape: String, graph: Int, handWritten: Int) {
        guard graph == handWritten else {
            fatalError("internal inconsistency: the hand-written \(shape) baseline computed \(handWritten), the graph \(graph)")
        }
    }

    private func measure(_ shape: String) -> [Figure] {
        let graphSink = BenchSink()
        let handSink = BenchSink()
        switch shape {
        case "steady":
            let cogs = runtime(.steady, sink: graphSink)
            let hand = HandWritten.Steady(sink: handSink)
            let turns = 100_000
            var allocations: [Double] = []
            let times = interleaved(turns: turns, [
                {
                    let before = cogd_allocation_count()
                    for _ in 0..<turns { cogs.incrementSteadySource() }
                    allocations.append(Double(cogd_allocation_count() - before) / Double(turns))
                },
                { for _ in 0..<turns { hand.incrementSource() } },
            ])
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            agree(shape, graph: cogs.peek(BenchRig.steadyDoubleCog), handWritten: hand.double)
            return [
                handWritten("graph.steady", times[0], times[1], unit: "ns/turn"),
                Figure(name: "graph.steady.allocations", value: median(allocations), unit: "allocs/turn"),
            ]
        case "deep":
            let links = 1_000
            let cogs = runtime(.deep(links: links), sink: graphSink) { cogs in
                for depth in 0..<links { _ = cogs.peek(BenchRig.deepLinkCogs[depth]) }
            }
            let hand = HandWritten.Chain(links: links, sink: handSink)
            let turns = 300
            let times = interleaved(turns: turns, [
                { for _ in 0..<turns { cogs.incrementDeepHead() } },
                { for _ in 0..<turns { hand.incrementHead() } },
            ])
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            agree(shape, graph: cogs.peek(BenchRig.deepLinkCogs[links - 1]), handWritten: hand.links[links - 1])
            return [handWritten("graph.deep", times[0], times[1], unit: "ns/turn")]
        case "broad":
            let width = 1_000
            let cogs = runtime(.broad(width: width), sink: graphSink)
            let hand = HandWritten.Fan(width: width, sink: handSink)
            let turns = 300
            let times = interleaved(turns: turns, [
                { for _ in 0..<turns { cogs.incrementBroadSource() } },
                { for _ in 0..<turns { hand.incrementSource() } },
            ])
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            return [handWritten("graph.broad", times[0], times[1], unit: "ns/turn")]
        case "diamond":
            let cogs = runtime(.diamond, sink: graphSink)
            let hand = HandWritten.Diamond(sink: handSink)
            let turns = 100_000
            let times = interleaved(turns: turns, [
                { for _ in 0..<turns { cogs.incrementDiamondSource() } },
                { for _ in 0..<turns { hand.incrementSource() } },
            ])
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            agree(shape, graph: cogs.peek(BenchRig.diamondJoinCog), handWritten: hand.join)
            return [handWritten("graph.diamond", times[0], times[1], unit: "ns/turn")]
        case "keyed":
            let keys = 10_000
            let cogs = runtime(.keyed, sink: graphSink) { $0.installKeyedValues(count: keys) }
            let hand = HandWritten.KeyedSum(count: keys, sink: handSink)
            let turns = 200
            var next = 0
            var handNext = 0
            let times = interleaved(turns: turns, [
                {
                    for _ in 0..<turns {
                        cogs.incrementKeyedValue(next)
                        next = (next + 1) % keys
                    }
                },
                {
                    for _ in 0..<turns {
                        hand.incrementValue(handNext)
                        handNext = (handNext + 1) % keys
                    }
                },
            ])
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            agree(shape, graph: cogs.peek(BenchRig.keyedSumCog), handWritten: hand.sum)
            return [handWritten("graph.keyed", times[0], times[1], unit: "ns/turn")]
        case "keyed-single-10", "keyed-single-10000":
            let others = shape == "keyed-single-10" ? 10 : 10_000
            let cogs = runtime(.keyedSingle, sink: graphSink) { cogs in
                cogs.installSingleValues(count: others + 1)
                for key in 1...others { _ = cogs[BenchRig.singleReadCogs[key]] }
            }
            let hand = HandWritten.SingleKey(others: others, watched: 0, sink: handSink)
            let turns = 100_000
            let times = interleaved(turns: turns, [
                { for _ in 0..<turns { cogs.incrementSingleValue(0) } },
                { for _ in 0..<turns { hand.incrementValue(0) } },
            ])
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            agree(shape, graph: cogs.peek(BenchRig.singleReadCogs[0]), handWritten: hand.readers[0] ?? -1)
            return [handWritten("graph.\(shape)", times[0], times[1], unit: "ns/turn")]
        case "cold":
            let cogs = Cogs()
            _ = cogs.peek(BenchRig.coldDoubleCog)
            let hand = HandWritten.Lazy()
            _ = hand.read()
            let turns = 10_000
            var reads: [Double] = []
            var handReads: [Double] = []
            let times = interleaved(turns: turns, [
                {
                    for _ in 0..<turns { cogs.incrementColdSource() }
                    let start = ContinuousClock.now
                    graphSink.value &+= cogs.peek(BenchRig.coldDoubleCog)
                    reads.append(nanoseconds(ContinuousClock.now - start))
                },
                {
                    for _ in 0..<turns { hand.incrementSource() }
                    let start = ContinuousClock.now
                    handSink.value &+= hand.read()
                    handReads.append(nanoseconds(ContinuousClock.now - start))
                },
            ])
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            return [
                handWritten("graph.cold", times[0], times[1], unit: "ns/unread-turn"),
                handWritten("graph.cold.read", median(reads), median(handReads), unit: "ns"),
            ]
        case "scopes":
            let cogs = runtime(.scopes, sink: graphSink)
            let hand = HandWritten.Children(sink: handSink)
            let children = 1_000
            let ids = Array(0..<children)
            let times = interleaved(turns: children, [
                {
                    cogs.setChildIDs(ids)
                    cogs.setChildIDs([])
                },
                {
                    hand.setChildIDs(ids)
                    hand.setChildIDs([])
                },
            ])
            // Untimed: the children are real watchers in both, woken alike.
            cogs.setChildIDs(ids)
            hand.setChildIDs(ids)
            cogs.incrementSteadySource()
            hand.incrementSource()
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            cogs.setChildIDs([])
            hand.setChildIDs([])
            return [handWritten("graph.scopes.open-and-retire", times[0] / 1_000, times[1] / 1_000, unit: "us/child")]
        case "quiet-reactions":
            let oneSink = BenchSink()
            let handOneSink = BenchSink()
            let one = runtime(.quiet(reactions: 1), sink: oneSink)
            let handOne = HandWritten.Reactions(count: 1, sink: handOneSink)
            let hundred = runtime(.quiet(reactions: 100), sink: graphSink)
            let handHundred = HandWritten.Reactions(count: 100, sink: handSink)
            let turns = 100_000
            let times = interleaved(turns: turns, [
                { for _ in 0..<turns { one.incrementSteadySource() } },
                { for _ in 0..<turns { handOne.incrementSource() } },
                { for _ in 0..<turns { hundred.incrementSteadySource() } },
                { for _ in 0..<turns { handHundred.incrementSource() } },
            ])
            agree(shape, graph: oneSink.value, handWritten: handOneSink.value)
            agree(shape, graph: graphSink.value, handWritten: handSink.value)
            let (alone, crowded) = (times[0], times[2])
            return [
                handWritten("graph.reactions.1-woken-of-1", alone, times[1], unit: "ns/turn"),
                handWritten("graph.reactions.1-woken-of-100", crowded, times[3], unit: "ns/turn"),
                Figure(name: "graph.reactions.quiet-growth", value: (crowded / alone - 1) * 100, unit: "%"),
            ]
        default:
            fatalError("internal inconsistency: unknown shape \(shape)")
        }
    }

    /// Runs each of `bodies` (the graph's, then its hand-written baseline's)
    /// once to warm up, then `options.runs` rounds of each in turn — graph,
    /// baseline, graph, baseline … — so the machine's drift falls on both
    /// alike; each body's median, in ns per turn.
    private func interleaved(turns: Int, _ bodies: [() -> Void]) -> [Double] {
        for body in bodies { body() }
        var samples = Array(repeating: [Double](), count: bodies.count)
        for _ in 0..<options.runs {
            for (index, body) in bodies.enumerated() {
                let start = ContinuousClock.now
                body()
                samples[index].append(nanoseconds(ContinuousClock.now - start) / Double(turns))
            }
        }
        return samples.map { median($0) }
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
