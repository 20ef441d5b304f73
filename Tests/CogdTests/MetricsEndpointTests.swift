import CogLog
import CogWire
import CogCodec
import CogProtocol
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `--metrics` on a real leader and worker, scraped over TCP and read by
/// the Prometheus project's own text parser (Debian's
/// python3-prometheus-client, `deploy/install-deps.sh`); `/healthz`,
/// `/readyz` and requests the server must refuse; the operator's log.
@Suite("Metrics, health and the operator's log", .serialized)
struct MetricsEndpointTests {
    /// Sends `request` to 127.0.0.1:`port` and reads until the server
    /// closes (bounded); returns the status code and body.
    static func exchange(_ port: Int, _ request: [UInt8]) throws -> (status: Int, body: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return (0, "connect failed: errno \(errno)") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let read = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if read <= 0 { break }
            response += chunk[0..<read]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let statusLine = text.split(separator: "\r\n").first, let headEnd = text.range(of: "\r\n\r\n") else { return (0, text) }
        let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, String(text[headEnd.upperBound...]))
    }

    static func get(_ port: Int, _ path: String, method: String = "GET") throws -> (status: Int, body: String) {
        try exchange(port, Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
    }

    /// `/metrics` of the server at `port`, parsed by prometheus_client:
    /// each sample as `name{label="value",…}` (labels sorted) → value, and
    /// each family's type by its name as the parser names it.
    static func scrape(_ port: Int) throws -> (samples: [String: Double], types: [String: String]) {
        let (status, body) = try get(port, "/metrics")
        #expect(status == 200, "\(body)")
        let folder = TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        defer { folder.cleanUp() }
        let file = folder.path + "/metrics.txt"
        try body.write(toFile: file, atomically: true, encoding: .utf8)
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            samples, types = {}, {}
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                types[family.name] = family.type
                for s in family.samples:
                    labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
                    samples[s.name + ("{" + labels + "}" if labels else "")] = s.value
            print(json.dumps({"samples": samples, "types": types}))
            """
        let result = try runBounded(URL(fileURLWithPath: ExternalClientTests.python()), ["-c", script, file])
        #expect(result.status == 0, "the parser refused the exposition: \(result.output)\n\(body)")
        let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        let samples = (object?["samples"] as? [String: Any] ?? [:]).compactMapValues { ($0 as? NSNumber)?.doubleValue }
        return (samples, object?["types"] as? [String: String] ?? [:])
    }

    @Test func `a leader and a worker serve metrics a Prometheus parser reads, with the counts a user expects`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leaderMetrics = freePort()
        let workerMetrics = freePort()
        let leader = try ports.startLeader(data: folder.path, options: ["--metrics", "127.0.0.1:\(leaderMetrics)"])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.hasSuffix(" cogd leader: metrics at http://127.0.0.1:\(leaderMetrics)/metrics (and /healthz, /readyz)") } != nil)
        let worker = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "replica", "--metrics", "127.0.0.1:\(workerMetrics)",
        ])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("cogd worker w1: synced at revision 0") } != nil, "\(worker.lines)")

        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 100}"#).hasPrefix("applied revision 1"))
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 5}"#, requestID: "ops#1").hasPrefix("applied revision 2"))
        // The same request again: answered from dedup, not run, and saying so.
        #expect(
            try ports.call("ledger.open", #"{"account": "bob", "balance": 5}"#, requestID: "ops#1")
                .hasPrefix("answered from an earlier request: applied at revision 2"))
        #expect(try ports.call("ledger.nope", "{}").contains("rejected: unknown-op"))

        let (leaderSamples, leaderTypes) = try MetricsEndpointTests.scrape(leaderMetrics)
        #expect(leaderSamples[#"cogd_leader_requests_total{outcome="applied"}"#] == 2, "\(leaderSamples)")
        #expect(leaderSamples[#"cogd_leader_requests_total{outcome="deduplicated"}"#] == 1)
        #expect(leaderSamples[#"cogd_leader_requests_total{outcome="rejected"}"#] == 1)
        #expect(leaderSamples[#"cogd_leader_requests_total{outcome="unchanged"}"#] == 0)
        #expect(leaderSamples[#"cogd_leader_rejections_total{code="unknown-op"}"#] == 1)
        #expect(leaderSamples[#"cogd_leader_rejections_total{code="bad-argument"}"#] == 0)
        #expect(leaderSamples["cogd_leader_dedup_hits_total"] == 1)
        #expect(leaderSamples["cogd_leader_connected_workers"] == 1)
        #expect(leaderSamples["cogd_leader_revision"] == 2)
        #expect(leaderSamples["cogd_leader_turns_committed_total"] == 2)
        #expect((leaderSamples["cogd_leader_commit_duration_seconds_count"] ?? 0) >= 2)
        #expect(leaderSamples[#"cogd_leader_commit_batch_turns_bucket{le="+Inf"}"#] == leaderSamples["cogd_leader_commit_batch_turns_count"])
        #expect(leaderSamples[#"cogd_leader_worker_lag_revisions{worker="w1"}"#] != nil)
        #expect((leaderSamples["cogd_leader_data_file_bytes"] ?? 0) > 0)
        #expect((leaderSamples["cogd_process_resident_memory_bytes"] ?? 0) > 1_000_000)
        #expect(leaderSamples["cogd_leader_snapshots_streamed_total"] == 1, "the worker's first sync")
        #expect(leaderTypes["cogd_leader_requests"] == "counter" && leaderTypes["cogd_leader_commit_duration_seconds"] == "histogram")
        #expect(leaderTypes["cogd_leader_connected_workers"] == "gauge")

        // The worker catches up with the leader's revision.
        var workerSamples: [String: Double] = [:]
        let caughtUp = try waitUntil {
            workerSamples = try MetricsEndpointTests.scrape(workerMetrics).samples
            return workerSamples["cogd_worker_applied_revision"] == leaderSamples["cogd_leader_revision"]
        }
        #expect(caughtUp, "\(workerSamples)")
        #expect(workerSamples["cogd_worker_synced"] == 1)
        #expect(workerSamples["cogd_worker_resyncs_total"] == 0)
        #expect(workerSamples["cogd_worker_reconnects_total"] == 0)
        #expect(workerSamples[#"cogd_worker_requests_total{outcome="applied"}"#] == 0, "the replica rig sends no ops")

        #expect(try MetricsEndpointTests.get(leaderMetrics, "/healthz") == (200, "ok\n"))
        #expect(try MetricsEndpointTests.get(workerMetrics, "/healthz") == (200, "ok\n"))
        let leaderReady = try MetricsEndpointTests.get(leaderMetrics, "/readyz")
        #expect(leaderReady.status == 200 && leaderReady.body.hasPrefix("ready: serving at \(ports.requests)"), "\(leaderReady)")
        let workerReady = try MetricsEndpointTests.get(workerMetrics, "/readyz")
        #expect(workerReady == (200, "ready: synced, applied revision 2, epoch 1\n"))
    }

    /// A connected TCP socket to 127.0.0.1:`port` (closed by the caller).
    static func connectSocket(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return fd
    }

    /// Reads what the server sends on `fd` until it closes (bounded).
    static func readAll(_ fd: Int32) -> String {
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let read = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if read <= 0 { break }
            response += chunk[0..<read]
        }
        return String(decoding: response, as: UTF8.self)
    }

    @Test func `idle and surplus connections are answered 408 and 503 and cost the server nothing after`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let port = freePort()
        let leader = try ports.startLeader(data: folder.path, options: ["--metrics", "127.0.0.1:\(port)"])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("cogd leader: metrics at") } != nil)
        // Sixteen connections that send half a request head and wait.
        let idle = (0..<16).map { _ in MetricsEndpointTests.connectSocket(port) }
        for fd in idle { _ = Array("GET /metr".utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
        usleep(300_000)
        // The seventeenth is turned away at once.
        let surplus = try MetricsEndpointTests.get(port, "/healthz")
        #expect(surplus.status == 503 && surplus.body.hasPrefix("too many connections (at most 16)"), "\(surplus)")
        // The sixteen get 408 once their 5 s are up, and are closed.
        let answers = idle.map { fd in
            defer { close(fd) }
            return MetricsEndpointTests.readAll(fd)
        }
        #expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 408 Request Timeout\r\n") }, "\(answers.first ?? "")")
        #expect(try MetricsEndpointTests.get(port, "/healthz") == (200, "ok\n"))
        let (samples, _) = try MetricsEndpointTests.scrape(port)
        #expect(samples[#"cogd_metrics_http_responses_total{code="408"}"#] == 16, "\(samples)")
        #expect(samples[#"cogd_metrics_http_responses_total{code="503"}"#] == 1)
    }

    @Test func `a metrics port in use stops a leader before it touches its folder, and a worker before it says hello`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        // Something listens on the metrics port already.
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let port = freePort()
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(taken, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0 && listen(taken, 4) == 0)
        let refused = try runCogd([
            "leader", "--data", folder.path + "/new", "--requests", ports.requests, "--turns", ports.turns, "--metrics", "127.0.0.1:\(port)",
        ])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("--metrics: cannot listen on 127.0.0.1:\(port): Address already in use"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("serving"), "nothing was served: \(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/new"), "no folder made, no epoch used")

        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try runCogd(["worker", "--leader", ports.requests, "--name", "q", "--metrics", "127.0.0.1:\(port)"])
        #expect(worker.status == 1)
        #expect(worker.stderr.contains("--metrics: cannot listen on 127.0.0.1:\(port)"), "\(worker.stderr)")
        #expect(leader.waitForLine(timeout: .seconds(1)) { $0.contains("worker q joined") } == nil, "the worker never said hello: \(leader.lines)")
    }

    @Test func `a worker counts its rejoin and re-sync after the leader restarts`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let workerMetrics = freePort()
        var leader = try ports.startLeader(data: folder.path)
        let worker = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "replica", "--metrics", "127.0.0.1:\(workerMetrics)",
        ])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("cogd worker w1: synced at revision 0, epoch 1") } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "a", "balance": 1}"#).hasPrefix("applied revision 1"))
        leader.interrupt()
        #expect(leader.waitForLine { $0.contains("cogd leader: stopped") } != nil)
        leader.stop()
        leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(worker.waitForLine(timeout: .seconds(30)) { $0.contains("cogd worker w1: synced at revision 1, epoch 2") } != nil, "\(worker.lines)")
        // The worker's heartbeat reached the new leader before its hello: told
        // hello-first, it said hello. The leader says so at INFO, not as an error.
        let rejoin = leader.waitForLine(timeout: .seconds(15)) { $0.contains("hello-first") }
        #expect(rejoin?.contains(" INFO  cogd leader: ") == true, "\(leader.lines)")
        #expect(rejoin?.contains("workers re-introducing themselves (as after a leader restart) say hello next") == true, "\(leader.lines)")
        #expect(!leader.lines.contains { $0.contains(" WARN ") && $0.contains("hello-first") }, "\(leader.lines)")
        let status = try runCogd(["status", "--leader", ports.requests])
        #expect(status.stdout.contains("\nerrors    none\n"), "\(status.stdout)")
        #expect(
            status.stdout.range(of: #"\nrejoins   hello-first \d+ \(workers re-introducing themselves"#, options: .regularExpression) != nil,
            "\(status.stdout)")
        let (samples, _) = try MetricsEndpointTests.scrape(workerMetrics)
        #expect(samples["cogd_worker_resyncs_total"] == 1, "\(samples)")
        #expect(samples["cogd_worker_reconnects_total"] == 1, "one rejoin, however many hellos it took: \(samples)")
        #expect(samples["cogd_worker_applied_revision"] == 1)
        #expect(try MetricsEndpointTests.get(workerMetrics, "/readyz") == (200, "ready: synced, applied revision 1, epoch 2\n"))
    }

    @Test func `a worker refused its name counts no reconnect for its retried hellos, nor for taking the name once free`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let holder = try ports.startWorker("w1", rig: "replica", group: "replicas")
        defer { holder.stop() }
        let port = freePort()
        let second = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "replica", "--group", "replicas", "--metrics", "127.0.0.1:\(port)",
        ])
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("the leader refuses this name") } != nil, "\(second.lines)")
        // Hellos retried (0.5 s, then 1 s, 2 s … apart), each refused name-in-use: several of them before the scrape.
        let retried = waitUntil(timeout: .seconds(20)) { ((try? ports.errorCounts())?["name-in-use"] ?? 0) >= 3 }
        #expect(retried, "\((try? ports.errorCounts()) ?? [:])")
        let refused = try MetricsEndpointTests.scrape(port).samples
        #expect(refused["cogd_worker_reconnects_total"] == 0, "\(refused)")
        holder.stop()
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("the name is free; this process holds it now") } != nil, "\(second.lines)")
        let joined = try MetricsEndpointTests.scrape(port).samples
        #expect(joined["cogd_worker_reconnects_total"] == 0, "its first join: \(joined)")
    }

    @Test func `the metrics server answers what it does not serve, refuses bad requests, and keeps serving`() throws {
        let port = freePort()
        let ports = ClusterPorts()
        // A worker with no leader: it serves, it is not ready.
        let worker = try CogdProcess(["worker", "--leader", ports.requests, "--name", "alone", "--metrics", "127.0.0.1:\(port)"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("metrics at http://127.0.0.1:\(port)/metrics") } != nil, "\(worker.lines)")
        let ready = try MetricsEndpointTests.get(port, "/readyz")
        #expect(ready == (503, "not ready: not synced yet: saying hello to the leader at \(ports.requests)\n"))
        #expect(try MetricsEndpointTests.get(port, "/healthz").status == 200)
        #expect(try MetricsEndpointTests.get(port, "/nothing-here").status == 404)
        #expect(try MetricsEndpointTests.get(port, "/metrics", method: "POST").status == 405)
        #expect(try MetricsEndpointTests.exchange(port, Array("GARBAGE\r\n\r\n".utf8)).status == 400)
        #expect(try MetricsEndpointTests.exchange(port, [0xff, 0xfe, 0x20, 0x2f, 0x20, 0x0d, 0x0a, 0x0d, 0x0a]).status == 400)
        let huge = "GET /metrics HTTP/1.1\r\nX-Filler: " + String(repeating: "a", count: 20_000) + "\r\n\r\n"
        #expect(try MetricsEndpointTests.exchange(port, Array(huge.utf8)).status == 431)
        // Still serving, and the refusals are counted.
        let (samples, _) = try MetricsEndpointTests.scrape(port)
        #expect(samples["cogd_worker_synced"] == 0)
        #expect(samples[#"cogd_metrics_http_responses_total{code="400"}"#] == 2, "\(samples)")
        #expect(samples[#"cogd_metrics_http_responses_total{code="431"}"#] == 1)
        #expect(samples[#"cogd_metrics_http_responses_total{code="404"}"#] == 1)
        #expect(samples[#"cogd_metrics_http_responses_total{code="405"}"#] == 1)
        #expect(worker.process.isRunning)
    }

    @Test func `a hello refused name-in-use is counted and logged as an error; an op rejected name-in-use as a rejection`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let port = freePort()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60, options: ["--metrics", "127.0.0.1:\(port)"])
        defer { leader.stop() }
        let holder = try RawPeer(endpoint: ports.requests)
        guard case .welcome? = try holder.exchange(.hello(worker: "w1", lastRevision: 0)) else {
            Issue.record("the holder was not welcomed")
            return
        }
        // Another connection says hello as w1: refused name-in-use, an error reply.
        let second = try RawPeer(endpoint: ports.requests)
        guard case .error(let refusal)? = try second.exchange(.hello(worker: "w1", lastRevision: 0)) else {
            Issue.record("no error reply to the second hello")
            return
        }
        #expect(refusal.code == "name-in-use")
        #expect(
            leader.waitForLine { $0.hasSuffix(" cogd leader: 1 message answered with the error name-in-use in the last 10 s or so (1 since start)") } != nil,
            "\(leader.lines)")
        var samples = try MetricsEndpointTests.scrape(port).samples
        #expect(samples[#"cogd_leader_errors_total{code="name-in-use"}"#] == 1, "\(samples)")
        #expect(samples[#"cogd_leader_rejections_total{code="name-in-use"}"#] == 0, "\(samples)")
        // An op in w1's name from that other connection: rejected name-in-use, a rejection.
        let op = OpRequest(request: RequestID(worker: "w1", sequence: 1), op: "ledger.open", argument: try CBOREncoder().encode("x"))
        guard case .reply(let reply)? = try second.exchange(.op(op)), case .rejected(let code, let detail) = reply.outcome else {
            Issue.record("no rejection of the op in a held name")
            return
        }
        #expect(code == "name-in-use", "\(code): \(detail)")
        #expect(
            leader.waitForLine { $0.hasSuffix(" cogd leader: 1 request rejected name-in-use in the last 10 s or so (1 since start)") } != nil,
            "\(leader.lines)")
        samples = try MetricsEndpointTests.scrape(port).samples
        #expect(samples[#"cogd_leader_errors_total{code="name-in-use"}"#] == 1, "\(samples)")
        #expect(samples[#"cogd_leader_rejections_total{code="name-in-use"}"#] == 1, "\(samples)")
        #expect(!leader.lines.contains { $0.contains("requests rejected name-in-use") || $0.contains("request rejected name-in-use in the last 10 s or so (2") })
    }

    @Test func `a request head over 8,192 bytes sent in one write is answered 431; one of exactly 8,192 bytes is served`() throws {
        let port = freePort()
        let ports = ClusterPorts()
        let worker = try CogdProcess(["worker", "--leader", ports.requests, "--name", "alone", "--metrics", "127.0.0.1:\(port)"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("metrics at http://127.0.0.1:\(port)/metrics") } != nil, "\(worker.lines)")
        /// A whole `GET /healthz` head of exactly `bytes` bytes, its closing blank line included.
        func head(_ bytes: Int) -> [UInt8] {
            let start = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: "
            let text = start + String(repeating: "a", count: bytes - start.utf8.count - 4) + "\r\n\r\n"
            #expect(text.utf8.count == bytes)
            return Array(text.utf8)
        }
        let over = try MetricsEndpointTests.exchange(port, head(9_000))
        #expect(over.status == 431, "\(over)")
        #expect(over.body == "request head over 8192 bytes\n")
        #expect(try MetricsEndpointTests.exchange(port, head(8_193)).status == 431)
        #expect(try MetricsEndpointTests.exchange(port, head(12_288)).status == 431)
        #expect(try MetricsEndpointTests.exchange(port, head(8_192)) == (200, "ok\n"))
        let (samples, _) = try MetricsEndpointTests.scrape(port)
        #expect(samples[#"cogd_metrics_http_responses_total{code="431"}"#] == 3, "\(samples)")
        #expect(samples[#"cogd_metrics_http_responses_total{code="200"}"#] == 1, "\(samples)")
        #expect(worker.process.isRunning)
    }

    @Test func `a leader logging JSON writes a parseable line for a worker joining and one for it timing out`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 1, options: ["--log-format", "json"])
        defer { leader.stop() }
        // A name with an escape sequence in it: in JSON, escaped and intact.
        let name = "w\u{1B}[2J"
        let worker = try ports.startWorker(name, rig: "replica", group: "replicas")  // a group refuses control characters
        worker.killHard()
        worker.stop()
        func event(_ name: String) -> [String: Any]? {
            leader.waitForLine(timeout: .seconds(15)) { $0.hasPrefix("{") && $0.contains("\"event\":\"\(name)\"") }.flatMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
        let joined = event("worker-joined")
        let streamed = event("snapshot-streamed")
        #expect(streamed?["level"] as? String == "info" && (streamed?["peer"] as? String)?.hasPrefix(name + "/") == true, "\(leader.lines)")
        #expect(joined?["level"] as? String == "info" && joined?["worker"] as? String == name, "\(leader.lines)")
        #expect((joined?["time"] as? String)?.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil)
        let timedOut = event("worker-timed-out")
        #expect(timedOut?["level"] as? String == "warn" && timedOut?["worker"] as? String == name, "\(leader.lines)")
        #expect(timedOut?["time"] is String)
        // Rejections are summarised per code, with their count.
        #expect(try ports.call("ledger.nope", "{}").contains("rejected: unknown-op"))
        let rejections = event("rejections")
        #expect(rejections?["code"] as? String == "unknown-op" && (rejections?["count"] as? Int) == 1, "\(leader.lines)")
        #expect(!leader.lines.contains { $0.contains("\u{1B}") }, "no raw escape reaches the log")
    }

    @Test func `a worker at the default level prints no line per revision; at debug it does`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let quiet = try CogdProcess(
            executable: cogdExecutable(), ["worker", "--leader", ports.requests, "--name", "quiet", "--rig", "replica"],
            environment: ["COGD_LOG_LEVEL": ""])
        defer { quiet.stop() }
        let chatty = try CogdProcess(["worker", "--leader", ports.requests, "--name", "chatty", "--rig", "replica", "--log-level", "debug"])
        defer { chatty.stop() }
        let synced = quiet.waitForLine { $0.contains("synced at revision 0") }
        let pattern = #"^\d{4}-\d\d-\d\dT[0-9:.]+Z INFO  cogd worker quiet: synced at revision 0, epoch 1$"#
        #expect((synced ?? "").range(of: pattern, options: .regularExpression) != nil, "\(quiet.lines)")
        #expect(chatty.waitForLine { $0.contains("synced at revision") } != nil)
        #expect(try ports.call("ledger.open", #"{"account": "a", "balance": 1}"#).hasPrefix("applied revision 1"))
        #expect(try ports.call("ledger.open", #"{"account": "b", "balance": 1}"#).hasPrefix("applied revision 2"))
        #expect(chatty.waitForLine { $0.hasSuffix(" DEBUG cogd worker chatty: applied 2") } != nil, "\(chatty.lines)")
        // The quiet one applied them too (the leader says so), and said nothing of it.
        #expect(
            try waitUntil {
                let status = try runCogd(["status", "--leader", ports.requests, "--json"])
                let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
                let workers = object?["workers"] as? [[String: Any]] ?? []
                return workers.contains { $0["name"] as? String == "quiet" && ($0["appliedRevision"] as? Int) == 2 }
            })
        quiet.interrupt()
        #expect(quiet.waitForLine { $0.hasSuffix(" cogd worker quiet: stopped at revision 2") } != nil)
        #expect(!quiet.lines.contains { $0.contains(": applied") }, "\(quiet.lines)")
    }
}
