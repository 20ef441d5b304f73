import Cog
import CogTesting
import Foundation
import Synchronization
import Testing

// Issue 31: the graph's async and lifetime rules as Cog's scenarios define them.

/// A reading with no `Equatable` conformance and no equality rule.
private struct OpaqueReading: Sendable {
    let celsius: Int
}

private let _requestCog = Cog<Int>.Manual(name: "scenario.request") { 0 }
private let _screenOpenCog = Cog<Bool>.Manual(name: "scenario.screenOpen") { true }

/// One-shot work that ignores cancellation: each run, made for one input,
/// waits until the test finishes it, so only Cog's own checks can keep a
/// stale result from being published.
private final class StubbornWork: Sendable {
    private let waiting = Mutex<[Int: CheckedContinuation<Int, Never>]>([:])
    private let startsContinuation: AsyncStream<Int>.Continuation
    /// The input of each run, as it starts.
    let starts: AsyncStream<Int>

    init() {
        (starts, startsContinuation) = AsyncStream.makeStream(of: Int.self)
    }

    func makeWork(input: Int) -> Work<Int> {
        .run { [self] in
            await withCheckedContinuation { continuation in
                waiting.withLock { $0[input] = continuation }
                started.withLock { $0 += 1 }
                startsContinuation.yield(input)
            }
        }
    }

    /// How many runs have started.
    var startedCount: Int { started.withLock { $0 } }
    private let started = Mutex(0)

    func finish(input: Int, with value: Int) {
        let continuation = waiting.withLock { $0.removeValue(forKey: input) }
        continuation?.resume(returning: value)
    }
}

/// What an off-actor run saw as it started or stopped: its input, whether it
/// ran with no actor isolation, and (on a stop) whether its task was cancelled.
private struct OffActorEvent: Sendable, Equatable {
    let input: Int
    let offActor: Bool
    var cancelled = false
}

/// One-shot `@concurrent` work: each run, made for one input, announces its
/// start (from off the main actor) and waits until the test finishes it.
/// Cooperative runs stop with `CancellationError` when their task is
/// cancelled, announcing the stop from the run's own off-actor context;
/// uncooperative ones ignore cancellation and wait for the test anyway.
private final class OffActorWork: Sendable {
    private let cooperative: Bool
    private let waiting = Mutex<[Int: CheckedContinuation<Int, any Error>]>([:])
    private let startsContinuation: AsyncStream<OffActorEvent>.Continuation
    private let stopsContinuation: AsyncStream<OffActorEvent>.Continuation
    /// Each run as it starts.
    let starts: AsyncStream<OffActorEvent>
    /// Each cooperative run that stopped because it was cancelled.
    let stops: AsyncStream<OffActorEvent>

    init(cooperative: Bool) {
        self.cooperative = cooperative
        (starts, startsContinuation) = AsyncStream.makeStream(of: OffActorEvent.self)
        (stops, stopsContinuation) = AsyncStream.makeStream(of: OffActorEvent.self)
    }

    func makeWork(input: Int) -> Work<Int> {
        .run { @concurrent in
            let offActor = Self.isOffTheMainActor()
            do {
                return try await self.wait(input: input, offActor: offActor)
            } catch {
                self.stopsContinuation.yield(
                    OffActorEvent(input: input, offActor: Self.isOffTheMainActor(), cancelled: Task.isCancelled))
                throw error
            }
        }
    }

    /// No actor isolation here, and not on the main thread (where the main
    /// actor runs its jobs): checked where it runs, not just how it is typed.
    private static func isOffTheMainActor(isolation: isolated (any Actor)? = #isolation) -> Bool {
        isolation == nil && !Thread.isMainThread
    }

    private func wait(input: Int, offActor: Bool) async throws -> Int {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiting.withLock { $0[input] = continuation }
                startsContinuation.yield(OffActorEvent(input: input, offActor: offActor))
            }
        } onCancel: {
            guard cooperative else { return }
            let continuation = waiting.withLock { $0.removeValue(forKey: input) }
            continuation?.resume(throwing: CancellationError())
        }
    }

    func finish(input: Int, with value: Int) {
        let continuation = waiting.withLock { $0.removeValue(forKey: input) }
        continuation?.resume(returning: value)
    }
}

/// The last consumer leaves; within grace the request changes to 1; the old
/// run (input 0) ignores its cancellation and finishes: checked, dropped.
@MainActor
private func changeRequestWhileAway(_ cogs: Cogs, clock: TestClock, work: StubbornWork) async throws {
    cogs.turn(_screenOpenCog, to: false)
    try await clock.waitForScheduledSleep(within: .seconds(30))
    cogs.turn(_requestCog, to: 1)
    let dropped = completionChecks(cogs, count: 1)
    work.finish(input: 0, with: 100)
    try await waitAll(dropped)
}

/// What a status watch saw, as `kind value` lines.
private func describe<Value>(_ status: CogStatus<Value>) -> String {
    "\(status.kind) \(status.value)"
}

@MainActor
@Suite("Async scenarios (issue 31)", .timeLimit(.minutes(1)))
struct AsyncScenarioTests {
    @Test func `STREAM-03 a replacement pending reaches status consumers`() async throws {
        let readings = ControlledStream<Int>()
        let readingsCog = Cog<Int>.Async(default: -1, name: "readings") { c in
            _ = c[_requestCog]
            return readings.makeWork()
        }
        let statuses = Recorder<String>()
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(readingsCog, initial: .run, name: "status") { _, status in statuses.append(describe(status)) }
        m.watch(readingsCog, initial: .run, name: "value") { _, value in values.append(value) }
        #expect(await nextStart(readings.starts) == 0)
        #expect(statuses.values == ["pending -1"])

        cogs.turn(_requestCog, to: 1)
        #expect(await nextStart(readings.starts) == 1)
        #expect(statuses.values == ["pending -1", "pending -1"])
        // The replaced generation's late element is dropped.
        readings.yield(99, to: 0)
        let accepted = completionChecks(cogs, count: 1)
        readings.yield(20, to: 1)
        try await waitAll(accepted)
        #expect(statuses.values == ["pending -1", "pending -1", "success 20"])
        #expect(values.values == [-1, 20])
        #expect(readings.generationCount == 2)
        readings.finish(1)
    }

    @Test func `ASYNC-08 a replaced run that ignores cancellation finishes anyway; its result is dropped and only the newest commits`() async throws {
        let work = StubbornWork()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in work.makeWork(input: c[_requestCog]) }
        let statuses = Recorder<String>()
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(forecastCog, initial: .run, name: "status") { _, status in statuses.append(describe(status)) }
        m.watch(forecastCog, initial: .run, name: "value") { _, value in values.append(value) }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        cogs.turn(_requestCog, to: 1)
        #expect(await starts.next() == 1)
        #expect(statuses.values == ["pending 0", "pending 0"])
        // The replaced run (input 0) finishes in spite of its cancellation.
        let dropped = completionChecks(cogs, count: 1)
        work.finish(input: 0, with: 100)
        try await waitAll(dropped)
        let afterStale = cogs.status.peek(forecastCog)
        #expect(afterStale.kind == .pending)
        #expect(afterStale.value == 0)
        #expect(!afterStale.hasSucceeded)
        #expect(statuses.values == ["pending 0", "pending 0"])
        #expect(values.values == [0])
        let accepted = completionChecks(cogs, count: 1)
        work.finish(input: 1, with: 200)
        try await waitAll(accepted)
        #expect(statuses.values == ["pending 0", "pending 0", "success 200"])
        #expect(values.values == [0, 200])
        #expect(cogs.peek(forecastCog) == 200)
        #expect(work.startedCount == 2)
        #expect(cogs.debugHistory.turnNames.filter { $0 == "forecast success" }.count == 1)
    }

    @Test func `ASYNC-16 @concurrent work runs off the main actor; only the newest result commits, on the main actor`() async throws {
        let work = OffActorWork(cooperative: false)
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in work.makeWork(input: c[_requestCog]) }
        let statuses = Recorder<String>()
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(forecastCog, initial: .run, name: "status") { _, status in
            MainActor.preconditionIsolated("a status was published off the main actor")
            statuses.append(describe(status))
        }
        m.watch(forecastCog, initial: .run, name: "value") { _, value in
            MainActor.preconditionIsolated("a value was published off the main actor")
            values.append(value)
        }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == OffActorEvent(input: 0, offActor: true))
        cogs.turn(_requestCog, to: 1)
        #expect(await starts.next() == OffActorEvent(input: 1, offActor: true))
        #expect(statuses.values == ["pending 0", "pending 0"])
        // The replaced off-actor run returns anyway: the generation check drops it.
        let dropped = completionChecks(cogs, count: 1)
        work.finish(input: 0, with: 100)
        try await waitAll(dropped)
        let afterStale = cogs.status.peek(forecastCog)
        #expect(afterStale.kind == .pending)
        #expect(!afterStale.hasSucceeded)
        #expect(statuses.values == ["pending 0", "pending 0"])
        let accepted = completionChecks(cogs, count: 1)
        work.finish(input: 1, with: 200)
        try await waitAll(accepted)
        #expect(statuses.values == ["pending 0", "pending 0", "success 200"])
        #expect(values.values == [0, 200])
        #expect(cogs.peek(forecastCog) == 200)
    }

    @Test func `ASYNC-36 replaced @concurrent work is told to stop, off the main actor; the replacement's result commits`() async throws {
        let work = OffActorWork(cooperative: true)
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in work.makeWork(input: c[_requestCog]) }
        let statuses = Recorder<String>()
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(forecastCog, initial: .run, name: "status") { _, status in statuses.append(describe(status)) }
        m.watch(forecastCog, initial: .run, name: "value") { _, value in values.append(value) }
        var starts = work.starts.makeAsyncIterator()
        var stops = work.stops.makeAsyncIterator()
        #expect(await starts.next() == OffActorEvent(input: 0, offActor: true))
        // The replaced run's stop is a completion check too (nothing published).
        let stopped = completionChecks(cogs, count: 1)
        cogs.turn(_requestCog, to: 1)
        // The old run itself, off the actor, sees its task cancelled and stops.
        #expect(await stops.next() == OffActorEvent(input: 0, offActor: true, cancelled: true))
        try await waitAll(stopped)
        #expect(await starts.next() == OffActorEvent(input: 1, offActor: true))
        // A replaced run's cancellation is no failure (ASYNC-09).
        #expect(statuses.values == ["pending 0", "pending 0"])
        let accepted = completionChecks(cogs, count: 1)
        work.finish(input: 1, with: 11)
        try await waitAll(accepted)
        #expect(statuses.values == ["pending 0", "pending 0", "success 11"])
        #expect(values.values == [0, 11])
        #expect(cogs.debugHistory.turnNames.filter { $0.contains("failure") }.isEmpty)
    }

    @Test func `STREAM-11 a stream with no equality rule publishes every element, and its resting status once`() async throws {
        let readings = ControlledStream<OpaqueReading>()
        let readingsCog = Cog<OpaqueReading>.Async(default: OpaqueReading(celsius: -1), name: "opaqueReadings") { _ in
            readings.makeWork()
        }
        let statuses = Recorder<Int>()
        let values = Recorder<Int>()
        let reactions = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(readingsCog, initial: .run, name: "status") { _, status in statuses.append(status.value.celsius) }
        m.watch(readingsCog, initial: .run, name: "value") { _, reading in values.append(reading.celsius) }
        m.run { c in reactions.append(c[readingsCog].celsius) }
        #expect(await nextStart(readings.starts) == 0)
        let checks = completionChecks(cogs, count: 2)
        readings.yield(OpaqueReading(celsius: 4), to: 0)
        readings.yield(OpaqueReading(celsius: 4), to: 0)
        try await waitAll(checks)
        #expect(statuses.values == [-1, 4, 4])
        #expect(values.values == [-1, 4, 4])
        #expect(reactions.values == [-1, 4, 4])
        readings.finish(0)
    }

    @Test func `ASYNC-32 status consumers see every pending turn, value consumers only changes`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in
            _ = c[_requestCog]
            return work.makeWork()
        }
        let statuses = Recorder<String>()
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(forecastCog, initial: .run, name: "status") { _, status in statuses.append(describe(status)) }
        m.watch(forecastCog, initial: .skip, name: "value") { _, value in values.append(value) }
        #expect(await nextStart(work.starts) == 0)
        // Two replacements before any result: each is its own pending turn.
        cogs.turn(_requestCog, to: 1)
        #expect(await nextStart(work.starts) == 1)
        cogs.turn(_requestCog, to: 2)
        #expect(await nextStart(work.starts) == 2)
        #expect(statuses.values == ["pending 0", "pending 0", "pending 0"])
        let done = completionChecks(cogs, count: 1)
        work.succeed(2, with: 7)
        try await waitAll(done)
        // A refresh while the success rests, then an equal success: the
        // status consumer sees both turns, the value consumer neither.
        let again = cogs.refresh(forecastCog)
        #expect(await nextStart(work.starts) == 3)
        work.succeed(3, with: 7)
        guard case .success(7) = await again.outcome else {
            Issue.record("the refresh did not succeed with 7")
            return
        }
        #expect(statuses.values == ["pending 0", "pending 0", "pending 0", "success 7", "pending 7", "success 7"])
        #expect(values.values == [7])
    }

    @Test func `ASYNC-32 overlapping merged runs that succeed equal are two status turns and one value change`() async throws {
        let work = ControlledWork<Int>()
        let saveCog = Cog<Int>.Async(.merged, default: 0, name: "save") { c in
            _ = c[_requestCog]
            return work.makeWork()
        }
        let statuses = Recorder<String>()
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(saveCog, initial: .skip, name: "status") { _, status in statuses.append(describe(status)) }
        m.watch(saveCog, initial: .skip, name: "value") { _, value in values.append(value) }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        cogs.turn(_requestCog, to: 1)
        #expect(await starts.next() == 1)
        let landed = completionChecks(cogs, count: 2)
        work.succeed(0, with: 5)
        work.succeed(1, with: 5)
        try await waitAll(landed)
        #expect(statuses.values == ["pending 0", "success 5", "success 5"])
        #expect(values.values == [5])
        #expect(cogs.debugHistory.turnNames.filter { $0 == "save success" }.count == 2)
    }

    @Test func `ASYNC-23 refresh runs the selector again, reading its synchronous dependencies anew`() async {
        let work = ControlledWork<Int>()
        let endpoints = Recorder<Int>()
        let selectorRuns = Counter()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in
            selectorRuns.bump()
            // An untracked read: only a new selector run sees a newer value.
            endpoints.append(c.peek(_requestCog))
            return work.makeWork()
        }
        let cogs = Cogs.forTesting()
        // A cold refresh is one initial load: one selector run, one pending turn.
        let first = cogs.refresh(forecastCog)
        #expect(selectorRuns.count == 1)
        #expect(await nextStart(work.starts) == 0)
        work.succeed(0, with: 1)
        guard case .success(1) = await first.outcome else {
            Issue.record("the first load did not succeed with 1")
            return
        }
        cogs.turn(_requestCog, to: 5)
        // Nothing the selector tracks changed; the refresh runs it anyway.
        let second = cogs.refresh(forecastCog)
        #expect(selectorRuns.count == 2)
        #expect(endpoints.values == [0, 5])
        #expect(await nextStart(work.starts) == 1)
        work.succeed(1, with: 2)
        guard case .success(2) = await second.outcome else {
            Issue.record("the refresh did not succeed with 2")
            return
        }
        #expect(cogs.peek(forecastCog) == 2)
        #expect(work.generationCount == 2)
    }

    @Test func `ASYNC-23 a watched cog's refresh runs its selector once per refresh`() async {
        let work = ControlledWork<Int>()
        let selectorRuns = Counter()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in
            selectorRuns.bump()
            _ = c[_requestCog]
            return work.makeWork()
        }
        let (cogs, m) = Cogs.forTestingWithController()
        m.watch(forecastCog, initial: .skip, name: "value") { _, _ in }
        #expect(await nextStart(work.starts) == 0)
        #expect(selectorRuns.count == 1)
        let handle = cogs.refresh(forecastCog)
        #expect(selectorRuns.count == 2)
        #expect(await nextStart(work.starts) == 1)
        work.succeed(1, with: 3)
        guard case .success(3) = await handle.outcome else {
            Issue.record("the refresh did not succeed with 3")
            return
        }
        #expect(selectorRuns.count == 2, "the published result runs no selector")
        #expect(work.generationCount == 2)
    }

    @Test func `ASYNC-24 a stale cold run's result is not published after its dependency changed`() async throws {
        let work = StubbornWork()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in work.makeWork(input: c[_requestCog]) }
        let seen = Recorder<Int>()
        let clock = TestClock()
        let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(10))
        m.scope(_screenOpenCog) { s in s.watch(forecastCog, initial: .run) { _, value in seen.append(value) } }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        try await changeRequestWhileAway(cogs, clock: clock, work: work)
        #expect(cogs.debugHistory.turnNames.filter { $0.contains("success") }.isEmpty)
        // A consumer returning within grace starts work from the newest input.
        clock.advance(by: .seconds(5))
        cogs.turn(_screenOpenCog, to: true)
        #expect(await starts.next() == 1)
        let accepted = completionChecks(cogs, count: 1)
        work.finish(input: 1, with: 101)
        try await waitAll(accepted)
        #expect(seen.values == [0, 0, 101])
        #expect(cogs.peek(forecastCog) == 101)
        #expect(cogs.debugHistory.turnNames.filter { $0.contains("success") }.count == 1)
    }

    @Test func `ASYNC-24 a status consumer returning after the change sees one pending, then the new result`() async throws {
        let work = StubbornWork()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in work.makeWork(input: c[_requestCog]) }
        let clock = TestClock()
        let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(10))
        let first = Recorder<String>()
        m.scope(_screenOpenCog) { s in s.run { c in first.append(describe(c.status[forecastCog])) } }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        try await changeRequestWhileAway(cogs, clock: clock, work: work)
        // A new consumer comes back within grace: its own read starts the run.
        let returning = Recorder<String>()
        m.run { c in returning.append(describe(c.status[forecastCog])) }
        #expect(await starts.next() == 1)
        #expect(returning.values == ["pending 0"])
        let accepted = completionChecks(cogs, count: 1)
        work.finish(input: 1, with: 200)
        try await waitAll(accepted)
        #expect(returning.values == ["pending 0", "success 200"])
        #expect(first.values == ["pending 0"])
    }

    @Test func `ASYNC-26 equal keys share one value state, keys stay apart, and an equal success wakes no value reader`() async throws {
        let home = ControlledWork<Int>()
        let away = ControlledWork<Int>()
        let forecastCogs = CogBox<Int, String>.Async(default: 0, name: "forecast") { _, key in
            key == "home" ? home.makeWork() : away.makeWork()
        }
        let (cogs, m) = Cogs.forTestingWithController()
        let firstHome = Recorder<Int>()
        let secondHome = Recorder<Int>()
        let awayValues = Recorder<Int>()
        m.run { c in firstHome.append(c[forecastCogs["home"]]) }
        m.run { c in secondHome.append(c[forecastCogs["home"]]) }
        m.run { c in awayValues.append(c[forecastCogs["away"]]) }
        #expect(await nextStart(home.starts) == 0)
        #expect(await nextStart(away.starts) == 0)
        #expect(home.generationCount == 1, "two readers of one key share one run")
        let homeLoaded = completionChecks(cogs, count: 1)
        home.succeed(0, with: 72)
        try await waitAll(homeLoaded)
        #expect(firstHome.values == [0, 72])
        #expect(secondHome.values == [0, 72])
        #expect(awayValues.values == [0], "the other key is its own state")
        let awayLoaded = completionChecks(cogs, count: 1)
        away.succeed(0, with: 41)
        try await waitAll(awayLoaded)
        #expect(awayValues.values == [0, 41])
        #expect(firstHome.values == [0, 72])
        cogs.refresh(forecastCogs["home"])
        #expect(await nextStart(home.starts) == 1)
        let reloaded = completionChecks(cogs, count: 1)
        home.succeed(1, with: 72)
        try await waitAll(reloaded)
        #expect(firstHome.values == [0, 72], "an equal success is no value change")
        #expect(secondHome.values == [0, 72])
        #expect(cogs.debugHistory.turnNames.filter { $0 == "forecast[home] success" }.count == 2)
    }

    @Test func `ASYNC-26 history records an async value's recompute once per published value`() async throws {
        struct Outage: Error {}
        let home = ControlledWork<Int>()
        let away = ControlledWork<Int>()
        let forecastCogs = CogBox<Int, String>.Async(default: 0, name: "forecast") { _, key in
            key == "home" ? home.makeWork() : away.makeWork()
        }
        let pollen = ControlledWork<Int>()
        let pollenCog = Cog<Int>.Async(default: 0, name: "pollen") { _ in pollen.makeWork() }
        let (cogs, m) = Cogs.forTestingWithController()
        // Two readers of one key, one of another, a status-only reader of a keyless cog.
        m.watch(forecastCogs["home"], initial: .run, name: "first") { _, _ in }
        m.watch(forecastCogs["home"], initial: .run, name: "second") { _, _ in }
        m.watch(forecastCogs["away"], initial: .run, name: "away") { _, _ in }
        m.status.watch(pollenCog, initial: .run, name: "pollen status") { _, _ in }
        #expect(await nextStart(home.starts) == 0)
        #expect(await nextStart(away.starts) == 0)
        #expect(await nextStart(pollen.starts) == 0)
        func entries(after start: Int) -> [String] {
            cogs.debugHistory.entries.dropFirst(start).map { "\($0.event) \($0.name)" }
        }
        func valueRecomputes() -> [String] {
            cogs.debugHistory.entries.filter { $0.event == .recompute && $0.name.contains(".value") }.map(\.name)
        }
        #if DEBUG
            // Each state's value is recorded once as it is first read (the
            // resting default), however many readers share it.
            #expect(valueRecomputes() == ["forecast.value[home]", "forecast.value[away]"])
        #endif

        var start = cogs.debugHistory.count
        let homeLoaded = completionChecks(cogs, count: 1)
        home.succeed(0, with: 72)
        try await waitAll(homeLoaded)
        #if DEBUG
            #expect(
                entries(after: start) == [
                    "turn forecast[home] success", "write forecast[home]", "write forecast[home].status",
                    "recompute forecast.value[home]", "effect CogTesting.Probe.first", "effect CogTesting.Probe.second",
                ])
        #else
            #expect(
                entries(after: start) == [
                    "turn forecast[home] success", "write forecast[home]", "write forecast[home].status",
                    "effect CogTesting.Probe.first", "effect CogTesting.Probe.second",
                ])
        #endif

        // An equal success publishes the value again (its readers stay quiet);
        // a failure and a pending publish no value.
        cogs.refresh(forecastCogs["home"])
        #expect(await nextStart(home.starts) == 1)
        let reloaded = completionChecks(cogs, count: 1)
        home.succeed(1, with: 72)
        try await waitAll(reloaded)
        cogs.refresh(forecastCogs["home"])
        #expect(await nextStart(home.starts) == 2)
        let failed = completionChecks(cogs, count: 1)
        home.fail(2, with: Outage())
        try await waitAll(failed)
        // A value nobody reads is not recorded; its first read is.
        let pollenLoaded = completionChecks(cogs, count: 1)
        pollen.succeed(0, with: 3)
        try await waitAll(pollenLoaded)
        start = cogs.debugHistory.count
        #expect(cogs.peek(pollenCog) == 3)
        #if DEBUG
            #expect(entries(after: start) == ["recompute pollen.value"])
            #expect(
                valueRecomputes() == [
                    "forecast.value[home]", "forecast.value[away]", "forecast.value[home]", "forecast.value[home]",
                    "pollen.value",
                ])
        #else
            #expect(entries(after: start).isEmpty)
            #expect(valueRecomputes().isEmpty)
        #endif
    }

    @Test func `ASYNC-24 a change two links up also keeps a stale cold run's result from being published`() async throws {
        let work = StubbornWork()
        let selectorRuns = Counter()
        let inputCog = Cog<Int>(name: "input") { c in c[_requestCog] * 10 }
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in
            selectorRuns.bump()
            return work.makeWork(input: c[inputCog])
        }
        let clock = TestClock()
        let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(10))
        m.scope(_screenOpenCog) { s in s.watch(forecastCog, initial: .skip) { _, _ in } }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        cogs.turn(_screenOpenCog, to: false)
        cogs.turn(_requestCog, to: 1)
        let dropped = completionChecks(cogs, count: 1)
        work.finish(input: 0, with: 100)
        try await waitAll(dropped)
        #expect(cogs.debugHistory.turnNames.filter { $0.contains("success") }.isEmpty)
        #expect(selectorRuns.count == 1, "learning the result is stale runs no selector")
        cogs.turn(_screenOpenCog, to: true)
        #expect(await starts.next() == 10)
        let accepted = completionChecks(cogs, count: 1)
        work.finish(input: 10, with: 110)
        try await waitAll(accepted)
        #expect(cogs.peek(forecastCog) == 110)
    }

    @Test func `ASYNC-24 a result is still published when the change further up left the input equal`() async throws {
        let work = StubbornWork()
        let parityCog = Cog<Int>(name: "parity") { c in c[_requestCog] % 2 }
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in work.makeWork(input: c[parityCog]) }
        let clock = TestClock()
        let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(10))
        m.scope(_screenOpenCog) { s in s.watch(forecastCog, initial: .skip) { _, _ in } }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        cogs.turn(_screenOpenCog, to: false)
        cogs.turn(_requestCog, to: 2)
        let accepted = completionChecks(cogs, count: 1)
        work.finish(input: 0, with: 100)
        try await waitAll(accepted)
        #expect(cogs.peek(forecastCog) == 100)
        #expect(work.startedCount == 1)
    }

    @Test func `HIST async system turns are named "label pending", "label success" and "label failure"`() async {
        struct Offline: Error {}
        let work = ControlledWork<Int>()
        let forecastCogs = CogBox<Int, Int>.Async(default: 0, name: "forecast") { _, _ in work.makeWork() }
        let cogs = Cogs.forTesting()
        let first = cogs.refresh(forecastCogs[94110])
        #expect(await nextStart(work.starts) == 0)
        work.succeed(0, with: 1)
        _ = await first.outcome
        let second = cogs.refresh(forecastCogs[94110])
        #expect(await nextStart(work.starts) == 1)
        work.fail(1, with: Offline())
        _ = await second.outcome
        #expect(
            cogs.debugHistory.turnNames == [
                "forecast[94110] pending", "forecast[94110] success", "forecast[94110] pending",
                "forecast[94110] failure",
            ])
    }

    @Test func `MECH-05 HIST-05 an unnamed reaction is labelled by file and line, a named one by its path`() {
        let line = #line + 4
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Weather") { m in
                m.watch(_requestCog, initial: .skip, name: "request") { _, _ in }
                m.run { c in _ = c[_requestCog] }
            }
        ])
        cogs.turn(_requestCog, to: 1)
        let effects = cogs.debugHistory.entries.filter { $0.event == .effect && $0.name != "" }.map(\.name)
        #expect(effects.suffix(2) == ["Weather.request", "CogTests/AsyncScenarioTests.swift:\(line)"])
    }
}

private let _baseCog = Cog<Int>.Manual(name: "scenario.base") { 10 }
private let _flipCog = Cog<Bool>.Manual(name: "scenario.flip") { false }

/// A runtime on a `TestClock` with a 10 s grace, and its test controller.
@MainActor
private func gracedRuntime() -> (Cogs, MechanismController, TestClock) {
    let clock = TestClock()
    let (cogs, m) = Cogs.forTestingWithController(clock: clock, whileObservedGrace: .seconds(10))
    return (cogs, m, clock)
}

@MainActor
@Suite("Grace sleepers (issue 31)", .timeLimit(.minutes(1)))
struct GraceSleeperScenarioTests {
    @Test func `LIFE-04 a watcher returning within grace cancels the sleeper and the release`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        let runs = Counter()
        let derivedCog = Cog<Int>(name: "derived") { c in
            runs.bump()
            return c[_baseCog]
        }
        m.scope(_screenOpenCog) { s in s.watch(derivedCog, initial: .run) { _, _ in } }
        #expect(clock.activeSleeperCount == 0)
        cogs.turn(_screenOpenCog, to: false)
        try await clock.waitForScheduledSleep()
        #expect(clock.activeSleeperCount == 1)
        clock.advance(by: .seconds(6))
        #expect(clock.activeSleeperCount == 1)
        cogs.turn(_screenOpenCog, to: true)
        #expect(clock.activeSleeperCount == 0)
        clock.advance(by: .seconds(30))
        #expect(clock.activeSleeperCount == 0)
        #expect(cogs.peek(derivedCog) == 10)
        #expect(runs.count == 1)
    }

    @Test func `LIFE-07 a reaction retracking its reads in a new order starts no grace sleeper`() async throws {
        let (cogs, m, clock) = gracedRuntime()
        let xCog = Cog<Int>(name: "x") { c in c[_baseCog] + 1 }
        let yCog = Cog<Int>(name: "y") { c in c[_baseCog] + 2 }
        let seen = Recorder<[Int]>()
        m.run { c in seen.append(c[_flipCog] ? [c[yCog], c[xCog]] : [c[xCog], c[yCog]]) }
        cogs.turn(_flipCog, to: true)
        cogs.turn(_flipCog, to: false)
        #expect(seen.values == [[11, 12], [12, 11], [11, 12]])
        #expect(clock.activeSleeperCount == 0)
        #expect(clock.maximumActiveSleeperCount == 0)
    }

    @Test func `LIFE-08 a pinning read cancels the sleeper a peek started`() async throws {
        let (cogs, _, clock) = gracedRuntime()
        let runs = Counter()
        let derivedCog = Cog<Int>(name: "derived") { c in
            runs.bump()
            return c[_baseCog]
        }
        #expect(cogs.peek(derivedCog) == 10)
        try await clock.waitForScheduledSleep()
        #expect(cogs[derivedCog] == 10)
        #expect(clock.activeSleeperCount == 0)
        clock.advance(by: .seconds(10))
        #expect(clock.activeSleeperCount == 0)
        #expect(cogs.peek(derivedCog) == 10)
        #expect(runs.count == 1)
        #expect(clock.activeSleeperCount == 0, "a peek of a pinned state starts no grace")
    }

    @Test func `LIFE-10 ASYNC-29 every one-shot peek replaces the sleeper with one for its own deadline`() async throws {
        let clock = SleepAnnouncingClock()
        let cogs = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(10))
        let runs = Counter()
        let derivedCog = Cog<Int>(name: "derived") { c in
            runs.bump()
            return c[_baseCog]
        }
        var sleeps = clock.sleeps.makeAsyncIterator()
        #expect(cogs.peek(derivedCog) == 10)
        #expect(await sleeps.next() == .seconds(10))
        clock.inner.advance(by: .seconds(4))
        for _ in 0..<8 {
            #expect(cogs.peek(derivedCog) == 10)
            // A fresh sleeper for 14 s, even when the deadline did not move.
            #expect(await sleeps.next() == .seconds(14))
            try await clock.inner.waitForScheduledSleep()
            #expect(clock.inner.activeSleeperCount == 1)
        }
        #expect(clock.inner.maximumActiveSleeperCount == 1)
        clock.inner.advance(by: .seconds(6))
        #expect(clock.inner.activeSleeperCount == 1, "no obsolete sleeper wakes at 10 s")
        let released = releases(cogs)
        clock.inner.advance(by: .seconds(4))
        try await waitAll(released)
        #expect(clock.inner.activeSleeperCount == 0)
        #expect(cogs.peek(derivedCog) == 10)
        #expect(runs.count == 2)
    }

    @Test func `ASYNC-22 ASYNC-29 every one-shot peek of a cold async cog replaces its one sleeper`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let clock = SleepAnnouncingClock()
        let cogs = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(10))
        var sleeps = clock.sleeps.makeAsyncIterator()
        #expect(cogs.status.peek(forecastCog).kind == .pending)
        #expect(await nextStart(work.starts) == 0)
        #expect(await sleeps.next() == .seconds(10))
        clock.inner.advance(by: .seconds(4))
        for _ in 0..<8 {
            #expect(cogs.status.peek(forecastCog).kind == .pending)
            #expect(await sleeps.next() == .seconds(14))
            try await clock.inner.waitForScheduledSleep()
            #expect(clock.inner.activeSleeperCount == 1)
        }
        #expect(work.generationCount == 1)
        #expect(clock.inner.maximumActiveSleeperCount == 1)
        clock.inner.advance(by: .seconds(6))
        #expect(clock.inner.activeSleeperCount == 1)
        let released = releases(cogs)
        let dropped = completionChecks(cogs, count: 1)
        clock.inner.advance(by: .seconds(4))
        try await waitAll(released)
        try await waitAll(dropped)
        #expect(clock.inner.activeSleeperCount == 0)
        work.succeed(0, with: 100)
        #expect(cogs.debugHistory.turnNames == ["forecast pending"])
    }

    @Test func `ASYNC-23 ASYNC-29 every refresh of a cold async cog replaces its one sleeper`() async throws {
        let work = ControlledWork<Int>()
        let selectorRuns = Counter()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in
            selectorRuns.bump()
            return work.makeWork()
        }
        let clock = SleepAnnouncingClock()
        let cogs = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(10))
        var sleeps = clock.sleeps.makeAsyncIterator()
        var starts = work.starts.makeAsyncIterator()
        cogs.refresh(forecastCog)
        #expect(await starts.next() == 0)
        #expect(await sleeps.next() == .seconds(10))
        clock.inner.advance(by: .seconds(4))
        for run in 1...4 {
            cogs.refresh(forecastCog)
            #expect(await starts.next() == run)
            #expect(await sleeps.next() == .seconds(14))
            try await clock.inner.waitForScheduledSleep()
            #expect(clock.inner.activeSleeperCount == 1)
        }
        #expect(selectorRuns.count == 5)
        #expect(clock.inner.maximumActiveSleeperCount == 1)
        #expect(cogs.debugHistory.turnNames == Array(repeating: "forecast pending", count: 5))
        clock.inner.advance(by: .seconds(6))
        #expect(clock.inner.activeSleeperCount == 1)
        let released = releases(cogs)
        clock.inner.advance(by: .seconds(4))
        try await waitAll(released)
        #expect(clock.inner.activeSleeperCount == 0)
    }

    @Test func `LIFE-10 a one-shot peek renews its one sleeper, then releases, and a later peek recomputes`() async throws {
        let (cogs, _, clock) = gracedRuntime()
        let previous = Recorder<Int?>()
        let derivedCog = Cog<Int>(name: "derived") { c in
            previous.append(c.curr)
            return c[_baseCog] / 10
        }
        #expect(cogs.peek(derivedCog) == 1)
        try await clock.waitForScheduledSleep()
        #expect(clock.activeSleeperCount == 1)
        clock.advance(by: .seconds(4))
        for _ in 0..<8 {
            #expect(cogs.peek(derivedCog) == 1)
            try await clock.waitForScheduledSleep()
            #expect(clock.activeSleeperCount == 1)
        }
        #expect(previous.values == [nil])
        #expect(clock.maximumActiveSleeperCount == 1)
        // The renewed deadline is 14 s: at 10 s the state is still there.
        clock.advance(by: .seconds(6))
        #expect(clock.activeSleeperCount == 1)
        let released = releases(cogs)
        clock.advance(by: .seconds(4))
        try await waitAll(released)
        #expect(clock.activeSleeperCount == 0)
        cogs.turn(_baseCog, to: 20)
        #expect(cogs.peek(derivedCog) == 2)
        #expect(previous.values == [nil, nil])
    }

    @Test func `ASYNC-22 a one-shot peek of an async cog renews one sleeper; expiry cancels the run and drops its result`() async throws {
        let work = ControlledWork<Int>()
        let selectorRuns = Counter()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in
            selectorRuns.bump()
            return work.makeWork()
        }
        let (cogs, _, clock) = gracedRuntime()
        let initial = cogs.status.peek(forecastCog)
        #expect(initial.kind == .pending)
        #expect(!initial.hasSucceeded)
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        try await clock.waitForScheduledSleep()
        clock.advance(by: .seconds(4))
        for _ in 0..<8 {
            #expect(cogs.status.peek(forecastCog).kind == .pending)
            try await clock.waitForScheduledSleep()
            #expect(clock.activeSleeperCount == 1)
        }
        #expect(selectorRuns.count == 1)
        #expect(work.generationCount == 1)
        #expect(clock.maximumActiveSleeperCount == 1)
        clock.advance(by: .seconds(6))
        #expect(clock.activeSleeperCount == 1)
        let released = releases(cogs)
        let cancelled = completionChecks(cogs, count: 1)
        clock.advance(by: .seconds(4))
        try await waitAll(released)
        try await waitAll(cancelled)
        #expect(clock.activeSleeperCount == 0)
        work.succeed(0, with: 100)
        #expect(cogs.debugHistory.turnNames == ["forecast pending"])
        let fresh = cogs.status.peek(forecastCog)
        #expect(fresh.kind == .pending)
        #expect(fresh.value == 0)
        #expect(selectorRuns.count == 2)
        #expect(await starts.next() == 1)
        work.fail(1, with: CancellationError())
    }
}

