import Cog
import CogCodec
import CogLog
import CogTesting
import Foundation
import Testing

private struct Account: Codable, Equatable, Sendable {
    var owner: String
    var balance: Int
}

private let _accountsCogs = CogBox<Account?, String>.Manual(name: "durable.accounts") { nil }
private let _openedCountCog = Cog<Int>.Manual(name: "durable.openedCount") { 0 }
private let _draftCogs = CogBox<String, Int>.Manual(
    { "" }, lifetime: .whileObserved(resetToInitial: true), name: "durable.draft")
private let _unnamedCog = Cog<Int>.Manual { 0 }
/// An optional source whose initial value is not nil: a write of nil must
/// read back as nil everywhere, a release as the initial value.
private let _optionalCog = Cog<Int?>.Manual({ 5 }, lifetime: .whileObserved(resetToInitial: true), name: "durable.optional")
private let _twinACog = Cog<Int>.Manual(name: "durable.twin") { 0 }
private let _twinBCog = Cog<Int>.Manual(name: "durable.twin") { 0 }

private let totalCog = Cog<Int>(name: "durable.total") { c in
    ["alice", "bob"].reduce(0) { $0 + (c[_accountsCogs[$1]]?.balance ?? 0) }
}

extension CogOps {
    fileprivate func open(_ owner: String, with balance: Int) {
        turn { c in
            c[_accountsCogs[owner]] = Account(owner: owner, balance: balance)
            c[_openedCountCog] += 1
        }
    }

    fileprivate func typeDraft(_ id: Int, _ text: String) { turn(_draftCogs[id], to: text) }
    fileprivate func dropDraft(_ id: Int) { discard(_draftCogs[id]) }
    fileprivate func setOptional(_ value: Int?) { turn(_optionalCog, to: value) }
    fileprivate func dropOptional() { discard(_optionalCog) }
    fileprivate func bumpUnnamed() { turn { c in c[_unnamedCog] += 1 } }
    fileprivate func touchTwins() { turn { c in c[_twinACog] = c[_twinBCog] + 1 } }
}

@MainActor
@Suite("Durable runtime")
struct DurableRuntimeTests {
    @Test func `each settled turn is committed before its reactions run, and reopening restores state without replay`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        do {
            let store = try DurableTurnStore(directory: folder.path)
            var revisionsSeenByReaction: [UInt64] = []
            let durable = Cogs.forTesting(store: store, mechanisms: [
                Probe("Audit") { m in
                    m.watch(totalCog, initial: .skip, name: "total") { _, _ in
                        revisionsSeenByReaction.append(store.store.lastRevision)
                    }
                }
            ])
            durable.open("alice", with: 10)
            durable.open("bob", with: 5)
            #expect(revisionsSeenByReaction == [1, 2])
            #expect(store.store.lastRevision == 2)
            let records = try store.store.records(from: 1)
            #expect(records.map(\.name) == ["open(_:with:)", "open(_:with:)"])
            #expect(records[0].writes.map(\.name) == ["durable.accounts", "durable.openedCount"])
        }
        let reopened = try DurableTurnStore(directory: folder.path)
        let cogs = Cogs.forTesting(store: reopened)
        #expect(cogs.peek(_accountsCogs["alice"]) == Account(owner: "alice", balance: 10))
        #expect(cogs.peek(_openedCountCog) == 2)
        #expect(cogs.peek(totalCog) == 15)
        #expect(reopened.store.epoch == 2)
        #expect(try reopened.store.verify().isSound)
    }

    @Test func `a discard of durable state is logged as released`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try DurableTurnStore(directory: folder.path)
        let cogs = Cogs.forTesting(store: store)
        cogs.typeDraft(1, "half")
        cogs.dropDraft(1)
        let records = try store.store.records(from: 1)
        #expect(records.map(\.name) == ["typeDraft(_:_:)", "discard(durable.draft[1])"])
        #expect(records[1].writes.map(\.isRelease) == [true])
        #expect(try store.store.value(name: "durable.draft", key: try CBOREncoder().encode(1)) == nil)
    }

    @Test func `nil written to an optional source is a value on the leader, a replica, the replay and tail; only discard releases`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let replica = Cogs.replica()
        let codec = TestCodec()
        func applyAll(from revision: UInt64, _ store: TurnStore) throws {
            for record in try store.records(from: revision) {
                try replica.applyReplicatedTurn(
                    named: record.name, writes: record.writes.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                    codec: codec)
            }
        }
        do {
            let store = try DurableTurnStore(directory: folder.path)
            let leader = Cogs.forTesting(store: store)
            leader.setOptional(8)
            leader.setOptional(nil)
            #expect(leader.peek(_optionalCog) == nil)
            try applyAll(from: 1, store.store)
            #expect(replica.peek(_optionalCog) == nil, "the replica reads the nil, not the initial 5")
            #expect(try store.store.verify().problem == nil, "the replay holds the nil the state table holds")
            let record = try #require(try store.store.records(from: 2).first)
            #expect(record.writes.map(\.isRelease) == [false])
            #expect(record.displayLines.last == "    durable.optional = null")
            #expect(record.jsonLine.contains(#""writes": [{"name": "durable.optional", "key": null, "value": null, "released": false}]"#))
        }
        do {
            let store = try DurableTurnStore(directory: folder.path)
            let leader = Cogs.forTesting(store: store)
            #expect(leader.peek(_optionalCog) == nil, "a restarted leader reads the nil back")
            leader.dropOptional()
            #expect(leader.peek(_optionalCog) == 5)
            try applyAll(from: 3, store.store)
            #expect(replica.peek(_optionalCog) == 5)
            #expect(try store.store.verify().problem == nil)
            let records = try store.store.records(from: 1)
            #expect(records.map { $0.writes[0].isRelease } == [false, false, true], "released only for the discard")
            #expect(records[2].displayLines.last == "    durable.optional = released")
            #expect(records[2].jsonLine.contains(#""value": null, "released": true}"#))
        }
    }

    @Test func `a turn that changes nothing gets no record`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try DurableTurnStore(directory: folder.path)
        let cogs = Cogs.forTesting(store: store)
        cogs.typeDraft(1, "")
        #expect(store.store.lastRevision == 0)
    }

    @Test func `writing a source without a stable name fails naming the declaration`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                // The child traps, so the folder is named after its parent, which removes it.
                let store = try! DurableTurnStore(directory: exitTestFolder("unnamed", parent: getppid()))
                Cogs.forTesting(store: store).bumpUnnamed()
            }
        }
        try? FileManager.default.removeItem(atPath: exitTestFolder("unnamed", parent: getpid()))
        let text = stderrText(result)
        #expect(text.contains("(declared at CogLogTests/DurableRuntimeTests.swift:"))
        #expect(text.contains("has no stable name; give the declaration a `name:`"))
    }

    @Test func `two declarations with one name fail naming both`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                // The child traps, so the folder is named after its parent, which removes it.
                let store = try! DurableTurnStore(directory: exitTestFolder("twins", parent: getppid()))
                Cogs.forTesting(store: store).touchTwins()
            }
        }
        try? FileManager.default.removeItem(atPath: exitTestFolder("twins", parent: getpid()))
        let text = stderrText(result)
        #expect(text.contains("two declarations are named `durable.twin`: one at CogLogTests/DurableRuntimeTests.swift:"))
    }
}

/// The data folder an exit test's child uses (named after the test process,
/// which removes it: the child traps before any cleanup of its own).
func exitTestFolder(_ name: String, parent: pid_t) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("cogd-exit-\(parent)-\(name)").path
}

/// A mechanism whose `operate` is a closure.
struct Probe: Mechanism {
    let name: String
    let body: @MainActor (MechanismController) -> Void

    init(_ name: String, _ body: @escaping @MainActor (MechanismController) -> Void) {
        self.name = name
        self.body = body
    }

    func operate(_ m: MechanismController) { body(m) }
}

/// The text a trap printed.
func stderrText(_ result: ExitTest.Result?) -> String {
    guard let result else { return "" }
    return String(decoding: result.standardErrorContent, as: UTF8.self)
}

/// The log's codec, for a replica applying records in a test.
@MainActor
final class TestCodec: CogDurableStore {
    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try CBORDecoder().decode(type, from: bytes) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { nil }
    func commit(_ turn: CogDurableTurn) throws {}
}
