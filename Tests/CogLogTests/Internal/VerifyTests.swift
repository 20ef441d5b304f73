import Foundation
import Testing

@testable import CogLog

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

@Suite("Verify and schema checks (internal)")
struct VerifyTests {
    private func storeWithThreeTurns(_ folder: TemporaryFolder) throws -> TurnStore {
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        for balance in 1...3 {
            try store.append([TurnDraft(name: "deposit()", writes: [TurnWrite(name: "ledger", key: try cbor("a"), value: try cbor(balance))])])
        }
        return store
    }

    @Test func `a missing revision is the first problem`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        try store.rawWrite(database: "turns", key: TurnStore.bytes(2), value: nil)
        #expect(try store.verify().problem == "revision 2 is missing (the next stored one is 3)")
    }

    @Test func `an undecodable record is reported with its revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        try store.rawWrite(database: "turns", key: TurnStore.bytes(2), value: [0xa1, 0x63])
        #expect(try store.verify().problem?.hasPrefix("turn 2 does not decode: malformed at (root)") == true)
    }

    @Test func `state that differs from the replay is reported`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        try store.rawWrite(database: "state", key: TurnStore.stateKey(name: "ledger", key: try cbor("a")), value: try cbor(99))
        #expect(try store.verify().problem == "state of ledger[2 key bytes] differs from the replay of the log")
        try store.rawWrite(database: "state", key: TurnStore.stateKey(name: "ledger", key: try cbor("a")), value: try cbor(3))
        try store.rawWrite(database: "state", key: TurnStore.stateKey(name: "ghost", key: nil), value: try cbor(1))
        #expect(try store.verify().problem == "state holds ghost, which no turn in the log wrote")
    }

    @Test func `a schema 1 folder opens as schema 2 with every reply indexed`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        do {
            // What schema 1 left: no dedup-through (it stored every reply at once).
            let store = try storeWithThreeTurns(folder)
            try store.rawWrite(database: "meta", key: Array("schema".utf8), value: TurnStore.bytes(1))
            try store.rawWrite(database: "meta", key: Array("dedup-through".utf8), value: nil)
            try store.rawWrite(database: "meta", key: Array("last-revision".utf8), value: TurnStore.bytes(3))
        }
        do {
            let reader = try TurnStore(directory: folder.path, mode: .reader)
            #expect(reader.dedupThrough == 3)
        }
        let store = try TurnStore(directory: folder.path, mode: .writer)
        #expect(store.dedupThrough == 3)
        #expect(try store.rawRead(database: "meta", key: Array("schema".utf8)) == TurnStore.bytes(2))
        #expect(try store.rawRead(database: "meta", key: Array("dedup-through".utf8)) == TurnStore.bytes(3))
        #expect(try store.rawRead(database: "meta", key: Array("last-revision".utf8)) == nil, "the log's last key is the last revision")
        #expect(store.lastRevision == 3)
    }

    @Test func `dedup-through moves only when asked, and never past the last revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        #expect(store.dedupThrough == 0)
        let draft = TurnDraft(name: "deposit()", writes: [TurnWrite(name: "ledger", key: try cbor("a"), value: try cbor(9))])
        try store.append([draft], replies: [(RequestID(worker: "w", sequence: 1), [0xa0])], dedupThrough: 4)
        #expect(store.dedupThrough == 4)
        do {
            try store.append([draft], replies: [], dedupThrough: 6)
            Issue.record("dedup-through beyond the last revision was accepted")
        } catch {
            #expect(error.message == "dedup-through 6 is beyond the last revision 5")
        }
        #expect(store.lastRevision == 4)
        let reopened = try TurnStore(directory: folder.path, mode: .reader)
        #expect(reopened.dedupThrough == 4)
        #expect(try reopened.dedupReply(for: RequestID(worker: "w", sequence: 1)) == [0xa0])
    }

    @Test func `indexed replies beyond the log are a problem verify names`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        #expect(try store.verify().isSound)
        try store.rawWrite(database: "meta", key: Array("dedup-through".utf8), value: TurnStore.bytes(5))
        #expect(try store.verify().problem == "meta says replies are indexed through revision 5 but the log ends at 3")
    }

    @Test func `a folder written by a newer schema is refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        do {
            let store = try storeWithThreeTurns(folder)
            try store.rawWrite(database: "meta", key: Array("schema".utf8), value: TurnStore.bytes(99))
        }
        do {
            _ = try TurnStore(directory: folder.path, mode: .writer)
            Issue.record("opened a newer schema")
        } catch {
            #expect(error.code == .newerSchema)
            #expect(error.message.contains("has schema version 99; this cogd reads up to 2"))
        }
    }
}
