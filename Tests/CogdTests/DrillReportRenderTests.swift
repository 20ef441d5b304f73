import Foundation
import Testing

/// A real drill's `--report` page (the plain drill's and the HA drill's),
/// rendered by headless Chromium (Debian's `chromium`, installed by
/// `deploy/install-deps.sh`): what the browser built from the page holds the
/// latency series and the fault bands.
@Suite("cogd-lab drill --report, rendered", .timeLimit(.minutes(10)))
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

    /// Chromium, or a failure that says how to install it.
    static func requireChromium() throws -> URL {
        try #require(
            chromium(), "chromium is not installed: run deploy/install-deps.sh (or apt-get install chromium, Debian's package) to render the drill's report")
    }

    /// The DOM Chromium builds from the page at `page` (bounded: it is killed at the deadline).
    static func dom(page: String, chromium: URL, folder: String) throws -> String {
        let rendered = try runProgram(
            chromium,
            ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(folder)/chromium", "--dump-dom", "file://" + page],
            timeout: .seconds(25))
        #expect(rendered.status == 0, "chromium: \(rendered.stderr)")
        return rendered.stdout
    }

    /// Checks what Chromium drew of the page at `page`: `bands` fault bands, each a visible box (at least
    /// 3 px wide, a fill, an opacity above 0), and the p50 and p99 latency series, each a line across the plot.
    static func expectDrawn(page: String, bands: Int, chromium: URL, folder: String) throws {
        // A copy of the page with a measuring script of the test's own (the page has none)
        // asks Chromium for each band's and series' laid-out box, fill and opacity.
        let measured = try measure(page: page, chromium: chromium, folder: folder)
        let drawnBands = try #require(measured["bands"] as? [[String: Any]], "\(measured)")
        #expect(drawnBands.count == bands, "\(drawnBands)")
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
        let chromium = try Self.requireChromium()
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

        // Rendered: Chromium loads the file, builds the DOM and prints it.
        let started = ContinuousClock.now
        let dom = try Self.dom(page: page, chromium: chromium, folder: folder.path)
        let took = ContinuousClock.now - started
        #expect(took < .seconds(25), "chromium took \(took)")
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
        try Self.expectDrawn(page: page, bands: leaderKills + workerKills, chromium: chromium, folder: folder.path)
        #expect(dom.contains("leader restart → first applied turn"), "the recovery times")
        #expect(dom.contains("drill verdict (seed 9)") && dom.contains("PASS"), "the verdict")
        #expect(!dom.lowercased().contains("<script"))
    }

    @Test func `a short HA drill with --report writes one page whose rendered SVG has a latency series, a band per leader kill and the HA verdict`() throws {
        let chromium = try Self.requireChromium()
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let drill = try runCogdLab(
            ["drill", "--ha", "--seconds", "14", "--fault-every", "1", "--faults", "kill-leader", "--seed", "3", "--report", folder.path + "/report", "--json"],
            timeout: .seconds(120))
        let verdict = try #require(try JSONSerialization.jsonObject(with: Data(drill.stdout.utf8)) as? [String: Any], "\(drill.stdout)\(drill.stderr)")
        // No timing assertion: a verdict that fails only on the failover time (a loaded machine, debug binaries) is taken.
        let violations = verdict["violations"] as? [String] ?? ["none read"]
        #expect(drill.status == 0 || violations.allSatisfy { $0.hasPrefix("failover p99 ") }, "\(verdict)\(drill.stderr)")
        let page = try #require(verdict["report"] as? String, "\(verdict)")
        #expect(page == folder.path + "/report/drill-report.html")
        #expect(drill.stderr.contains("drill: report written to \(page)\n"), "\(drill.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path + "/report") == ["drill-report.html"], "one file")
        let kills = try #require((verdict["faults"] as? [String: Any])?["kill-leader"] as? Int, "\(verdict)")
        let exits = try #require(verdict["unplannedExits"] as? Int, "\(verdict)")
        #expect(kills >= 1, "a leader kill in 14 s: \(verdict)")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(!html.lowercased().contains("<script") && !html.contains("src=") && !html.contains("href="), "self-contained")

        let dom = try Self.dom(page: page, chromium: chromium, folder: folder.path)
        #expect(dom.contains("<svg"), "\(dom.prefix(2_000))")
        let latency = Self.attribute("points", of: "polyline", classPrefix: "latency", in: dom)
        #expect(latency.count == 2, "p50 and p99 series")
        for points in latency { #expect(points.split(separator: " ").count >= 12, "a point per bucket with answers: \(points)") }
        // A band per leader kill (K), from the SIGKILL to the first applied answer after it; a node that exited by itself would add an N.
        let bands = Self.attribute("class", of: "rect", classPrefix: "band", in: dom)
        #expect(bands.filter { $0 == "band K" }.count == kills, "\(bands)")
        #expect(bands.count == kills + exits, "\(bands)")
        #expect(dom.contains("K: kill-leader"), "the legend")
        try Self.expectDrawn(page: page, bands: kills + exits, chromium: chromium, folder: folder.path)
        #expect(dom.contains("failover (leader killed, frozen or crashed after shipping) → first applied answer: p50 "), "the failover times")
        #expect(dom.contains("(lease TTL 2 s; bar p99 ≤ 3000 ms)"), "beside the lease TTL")
        #expect(dom.contains("drill --ha verdict (seed 3)") && dom.contains("  lost             0"), "the verdict")
    }
}
