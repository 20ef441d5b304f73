import Cog
import CogLog
import CogTesting
import Foundation
import Testing

private let _symbolCog = Cog<String>.Manual(name: "durable.async.symbol") { "ACME" }

/// The async cogs under test: a stream and a `.queue` run, both reading the
/// durable symbol, each with its own controlled work.
@MainActor
private struct Feeds {
    let prices = ControlledStream<Int>()
    let saves = ControlledWork<Int>()
    let priceCog: Cog<Int>.Async
    let saveCog: Cog<Int>.Async
    var seen: [String] = []

    init() {
        let prices = prices
        let saves = saves
        priceCog = Cog<Int>.Async(default: 0, name: "durable.async.price") { c in
            _ = c[_symbolCog]
            return prices.makeWork()
        }
        saveCog = Cog<Int>.Async(.queue, default: 0, name: "durable.async.save") { c in
            _ = c[_symbolCog]
            return saves.makeWork()
        }
    }
}

/// A mechanism that watches both cogs and records "price v" / "save v".
@MainActor
private final class Seen {
    var values: [String] = []

    func watching(_ feeds: Feeds) -> Probe {
        Probe("Feeds") { [self] m in
            m.watch(feeds.priceCog, initial: .skip, name: "price") { _, value in self.values.append("price \(value)") }
            m.watch(feeds.saveCog, initial: .skip, name: "save") { _, value in self.values.append("save \(value)") }
        }
    }
}

/// A leader link that records what a replica sends it.
@MainActor
private final class RecordingLink: CogRemoteLink {
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

@MainActor
private func nextStart(_ starts: AsyncStream<Int>) async -> Int? {
    var iterator = starts.makeAsyncIterator()
    return await iterator.next()
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
private func waitAll(_ checks: [MainActorCleanupAcknowledgement]) async throws {
    for check in checks { try await check.wait() }
}

/// Async cogs are process-local (D25, D24 in a durable runtime and on a
/// replica): their elements and results are local turns; only durable
/// sources are logged or sent.
@MainActor
@Suite("Async values in a durable runtime and on a replica", .timeLimit(.minutes(1)))
struct AsyncDurableTests {
    @Test("STREAM and POLICY in a durable runtime: elements and runs are local turns, never logged")
    func durableRuntimeLogsNoAsyncResults() async throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let feeds = Feeds()
        let seen = Seen()
        do {
            let store = try DurableTurnStore(directory: folder.path)
            let cogs = Cogs.forTesting(store: store, mechanisms: [seen.watching(feeds)])
            #expect(await nextStart(feeds.prices.starts) == 0)
            #expect(await nextStart(feeds.saves.starts) == 0)
            let elements = completionChecks(cogs, count: 2)
            feeds.prices.yield(5, to: 0)
            feeds.prices.yield(6, to: 0)
            try await waitAll(elements)
            let saved = completionChecks(cogs, count: 1)
            feeds.saves.succeed(0, with: 1)
            try await waitAll(saved)
            #expect(store.store.lastRevision == 0, "three async turns, no record")

            // The rename cancels stream generation 0, whose end is one more check.
            let ended = completionChecks(cogs, count: 1)
            cogs.turn(named: "rename") { c in c[_symbolCog] = "BOLT" }
            try await waitAll(ended)
            #expect(await nextStart(feeds.prices.starts) == 1)
            #expect(await nextStart(feeds.saves.starts) == 1)
            let element = completionChecks(cogs, count: 1)
            feeds.prices.yield(7, to: 1)
            try await waitAll(element)
            let resaved = completionChecks(cogs, count: 1)
            feeds.saves.succeed(1, with: 2)
            try await waitAll(resaved)
            #expect(seen.values == ["price 5", "price 6", "save 1", "price 7", "save 2"])
            #expect(cogs.debugHistory.turnNames.filter { $0 == "durable.async.price success" }.count == 3)
            #expect(store.store.lastRevision == 1)
            let records = try store.store.records(from: 1)
            #expect(records.map(\.name) == ["rename"])
            #expect(records[0].writes.map(\.name) == ["durable.async.symbol"])
            feeds.prices.finish(1)
        }
        // Reopened, the durable source is back; the async values start over.
        let reopened = try DurableTurnStore(directory: folder.path)
        let cogs = Cogs.forTesting(store: reopened)
        #expect(cogs.peek(_symbolCog) == "BOLT")
        #expect(cogs[feeds.priceCog] == 0)
        #expect(cogs.status[feeds.priceCog].kind == .pending)
        #expect(await nextStart(feeds.prices.starts) == 2)
        feeds.prices.finish(2)
    }

    @Test("STREAM and POLICY on a replica: a replicated change restarts them; results stay local, nothing is sent")
    func replicaRunsAsyncWorkLocally() async throws {
        let feeds = Feeds()
        let seen = Seen()
        let link = RecordingLink()
        let replica = Cogs.replica()
        replica.remoteLink = link
        replica.operateReplicaMechanisms([seen.watching(feeds)])
        #expect(await nextStart(feeds.prices.starts) == 0)
        #expect(await nextStart(feeds.saves.starts) == 0)
        let first = completionChecks(replica, count: 1)
        feeds.prices.yield(5, to: 0)
        try await waitAll(first)

        // The leader's turn arrives: the stream restarts (generation 0's end
        // is one check); the queued run waits for the one in flight.
        let ended = completionChecks(replica, count: 1)
        try replica.applyReplicatedTurn(
            named: "rename", writes: [CogDurableWrite(name: "durable.async.symbol", key: nil, value: try link.codec.encode("BOLT"))],
            codec: link.codec)
        try await waitAll(ended)
        #expect(await nextStart(feeds.prices.starts) == 1)
        #expect(feeds.saves.generationCount == 1)
        let late = completionChecks(replica, count: 1)
        feeds.prices.yield(99, to: 0)  // generation 0 was cancelled: this reaches nothing
        feeds.prices.yield(7, to: 1)
        try await waitAll(late)
        feeds.saves.succeed(0, with: 1)
        #expect(await nextStart(feeds.saves.starts) == 1)
        let last = completionChecks(replica, count: 1)
        feeds.saves.succeed(1, with: 2)
        try await waitAll(last)
        #expect(seen.values == ["price 5", "price 7", "save 1", "save 2"])
        #expect(replica.peek(_symbolCog) == "BOLT")
        #expect(link.submitted.isEmpty, "async results are never sent to the leader")
        feeds.prices.finish(1)
    }
}
