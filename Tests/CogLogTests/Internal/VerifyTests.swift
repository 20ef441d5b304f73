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
            #expect(error.message.contains("has schema version 99; this cogd reads up to 1"))
        }
    }
}
