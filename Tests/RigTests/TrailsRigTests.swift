import Cog
import CogTesting
import Testing
import TrailsRig

@MainActor
@Suite("Trails rig: the hike timer never traps and the journal is bounded")
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

    @Test func `the journal keeps its newest lines and nothing more`() {
        let cogs = Cogs.forTesting()
        let written = TrailsRig.journalLineLimit + 50
        for index in 0..<written { cogs.writeJournal("line \(index)") }
        let journal = cogs.peek(journalCog)
        #expect(journal.count == TrailsRig.journalLineLimit)
        #expect(journal.first == "line 50")
        #expect(journal.last == "line \(written - 1)")
    }

    @Test func `a journal line longer than the limit is cut at a character boundary`() {
        let cogs = Cogs.forTesting()
        cogs.writeJournal(String(repeating: "é", count: 10_000))  // two bytes each
        cogs.writeJournal(String(repeating: "x", count: TrailsRig.journalLineByteLimit))
        let journal = cogs.peek(journalCog)
        #expect(journal.count == 2)
        let cut = journal[0]
        #expect(cut.utf8.count <= TrailsRig.journalLineByteLimit)
        #expect(cut.hasSuffix("…"))
        #expect(cut.dropLast().allSatisfy { $0 == "é" })
        #expect(cut.count == (TrailsRig.journalLineByteLimit - 3) / 2 + 1)
        #expect(journal[1] == String(repeating: "x", count: TrailsRig.journalLineByteLimit), "a line at the limit is kept whole")
    }
}
