import CogCodec
import Foundation
internal import CLMDB

/// What one pass of retention removed (`TurnStore.prune`, `TurnStore.lastPruned`).
public struct PruneReport: Equatable, Sendable {
    /// Records removed, and dedup entries removed (their answers expired).
    public var records = 0
    public var dedupEntries = 0
    /// Kept openings of scope instances removed (`instances`, §2c).
    public var openings = 0
    /// Rejections kept beside the removed records removed (`rejections`, §2d).
    public var rejections = 0
    /// The oldest revision the log keeps now.
    public var firstRevision: UInt64 = 1
    /// Whether the pass stopped at its limit with more to remove: another
    /// pass will remove more.
    public var more = false
}

extension TurnStore {
    /// The most records (and, separately, dedup entries) one pass of
    /// retention removes by default: a pass is one small part of a commit.
    public static let pruneLimit = 1_024

    /// Removes, in one transaction, up to `limit` of the oldest records
    /// `retention` no longer keeps and up to `limit` dedup entries stored
    /// before the first revision kept (`protocol/turnlog.md` §2a); returns
    /// what went. A writer serving requests calls it between batches (its
    /// commits prune too: `append(…, retention:)`); nothing to remove makes
    /// an empty transaction, which writes nothing.
    ///
    /// - Important: never removes the newest record, nor a record at or
    ///   above `unindexedFrom` (its applied request's reply is kept only by
    ///   the record until it is indexed).
    @discardableResult
    public func prune(_ retention: Retention, now: Date = Date(), limit: Int = TurnStore.pruneLimit) throws(TurnStoreError) -> PruneReport {
        guard mode != .reader else {
            throw TurnStoreError(code: .notWritable, message: "the store in \(directory) was opened read-only")
        }
        var shipment: ShippedCommit?
        if shipper != nil, let logID, retention != .everything {
            shipment = ShippedCommit(epoch: epoch, logID: logID, firstRevision: lastRevision &+ 1, time: now, retention: retention, pruneLimit: limit)
        }
        let report = try shipping(shipment, revisionBefore: lastRevision) { () throws(TurnStoreError) in
            try TurnStoreError.catching {
                try environment.write { txn in
                    try prune(
                        txn, retention, now: now, lastRevision: lastRevision, unindexedFrom: unindexedFrom, recordLimit: limit, dedupLimit: limit)
                }
            }
        }
        pruneCommitted(report ?? PruneReport(firstRevision: firstRevision))
        return report ?? PruneReport(firstRevision: firstRevision)
    }

    /// Removes every record but the newest `keep` (`cogd log compact`), in
    /// transactions of 10,000, and the dedup entries stored before the
    /// first revision kept; records at or above `unindexedFrom` stay (a
    /// leader indexes their replies when it opens the folder, after which a
    /// second compaction removes them).
    public func compact(keep: UInt64) throws(TurnStoreError) -> PruneReport {
        precondition(keep >= 1, "internal inconsistency: a log keeps at least its newest record")
        var total = PruneReport(firstRevision: firstRevision)
        while true {
            let pass = try prune(.turns(keep), limit: 10_000)
            total.records += pass.records
            total.dedupEntries += pass.dedupEntries
            total.rejections += pass.rejections
            total.firstRevision = pass.firstRevision
            guard pass.more else { return total }
        }
    }

    /// The bounded removal inside a write transaction `txn` whose log ends
    /// at `lastRevision` and whose replies are unindexed from
    /// `unindexedFrom` (as of the end of `txn`). Nil when `retention` keeps
    /// everything. Safe to run again in a fresh transaction (LMDB may
    /// abort one to grow the map): it changes nothing outside `txn`.
    func prune(
        _ txn: Transaction, _ retention: Retention, now: Date, lastRevision last: UInt64, unindexedFrom: UInt64?, recordLimit: Int,
        dedupLimit: Int
    ) throws -> PruneReport? {
        guard retention != .everything else { return nil }
        var report = PruneReport(firstRevision: firstRevision)
        // Only revisions below this go: the newest stays, and so does every
        // record whose applied request's reply is not in `dedup` yet.
        let bound = min(last, unindexedFrom ?? .max)
        let cutoff = now.timeIntervalSince1970
        let removed = try txn.deleteLeading(turnsDB, limit: recordLimit) { key, value in
            guard key.count == 8 else { return false }
            let revision = TurnStore.number(key)
            guard revision < bound else { return false }
            switch retention {
            case .everything:
                return false
            case .turns(let count):
                return last >= count && revision <= last - count
            case .age(let seconds):
                // A record whose time cannot be read stops the pass (`cogd log verify` names it).
                guard let time = TurnRecord.time(of: Array(value)) else { return false }
                return time < cutoff - seconds
            case .bytes(let bytes):
                let turns = try environment.statistics(of: turnsDB, in: txn)
                return UInt64(turns.pages) * UInt64(turns.pageSize) > bytes
            }
        }
        if let newest = removed.last {
            report.records = removed.count
            report.firstRevision = TurnStore.number(newest) + 1
            report.more = removed.count == recordLimit
            try txn.put(metaDB, MetaKey.firstRevision, TurnStore.bytes(report.firstRevision))
            // A log without its first revisions is schema 5: builds before retention refuse it.
            try txn.put(metaDB, MetaKey.schema, TurnStore.bytes(TurnStore.schemaVersion))
            // Openings kept for instances of epochs no record kept can name go too (§2c).
            if let kept = try txn.get(turnsDB, TurnStore.bytes(report.firstRevision)), let oldest = try? TurnRecord.decode(kept) {
                report.openings = try pruneOpenings(txn, before: UInt64(UInt32(truncatingIfNeeded: oldest.epoch)), limit: recordLimit)
            }
        }
        report.dedupEntries = try pruneDedup(txn, before: report.firstRevision, limit: dedupLimit)
        // Rejections go with the records of their revision (§2d), as many as dedup entries at most.
        report.rejections = try pruneRejections(txn, before: report.firstRevision, limit: dedupLimit)
        report.more = report.more || report.dedupEntries == dedupLimit || report.rejections == dedupLimit
        return report
    }

    /// Removes up to `limit` dedup entries stored while the log ended before
    /// `firstRevision` (an entry stored before any record goes with
    /// revision 1), and raises each worker name's expired sequence to the
    /// highest it removed; returns how many went.
    private func pruneDedup(_ txn: Transaction, before firstRevision: UInt64, limit: Int) throws -> Int {
        guard let dedupOrderDB, let dedupExpiredDB else { return 0 }
        let removed = try txn.deleteLeading(dedupOrderDB, limit: limit) { key, _ in
            key.count > 8 + 9 && max(TurnStore.number(key), 1) < firstRevision
        }
        var expired: [[UInt8]: UInt64] = [:]
        for key in removed {
            let dedupKey = Array(key[8...])
            _ = try txn.delete(dedupDB, dedupKey)
            let worker = Array(dedupKey[..<(dedupKey.count - 9)])
            let sequence = TurnStore.number(Array(dedupKey.suffix(8)))
            expired[worker] = max(expired[worker] ?? 0, sequence)
        }
        for (worker, sequence) in expired {
            let held = try txn.get(dedupExpiredDB, worker).map { TurnStore.number($0) } ?? 0
            if sequence > held { try txn.put(dedupExpiredDB, worker, TurnStore.bytes(sequence)) }
        }
        return removed.count
    }

    /// After a transaction that pruned committed: the store follows it.
    func pruneCommitted(_ report: PruneReport) {
        firstRevision = report.firstRevision
        lastPruned = report.records + report.dedupEntries + report.rejections > 0 ? report : nil
    }

    /// Notes, in `txn`, that the dedup entries of `requests` were stored
    /// while the log ended at `revision`: retention removes them once that
    /// revision is no longer kept (`dedup-order`: the revision, 8 bytes,
    /// then the dedup key; no value).
    func recordDedupOrder(
        _ txn: Transaction, _ requests: some Collection<RequestID>, answeredAt revision: UInt64, buffer: inout [UInt8]
    ) throws {
        guard let dedupOrderDB, !requests.isEmpty else { return }
        // An empty value at a real address (as an empty array's bytes were).
        try withUnsafeBytes(of: UInt8(0)) { zero in
            let empty = UnsafeRawBufferPointer(rebasing: zero[0..<0])
            for request in requests {
                try TurnStore.withDedupKey(request, after: revision, in: &buffer) { try txn.put(dedupOrderDB, key: $0, value: empty) }
            }
        }
    }

    /// At the first open by a writer that keeps `dedup-order` (meta has no
    /// `dedup-order-since`): every dedup entry already stored — by a cogd
    /// from before retention — goes into it under the last revision, 10,000
    /// to a transaction, so retention can remove those answers too. Once per
    /// folder; an interrupted run starts over (putting an entry twice is harmless).
    func orderUnorderedAnswers() throws(TurnStoreError) {
        guard let dedupOrderDB else { return }
        try TurnStoreError.catching {
            let done = try environment.read { txn in try txn.get(metaDB, MetaKey.dedupOrderSince) != nil }
            guard !done else { return }
            let prefix = TurnStore.bytes(lastRevision)
            var from: [UInt8]? = nil
            while true {
                from = try environment.write { txn -> [UInt8]? in
                    var next: [UInt8]? = nil
                    var count = 0
                    try txn.scan(dedupDB, from: from) { key, _ in
                        guard count < 10_000 else {
                            next = key
                            return false
                        }
                        count += 1
                        try txn.put(dedupOrderDB, prefix + key, [])
                        return true
                    }
                    if next == nil { try txn.put(metaDB, MetaKey.dedupOrderSince, prefix) }
                    return next
                }
                if from == nil { return }
            }
        }
    }

    /// The highest sequence of `worker` whose dedup entry retention removed, as `txn` sees it.
    func expiredSequence(_ txn: Transaction, worker: String) throws -> UInt64? {
        guard let dedupExpiredDB, let stored = try txn.get(dedupExpiredDB, Array(worker.utf8)) else { return nil }
        guard stored.count == 8 else {
            throw TurnStoreError(
                code: .corrupt, message: "data folder \(directory): the dedup-expired entry of a worker is \(stored.count) bytes, expected 8")
        }
        return TurnStore.number(stored)
    }
}
