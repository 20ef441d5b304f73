import Foundation
import Testing

@Suite("cogd drill", .timeLimit(.minutes(2)))
struct DrillTests {
    @Test func `a short drill with leader and worker kills loses nothing and conserves money`() throws {
        let result = try runCogd(
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
        #expect(verdict?["command"] as? String == "cogd drill --workers 2 --seconds 8 --kill-leader-every 2.0 --kill-worker-every 3.0 --trap-every 6.0 --seed 11")
    }

    @Test func `a drill with trapping requests: each kills the leader at most once and is answered crashed-leader`() throws {
        let result = try runCogd(
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
        #expect(verdict["command"] as? String == "cogd drill --workers 2 --seconds 6 --kill-leader-every 3.0 --kill-worker-every 4.0 --trap-every 2.0 --seed 7")
    }

    @Test func `a drill with --curve runs under CURVE, passes, and leaves a peers file listing the worker and client keys`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let result = try runCogd(
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
        #expect(lines.contains { $0.hasPrefix("  reproduce        cogd drill --data \(folder.path) ") && $0.hasSuffix(" --seed 3 --curve") })

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
}
