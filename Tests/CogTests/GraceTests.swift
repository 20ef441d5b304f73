import Cog
import CogTesting
import Testing

private let _gateCog = Cog<Bool>.Manual(name: "grace.gate") { true }
private let _appCountCog = Cog<Int>.Manual(name: "grace.appCount") { 0 }
private let _baseCog = Cog<Int>.Manual(name: "grace.base") { 2 }
private let _noteCogs = CogBox<String, Int>.Manual(
    { _ in "" }, lifetime: .whileObserved(resetToInitial: true), name: "grace.note")

extension CogOps {
    fileprivate func closeScreen() { turn(_gateCog, to: false) }
    fileprivate func openScreen() { turn(_gateCog, to: true) }
    fileprivate func setAppCount(_ value: Int) { turn(_appCountCog, to: value) }
    fileprivate func setBase(_ value: Int) { turn(_baseCog, to: value) }
    fileprivate func writeNote(_ id: Int, _ text: String) { turn(_noteCogs[id], to: text) }
}

/// A test runtime with a logical clock and a one-second grace.
@MainActor
private func gracedRuntime() -> (cogs: Cogs, m: MechanismController, clock: TestClock) {
    let clock = TestClock()
    let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(1))
    return (cogs, m, clock)
}

/// Registers for the next release by grace.
@MainActor
private func nextRelease(_ cogs: Cogs) -> MainActorCleanupAcknowledgement {
    let acknowledgement = MainActorCleanupAcknowledgement()
    cogs.acknowledgeNextDerivedRelease(with: acknowledgement)
    return acknowledgement
}

/// Registers for the grace timer's next check.
@MainActor
private func nextReleaseCheck(_ cogs: Cogs) -> MainActorCleanupAcknowledgement {
    let acknowledgement = MainActorCleanupAcknowledgement()
    cogs.acknowledgeNextDerivedReleaseCheck(with: acknowledgement)
    return acknowledgement
}

@MainActor
@Suite("Grace expiry", .timeLimit(.minutes(1)))
struct GraceTests {
    @Test func `LIFE-01 a manual source is app-lifetime by default and survives grace`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        let doubledCog = Cog<Int>(name: "doubled") { c in c[_appCountCog] * 2 }
        cogs.setAppCount(4)
        m.scope(_gateCog) { s in s.watch(doubledCog, initial: .run) { _, _ in } }
        let released = nextRelease(cogs)
        cogs.closeScreen()
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(5))
        try await released.wait()
        #expect(cogs.peek(_appCountCog) == 4)
    }

    @Test func `LIFE-02 LIFE-03 an automatic cog is released after grace and recomputes fresh, with no stale curr`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        let runs = Counter()
        let previous = Recorder<Int?>()
        let tripledCog = Cog<Int>(name: "tripled") { c in
            runs.bump()
            previous.append(c.curr)
            return c[_baseCog] * 3
        }
        let seen = Recorder<Int>()
        m.scope(_gateCog) { s in s.watch(tripledCog, initial: .run) { _, new in seen.append(new) } }
        cogs.setBase(5)
        #expect(seen.values == [6, 15])
        #expect(runs.count == 2)
        let released = nextRelease(cogs)
        cogs.closeScreen()
        #expect(runs.count == 2, "retiring the scope recomputes nothing")
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released.wait()
        #expect(cogs.peek(tripledCog) == 15)
        #expect(runs.count == 3)
        #expect(previous.values == [nil, 6, nil], "the recomputation after release sees no previous value")
    }

    @Test func `LIFE-04 a consumer that returns within grace cancels the release with no recompute`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        let runs = Counter()
        let tripledCog = Cog<Int>(name: "tripled") { c in
            runs.bump()
            return c[_baseCog] * 3
        }
        m.scope(_gateCog) { s in s.watch(tripledCog, initial: .run) { _, _ in } }
        #expect(runs.count == 1)
        cogs.closeScreen()
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .milliseconds(600))
        cogs.openScreen()
        #expect(runs.count == 1, "the returning consumer reads the kept value")
        // The release is called off: no sleeper is left to wake for it.
        #expect(clock.activeSleeperCount == 0)
        let released = nextRelease(cogs)
        clock.advance(by: .seconds(2))
        #expect(clock.activeSleeperCount == 0)
        #expect(!released.hasBeenAcknowledged)
        #expect(cogs.peek(tripledCog) == 6)
        #expect(runs.count == 1)
    }

    @Test func `LIFE-09 an edge between two automatic cogs keeps neither alive; both go together`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        let innerRuns = Counter()
        let outerRuns = Counter()
        let innerCog = Cog<Int>(name: "inner") { c in
            innerRuns.bump()
            return c[_baseCog] + 1
        }
        let outerCog = Cog<Int>(name: "outer") { c in
            outerRuns.bump()
            return c[innerCog] * 10
        }
        m.scope(_gateCog) { s in s.watch(outerCog, initial: .run) { _, _ in } }
        let first = nextRelease(cogs)
        let second = nextRelease(cogs)
        cogs.closeScreen()
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await first.wait()
        try await second.wait()
        #expect(clock.activeSleeperCount == 0, "nothing is left waiting for another grace")
        #expect(cogs.peek(outerCog) == 30)
        #expect(innerRuns.count == 2)
        #expect(outerRuns.count == 2)
    }

    @Test func `LIFE-11 release is per key: a watched sibling key stays warm`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        let runs = Recorder<Int>()
        let scaledCogs = CogBox<Int, Int>(name: "scaled") { c, key in
            runs.append(key)
            return c[_baseCog] * key
        }
        m.watch(scaledCogs[2], initial: .run) { _, _ in }
        m.scope(_gateCog) { s in s.watch(scaledCogs[3], initial: .run) { _, _ in } }
        #expect(runs.values == [2, 3])
        let released = nextRelease(cogs)
        cogs.closeScreen()
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released.wait()
        #expect(cogs.peek(scaledCogs[2]) == 4)
        #expect(cogs.peek(scaledCogs[3]) == 6)
        #expect(runs.values == [2, 3, 3], "only the released key recomputes")
    }

    @Test func `LIFE-05 a whileObserved source nobody observes is released after grace and restarts from its initial value`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        cogs.writeNote(1, "keep")
        cogs.writeNote(2, "go")
        m.watch(_noteCogs[1], initial: .run) { _, _ in }
        m.scope(_gateCog) { s in s.watch(_noteCogs[2], initial: .run) { _, _ in } }
        let released = nextRelease(cogs)
        cogs.closeScreen()
        #expect(cogs.peek(_noteCogs[2]) == "go", "retiring the scope resets nothing")
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released.wait()
        #expect(cogs.peek(_noteCogs[2]) == "")
        #expect(cogs.peek(_noteCogs[1]) == "keep")
    }

    @Test func `L6 a whileObserved source's own grace overrides the runtime's`() async throws {
        let clock = TestClock()
        let cogs = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(60))
        let _shortCog = Cog<Int>.Manual(lifetime: .whileObserved(resetToInitial: true, grace: .seconds(2))) { 0 }
        cogs.turn(_shortCog, to: 9)
        #expect(cogs.peek(_shortCog) == 9)
        let released = nextRelease(cogs)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(2))
        try await released.wait()
        #expect(cogs.peek(_shortCog) == 0)
    }

    @Test func `LIFE-08 a pinning read keeps a state past grace`() async throws {
        let (cogs, _, clock) = gracedRuntime()
        let runs = Counter()
        let tripledCog = Cog<Int>(name: "tripled") { c in
            runs.bump()
            return c[_baseCog] * 3
        }
        #expect(cogs[tripledCog] == 6)
        let check = nextReleaseCheck(cogs)
        let unpinned = Cog<Int>(name: "unpinned") { c in c[_baseCog] }
        _ = cogs.peek(unpinned)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(5))
        try await check.wait()
        #expect(cogs.peek(tripledCog) == 6)
        #expect(runs.count == 1)
    }

    @Test func `EXPORT-15 a live subscription holds its lease past grace; dropping it starts grace`() async throws {
        let (cogs, _, clock) = gracedRuntime()
        let runs = Counter()
        let tripledCog = Cog<Int>(name: "tripled") { c in
            runs.bump()
            return c[_baseCog] * 3
        }
        var iterator: CogValues<Int>.AsyncIterator? = cogs.values(of: tripledCog).makeAsyncIterator()
        #expect(await iterator?.next() == 6)
        let otherCog = Cog<Int>(name: "other") { c in c[_baseCog] }
        _ = cogs.peek(otherCog)
        let check = nextReleaseCheck(cogs)
        let released = nextRelease(cogs)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(5))
        try await check.wait()
        try await released.wait()
        #expect(runs.count == 1, "the subscribed cog was kept")
        let dropped = nextRelease(cogs)
        iterator = nil
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await dropped.wait()
        #expect(cogs.peek(tripledCog) == 6)
        #expect(runs.count == 2)
    }

    @Test func `D20 a one-shot peek renews grace; the timer never holds more than one sleeper`() async throws {
        let (cogs, _, clock) = gracedRuntime()
        let runs = Counter()
        let tripledCog = Cog<Int>(name: "tripled") { c in
            runs.bump()
            return c[_baseCog] * 3
        }
        #expect(cogs.peek(tripledCog) == 6)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .milliseconds(700))
        #expect(cogs.peek(tripledCog) == 6, "renews the deadline to 1.7 s")
        // The renewal replaced the sleeper: one sleeps, until 1.7 s.
        try await clock.waitForScheduledSleep(within: .seconds(30))
        #expect(clock.activeSleeperCount == 1)
        clock.advance(by: .milliseconds(400))
        #expect(clock.activeSleeperCount == 1, "at 1.1 s nothing woke")
        #expect(runs.count == 1)
        let released = nextRelease(cogs)
        clock.advance(by: .milliseconds(600))
        try await released.wait()
        #expect(cogs.peek(tripledCog) == 6)
        #expect(runs.count == 2)
        #expect(clock.maximumActiveSleeperCount == 1)
    }

    @Test func `L2 tearing a runtime down cancels its grace timer and starts no other`() async throws {
        let clock = TestClock()
        do {
            let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(1))
            let tripledCog = Cog<Int>(name: "tripled") { c in c[_baseCog] * 3 }
            m.watch(tripledCog, initial: .run) { _, _ in }
            _ = cogs.peek(Cog<Int>(name: "once") { _ in 1 })
            try await clock.waitForScheduledSleep(within: .seconds(30))
            #expect(clock.activeSleeperCount == 1)
            #expect(cogs.peek(tripledCog) == 6)
        }
        #expect(clock.activeSleeperCount == 0)
        await Task.yield()
        #expect(clock.activeSleeperCount == 0, "dropping the watch's lease at teardown started no timer")
    }

    @Test func `L2 a negative grace is refused when the runtime is made`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = Cogs.forTesting(clock: TestClock(), whileObservedGrace: .seconds(-1))
            }
        }
        #expect(stderrText(result).contains("whileObservedGrace must not be negative"))
    }
}
