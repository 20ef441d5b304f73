import Cog
import CogTesting
import Foundation
import Testing

private struct LoadFailed: Error, Equatable {
    let reason: String
}

private let _zipCog = Cog<Int>.Manual(name: "async.zip") { 10 }

extension CogOps {
    fileprivate func setZip(_ zip: Int) { turn(_zipCog, to: zip) }
}

@MainActor
private func nextStart(_ work: ControlledWork<Int>) async -> Int? {
    var iterator = work.starts.makeAsyncIterator()
    return await iterator.next()
}

/// Whether the calling code is isolated to the main actor (its `#isolation`).
private func isolatedToMainActor(isolation: isolated (any Actor)? = #isolation) -> Bool {
    isolation === MainActor.shared
}

@MainActor
@Suite("Async values", .timeLimit(.minutes(1)))
struct AsyncTests {
    @Test func `D11 an async cog reads as its default and pending before any result`() async {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(forecastCog) == 0)
        let status = cogs.status[forecastCog]
        #expect(status.kind == .pending)
        #expect(status.isLoading)
        #expect(!status.hasSucceeded)
        #expect(status.error == nil)
        #expect(cogs.debugHistory.turnNames == ["forecast pending"])
        #expect(await nextStart(work) == 0)
        work.fail(0, with: CancellationError())
    }

    @Test func `D12 status follows pending, success, reload and failure, keeping the last good value`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let cogs = Cogs.forTesting()
        _ = cogs[forecastCog]
        #expect(await nextStart(work) == 0)
        let first = completionChecks(cogs, count: 1)
        work.succeed(0, with: 72)
        try await first[0].wait()
        #expect(cogs[forecastCog] == 72)
        let success = cogs.status[forecastCog]
        #expect(success.kind == .success)
        #expect(success.value == 72)
        #expect(success.hasSucceeded)

        let reload = cogs.refresh(forecastCog)
        let reloading = cogs.status[forecastCog]
        #expect(reloading.kind == .pending)
        #expect(reloading.value == 72)
        #expect(reloading.hasSucceeded)
        #expect(await nextStart(work) == 1)
        work.fail(1, with: LoadFailed(reason: "offline"))
        guard case .failure(let error) = await reload.outcome else {
            Issue.record("the refresh did not fail")
            return
        }
        #expect(error as? LoadFailed == LoadFailed(reason: "offline"))
        let failed = cogs.status[forecastCog]
        #expect(failed.kind == .failure)
        #expect(failed.value == 72)
        #expect(failed.hasSucceeded)
        #expect(failed.error as? LoadFailed == LoadFailed(reason: "offline"))
        #expect(cogs[forecastCog] == 72)
        #expect(
            cogs.debugHistory.turnNames == [
                "forecast pending", "forecast success", "forecast pending", "forecast failure",
            ])
    }

    @Test func `D15 latest wins: a dependency change replaces the run in flight and drops its result`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: -1, name: "forecast") { c in
            _ = c[_zipCog]
            return work.makeWork()
        }
        let cogs = Cogs.forTesting()
        _ = cogs[forecastCog]
        #expect(await nextStart(work) == 0)
        let checks = completionChecks(cogs, count: 2)
        cogs.setZip(20)
        _ = cogs[forecastCog]
        #expect(await nextStart(work) == 1)
        work.succeed(0, with: 100)
        work.succeed(1, with: 200)
        try await checks[0].wait()
        try await checks[1].wait()
        #expect(cogs[forecastCog] == 200)
        let status = cogs.status[forecastCog]
        #expect(status.kind == .success)
        #expect(status.error == nil)
        #expect(!cogs.debugHistory.turnNames.contains("forecast failure"))
        #expect(cogs.debugHistory.turnNames.filter { $0 == "forecast success" }.count == 1)
    }

    @Test func `D16 refresh starts a new generation and an older handle resolves as superseded`() async {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0) { _ in work.makeWork() }
        let cogs = Cogs.forTesting()
        let first = cogs.refresh(forecastCog)
        #expect(await nextStart(work) == 0)
        #expect(work.generationCount == 1)
        let second = cogs.refresh(forecastCog)
        guard case .superseded = await first.outcome else {
            Issue.record("the first refresh was not superseded")
            return
        }
        #expect(await nextStart(work) == 1)
        work.succeed(1, with: 9)
        guard case .success(let value) = await second.outcome else {
            Issue.record("the second refresh did not succeed")
            return
        }
        #expect(value == 9)
        #expect(cogs.peek(forecastCog) == 9)
    }

    @Test func `D19 ASYNC-15 async work runs on the main actor by default`() async {
        let reads = Counter()
        let forecastCog = Cog<Bool>.Async(default: false) { _ in
            .run {
                // Synchronous main-actor access: this body is isolated to it.
                reads.bump()
                MainActor.preconditionIsolated("the work body left the main actor")
                await Task.yield()
                reads.bump()
                return isolatedToMainActor()
            }
        }
        let cogs = Cogs.forTesting()
        let handle = cogs.refresh(forecastCog)
        guard case .success(let ranOnMain) = await handle.outcome else {
            Issue.record("the work did not succeed")
            return
        }
        #expect(ranOnMain)
        #expect(reads.count == 2)
        #expect(cogs.peek(forecastCog))
    }

    @Test func `ASYNC-17 the task running a state's work is named after the state`() async {
        let forecastCog = Cog<String>.Async(default: "", name: "forecast") { _ in .run { Task.name ?? "unnamed" } }
        let cogs = Cogs.forTesting()
        guard case .success(let name) = await cogs.refresh(forecastCog).outcome else {
            Issue.record("the work did not succeed")
            return
        }
        #expect(name == "forecast")
    }

    @Test func `D19 ASYNC-15 @concurrent work runs off the main actor and publishes on it`() async {
        let forecastCog = Cog<Bool>.Async(default: true) { _ in
            .run { @concurrent in isolatedToMainActor() }
        }
        let published = Recorder<Bool>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.watch(forecastCog, initial: .skip, name: "value") { _, value in
            MainActor.preconditionIsolated("a result was published off the main actor")
            published.append(value)
        }
        let handle = cogs.refresh(forecastCog)
        guard case .success(let ranOnMain) = await handle.outcome else {
            Issue.record("the work did not succeed")
            return
        }
        #expect(ranOnMain == false)
        #expect(published.values == [false])
    }

    @Test func `ASYNC-15 @concurrent work is really off the main actor`() async {
        await #expect(processExitsWith: .failure) { @MainActor in
            let cogs = Cogs.forTesting()
            let probeCog = Cog<Int>.Async(default: 0) { _ in
                .run { @concurrent in
                    MainActor.preconditionIsolated("off the main actor, as asked")
                    return 1
                }
            }
            // Resolves (and the process exits normally) only if the work
            // did not trap.
            _ = await cogs.refresh(probeCog).outcome
        }
    }

    @Test func `ASYNC-15 ordered-policy work runs on the main actor too, and @concurrent leaves it`() async {
        let onMain = Cog<Bool>.Async(.queue, default: false) { _ in .run { isolatedToMainActor() } }
        let offMain = Cog<Bool>.Async(.queue, default: true) { _ in .run { @concurrent in isolatedToMainActor() } }
        let cogs = Cogs.forTesting()
        let first = cogs.refresh(onMain)
        let second = cogs.refresh(offMain)
        guard case .success(true) = await first.outcome, case .success(false) = await second.outcome else {
            Issue.record("ordered work ran on the wrong side of the main actor")
            return
        }
    }

    @Test func `D18 the keys of an async box load and publish independently`() async {
        let work = ControlledWork<String>()
        let reportCogs = CogBox<String, Int>.Async(default: "none") { _, _ in work.makeWork() }
        let cogs = Cogs.forTesting()
        let a = cogs.refresh(reportCogs[1])
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        _ = cogs.refresh(reportCogs[2])
        #expect(await starts.next() == 1)
        work.succeed(0, with: "sunny")
        guard case .success = await a.outcome else {
            Issue.record("key 1 did not load")
            return
        }
        #expect(cogs.peek(reportCogs[1]) == "sunny")
        #expect(cogs.peek(reportCogs[2]) == "none")
        #expect(cogs.status[reportCogs[2]].isLoading)
        work.fail(1, with: CancellationError())
    }

    @Test func `D23 a current run that throws CancellationError itself is an ordinary failure`() async {
        let forecastCog = Cog<Int>.Async(default: 0) { _ in .run { throw CancellationError() } }
        let cogs = Cogs.forTesting()
        let handle = cogs.refresh(forecastCog)
        guard case .failure(let error) = await handle.outcome else {
            Issue.record("expected a failure")
            return
        }
        #expect(error is CancellationError)
        #expect(cogs.status[forecastCog].kind == .failure)
    }

    @Test func `D13 an equal reload shows status turns while value readers stay quiet`() async {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0) { _ in work.makeWork() }
        let valueRuns = Counter()
        let labelCog = Cog<String> { c in
            valueRuns.bump()
            return "\(c[forecastCog])°"
        }
        let cogs = Cogs.forTesting()
        let first = cogs.refresh(forecastCog)
        #expect(await nextStart(work) == 0)
        work.succeed(0, with: 5)
        _ = await first.outcome
        #expect(cogs[labelCog] == "5°")
        let runsAfterFirst = valueRuns.count
        let second = cogs.refresh(forecastCog)
        #expect(await nextStart(work) == 1)
        work.succeed(1, with: 5)
        _ = await second.outcome
        #expect(cogs[labelCog] == "5°")
        #expect(valueRuns.count == runsAfterFirst)
        #expect(cogs.status[forecastCog].kind == .success)
    }

    @Test func `D21 refresh attempted inside a selector traps`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let innerCog = Cog<Int>.Async(default: 0, name: "inner") { _ in .run { 1 } }
                let cogs = Cogs.forTesting()
                let outerCog = Cog<Int>(name: "outer") { _ in
                    cogs.refresh(innerCog)
                    return 0
                }
                _ = cogs.peek(outerCog)
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog cannot run turn \"refresh(inner)\" while the automatic cog `outer` is computing: a turn during "
                    + "automatic computation would write from code that may only read Cog state. Call refresh "
                    + "outside the computation, from event handling, an op or a reaction"), "\(text)")
    }
}

@MainActor
@Suite("Async values with reactions", .timeLimit(.minutes(1)))
struct AsyncReactionTests {
    @Test func `D12 a status watch sees pending, success, reload pending and failure as separate turns`() async {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let kinds = Recorder<String>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(forecastCog, initial: .run, name: "status") { _, status in
            kinds.append("\(status.kind) \(status.value) \(status.hasSucceeded) \(status.error != nil)")
        }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        let first = cogs.refresh(forecastCog)
        #expect(await starts.next() == 1)
        work.succeed(1, with: 7)
        _ = await first.outcome
        let second = cogs.refresh(forecastCog)
        #expect(await starts.next() == 2)
        work.fail(2, with: CancellationError())
        _ = await second.outcome
        // The first refresh replaced generation 0 while it was pending: its
        // pending is a turn of its own (ASYNC-21, ASYNC-32).
        #expect(
            kinds.values == [
                "pending 0 false false", "pending 0 false false", "success 7 true false", "pending 7 true false",
                "failure 7 true true",
            ])
    }

    @Test func `D15 a watched async cog restarts its work when a dependency changes`() async throws {
        let work = ControlledWork<Int>()
        let _zipCog = Cog<Int>.Manual { 1 }
        let forecastCog = Cog<Int>.Async(default: 0) { c in
            _ = c[_zipCog]
            return work.makeWork()
        }
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.watch(forecastCog, initial: .skip, name: "forecast") { _, value in values.append(value) }
        var starts = work.starts.makeAsyncIterator()
        #expect(await starts.next() == 0)
        // Two completion checks: the replaced generation's (dropped) and the new one's.
        let check = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextAsyncCompletionCheck(with: check)
        let published = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextAsyncCompletionCheck(with: published)
        cogs.turn(named: "move") { c in c[_zipCog] = 2 }
        #expect(await starts.next() == 1)
        work.succeed(1, with: 42)
        try await check.wait()
        try await published.wait()
        #expect(values.values == [42])
    }
}
