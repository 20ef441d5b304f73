import CogCodec
import Foundation

/// What a standby's commit records beside a shipped commit's contents: the
/// leader's epoch (the highest seen is kept in `meta.epoch`) and its log id
/// (adopted by a folder that has none yet).
struct StandbyMeta {
    var epoch: UInt64
    var logID: [UInt8]
}

extension TurnStore {
    /// Applies a commit its leader shipped (`shipper`) to this standby's
    /// copy, in one durable transaction, so the copy holds what the
    /// leader's folder holds after the same commit (`protocol/ha.md` §8).
    ///
    /// Refused, changing nothing: a store not opened `.standby`; a commit of
    /// another log (`other-log`); one of an epoch below the highest this
    /// copy has applied — a deposed leader's (`fenced`); one that does not
    /// follow the copy's last revision (`out-of-order`); a record that does
    /// not decode, or whose revision, epoch or time is not the commit's
    /// (`corrupt`); and a record whose state digest is not the copy's after
    /// it — the copy has drifted from its leader and must sync again
    /// (`diverged`). A folder with no log yet takes the commit's log id.
    public func apply(_ shipped: ShippedCommit) throws(TurnStoreError) {
        guard mode == .standby else {
            throw TurnStoreError(code: .notWritable, message: "the store in \(directory) is not a standby's: it applies no shipped commit")
        }
        if let logID, logID != shipped.logID {
            throw TurnStoreError(
                code: .otherLog,
                message: "a commit of log \(LogIdentity.hex(shipped.logID)) was shipped to \(directory), which holds log \(LogIdentity.hex(logID))")
        }
        guard shipped.epoch >= epoch else {
            throw TurnStoreError(
                code: .fenced,
                message: "a commit of epoch \(shipped.epoch) was shipped to \(directory), which has applied epoch \(epoch): "
                    + "its leader was deposed")
        }
        guard shipped.firstRevision == lastRevision + 1 else {
            throw TurnStoreError(
                code: .outOfOrder,
                message: "a shipped commit follows revision \(shipped.firstRevision &- 1), but the copy in \(directory) ends at \(lastRevision)")
        }
        if let limit = shipped.pruneLimit {
            // A retention pass between commits: the same pass here (it writes nothing when nothing goes).
            try prune(shipped.retention, now: shipped.time, limit: limit)
            return
        }
        var records: [TurnRecord] = []
        records.reserveCapacity(shipped.recordCount)
        for index in 0..<shipped.recordCount {
            let revision = shipped.firstRevision &+ UInt64(index)
            let record: TurnRecord
            do {
                record = try TurnRecord.decode(shipped.record(index))
            } catch {
                throw TurnStoreError(code: .corrupt, message: "shipped turn \(revision) does not decode: \(error)")
            }
            guard record.revision == revision, record.epoch == shipped.epoch, record.time == shipped.time else {
                throw TurnStoreError(
                    code: .corrupt,
                    message: "shipped turn \(revision) carries revision \(record.revision), epoch \(record.epoch), time \(record.time); "
                        + "its commit is epoch \(shipped.epoch) at \(shipped.time)")
            }
            records.append(record)
        }
        let drafts = records.map(\.draft)
        let digests = try stateDigests(after: drafts)
        if let drifted = records.indices.first(where: { records[$0].stateDigest != digests[$0] }) {
            entryHashes.removeAll()
            throw TurnStoreError(
                code: .diverged,
                message: "after shipped turn \(records[drifted].revision) the copy in \(directory) has state digest "
                    + "\(digests[drifted]), the leader's is \(records[drifted].stateDigest): the copy must sync again")
        }
        try commit(
            drafts, EncodedTurnBatch(records), firstRevision: shipped.firstRevision,
            replies: shipped.replies.map { ($0.request, $0.reply) }, index: shipped.index, retention: shipped.retention,
            openings: shipped.openings, rejections: shipped.rejections, now: shipped.time, name: shipped.name,
            standbyMeta: StandbyMeta(epoch: shipped.epoch, logID: shipped.logID))
        committed(digests, firstRevision: shipped.firstRevision)
    }

    /// After a standby's commit: the store takes the leader's log id and epoch.
    func adopt(_ meta: StandbyMeta) throws(TurnStoreError) {
        guard logID == nil || meta.epoch > epoch else { return }
        logID = meta.logID
        epoch = max(epoch, meta.epoch)
        identityFile?.close()
        identityFile = try IdentityFile(directory: directory, identity: LogIdentity(logID: meta.logID, epoch: epoch, revision: lastRevision))
    }
}
