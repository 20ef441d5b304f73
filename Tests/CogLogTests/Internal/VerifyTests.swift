import CogCodec
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
        #expect(try store.verify().problem?.hasPrefix("turn 2 is damaged: malformed at (root)") == true)
    }

    @Test func `state that differs from the replay is reported`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        try store.rawWrite(database: "state", key: StateLayout.entry(name: "ledger", key: try cbor("a"), value: nil).key, value: try cbor(99))
        #expect(try store.verify().problem == "state of ledger[2 key bytes] differs from the replay of the log")
        try store.rawWrite(database: "state", key: StateLayout.entry(name: "ledger", key: try cbor("a"), value: nil).key, value: try cbor(3))
        try store.rawWrite(database: "state", key: StateLayout.entry(name: "ghost", key: nil, value: nil).key, value: try cbor(1))
        #expect(try store.verify().problem == "state holds ghost, which no turn in the log wrote")
    }

    @Test func `a record whose state digest was altered is caught by the digest, naming its revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        var record = try store.records(from: 2, limit: 1)[0]
        let honest = record.stateDigest
        record.stateDigest = StateDigest(value: honest.value &+ 1)
        // Re-encoded, so its checksum is valid: only the digest is wrong.
        let altered = record.encoded()
        #expect(try TurnRecord.decode(altered).stateDigest == record.stateDigest)
        try store.rawWrite(database: "turns", key: TurnStore.bytes(2), value: altered)
        #expect(
            try store.verify().problem
                == "turn 2 says the state digest after it is \(record.stateDigest), but the replay of the log up to it gives \(honest)")
        // A replica applying that record would disagree the same way; the last record holds the writer's running digest.
        #expect(try store.stateDigest(at: 2) == honest, "the writer remembers what it committed")
        #expect(try TurnStore(directory: folder.path, mode: .reader).stateDigest(at: 2) == record.stateDigest)
    }

    @Test func `unindexed-from is set and cleared only when asked, at a revision of the commit`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        #expect(store.unindexedFrom == nil)
        let draft = TurnDraft(name: "deposit()", writes: [TurnWrite(name: "ledger", key: try cbor("a"), value: try cbor(9))])
        try store.append([draft], replies: [], index: .unindexedFrom(4))
        #expect(store.unindexedFrom == 4)
        do {
            try store.append([draft], replies: [], index: .unindexedFrom(9))
            Issue.record("unindexed-from outside the commit was accepted")
        } catch {
            #expect(error.message == "unindexed-from 9 is not a revision of this commit (5..<6)")
        }
        #expect(store.lastRevision == 4)
        #expect(try TurnStore(directory: folder.path, mode: .reader).unindexedFrom == 4)
        try store.append([], replies: [(RequestID(worker: "w", sequence: 1), [0xa0])], index: .indexed)
        #expect(store.unindexedFrom == nil)
        let reopened = try TurnStore(directory: folder.path, mode: .reader)
        #expect(reopened.unindexedFrom == nil)
        #expect(try reopened.dedupReply(for: RequestID(worker: "w", sequence: 1)) == [0xa0])
    }

    @Test func `unindexed replies beyond the log are a problem verify names`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try storeWithThreeTurns(folder)
        #expect(try store.verify().isSound)
        try store.rawWrite(database: "meta", key: Array("unindexed-from".utf8), value: TurnStore.bytes(5))
        #expect(try store.verify().problem == "meta says replies are unindexed from revision 5 but the log ends at 3")
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
            #expect(error.message.contains("has schema version 99; this cogd reads up to 5"))
        }
    }
    /// Ten turns over accounts a and b (alternating), pruned to the newest six (5…10).
    private func prunedStore(_ folder: TemporaryFolder) throws -> TurnStore {
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try store.append([TurnDraft(name: "keep()", writes: [TurnWrite(name: "kept", key: nil, value: try cbor(1))])])
        for n in 2...10 {
            try store.append([TurnDraft(name: "set()", writes: [TurnWrite(name: "ledger", key: try cbor(n % 2 == 0 ? "a" : "b"), value: try cbor(n))])])
        }
        #expect(try store.prune(.turns(6)).firstRevision == 5)
        return store
    }

    @Test func `a pruned log is checked from its first kept revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try prunedStore(folder)
        let report = try store.verify()
        #expect(report.problem == nil)
        // 5 (b) and 6 (a) write what removed records wrote last; 7…10 rewrite them: checked.
        #expect(report.digestsChecked == 4 && report.entriesFromRemovedRecords == 1)
        #expect(try store.rawRead(database: "meta", key: TurnStore.MetaKey.schema) == TurnStore.bytes(5))

        // A kept record lost.
        let eight = try store.rawRead(database: "turns", key: TurnStore.bytes(8))
        try store.rawWrite(database: "turns", key: TurnStore.bytes(8), value: nil)
        #expect(try store.verify().problem == "revision 8 is missing (the next stored one is 9)")
        try store.rawWrite(database: "turns", key: TurnStore.bytes(8), value: eight)
        // One below the first kept revision.
        try store.rawWrite(database: "turns", key: TurnStore.bytes(3), value: eight)
        #expect(try store.verify().problem == "the log holds revision 3, below meta.first-revision 5 (the oldest revision it keeps)")
        try store.rawWrite(database: "turns", key: TurnStore.bytes(3), value: nil)
        #expect(try store.verify().isSound)
    }

    @Test func `in a pruned log a wrong digest, a wrong value and a wrong entry from removed records are caught`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try prunedStore(folder)
        // A checked record's digest.
        var record = try store.records(from: 8, limit: 1)[0]
        let honest = record.encoded()
        record.stateDigest = StateDigest(value: record.stateDigest.value &+ 1)
        try store.rawWrite(database: "turns", key: TurnStore.bytes(8), value: record.encoded())
        #expect(try store.verify().problem?.hasPrefix("turn 8 says the state digest after it is") == true)
        try store.rawWrite(database: "turns", key: TurnStore.bytes(8), value: honest)
        // A value a kept record wrote.
        let a = StateLayout.entry(name: "ledger", key: try cbor("a"), value: nil).key
        try store.rawWrite(database: "state", key: a, value: try cbor(99))
        #expect(try store.verify().problem == "state of ledger[2 key bytes] differs from the replay of the log")
        try store.rawWrite(database: "state", key: a, value: try cbor(10))
        // The entry only removed records wrote: the table no longer adds up to the last record's digest.
        let kept = StateLayout.entry(name: "kept", key: nil, value: nil).key
        try store.rawWrite(database: "state", key: kept, value: try cbor(2))
        #expect(try store.verify().problem?.hasPrefix("the state table's digest is") == true)
        try store.rawWrite(database: "state", key: kept, value: try cbor(1))
        // Replies unindexed from a revision retention removed.
        try store.rawWrite(database: "meta", key: TurnStore.MetaKey.unindexedFrom, value: TurnStore.bytes(3))
        #expect(try store.verify().problem?.hasPrefix("meta says replies are unindexed from revision 3, but the log keeps revisions from 5") == true)
        try store.rawWrite(database: "meta", key: TurnStore.MetaKey.unindexedFrom, value: nil)
        #expect(try store.verify().isSound)
    }
}
