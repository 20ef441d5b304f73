import CogdCommandLine
import Foundation

/// `cogd-lab bench SUITE --report DIR`: the suite runs as a child of this
/// executable (`bench SUITE … --json`, the same options), its figures are
/// printed here as they come (text, or JSON with `--json`), and a page is
/// written to `DIR/bench-SUITE.html`: one self-contained file, inline SVG,
/// nothing fetched, each figure drawn beside its baseline of the same run
/// (two bars and the ratio), the figures without one in a table.
struct BenchReport {
    let options: BenchOptions
    let folder: String

    /// A figure as the child's `--json` line gives it.
    struct Figure: Equatable {
        let name: String
        let value: Double
        let unit: String
        let baseline: Double?
        let ratio: Double?
        let baselineKind: String?

        init?(jsonLine line: Substring) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let name = object["name"] as? String, let value = (object["value"] as? NSNumber)?.doubleValue
            else { return nil }
            self.name = name
            self.value = value
            unit = object["unit"] as? String ?? ""
            baseline = (object["baseline"] as? NSNumber)?.doubleValue
            ratio = (object["ratio"] as? NSNumber)?.doubleValue
            baselineKind = object["baselineKind"] as? String
        }

        init(name: String, value: Double, unit: String, baseline: Double? = nil, ratio: Double? = nil, baselineKind: String? = nil) {
            self.name = name
            self.value = value
            self.unit = unit
            self.baseline = baseline
            self.ratio = ratio
            self.baselineKind = baselineKind
        }
    }

    /// The child's arguments: these options again, with `--json` and without `--report`.
    static func childArguments(_ options: BenchOptions) -> [String] {
        var arguments = ["bench", options.suite.rawValue, "--runs", String(options.runs), "--json"]
        if !options.only.isEmpty { arguments += ["--only", options.only.joined(separator: ",")] }
        if options.leaderSpinWaitMicroseconds > 0 { arguments += ["--leader-spin-wait", String(options.leaderSpinWaitMicroseconds)] }
        if options.curve { arguments.append("--curve") }
        if options.standby { arguments += ["--standby", "--failovers", String(options.failovers)] }
        if options.suite == .retention {
            arguments += [
                "--retain-turns", String(options.retainTurns), "--total-turns", String(options.totalTurns), "--sample-every",
                String(options.sampleEvery),
            ]
        }
        if BenchOptions.suitesWithPorts.contains(options.suite) { arguments += ["--ports", options.ports.description] }
        return arguments
    }

    /// Runs the suite, prints its figures, writes the page; the child's exit status.
    func run() throws -> Int32 {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let started = Date()
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        child.arguments = Self.childArguments(options)
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.standardError
        try child.run()
        var figures: [Figure] = []
        var pending = Data()
        let reader = output.fileHandleForReading
        // Line by line as the child prints them: a long suite shows progress.
        while case let chunk = reader.availableData, !chunk.isEmpty {
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                show(line, into: &figures)
            }
        }
        if !pending.isEmpty { show(String(decoding: pending, as: UTF8.self), into: &figures) }
        child.waitUntilExit()
        let page = (folder as NSString).appendingPathComponent("bench-\(options.suite.rawValue).html")
        try BenchReport.html(suite: options.suite.rawValue, figures: figures, started: started, exitStatus: child.terminationStatus)
            .write(toFile: page, atomically: true, encoding: .utf8)
        printError("bench: report written to \(page)")
        return child.terminationStatus
    }

    /// Prints one line of the child's output as this run prints it, keeping a figure.
    private func show(_ line: String, into figures: inout [Figure]) {
        guard let figure = Figure(jsonLine: line[...]) else {
            print(line)
            return
        }
        figures.append(figure)
        if options.json {
            print(line)
        } else {
            BenchFigure(name: figure.name, value: figure.value, unit: figure.unit, baseline: figure.baseline, baselineKind: figure.baselineKind)
                .report(json: false, nameWidth: 44)
        }
        fflush(nil)
    }

    // MARK: The page

    static let width = 960.0
    static let labelWidth = 330.0
    static let barLeft = 340.0
    static let barWidth = 420.0
    static let rowHeight = 44.0

    /// The page: the baselined figures as bar pairs in one SVG, the others in a table.
    static func html(suite: String, figures: [Figure], started: Date, exitStatus: Int32) -> String {
        let baselined = figures.filter { $0.baseline != nil && $0.baseline! > 0 }
        let plain = figures.filter { $0.baseline == nil || $0.baseline! <= 0 }
        let when = ISO8601DateFormatter().string(from: started)
        var page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>cogd-lab bench \(escape(suite))</title>
            <style>
            body { font-family: sans-serif; margin: 24px; color: #222; }
            table { border-collapse: collapse; } td, th { padding: 3px 10px; text-align: left; border-bottom: 1px solid #ddd; }
            .note { color: #555; }
            </style></head><body>
            <h1>cogd-lab bench \(escape(suite))</h1>
            <p class="note">Started \(escape(when)); \(figures.count) figure\(figures.count == 1 ? "" : "s"); the suite exited \(exitStatus).
            Each figure is drawn beside its baseline measured in the same run (grey), with their ratio; a ratio means the same on a
            slow machine and a fast one. Bars are scaled per row.</p>

            """
        if !baselined.isEmpty { page += svg(baselined) + "\n" }
        if !plain.isEmpty {
            page += "<h2>Figures without a baseline</h2>\n<table><tr><th>figure</th><th>value</th></tr>\n"
            for figure in plain {
                page += "<tr class=\"plain\"><td>\(escape(figure.name))</td><td>\(BenchFigure.format(figure.value)) \(escape(figure.unit))</td></tr>\n"
            }
            page += "</table>\n"
        }
        return page + "</body></html>\n"
    }

    private static func svg(_ figures: [Figure]) -> String {
        let height = 20 + Double(figures.count) * rowHeight
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" font-size=\"12\">\n"
        for (index, figure) in figures.enumerated() {
            let top = 10 + Double(index) * rowHeight
            let baseline = figure.baseline ?? 0
            let scale = barWidth / max(figure.value, baseline, .leastNonzeroMagnitude)
            let ratio = figure.ratio ?? figure.value / baseline
            let kind = figure.baselineKind ?? "raw"
            svg += "<text x=\"0\" y=\"\(format(top + 14))\">\(escape(figure.name))</text>\n"
            svg += "<text x=\"0\" y=\"\(format(top + 30))\" fill=\"#666\">\(escape(kind))</text>\n"
            svg += "<rect class=\"bar figure\" x=\"\(format(barLeft))\" y=\"\(format(top + 3))\" width=\"\(format(figure.value * scale))\" height=\"14\" fill=\"#36c\"/>\n"
            svg += "<rect class=\"bar baseline\" x=\"\(format(barLeft))\" y=\"\(format(top + 19))\" width=\"\(format(baseline * scale))\" height=\"14\" fill=\"#aaa\"/>\n"
            svg += "<text x=\"\(format(barLeft + barWidth + 8))\" y=\"\(format(top + 14))\">\(BenchFigure.format(figure.value)) \(escape(figure.unit))</text>\n"
            svg += "<text x=\"\(format(barLeft + barWidth + 8))\" y=\"\(format(top + 30))\" fill=\"#666\">\(BenchFigure.format(baseline)) \(escape(figure.unit))</text>\n"
            svg += "<text class=\"ratio\" x=\"\(format(width - 4))\" y=\"\(format(top + 22))\" text-anchor=\"end\" font-weight=\"bold\">\(BenchFigure.format(ratio))×</text>\n"
        }
        return svg + "</svg>"
    }

    private static func format(_ value: Double) -> String { String((value * 10).rounded() / 10) }

    /// Text for the page, escaped as the drill's report escapes it.
    static func escape(_ text: String) -> String { DrillReport.escape(text) }
}
