import Cog
import CogTesting
import Testing

@MainActor
@Suite("Worked examples", .timeLimit(.minutes(1)))
struct WorkedExampleTests {
    @Test func `the hike timer ticks on the clock only while the logger is open`() async throws {
        let clock = TestClock()
        let cogs = Cogs.forTesting(mechanisms: [HikeTimerMechanism(clock: clock)])
        var seconds = cogs.values(of: hikeSecondsCog, buffering: .unbounded).makeAsyncIterator()
        #expect(await seconds.next() == 0)
        cogs.startLoggingHike()
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        #expect(await seconds.next() == 1)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        #expect(await seconds.next() == 2)
        cogs.stopLoggingHike()
        #expect(clock.activeSleeperCount == 0)
        clock.advance(by: .seconds(10))
        #expect(cogs.peek(hikeSecondsCog) == 2)
        cogs.startLoggingHike()
        #expect(await seconds.next() == 0)
        #expect(cogs.debugHistory.turnNames.contains("HikeTimer.hikeTimer.tickHikeTimer()"))
        clock.finish()
    }

    @Test func `trail screens open and close with scope(each:) and closing discards the screen's filter`() {
        let loader = TrailLoader()
        let cogs = Cogs.forTesting(mechanisms: [TrailLoadingMechanism(loader: loader, loads: LoadLog())])
        let a = TrailScreenID(rawValue: 1)
        let b = TrailScreenID(rawValue: 2)
        cogs.openTrailScreen(a, trail: TrailID(rawValue: "ridge"))
        cogs.openTrailScreen(b, trail: TrailID(rawValue: "lake"))
        cogs.typeTrailFilter("easy", on: a)
        cogs.typeTrailFilter("nearby", on: b)
        #expect(cogs.liveRegistrationCount == 1)
        cogs.closeTrailScreen(a)
        #expect(cogs.peek(openTrailScreensCog) == [b])
        #expect(cogs.peek(trailFilterCogs[a]) == "")
        #expect(cogs.peek(trailFilterCogs[b]) == "nearby")
        // The loaded trail was never created (its load is still out), so its discard does nothing.
        #expect(Array(cogs.debugHistory.turnNames.suffix(2)) == ["closeTrailScreen(_:)", "discard(trails.filter[screen1])"])
    }

    @Test func `a late acceptance is rejected after its screen closed and after it reopened under a new instance`() async throws {
        let loader = TrailLoader()
        let loads = LoadLog()
        let (cogs, m) = Cogs.forTestingWithController(mechanisms: [TrailLoadingMechanism(loader: loader, loads: loads)])
        var starts = loader.starts.makeAsyncIterator()
        let screen = TrailScreenID(rawValue: 7)
        let ridge = TrailID(rawValue: "ridge")

        cogs.openTrailScreen(screen, trail: ridge)
        #expect(await starts.next() == 0)
        cogs.closeTrailScreen(screen)
        cogs.openTrailScreen(screen, trail: ridge)
        #expect(await starts.next() == 1)

        // The first instance's load lands while the screen is open again: its
        // retired controller keeps it out, though the receipt alone would pass.
        loader.finish(0, name: "Ridge (stale)")
        _ = try? await loads.tasks[0].value
        #expect(cogs.peek(loadedTrailCogs[screen]) == nil)
        #expect(!cogs.debugHistory.turnNames.contains("TrailLoading.trailScreen.acceptTrail(_:receipt:)"))

        loader.finish(1, name: "Ridge")
        _ = try? await loads.tasks[1].value
        #expect(cogs.peek(loadedTrailCogs[screen]) == Trail(id: ridge, name: "Ridge"))

        // A receipt for a closed screen is rejected inside the writer body.
        let closed = TrailScreenID(rawValue: 8)
        m.acceptTrail(Trail(id: ridge, name: "Ridge"), receipt: closed)
        #expect(cogs.debugHistory.turnNames.last == "CogTesting.Probe.acceptTrail(_:receipt:)")
        #expect(cogs.peek(loadedTrailCogs[closed]) == nil)
    }

    @Test func `install-then-watch persistence restores once and saves each change`() {
        var saved: [TrailsSnapshot] = []
        let stored = TrailsSnapshot(savedTrailIDs: [TrailID(rawValue: "ridge")])
        let store = TrailStore(load: { stored }, save: { saved.append($0) })
        let cogs = Cogs.forTesting(mechanisms: [TrailsPersistenceMechanism(store: store)])
        #expect(cogs.peek(trailsSnapshotCog) == stored)
        #expect(saved.isEmpty)
        cogs.saveTrail(TrailID(rawValue: "lake"))
        cogs.saveTrail(TrailID(rawValue: "lake"))
        #expect(saved == [TrailsSnapshot(savedTrailIDs: [TrailID(rawValue: "ridge"), TrailID(rawValue: "lake")])])
    }
}
