import Foundation
import Testing

@testable import CogLab
@testable import CogdCommandLine

/// `cogd-lab drill --ha`: a real etcd and two or three `cogd leader --ha
/// --sync one` nodes under faults, with clients that follow the leader; the
/// verdict a user reads, and nothing it started left running.
@Suite("cogd drill --ha", .serialized, .timeLimit(.minutes(10)))
struct HADrillTests {
    @Test func `a node process that dies of a crash signal fails the verdict; the drill's own kills and step-downs do not`() {
        #expect(HADrill.Verdict.crashed(.signal(SIGSEGV)) && HADrill.Verdict.crashed(.signal(SIGBUS)) && HADrill.Verdict.crashed(.signal(SIGILL)))
        #expect(!HADrill.Verdict.crashed(.signal(SIGKILL)) && !HADrill.Verdict.crashed(.exited(1)) && !HADrill.Verdict.crashed(.exited(70)))
        var verdict = HADrill.Verdict()
        verdict.unplannedExits = ["n2 exited with status 1: a step-down outside a fault"]
        #expect(verdict.violations(leaseTTL: 2).isEmpty, "an exit that is not a crash is counted, not a violation")
        verdict.crashedNodes = ["n2 killed by signal 11 (Segmentation fault): serving thread on CPU 1"]
        #expect(verdict.violations(leaseTTL: 2) == ["1 node processes crashed (first: n2 killed by signal 11 (Segmentation fault): serving thread on CPU 1)"])
    }

    /// The ports the run said it took (its first stderr line).
    static func ports(_ stderr: String) -> [Int] {
        guard let line = stderr.split(separator: "\n").first(where: { $0.hasPrefix("drill --ha: loopback ports ") }),
            let list = line.dropFirst("drill --ha: loopback ports ".count).components(separatedBy: " on ").first
        else { return [] }
        return list.components(separatedBy: ", ").compactMap { Int($0) }
    }

    /// Processes whose command line holds `text` (read from /proc).
    static func processes(holding text: String) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { Int($0) != nil }.compactMap { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let line = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            return line.contains(text) ? "\(pid): \(line)" : nil
        }
    }

    /// Those of `ports` something listens on now (TCP, per /proc/net/tcp; a closed
    /// server's port may still be in TIME_WAIT, so binding it is no test).
    static func listening(on ports: [Int]) -> [Int] {
        guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return [] }
        var found: [Int] = []
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 3, fields[3] == "0A", let port = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }) else { continue }
            if ports.contains(port) { found.append(port) }
        }
        return found
    }

    @Test func `a copy is counted by the reason the leader's line gives for it`() {
        let prefix = "2026-12-07T06:40:00.000Z INFO  cogd leader: standby n1 is not in step ("
        let suffix = "): sending it a copy of the log at revision 12 (40960 bytes)"
        let reasons: [(String, String)] = [
            ("its folder holds no log yet", "empty-folder"),
            ("the commits after its revision 3 are no longer all kept (none is kept)", "commits-not-kept"),
            ("its last commit (epoch 2, commit 9) is not among the commits this leader keeps (none is kept)", "commits-not-kept"),
            ("it has applied epoch 1 and this log's revision 8 is of epoch 2", "another-tail"),
            ("its revision 11 is past this log's last", "another-tail"),
            ("its last commit (epoch 2, commit 42) is not in this log: a deposed leader's tail", "another-tail"),
            ("its copy is another log", "other"),
        ]
        #expect(reasons.map { HADrill.copyCause(Substring(prefix + $0.0 + suffix)) } == reasons.map(\.1))
    }

    @Test func `drill --ha parses its options and refuses the other drills' ones`() throws {
        var options = Drill.Options()
        options.ha = true
        options.leaseTTL = 3
        options.faultEvery = 2.5
        options.faults = [.killLeader, .freezeEtcd]
        options.seed = 7
        options.reportFolder = "/tmp/ha-report"
        #expect(
            try LabParse.parseDrill([
                "--ha", "--lease-ttl", "3", "--fault-every", "2.5", "--faults", "freeze-etcd,kill-leader", "--seed", "7", "--report", "/tmp/ha-report",
            ]) == options)
        #expect(Drill.Options().faults == HADrill.Fault.allCases)
        #expect(throws: CommandUsageError(message: "--lease-ttl takes a whole number of seconds from 2 to 3600, not '1'", subcommand: "drill")) {
            try LabParse.parseDrill(["--ha", "--lease-ttl", "1"])
        }
        #expect(throws: CommandUsageError(
            message: "--faults takes names from kill-leader, wipe-leader, freeze-leader, kill-standby, freeze-etcd, crash-after-ship, not 'kill-etcd'",
            subcommand: "drill")) {
            try LabParse.parseDrill(["--ha", "--faults", "kill-leader,kill-etcd"])
        }
        #expect(throws: CommandUsageError(message: "--workers does not apply to an HA drill (--ha)", subcommand: "drill")) {
            try LabParse.parseDrill(["--ha", "--workers", "2"])
        }
        #expect(throws: CommandUsageError(message: "--lease-ttl applies to an HA drill (with --ha)", subcommand: "drill")) {
            try LabParse.parseDrill(["--lease-ttl", "3"])
        }
        #expect(throws: CommandUsageError(
            message: "--ports 20000-20004 holds 5 ports; an HA drill of 2 nodes (etcd's two, and each node's requests and turns) needs 6", subcommand: "drill")) {
            try LabParse.parseDrill(["--ha", "--ports", "20000-20004"])
        }
    }

    @Test func `drill --ha --nodes takes 2 or 3, only with --ha, and three nodes need eight ports`() throws {
        #expect(try LabParse.parseDrill(["--ha"]).nodes == 2)
        #expect(try LabParse.parseDrill(["--ha", "--nodes", "3"]).nodes == 3)
        #expect(try LabParse.parseDrill(["--ha", "--nodes=2"]).nodes == 2)
        #expect(try LabParse.parseDrill(["--ha", "--faults", "crash-after-ship"]).faults == [.crashAfterShip])
        for bad in ["1", "4", "three", ""] {
            #expect(throws: CommandUsageError(message: "--nodes takes 2 or 3, not '\(bad)'", subcommand: "drill")) {
                try LabParse.parseDrill(["--ha", "--nodes", bad])
            }
        }
        #expect(throws: CommandUsageError(message: "--nodes applies to an HA drill (with --ha)", subcommand: "drill")) {
            try LabParse.parseDrill(["--nodes", "3"])
        }
        #expect(HADrill.portsNeeded(nodes: 3) == 8)
        #expect(throws: CommandUsageError(
            message: "--ports 20000-20006 holds 7 ports; an HA drill of 3 nodes (etcd's two, and each node's requests and turns) needs 8", subcommand: "drill")) {
            try LabParse.parseDrill(["--ha", "--nodes", "3", "--ports", "20000-20006"])
        }
        #expect(try LabParse.parseDrill(["--ha", "--nodes", "3", "--ports", "20000-20007"]).ports == PortRange(lowerBound: 20000, upperBound: 20007))
    }

    @Test func `a short HA drill fails the leader over, loses nothing, passes, and leaves no process behind`() throws {
        let result = try runCogdLab(
            ["drill", "--ha", "--seconds", "24", "--fault-every", "2", "--faults", "kill-leader,freeze-leader,kill-standby,freeze-etcd", "--seed", "5"], timeout: .seconds(150))
        let lines = result.stdout.split(separator: "\n").map(String.init)
        // No timing assertion: a verdict that fails only on the failover time (a loaded machine, debug binaries) is taken.
        let timingOnly = lines.last.map { $0.hasPrefix("FAIL: failover p99 ") && !$0.contains(";") } == true
        #expect(result.status == 0 || timingOnly, "\(result.stdout)\(result.stderr)")
        #expect(lines.last == "PASS" || timingOnly, "\(result.stdout)")
        #expect(lines.contains("  lost             0"), "\(result.stdout)")
        #expect(lines.contains("  duplicated       0"), "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("  released-lost    0 ") }, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("  epochs           never two leaders in one epoch;") }, "\(result.stdout)")
        let failovers = lines.first { $0.hasPrefix("  failovers        ") }.flatMap { Int($0.dropFirst("  failovers        ".count).prefix { $0.isNumber }) }
        #expect((failovers ?? 0) >= 1, "\(result.stdout)")
        // The copies with their causes: at least the one to the standby's empty folder at its first start.
        let standbys = lines.first { $0.hasPrefix("  standbys         caught up ") } ?? ""
        #expect(standbys.contains(" to an empty folder") && standbys.hasSuffix(")"), "\(result.stdout)")
        // Every process it started is stopped: none holds etcd's URL, and every port it took binds again.
        let ports = Self.ports(result.stderr)
        #expect(ports.count == HADrill.portsNeeded(nodes: 2), "\(result.stderr)")
        if let etcdPort = ports.first {
            #expect(Self.processes(holding: "http://127.0.0.1:\(etcdPort)").isEmpty)
        }
        #expect(Self.listening(on: ports).isEmpty, "\(ports)")
    }

    /// Runs a drill with `--json` and returns its verdict, taking a failure on the failover time alone
    /// (a loaded machine, debug binaries): no timing assertion.
    static func verdict(of arguments: [String]) throws -> [String: Any] {
        let result = try runCogdLab(["drill", "--ha", "--json"] + arguments, timeout: .seconds(150))
        let verdict = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)\(result.stderr)")
        let violations = verdict["violations"] as? [String] ?? ["none read"]
        let timingOnly = violations.count == 1 && violations[0].hasPrefix("failover p99 ")
        #expect(result.status == 0 || timingOnly, "\(result.stdout)\(result.stderr)")
        #expect(violations.isEmpty || timingOnly, "\(violations)")
        for count in ["lost", "duplicated", "releasedLost", "twoLeadersInAnEpoch", "wrongEpochReleases", "logDisagreements", "crashesNotStruck"] {
            #expect(verdict[count] as? Int == 0, "\(count): \(result.stdout)")
        }
        #expect(verdict["logSound"] as? Bool == true && verdict["moneyConserved"] as? Bool == true, "\(result.stdout)")
        // Every process it started is stopped: none holds etcd's URL, and no port it took is listened on.
        let ports = Self.ports(result.stderr)
        #expect(ports.count == HADrill.portsNeeded(nodes: verdict["nodes"] as? Int ?? 0), "\(result.stderr)")
        if let etcdPort = ports.first {
            #expect(Self.processes(holding: "http://127.0.0.1:\(etcdPort)").isEmpty)
        }
        #expect(Self.listening(on: ports).isEmpty, "\(ports)")
        return verdict
    }

    @Test func `a three-node HA drill kills the named standby, names the spare in its place, and loses nothing`() throws {
        // Seed 9 deals kill-standby first, and strikes the named standby with it.
        let verdict = try Self.verdict(of: ["--nodes", "3", "--seconds", "24", "--fault-every", "2", "--faults", "kill-leader,kill-standby", "--seed", "9"])
        #expect(verdict["nodes"] as? Int == 3)
        let kills = verdict["standbyKills"] as? [String: Int] ?? [:]
        #expect((kills["named"] ?? 0) >= 1, "\(verdict)")
        #expect((verdict["syncReplacements"] as? Int ?? 0) >= 1, "the spare was never named in place of the standby killed: \(verdict)")
        let leads = verdict["leadsByNode"] as? [String: Int] ?? [:]
        #expect(leads.keys.sorted() == ["n1", "n2", "n3"], "\(verdict)")
        // Three nodes' logs compared: the survivor's, and the two others beside it.
        #expect((verdict["otherLogs"] as? [String])?.count == 2, "\(verdict)")
    }

    @Test func `a leader that dies between shipping a commit and its own commit of it loses nothing and applies nothing twice`() throws {
        // Seed 3 keeps the first crashed leader down until its standby leads (it returns behind and catches up),
        // and starts the next one again at once (it leads again from its shorter log; its standby is sent a copy).
        let verdict = try Self.verdict(of: ["--seconds", "20", "--fault-every", "2", "--faults", "crash-after-ship", "--seed", "3"])
        let crashes = verdict["crashesAfterShip"] as? Int ?? 0
        #expect(crashes >= 1, "\(verdict)")
        #expect((verdict["faults"] as? [String: Int])?["crash-after-ship"] == crashes, "every cue taken: \(verdict)")
        #expect((verdict["crashesKeptDown"] as? Int ?? 0) >= 1, "\(verdict)")
        #expect((verdict["failovers"] as? Int ?? 0) >= crashes, "\(verdict)")
        #expect((verdict["catchUps"] as? Int ?? 0) >= 1, "the old leader, behind, was not caught up: \(verdict)")
        // Each copy has its cause, from the leaders' lines: the first is to the standby's empty folder at its first start.
        let causes = verdict["copyCauses"] as? [String: Int] ?? [:]
        #expect(causes.keys.sorted() == ["another-tail", "commits-not-kept", "empty-folder", "other"], "\(verdict)")
        #expect(causes.values.reduce(0, +) == verdict["copies"] as? Int, "\(verdict)")
        #expect((causes["empty-folder"] ?? 0) >= 1 && causes["other"] == 0, "\(verdict)")
        #expect(verdict["unplannedExits"] as? Int == 0, "\(verdict)")
    }
}
