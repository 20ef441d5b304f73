import Cog
import CogTesting
import Testing
import TrailsRig

@MainActor
@Suite("Trails rig: the hike timer never traps")
struct TrailsRigTests {
    @Test func `a tick that would overflow the hike timer, or is not positive, changes nothing`() {
        let cogs = Cogs.forTesting()
        cogs.startHike()
        cogs.tickHike(seconds: 5)
        #expect(cogs.peek(hikeSecondsCog) == 5)
        for seconds in [Int.max, Int.max - 4, Int.min, -1, -5, 0] {
            cogs.tickHike(seconds: seconds)
            #expect(lastTurnName(cogs) == "trails.tickHike")
            #expect(writesOfLastTurn(cogs).isEmpty, "tick \(seconds) wrote nothing")
            #expect(cogs.peek(hikeSecondsCog) == 5)
        }
        cogs.tickHike(seconds: Int.max - 5)
        #expect(cogs.peek(hikeSecondsCog) == Int.max, "the largest tick that fits")
        cogs.tickHike(seconds: 1)
        #expect(writesOfLastTurn(cogs).isEmpty)
        #expect(cogs.peek(hikeSecondsCog) == Int.max)
    }
}
