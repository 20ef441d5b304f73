import CogCodec
import CogLog
import Foundation
import Testing

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

/// Revision `n` sets account `n % 10` to `n` (ten accounts, each rewritten every ten turns).
private func setAccount(_ n: Int, origin: TurnOrigin = .system) throws -> TurnDraft {
    TurnDraft(name: "set()", origin: origin, writes: [TurnWrite(name: "ledger.balance", key: try cbor("a\(n % 10)"), value: try cbor(n))])
}

/// A dedup value as the leader stores it: an 8-byte digest, then a reply frame.
private let reply: [UInt8] = [UInt8](repeating: 0, count: 8) + [0xa0]

@Suite("Retention and backup of a turn log")
struct RetentionTests {
    @Test func `retention keeps the newest turns and every current value, and verify checks what is left`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        for chunk in 0..<10 { try store.append(try (1...10).map { try setAccount(chunk * 10 + $0) }) }
        // A release early on: the entry is absent from the state, and stays so.
        try store.append([TurnDraft(name: "close()", writes: [TurnWrite(name: "ledger.balance", key: try cbor("a0"), value: nil)])])
        let before = try store.stateEntries()
        #expect(try store.verify().isSound)

        let report = try store.prune(.turns(10))
        #expect(report.records == 91)
        #expect(report.firstRevision == 92 && store.firstRevision == 92)
        #expect(try store.records(from: 1).map(\.revision) == Array(92...101))
        #expect(try store.stateEntries() == before, "the state table keeps every current value")
        #expect(try store.prune(.turns(10)).records == 0, "nothing more to remove")

        let verified = try store.verify()
        #expect(verified.problem == nil)
        #expect(verified.firstRevision == 92 && verified.lastRevision == 101 && verified.turns == 10)
        // 92…100 each write an account first (its value before went with the removed records): not
        // checked; 101 releases a0, which 100 wrote: checked. a1 was last written at 91.
        #expect(verified.digestsChecked == 1)
        #expect(verified.entriesFromRemovedRecords == 1)

        // Ten more: all but 111 (a1) rewrite an account a kept record wrote, so their digests are checked.
        for n in 102...111 { try store.append([try setAccount(n)]) }
        let later = try store.verify()
        #expect(later.problem == nil && later.digestsChecked == 10 && later.entriesFromRemovedRecords == 0, "\(later)")

        // A reader sees the first revision kept; a writer reopening keeps it.
        store.close()
        let reader = try TurnStore(directory: folder.path, mode: .reader)
        #expect(reader.firstRevision == 92 && reader.lastRevision == 111)
        let stats = try reader.statistics()
        #expect(stats.firstRevision == 92 && stats.lastRevision == 111 && stats.turns == 20)
        #expect(stats.recordBytes > 0 && stats.recordBytes < stats.fileBytes)
        #expect(stats.usedPages * stats.pageSize <= stats.fileBytes)
        #expect(try TurnStore(directory: folder.path, mode: .writer).firstRevision == 92)
    }

    @Test func `the newest record and every record whose reply is not indexed yet are kept`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        for n in 1...5 { try store.append([try setAccount(n)]) }
        // Revision 6 names an applied request whose reply is left out of dedup: only the record keeps it.
        let request = RequestID(worker: "w", sequence: 1)
        try store.append(
            [try setAccount(6, origin: TurnOrigin(worker: "w", request: request))], replies: [], index: .unindexedFrom(6))
        for n in 7...9 { try store.append([try setAccount(n)]) }
        #expect(try store.prune(.turns(1)).firstRevision == 6, "revision 6 holds an unindexed reply")
        #expect(try store.verify().isSound)
        // Indexed (with the commit of revision 10): now everything but the newest may go.
        try store.append([try setAccount(10)], replies: [(request, reply)], index: .indexed)
        #expect(try store.prune(.turns(1)).firstRevision == 10)
        #expect(try store.dedupReply(for: request) == reply, "stored at revision 10, the answer stays while 10 is kept")
        #expect(try store.prune(.turns(1)).records == 0, "the newest record always stays")
    }

    @Test func `answers stored before the first revision kept expire, and the name remembers the highest`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        // Answers of w#1…w#3 stored before any record, w#4 with revision 1, w#5 with revision 20.
        try store.append([], replies: (1...3).map { (RequestID(worker: "w", sequence: $0), reply) })
        try store.append([try setAccount(1)], replies: [(RequestID(worker: "w", sequence: 4), reply)])
        for n in 2...19 { try store.append([try setAccount(n)]) }
        try store.append([try setAccount(20)], replies: [(RequestID(worker: "w", sequence: 5), reply)])
        #expect(try store.expiredSequence(worker: "w") == nil)

        // Everything from revision 2 kept: the answers stored with revision 1 or before it go.
        let report = try store.prune(.turns(19), now: Date())
        #expect(report.firstRevision == 2 && report.dedupEntries == 4)
        for sequence in UInt64(1)...4 { #expect(try store.dedupReply(for: RequestID(worker: "w", sequence: sequence)) == nil) }
        #expect(try store.dedupReply(for: RequestID(worker: "w", sequence: 5)) == reply)
        #expect(try store.expiredSequence(worker: "w") == 4)
        #expect(try store.lastDedupSequence(worker: "w") == 5)
        // Once revision 20 goes too, the name's highest answered sequence is still known.
        try store.append([try setAccount(21)])
        #expect(try store.prune(.turns(1)).dedupEntries == 1)
        #expect(try store.expiredSequence(worker: "w") == 5)
        #expect(try store.lastDedupSequence(worker: "w") == 5, "a worker restarted under the name numbers above it")
        #expect(try store.statistics().expiredNames == 1)
    }

    @Test func `retention by age removes the records older than the age, by their time`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for n in 1...10 { try store.append([try setAccount(n)], replies: [], at: start + Double(n) * 60) }
        // At start + 10 min, a 5-minute retention keeps the records of minutes 5 to 10.
        #expect(try store.prune(.age(seconds: 300), now: start + 600).firstRevision == 5)
        // Much later: all but the newest.
        #expect(try store.prune(.age(seconds: 300), now: start + 86_400).firstRevision == 10)
    }

    @Test func `retention by bytes keeps the turns table within its size`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let big = String(repeating: "x", count: 1_000)
        for chunk in 0..<20 {
            try store.append(try (1...100).map { n in
                TurnDraft(name: "note()", writes: [TurnWrite(name: "note", key: try cbor((chunk * 100 + n) % 7), value: try cbor(big))])
            })
        }
        let before = try store.statistics().turnsBytes
        #expect(before > 1 << 20)
        var pass = try store.prune(.bytes(1 << 20), limit: 100_000)
        while pass.more { pass = try store.prune(.bytes(1 << 20), limit: 100_000) }
        let after = try store.statistics()
        #expect(after.turnsBytes <= 1 << 20 && after.turnsBytes > (1 << 20) - 64 << 10, "\(after.turnsBytes)")
        #expect(after.lastRevision == 2_000 && after.firstRevision > 1)
        #expect(try store.verify().isSound)
    }

    @Test func `a bounded pass says there is more, and appends prune as they commit`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        for chunk in 0..<30 { try store.append(try (1...100).map { try setAccount(chunk * 100 + $0) }) }
        let first = try store.prune(.turns(100), limit: 1_000)
        #expect(first.records == 1_000 && first.more)
        // Each commit removes up to 1,024 more (at least twice what it adds).
        try store.append([try setAccount(3_001)], replies: [], retention: .turns(100))
        #expect(store.lastPruned?.records == 1_024)
        try store.append([try setAccount(3_002)], replies: [], retention: .turns(100))
        #expect(store.firstRevision == 2_903)
        #expect(try store.records(from: 1).count == 100)
    }

    @Test func `compact keeps the newest N and a folder that was never pruned stays schema 4`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        for chunk in 0..<25 { try store.append(try (1...1_000).map { try setAccount(chunk * 1_000 + $0) }) }
        let report = try store.compact(keep: 3)
        #expect(report.records == 24_997 && report.firstRevision == 24_998)
        #expect(try store.verify().isSound)
        // `cogd log upgrade` has nothing to do on either schema.
        store.close()
        #expect(try TurnStore.upgrade(directory: folder.path).fromSchema == 5)
        let fresh = TemporaryFolder()
        defer { fresh.cleanUp() }
        try TurnStore(directory: fresh.path, mode: .writer, createIfMissing: true).append([try setAccount(1)])
        #expect(try TurnStore.upgrade(directory: fresh.path).fromSchema == 4)
    }

    /// Unflushed (a leader's copy for a standby, which flushes its own) it holds the same.
    @Test(arguments: [true, false])
    func `a backup is a compacted copy a writer opens as it is, with an identity naming its last revision`(flushed: Bool) throws {
        let folder = TemporaryFolder()
        let destination = TemporaryFolder()
        defer {
            folder.cleanUp()
            destination.cleanUp()
        }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        for chunk in 0..<20 {
            let numbers = (1...100).map { chunk * 100 + $0 }
            try store.append(try numbers.map { try setAccount($0) }, replies: numbers.map { (RequestID(worker: "w", sequence: UInt64($0)), reply) })
        }
        _ = try store.compact(keep: 100)
        // Beside the writer: a reader's copy.
        let reader = try TurnStore(directory: folder.path, mode: .reader)
        let report = try reader.backup(to: destination.path + "/nested", flushed: flushed)
        #expect(report.lastRevision == 2_000 && report.firstRevision == 1_901 && report.epoch == 1 && report.identityWritten)
        #expect(report.bytes < report.sourceBytes, "compacted: \(report.bytes) vs \(report.sourceBytes)")
        #expect(report.stateDigest == (try store.currentStateDigest()))
        let identity = try String(contentsOfFile: destination.path + "/nested/cogd.identity", encoding: .utf8)
        #expect(identity.hasSuffix("revision 00000000000000002000\n"))
        #expect(
            !FileManager.default.fileExists(atPath: destination.path + "/nested/running-request")
                && !FileManager.default.fileExists(atPath: destination.path + "/nested/cogd.lock"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination.path + "/nested").sorted() == ["cogd.identity", "data.mdb"])
        // A writer opens the copy without --accept-data-loss, at the same revision and state.
        let copy = try TurnStore(directory: destination.path + "/nested", mode: .writer)
        #expect(copy.lastRevision == 2_000 && copy.firstRevision == 1_901 && copy.epoch == 2)
        #expect(try copy.stateEntries() == store.stateEntries())
        #expect(try copy.dedupReply(for: RequestID(worker: "w", sequence: 2_000)) == reply)
        #expect(try copy.verify().isSound)
        // A backup never overwrites a log.
        #expect(throws: TurnStoreError.self) { try reader.backup(to: destination.path + "/nested") }
    }
}
