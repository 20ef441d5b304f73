import CogCluster
import CogCodec
import CogLog
import CogWire
import Foundation
import Testing

@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

@Suite("tail --since, --connect --from and status --watch parse")
struct TailAndStatusParseTests {
    @Test func `--since takes an RFC 3339 time or a duration before now, and says both forms otherwise`() throws {
        guard case .tail(let utc) = try Command.parse(["tail", "--since", "2026-12-01T20:15:00Z"]) else { return }
        #expect(utc.since == .time(Date(timeIntervalSince1970: 1_796_156_100)))
        guard case .tail(let offset) = try Command.parse(["tail", "--since", "2026-12-01T21:15:00.5+01:00"]) else { return }
        #expect(offset.since == .time(Date(timeIntervalSince1970: 1_796_156_100.5)))
        guard case .tail(let spaced) = try Command.parse(["tail", "--since=2026-12-01 20:15:00z"]) else { return }
        #expect(spaced.since == .time(Date(timeIntervalSince1970: 1_796_156_100)))
        guard case .tail(let ago) = try Command.parse(["tail", "--since", "10m"]) else { return }
        #expect(ago.since == .ago(seconds: 600))
        #expect(TailSince.ago(seconds: 600).date(now: Date(timeIntervalSince1970: 1_000)) == Date(timeIntervalSince1970: 400))
        for text in ["yesterday", "10", "2026-12-01", "2026-12-01T20:15:00", "-5m"] {
            #expect(
                throws: Command.UsageError(
                    message: "--since takes an RFC 3339 time like 2026-12-01T20:15:00Z (or with an offset, +01:00) or a duration "
                        + "before now: a whole number and s, m, h or d (90s, 10m, 2h, 7d), not '\(text)'",
                    subcommand: "tail")
            ) { try Command.parse(["tail", "--since=\(text)"]) }
        }
        #expect(throws: Command.UsageError(message: "--since cannot be used with --from or --last: each says where to start", subcommand: "tail")) {
            try Command.parse(["tail", "--since", "1h", "--from", "3"])
        }
    }

    @Test func `--leader and --timeout go with --connect, whose catch-up endpoint defaults to COGD_LEADER`() throws {
        guard case .tail(let tail) = try Command.parse(["tail", "--connect", "127.0.0.1:7002", "--from", "4", "--timeout", "0.5"]) else { return }
        #expect(tail.leader == "tcp://127.0.0.1:5701" && tail.timeout == .milliseconds(500) && tail.from == 4)
        guard case .tail(let fromEnvironment) = try Command.parse(["tail", "--connect", "127.0.0.1:7002"], environment: ["COGD_LEADER": "127.0.0.1:7001"])
        else { return }
        #expect(fromEnvironment.leader == "tcp://127.0.0.1:7001")
        guard case .tail(let given) = try Command.parse(["tail", "--connect", "127.0.0.1:7002", "--leader", "127.0.0.1:7003"]) else { return }
        #expect(given.leader == "tcp://127.0.0.1:7003")
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--leader", "127.0.0.1:7001"]) }
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--timeout", "2"]) }
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--connect", "127.0.0.1:7002", "--last", "3"]) }
    }

    @Test func `--connect and --leader take every node of a cluster, comma-separated, and COGD_LEADER's list whole`() throws {
        guard case .tail(let tail) = try Command.parse(["tail", "--connect", "127.0.0.1:7002, 127.0.0.1:7012", "--leader", "127.0.0.1:7011,127.0.0.1:7001"])
        else { return }
        #expect(tail.connect == "tcp://127.0.0.1:7002,tcp://127.0.0.1:7012" && tail.leader == "tcp://127.0.0.1:7011,tcp://127.0.0.1:7001")
        guard case .tail(let fromEnvironment) = try Command.parse(["tail", "--connect", "127.0.0.1:7002,127.0.0.1:7012"], environment: ["COGD_LEADER": "127.0.0.1:7001,127.0.0.1:7011"])
        else { return }
        #expect(fromEnvironment.leader == "tcp://127.0.0.1:7001,tcp://127.0.0.1:7011" && fromEnvironment.leaderSource == "COGD_LEADER")
        #expect(
            throws: Command.UsageError(
                message: "--connect takes an endpoint like tcp://127.0.0.1:5702 or 127.0.0.1:5702, not '': it is empty", subcommand: "tail")
        ) { try Command.parse(["tail", "--connect", "127.0.0.1:7002,,127.0.0.1:7012"]) }
        #expect(
            throws: Command.UsageError(
                message: "--leader takes an endpoint like tcp://127.0.0.1:5701 or 127.0.0.1:5701, not 'nowhere': no port (HOST:PORT)",
                subcommand: "tail")
        ) { try Command.parse(["tail", "--connect", "127.0.0.1:7002", "--leader", "127.0.0.1:7001,nowhere"]) }
        let many = (1...17).map { "127.0.0.1:\(7100 + $0)" }.joined(separator: ",")
        #expect(
            throws: Command.UsageError(message: "--connect lists 17 endpoints; at most 16 (the nodes of one cluster)", subcommand: "tail")
        ) { try Command.parse(["tail", "--connect", many]) }
    }

    @Test func `status --watch takes optional seconds, and --count goes with it`() throws {
        let endpoint = "tcp://127.0.0.1:5701"
        #expect(try Command.parse(["status", "--watch"]) == .status(leaderEndpoint: endpoint, json: false, timeout: .seconds(5), watch: .seconds(2)))
        #expect(
            try Command.parse(["status", "--watch", "0.5", "--count", "3"])
                == .status(leaderEndpoint: endpoint, json: false, timeout: .seconds(5), watch: .milliseconds(500), count: 3))
        #expect(try Command.parse(["status", "--watch=7", "--json"]) == .status(leaderEndpoint: endpoint, json: true, timeout: .seconds(5), watch: .seconds(7)))
        #expect(throws: Command.UsageError(message: "--watch takes seconds between reports (0.1 to 86400), not 'often'", subcommand: "status")) {
            try Command.parse(["status", "--watch", "often"])
        }
        #expect(throws: Command.UsageError(message: "--count goes with --watch (how many reports to show before stopping)", subcommand: "status")) {
            try Command.parse(["status", "--count", "2"])
        }
    }

    @Test func `the first revision at or after a time is found by bisection, removed ones counted as older`() {
        let times: [UInt64: Double] = [3: 10, 4: 10, 5: 20, 6: 30, 7: 30, 8: 40]
        func first(_ moment: Double, removed: Set<UInt64> = []) -> UInt64? {
            TailSince.firstRevision(atOrAfter: Date(timeIntervalSince1970: moment), first: 3, last: 8) { revision in
                removed.contains(revision) ? nil : times[revision].map { Date(timeIntervalSince1970: $0) }
            }
        }
        #expect(first(0) == 3)
        #expect(first(10) == 3)
        #expect(first(11) == 5)
        #expect(first(30) == 6)
        #expect(first(40) == 8)
        #expect(first(41) == nil)
        #expect(first(0, removed: [3, 4, 5]) == 6)
        #expect(TailSince.firstRevision(atOrAfter: Date(), first: 1, last: 0) { _ in Date() } == nil, "an empty log")
    }

    @Test func `a worker is silent past half the heartbeat timeout and 2 s`() {
        #expect(!StatusCommand.isSilent(2.4, heartbeatTimeout: 5))
        #expect(StatusCommand.isSilent(2.6, heartbeatTimeout: 5))
        #expect(StatusCommand.isSilent(2.6, heartbeatTimeout: nil), "an older leader: the default 5 s")
        #expect(!StatusCommand.isSilent(1.9, heartbeatTimeout: 1), "never below 2 s: heartbeats come every second")
        #expect(!StatusCommand.isSilent(14, heartbeatTimeout: 30))
        #expect(StatusCommand.uptimeText(42.9) == "42 s")
        #expect(StatusCommand.uptimeText(3_723.5) == "1 h 2 min")
        #expect(StatusCommand.uptimeText(185) == "3 min 5 s")
        #expect(StatusCommand.uptimeText(2 * 86_400 + 7_300) == "2 d 2 h")
    }
}

/// The revisions `tail` printed (`#N` header lines), in order.
private func printedRevisions(_ output: String) -> [Int] {
    output.split(separator: "\n").compactMap { line in line.hasPrefix("#") ? Int(line.dropFirst().prefix { $0 != " " }) : nil }
}

/// Opens accounts (`PREFIX0`, `PREFIX1`, …) until `tail` exits, having
/// printed a line starting with `line` (at most 40, each waited on 250 ms:
/// a subscriber joins ZeroMQ's stream asynchronously), then waits for its exit.
private func openAccounts(until tail: CogdProcess, has line: String, ports: ClusterPorts, prefix: String) throws {
    var account = 0
    while tail.process.isRunning && account < 40 {
        _ = try ports.call("ledger.open", #"{"account": "\#(prefix)\#(account)", "balance": 1}"#)
        account += 1
        _ = tail.waitForLine(timeout: .milliseconds(250)) { $0.hasPrefix(line) }
    }
    waitForExit(tail.process, timeout: .seconds(10))
}

@Suite("tail --since and --connect, status --watch, on real processes", .serialized, .timeLimit(.minutes(10)))
struct TailAndStatusTests {
    @Test func `tail --since starts at the first turn committed at or after the time, and says when none is that new`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        // Two processes write 1–3 and 4–6: a process start lies between 3 and 4, well over 2 ms.
        #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "3"]).status == 0)
        #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "3"]).status == 0)
        let json = try runCogd(["tail", "--data", folder.path, "--from", "4", "--to", "4", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let timeText = try #require(object["time"] as? String)
        let printed = try #require(TailSince.rfc3339(timeText))
        // Printed to the millisecond (rounded): 1 ms before it is after turn 3 and not after turn 4.
        let since = rfc3339Text(printed.addingTimeInterval(-0.001))
        let fromFour = try runCogd(["tail", "--data", folder.path, "--since", since])
        #expect(fromFour.status == 0, "\(fromFour)")
        #expect(printedRevisions(fromFour.stdout) == [4, 5, 6], "\(fromFour.stdout)")
        let all = try runCogd(["tail", "--data", folder.path, "--since", "1d", "--count", "2"])
        #expect(printedRevisions(all.stdout) == [1, 2], "\(all)")
        let future = try runCogd(["tail", "--data", folder.path, "--since", "2999-01-01T00:00:00Z"])
        #expect(future.status == 1)
        #expect(future.stdout.isEmpty)
        #expect(future.stderr.hasPrefix("Error: no turn since 2999-01-01T00:00:00.000Z: the newest turn, revision 6, is from "), "\(future.stderr)")
    }

    @Test func `tail names a scope instance by the turn that opened it, looking back before what it prints`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let cart: UInt64 = 1 << 32 | 1
        do {
            let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
            let encoder = CBOREncoder()
            try store.append([TurnDraft(
                name: "shop.open", writes: [],
                scopeEvents: [ScopeEvent(kind: .open, instance: cart, scope: "Shop.cart", identity: try encoder.encode("ann"), worker: "w1")])])
            for index in 1...5 {
                try store.append([TurnDraft(name: "shop.tick", writes: [TurnWrite(name: "shop.ticks", key: nil, value: try encoder.encode(index))])])
            }
            try store.append([TurnDraft(
                name: "Shop.cart.shop.add", origin: TurnOrigin(worker: "w1", instance: cart),
                writes: [TurnWrite(name: "shop.items", key: try encoder.encode("ann"), value: try encoder.encode(1))])])
            try store.append([TurnDraft(
                name: "Shop.cart.shop.add", origin: TurnOrigin(worker: "w1", instance: 1 << 32 | 9),
                writes: [TurnWrite(name: "shop.items", key: try encoder.encode("bob"), value: try encoder.encode(1))])])
            try store.append([TurnDraft(
                name: "shop.close", writes: [],
                scopeEvents: [ScopeEvent(kind: .retire, instance: cart, scope: "Shop.cart", identity: try encoder.encode("ann"), worker: "w1")])])
            store.close()
        }
        for arguments in [["--last", "3"], ["--from", "7"]] {
            let tail = try runCogd(["tail", "--data", folder.path] + arguments)
            #expect(tail.status == 0, "\(tail)")
            let lines = tail.stdout.split(separator: "\n").map(String.init)
            #expect(lines.contains { $0.hasPrefix("#7  ") && $0.hasSuffix(#"  Shop.cart.shop.add  (worker w1, scope Shop.cart["ann"] #1.1, epoch 1)"#) }, "\(arguments): \(lines)")
            #expect(lines.contains { $0.hasPrefix("#8  ") && $0.hasSuffix("  Shop.cart.shop.add  (worker w1, scope #1.9, epoch 1)") }, "never seen opening: by number: \(lines)")
            #expect(lines.contains(#"    retires Shop.cart["ann"] #1.1 on w1"#), "\(lines)")
        }
    }

    @Test func `tail names an instance a registration reply opened by the opening the folder keeps, also when following`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let journal: UInt64 = 1 << 32 | 3
        let screen: UInt64 = 1 << 32 | 4
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let encoder = CBOREncoder()
        func note(_ text: String, from instance: UInt64) throws -> TurnDraft {
            TurnDraft(
                name: "Journal.trails.journal", origin: TurnOrigin(worker: "worker-1", instance: instance),
                writes: [TurnWrite(name: "trails.journal", key: nil, value: try encoder.encode([text]))])
        }
        try store.append(
            [try note("showing screen 1", from: journal)], replies: [],
            openings: [ScopeEvent(kind: .open, instance: journal, scope: "Journal", identity: nil, worker: "worker-1", registration: 2)])
        let tail = try runCogd(["tail", "--data", folder.path])
        #expect(tail.status == 0, "\(tail)")
        #expect(tail.stdout.contains("  Journal.trails.journal  (worker worker-1, scope Journal (root) #1.3, epoch 1)\n"), "\(tail.stdout)")
        let json = try runCogd(["tail", "--data", folder.path, "--json"])
        #expect(json.stdout.contains("\"instance\": \(journal)"), "--json keeps the number: \(json.stdout)")

        // Following: an instance first met after the tail started is named too.
        let follower = try CogdProcess(["tail", "--data", folder.path, "--follow"])
        defer { follower.stop() }
        #expect(follower.waitForLine { $0.contains("scope Journal (root) #1.3") } != nil, "\(follower.lines)")
        try store.append(
            [
                TurnDraft(
                    name: "TrailScreens.trailScreen.trails.accept", origin: TurnOrigin(worker: "worker-2", instance: screen),
                    writes: [TurnWrite(name: "trails.loaded", key: try encoder.encode(1), value: try encoder.encode("ridge"))])
            ], replies: [],
            openings: [
                ScopeEvent(
                    kind: .open, instance: screen, scope: "TrailScreens.trailScreen", identity: try encoder.encode(1), worker: "worker-2",
                    registration: 1)
            ])
        #expect(
            follower.waitForLine { $0.hasSuffix("  TrailScreens.trailScreen.trails.accept  (worker worker-2, scope TrailScreens.trailScreen[1] #1.4, epoch 1)") }
                != nil, "\(follower.lines)")
        store.close()
    }

    @Test func `tail --connect to an endpoint where nothing answers names it and exits 4 within --timeout`() throws {
        let nowhere = "127.0.0.1:\(freePort())"
        let result = try runCogd(["tail", "--connect", nowhere, "--timeout", "0.5"], timeout: .seconds(20))
        #expect(result.status == 4, "\(result)")
        #expect(
            result.stderr.hasPrefix(
                "Error: nothing answers at tcp://\(nowhere) within 0.5 s: is `cogd leader` serving its turn stream there (its --turns, default tcp://127.0.0.1:5702)?"),
            "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    @Test func `tail --connect --from catches up from the leader, then follows its stream in order`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        for account in ["a", "b", "c"] {
            #expect(try ports.call("ledger.open", #"{"account": "\#(account)", "balance": 1}"#).hasPrefix("applied revision"))
        }
        let tail = try CogdProcess(["tail", "--connect", ports.turns, "--leader", ports.requests, "--from", "2", "--count", "4"])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.hasPrefix("#3 ") } != nil, "the catch-up printed revision 3: \(tail.lines)")
        // Live turns: the stream may take a moment to reach this subscriber, and a gap is asked for; bounded.
        try openAccounts(until: tail, has: "#5 ", ports: ports, prefix: "d")
        #expect(tail.process.terminationStatus == 0, "\(tail.lines)")
        #expect(printedRevisions(tail.lines.joined(separator: "\n")) == [2, 3, 4, 5], "\(tail.lines)")
        // The catch-up's hello is a tool's: no one else's name, nothing written.
        let log = try runCogd(["tail", "--data", folder.path, "--json", "--last", "100"])
        #expect(!log.stdout.contains("tail-"), "tail wrote nothing to the log")
    }

    @Test func `tail --connect --since and --from past the end say where the leader's log ends and wait`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        for account in ["a", "b"] {
            #expect(try ports.call("ledger.open", #"{"account": "\#(account)", "balance": 1}"#).hasPrefix("applied revision"))
        }
        let since = try runCogd(
            ["tail", "--connect", ports.turns, "--leader", ports.requests, "--since", "1h", "--count", "2", "--json"], timeout: .seconds(30))
        #expect(since.status == 0, "\(since)")
        let revisions = since.stdout.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["revision"] as? Int
        }
        #expect(revisions == [1, 2], "\(since.stdout)")

        let ahead = try CogdProcess(["tail", "--connect", ports.turns, "--leader", ports.requests, "--from", "4", "--count", "1"])
        defer { ahead.stop() }
        #expect(ahead.waitForLine { $0 == "cogd tail: the leader's log ends at revision 2; waiting for revision 4" } != nil, "\(ahead.lines)")
        try openAccounts(until: ahead, has: "#4 ", ports: ports, prefix: "e")
        #expect(printedRevisions(ahead.lines.joined(separator: "\n")) == [4], "revision 3 is skipped, 4 printed: \(ahead.lines)")

        // A requests endpoint where nothing answers: named, exit 4.
        let nowhere = "tcp://127.0.0.1:\(freePort())"
        let lost = try runCogd(["tail", "--connect", ports.turns, "--leader", nowhere, "--from", "1", "--timeout", "0.5"], timeout: .seconds(20))
        #expect(lost.status == 4, "\(lost)")
        #expect(lost.stderr.hasPrefix("Error: no answer from the leader at \(nowhere) within 0.5 s"), "\(lost.stderr)")
    }

    @Test func `tail --connect says on stderr when no turn arrives for a while, and keeps waiting`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let tail = try CogdProcess(["tail", "--connect", ports.turns])
        defer { tail.stop() }
        let notice = tail.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("cogd tail: no turns from") }
        #expect(notice == "cogd tail: no turns from \(ports.turns) for 10 s; still waiting (Ctrl-C stops)", "\(tail.lines)")
        #expect(tail.process.isRunning, "it keeps waiting")
    }

    @Test func `status shows the leader's version and uptime, marks a silent worker, and --json carries the same`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 8)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1")
        defer { worker.stop() }
        // A peer that says hello once and never again: silent after 4 s, given up at 8 s.
        let ghost = try RawPeer(endpoint: ports.requests)
        guard case .welcome? = try ghost.exchange(.hello(worker: "ghost", lastRevision: 0)) else {
            Issue.record("the ghost was not welcomed")
            return
        }
        var report: [String: Any] = [:]
        let marked = try waitUntil(timeout: .seconds(7)) {
            let result = try runCogd(["status", "--leader", ports.requests, "--json"])
            report = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
            let workers = report["workers"] as? [[String: Any]] ?? []
            return workers.contains { $0["name"] as? String == "ghost" && $0["silent"] as? Bool == true }
        }
        #expect(marked, "the ghost is marked silent: \(report)")
        #expect(report["version"] as? String == CogdVersion.current)
        #expect((report["uptimeSeconds"] as? Double ?? (report["uptimeSeconds"] as? Int).map(Double.init) ?? -1) > 0)
        #expect(report["heartbeatTimeoutSeconds"] as? Int == 8)
        let workers = report["workers"] as? [[String: Any]] ?? []
        let w1 = workers.first { $0["name"] as? String == "w1" }
        #expect(w1?["silent"] as? Bool == false, "the worker that heartbeats is not: \(workers)")
        #expect(w1?["secondsSinceHeard"] != nil)

        let text = try runCogd(["status", "--leader", ports.requests])
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("leader    cogd \(CogdVersion.current), up ") == true, "\(lines)")
        #expect(lines.contains("workers   2 (1 silent)") || !text.stdout.contains("ghost"), "\(lines)")
        if let ghostLine = lines.first(where: { $0.hasPrefix("  ghost:") }) {
            #expect(ghostLine.contains(" — SILENT: no heartbeat for "), "\(ghostLine)")
            #expect(ghostLine.hasSuffix(" s (given up at 8 s)"), "\(ghostLine)")
        }
        #expect(lines.first { $0.hasPrefix("  w1:") }?.contains("SILENT") == false, "\(lines)")
    }

    @Test func `status --watch repeats the report --count times, and says each time nothing answers`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let json = try runCogd(["status", "--leader", ports.requests, "--watch", "0.2", "--count", "3", "--json"], timeout: .seconds(30))
        #expect(json.status == 0, "\(json)")
        let objects = json.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == 3, "\(json.stdout)")
        #expect(objects.allSatisfy { $0["revision"] as? Int == 0 && $0["version"] as? String == CogdVersion.current })
        let text = try runCogd(["status", "--leader", ports.requests, "--watch", "0.2", "--count", "2"], timeout: .seconds(30))
        #expect(text.status == 0)
        let headers = text.stdout.split(separator: "\n").filter { $0.hasPrefix("\(ports.requests) at ") && $0.hasSuffix(", every 0.2 s (Ctrl-C stops)") }
        #expect(headers.count == 2, "\(text.stdout)")
        #expect(text.stdout.components(separatedBy: "\nrevision  0\n").count == 3, "two reports: \(text.stdout)")

        let nowhere = "tcp://127.0.0.1:\(freePort())"
        let lost = try runCogd(["status", "--leader", nowhere, "--watch", "0.2", "--count", "2", "--timeout", "0.3"], timeout: .seconds(30))
        #expect(lost.status == 4)
        #expect(lost.stderr.components(separatedBy: "Error: no answer from the leader at \(nowhere) within 0.3 s").count == 3, "\(lost.stderr)")
    }
}

/// Formats a time as `--since` takes it (RFC 3339, UTC, milliseconds).
private func rfc3339Text(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: date)
}
