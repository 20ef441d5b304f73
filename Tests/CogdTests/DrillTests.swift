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
        #expect(verdict?["command"] as? String == "cogd drill --workers 2 --seconds 8 --kill-leader-every 2.0 --kill-worker-every 3.0 --seed 11")
    }
}
