import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Every line a leader or worker prints is an event of its operator log:
/// with a timestamp and a level in text, one JSON object under
/// `--log-format json` — from its first line to the one it stops with.
@Suite(.timeLimit(.minutes(10)))
struct LogLinesTests {
    /// Everything `process` wrote, after a SIGTERM and its exit.
    static func stopAndRead(_ process: CogdProcess) -> [String] {
        process.stop()
        _ = process.waitForLine { _ in false }  // moves what is left into `lines`
        return process.lines
    }

    @Test func `under --log-format json a leader's and a worker's whole output, start to SIGTERM, is one JSON event a line`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leaderMetrics = freePort()
        let workerMetrics = freePort()
        let leader = try ports.startLeader(
            data: folder.path, options: ["--log-format", "json", "--metrics", "127.0.0.1:\(leaderMetrics)", "--rig", "ledger"])
        defer { leader.stop() }
        let worker = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger", "--group", "w1", "--log-format", "json",
            "--metrics", "127.0.0.1:\(workerMetrics)",
        ])
        defer { worker.stop() }
        #expect(worker.waitForLine { logEvent($0)?["event"] as? String == "synced" } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 7}"#).contains("applied revision 1"))
        // The ledger rig's own line (`ledger total 7`) is an event too.
        #expect(worker.waitForLine { logEvent($0)?["line"] as? String == "ledger total 7" } != nil, "\(worker.lines)")
        // The worker first: its stop line comes before the leader's.
        let workerLines = Self.stopAndRead(worker)
        let leaderLines = Self.stopAndRead(leader)

        for (who, lines) in [("leader", leaderLines), ("worker", workerLines)] {
            #expect(!lines.isEmpty)
            for line in lines {
                let event = logEvent(line)
                #expect(event != nil, "\(who) wrote a line that is not a JSON object: \(line)")
                #expect(
                    (event?["time"] as? String)?.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil,
                    "\(line)")
                #expect(["debug", "info", "warn", "error"].contains(event?["level"] as? String ?? ""), "\(line)")
                #expect(event?["event"] is String && event?["message"] is String, "\(line)")
            }
        }
        let leaderEvents = leaderLines.compactMap(logEvent)
        let workerEvents = workerLines.compactMap(logEvent)
        func first(_ name: String, in events: [[String: Any]]) -> [String: Any]? { events.first { $0["event"] as? String == name } }

        // What the leader serves, and where: the first event, its values as fields.
        let serving = leaderEvents.first
        #expect(serving?["event"] as? String == "serving", "\(leaderLines)")
        #expect(serving?["source"] as? String == "cogd leader")
        #expect(serving?["requests"] as? String == ports.requests && serving?["turns"] as? String == ports.turns, "\(leaderLines)")
        #expect(serving?["data"] as? String == folder.path && serving?["rig"] as? String == "ledger")
        #expect(serving?["revision"] as? Int == 0 && serving?["authentication"] as? String == "loopback")
        #expect((serving?["message"] as? String)?.hasPrefix("data \(folder.path), requests \(ports.requests), turns ") == true)
        #expect(first("placement", in: leaderEvents) != nil && first("retention", in: leaderEvents) != nil, "\(leaderLines)")
        // The folder did not exist: the leader says it made it (a mistyped --data would otherwise serve an empty log silently).
        let made = first("new-folder", in: leaderEvents)
        #expect(made?["data"] as? String == folder.path && made?["level"] as? String == "info", "\(leaderLines)")
        #expect((made?["message"] as? String)?.hasPrefix("created data folder \(folder.path): a new, empty log") == true, "\(leaderLines)")
        #expect(first("metrics", in: leaderEvents)?["address"] as? String == "127.0.0.1:\(leaderMetrics)", "\(leaderLines)")
        // The worker said goodbye as it stopped: its mechanisms' roots retired in a record of their own, revision 2.
        let left = first("worker-left", in: leaderEvents)
        #expect(left?["worker"] as? String == "w1" && left?["reason"] as? String == "goodbye", "\(leaderLines)")
        let leaderStop = leaderEvents.last
        #expect(leaderStop?["event"] as? String == "stopped" && leaderStop?["revision"] as? Int == 2, "\(leaderLines)")
        #expect(leaderStop?["message"] as? String == "stopped at revision 2")

        let started = workerEvents.first
        #expect(started?["event"] as? String == "started" && started?["source"] as? String == "cogd worker w1", "\(workerLines)")
        #expect(started?["leader"] as? String == ports.requests && started?["rig"] as? String == "ledger" && started?["group"] as? String == "w1")
        #expect(first("metrics", in: workerEvents)?["address"] as? String == "127.0.0.1:\(workerMetrics)", "\(workerLines)")
        let workerStop = workerEvents.last
        #expect(workerStop?["event"] as? String == "stopped" && workerStop?["revision"] as? Int == 1, "\(workerLines)")
    }

    @Test func `in text every line has the time and level before who speaks, the start and stop lines included`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1")
        defer { worker.stop() }
        let workerLines = Self.stopAndRead(worker)
        let leaderLines = Self.stopAndRead(leader)
        let stamp = #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO |WARN |ERROR) "#
        for line in leaderLines {
            #expect(line.range(of: stamp + "cogd leader: ", options: .regularExpression) != nil, "\(line)")
        }
        for line in workerLines {
            #expect(line.range(of: stamp + "cogd worker w1: ", options: .regularExpression) != nil, "\(line)")
        }
        #expect(leaderLines.first?.range(of: stamp + "cogd leader: data \(folder.path), requests ", options: .regularExpression) != nil)
        // Revision 1: the record retiring the worker's roots as it said goodbye.
        #expect(leaderLines.contains { $0.hasSuffix(" INFO  cogd leader: worker w1 left (said goodbye as it stopped); its scope instances retire") })
        #expect(leaderLines.last?.hasSuffix(" INFO  cogd leader: stopped at revision 1") == true, "\(leaderLines)")
        #expect(workerLines.first?.hasSuffix(" INFO  cogd worker w1: leader \(ports.requests), rig ledger, group w1") == true, "\(workerLines)")
        #expect(workerLines.last?.hasSuffix(" INFO  cogd worker w1: stopped at revision 0") == true, "\(workerLines)")
    }

    @Test func `a heartbeat timeout under 2 s is warned of at start (workers beat once a second); 2 s or more is not`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let short = try ports.startLeader(data: folder.path, heartbeatTimeout: 1)
        let shortLines = Self.stopAndRead(short)
        #expect(
            shortLines.contains {
                $0.hasSuffix(
                    " WARN  cogd leader: --heartbeat-timeout 1.0 s leaves no room for a late heartbeat (workers send one a second): "
                        + "healthy workers will be given up now and then; 2 s or more keeps them")
            }, "\(shortLines)")
        let enough = try ports.startLeader(data: folder.path, heartbeatTimeout: 2)
        let enoughLines = Self.stopAndRead(enough)
        #expect(!enoughLines.contains { $0.contains("--heartbeat-timeout") }, "\(enoughLines)")
    }

    @Test func `a leader that cannot start says why as an error event under json, as an Error line in text`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let exposed = "tcp://0.0.0.0:\(freePort())"
        let json = try runCogd(["leader", "--data", folder.path, "--requests", exposed, "--log-format", "json"])
        #expect(json.status == 1)
        let lines = (json.stdout + json.stderr).split(separator: "\n").map(String.init)
        #expect(lines.count == 1, "\(lines)")
        let event = lines.first.flatMap(logEvent)
        #expect(event?["event"] as? String == "failed" && event?["level"] as? String == "error", "\(lines)")
        #expect((event?["message"] as? String)?.contains("serves without authentication") == true, "\(lines)")
        let text = try runCogd(["leader", "--data", folder.path, "--requests", exposed])
        #expect(text.status == 1 && text.stderr.hasPrefix("Error: cogd leader serves without authentication; binding "), "\(text.stderr)")
    }
}
