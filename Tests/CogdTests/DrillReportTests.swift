import Foundation
import Testing

@testable import CogLab

/// The drill's HTML report drawn from fixed input: the page is a pure
/// function of the series, the faults and the verdict.
@Suite("cogd-lab drill --report: the page")
struct DrillReportTests {
    /// Ten 1 s buckets; bucket 4 answered nothing; three faults.
    static let report = DrillReport(
        title: "drill <seed 1> & co",
        bucketSeconds: 1,
        buckets: (0..<10).map { index in
            index == 4
                ? DrillReport.Bucket(applied: 0, latencyP50: nil, latencyP99: nil)
                : DrillReport.Bucket(applied: 100 * (index + 1), latencyP50: 1 + Double(index), latencyP99: 10 * (1 + Double(index)))
        },
        faults: [
            DrillReport.Fault(kind: .leaderKill, start: 2.5, end: 3.5, detail: "SIGKILL; first applied turn 812 ms after the restart"),
            DrillReport.Fault(kind: .workerKill, start: 5, end: nil, detail: "drill-w0 <SIGKILL> & restarted"),
            DrillReport.Fault(kind: .trap, start: 7.5, end: 8, detail: "the leader died of ledger.trap"),
        ],
        loadSeconds: 10,
        recoveryLines: ["leader restart → first applied turn p50 812 ms, p99 812 ms"],
        verdictLines: ["drill verdict (seed 1)", "  reproduce        cogd-lab drill --data /tmp/a<b>&\"c\" --seed 1", "PASS"])

    /// The values of `attribute` in every element `<tag …>` of `html` whose class starts with `classPrefix`.
    static func attribute(_ attribute: String, of tag: String, classPrefix: String, in html: String) -> [String] {
        html.components(separatedBy: "<\(tag) ").dropFirst().compactMap { element -> String? in
            let head = element.prefix { $0 != ">" }
            guard head.contains("class=\"\(classPrefix)") else { return nil }
            guard let range = head.range(of: "\(attribute)=\"") else { return nil }
            return String(head[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    @Test func `the latency series have a point per bucket with answers, the throughput one per bucket`() {
        let html = DrillReport.html(Self.report)
        let latency = Self.attribute("points", of: "polyline", classPrefix: "latency", in: html)
        #expect(latency.count == 2, "p50 and p99")
        for points in latency { #expect(points.split(separator: " ").count == 9, "\(points)") }
        let throughput = Self.attribute("points", of: "polyline", classPrefix: "throughput", in: html)
        #expect(throughput.count == 1 && throughput[0].split(separator: " ").count == 10)
        // Bucket 0's point sits at its middle, 0.5 s: 80 + 0.05 × 850.
        #expect(latency[0].hasPrefix("122.5,"), "\(latency[0])")
        // Higher latency is higher on the page (a smaller y).
        let ys = latency[0].split(separator: " ").map { Double($0.split(separator: ",")[1])! }
        #expect(ys == ys.sorted(by: >), "\(ys)")
    }

    @Test func `each fault is one band at its time, across both charts, labelled, and the legend names each kind the run had`() {
        let html = DrillReport.html(Self.report)
        let xs = Self.attribute("x", of: "rect", classPrefix: "band", in: html)
        let widths = Self.attribute("width", of: "rect", classPrefix: "band", in: html)
        // x = 80 + t / 10 s × 850 px.
        #expect(xs == ["292.5", "505", "717.5"])
        #expect(widths == ["85", "3", "42.5"], "an instant is 3 px wide")
        #expect(Self.attribute("class", of: "rect", classPrefix: "band", in: html) == ["band L", "band W", "band T"])
        #expect(html.contains(">L</text>") && html.contains(">W</text>") && html.contains(">T</text>"))
        for kind in [DrillReport.Fault.Kind.leaderKill, .workerKill, .trap] {
            #expect(html.contains("\(kind.mark): \(DrillReport.escape(kind.rawValue))"))
        }
        #expect(!html.contains("X: "), "no leader stopped by itself in this run")
        var quiet = Self.report
        quiet.faults = []
        #expect(DrillReport.html(quiet).contains(">no faults</text>") && !DrillReport.html(quiet).contains("<rect class=\"band"))
        #expect(html.contains("applied ops per second"))
        #expect(html.contains("op latency, ms (log scale)"))
        #expect(html.contains("time since the drill started, s"))
    }

    @Test func `every text is escaped, and the page loads nothing and runs nothing`() {
        let html = DrillReport.html(Self.report)
        #expect(html.contains("<title>drill &lt;seed 1&gt; &amp; co</title>"))
        #expect(html.contains("drill-w0 &lt;SIGKILL&gt; &amp; restarted"))
        #expect(html.contains("cogd-lab drill --data /tmp/a&lt;b&gt;&amp;&quot;c&quot; --seed 1"))
        #expect(!html.contains("<b>"))
        #expect(!html.lowercased().contains("<script"))
        #expect(!html.contains("src=") && !html.contains("href=") && !html.contains("url("))
        #expect(html.contains("leader restart → first applied turn p50 812 ms"))
        #expect(DrillReport.escape("a\u{1b}[31mb") == "a\\u{1b}[31mb")
    }

    @Test func `every fault kind has its own mark and colour, each HA fault its own kind, and the HA kinds' legend fits in one row`() {
        let kinds = DrillReport.Fault.Kind.allCases
        #expect(Set(kinds.map(\.mark)).count == kinds.count)
        #expect(Set(kinds.map(\.color)).count == kinds.count)
        let haKinds = HADrill.Fault.allCases.map(\.reportKind)
        #expect(Set(haKinds).count == HADrill.Fault.allCases.count)
        #expect(haKinds.map(\.rawValue) == HADrill.Fault.allCases.map(\.rawValue), "named as --faults names them")
        var report = Self.report
        report.faults = (haKinds + [.haNodeExit]).enumerated().map { DrillReport.Fault(kind: $1, start: Double($0), end: nil, detail: "") }
        let html = DrillReport.html(report)
        let swatches = Self.attribute("x", of: "rect", classPrefix: "swatch", in: html).compactMap(Double.init)
        #expect(swatches.count == 7)
        // The last entry's text (about 7 px a character) ends inside the drawing.
        #expect((swatches.last ?? .infinity) + 22 + Double("N: node exit".count) * 7 <= DrillReport.width, "\(swatches)")
    }

    @Test func `the timeline keeps a histogram per bucket and reports p50 and p99 to a bin's edge`() {
        let start = ContinuousClock.now
        let timeline = DrillTimeline(start: start, seconds: 20)
        #expect(timeline.bucketSeconds == 0.25)
        #expect(DrillTimeline(start: start, seconds: 3_600).bucketSeconds == 7.5, "at most about 480 buckets")
        for index in 0..<100 {
            timeline.answer(at: start + .milliseconds(100), latency: .milliseconds(index < 98 ? 2 : 500), applied: index % 2 == 0)
        }
        timeline.answer(at: start + .milliseconds(600), latency: .milliseconds(40), applied: true)
        let buckets = timeline.buckets
        #expect(buckets.count == 3)
        #expect(buckets[0].applied == 50)
        let p50 = buckets[0].latencyP50!
        let p99 = buckets[0].latencyP99!
        #expect(p50 >= 2 && p50 < 2 * DrillTimeline.binGrowth, "\(p50)")
        #expect(p99 >= 500 && p99 < 500 * DrillTimeline.binGrowth, "\(p99)")
        #expect(buckets[1] == DrillReport.Bucket(applied: 0, latencyP50: nil, latencyP99: nil))
        #expect(buckets[2].applied == 1)
    }
}
