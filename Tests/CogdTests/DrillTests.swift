import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@testable import CogLab
@testable import CogdCommandLine

@Suite("cogd drill", .timeLimit(.minutes(10)))
struct DrillTests {
    @Test func `a short drill with leader and worker kills loses nothing and conserves money`() throws {
        let result = try runCogdLab(
            ["drill", "--workers", "2", "--seconds", "8", "--kill-leader-every", "2", "--kill-worker-every", "3", "--seed", "11", "--json"],
            timeout: .seconds(90))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let verdict = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        #expect((verdict?["leaderKills"] as? Int ?? 0) >= 2)
        #expect((verdict?["applied"] as? Int ?? 0) > 0)
        #expect(verdict?["lost"] as? Int == 0)
        #expect(verdict?["duplicated"] as? Int == 0)
        #expect(verdict?["logSound"] as? Bool == true)
        #expect(verdict?["moneyConserved"] as? Bool == true)
        #expect(verdict?["replicasConverged"] as? Bool == true)
        #expect((verdict?["scopeOwnedTurns"] as? Int ?? 0) > 0)
        #expect(verdict?["retiredInstanceApplications"] as? Int == 0)
        #expect(verdict?["command"] as? String == "cogd-lab drill --workers 2 --seconds 8 --kill-leader-every 2.0 --kill-worker-every 3.0 --trap-every 6.0 --seed 11")
    }

    @Test func `the drill's text verdict says whose requests each count is, and that none answered rejected was applied`() throws {
        let result = try runCogdLab(["drill", "--workers", "1", "--seconds", "3", "--kill-leader-every", "2", "--seed", "3"], timeout: .seconds(90))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let pattern = #"^  requests         the drill's client sent \d+: applied \d+, unchanged \d+, refused \d+, rejected \d+, retried \d+, unanswered 0$"#
        #expect(lines.contains { $0.range(of: pattern, options: .regularExpression) != nil }, "\(result.stdout)")
        #expect(
            lines.contains { $0.range(of: #"^  scopes           \d+ turns owned by scope instances, \d+ late requests from retired instances refused by the leader \(retired-scope: the workers' own, not the client's\), 0 applied"#, options: .regularExpression) != nil },
            "\(result.stdout)")
        #expect(
            lines.contains { $0.range(of: #"^  quarantined      \d+ other requests answered crashed-leader \(drill kills twice while their body ran\); requests answered rejected yet in the log: none$"#, options: .regularExpression) != nil },
            "\(result.stdout)")
    }

    @Test func `a drill with trapping requests: each kills the leader at most once and is answered crashed-leader`() throws {
        let result = try runCogdLab(
            ["drill", "--workers", "2", "--seconds", "6", "--kill-leader-every", "3", "--kill-worker-every", "4", "--trap-every", "2", "--seed", "7", "--json"],
            timeout: .seconds(90))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let verdict = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        let trapRequests = try #require(verdict["trapRequests"] as? Int)
        let trapCrashes = try #require(verdict["trapCrashes"] as? Int)
        #expect(trapRequests >= 2, "about one every 2 s, one at a time")
        #expect(trapCrashes >= 1, "a trap request killed the leader")
        #expect(trapCrashes <= trapRequests, "no crash loop")
        #expect(verdict["trapRejectedCrashedLeader"] as? Int == trapRequests, "every trap request answered rejected(crashed-leader)")
        #expect(verdict["unexpectedLeaderExits"] as? Int == 0)
        #expect(verdict["rejectedButApplied"] as? Int == 0)
        #expect((verdict["lastLeaderCrashedLeaderCount"] as? Int).map { (0...1).contains($0) } == true)
        #expect(verdict["lost"] as? Int == 0)
        #expect(verdict["duplicated"] as? Int == 0)
        #expect(verdict["unanswered"] as? Int == 0)
        #expect(verdict["logSound"] as? Bool == true)
        #expect(verdict["moneyConserved"] as? Bool == true)
        #expect(verdict["replicasConverged"] as? Bool == true)
        #expect((verdict["violations"] as? [String])?.isEmpty == true)
        #expect(verdict["command"] as? String == "cogd-lab drill --workers 2 --seconds 6 --kill-leader-every 3.0 --kill-worker-every 4.0 --trap-every 2.0 --seed 7")
    }

    @Test func `a drill with --curve runs under CURVE, passes, and leaves a peers file listing the worker and client keys`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let result = try runCogdLab(
            [
                "drill", "--curve", "--data", folder.path, "--workers", "2", "--seconds", "5", "--kill-leader-every", "2",
                "--kill-worker-every", "3", "--trap-every", "2", "--seed", "3",
            ],
            timeout: .seconds(90))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.last == "PASS", "\(result.stdout)")
        #expect(
            lines.contains {
                $0.hasPrefix("  authentication   CURVE on: leader, 2 worker keys and a client key (drill-c*, ledger.*) in the peers file; every client let in")
            }, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("  kills            leader ") && !$0.hasPrefix("  kills            leader 0,") }, "\(result.stdout)")
        // Not --data: the folder now holds this run's log (a drill over it is refused); a fresh folder reproduces the run.
        #expect(lines.contains { $0 == "  reproduce        cogd-lab drill --workers 2 --seconds 5 --kill-leader-every 2.0 --kill-worker-every 3.0 --trap-every 2.0 --seed 3 --curve" }, "\(result.stdout)")

        // The peers file the leader ran with: each worker under its own name, the drill's clients under their prefix.
        func publicKey(_ name: String) throws -> String {
            let shown = try runCogd(["keys", "show", folder.path + "/keys/\(name).pub"])
            #expect(shown.status == 0, "\(shown.stderr)")
            return shown.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let peers = try String(contentsOfFile: folder.path + "/keys/peers", encoding: .utf8)
        let entries = peers.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { $0.split(separator: " ").map(String.init) }
        #expect(entries == [
            [try publicKey("drill-w0"), "worker", "drill-w0"],
            [try publicKey("drill-w1"), "worker", "drill-w1"],
            [try publicKey("clients"), "client", "drill-c*", "ledger.*"],
        ])
        let leaderKey = try publicKey("leader")
        #expect(!peers.contains(leaderKey), "the leader's own key is not a peer")
        #expect(FileManager.default.fileExists(atPath: folder.path + "/keys/leader.key"))
    }

    @Test func `a group drill: kills move each account to a live worker once, never owned twice, no effect twice`() throws {
        let result = try runCogdLab(
            ["drill", "--group-workers", "2", "--seconds", "7", "--kill-worker-every", "3", "--seed", "5", "--json"],
            timeout: .seconds(100))
        let verdict = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)\(result.stderr)")
        // Whether each kill's accounts were greeted again within heartbeat timeout + 1 s is a matter of speed (a
        // debug build on a busy machine may miss it; the release drill is where it is judged): every other check must hold.
        let violations = try #require(verdict["violations"] as? [String])
        #expect(violations.allSatisfy { $0.contains("kills not moved within the window") }, "\(violations)")
        #expect(result.status == (violations.isEmpty ? 0 : 1), "\(result.stderr)")
        #expect(verdict["groupWorkers"] as? Int == 2)
        #expect(verdict["workerKills"] as? Int == 2, "one kill every 3 s in 7 s")
        // With 24 accounts on two workers, each victim owned some: its accounts moved and greeted again.
        #expect(verdict["killsOfOwners"] as? Int == 2)
        #expect((verdict["killsMovedInWindow"] as? Int == 2) == violations.isEmpty)
        #expect(verdict["doubleOwnership"] as? Int == 0)
        #expect(verdict["unownedAccounts"] as? Int == 0)
        #expect(verdict["ownedFromRevision"] is Int)
        #expect(verdict["effectsDuplicated"] as? Int == 0)
        #expect(verdict["effectsFromRetiredOrForeign"] as? Int == 0)
        // Every opening greets once and makes one teller transfer: more effects than instances, at most twice as many.
        let effects = try #require(verdict["scopeEffects"] as? Int)
        let instances = try #require(verdict["scopeInstances"] as? Int)
        #expect(instances >= 24 && effects > instances && effects <= 2 * instances, "\(effects) effects of \(instances) instances")
        #expect(verdict["lost"] as? Int == 0)
        #expect(verdict["duplicated"] as? Int == 0)
        #expect(verdict["logSound"] as? Bool == true)
        #expect(verdict["moneyConserved"] as? Bool == true)
        #expect(verdict["replicasConverged"] as? Bool == true)
        #expect(verdict["heartbeatTimeoutMs"] as? Double == 2000)
        #expect(verdict["moveWindowMs"] as? Double == 3000)
        // Each kill's accounts reopened elsewhere, then greeted there (a figure, not null: every one of them was).
        let reopen = try #require(verdict["reopenMsP50"] as? Double)
        let live = try #require(verdict["liveMsMax"] as? Double)
        #expect(reopen <= live, "reopened after \(reopen) ms, live after \(live) ms")
        #expect(verdict["command"] as? String == "cogd-lab drill --group-workers 2 --seconds 7 --kill-worker-every 3.0 --heartbeat-timeout 2.0 --seed 5")
    }

    @Test func `a group drill that cuts a worker's link: the worker, still running, says lease-expired before it hears gone`() throws {
        let result = try runCogdLab(
            ["drill", "--group-workers", "2", "--seconds", "8", "--kill-worker-every", "100", "--cut-worker-every", "2", "--seed", "3", "--json"],
            timeout: .seconds(100))
        let verdict = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)\(result.stderr)")
        #expect(verdict["violations"] as? [String] == [], "\(result.stderr)")
        #expect(result.status == 0)
        #expect(verdict["workerCuts"] as? Int == 1, "cut at 2 s for 3 s; the next would end past the run")
        #expect(verdict["cutsNotSuspended"] as? Int == 0)
        #expect(verdict["workerKills"] as? Int == 0)
        #expect(verdict["doubleOwnership"] as? Int == 0)
        #expect(verdict["effectsFromRetiredOrForeign"] as? Int == 0)
        #expect(verdict["lost"] as? Int == 0 && verdict["duplicated"] as? Int == 0)
        #expect(verdict["replicasConverged"] as? Bool == true)
        // The relays took a port each, beside the leader's two.
        #expect((verdict["ports"] as? [Int])?.count == 4)
        #expect((verdict["command"] as? String)?.contains("--cut-worker-every 2.0") == true)
    }

    @Test func `a drill stopped by SIGTERM stops the leader and workers it started and removes its files`() throws {
        let drill = try CogdProcess(executable: cogdLabExecutable(), ["drill", "--seconds", "60", "--seed", "2"])
        defer { drill.stop() }
        let portsLine = try #require(drill.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("drill: loopback ports ") }, "\(drill.lines)")
        let port = try #require(portsLine.dropFirst("drill: loopback ports ".count).split(separator: ",").first.map(String.init))
        #expect(drill.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("drill t=2s") } != nil, "\(drill.lines)")
        // Its children, found by the leader's address on their command lines.
        func children() -> [String] {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            return entries.filter { Int32($0) != nil && Int32($0) != drill.process.processIdentifier }.compactMap { pid in
                guard let raw = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
                let line = String(decoding: raw.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
                return line.contains("127.0.0.1:\(port)") ? line : nil
            }
        }
        #expect(children().count == 3, "a leader and two workers run: \(children())")
        kill(drill.process.processIdentifier, SIGTERM)
        drill.process.waitUntilExit()
        #expect(drill.process.terminationStatus == 128 + SIGTERM)
        #expect(drill.waitForLine(timeout: .seconds(5)) { $0 == "drill: interrupted (signal 15); stopped the 3 processes it had started" } != nil, "\(drill.lines)")
        #expect(children().isEmpty, "nothing it started outlives it: \(children())")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)) ?? []
        #expect(left.filter { $0.hasPrefix("cogd-drill-\(drill.process.processIdentifier)") }.isEmpty, "its folder and error files are removed")
    }

    @Test func `--cut-worker-every belongs to a group drill and takes seconds`() throws {
        #expect(try LabParse.parseDrill(["--group-workers", "3", "--cut-worker-every", "7"]).cutWorkerEvery == 7)
        #expect(throws: Command.UsageError(message: "--cut-worker-every applies to a group drill (with --group-workers)", subcommand: "drill")) {
            try LabParse.parseDrill(["--cut-worker-every", "7"])
        }
        #expect(throws: Command.UsageError(message: "--cut-worker-every takes a number of seconds, 0 for none, not 'often'", subcommand: "drill")) {
            try LabParse.parseDrill(["--group-workers", "3", "--cut-worker-every", "often"])
        }
        #expect(
            throws: Command.UsageError(
                message: "--ports 40000-40003 holds 4 ports; a group drill that cuts links (the leader's requests and turns, and a relay per worker) needs 5",
                subcommand: "drill")
        ) {
            try LabParse.parseDrill(["--group-workers", "3", "--cut-worker-every", "7", "--ports", "40000-40003"])
        }
    }

    @Test func `--ports takes a range of loopback ports with room for the run, and says what is wrong otherwise`() throws {
        var expected = Drill.Options()
        expected.ports = PortRange(lowerBound: 40_000, upperBound: 40_001)
        #expect(try LabParse.parseDrill(["--ports", "40000-40001"]) == expected)
        #expect(try LabParse.parseDrill(["--group-workers", "2", "--ports=40000-40009"]).ports == PortRange(lowerBound: 40_000, upperBound: 40_009))
        #expect(Drill.Options().ports == PortRange(lowerBound: 20_000, upperBound: 31_999), "the default: below Linux's ephemeral range")
        for text in ["1000-2000", "40000-70000", "40010-40000", "abc", "40000-", "-40000", "40000-40001-40002", ""] {
            #expect(
                throws: Command.UsageError(
                    message: "--ports takes a range of loopback ports A-B with 1024 ≤ A ≤ B ≤ 65535, not '\(text)'", subcommand: "drill")
            ) { try LabParse.parseDrill(["--ports", text]) }
        }
        #expect(throws: Command.UsageError(message: "--ports 40000-40000 holds 1 port; a drill (the leader's requests and turns) needs 2", subcommand: "drill")) {
            try LabParse.parseDrill(["--ports", "40000"])
        }
        // The benches that start leaders: what each run needs.
        #expect(try LabParse.parseBench(["cluster", "--ports", "40000-40003"]).ports == PortRange(lowerBound: 40_000, upperBound: 40_003))
        #expect(try LabParse.parseBench(["cluster", "--only", "lag", "--ports", "40000-40001"]).portsNeeded.count == 2)
        #expect(throws: Command.UsageError(message: "--ports 40000-40003 holds 4 ports; bench cluster (a leader, two raw echo servers, a CURVE leader) needs 6", subcommand: "bench")) {
            try LabParse.parseBench(["cluster", "--curve", "--ports", "40000-40003"])
        }
        #expect(throws: Command.UsageError(message: "--ports 40000-40002 holds 3 ports; bench groups (a leader per shape, 3 shapes) needs 6", subcommand: "bench")) {
            try LabParse.parseBench(["groups", "--ports", "40000-40002"])
        }
        #expect(throws: Command.UsageError(message: "--ports 40000-40002 holds 3 ports; bench retention (a leader per run, 2 runs) needs 4", subcommand: "bench")) {
            try LabParse.parseBench(["retention", "--runs", "2", "--ports", "40000-40002"])
        }
        #expect(throws: Command.UsageError(message: "unknown option '--ports'", subcommand: "bench")) {
            try LabParse.parseBench(["graph", "--ports", "40000-40009"])
        }
        // On the command line: exit 64, the error, the usage, where to look.
        let refused = try runCogdLab(["drill", "--ports", "80-90"])
        #expect(refused.status == 64, "\(refused)")
        #expect(refused.stderr.contains("Error: --ports takes a range of loopback ports A-B with 1024 ≤ A ≤ B ≤ 65535, not '80-90'"), "\(refused.stderr)")
        #expect(refused.stderr.contains("See 'cogd-lab drill --help'"), "\(refused.stderr)")
    }

    @Test func `a drill serves on ports from --ports and says which; its --data must not already hold a log`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let arguments = ["drill", "--workers", "1", "--seconds", "2", "--kill-leader-every", "1", "--trap-every", "0", "--seed", "4", "--json"]
        let result = try runCogdLab(arguments + ["--ports", "32100-32109", "--data", folder.path], timeout: .seconds(90))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let verdict = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        let ports = try #require(verdict["ports"] as? [Int], "\(verdict)")
        #expect(ports.count == 2 && Set(ports).count == 2 && ports.allSatisfy((32_100...32_109).contains), "\(ports)")
        #expect(
            result.stderr.contains("drill: loopback ports \(ports[0]), \(ports[1]) on 127.0.0.1 (from --ports 32100-32109)\n"),
            "one line at the start says which: \(result.stderr)")
        #expect(verdict["command"] as? String == "cogd-lab drill --workers 1 --seconds 2 --kill-leader-every 1.0 --kill-worker-every 7.0 --trap-every 0.0 --seed 4 --ports 32100-32109")
        let turns = try #require(verdict["turns"] as? Int)
        #expect(turns > 0)

        // Again over the same folder: refused (it would append to that log, and not be the run its reproduce line names).
        let again = try runCogdLab(arguments + ["--data", folder.path], timeout: .seconds(30))
        #expect(again.status == 64, "\(again)")
        #expect(again.stdout.isEmpty, "\(again.stdout)")
        #expect(
            again.stderr.contains("Error: --data names a folder that already holds a log (\(folder.path)/"),
            "\(again.stderr)")
        #expect(again.stderr.contains("give an empty or new folder"), "\(again.stderr)")
        // The log is as the first run left it.
        let stats = try runCogd(["log", "stats", "--data", folder.path, "--json"])
        #expect(stats.status == 0 && stats.stdout.contains("\"turns\": \(turns),"), "\(stats)")
    }

    @Test func `a group drill kills a worker every 5 s unless told, and refuses the other drill's options`() throws {
        var expected = Drill.Options()
        expected.groupWorkers = 3
        expected.seconds = 120
        expected.killWorkerEvery = 5
        #expect(try LabParse.parseDrill(["--group-workers", "3", "--seconds", "120"]) == expected)
        expected.killWorkerEvery = 2
        expected.heartbeatTimeout = 1.5
        #expect(
            try LabParse.parseDrill(["--group-workers", "3", "--seconds", "120", "--kill-worker-every", "2", "--heartbeat-timeout", "1.5"])
                == expected)
        #expect(throws: Command.UsageError(message: "--curve does not apply to a group drill (--group-workers)", subcommand: "drill")) {
            try LabParse.parseDrill(["--group-workers", "2", "--curve"])
        }
        #expect(throws: Command.UsageError(message: "--heartbeat-timeout applies to a group drill (with --group-workers)", subcommand: "drill")) {
            try LabParse.parseDrill(["--heartbeat-timeout", "2"])
        }
        #expect(throws: Command.UsageError(message: "--group-workers takes a whole number from 1 to 16, not '0'", subcommand: "drill")) {
            try LabParse.parseDrill(["--group-workers", "0"])
        }
    }
}
