import CogCodec

/// A turn log in memory with the commit rules of `TurnStore` — records
/// under contiguous revisions, the state table, the dedup table, the
/// unindexed mark — all changed together by one `append` or not at all.
/// It is the simulated disk of `cogd sim` and the log of the core tests: a
/// crash keeps exactly what was appended; `failingCommits` makes appends
/// fail (a full disk).
public final class MemoryLog: LeaderLog {
    public private(set) var epoch: UInt64
    public private(set) var lastRevision: UInt64 = 0
    /// The oldest revision kept (`prune(below:)` raises it).
    public private(set) var firstRevision: UInt64 = 1
    public private(set) var unindexedFrom: UInt64?
    /// Every committed record, in revision order (record `r` at `r - 1`).
    public private(set) var records: [TurnRecord] = []
    /// Each record's encoded size (what a catch-up's byte budget counts).
    private var recordSizes: [Int] = []
    /// The state table: name, 0, key bytes → (name, key, value).
    public private(set) var state: [[UInt8]: StateEntry] = [:]
    /// The dedup table.
    public private(set) var dedup: [RequestID: [UInt8]] = [:]
    /// The highest sequence in `dedup` per worker.
    private var highestInDedup: [String: UInt64] = [:]
    /// The revision the log ended at when each dedup entry was stored.
    private var answeredAt: [RequestID: UInt64] = [:]
    /// Per worker, the highest sequence whose dedup entry `prune` removed.
    private var expired: [String: UInt64] = [:]
    /// Appends fail while this is above zero (each failure counts it down).
    public var failingCommits = 0
    /// The state digest of `state` (`protocol/turnlog.md`).
    public private(set) var stateDigest = StateDigest()

    public init(epoch: UInt64 = 1) {
        self.epoch = epoch
    }

    /// A leader process opens the log again: the next epoch.
    public func reopen() {
        epoch += 1
    }

    public func value(name: String, key: [UInt8]?) throws(TurnStoreError) -> [UInt8]? {
        state[TurnWrite.entryKey(name: name, key: key)]?.value
    }

    public func dedupReply(for request: RequestID) throws(TurnStoreError) -> [UInt8]? { dedup[request] }

    public func lastDedupSequence(worker: String) throws(TurnStoreError) -> UInt64? {
        [highestInDedup[worker], expired[worker]].compactMap { $0 }.max()
    }

    public func expiredSequence(worker: String) throws(TurnStoreError) -> UInt64? { expired[worker] }

    public func stateDigest(at revision: UInt64) throws(TurnStoreError) -> StateDigest? {
        guard revision > 0 else { return StateDigest() }
        return revision >= firstRevision && revision <= lastRevision ? records[Int(revision - 1)].stateDigest : nil
    }

    /// Removes what retention would (`TurnStore.prune`): the records below
    /// `revision` — never the newest, nor one at or above `unindexedFrom` —
    /// and the dedup entries stored while the log ended before the new
    /// first revision (their sequences become the names' expired ones).
    public func prune(below revision: UInt64) {
        let bound = min(revision, lastRevision, unindexedFrom ?? .max)
        if bound > firstRevision { firstRevision = bound }
        for (request, at) in answeredAt where max(at, 1) < firstRevision {
            dedup[request] = nil
            answeredAt[request] = nil
            expired[request.worker] = max(expired[request.worker] ?? 0, request.sequence)
        }
    }

    public func records(from revision: UInt64, limit: Int, maximumBytes: Int) throws(TurnStoreError) -> [TurnRecord] {
        let revision = max(revision, firstRevision)
        guard revision >= 1, revision <= lastRevision, limit > 0 else { return [] }
        var result: [TurnRecord] = []
        var bytes = 0
        var index = Int(revision - 1)
        while index < records.count, result.count < limit {
            if !result.isEmpty, bytes + recordSizes[index] > maximumBytes { break }
            bytes += recordSizes[index]
            result.append(records[index])
            index += 1
        }
        return result
    }

    /// The state table as entries in key order (what a snapshot holds).
    public var stateEntries: [StateEntry] {
        state.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.value)
    }

    /// Commits `commit` at `time` (seconds since 1970, the records' commit
    /// time): its drafts as the next revisions, the state table, the dedup
    /// rows and the index mark, all at once.
    @discardableResult
    public func append(_ commit: LeaderCommit, secondsSince1970 time: Double) throws(TurnStoreError) -> Range<UInt64> {
        if failingCommits > 0 {
            failingCommits -= 1
            throw TurnStoreError(code: .lmdb, message: "simulated: the disk refused the commit")
        }
        let first = lastRevision + 1
        let revisions = first..<(first + UInt64(commit.drafts.count))
        if case .unindexedFrom(let revision)? = commit.index, !revisions.contains(revision) {
            throw TurnStoreError(code: .outOfOrder, message: "unindexed-from \(revision) is not a revision of this commit (\(revisions))")
        }
        var digests: [StateDigest] = []
        for draft in commit.drafts {
            for write in draft.writes {
                let key = write.entryKey
                stateDigest.apply(name: write.name, key: write.key, old: state[key]?.value, new: write.value)
                if let value = write.value {
                    state[key] = StateEntry(name: write.name, key: write.key, value: value)
                } else {
                    state[key] = nil
                }
            }
            digests.append(stateDigest)
        }
        let encoded = EncodedTurnBatch(
            drafts: commit.drafts, epoch: epoch, firstRevision: first, secondsSince1970: time, stateDigests: digests)
        for (offset, draft) in commit.drafts.enumerated() {
            records.append(TurnRecord(
                revision: first + UInt64(offset), epoch: epoch, secondsSince1970: time, name: draft.name, origin: draft.origin,
                writes: draft.writes, scopeEvents: draft.scopeEvents, stateDigest: digests[offset]))
            recordSizes.append(encoded.record(offset).count)
        }
        for (request, reply) in commit.replies {
            dedup[request] = reply
            answeredAt[request] = revisions.upperBound - 1
            highestInDedup[request.worker] = max(highestInDedup[request.worker] ?? 0, request.sequence)
        }
        switch commit.index {
        case .unindexedFrom(let revision)?: unindexedFrom = revision
        case .indexed?: unindexedFrom = nil
        case nil: break
        }
        lastRevision = revisions.upperBound - 1
        return revisions
    }
}
