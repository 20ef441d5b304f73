import Cog
import CogTesting
import Testing

private let _screenCog = Cog<Bool>.Manual(name: "asyncGrace.screen") { true }

extension CogOps {
    fileprivate func leaveScreen() { turn(_screenCog, to: false) }
}

/// An acknowledgement for the next finished generation's check.
@MainActor
private func completionCheck(_ cogs: Cogs) -> MainActorCleanupAcknowledgement {
    let acknowledgement = MainActorCleanupAcknowledgement()
    cogs.acknowledgeNextAsyncCompletionCheck(with: acknowledgement)
    return acknowledgement
}

@MainActor
@Suite("Async grace and transient demand", .timeLimit(.minutes(1)))
struct AsyncGraceTests {
    @Test func `ASYNC-13 ASYNC-14 release mid-run cancels the work, resolves the refresh as released, and a re-read starts fresh`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let clock = TestClock()
        let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(1))
        m.scope(_screenCog) { s in s.watch(forecastCog, initial: .run) { _, _ in } }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        let first = completionCheck(cogs)
        work.succeed(0, with: 70)
        try await first.wait()
        let handle = cogs.refresh(forecastCog)
        #expect(await starts.next() == 1)
        let released = releases(cogs)
        let cancelled = completionCheck(cogs)
        cogs.leaveScreen()
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released[0].wait()
        guard case .released = await handle.outcome else {
            Issue.record("the pending refresh did not resolve as released")
            return
        }
        try await cancelled.wait()
        work.succeed(1, with: 99)
        let status = cogs.status.peek(forecastCog)
        #expect(status.kind == .pending)
        #expect(status.value == 0, "the new state starts from the default, not the released 70")
        #expect(!status.hasSucceeded)
        #expect(await starts.next() == 2)
        #expect(!cogs.debugHistory.turnNames.contains("forecast failure"), "cancelling at release is silent")
        #expect(cogs.debugHistory.turnNames.filter { $0 == "forecast success" }.count == 1)
        work.fail(2, with: CancellationError())
    }

    @Test func `ASYNC-22 ASYNC-24 a one-shot peek starts one run and one grace timer; at expiry the work stops and a late result is ignored`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let clock = TestClock()
        let cogs = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(1))
        #expect(cogs.peek(forecastCog) == 0)
        #expect(cogs.peek(forecastCog) == 0)
        #expect(cogs.status.peek(forecastCog).kind == .pending)
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        #expect(work.generationCount == 1, "three one-shot reads start one run")
        let released = releases(cogs)
        let dropped = completionCheck(cogs)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released[0].wait()
        try await dropped.wait()
        work.succeed(0, with: 5)
        #expect(cogs.debugHistory.turnNames == ["forecast pending"], "nothing of generation 0 is published")
        #expect(cogs.peek(forecastCog) == 0)
        #expect(await starts.next() == 1)
        #expect(clock.maximumActiveSleeperCount == 1)
        work.fail(1, with: CancellationError())
    }

    @Test func `ASYNC-23 ASYNC-25 repeated refreshes renew a single grace timer and the last handle resolves as released`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let clock = TestClock()
        let cogs = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(1))
        var starts = work.starts.makeAsyncIterator()
        let first = cogs.refresh(forecastCog)
        #expect(await starts.next() == 0)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .milliseconds(500))
        let second = cogs.refresh(forecastCog)
        #expect(await starts.next() == 1)
        clock.advance(by: .milliseconds(500))
        let third = cogs.refresh(forecastCog)
        #expect(await starts.next() == 2)
        #expect(clock.activeSleeperCount <= 1)
        guard case .superseded = await first.outcome, case .superseded = await second.outcome else {
            Issue.record("the earlier refreshes were not superseded")
            return
        }
        let released = releases(cogs)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released[0].wait()
        guard case .released = await third.outcome else {
            Issue.record("the last refresh did not resolve as released")
            return
        }
        #expect(work.generationCount == 3)
        #expect(clock.maximumActiveSleeperCount == 1)
    }

    @Test func `ASYNC-12 ASYNC-26 ASYNC-37 the keys of an async box release independently`() async throws {
        let work = ControlledWork<String>()
        let reportCogs = CogBox<String, Int>.Async(default: "none", name: "report") { _, _ in work.makeWork() }
        let clock = TestClock()
        let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(1))
        let seen = Recorder<String>()
        m.watch(reportCogs[2], initial: .skip) { _, new in seen.append(new) }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        m.scope(_screenCog) { s in s.watch(reportCogs[1], initial: .skip) { _, _ in } }
        #expect(await starts.next() == 1)
        let loaded = completionCheck(cogs)
        work.succeed(0, with: "sunny")
        try await loaded.wait()
        #expect(seen.values == ["sunny"])
        let released = releases(cogs)
        let cancelled = completionCheck(cogs)
        cogs.leaveScreen()
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released[0].wait()
        try await cancelled.wait()
        work.succeed(1, with: "late")
        #expect(cogs.peek(reportCogs[2]) == "sunny")
        #expect(cogs.status.peek(reportCogs[2]).kind == .success)
        #expect(work.generationCount == 2, "the warm key started nothing")
        #expect(cogs.peek(reportCogs[1]) == "none")
        #expect(await starts.next() == 2)
        #expect(!cogs.debugHistory.turnNames.contains("report[1] success"))
        work.fail(2, with: CancellationError())
    }

    @Test func `L2 a watched async cog is never released, whatever the clock does`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let otherCog = Cog<Int>(name: "other") { _ in 1 }
        let clock = TestClock()
        let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(1))
        m.watch(forecastCog, initial: .skip) { _, _ in }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        let handle = cogs.refresh(forecastCog)
        #expect(await starts.next() == 1)
        _ = cogs.peek(otherCog)
        let released = releases(cogs)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(10))
        try await released[0].wait()
        work.succeed(1, with: 8)
        guard case .success(let value) = await handle.outcome else {
            Issue.record("the watched cog's refresh did not succeed")
            return
        }
        #expect(value == 8)
        #expect(cogs.peek(forecastCog) == 8)
        #expect(work.generationCount == 2)
    }
}
