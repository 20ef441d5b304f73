import Foundation
import Testing

/// `cogd get` on a data folder a real leader writes, and through the
/// leader's snapshot (`--leader`); loopback only, every process stopped.
@Suite("cogd get prints current values")
struct GetCommandTests {
    /// A leader over a fresh folder with two accounts (alice 70, bob 35 after
    /// a transfer) and a journal line holding an escape sequence: revision 4.
    private static func startLedger(_ folder: TemporaryFolder, _ ports: ClusterPorts, options: [String] = []) throws -> CogdProcess {
        let leader = try ports.startLeader(data: folder.path, options: options)
        for (op, argument) in [
            ("ledger.open", #"{"account": "alice", "balance": 100}"#), ("ledger.open", #"{"account": "bob", "balance": 5}"#),
            ("ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 30}"#), ("trails.journal", #""bell\u001b[2J""#),
        ] {
            let call = try runCogd(["call", op, argument, "--leader", ports.requests])
            #expect(call.status == 0 && call.stdout.hasPrefix("applied revision"), "\(op): \(call)")
        }
        return leader
    }

    @Test func `get reads a box, one key and a keyless value from the folder of a running leader`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try GetCommandTests.startLedger(folder, ports)
        defer { leader.stop() }
        func get(_ arguments: String...) throws -> (status: Int32, stdout: String, stderr: String) {
            try runCogd(["get"] + arguments + ["--data", folder.path])
        }

        let box = try get("ledger.balance")
        // In the state table's key order: CBOR's, shorter text first.
        #expect(box.status == 0 && box.stdout == "ledger.balance[\"bob\"] = 35\nledger.balance[\"alice\"] = 70\n" && box.stderr.isEmpty, "\(box)")
        let one = try get("ledger.balance", #""alice""#)
        #expect(one.status == 0 && one.stdout == "ledger.balance[\"alice\"] = 70\n", "\(one)")
        let accounts = try get("ledger.accounts")
        #expect(accounts.status == 0 && accounts.stdout == "ledger.accounts = [\"alice\", \"bob\"]\n", "\(accounts)")
        // A value from the file is escaped for the terminal: the escape sequence prints as text.
        let journal = try get("trails.journal")
        #expect(journal.status == 0 && journal.stdout == "trails.journal = [\"bell\\u{1B}[2J\"]\n", "\(journal)")

        let json = try get("ledger.balance", "--json")
        #expect(json.status == 0, "\(json)")
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(object?["name"] as? String == "ledger.balance" && object?["revision"] as? Int == 4, "\(json.stdout)")
        let entries = object?["entries"] as? [[String: Any]] ?? []
        #expect(entries.map { "\($0["key"] ?? "")=\($0["value"] ?? "")" } == ["bob=35", "alice=70"], "\(json.stdout)")
        let keyless = try get("ledger.accounts", "--json")
        #expect(keyless.stdout == "{\"name\": \"ledger.accounts\", \"revision\": 4, \"entries\": [{\"key\": null, \"value\": [\"alice\", \"bob\"]}]}\n", "\(keyless)")
        let escapedJSON = try get("trails.journal", "--json")
        #expect(escapedJSON.stdout.contains(#"["bell\u001b[2J"]"#) && !escapedJSON.stdout.contains("\u{1B}"), "\(escapedJSON)")

        // Nothing stored: said on stderr, exit 3.
        let missingKey = try get("ledger.balance", #""zed""#)
        #expect(missingKey.status == 3 && missingKey.stdout.isEmpty, "\(missingKey)")
        #expect(missingKey.stderr.hasPrefix("`ledger.balance[\"zed\"]` has no stored value at revision 4: never written, or released"), "\(missingKey.stderr)")
        let neverWritten = try get("trails.hikeSeconds")
        #expect(neverWritten.status == 3 && neverWritten.stderr.hasPrefix("`trails.hikeSeconds` has no stored value at revision 4"), "\(neverWritten)")
        let emptyBox = try get("ledger.greeted", "--json")
        #expect(emptyBox.status == 3 && emptyBox.stdout == "{\"name\": \"ledger.greeted\", \"revision\": 4, \"entries\": []}\n", "\(emptyBox)")
        #expect(emptyBox.stderr.contains("has no key with a stored value"), "\(emptyBox)")

        // No such name, a key for a keyless source, a key that is not JSON.
        let unknown = try get("ledger.nope")
        #expect(unknown.status == 1 && unknown.stdout.isEmpty, "\(unknown)")
        #expect(unknown.stderr.hasPrefix("Error: no durable source named `ledger.nope`: ") && unknown.stderr.contains("ledger.balance"), "\(unknown.stderr)")
        let hostile = try get("evil\u{1B}[2J")
        #expect(hostile.status == 1 && hostile.stderr.contains("`evil\\u{1B}[2J`") && !hostile.stderr.contains("\u{1B}"), "\(hostile)")
        let computed = try get("ledger.wealthy")
        #expect(computed.status == 1 && computed.stderr.contains("is an automatic cog"), "\(computed)")
        let keyForOne = try get("ledger.accounts", #""alice""#)
        #expect(keyForOne.status == 1 && keyForOne.stderr == "Error: `ledger.accounts` holds one value, not a value per key: leave out the key\n", "\(keyForOne)")
        let notJSON = try get("ledger.balance", "alice")
        #expect(notJSON.status == 64 && notJSON.stderr.hasPrefix("Error: the key is not JSON (a text key is '\"alice\"')"), "\(notJSON)")
    }

    @Test func `get --leader reads the same from the leader's snapshot, and says when nothing answers`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        // Small snapshot parts, and accounts with long names: the state comes in several parts.
        let leader = try GetCommandTests.startLedger(folder, ports, options: ["--snapshot-part-bytes", "1024"])
        defer { leader.stop() }
        for index in 1...12 {
            let account = String(repeating: "x", count: 100) + "\(index)"
            let call = try runCogd(["call", "ledger.open", #"{"account": "\#(account)", "balance": \#(index)}"#, "--leader", ports.requests])
            #expect(call.status == 0, "\(call)")
        }
        let many = try runCogd(["get", "ledger.balance", "--leader", ports.requests])
        #expect(many.status == 0 && many.stdout.split(separator: "\n").count == 14, "\(many)")
        for arguments in [["ledger.balance"], ["ledger.balance", #""bob""#], ["trails.journal", "--json"], ["ledger.greeted"]] {
            let fromFolder = try runCogd(["get"] + arguments + ["--data", folder.path])
            let fromLeader = try runCogd(["get"] + arguments + ["--leader", ports.requests])
            #expect(fromLeader.status == fromFolder.status && fromLeader.stdout == fromFolder.stdout, "\(arguments): \(fromLeader) vs \(fromFolder)")
            #expect(fromLeader.stderr == fromFolder.stderr, "\(arguments)")
        }
        let unknown = try runCogd(["get", "ledger.nope", "--leader", ports.requests])
        #expect(unknown.status == 1 && unknown.stderr.hasPrefix("Error: no durable source named `ledger.nope`"), "\(unknown)")

        let port = freePort()
        let silent = try runCogd(["get", "ledger.balance", "--leader", "127.0.0.1:\(port)", "--timeout", "0.5"], timeout: .seconds(20))
        #expect(silent.status == 4 && silent.stdout.isEmpty, "\(silent)")
        #expect(silent.stderr.hasPrefix("Error: no answer from the leader at tcp://127.0.0.1:\(port) within 0.5 s"), "\(silent)")
    }

    @Test func `get --leader and tail --connect say hello as tools: status lists them, and as they close they say goodbye, logged at DEBUG`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let metrics = freePort()
        // A long heartbeat timeout: whatever drops a tool within the test's waits is its goodbye.
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 120, options: ["--metrics", "127.0.0.1:\(metrics)", "--log-level", "debug"])
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "replica")
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("cogd worker w1: synced at revision 0") } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let get = try runCogd(["get", "ledger.balance", "--leader", ports.requests])
        #expect(get.status == 0 && get.stdout == "ledger.balance[\"alice\"] = 5\n", "\(get)")
        let getLeft = leader.waitForLine(timeout: .seconds(20)) { $0.contains("tool get-") && $0.contains(" left") }
        #expect(
            getLeft?.range(
                of: #" DEBUG cogd leader: tool get-[0-9A-Fa-f-]{36} left \(said goodbye; a tool holds no scope instance\)$"#,
                options: .regularExpression) != nil, "\(leader.lines)")
        #expect(leader.lines.contains { $0.contains(" DEBUG cogd leader: tool get-") && $0.hasSuffix(" connected (cogd get, tail --connect or call --name)") }, "\(leader.lines)")
        func statusLines() throws -> [String] {
            try runCogd(["status", "--leader", ports.requests]).stdout.split(separator: "\n").map(String.init)
        }
        #expect(try !statusLines().contains { $0.contains("get-") }, "gone at once, not at the heartbeat timeout")

        // A tail --connect that catches up says hello as a tool and holds it while it follows.
        let tail = try CogdProcess(["tail", "--connect", ports.turns, "--leader", ports.requests, "--from", "1", "--count", "2"])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.contains("ledger.open") } != nil, "\(tail.lines)")
        let lines = try statusLines()
        #expect(lines.contains("workers   1"), "\(lines)")
        #expect(lines.contains { $0.hasPrefix("tools     1 (cogd get / tail --connect") }, "\(lines)")
        #expect(lines.contains { $0.range(of: #"^  tail-[0-9A-Fa-f-]{36}: tool, heard [0-9.]+s ago$"#, options: .regularExpression) != nil }, "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("  tail-") && $0.contains("lag") }, "a tool is not shown lagging: \(lines)")
        let json = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let workers = object?["workers"] as? [[String: Any]] ?? []
        #expect(workers.first { $0["name"] as? String == "w1" }.map { $0["tool"] == nil } == true, "\(json.stdout)")
        #expect(workers.first { ($0["name"] as? String)?.hasPrefix("tail-") == true }?["tool"] as? Bool == true, "\(json.stdout)")
        // Nor is it a worker to the metrics: one connected worker, no lag gauge for the tool.
        let (samples, _) = try MetricsEndpointTests.scrape(metrics)
        #expect(samples["cogd_leader_connected_workers"] == 1, "\(samples)")
        #expect(samples[#"cogd_leader_worker_lag_revisions{worker="w1"}"#] != nil, "\(samples)")
        #expect(!samples.keys.contains { $0.contains("tail-") }, "\(samples)")
        // Its second turn ends it (--count 2): it says goodbye as it closes.
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 1}"#).hasPrefix("applied revision 2"))
        waitForExit(tail.process, timeout: .seconds(20))
        #expect(!tail.process.isRunning && tail.process.terminationStatus == 0, "\(tail.lines)")
        let tailLeft = leader.waitForLine(timeout: .seconds(20)) { $0.contains("tool tail-") && $0.contains(" left") }
        #expect(tailLeft?.contains(" DEBUG cogd leader: tool tail-") == true && tailLeft?.contains("(said goodbye;") == true, "\(leader.lines)")
        #expect(try !statusLines().contains { $0.hasPrefix("tools") || $0.contains("tail-") }, "\(leader.lines)")
        #expect(!leader.lines.contains { $0.contains(" WARN ") && ($0.contains("get-") || $0.contains("tail-")) }, "\(leader.lines)")

        // Following until Ctrl-C: the same goodbye, and the exit status of an interrupted program.
        let follower = try CogdProcess(["tail", "--connect", ports.turns, "--leader", ports.requests, "--from", "2"])
        defer { follower.stop() }
        #expect(follower.waitForLine { $0.contains("ledger.open") } != nil, "\(follower.lines)")
        #expect(try statusLines().contains { $0.hasPrefix("  tail-") }, "listed while it follows")
        follower.interrupt()
        waitForExit(follower.process, timeout: .seconds(20))
        #expect(!follower.process.isRunning && follower.process.terminationStatus == 130, "\(follower.lines)")
        #expect(
            leader.waitForLine(timeout: .seconds(20)) { $0.contains("tool tail-") && $0.contains(" left (said goodbye;") && $0 != tailLeft } != nil,
            "\(leader.lines)")
        #expect(try !statusLines().contains { $0.hasPrefix("tools") || $0.contains("tail-") }, "\(leader.lines)")
    }

    @Test func `a tail --connect left following heartbeats: listed past the heartbeat timeout, and its goodbye counts no rejoin`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 3)
        defer { leader.stop() }
        // An empty log: it says hello as it asks for revision 1, then waits for it.
        let tail = try CogdProcess(["tail", "--connect", ports.turns, "--leader", ports.requests, "--from", "1"])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.contains("waiting for revision 1") } != nil, "\(tail.lines)")
        #expect(leader.waitForLine { $0.contains("tool tail-") && $0.contains(" connected") } != nil, "\(leader.lines)")
        // Twice the heartbeat timeout: a tool that did not heartbeat would have been given up by then.
        usleep(6_000_000)
        let status = try runCogd(["status", "--leader", ports.requests]).stdout.split(separator: "\n").map(String.init)
        #expect(status.contains { $0.range(of: #"^  tail-[0-9A-Fa-f-]{36}: tool, heard [0-9.]+s ago$"#, options: .regularExpression) != nil }, "\(status)")
        #expect(try ports.errorCounts()["hello-first"] == nil)
        // A leader restarted under it: its heartbeat is refused hello-first, and it says hello again (listed again).
        leader.interrupt()
        #expect(leader.waitForLine { $0.contains("cogd leader: stopped at revision 0") } != nil, "\(leader.lines)")
        leader.stop()
        leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 3)
        #expect(leader.waitForLine { $0.contains("tool tail-") && $0.contains(" connected") } != nil, "\(leader.lines)")
        #expect(
            waitUntil { (try? runCogd(["status", "--leader", ports.requests]).stdout)?.contains("\n  tail-") == true }, "listed again")
        let rejoins = try ports.errorCounts()["hello-first"] ?? 0
        #expect(rejoins >= 1, "its heartbeat after the restart was refused")
        tail.interrupt()
        waitForExit(tail.process, timeout: .seconds(20))
        #expect(!tail.process.isRunning && tail.process.terminationStatus == 130, "\(tail.lines)")
        #expect(leader.waitForLine { $0.contains("tool tail-") && $0.contains(" left (said goodbye;") } != nil, "\(leader.lines)")
        #expect(leader.lines.filter { $0.contains("tool tail-") && $0.contains(" left") }.count == 1, "left once, by its goodbye: \(leader.lines)")
        let errors = try ports.errorCounts()
        #expect(errors["hello-first"] == rejoins && errors["send-dropped"] == nil, "the goodbye counted nothing: \(errors)")
        #expect(!leader.lines.contains { $0.contains(" WARN ") }, "\(leader.lines)")
    }
}
