import Cog
import Foundation
import Testing

private let opTurnCount = Cog<Int>.Manual(name: "opTurnTests.count") { 0 }
private let opTurnLabel = Cog<String>.Manual(name: "opTurnTests.label") { "" }

/// Sets the count to its argument.
private let setCountOp = RemoteOp<Int>(name: "opTurnTests.setCount") { c, count in
    c[opTurnCount] = count
}

/// A durable store that encodes as JSON and keeps what is committed to it.
private final class KeepingStore: CogDurableStore {
    var committed: [CogDurableTurn] = []
    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { Array(try JSONEncoder().encode(value)) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try JSONDecoder().decode(type, from: Data(bytes)) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { nil }
    func commit(_ turn: CogDurableTurn) throws { committed.append(turn) }
}

/// An op's runner settles its body as a turn of its own: at once when the
/// graph is idle (the leader's case, where the body stays on the stack), or,
/// run from inside another turn's body, as part of that turn.
@MainActor
@Suite("An op's turn, at once or inside another")
struct OpTurnTests {
    @Test func `run at idle an op settles a turn of its own and hands it back instead of committing it`() throws {
        let store = KeepingStore()
        let cogs = Cogs(durableStore: store)
        let turns = try setCountOp.runner(cogs, store.encode(5), store, "opTurnTests.setCount")
        #expect(turns.map(\.name) == ["opTurnTests.setCount"])
        #expect(turns.first?.writes.map(\.name) == ["opTurnTests.count"])
        #expect(try turns.first?.writes.map(\.value) == [store.encode(5)])
        #expect(store.committed.isEmpty, "the caller decides where the turn goes")
        #expect(cogs.peek(opTurnCount) == 5)
    }

    @Test func `run inside another turn's body an op joins that turn: it hands back none, and the outer turn commits its write`() throws {
        let store = KeepingStore()
        let cogs = Cogs(durableStore: store)
        var inner: [CogDurableTurn]?
        cogs.turn(named: "outer") { c in
            c[opTurnLabel] = "outer"
            inner = try? setCountOp.runner(cogs, store.encode(7), store, "opTurnTests.setCount")
        }
        #expect(inner == [])
        #expect(store.committed.map(\.name) == ["outer"])
        #expect(Set(store.committed.flatMap(\.writes).map(\.name)) == ["opTurnTests.count", "opTurnTests.label"])
        #expect(cogs.peek(opTurnCount) == 7 && cogs.peek(opTurnLabel) == "outer")
    }
}
