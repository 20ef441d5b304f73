import CogCodec
import Foundation
internal import CLMDB

/// Rejections on the record (`protocol/turnlog.md` §2d): every request the
/// leader answered rejected or refused — and every retry of one answered
/// from `dedup` — is kept in `rejections` beside the turns, in the commit
/// that makes its answer durable, keyed by the revision the log ended at
/// then and its order among that revision's entries. They are not turns:
/// no revision of their own, no state change, not in the state digest.
/// Retention removes them with the records of their revision.
extension TurnStore {
    /// The most rejections `rejections(from:through:limit:)` returns by default.
    public static let rejectionReadLimit = 10_000

    /// Writes `rejections` in `txn` under `revision` (the revision the log
    /// ends at with this commit), each stamped with `time`, numbered on from
    /// the last entry already at that revision (0 for the first).
    func recordRejections(_ txn: Transaction, _ rejections: [RejectionRecord], at revision: UInt64, time: Date) throws {
        guard let rejectionsDB, !rejections.isEmpty else { return }
        var order: UInt64 = 0
        if let last = try txn.last(rejectionsDB), last.key.count == 16, TurnStore.number(Array(last.key[0..<8])) == revision {
            let (next, overflow) = TurnStore.number(Array(last.key[8..<16])).addingReportingOverflow(1)
            guard !overflow else {
                throw TurnStoreError(code: .outOfOrder, message: "data folder \(directory): the rejections of revision \(revision) are numbered up to 2^64-1")
            }
            order = next
        }
        for var rejection in rejections {
            rejection.revision = revision
            rejection.order = order
            rejection.time = time
            try txn.put(rejectionsDB, rejection.key, try rejection.encoded())
            order &+= 1
        }
    }

    /// The rejections kept at revisions `from` through `through`, in key
    /// order (revision, then order), starting at `order` within `from`; at
    /// most `limit`. A folder no writer of this build opened has none.
    ///
    /// - Throws: `.corrupt` naming the entry when one does not decode.
    public func rejections(
        from revision: UInt64, order: UInt64 = 0, through last: UInt64, limit: Int = TurnStore.rejectionReadLimit
    ) throws(TurnStoreError) -> [RejectionRecord] {
        if rejectionsDB == nil, mode == .reader {
            // Made by a writer after this reader opened the folder.
            rejectionsDB = try TurnStoreError.catching { () throws in try environment.openDatabases(["rejections"])[0] }
        }
        guard let rejectionsDB, revision <= last, limit > 0 else { return [] }
        return try TurnStoreError.catching { () throws in
            try environment.read { (txn: Transaction) in
                var found: [RejectionRecord] = []
                var damaged: [UInt8]?
                try txn.scan(rejectionsDB, from: RejectionRecord.key(revision: revision, order: order)) { key, value in
                    guard key.count == 16, TurnStore.number(Array(key[0..<8])) <= last else { return false }
                    guard let rejection = RejectionRecord(key: key, value: value) else {
                        damaged = key
                        return false
                    }
                    found.append(rejection)
                    return found.count < limit
                }
                if let damaged {
                    throw TurnStoreError(
                        code: .corrupt,
                        message: "data folder \(directory): the rejection entry at revision \(TurnStore.number(Array(damaged[0..<8]))), "
                            + "order \(TurnStore.number(Array(damaged[8..<16]))) does not decode")
                }
                return found
            }
        }
    }

    /// How many rejections the folder keeps (`cogd log stats`).
    public func rejectionCount() throws(TurnStoreError) -> Int {
        if rejectionsDB == nil, mode == .reader {
            rejectionsDB = try TurnStoreError.catching { () throws in try environment.openDatabases(["rejections"])[0] }
        }
        guard let rejectionsDB else { return 0 }
        return try TurnStoreError.catching { () throws in
            try environment.read { (txn: Transaction) in try environment.statistics(of: rejectionsDB, in: txn).entries }
        }
    }

    /// Removes, in `txn`, up to `limit` rejections kept at revisions below
    /// `firstRevision` (revision 0 counts as 1, as a `dedup-order` entry:
    /// an entry goes with the record of its revision); returns how many went.
    func pruneRejections(_ txn: Transaction, before firstRevision: UInt64, limit: Int) throws -> Int {
        guard let rejectionsDB else { return 0 }
        return try txn.deleteLeading(rejectionsDB, limit: limit) { key, _ in
            key.count == 16 && max(TurnStore.number(Array(key[0..<8])), 1) < firstRevision
        }.count
    }
}
