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
}
