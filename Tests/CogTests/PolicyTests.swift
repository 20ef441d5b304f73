import Cog
import CogTesting
import Testing

private struct SaveFailed: Error, Equatable {}

private let _draftCog = Cog<Int>.Manual(name: "policy.draft") { 10 }

/// One `ControlledWork` per input, so a test sees which input each run has.
private typealias RunsByInput = [Int: ControlledWork<Int>]

@MainActor
private func runsByInput(_ inputs: [Int]) -> RunsByInput {
    Dictionary(uniqueKeysWithValues: inputs.map { ($0, ControlledWork<Int>()) })
}

/// An async cog under `policy` whose run for each draft is that draft's
/// `ControlledWork`, watched so every draft change reaches the selector; the
/// recorder collects the published values in order.
@MainActor
private func watchedSave(
    _ policy: OrderedPolicy, runs: RunsByInput
) -> (cogs: Cogs, saveCog: Cog<Int>.Async, values: Recorder<Int>) {
    let saveCog = Cog<Int>.Async(policy, default: 0, name: "save") { c in
        runs[c[_draftCog]]!.makeWork()
    }
    let values = Recorder<Int>()
    let (cogs, m) = Cogs.forTestingWithController()
    m.watch(saveCog, initial: .skip, name: "saved") { _, value in values.append(value) }
    return (cogs, saveCog, values)
}

@MainActor
@Suite("Ordered async policies (D24)", .timeLimit(.minutes(1)))
struct PolicyTests {
    @Test("POLICY-01 .queue runs one at a time in input order, each result its own turn")
    func queueRunsInInputOrder() async throws {
        let runs = runsByInput([10, 20, 30])
        let (cogs, saveCog, values) = watchedSave(.queue, runs: runs)
        #expect(await nextStart(runs[10]!.starts) == 0)
        cogs.turn(_draftCog, to: 20)
        cogs.turn(_draftCog, to: 30)
        #expect(runs[20]!.generationCount == 0)
        #expect(runs[30]!.generationCount == 0)
        runs[10]!.succeed(0, with: 1)
        #expect(await nextStart(runs[20]!.starts) == 0)
        #expect(runs[30]!.generationCount == 0)
        runs[20]!.succeed(0, with: 2)
        #expect(await nextStart(runs[30]!.starts) == 0)
        let last = completionChecks(cogs, count: 1)[0]
        runs[30]!.succeed(0, with: 3)
        try await last.wait()
        #expect(values.values == [1, 2, 3])
        #expect(cogs.peek(saveCog) == 3)
        #expect(runs.values.map(\.generationCount) == [1, 1, 1])
        #expect(
            cogs.debugHistory.turnNames.filter { $0.hasPrefix("save ") } == [
                "save pending", "save success", "save pending", "save success", "save pending", "save success",
            ])
    }

    @Test("POLICY-02 .queue: a failure does not stop the runs queued behind it")
    func queueGoesOnAfterAFailure() async throws {
        let runs = runsByInput([10, 20])
        let (cogs, saveCog, values) = watchedSave(.queue, runs: runs)
        #expect(await nextStart(runs[10]!.starts) == 0)
        cogs.turn(_draftCog, to: 20)
        runs[10]!.fail(0, with: SaveFailed())
        #expect(await nextStart(runs[20]!.starts) == 0)
        let failed = cogs.status[saveCog]
        // The failure was published, then the next run showed pending (keeping the error's value).
        #expect(cogs.debugHistory.turnNames.suffix(2) == ["save failure", "save pending"])
        #expect(failed.kind == .pending)
        let last = completionChecks(cogs, count: 1)[0]
        runs[20]!.succeed(0, with: 2)
        try await last.wait()
        #expect(values.values == [2])
        let status = cogs.status[saveCog]
        #expect(status.kind == .success)
        #expect(status.value == 2)
        #expect(status.error == nil)
    }

    @Test("POLICY-03 .exhaustLatest: while busy changes start nothing, then one catch-up run with the newest input")
    func exhaustLatestCatchesUpOnce() async throws {
        let runs = runsByInput([10, 20, 30])
        let (cogs, saveCog, values) = watchedSave(.exhaustLatest, runs: runs)
        #expect(await nextStart(runs[10]!.starts) == 0)
        cogs.turn(_draftCog, to: 20)
        cogs.turn(_draftCog, to: 30)
        #expect(runs[20]!.generationCount == 0)
        #expect(runs[30]!.generationCount == 0)
        #expect(runs[10]!.generationCount == 1)
        runs[10]!.succeed(0, with: 1)
        #expect(await nextStart(runs[30]!.starts) == 0)
        let last = completionChecks(cogs, count: 1)[0]
        runs[30]!.succeed(0, with: 3)
        try await last.wait()
        #expect(values.values == [1, 3])
        #expect(cogs.peek(saveCog) == 3)
        // Exactly one catch-up: the skipped input never ran, nothing ran twice.
        #expect(runs[20]!.generationCount == 0)
        #expect(runs[10]!.generationCount == 1)
        #expect(runs[30]!.generationCount == 1)
        #expect(cogs.status[saveCog].kind == .success)
    }

    @Test("POLICY-04 .merged: runs overlap and each result is its own turn in landing order")
    func mergedPublishesInLandingOrder() async throws {
        let runs = runsByInput([10, 20, 30])
        let (cogs, saveCog, values) = watchedSave(.merged, runs: runs)
        #expect(await nextStart(runs[10]!.starts) == 0)
        cogs.turn(_draftCog, to: 20)
        #expect(await nextStart(runs[20]!.starts) == 0)
        cogs.turn(_draftCog, to: 30)
        #expect(await nextStart(runs[30]!.starts) == 0)
        let checks = completionChecks(cogs, count: 3)
        runs[30]!.succeed(0, with: 3)
        try await checks[0].wait()
        runs[10]!.succeed(0, with: 1)
        try await checks[1].wait()
        runs[20]!.fail(0, with: SaveFailed())
        try await checks[2].wait()
        #expect(values.values == [3, 1])
        #expect(
            cogs.debugHistory.turnNames.filter { $0.hasPrefix("save ") }.suffix(3) == [
                "save success", "save success", "save failure",
            ])
        let status = cogs.status[saveCog]
        #expect(status.kind == .failure)
        #expect(status.value == 1)
        #expect(status.error as? SaveFailed == SaveFailed())
    }

    /// POLICY-05 is a compile-time rule: streams accept `.latest` only.
    ///
    /// The ordered initializers take a selector returning `RunWork<Value>`,
    /// which has `run` and no `stream`; only the `LatestPolicy` initializers
    /// take `Work<Value>`, the one type with `stream`. So
    ///
    ///     Cog<Int>.Async(.queue, default: 0) { _ in .stream(prices) }
    ///
    /// fails with "type 'RunWork<Int>' has no member 'stream'", and a
    /// `Work` cannot be handed to an ordered policy either ("cannot convert
    /// value of type 'Work<Int>' to closure result type 'RunWork<Int>'").
    /// A compile failure cannot run in the suite; this test pins the
    /// signatures that enforce it, so changing them breaks the build here.
    @Test("POLICY-05 streams accept .latest only, enforced by the initializers' types")
    func streamsAreLatestOnlyByType() async throws {
        let ordered: (
            OrderedPolicy, @autoclosure @escaping @MainActor () -> Int, String?, StaticString, UInt,
            @escaping @MainActor (Reader<CogStatus<Int>>) -> RunWork<Int>
        ) -> Cog<Int>.Async = Cog<Int>.Async.init
        let latest: (
            LatestPolicy, @autoclosure @escaping @MainActor () -> Int, String?, StaticString, UInt,
            @escaping @MainActor (Reader<CogStatus<Int>>) -> Work<Int>
        ) -> Cog<Int>.Async = Cog<Int>.Async.init
        let stream = ControlledStream<Int>()
        let streamed = latest(.latest, 0, "streamed", #fileID, #line) { _ in stream.makeWork() }
        let queued = ordered(.queue, 0, "queued", #fileID, #line) { _ in .run { 4 } }
        let cogs = Cogs.forTesting()
        guard case .success(let value) = await cogs.refresh(queued).outcome else {
            Issue.record("the queued run did not succeed")
            return
        }
        #expect(value == 4)
        _ = cogs[streamed]
        var starts = stream.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        let published = completionChecks(cogs, count: 1)[0]
        stream.yield(6, to: 0)
        try await published.wait()
        #expect(cogs.peek(streamed) == 6)
    }

    @Test("D24 each key of an ordered box keeps its own queue")
    func keyedQueuesAreIndependent() async {
        let work = ControlledWork<String>()
        let reportCogs = CogBox<String, Int>.Async(.queue, default: "none", name: "report") { _, _ in
            work.makeWork()
        }
        let cogs = Cogs.forTesting()
        let a = cogs.refresh(reportCogs[1])
        #expect(await nextStart(work.starts) == 0)
        let aAgain = cogs.refresh(reportCogs[1])
        // Key 1 is busy, so its second run waits; key 2 starts at once.
        let b = cogs.refresh(reportCogs[2])
        #expect(await nextStart(work.starts) == 1)
        work.succeed(1, with: "two")
        guard case .success("two") = await b.outcome else {
            Issue.record("key 2 did not load on its own")
            return
        }
        #expect(work.generationCount == 2)
        work.succeed(0, with: "one")
        guard case .success("one") = await a.outcome else {
            Issue.record("key 1's first run did not load")
            return
        }
        #expect(await nextStart(work.starts) == 2)
        work.succeed(2, with: "one again")
        guard case .success("one again") = await aAgain.outcome else {
            Issue.record("key 1's queued run did not load")
            return
        }
        #expect(cogs.peek(reportCogs[1]) == "one again")
        #expect(cogs.peek(reportCogs[2]) == "two")
    }

    @Test("POLICY-06 under .queue each refresh is its own run, and its handle resolves with that run's outcome")
    func queuedRefreshesResolveInOrder() async {
        let work = ControlledWork<Int>()
        let saveCog = Cog<Int>.Async(.queue, default: 0, name: "save") { _ in work.makeWork() }
        let cogs = Cogs.forTesting()
        let first = cogs.refresh(saveCog)
        #expect(await nextStart(work.starts) == 0)
        let second = cogs.refresh(saveCog)
        let third = cogs.refresh(saveCog)
        #expect(work.generationCount == 1)
        work.fail(0, with: SaveFailed())
        guard case .failure(let error) = await first.outcome else {
            Issue.record("the first refresh did not fail")
            return
        }
        #expect(error as? SaveFailed == SaveFailed())
        #expect(await nextStart(work.starts) == 1)
        work.succeed(1, with: 2)
        guard case .success(let two) = await second.outcome else {
            Issue.record("the second refresh did not succeed")
            return
        }
        #expect(two == 2)
        #expect(await nextStart(work.starts) == 2)
        work.succeed(2, with: 3)
        guard case .success(let three) = await third.outcome else {
            Issue.record("the third refresh did not succeed")
            return
        }
        #expect(three == 3)
        #expect(work.generationCount == 3)
        #expect(cogs.peek(saveCog) == 3)
    }
}
