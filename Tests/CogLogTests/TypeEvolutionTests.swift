import Cog
import CogCodec
import CogLog
import Testing

/// How a durable value's type may change (README "Evolving your types"):
/// a new optional field reads old values as nil, a removed field is
/// ignored; a field renamed or retyped does not read them, and a leader
/// finds that at start (`Cogs.checkStoredValue`) instead of trapping later.
@Suite("Evolving durable types")
@MainActor
struct TypeEvolutionTests {
    struct TodoV1: Codable, Equatable, Sendable {
        var title: String
        var done: Bool
    }

    struct TodoV2: Codable, Equatable, Sendable {
        var title: String
        var done: Bool
        var due: String?
    }

    struct TodoWithoutDone: Codable, Equatable, Sendable {
        var title: String
    }

    struct TodoRenamed: Codable, Equatable, Sendable {
        var name: String
        var done: Bool
    }

    struct TodoRetyped: Codable, Equatable, Sendable {
        var title: String
        var done: Int
    }

    static let withOptional = Cog<TodoV2>.Manual(name: "evolution.withOptional") { TodoV2(title: "", done: false) }
    static let withoutDone = Cog<TodoWithoutDone>.Manual(name: "evolution.withoutDone") { TodoWithoutDone(title: "") }
    static let renamed = Cog<TodoRenamed>.Manual(name: "evolution.renamed") { TodoRenamed(name: "", done: false) }
    static let retyped = Cog<TodoRetyped>.Manual(name: "evolution.retyped") { TodoRetyped(title: "", done: 0) }

    let old = (try? CBOREncoder().encode(TodoV1(title: "milk", done: true))) ?? []

    @Test func `a new optional field reads an old value as nil`() throws {
        #expect(try CBORDecoder().decode(TodoV2.self, from: old) == TodoV2(title: "milk", done: true, due: nil))
        _ = Self.withOptional
        #expect(Cogs.checkStoredValue(named: "evolution.withOptional", key: nil, value: old, codec: ReplicaCodecForTests()) == .decodes)
    }

    @Test func `a removed field is ignored`() throws {
        #expect(try CBORDecoder().decode(TodoWithoutDone.self, from: old) == TodoWithoutDone(title: "milk"))
        _ = Self.withoutDone
        #expect(Cogs.checkStoredValue(named: "evolution.withoutDone", key: nil, value: old, codec: ReplicaCodecForTests()) == .decodes)
    }

    @Test func `a renamed or retyped field does not read the old value, and says where its declaration is`() {
        _ = Self.renamed
        _ = Self.retyped
        for name in ["evolution.renamed", "evolution.retyped"] {
            guard case .fails(let reason, let site) = Cogs.checkStoredValue(named: name, key: nil, value: old, codec: ReplicaCodecForTests()) else {
                Issue.record("\(name) decoded the old value")
                continue
            }
            #expect(site.hasPrefix("CogLogTests/TypeEvolutionTests.swift:"))
            #expect(!reason.isEmpty)
        }
    }

    @Test func `a name no declaration here has is left to whoever declares it`() {
        #expect(Cogs.checkStoredValue(named: "evolution.nobody", key: nil, value: old, codec: ReplicaCodecForTests()) == .undeclared)
    }
}

/// The log's codec, as a replica uses it.
@MainActor
final class ReplicaCodecForTests: CogDurableStore {
    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try CBORDecoder().decode(type, from: bytes) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { nil }
    func commit(_ turn: CogDurableTurn) throws {}
}
