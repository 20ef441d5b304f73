import Foundation
import Testing

/// A real drill's `--report` page, rendered by headless Chromium (Debian's
/// `chromium`, installed by `deploy/install-deps.sh`): what the browser
/// built from the page holds the latency series and the fault bands.
@Suite("cogd-lab drill --report, rendered", .timeLimit(.minutes(5)))
struct DrillReportRenderTests {
    /// Chromium on the PATH (or Debian's place for it); nil when not installed.
    static func chromium() -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") + ["/usr/bin"] {
            for name in ["chromium", "chromium-browser"] {
                let candidate = "\(folder)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return URL(fileURLWithPath: candidate) }
            }
        }
        return nil
    }

    /// The values of `attribute` in every element `<tag …>` whose class starts with `classPrefix`.
    static func attribute(_ attribute: String, of tag: String, classPrefix: String, in html: String) -> [String] {
        html.components(separatedBy: "<\(tag) ").dropFirst().compactMap { element -> String? in
            let head = element.prefix { $0 != ">" }
            guard head.contains("class=\"\(classPrefix)") else { return nil }
            guard let range = head.range(of: "\(attribute)=\"") else { return nil }
            return String(head[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    /// What Chromium lays out for the report at `page`: a copy with a
    /// script of the test's own appended writes, for each fault band and
    /// each latency series, its box on the screen, its fill or stroke and
    /// its opacity into the DOM it dumps.
    static func measure(page: String, chromium: URL, folder: String) throws -> [String: Any] {
        let script = """
            <script>
            const box = (element) => {
              const rectangle = element.getBoundingClientRect();
              const style = getComputedStyle(element);
              return {width: rectangle.width, height: rectangle.height, fill: style.fill, stroke: style.stroke,
                      opacity: Number(style.fillOpacity) * Number(style.opacity), visibility: style.visibility};
            };
            const measured = {
              bands: [...document.querySelectorAll('rect[class^="band"]')].map(box),
              latency: [...document.querySelectorAll('polyline[class^="latency"]')].map(box),
            };
            const out = document.createElement('pre');
            out.id = 'measured';
            out.textContent = JSON.stringify(measured);
            document.body.appendChild(out);
            </script>
            """
        let html = try String(contentsOfFile: page, encoding: .utf8)
        let copy = folder + "/measured.html"
        try html.replacingOccurrences(of: "</body>", with: script + "</body>").write(toFile: copy, atomically: true, encoding: .utf8)
        let rendered = try runProgram(
            chromium,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(folder)/chromium-measure", "--window-size=1000,1400",
                "--dump-dom", "file://" + copy,
            ],
            timeout: .seconds(25))
        #expect(rendered.status == 0, "chromium: \(rendered.stderr)")
        guard let start = rendered.stdout.range(of: "<pre id=\"measured\">"),
            let end = rendered.stdout[start.upperBound...].range(of: "</pre>")
        else {
            Issue.record("the measuring script wrote nothing: \(rendered.stdout.suffix(1_000))")
            return [:]
        }
        let text = String(rendered.stdout[start.upperBound..<end.lowerBound]).replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&amp;", with: "&")
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    @Test func `a 6 s drill with kills writes a page whose rendered SVG has a latency series and a band per fault`() throws {
        let chromium = try #require(
            Self.chromium(),
            "chromium is not installed: run deploy/install-deps.sh (or apt-get install chromium, Debian's package) to render the drill's report")
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let drill = try runCogdLab(
            [
                "drill", "--workers", "2", "--seconds", "6", "--kill-leader-every", "2", "--kill-worker-every", "3", "--trap-every", "0",
                "--seed", "9", "--report", folder.path + "/report", "--json",
            ],
            timeout: .seconds(60))
        #expect(drill.status == 0, "\(drill.stdout)\(drill.stderr)")
        let verdict = try #require(try JSONSerialization.jsonObject(with: Data(drill.stdout.utf8)) as? [String: Any], "\(drill.stdout)")
        let page = try #require(verdict["report"] as? String, "\(verdict)")
        #expect(page == folder.path + "/report/drill-report.html")
        #expect(drill.stderr.contains("drill: report written to \(page)\n"), "\(drill.stderr)")
        let leaderKills = try #require(verdict["leaderKills"] as? Int)
        let workerKills = try #require(verdict["workerKills"] as? Int)
        #expect(leaderKills >= 1 && workerKills >= 1, "kills on: \(verdict)")

        // Rendered: Chromium loads the file, builds the DOM and prints it (bounded: it is killed at the deadline).
        let started = ContinuousClock.now
        let rendered = try runProgram(
            chromium,
            ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(folder.path)/chromium", "--dump-dom", "file://" + page],
            timeout: .seconds(25))
        let took = ContinuousClock.now - started
        #expect(rendered.status == 0, "chromium: \(rendered.stderr)")
        #expect(took < .seconds(25), "chromium took \(took)")
        let dom = rendered.stdout
        #expect(dom.contains("<svg"), "\(dom.prefix(2_000))")
        let latency = Self.attribute("points", of: "polyline", classPrefix: "latency", in: dom)
        #expect(latency.count == 2, "p50 and p99 series")
        for points in latency { #expect(points.split(separator: " ").count >= 12, "a point per bucket with answers: \(points)") }
        let throughput = Self.attribute("points", of: "polyline", classPrefix: "throughput", in: dom)
        #expect(throughput.count == 1 && throughput[0].split(separator: " ").count >= 20, "a point per 250 ms bucket over 6 s")
        // One band per fault: each leader kill (L), each worker kill (W); no traps here.
        let bands = Self.attribute("class", of: "rect", classPrefix: "band", in: dom)
        #expect(bands.filter { $0 == "band L" }.count == leaderKills, "\(bands)")
        #expect(bands.filter { $0 == "band W" }.count == workerKills, "\(bands)")
        #expect(bands.count == leaderKills + workerKills, "\(bands)")
        // Each band inside the plot (80 … 930 px), at least 3 px wide.
        for (x, width) in zip(
            Self.attribute("x", of: "rect", classPrefix: "band", in: dom), Self.attribute("width", of: "rect", classPrefix: "band", in: dom))
        {
            let left = try #require(Double(x))
            let wide = try #require(Double(width))
            #expect(left >= 80 && left + wide <= 930.5 && wide >= 3, "band at \(x), \(width) wide")
        }
        // Drawn: a copy of the page with a measuring script of the test's own (the page has none)
        // asks Chromium for each band's and series' laid-out box, fill and opacity.
        let measured = try Self.measure(page: page, chromium: chromium, folder: folder.path)
        let drawnBands = try #require(measured["bands"] as? [[String: Any]], "\(measured)")
        #expect(drawnBands.count == leaderKills + workerKills, "\(drawnBands)")
        for band in drawnBands {
            let (width, height) = (band["width"] as? Double ?? 0, band["height"] as? Double ?? 0)
            let opacity = band["opacity"] as? Double ?? 0
            #expect(width >= 3 && height >= 100 && opacity > 0 && band["fill"] as? String != "none", "a visible band: \(band)")
        }
        let drawnLatency = try #require(measured["latency"] as? [[String: Any]], "\(measured)")
        #expect(drawnLatency.count == 2, "\(drawnLatency)")
        for series in drawnLatency {
            #expect((series["width"] as? Double ?? 0) > 400 && (series["height"] as? Double ?? 0) > 5, "a drawn latency series: \(series)")
            #expect(series["stroke"] as? String != "none", "\(series)")
        }
        #expect(dom.contains("leader restart → first applied turn"), "the recovery times")
        #expect(dom.contains("drill verdict (seed 9)") && dom.contains("PASS"), "the verdict")
        #expect(!dom.lowercased().contains("<script"))
    }
}
