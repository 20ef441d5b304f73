import Foundation

/// The page `cogd-lab drill --report DIR` writes: one self-contained HTML
/// file (inline SVG and CSS, no script, nothing fetched) with the applied
/// ops per second and the op latency (p50 and p99) per time bucket, the
/// faults drawn as shaded bands at their times, the recovery times and the
/// verdict lines — the drill's run drawn the way Jepsen draws a test's
/// latency with its nemesis bands.
///
/// `html(_:)` is a pure function of this value, tested with fixed input;
/// the drill fills it from its `DrillTimeline`.
struct DrillReport: Equatable {
    /// One time bucket of the run: what was answered in it.
    struct Bucket: Equatable {
        /// Requests answered `applied` in the bucket.
        var applied: Int
        /// The answered requests' latency (first send → answer), milliseconds; nil when none was answered.
        var latencyP50: Double?
        var latencyP99: Double?
    }

    /// A fault injected during the run, drawn as a band from `start` to `end` (seconds from the run's start).
    struct Fault: Equatable {
        enum Kind: String, CaseIterable {
            case leaderKill = "leader kill"
            case trap = "trap (leader died of ledger.trap)"
            case leaderExit = "leader stopped by itself (unexpected)"
            case workerKill = "worker kill"
            // The HA drill's faults (`HADrill.Fault`), named as `--faults` names them, and a node that stopped by itself.
            case haLeaderKill = "kill-leader"
            case haLeaderWipe = "wipe-leader"
            case haLeaderFreeze = "freeze-leader"
            case haStandbyKill = "kill-standby"
            case haEtcdFreeze = "freeze-etcd"
            case haCrashAfterShip = "crash-after-ship"
            case haNodeExit = "node exit"

            /// The band's label on the chart (the legend says the rest).
            var mark: String {
                switch self {
                case .leaderKill: "L"
                case .trap: "T"
                case .leaderExit: "X"
                case .workerKill: "W"
                case .haLeaderKill: "K"
                case .haLeaderWipe: "D"
                case .haLeaderFreeze: "F"
                case .haStandbyKill: "S"
                case .haEtcdFreeze: "E"
                case .haCrashAfterShip: "C"
                case .haNodeExit: "N"
                }
            }

            var color: String {
                switch self {
                case .leaderKill: "#d62728"
                case .trap: "#9467bd"
                case .leaderExit: "#8c564b"
                case .workerKill: "#ff7f0e"
                case .haLeaderKill: "#e377c2"
                case .haLeaderWipe: "#393b79"
                case .haLeaderFreeze: "#17becf"
                case .haStandbyKill: "#bcbd22"
                case .haEtcdFreeze: "#8c6d31"
                case .haCrashAfterShip: "#e7969c"
                case .haNodeExit: "#7f7f7f"
                }
            }
        }

        var kind: Kind
        var start: Double
        /// When it was over (leader: the first applied turn after the restart; group worker: its accounts greeted
        /// again elsewhere; HA: the first applied answer after it, or after etcd's thaw); nil: an instant (drawn narrow).
        var end: Double?
        /// What happened, in words (the band's tooltip and the table's row).
        var detail: String
    }

    var title: String
    /// The width of a bucket, seconds.
    var bucketSeconds: Double
    /// Bucket i covers [i × bucketSeconds, (i+1) × bucketSeconds) from the run's start.
    var buckets: [Bucket]
    var faults: [Fault]
    /// How long the load ran (the faults stop there; the chart goes on to the last answer), seconds.
    var loadSeconds: Double
    /// The recovery figures, one line each (`leader restart → first applied turn p50 …`).
    var recoveryLines: [String]
    /// The verdict, line by line, as the drill printed it.
    var verdictLines: [String]

    // The drawing's geometry (pixels).
    static let width = 960.0
    static let left = 80.0
    static let right = 30.0
    static var plotWidth: Double { width - left - right }
    static let throughputTop = 70.0
    static let throughputBottom = 270.0
    static let latencyTop = 320.0
    static let latencyBottom = 560.0
    static let height = 620.0

    /// How long the chart's time axis runs, seconds: to the end of the last bucket or fault, at least the load's.
    var duration: Double {
        let lastBucket = Double(buckets.count) * bucketSeconds
        let lastFault = faults.map { $0.end ?? $0.start }.max() ?? 0
        return max(loadSeconds, lastBucket, lastFault, bucketSeconds, 0.001)
    }

    /// The x of a time (seconds from the start).
    func x(_ seconds: Double) -> Double {
        Self.left + min(max(seconds, 0), duration) / duration * Self.plotWidth
    }

    /// The band of a fault: its x and width (at least 3 px, so an instant shows).
    func band(_ fault: Fault) -> (x: Double, width: Double) {
        let start = x(fault.start)
        let end = fault.end.map(x) ?? start
        return (start, max(3, end - start))
    }

    /// The page.
    static func html(_ report: DrillReport) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <title>\(escape(report.title))</title>
        <style>
        body { font-family: sans-serif; margin: 24px; color: #222; }
        h1 { font-size: 20px; }
        h2 { font-size: 16px; margin-top: 28px; }
        svg text { font-family: sans-serif; font-size: 12px; fill: #222; }
        table { border-collapse: collapse; font-size: 13px; }
        td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
        pre { background: #f6f6f6; padding: 10px; font-size: 12px; white-space: pre-wrap; }
        </style>
        </head>
        <body>
        <h1>\(escape(report.title))</h1>
        \(svg(report))
        <h2>Recovery</h2>
        <ul>
        \(report.recoveryLines.map { "<li>\(escape($0))</li>" }.joined(separator: "\n"))
        </ul>
        <h2>Faults</h2>
        \(faultTable(report))
        <h2>Verdict</h2>
        <pre>\(report.verdictLines.map(escape).joined(separator: "\n"))</pre>
        </body>
        </html>

        """
    }

    private static func faultTable(_ report: DrillReport) -> String {
        guard !report.faults.isEmpty else { return "<p>No faults.</p>" }
        let rows = report.faults.map { fault in
            let until = fault.end.map { String(format: "%.2f s", $0) } ?? "—"
            return "<tr><td>\(escape(fault.kind.mark))</td><td>\(escape(fault.kind.rawValue))</td><td>\(String(format: "%.2f s", fault.start))</td>"
                + "<td>\(until)</td><td>\(escape(fault.detail))</td></tr>"
        }
        return "<table>\n<tr><th>mark</th><th>fault</th><th>at</th><th>over at</th><th>what happened</th></tr>\n"
            + rows.joined(separator: "\n") + "\n</table>"
    }

    private static func svg(_ report: DrillReport) -> String {
        var parts: [String] = []
        parts.append(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(format(width))\" height=\"\(format(height))\" viewBox=\"0 0 \(format(width)) \(format(height))\" role=\"img\" aria-label=\"throughput and latency over time, faults as bands\">"
        )
        parts.append("<rect class=\"background\" x=\"0\" y=\"0\" width=\"\(format(width))\" height=\"\(format(height))\" fill=\"#ffffff\"/>")
        parts.append(legend(report))
        // The fault bands, behind the series, across both charts.
        for fault in report.faults {
            let band = report.band(fault)
            parts.append(
                "<rect class=\"band \(fault.kind.mark)\" x=\"\(format(band.x))\" y=\"\(format(throughputTop))\" width=\"\(format(band.width))\" height=\"\(format(latencyBottom - throughputTop))\" fill=\"\(fault.kind.color)\" fill-opacity=\"0.18\"><title>\(escape(fault.kind.rawValue)) at \(String(format: "%.2f", fault.start)) s: \(escape(fault.detail))</title></rect>"
            )
            parts.append(
                "<text class=\"band-label\" x=\"\(format(band.x + 2))\" y=\"\(format(throughputTop + 12))\" fill=\"\(fault.kind.color)\">\(escape(fault.kind.mark))</text>")
        }
        // Throughput: applied ops per second, every bucket (an empty one is 0).
        let rates = report.buckets.map { Double($0.applied) / report.bucketSeconds }
        let rateTop = niceCeiling(rates.max() ?? 0)
        parts.append(
            axes(
                report, top: throughputTop, bottom: throughputBottom, unit: "ops/s",
                title: "applied ops per second (per \(format(report.bucketSeconds * 1_000)) ms bucket)"))
        for step in 0...4 {
            let value = rateTop * Double(step) / 4
            let y = throughputBottom - (throughputBottom - throughputTop) * Double(step) / 4
            parts.append(gridLine(y: y, label: format(value)))
        }
        let ratePoints = rates.enumerated().map { index, rate in
            point(report.x((Double(index) + 0.5) * report.bucketSeconds), throughputBottom - rate / rateTop * (throughputBottom - throughputTop))
        }
        parts.append("<polyline class=\"throughput\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"\(ratePoints.joined(separator: " "))\"/>")
        // Latency: p50 and p99 on a log scale, for the buckets with answers.
        let latencies = report.buckets.flatMap { [$0.latencyP50, $0.latencyP99].compactMap { $0 } }.filter { $0 > 0 }
        let lowDecade = floor(log10(latencies.min() ?? 0.1))
        let highDecade = max(lowDecade + 1, ceil(log10(latencies.max() ?? 1)))
        func latencyY(_ milliseconds: Double) -> Double {
            let fraction = (log10(max(milliseconds, pow(10, lowDecade))) - lowDecade) / (highDecade - lowDecade)
            return latencyBottom - fraction * (latencyBottom - latencyTop)
        }
        parts.append(
            axes(
                report, top: latencyTop, bottom: latencyBottom, unit: "ms",
                title: "op latency, ms (log scale): first send → answer, p50 and p99 per bucket"))
        for decade in Int(lowDecade)...Int(highDecade) {
            let value = pow(10, Double(decade))
            parts.append(gridLine(y: latencyY(value), label: value >= 1 ? format(value) : String(format: "%g", value)))
        }
        for (name, color, pick) in [("p50", "#2ca02c", \Bucket.latencyP50), ("p99", "#111111", \Bucket.latencyP99)] {
            let points = report.buckets.enumerated().compactMap { index, bucket in
                bucket[keyPath: pick].map { point(report.x((Double(index) + 0.5) * report.bucketSeconds), latencyY($0)) }
            }
            parts.append(
                "<polyline class=\"latency \(name)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.5\" points=\"\(points.joined(separator: " "))\"/>")
        }
        parts.append("</svg>")
        return parts.joined(separator: "\n")
    }

    /// The frame of one chart, its time axis (seconds) and its title.
    private static func axes(_ report: DrillReport, top: Double, bottom: Double, unit: String, title: String) -> String {
        let middle = (top + bottom) / 2
        var parts = [
            "<text x=\"20\" y=\"\(format(middle))\" text-anchor=\"middle\" transform=\"rotate(-90 20 \(format(middle)))\">\(escape(unit))</text>",
            "<text x=\"\(format(left))\" y=\"\(format(top - 8))\" font-weight=\"bold\">\(escape(title))</text>",
            "<rect class=\"frame\" x=\"\(format(left))\" y=\"\(format(top))\" width=\"\(format(plotWidth))\" height=\"\(format(bottom - top))\" fill=\"none\" stroke=\"#888\"/>",
        ]
        let step = niceStep(report.duration / 10)
        var tick = 0.0
        while tick <= report.duration + 1e-9 {
            let x = report.x(tick)
            parts.append("<line x1=\"\(format(x))\" y1=\"\(format(bottom))\" x2=\"\(format(x))\" y2=\"\(format(bottom + 4))\" stroke=\"#888\"/>")
            parts.append("<text x=\"\(format(x))\" y=\"\(format(bottom + 16))\" text-anchor=\"middle\">\(format(tick))</text>")
            tick += step
        }
        parts.append("<text x=\"\(format(left + plotWidth))\" y=\"\(format(bottom + 30))\" text-anchor=\"end\">time since the drill started, s</text>")
        // Where the load (and the faults) stopped; after it the drill waits for the last answers.
        if report.loadSeconds < report.duration {
            let x = report.x(report.loadSeconds)
            parts.append(
                "<line class=\"load-end\" x1=\"\(format(x))\" y1=\"\(format(top))\" x2=\"\(format(x))\" y2=\"\(format(bottom))\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>")
            parts.append("<text x=\"\(format(x - 3))\" y=\"\(format(bottom - 6))\" text-anchor=\"end\" fill=\"#555\">load stops</text>")
        }
        return parts.joined(separator: "\n")
    }

    private static func gridLine(y: Double, label: String) -> String {
        "<line x1=\"\(format(left))\" y1=\"\(format(y))\" x2=\"\(format(left + plotWidth))\" y2=\"\(format(y))\" stroke=\"#e4e4e4\"/>"
            + "<text x=\"\(format(left - 6))\" y=\"\(format(y + 4))\" text-anchor=\"end\">\(escape(label))</text>"
    }

    /// The legend: the three series, then each kind of fault the run had.
    private static func legend(_ report: DrillReport) -> String {
        var parts: [String] = []
        var x = left
        let y = 22.0
        for (label, color) in [("applied ops/s", "#1f77b4"), ("latency p50", "#2ca02c"), ("latency p99", "#111111")] {
            parts.append("<line x1=\"\(format(x))\" y1=\"\(format(y - 4))\" x2=\"\(format(x + 18))\" y2=\"\(format(y - 4))\" stroke=\"\(color)\" stroke-width=\"2\"/>")
            parts.append("<text x=\"\(format(x + 22))\" y=\"\(format(y))\">\(escape(label))</text>")
            x += 30 + Double(label.count) * 7
        }
        x = left
        let kinds = Fault.Kind.allCases.filter { kind in report.faults.contains { $0.kind == kind } }
        if kinds.isEmpty { parts.append("<text x=\"\(format(x))\" y=\"\(format(y + 18))\">no faults</text>") }
        for kind in kinds {
            parts.append("<rect class=\"swatch\" x=\"\(format(x))\" y=\"\(format(y + 8))\" width=\"18\" height=\"12\" fill=\"\(kind.color)\" fill-opacity=\"0.3\"/>")
            parts.append("<text x=\"\(format(x + 22))\" y=\"\(format(y + 18))\">\(escape(kind.mark)): \(escape(kind.rawValue))</text>")
            x += 40 + Double(kind.rawValue.count) * 7
        }
        return parts.joined(separator: "\n")
    }

    /// A round number at or above `value` (1, 2, 2.5 or 5 × a power of ten), 1 at least.
    static func niceCeiling(_ value: Double) -> Double {
        guard value > 1 else { return 1 }
        let power = pow(10, floor(log10(value)))
        for factor in [1.0, 2, 2.5, 5, 10] where factor * power >= value { return factor * power }
        return 10 * power
    }

    /// A round step near `value` for the time axis (1, 2 or 5 × a power of ten).
    static func niceStep(_ value: Double) -> Double {
        guard value > 0 else { return 1 }
        let power = pow(10, floor(log10(value)))
        for factor in [1.0, 2, 5] where factor * power >= value { return factor * power }
        return 10 * power
    }

    private static func point(_ x: Double, _ y: Double) -> String { "\(format(x)),\(format(y))" }

    /// A coordinate or a tick: one decimal, none when whole.
    static func format(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(format: "%.1f", rounded)
    }

    /// Text made safe to put in HTML, in an element or an attribute.
    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default:
                // Control characters (C0, DEL and C1: a log line read from a file) become visible escapes.
                if character.unicodeScalars.allSatisfy({ ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || (0x7f...0x9f).contains($0.value) }) {
                    result += character.unicodeScalars.map { String(format: "\\u{%02x}", $0.value) }.joined()
                } else {
                    result.append(character)
                }
            }
        }
        return result
    }
}

/// What a drill collects for its report while it runs: per time bucket the
/// applied answers and a latency histogram (so memory is bounded by the
/// run's length over the bucket width, not by the requests), and the
/// faults at their times.
final class DrillTimeline {
    let start: ContinuousClock.Instant
    let bucketSeconds: Double
    private(set) var faults: [DrillReport.Fault] = []
    private var applied: [Int] = []
    /// Per bucket, answers counted in logarithmic latency bins (`bin(_:)`).
    private var histograms: [[UInt32]] = []

    /// Latency bins: bin i holds latencies up to `binBase × binGrowth^i` ms (the last, everything above).
    static let binBase = 0.05
    static let binGrowth = 1.15
    static let binCount = 96

    /// `seconds`: how long the load runs; the bucket is 250 ms, wider for a long run (at most about 480 buckets of load).
    init(start: ContinuousClock.Instant, seconds: Int) {
        self.start = start
        bucketSeconds = max(0.25, (Double(seconds) / 480 * 4).rounded(.up) / 4)
    }

    func seconds(_ instant: ContinuousClock.Instant) -> Double { BenchFigure.seconds(instant - start) }

    /// An answer at `instant` after `latency` since the request was first sent.
    func answer(at instant: ContinuousClock.Instant, latency: Duration, applied isApplied: Bool) {
        let index = Int(max(0, seconds(instant)) / bucketSeconds)
        // Bounded: a run's tail is cut at 30 s past the load (45 s in the HA drill), so the buckets are too.
        while histograms.count <= index {
            histograms.append([UInt32](repeating: 0, count: Self.binCount))
            applied.append(0)
        }
        histograms[index][Self.bin(BenchFigure.seconds(latency) * 1_000)] += 1
        if isApplied { applied[index] += 1 }
    }

    /// A fault starting now (its end, when known, set with `endFault`); returns its index.
    @discardableResult
    func fault(_ kind: DrillReport.Fault.Kind, at instant: ContinuousClock.Instant, detail: String) -> Int {
        faults.append(DrillReport.Fault(kind: kind, start: seconds(instant), end: nil, detail: detail))
        return faults.count - 1
    }

    func endFault(_ index: Int, at instant: ContinuousClock.Instant, detail: String) {
        faults[index].end = seconds(instant)
        faults[index].detail = detail
    }

    /// The run's page: the buckets and faults collected, with the drill's own title and lines.
    func report(title: String, loadSeconds: Int, recoveryLines: [String], verdictLines: [String]) -> DrillReport {
        DrillReport(
            title: title, bucketSeconds: bucketSeconds, buckets: buckets, faults: faults, loadSeconds: Double(loadSeconds),
            recoveryLines: recoveryLines, verdictLines: verdictLines)
    }

    /// The latency bin of `milliseconds`.
    static func bin(_ milliseconds: Double) -> Int {
        guard milliseconds > binBase else { return 0 }
        return min(binCount - 1, Int((log(milliseconds / binBase) / log(binGrowth)).rounded(.up)))
    }

    /// The upper edge of bin `index`, ms (what a percentile in that bin is reported as).
    static func binUpper(_ index: Int) -> Double { binBase * pow(binGrowth, Double(index)) }

    /// The buckets as the report draws them: applied count, latency p50 and p99 (nearest rank, to a bin's edge).
    var buckets: [DrillReport.Bucket] {
        zip(applied, histograms).map { applied, histogram in
            let total = histogram.reduce(0) { $0 + Int($1) }
            func percentile(_ fraction: Double) -> Double? {
                guard total > 0 else { return nil }
                let rank = max(1, Int((Double(total) * fraction).rounded(.up)))
                var seen = 0
                for (index, count) in histogram.enumerated() {
                    seen += Int(count)
                    if seen >= rank { return Self.binUpper(index) }
                }
                return Self.binUpper(Self.binCount - 1)
            }
            return DrillReport.Bucket(applied: applied, latencyP50: percentile(0.5), latencyP99: percentile(0.99))
        }
    }
}
