import Foundation
import Testing

@testable import CogLab

/// `cogd-lab bench SUITE --report DIR` (issue 30): the figures as usual,
/// and a self-contained page drawing each beside its baseline, rendered by
/// headless Chromium.
@Suite("cogd-lab bench --report", .timeLimit(.minutes(10)))
struct BenchReportTests {
    @Test func `a bench with --report prints its figures and writes a page whose rendered SVG draws each beside its baseline`() throws {
        let chromium = try #require(
            DrillReportRenderTests.chromium(),
            "chromium is not installed: run deploy/install-deps.sh (or apt-get install chromium, Debian's package) to render the report")
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let bench = try runCogdLab(
            ["bench", "graph", "--only", "steady,diamond", "--runs", "1", "--json", "--report", folder.path + "/report"], timeout: .seconds(90))
        #expect(bench.status == 0, "\(bench.stderr)")
        let page = folder.path + "/report/bench-graph.html"
        #expect(bench.stderr.contains("bench: report written to \(page)\n"), "\(bench.stderr)")
        let names = bench.stdout.split(separator: "\n").compactMap { BenchReport.Figure(jsonLine: $0)?.name }
        #expect(names == ["graph.steady", "graph.steady.allocations", "graph.diamond", "graph.peak-rss"])

        let rendered = try runProgram(
            chromium,
            ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(folder.path)/chromium", "--dump-dom", "file://" + page],
            timeout: .seconds(25))
        #expect(rendered.status == 0, "chromium: \(rendered.stderr)")
        let dom = rendered.stdout
        // Two baselined figures: a bar for each and for its baseline, and a ratio.
        let figureBars = DrillReportRenderTests.attribute("width", of: "rect", classPrefix: "bar figure", in: dom)
        let baselineBars = DrillReportRenderTests.attribute("width", of: "rect", classPrefix: "bar baseline", in: dom)
        #expect(figureBars.count == 2 && baselineBars.count == 2, "\(dom.prefix(2_000))")
        for (figure, baseline) in zip(figureBars, baselineBars) {
            let (drawn, base) = (try #require(Double(figure)), try #require(Double(baseline)))
            // Scaled per row: the larger of the two fills the row's 420 px.
            #expect(max(drawn, base) == 420 && min(drawn, base) > 0, "\(figure) beside \(baseline)")
        }
        #expect(dom.components(separatedBy: "class=\"ratio\"").count - 1 == 2)
        #expect(dom.contains("<td>graph.steady.allocations</td>") && dom.contains("<td>graph.peak-rss</td>"))
    }

    @Test func `text from a figure is escaped for the page`() {
        #expect(BenchReport.escape("a<b>&\"c\u{1b}[31m\u{9b}") == "a&lt;b&gt;&amp;&quot;c\\u{1b}[31m\\u{9b}")
        let figure = BenchReport.Figure(name: "x<y", value: 2, unit: "us", baseline: 1, ratio: 2, baselineKind: "raw")
        let page = BenchReport.html(suite: "log", figures: [figure], started: Date(timeIntervalSince1970: 0), exitStatus: 0)
        #expect(page.contains(">x&lt;y</text>") && !page.contains("x<y"))
    }

    @Test func `the child runs the same options with --json`() throws {
        var options = try LabParse.parseBench(["cluster", "--only", "round-trip", "--runs", "2", "--report", "out", "--ports", "30000-30100"])
        #expect(options.report == "out")
        #expect(BenchReport.childArguments(options) == ["bench", "cluster", "--runs", "2", "--json", "--only", "round-trip", "--ports", "30000-30100"])
        options = try LabParse.parseBench(["log", "--report=r"])
        #expect(BenchReport.childArguments(options) == ["bench", "log", "--runs", "7", "--json"])
    }
}
