import Cog
import CogLog
import CogTesting
import Synchronization
import Testing

// Issue 31 item 1: the async and lifetime rules its scenarios define hold on
// a durable runtime and on a replica too. Sources change there by a logged
// turn or by an applied replicated turn; async results stay process-local.

private let _requestCog = Cog<Int>.Manual(name: "durableScenario.request") { 0 }
private let _screenOpenCog = Cog<Bool>.Manual(name: "durableScenario.screenOpen") { true }
private let _baseCog = Cog<Int>.Manual(name: "durableScenario.base") { 10 }

/// Where a test runs: a runtime over a `DurableTurnStore`, or a replica.
enum AsyncHostKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case durable
    case replica

    var testDescription: String { rawValue }
}

/// A leader link that records what a replica sends it.
@MainActor
private final class SentToLeader: CogRemoteLink {
    var submitted: [String] = []
    let codec: any CogDurableStore = TestCodec()

    func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?) {
        submitted.append(name)
    }

    func registerScope(
        path: String, source: String, key: [UInt8]?, form: CogScopeForm, parent: CogInstanceSlot?,
        currentEncoding: (@MainActor () -> [UInt8]?)?
    ) -> (any CogRemoteScope)? { nil }
}

/// A durable runtime or a replica on a `TestClock` with a 10 s grace, with a
/// controller for the test's reactions and scopes. Sources change through
/// `set`: a logged turn on the durable runtime, an applied replicated turn
/// on the replica (as a worker applies its leader's).
@MainActor
private final class AsyncHost {
    let kind: AsyncHostKind
    let cogs: Cogs
    let m: MechanismController
    let clock = TestClock()
    private let folder: TemporaryFolder?
    private let store: DurableTurnStore?
    private let link: SentToLeader?
    private var sourceTurns: UInt64 = 0

    init(_ kind: AsyncHostKind) throws {
        self.kind = kind
        var probe: MechanismController?
        let capture = Probe("AsyncHost") { probe = $0 }
        switch kind {
        case .durable:
            let folder = TemporaryFolder()
            let store = try DurableTurnStore(directory: folder.path)
            self.folder = folder
            self.store = store
            link = nil
            cogs = Cogs.forTesting(store: store, clock: clock, whileObservedGrace: .seconds(10), mechanisms: [capture])
        case .replica:
            folder = nil
            store = nil
            let link = SentToLeader()
            self.link = link
            cogs = Cogs.replica(clock: clock, whileObservedGrace: .seconds(10))
            cogs.remoteLink = link
            cogs.operateReplicaMechanisms([capture])
        }
        guard let probe else { fatalError("the probe mechanism did not operate") }
        m = probe
    }

    func set<V: Encodable & Sendable>(_ cog: Cog<V>.Manual, named name: String, to value: V) throws {
        switch kind {
        case .durable:
            cogs.turn(cog, to: value)
        case .replica:
            let codec = TestCodec()
            try cogs.applyReplicatedTurn(
                named: "set \(name)", writes: [CogDurableWrite(name: name, key: nil, value: try codec.encode(value))],
                codec: codec)
        }
        sourceTurns += 1
    }

    /// Async results stayed in this process: the durable log holds only the
    /// source turns, and a replica sent its leader nothing.
    func expectAsyncResultsStayedLocal(sourceLocation: SourceLocation = #_sourceLocation) throws {
        switch kind {
        case .durable:
            let logged = store?.store.lastRevision ?? 0
            #expect(logged == sourceTurns, "only source turns are logged", sourceLocation: sourceLocation)
            let records = try store?.store.records(from: 1) ?? []
            #expect(
                records.allSatisfy { record in record.writes.allSatisfy { $0.name.hasPrefix("durableScenario.") } },
                sourceLocation: sourceLocation)
        case .replica:
            #expect(link?.submitted == [], "a replica sends its leader no async result", sourceLocation: sourceLocation)
        }
    }

    func cleanUp() { folder?.cleanUp() }
}

/// One-shot work that ignores cancellation: each run, made for one input,
/// waits until the test finishes it.
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
                startsContinuation.yield(input)
            }
        }
    }

    func finish(input: Int, with value: Int) {
        let continuation = waiting.withLock { $0.removeValue(forKey: input) }
        continuation?.resume(returning: value)
    }
}

/// Collects values in order.
@MainActor
private final class Seen<Value> {
    private(set) var values: [Value] = []
    func append(_ value: Value) { values.append(value) }
}

private func describe<Value>(_ status: CogStatus<Value>) -> String {
    "\(status.kind) \(status.value)"
}

@MainActor
private func completionChecks(_ cogs: Cogs, count: Int) -> [MainActorCleanupAcknowledgement] {
    (0..<count).map { _ in
        let acknowledgement = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextAsyncCompletionCheck(with: acknowledgement)
        return acknowledgement
    }
}

@MainActor
private func graceReleases(_ cogs: Cogs, count: Int = 1) -> [MainActorCleanupAcknowledgement] {
    (0..<count).map { _ in
        let acknowledgement = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextDerivedRelease(with: acknowledgement)
        return acknowledgement
    }
}

@MainActor
private func waitAll(_ checks: [MainActorCleanupAcknowledgement]) async throws {
    for check in checks { try await check.wait() }
}

@MainActor
@Suite("Async scenarios in a durable runtime and on a replica (issue 31)", .timeLimit(.minutes(1)))
struct AsyncScenarioDurableTests {
    @Test(arguments: AsyncHostKind.allCases)
    func `STREAM-03 ASYNC-21 every replacement pending reaches status consumers`(_ kind: AsyncHostKind) async throws {
        let host = try AsyncHost(kind)
        defer { host.cleanUp() }
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "durableScenario.forecast") { c in
            _ = c[_requestCog]
            return work.makeWork()
        }
        let readings = ControlledStream<Int>()
        let readingsCog = Cog<Int>.Async(default: -1, name: "durableScenario.readings") { c in
            _ = c[_requestCog]
            return readings.makeWork()
        }
        let statuses = Seen<String>()
        let streamStatuses = Seen<String>()
        let values = Seen<Int>()
        host.m.status.watch(forecastCog, initial: .run, name: "status") { _, status in statuses.append(describe(status)) }
        host.m.status.watch(readingsCog, initial: .run, name: "streamStatus") { _, status in
            streamStatuses.append(describe(status))
        }
        host.m.watch(forecastCog, initial: .skip, name: "value") { _, value in values.append(value) }
        var starts = work.starts.makeAsyncIterator()
        var streamStarts = readings.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        #expect(await streamStarts.next() == 0)
        // A source change replaces both runs: each status consumer sees a new
        // pending. The cancelled run and the cancelled stream's end are checked.
        let replaced = completionChecks(host.cogs, count: 2)
        try host.set(_requestCog, named: "durableScenario.request", to: 1)
        #expect(await starts.next() == 1)
        #expect(await streamStarts.next() == 1)
        try await waitAll(replaced)
        #expect(statuses.values == ["pending 0", "pending 0"])
        #expect(streamStatuses.values == ["pending -1", "pending -1"])
        // A refresh while a run is in flight is one more pending turn (ASYNC-21).
        let superseded = completionChecks(host.cogs, count: 1)
        let refreshed = host.cogs.refresh(forecastCog)
        #expect(await starts.next() == 2)
        try await waitAll(superseded)
        #expect(statuses.values == ["pending 0", "pending 0", "pending 0"])
        work.succeed(2, with: 7)
        guard case .success(7) = await refreshed.outcome else {
            Issue.record("the refresh did not succeed with 7")
            return
        }
        let element = completionChecks(host.cogs, count: 1)
        readings.yield(99, to: 0)  // the replaced stream's late element reaches nothing
        readings.yield(20, to: 1)
        try await waitAll(element)
        #expect(statuses.values == ["pending 0", "pending 0", "pending 0", "success 7"])
        #expect(streamStatuses.values == ["pending -1", "pending -1", "success 20"])
        #expect(values.values == [7])
        #expect(work.generationCount == 3)
        #expect(readings.generationCount == 2)
        try host.expectAsyncResultsStayedLocal()
        readings.finish(1)
    }

    @Test(arguments: AsyncHostKind.allCases)
    func `ASYNC-23 refresh runs the selector again, reading its sources anew`(_ kind: AsyncHostKind) async throws {
        let host = try AsyncHost(kind)
        defer { host.cleanUp() }
        let work = ControlledWork<Int>()
        let selectorRuns = Seen<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "durableScenario.refreshed") { c in
            // An untracked read: only a new selector run sees a newer value.
            selectorRuns.append(c.peek(_requestCog))
            return work.makeWork()
        }
        // A cold refresh is one initial load: one selector run, one pending turn.
        let first = host.cogs.refresh(forecastCog)
        #expect(selectorRuns.values == [0])
        #expect(await nextStart(work.starts) == 0)
        work.succeed(0, with: 1)
        guard case .success(1) = await first.outcome else {
            Issue.record("the first load did not succeed with 1")
            return
        }
        try host.set(_requestCog, named: "durableScenario.request", to: 5)
        #expect(selectorRuns.values == [0], "the selector tracks nothing that changed")
        let second = host.cogs.refresh(forecastCog)
        #expect(selectorRuns.values == [0, 5])
        #expect(await nextStart(work.starts) == 1)
        work.succeed(1, with: 2)
        guard case .success(2) = await second.outcome else {
            Issue.record("the refresh did not succeed with 2")
            return
        }
        #expect(host.cogs.peek(forecastCog) == 2)
        #expect(work.generationCount == 2)
        #expect(
            host.cogs.debugHistory.turnNames.filter { $0.hasPrefix("durableScenario.refreshed") } == [
                "durableScenario.refreshed pending", "durableScenario.refreshed success",
                "durableScenario.refreshed pending", "durableScenario.refreshed success",
            ])
        try host.expectAsyncResultsStayedLocal()
    }

    @Test(arguments: AsyncHostKind.allCases)
    func `ASYNC-24 a stale cold run's result is not published after its source changed`(_ kind: AsyncHostKind) async throws {
        let host = try AsyncHost(kind)
        defer { host.cleanUp() }
        let work = StubbornWork()
        let forecastCog = Cog<Int>.Async(default: 0, name: "durableScenario.cold") { c in
            work.makeWork(input: c[_requestCog])
        }
        let seen = Seen<Int>()
        host.m.scope(_screenOpenCog) { s in s.watch(forecastCog, initial: .run) { _, value in seen.append(value) } }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        // The last consumer leaves; within grace the source changes; the old
        // run ignores its cancellation and finishes: checked, dropped.
        try host.set(_screenOpenCog, named: "durableScenario.screenOpen", to: false)
        try await host.clock.waitForScheduledSleep(within: .seconds(30))
        try host.set(_requestCog, named: "durableScenario.request", to: 1)
        let dropped = completionChecks(host.cogs, count: 1)
        work.finish(input: 0, with: 100)
        try await waitAll(dropped)
        #expect(host.cogs.debugHistory.turnNames.filter { $0.contains("success") }.isEmpty)
        // A consumer returning within grace starts work from the newest source.
        host.clock.advance(by: .seconds(5))
        try host.set(_screenOpenCog, named: "durableScenario.screenOpen", to: true)
        #expect(await starts.next() == 1)
        let accepted = completionChecks(host.cogs, count: 1)
        work.finish(input: 1, with: 101)
        try await waitAll(accepted)
        #expect(seen.values == [0, 0, 101])
        #expect(host.cogs.peek(forecastCog) == 101)
        #expect(host.cogs.debugHistory.turnNames.filter { $0.contains("success") } == ["durableScenario.cold success"])
        try host.expectAsyncResultsStayedLocal()
    }

    @Test(arguments: AsyncHostKind.allCases)
    func `LIFE-04 LIFE-10 ASYNC-22 a state keeps one grace sleeper: renewed by each peek, cancelled when a consumer returns`(
        _ kind: AsyncHostKind
    ) async throws {
        let host = try AsyncHost(kind)
        defer { host.cleanUp() }
        let clock = host.clock
        let work = ControlledWork<Int>()
        let selectorRuns = Seen<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "durableScenario.peeked") { c in
            selectorRuns.append(c.peek(_baseCog))
            return work.makeWork()
        }
        // ASYNC-22 / LIFE-10: each one-shot peek replaces the one sleeper.
        #expect(host.cogs.status.peek(forecastCog).kind == .pending)
        #expect(await nextStart(work.starts) == 0)
        try await clock.waitForScheduledSleep()
        clock.advance(by: .seconds(4))
        for _ in 0..<4 {
            #expect(host.cogs.status.peek(forecastCog).kind == .pending)
            try await clock.waitForScheduledSleep()
            #expect(clock.activeSleeperCount == 1)
        }
        #expect(clock.maximumActiveSleeperCount == 1)
        #expect(selectorRuns.values == [10])
        clock.advance(by: .seconds(6))
        #expect(clock.activeSleeperCount == 1, "the renewed deadline is 14 s")
        let released = graceReleases(host.cogs)
        let cancelled = completionChecks(host.cogs, count: 1)
        clock.advance(by: .seconds(4))
        try await waitAll(released)
        try await waitAll(cancelled)
        #expect(clock.activeSleeperCount == 0)
        work.succeed(0, with: 100)
        #expect(host.cogs.debugHistory.turnNames.filter { $0.hasPrefix("durableScenario.peeked") } == [
            "durableScenario.peeked pending"
        ])

        // LIFE-04: a watcher returning within grace cancels the sleeper.
        let derivedRuns = Seen<Int>()
        let derivedCog = Cog<Int>(name: "durableScenario.derived") { c in
            derivedRuns.append(c[_baseCog])
            return c[_baseCog] * 2
        }
        host.m.scope(_screenOpenCog) { s in s.watch(derivedCog, initial: .run) { _, _ in } }
        #expect(clock.activeSleeperCount == 0)
        try host.set(_screenOpenCog, named: "durableScenario.screenOpen", to: false)
        try await clock.waitForScheduledSleep()
        #expect(clock.activeSleeperCount == 1)
        clock.advance(by: .seconds(6))
        try host.set(_screenOpenCog, named: "durableScenario.screenOpen", to: true)
        #expect(clock.activeSleeperCount == 0)
        clock.advance(by: .seconds(30))
        #expect(clock.activeSleeperCount == 0)
        #expect(host.cogs.peek(derivedCog) == 20)
        #expect(derivedRuns.values == [10], "the state was kept, not recomputed")
        try host.expectAsyncResultsStayedLocal()
    }
}

@MainActor
private func nextStart(_ starts: AsyncStream<Int>) async -> Int? {
    var iterator = starts.makeAsyncIterator()
    return await iterator.next()
}
