import CogdCommandLine
import Foundation

/// `cogd-lab bench quick`: the short form of the benchmarks that CI runs
/// (`deploy/test.sh`) — a few shapes of the log, cluster and graph suites,
/// each run as its own `bench … --json` child of this executable, their
/// figures held to generous floors. Only ratios to a baseline measured in
/// the same run are judged (and the steady turn's allocations, a count),
/// never an absolute time, so a slow machine passes and a regression does
/// not. A figure past its floor is measured again (its part rerun), up to
/// `measurements` times in all, and fails only when it is past in every
/// one: a noisy moment on a shared machine does not fail CI, and a real
/// regression is past each time. Exit 0: every figure within its floor; 3:
/// one or more past; 1: a part could not be measured.
struct QuickBench {
    let options: BenchOptions

    /// One part: a suite and its shapes.
    struct Part: Equatable {
        let suite: BenchOptions.Suite
        let shapes: [String]
    }

    nonisolated static let parts = [
        Part(suite: .log, shapes: ["batch-1", "batch-100"]),
        Part(suite: .cluster, shapes: ["round-trip", "throughput-16"]),
        Part(suite: .graph, shapes: ["steady"]),
    ]
    nonisolated static let partNames = parts.map(\.suite.rawValue)
    /// Runs per shape in a part (the median reported): fewer than a full bench's 7.
    nonisolated static let defaultRuns = 3
    /// How many times a part is measured at most: again while a figure is past its floor.
    nonisolated static let measurements = 3

    /// A bound a figure is held to.
    struct Floor: Equatable {
        let figure: String
        /// The ratio to the figure's baseline is judged; false: the value itself.
        let ofRatio: Bool
        /// At least `bound` (a rate) or at most (a time, a count).
        let atLeast: Bool
        let bound: Double

        func holds(_ measured: Double) -> Bool { atLeast ? measured >= bound : measured <= bound }

        var words: String { "\(ofRatio ? "ratio" : "value") \(atLeast ? "≥" : "≤") \(BenchFigure.format(bound))" }
    }

    /// The floors, each well past what main measures (docs/benchmarks.md,
    /// "The guard", says why each sits where it does).
    nonisolated static let floors = [
        Floor(figure: "log.turns-per-second.batch-1", ofRatio: true, atLeast: true, bound: 0.6),
        Floor(figure: "log.turns-per-second.batch-100", ofRatio: true, atLeast: true, bound: 0.6),
        Floor(figure: "cluster.round-trip.p50", ofRatio: true, atLeast: false, bound: 1.8),
        Floor(figure: "cluster.turns-per-second.clients-16", ofRatio: true, atLeast: true, bound: 0.01),
        Floor(figure: "cluster.leader-cpu-per-op.clients-16", ofRatio: true, atLeast: false, bound: 16),
        Floor(figure: "graph.steady.allocations", ofRatio: false, atLeast: false, bound: 0),
    ]

    /// A figure as a part's `--json` line gives it.
    struct Measured: Equatable {
        let name: String
        let value: Double
        let ratio: Double?
    }

    /// What one floor found.
    struct Verdict: Equatable {
        let floor: Floor
        /// The measured number the floor judges (the ratio or the value); nil: the figure was missing.
        let measured: Double?
        var holds: Bool { measured.map(floor.holds) ?? false }

        var line: String {
            let number = measured.map(BenchFigure.format) ?? "missing"
            return "\(padded(floor.figure, to: 38)) \(floor.ofRatio ? "ratio" : "value") \(number)   floor \(floor.words)   \(holds ? "ok" : "PAST")"
        }
    }

    /// Holds `figures` to the floors of `part`'s figures.
    nonisolated static func judge(_ figures: [Measured], floors: [Floor]) -> [Verdict] {
        floors.map { floor in
            let figure = figures.last { $0.name == floor.figure }
            return Verdict(floor: floor, measured: floor.ofRatio ? figure?.ratio : figure?.value)
        }
    }

    /// The floors that judge a part's figures (by the suite's name prefix).
    nonisolated static func floors(of part: Part) -> [Floor] {
        floors.filter { $0.figure.hasPrefix(part.suite.rawValue + ".") }
    }

    /// The figures in a part's `--json` output (lines that are not figures are skipped).
    nonisolated static func figures(inJSONLines output: String) -> [Measured] {
        output.split(separator: "\n").compactMap(BenchReport.Figure.init(jsonLine:)).map {
            Measured(name: $0.name, value: $0.value, ratio: $0.ratio)
        }
    }

    /// Runs the parts; the exit status.
    func run() throws -> Int32 {
        let start = ContinuousClock.now
        let chosen = QuickBench.parts.filter { options.only.isEmpty || options.only.contains($0.suite.rawValue) }
        var verdicts: [Verdict] = []
        for part in chosen {
            let partVerdicts = try QuickBench.measureUntilHeld(name: part.suite.rawValue, say: say) {
                QuickBench.judge(try measure(part), floors: QuickBench.floors(of: part))
            }
            for verdict in partVerdicts { report(verdict) }
            verdicts += partVerdicts
        }
        let past = verdicts.filter { !$0.holds }
        let seconds = Int(BenchFigure.seconds(ContinuousClock.now - start).rounded())
        if past.isEmpty {
            say("bench quick: all \(verdicts.count) figures within their floors (\(seconds) s)")
            return 0
        }
        say("bench quick: \(past.count) of \(verdicts.count) figures past their floors: \(past.map(\.floor.figure).joined(separator: ", ")) (\(seconds) s)")
        return 3
    }

    /// Measures a part (`measure`) until every figure has held once, at
    /// most `measurements` times. A figure holds when it held in any
    /// measurement; one past in all of them reports its last number.
    nonisolated static func measureUntilHeld(
        name: String, measurements: Int = QuickBench.measurements, say: (String) -> Void, _ measure: () throws -> [Verdict]
    ) rethrows -> [Verdict] {
        var verdicts = try measure()
        var measured = 1
        while measured < measurements, verdicts.contains(where: { !$0.holds }) {
            let past = verdicts.filter { !$0.holds }.map(\.floor.figure).joined(separator: ", ")
            say("\(name): \(past) past the floor; measuring \(name) again (\(measured + 1) of \(measurements))")
            let again = try measure()
            verdicts = zip(verdicts, again).map { earlier, later in earlier.holds ? earlier : later }
            measured += 1
        }
        return verdicts
    }

    /// Runs one part as a child (`bench SUITE --only … --runs N --json`) and reads its figures.
    private func measure(_ part: Part) throws -> [Measured] {
        var arguments = ["bench", part.suite.rawValue, "--only", part.shapes.joined(separator: ","), "--runs", String(options.runs), "--json"]
        if part.suite == .cluster {
            arguments += ["--ports", options.ports.description]
        }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        child.arguments = arguments
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.standardError
        try child.run()
        let bytes = output.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        guard child.terminationStatus == 0 else {
            throw QuickBenchError(message: "bench \(part.suite.rawValue) exited \(child.terminationStatus); the guard measured nothing for it")
        }
        return QuickBench.figures(inJSONLines: String(decoding: bytes, as: UTF8.self))
    }

    private func report(_ verdict: Verdict) {
        if options.json {
            let measured = verdict.measured.map(BenchFigure.format) ?? "null"
            print(
                "{\"name\": \"\(verdict.floor.figure)\", \"judged\": \"\(verdict.floor.ofRatio ? "ratio" : "value")\", \"measured\": \(measured), "
                    + "\"floor\": \(BenchFigure.format(verdict.floor.bound)), \"atLeast\": \(verdict.floor.atLeast), \"holds\": \(verdict.holds)}")
        } else {
            print(verdict.line)
        }
        fflush(nil)
    }

    /// Progress and the summary: stdout as text, stderr beside `--json`.
    private func say(_ line: String) {
        if options.json { printError(line) } else { print(line) }
        fflush(nil)
    }
}

struct QuickBenchError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
