import Cog
import CogTesting
import Foundation
import Testing

private let _shelfCogs = CogBox<Int, String>.Manual(name: "outcomes.shelf") { 0 }
private let _openCog = Cog<Bool>.Manual(name: "outcomes.open") { false }

private struct Stock: Codable, Sendable {
    var item: String
    var count: Int
}

/// Puts `count` on the shelf: applied, or unchanged when the shelf already holds it.
private let shelveOp = RemoteOp<Stock>(name: "outcomes.shelve") { c, stock in
    c[_shelfCogs[stock.item]] = stock.count
}

/// Takes from the shelf, or refuses `sold-out`.
private let takeOp = RemoteOp<Stock>(name: "outcomes.take") { c, stock in
    let shelf = c[_shelfCogs[stock.item]]
    guard shelf >= stock.count else { try c.refuse("sold-out", "\(stock.item) has \(shelf) left, the take needs \(stock.count)") }
    c[_shelfCogs[stock.item]] = shelf - stock.count
}

extension CogOps {
    /// A verb that lets its caller see the answer, on the runtime and on a controller alike.
    fileprivate func take(_ item: String, _ count: Int, then observe: @escaping @MainActor (OpOutcome) -> Void) {
        perform(takeOp, Stock(item: item, count: count), then: observe)
    }
}

/// The controller of a Bool scope over `_openCog`, open.
@MainActor
private func openScope() -> (cogs: Cogs, root: MechanismController, scope: MechanismController) {
    var root: MechanismController?
    var scope: MechanismController?
    let runtime = Cogs.forTesting(mechanisms: [
        Probe("Shop") { m in
            root = m
            m.scope(_openCog, name: "counter") { scope = $0 }
        }
    ])
    runtime.turn(_openCog, to: true)
    guard let root, let scope else { fatalError("the scope did not open") }
    return (runtime, root, scope)
}

/// A leader link that keeps each request's outcome callback, answering none by itself.
@MainActor
private final class HeldLink: CogRemoteLink {
    var held: [(op: String, answer: @MainActor (OpOutcome) -> Void)] = []
    let codec: any CogDurableStore = JSONCodec()
    /// Yields the op name of each request as it is held.
    let submissions: AsyncStream<String>
    private let submitted: AsyncStream<String>.Continuation

    init() {
        (submissions, submitted) = AsyncStream.makeStream()
    }

    func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?) {}

    func submit(
        op name: String, argument: any Encodable & Sendable, owner: MechanismController?, outcome: @escaping @MainActor (OpOutcome) -> Void
    ) {
        held.append((name, outcome))
        submitted.yield(name)
    }

    func registerScope(
        path: String, source: String, key: [UInt8]?, form: CogScopeForm, parent: CogInstanceSlot?,
        currentEncoding: (@MainActor () -> [UInt8]?)?
    ) -> (any CogRemoteScope)? { nil }
}

private final class JSONCodec: CogDurableStore {
    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { Array(try JSONEncoder().encode(value)) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try JSONDecoder().decode(type, from: Data(bytes)) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { nil }
    func commit(_ turn: CogDurableTurn) throws {}
}

@MainActor
@Suite("Op outcomes in process")
struct OutcomeTests {
    @Test func `a mechanism sees its op applied, unchanged and refused when each turn ends`() {
        let (cogs, m, _) = openScope()
        var seen: [OpOutcome] = []
        m.perform(shelveOp, Stock(item: "tea", count: 3)) { seen.append($0) }
        m.perform(shelveOp, Stock(item: "tea", count: 3)) { seen.append($0) }
        m.perform(takeOp, Stock(item: "tea", count: 5)) { seen.append($0) }
        m.perform(takeOp, Stock(item: "tea", count: 2)) { seen.append($0) }
        #expect(seen.count == 4, "called from idle code, each outcome is known before perform returns")
        guard seen.count == 4, case .applied(let first) = seen[0], case .applied(let second) = seen[3] else {
            Issue.record("not applied, unchanged, refused, applied: \(seen)")
            return
        }
        #expect(seen[1] == .unchanged)
        #expect(seen[2] == .refused(code: "sold-out", reason: "tea has 3 left, the take needs 5"))
        #expect(second == first + 1, "an embedded runtime counts its changing turns: the refused and unchanged ones use none")
        #expect(cogs.peek(_shelfCogs["tea"]) == 1)
        #expect(cogs.lastRefusal == nil)
    }

    @Test func `a plain perform stays fire-and-forget and the runtime can observe too`() {
        let cogs = Cogs.forTesting()
        cogs.perform(shelveOp, Stock(item: "jam", count: 1))
        var seen: OpOutcome?
        cogs.perform(takeOp, Stock(item: "jam", count: 2)) { seen = $0 }
        #expect(seen == .refused(code: "sold-out", reason: "jam has 1 left, the take needs 2"))
        #expect(seen?.description == "refused sold-out: jam has 1 left, the take needs 2")
    }

    @Test func `a verb in an extension of CogOps passes the outcome on from the runtime and from a controller`() {
        let (cogs, m, _) = openScope()
        cogs.perform(shelveOp, Stock(item: "rye", count: 1))
        var seen: [OpOutcome] = []
        cogs.take("rye", 2) { seen.append($0) }
        m.take("rye", 1) { seen.append($0) }
        #expect(seen.count == 2)
        #expect(seen.first == .refused(code: "sold-out", reason: "rye has 1 left, the take needs 2"))
        if case .applied? = seen.last {} else { Issue.record("not applied: \(seen)") }
    }

    @Test func `an op performed from a reaction is answered when its queued turn ends`() {
        var seen: [OpOutcome] = []
        var shelfWhenAnswered: Int?
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Restocker") { m in
                m.watch(_shelfCogs["tea"], initial: .skip, name: "low") { _, shelf in
                    guard shelf == 0 else { return }
                    m.perform(shelveOp, Stock(item: "tea", count: 10)) { outcome in
                        seen.append(outcome)
                        shelfWhenAnswered = m.ifLive { $0.peek(_shelfCogs["tea"]) }
                    }
                }
            }
        ])
        cogs.perform(shelveOp, Stock(item: "tea", count: 1))
        cogs.perform(takeOp, Stock(item: "tea", count: 1))
        #expect(seen.count == 1)
        if case .applied = seen.first {} else { Issue.record("not applied: \(seen)") }
        #expect(shelfWhenAnswered == 10, "the answer comes after the op's turn is settled")
    }

    @Test func `an op joined into a running turn shares that turn's outcome`() {
        let cogs = Cogs.forTesting()
        var seen: OpOutcome?
        cogs.turn(named: "outer") { c in
            c[_shelfCogs["salt"]] = 4
            cogs.perform(takeOp, Stock(item: "salt", count: 9)) { seen = $0 }
            #expect(seen == nil, "not known while the turn runs")
        }
        #expect(seen == .refused(code: "sold-out", reason: "salt has 4 left, the take needs 9"))
        #expect(cogs.peek(_shelfCogs["salt"]) == 0)
    }

    @Test func `a task awaits its op's outcome`() async throws {
        let (cogs, _, scope) = openScope()
        let outcome = try await scope.performAndWait(takeOp, Stock(item: "oil", count: 1))
        #expect(outcome == .refused(code: "sold-out", reason: "oil has 0 left, the take needs 1"))
        let applied = try await scope.performAndWait(shelveOp, Stock(item: "oil", count: 2))
        if case .applied = applied {} else { Issue.record("not applied: \(applied)") }
        #expect(cogs.peek(_shelfCogs["oil"]) == 2, "the runtime lives on while its scope is awaited")
    }

    @Test func `a retired scope's callback is not called and its awaiter stops waiting with CancellationError`() async throws {
        let link = HeldLink()
        let (cogs, _, scope) = openScope()
        cogs.remoteLink = link
        var called = false
        scope.perform(shelveOp, Stock(item: "tea", count: 1)) { _ in called = true }
        let waiting = Task { @MainActor in try await scope.performAndWait(takeOp, Stock(item: "tea", count: 1)) }
        var submissions = link.submissions.makeAsyncIterator()
        _ = await submissions.next()
        _ = await submissions.next()
        #expect(link.held.map(\.op) == ["outcomes.shelve", "outcomes.take"])
        cogs.remoteLink = nil
        cogs.turn(_openCog, to: false)
        #expect(scope.isRetired)
        let ended = await waiting.result
        #expect(throws: CancellationError.self) { try ended.get() }
        cogs.remoteLink = link
        for held in link.held { held.answer(.applied(revision: 7)) }
        #expect(!called, "inert once retired")
        let late = await Task { @MainActor in try await scope.performAndWait(shelveOp, Stock(item: "tea", count: 1)) }.result
        #expect(throws: CancellationError.self) { try late.get() }
    }

    @Test func `a cancelled awaiter stops waiting and a late answer is ignored`() async {
        let link = HeldLink()
        let cogs = Cogs.forTesting()
        cogs.remoteLink = link
        let waiting = Task { @MainActor in try await cogs.performAndWait(shelveOp, Stock(item: "tea", count: 1)) }
        var submissions = link.submissions.makeAsyncIterator()
        _ = await submissions.next()
        #expect(link.held.count == 1)
        waiting.cancel()
        let ended = await waiting.result
        #expect(throws: CancellationError.self) { try ended.get() }
        link.held.first?.answer(.unchanged)
        _ = cogs
    }
}
