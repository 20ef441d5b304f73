import Cog
import CogTesting
import Synchronization
import Testing

private struct FeedBroke: Error, Equatable {}

/// A reading with no `Equatable` conformance: every element publishes.
private struct Reading: Sendable {
    let celsius: Int
}

private let _feedCog = Cog<Int>.Manual(name: "stream.feed") { 1 }

/// A `price` async cog over a `ControlledStream`, read once in a fresh
/// runtime, with generation 0 started.
@MainActor
private func startedPrice(default defaultValue: Int = 0) async -> (ControlledStream<Int>, Cog<Int>.Async, Cogs) {
    let prices = ControlledStream<Int>()
    let priceCog = Cog<Int>.Async(default: defaultValue, name: "price") { _ in prices.makeWork() }
    let cogs = Cogs.forTesting()
    _ = cogs[priceCog]
    #expect(await nextStart(prices.starts) == 0)
    return (prices, priceCog, cogs)
}

/// A stream that ignores cancellation: elements reach a replaced generation's
/// iterator anyway, so only Cog's generation check can drop them. It records
/// whether the iterating task had been cancelled when an element was taken.
private final class StubbornFeed: Sendable {
    private struct State {
        var buffered: [Int] = []
        var waiter: CheckedContinuation<Int, Never>?
        var cancelledWhenTaken: [Bool] = []
    }

    private let state = Mutex(State())

    func send(_ element: Int) {
        let waiter: CheckedContinuation<Int, Never>? = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.buffered.append(element)
            return nil
        }
        waiter?.resume(returning: element)
    }

    var cancelledWhenTaken: [Bool] { state.withLock { $0.cancelledWhenTaken } }

    fileprivate func take() async -> Int {
        let element = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            let ready: Int? = state.withLock { state in
                if !state.buffered.isEmpty { return state.buffered.removeFirst() }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        let cancelled = Task.isCancelled
        state.withLock { $0.cancelledWhenTaken.append(cancelled) }
        return element
    }

    struct Elements: AsyncSequence {
        typealias Element = Int
        let feed: StubbornFeed

        func makeAsyncIterator() -> Iterator { Iterator(feed: feed) }

        struct Iterator: AsyncIteratorProtocol {
            let feed: StubbornFeed
            mutating func next() async -> Int? { await feed.take() }
        }
    }
}

@MainActor
@Suite("Async streams (D25)", .timeLimit(.minutes(1)))
struct StreamTests {
    @Test("STREAM-01 each changed element of a stream is its own turn")
    func eachElementIsATurn() async throws {
        let prices = ControlledStream<Int>()
        let priceCog = Cog<Int>.Async(default: 0, name: "price") { _ in prices.makeWork() }
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.watch(priceCog, initial: .skip, name: "price") { _, value in values.append(value) }
        #expect(await nextStart(prices.starts) == 0)
        let checks = completionChecks(cogs, count: 3)
        prices.yield(5, to: 0)
        prices.yield(7, to: 0)
        prices.yield(9, to: 0)
        try await waitAll(checks)
        #expect(values.values == [5, 7, 9])
        #expect(
            cogs.debugHistory.turnNames.filter { $0.hasPrefix("price ") } == [
                "price pending", "price success", "price success", "price success",
            ])
        #expect(cogs.peek(priceCog) == 9)
        #expect(prices.generationCount == 1)
        prices.finish(0)
    }

    @Test("STREAM-02 a stream's status is pending on the default before its first element")
    func pendingBeforeTheFirstElement() async throws {
        let prices = ControlledStream<Int>()
        let priceCog = Cog<Int>.Async(default: -1, name: "price") { _ in prices.makeWork() }
        let cogs = Cogs.forTesting()
        #expect(cogs[priceCog] == -1)
        #expect(await nextStart(prices.starts) == 0)
        let waiting = cogs.status[priceCog]
        #expect(waiting.kind == .pending)
        #expect(waiting.value == -1)
        #expect(!waiting.hasSucceeded)
        #expect(waiting.error == nil)
        let checks = completionChecks(cogs, count: 1)
        prices.yield(3, to: 0)
        try await waitAll(checks)
        let first = cogs.status[priceCog]
        #expect(first.kind == .success)
        #expect(first.value == 3)
        #expect(first.hasSucceeded)
        prices.finish(0)
    }

    @Test("STREAM-03 a dependency change cancels the old stream and drops its late elements")
    func dependencyChangeDropsLateElements() async throws {
        let stubborn = StubbornFeed()
        let controlled = ControlledStream<Int>()
        let priceCog = Cog<Int>.Async(default: 0, name: "price") { c in
            c[_feedCog] == 1 ? .stream(StubbornFeed.Elements(feed: stubborn)) : controlled.makeWork()
        }
        let values = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.watch(priceCog, initial: .skip, name: "price") { _, value in values.append(value) }
        let first = completionChecks(cogs, count: 1)
        stubborn.send(1)
        try await waitAll(first)
        #expect(values.values == [1])
        cogs.turn(_feedCog, to: 2)
        #expect(await nextStart(controlled.starts) == 0)
        // The replaced stream still hands over an element: checked, dropped,
        // and its iteration ends (two checks), with no failure published.
        let late = completionChecks(cogs, count: 2)
        stubborn.send(99)
        try await waitAll(late)
        #expect(stubborn.cancelledWhenTaken == [false, true])
        let fresh = completionChecks(cogs, count: 1)
        controlled.yield(2, to: 0)
        try await waitAll(fresh)
        #expect(values.values == [1, 2])
        #expect(cogs.peek(priceCog) == 2)
        #expect(!cogs.debugHistory.turnNames.contains("price failure"))
        controlled.finish(0)
    }

    @Test("STREAM-04 a natural end publishes nothing and keeps the last element as the success")
    func naturalEndKeepsTheLastSuccess() async throws {
        let (prices, priceCog, cogs) = await startedPrice()
        let checks = completionChecks(cogs, count: 2)
        prices.yield(8, to: 0)
        prices.finish(0)
        try await waitAll(checks)
        let turns = cogs.debugHistory.turnNames
        #expect(turns == ["price pending", "price success"])
        let status = cogs.status[priceCog]
        #expect(status.kind == .success)
        #expect(status.value == 8)
        #expect(cogs[priceCog] == 8)
        // An ended stream is not restarted by reading it.
        #expect(prices.generationCount == 1)
    }

    @Test("STREAM-05 a stream that ends before any element stays pending on the default")
    func emptyEndStaysPending() async throws {
        let (prices, priceCog, cogs) = await startedPrice(default: 42)
        let checks = completionChecks(cogs, count: 1)
        prices.finish(0)
        try await waitAll(checks)
        let status = cogs.status[priceCog]
        #expect(status.kind == .pending)
        #expect(status.value == 42)
        #expect(!status.hasSucceeded)
        #expect(status.error == nil)
        #expect(cogs.debugHistory.turnNames == ["price pending"])
        #expect(prices.generationCount == 1)
    }

    @Test("STREAM-06 a stream that throws publishes one failure and is not restarted")
    func throwIsOneFailure() async throws {
        let (prices, priceCog, cogs) = await startedPrice()
        let checks = completionChecks(cogs, count: 2)
        prices.yield(4, to: 0)
        prices.fail(0, with: FeedBroke())
        try await waitAll(checks)
        let status = cogs.status[priceCog]
        #expect(status.kind == .failure)
        #expect(status.value == 4)
        #expect(status.hasSucceeded)
        #expect(status.error as? FeedBroke == FeedBroke())
        #expect(cogs[priceCog] == 4)
        #expect(cogs.debugHistory.turnNames.filter { $0 == "price failure" }.count == 1)
        // Later elements for the ended generation go nowhere; nothing restarted it.
        prices.yield(5, to: 0)
        #expect(cogs.peek(priceCog) == 4)
        #expect(prices.generationCount == 1)
    }

    @Test("STREAM-07 cancellation Cog caused is silent: a replaced stream publishes no failure")
    func cogCausedCancellationIsSilent() async throws {
        let (prices, priceCog, cogs) = await startedPrice()
        // The refresh cancels generation 0, whose iterator throws CancellationError.
        let ended = completionChecks(cogs, count: 1)
        _ = cogs.refresh(priceCog)
        #expect(await nextStart(prices.starts) == 1)
        try await waitAll(ended)
        let status = cogs.status[priceCog]
        #expect(status.kind == .pending)
        #expect(status.error == nil)
        #expect(!cogs.debugHistory.turnNames.contains("price failure"))
        prices.finish(1)
    }

    @Test("STREAM-08 equal consecutive elements publish nothing for an Equatable value")
    func equalConsecutiveElementsAreDropped() async throws {
        let prices = ControlledStream<Int>()
        let priceCog = Cog<Int>.Async(default: 0, name: "price") { _ in prices.makeWork() }
        let statuses = Recorder<String>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.status.watch(priceCog, initial: .skip, name: "status") { _, status in
            statuses.append("\(status.kind) \(status.value)")
        }
        #expect(await nextStart(prices.starts) == 0)
        let checks = completionChecks(cogs, count: 5)
        for element in [5, 5, 6, 6, 5] { prices.yield(element, to: 0) }
        try await waitAll(checks)
        #expect(statuses.values == ["success 5", "success 6", "success 5"])
        #expect(cogs.debugHistory.turnNames.filter { $0 == "price success" }.count == 3)
        prices.finish(0)
    }

    @Test("STREAM-09 non-Equatable elements always publish, equal or not")
    func nonEquatableElementsAlwaysPublish() async throws {
        let readings = ControlledStream<Reading>()
        let readingCog = Cog<Reading>.Async(default: Reading(celsius: 0), name: "reading") { _ in
            readings.makeWork()
        }
        let seen = Recorder<Int>()
        let (cogs, m) = Cogs.forTestingWithController()
        m.watch(readingCog, initial: .skip, name: "reading") { _, reading in seen.append(reading.celsius) }
        #expect(await nextStart(readings.starts) == 0)
        let checks = completionChecks(cogs, count: 3)
        for celsius in [20, 20, 20] { readings.yield(Reading(celsius: celsius), to: 0) }
        try await waitAll(checks)
        #expect(seen.values == [20, 20, 20])
        #expect(cogs.debugHistory.turnNames.filter { $0 == "reading success" }.count == 3)
        readings.finish(0)
    }

    @Test("STREAM-10 ControlledStream: driving an unknown, unstarted or ended generation does nothing")
    func controlledStreamIgnoresOtherGenerations() async throws {
        let prices = ControlledStream<Int>()
        let priceCog = Cog<Int>.Async(default: 0, name: "price") { _ in prices.makeWork() }
        let cogs = Cogs.forTesting()
        // Nothing started yet: these reach no generation and start none.
        prices.yield(1, to: 0)
        prices.finish(0)
        prices.fail(0, with: FeedBroke())
        #expect(prices.generationCount == 0)
        _ = cogs[priceCog]
        #expect(await nextStart(prices.starts) == 0)
        prices.yield(2, to: 7)
        prices.finish(3)
        prices.fail(5, with: FeedBroke())
        let checks = completionChecks(cogs, count: 2)
        prices.yield(3, to: 0)
        prices.finish(0)
        try await waitAll(checks)
        // Generation 0 saw only its own element; the ended one takes no more.
        prices.yield(4, to: 0)
        prices.fail(0, with: FeedBroke())
        #expect(cogs.peek(priceCog) == 3)
        #expect(cogs.status[priceCog].kind == .success)
        #expect(cogs.debugHistory.turnNames == ["price pending", "price success"])
        #expect(prices.generationCount == 1)
    }

    @Test("STREAM-11 a refresh runs the selector again, so a single-pass AsyncStream is made fresh for it")
    func refreshMakesAFreshSequence() async {
        let feeds = Recorder<AsyncStream<Int>.Continuation>()
        let priceCog = Cog<Int>.Async(default: 0, name: "price") { _ in
            let (elements, continuation) = AsyncStream.makeStream(of: Int.self)
            feeds.append(continuation)
            return .stream(elements)
        }
        let cogs = Cogs.forTesting()
        let first = cogs.refresh(priceCog)
        feeds.values[0].yield(1)
        guard case .success(let one) = await first.outcome else {
            Issue.record("the first generation published nothing")
            return
        }
        #expect(one == 1)
        let second = cogs.refresh(priceCog)
        #expect(feeds.values.count == 2)
        feeds.values[0].yield(98)  // the replaced generation's stream was cancelled
        feeds.values[1].yield(2)
        guard case .success(let two) = await second.outcome else {
            Issue.record("the refreshed generation published nothing")
            return
        }
        #expect(two == 2)
        #expect(cogs.peek(priceCog) == 2)
        feeds.values[1].finish()
    }

    @Test("STREAM-11 refresh restarts a stream; its handle resolves with the new generation's first element")
    func refreshRestartsTheStream() async {
        let prices = ControlledStream<Int>()
        let priceCog = Cog<Int>.Async(default: 0, name: "price") { _ in prices.makeWork() }
        let cogs = Cogs.forTesting()
        let first = cogs.refresh(priceCog)
        #expect(await nextStart(prices.starts) == 0)
        let second = cogs.refresh(priceCog)
        guard case .superseded = await first.outcome else {
            Issue.record("the first refresh was not superseded")
            return
        }
        #expect(await nextStart(prices.starts) == 1)
        prices.yield(10, to: 0)
        prices.yield(11, to: 1)
        guard case .success(let value) = await second.outcome else {
            Issue.record("the second refresh did not succeed")
            return
        }
        #expect(value == 11)
        #expect(cogs.peek(priceCog) == 11)
        #expect(prices.generationCount == 2)
        prices.finish(1)
    }
}
