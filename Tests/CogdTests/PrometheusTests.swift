import CogWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `deploy/prometheus/cogd-alerts.yml` and `deploy/grafana/cogd-dashboard.json`
/// against a real Prometheus (Debian's `prometheus`, `deploy/install-deps.sh`):
/// promtool accepts the rules; a Prometheus on a free loopback port scrapes a
/// real leader and worker, loads the rules (health ok), and answers every
/// PromQL expression of the rules and the dashboard, read from the files.
@Suite("Prometheus rules and the Grafana dashboard", .serialized)
struct PrometheusTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let rulesFile = repository.appendingPathComponent("deploy/prometheus/cogd-alerts.yml")
    static let dashboardFile = repository.appendingPathComponent("deploy/grafana/cogd-dashboard.json")

    /// `prometheus` or `promtool` from PATH or /usr/bin; the test fails naming the install script when missing.
    static func program(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") + ["/usr/bin"] {
            let candidate = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return URL(fileURLWithPath: candidate) }
        }
        return nil
    }

    /// GET `path` of the HTTP server at 127.0.0.1:`port` as HTTP/1.0 (so the
    /// answer comes whole, not chunked, and the server closes); status and body.
    static func get(_ port: Int, _ path: String) throws -> (status: Int, body: String) {
        try MetricsEndpointTests.exchange(port, Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8))
    }

    /// The JSON answer of Prometheus's API at `path`.
    static func api(_ port: Int, _ path: String) throws -> [String: Any] {
        let (status, body) = try get(port, path)
        let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        #expect(object != nil, "\(path): HTTP \(status), not JSON: \(body.prefix(500))")
        return object ?? [:]
    }

    /// `/api/v1/query` of `expression`: its status, result (or error) and the raw answer.
    static func query(_ port: Int, _ expression: String) throws -> (status: String, result: [Any], answer: [String: Any]) {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = expression.addingPercentEncoding(withAllowedCharacters: allowed) ?? expression
        let answer = try api(port, "/api/v1/query?query=\(encoded)")
        let data = answer["data"] as? [String: Any]
        return (answer["status"] as? String ?? "", data?["result"] as? [Any] ?? [], answer)
    }

    /// Every PromQL expression of the dashboard: its panels' targets, with
    /// Grafana's variables as a query over all instances would have them,
    /// and what its `label_values(METRIC, label)` variables ask for (METRIC).
    static func dashboardExpressions() throws -> [String] {
        let dashboard = try JSONSerialization.jsonObject(with: Data(contentsOf: dashboardFile)) as? [String: Any] ?? [:]
        var expressions: [String] = []
        func walk(_ panels: [[String: Any]]) {
            for panel in panels {
                for target in panel["targets"] as? [[String: Any]] ?? [] {
                    if let expression = target["expr"] as? String { expressions.append(expression) }
                }
                walk(panel["panels"] as? [[String: Any]] ?? [])
            }
        }
        walk(dashboard["panels"] as? [[String: Any]] ?? [])
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        for variable in variables where variable["type"] as? String == "query" {
            let definition = variable["definition"] as? String ?? ""
            if definition.hasPrefix("label_values("), let comma = definition.lastIndex(of: ",") {
                expressions.append(String(definition[definition.index(definition.startIndex, offsetBy: 13)..<comma]))
            } else {
                expressions.append(definition)
            }
        }
        return expressions.map {
            $0.replacingOccurrences(of: "$__rate_interval", with: "1m").replacingOccurrences(of: "${instance}", with: ".*")
                .replacingOccurrences(of: "$instance", with: ".*")
        }
    }

    /// The `cogd_…` metric names an expression reads (a histogram's by its family name).
    static func metricNames(in expression: String) -> Set<String> {
        let regex = try! NSRegularExpression(pattern: "cogd_[a-z_]+")
        let range = NSRange(expression.startIndex..., in: expression)
        return Set(regex.matches(in: expression, range: range).compactMap { Range($0.range, in: expression).map { String(expression[$0]) } })
    }

    @Test func `promtool accepts the alert and recording rules`() throws {
        guard let promtool = PrometheusTests.program("promtool") else {
            Issue.record("promtool is missing: run deploy/install-deps.sh (it installs Debian's prometheus, which ships promtool)")
            return
        }
        let result = try runProgram(promtool, ["check", "rules", PrometheusTests.rulesFile.path], timeout: .seconds(30))
        #expect(result.status == 0, "promtool check rules: \(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("SUCCESS"), "\(result.stdout)")
    }

    @Test func `the dashboard is Grafana 9+ JSON: timeseries and stat panels on the datasource variable, an instance variable`() throws {
        let dashboard = try JSONSerialization.jsonObject(with: Data(contentsOf: PrometheusTests.dashboardFile)) as? [String: Any] ?? [:]
        #expect((dashboard["schemaVersion"] as? Int ?? 0) >= 36, "Grafana 9's schema or later")
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        #expect(variables.contains { $0["name"] as? String == "datasource" && $0["type"] as? String == "datasource" && $0["query"] as? String == "prometheus" })
        #expect(variables.contains { $0["name"] as? String == "instance" && $0["type"] as? String == "query" })
        let panels = dashboard["panels"] as? [[String: Any]] ?? []
        let ids = panels.compactMap { $0["id"] as? Int }
        #expect(ids.count == panels.count && Set(ids).count == ids.count, "each panel has an id of its own")
        for panel in panels {
            let type = panel["type"] as? String ?? ""
            #expect(["row", "timeseries", "stat"].contains(type), "\(panel["title"] ?? ""): \(type)")
            #expect(panel["gridPos"] is [String: Any], "\(panel["title"] ?? "") has a place")
            guard type != "row" else { continue }
            let targets = panel["targets"] as? [[String: Any]] ?? []
            #expect(!targets.isEmpty, "\(panel["title"] ?? "") queries something")
            for source in [panel["datasource"]] + targets.map({ $0["datasource"] }) {
                #expect((source as? [String: Any])?["uid"] as? String == "${datasource}", "\(panel["title"] ?? ""): \(String(describing: source))")
            }
            for target in targets {
                #expect((target["expr"] as? String ?? "").contains("$instance"), "\(panel["title"] ?? ""): \(target["expr"] ?? "") follows the instance variable")
            }
        }
        let titles = Set(panels.compactMap { $0["title"] as? String })
        for wanted in [
            "Turns committed /s", "Requests /s by outcome", "Commit latency", "Worker lag (revisions, as the leader sees it)",
            "Applied revision per worker", "Rejections /s by code", "Errors /s by code", "Resident memory", "Scrape up", "Workers synced",
        ] {
            #expect(titles.contains(wanted), "a panel \(wanted)")
        }
    }

    @Test func `a real Prometheus scrapes a leader and a worker, loads the rules and answers every query of the rules and the dashboard`() throws {
        guard let prometheus = PrometheusTests.program("prometheus") else {
            Issue.record("prometheus is missing: run deploy/install-deps.sh (Debian's prometheus)")
            return
        }
        let folder = TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leaderMetrics = freePort()
        let workerMetrics = freePort()
        let prometheusPort = freePort()
        let leader = try ports.startLeader(data: folder.path + "/data", options: ["--metrics", "127.0.0.1:\(leaderMetrics)"])
        defer { leader.stop() }
        let worker = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "replica", "--metrics", "127.0.0.1:\(workerMetrics)",
        ])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("cogd worker w1: synced at revision") } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 100}"#).hasPrefix("applied revision 1"))

        let configuration = """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
              evaluation_interval: 1s
            rule_files:
              - \(PrometheusTests.rulesFile.path)
            scrape_configs:
              - job_name: cogd-leader
                static_configs:
                  - targets: ['127.0.0.1:\(leaderMetrics)']
              - job_name: cogd-worker
                static_configs:
                  - targets: ['127.0.0.1:\(workerMetrics)']

            """
        let configurationFile = folder.path + "/prometheus.yml"
        try configuration.write(toFile: configurationFile, atomically: true, encoding: .utf8)
        let started = ContinuousClock.now
        // Loopback only, a free port, a folder of its own; warnings only (its output is read at the end).
        let server = try CogdProcess(
            executable: prometheus,
            [
                "--config.file=\(configurationFile)", "--storage.tsdb.path=\(folder.path)/tsdb",
                "--web.listen-address=127.0.0.1:\(prometheusPort)", "--log.level=warn",
            ])
        defer { server.stop() }
        let ready = try waitUntil(timeout: .seconds(30)) {
            guard server.process.isRunning else { return true }
            return try PrometheusTests.get(prometheusPort, "/-/ready").status == 200
        }
        #expect(ready && server.process.isRunning, "Prometheus did not start: \(server.lines)")
        guard ready, server.process.isRunning else { return }

        // Both targets up.
        var targets: [[String: Any]] = []
        let up = try waitUntil(timeout: .seconds(30)) {
            targets = ((try PrometheusTests.api(prometheusPort, "/api/v1/targets")["data"] as? [String: Any])?["activeTargets"] as? [[String: Any]]) ?? []
            return targets.count == 2 && targets.allSatisfy { $0["health"] as? String == "up" }
        }
        #expect(up, "targets: \(targets)")
        // Traffic Prometheus sees change: turns and one rejection after the first scrape (a rate needs two samples).
        for account in ["bob", "carol", "dave"] {
            #expect(try ports.call("ledger.open", #"{"account": "\#(account)", "balance": 5}"#).hasPrefix("applied revision"))
        }
        #expect(try ports.call("ledger.nope", "{}").contains("rejected: unknown-op"))
        // cogd_leader_errors_total shows a code once seen (protocol/metrics.md): a heartbeat
        // from a stranger is answered hello-first, the error every worker meets after a leader restart.
        let stranger = try RawPeer(endpoint: ports.requests)
        let answer = try stranger.exchange(.heartbeat(worker: "stranger", revision: 0))
        guard case .error(let error)? = answer, error.code == "hello-first" else {
            Issue.record("a stranger's heartbeat: \(String(describing: answer))")
            return
        }
        // Every rule group loaded and evaluated: health ok.
        let ruleCount = try String(contentsOf: PrometheusTests.rulesFile, encoding: .utf8).split(separator: "\n")
            .filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("- alert:") || $0.trimmingCharacters(in: .whitespaces).hasPrefix("- record:") }.count
        var rules: [[String: Any]] = []
        var groups: [[String: Any]] = []
        let evaluated = try waitUntil(timeout: .seconds(30)) {
            groups = ((try PrometheusTests.api(prometheusPort, "/api/v1/rules")["data"] as? [String: Any])?["groups"] as? [[String: Any]]) ?? []
            rules = groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
            return rules.count == ruleCount && rules.allSatisfy { $0["health"] as? String == "ok" }
        }
        #expect(ruleCount > 20)
        #expect(evaluated, "rules not all loaded (\(rules.count) of \(ruleCount)) with health ok: \(rules.filter { $0["health"] as? String != "ok" })")
        #expect(Set(groups.compactMap { $0["name"] as? String }) == ["cogd-recording", "cogd-alerts"])
        // Let a few scrapes pass the traffic above.
        usleep(3_000_000)

        // Every metric the rules read exists in Prometheus (a misspelt name would be an alert that never fires).
        let ruleExpressions = rules.compactMap { $0["query"] as? String }
        #expect(ruleExpressions.count == ruleCount)
        let allNames = ruleExpressions.reduce(into: Set<String>()) { $0.formUnion(PrometheusTests.metricNames(in: $1)) }
        for name in allNames.sorted() {
            let (status, result, answer) = try PrometheusTests.query(prometheusPort, #"count({__name__=~"\#(name)(_bucket)?"})"#)
            #expect(status == "success" && !result.isEmpty, "the rules read \(name), which no target shows: \(answer)")
        }
        // Each rule's expression evaluates; in this healthy cluster no alert's condition holds
        // (the rejection above is one: under CogdRejectionsRising's 3 a minute over 5 min).
        for rule in rules {
            let expression = rule["query"] as? String ?? ""
            let (status, result, answer) = try PrometheusTests.query(prometheusPort, expression)
            #expect(status == "success", "\(rule["name"] ?? ""): \(expression): \(answer)")
            if rule["type"] as? String == "alerting", rule["name"] as? String != "CogdRejectionsRising" {
                #expect(result.isEmpty, "alert \(rule["name"] ?? "") holds in a healthy cluster: \(expression) → \(result)")
            }
            if rule["type"] as? String == "recording" {
                #expect(!result.isEmpty, "recording rule \(rule["name"] ?? ""): \(expression) is empty")
            }
        }
        // Every dashboard query evaluates and returns series.
        let dashboardExpressions = try PrometheusTests.dashboardExpressions()
        #expect(dashboardExpressions.count > 20)
        for expression in dashboardExpressions {
            let (status, result, answer) = try PrometheusTests.query(prometheusPort, expression)
            #expect(status == "success", "dashboard: \(expression): \(answer)")
            #expect(!result.isEmpty, "dashboard: \(expression) returns no series")
        }
        // The rejection shows in the dashboard's panel by code.
        let (_, rejections, _) = try PrometheusTests.query(prometheusPort, #"sum by (code) (rate(cogd_leader_rejections_total[1m])) > 0"#)
        #expect("\(rejections)".contains("unknown-op"), "\(rejections)")

        // An alert that should hold does: the worker stopped, CogdWorkerDown's condition holds and the alert is pending.
        let workerDown = rules.first { $0["name"] as? String == "CogdWorkerDown" }?["query"] as? String ?? "missing"
        worker.stop()
        var pending: [[String: Any]] = []
        let seen = try waitUntil(timeout: .seconds(20)) {
            pending = ((try PrometheusTests.api(prometheusPort, "/api/v1/alerts")["data"] as? [String: Any])?["alerts"] as? [[String: Any]]) ?? []
            return pending.contains { ($0["labels"] as? [String: Any])?["alertname"] as? String == "CogdWorkerDown" }
        }
        #expect(seen, "CogdWorkerDown not pending after the worker stopped: \(pending)")
        #expect(try !PrometheusTests.query(prometheusPort, workerDown).result.isEmpty, "\(workerDown)")
        let firing = pending.filter { $0["state"] as? String == "firing" }
        #expect(firing.isEmpty, "alerts firing in a healthy cluster: \(firing)")

        server.stop()
        #expect(!server.process.isRunning)
        print("PrometheusTests: Prometheus ran \(ContinuousClock.now - started); \(ruleCount) rules, \(dashboardExpressions.count) dashboard queries")
    }
}
