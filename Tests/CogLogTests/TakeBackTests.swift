import CogCodec
import CogLog
import Foundation
import Testing

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

/// Revision `n` sets account `n % 10` to `n`.
private func setAccount(_ n: Int) throws -> TurnDraft {
    TurnDraft(name: "set()", writes: [TurnWrite(name: "ledger.balance", key: try cbor("a\(n % 10)"), value: try cbor(n))])
}

private let reply: [UInt8] = [UInt8](repeating: 0, count: 8) + [0xa0]

@Suite("A stepping-down writer takes back its last commit")
struct TakeBackTests {
    /// A writer that ships (as a leader with standbys does): `count` commits of ten turns, each with its requests' answers.
    private func shippingWriter(_ folder: TemporaryFolder, commits count: Int) throws -> (TurnStore, [ShippedCommit]) {
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        nonisolated(unsafe) var shipped: [ShippedCommit] = []
        store.shipper = { shipped.append($0) }
        for chunk in 0..<count {
            let numbers = (1...10).map { chunk * 10 + $0 }
            try store.append(try numbers.map { try setAccount($0) }, replies: numbers.map { (RequestID(worker: "w", sequence: UInt64($0)), reply) })
        }
        return (store, shipped)
    }

    @Test func `the folder holds the log as it was before the last commit, and a writer goes on from there`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let (store, shipped) = try shippingWriter(folder, commits: 3)
        #expect(shipped.count == 3)
        let digestBefore = try store.stateDigest(at: 20)
        // The log as it was after revision 20, before the third commit.
        let (twenty, entriesAtTwenty) = try { () throws -> ([TurnRecord], [StateEntry]) in
            let other = TemporaryFolder()
            defer { other.cleanUp() }
            let (copy, _) = try shippingWriter(other, commits: 2)
            defer { copy.close() }
            return (try copy.records(from: 1), try copy.stateEntries())
        }()
        guard let last = store.lastTransactionIfShipped else {
            Issue.record("the last commit is shipped and nothing followed it")
            return
        }
        #expect(last.revisionBefore == 20 && last.lastRevision == 30)
        try store.closeTakingBack(last)

        let identity = try String(contentsOfFile: folder.path + "/cogd.identity", encoding: .utf8)
        #expect(identity.hasSuffix("revision 00000000000000000020\n"))
        // A writer opens it without --accept-data-loss: revisions 1…20, their state and answers; none of the third commit's.
        let reopened = try TurnStore(directory: folder.path, mode: .writer)
        #expect(reopened.lastRevision == 20)
        #expect(try reopened.records(from: 1).map(\.revision) == twenty.map(\.revision))
        #expect(try reopened.records(from: 1).map(\.stateDigest) == twenty.map(\.stateDigest))
        #expect(try reopened.currentStateDigest() == digestBefore)
        #expect(try reopened.stateEntries() == entriesAtTwenty)
        #expect(try reopened.dedupReply(for: RequestID(worker: "w", sequence: 20)) == reply)
        #expect(try reopened.dedupReply(for: RequestID(worker: "w", sequence: 21)) == nil)
        #expect(try reopened.verify().isSound)
        // It goes on: revision 21 again, and the folder is sound after a reopen.
        try reopened.append([try setAccount(21)])
        reopened.close()
        let again = try TurnStore(directory: folder.path, mode: .writer)
        defer { again.close() }
        #expect(again.lastRevision == 21)
        #expect(try again.verify().isSound)
    }

    @Test func `nothing is taken back after another commit, or while another reader holds a read`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let (store, _) = try shippingWriter(folder, commits: 2)
        let shippedLast = try #require(store.lastTransactionIfShipped)
        // A commit that is not shipped follows: the shipped one is no longer the last transaction.
        store.shipper = nil
        try store.append([try setAccount(21)])
        #expect(store.lastTransactionIfShipped == nil)
        #expect(throws: TurnStoreError.self) { try store.closeTakingBack(shippedLast) }
        let kept = try TurnStore(directory: folder.path, mode: .writer)
        #expect(kept.lastRevision == 21)

        // A reader's open read (cogd tail, say) could see pages reused: refused, the folder as it was.
        nonisolated(unsafe) var count = 0
        kept.shipper = { _ in count += 1 }
        try kept.append([try setAccount(22)])
        let reader = try TurnStore(directory: folder.path, mode: .reader)
        let snapshot = try reader.stateSnapshot()
        let last = try #require(kept.lastTransactionIfShipped)
        let error = #expect(throws: TurnStoreError.self) { try kept.closeTakingBack(last) }
        #expect(error?.message.contains("1 read of \(folder.path) is open") == true, "\(String(describing: error))")
        snapshot.close()
        reader.close()
        let after = try TurnStore(directory: folder.path, mode: .writer)
        defer { after.close() }
        #expect(after.lastRevision == 22 && count == 1)
    }
}
