import Cog
import CogTesting
import Testing

private struct LoadFailed: Error {}

/// A reference-type default: the tests compare its identity, and making one
/// counts a run of the `default:` closure.
private final class Placeholder: Sendable {
    let serial: Int

    @MainActor init(counting runs: Counter) {
        runs.bump()
        serial = runs.count
    }
}

@MainActor
@Suite("Async defaults", .timeLimit(.minutes(1)))
struct AsyncDefaultTests {
    @Test func `ASYNC-40 a class default is one object through pending, failure and the retry's pending`() async throws {
        let runs = Counter()
        let work = ControlledWork<Placeholder>()
        let forecastCog = Cog<Placeholder>.Async(default: Placeholder(counting: runs), name: "forecast") { _ in
            work.makeWork()
        }
        #expect(runs.count == 0, "declaring the cog makes no default")
        let cogs = Cogs.forTesting()
        let pending = cogs.status[forecastCog]
        #expect(pending.kind == .pending)
        #expect(cogs[forecastCog] === pending.value)
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        let finished = completionChecks(cogs, count: 1)
        work.fail(0, with: LoadFailed())
        try await waitAll(finished)
        let failure = cogs.status[forecastCog]
        #expect(failure.kind == .failure)
        #expect(failure.value === pending.value)
        let retry = cogs.refresh(forecastCog)
        let retrying = cogs.status[forecastCog]
        #expect(retrying.kind == .pending)
        #expect(retrying.value === pending.value)
        #expect(cogs[forecastCog] === pending.value)
        #expect(runs.count == 1, "one state, one run of the default closure")
        #expect(await starts.next() == 1)
        work.fail(1, with: LoadFailed())
        guard case .failure = await retry.outcome else {
            Issue.record("the retry did not fail")
            return
        }
        #expect(cogs.status[forecastCog].value === pending.value)
        #expect(runs.count == 1)
    }

    @Test func `ASYNC-40 two keys of an async box get two default objects, with the closure spelling too`() async {
        let runs = Counter()
        let work = ControlledWork<Placeholder>()
        let reportCogs = CogBox<Placeholder, Int>.Async(default: { Placeholder(counting: runs) }, name: "report") {
            _, _ in work.makeWork()
        }
        let cogs = Cogs.forTesting()
        let one = cogs[reportCogs[1]]
        let two = cogs[reportCogs[2]]
        #expect(one !== two)
        #expect(cogs[reportCogs[1]] === one)
        #expect(cogs[reportCogs[2]] === two)
        #expect(Set([one.serial, two.serial]) == [1, 2])
        #expect(runs.count == 2)
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        #expect(await starts.next() == 1)
        work.fail(0, with: CancellationError())
        work.fail(1, with: CancellationError())
    }

    @Test func `ASYNC-40 after grace releases the state, a read runs the default closure again and gets a new object`() async throws {
        let runs = Counter()
        let work = ControlledWork<Placeholder>()
        let forecastCog = Cog<Placeholder>.Async(default: Placeholder(counting: runs), name: "forecast") { _ in
            work.makeWork()
        }
        let clock = TestClock()
        let cogs = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(1))
        let first = cogs.peek(forecastCog)
        #expect(cogs.peek(forecastCog) === first)
        #expect(runs.count == 1)
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        let released = releases(cogs)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released[0].wait()
        let second = cogs.peek(forecastCog)
        #expect(second !== first)
        #expect(runs.count == 2, "the recreated state ran the default closure again")
        #expect(second.serial == 2)
        #expect(cogs.status.peek(forecastCog).value === second)
        #expect(await starts.next() == 1)
        work.fail(0, with: CancellationError())
        work.fail(1, with: CancellationError())
    }
}
