import CogCodec
import Foundation
internal import CLMDB

#if canImport(Glibc)
    import Glibc
#endif

/// The durable turn log and state table of one data folder, on LMDB.
///
/// Databases (see `protocol/turnlog.md`): `turns` (revision → record),
/// `state` (durable name and key → latest value, updated in the same
/// transaction as the turn, so opening needs no replay), `dedup` (request id
/// → reply; applied requests' replies indexed in bulk, see `unindexedFrom`),
/// `meta` (schema version, epoch, unindexed-from, first-revision), and for
/// retention `dedup-order` (when each reply was stored) and `dedup-expired`
/// (per worker name, the highest sequence whose reply retention removed),
/// and `instances` (the openings of scope instances no record holds).
///
/// ```swift
/// let store = try TurnStore(directory: "data", mode: .writer, createIfMissing: true)
/// let records = try store.append([TurnDraft(name: "deposit()", writes: [...])])
/// ```
///
/// - Important: one writer per folder (enforced by a lock file); any number
///   of readers, in any process, while it writes. Not thread-safe: use it
///   from one thread (the main actor).
public final class TurnStore {
    public enum Mode: Sendable {
        /// Appends turns; bumps the epoch at open; holds the folder's lock.
        case writer
        /// Reads only, beside a running writer.
        case reader
        /// Holds the folder's lock like a writer and may remove old records
        /// (`compact`, `prune`), but appends nothing and starts no epoch:
        /// opening it writes nothing (`cogd log compact`).
        case maintenance
        /// A standby's copy of a leader's log: holds the folder's lock like
        /// a writer, appends only the commits a leader shipped (`apply(_:)`)
        /// and starts no epoch. Its epoch is the highest a shipped commit
        /// carried, and a ship of a lower one is refused (the fencing token,
        /// `protocol/ha.md`). A standby that is promoted closes it and opens
        /// the folder as a writer, in the epoch the cluster gives it.
        case standby

        /// Whether opening may create the folder and writes to it: a writer's or a standby's.
        var appends: Bool { self == .writer || self == .standby }
    }

    /// The newest layout version this build reads and writes: schema 5, a
    /// log whose oldest records retention may have removed
    /// (`meta.first-revision`). A folder is schema 4 — a log whole from
    /// revision 1, which builds before retention read too — until its first
    /// records are removed. Older folders are rewritten by
    /// `TurnStore.upgrade(directory:)` (`cogd log upgrade`).
    public static let schemaVersion: UInt64 = 5
    /// The layout of a log kept whole from revision 1 (what a new folder
    /// gets, and what `cogd log upgrade` writes).
    public static let wholeLogSchemaVersion: UInt64 = 4

    public let directory: String
    public let mode: Mode
    let environment: LMDBEnvironment
    let turnsDB: MDB_dbi
    let stateDB: MDB_dbi
    let dedupDB: MDB_dbi
    let metaDB: MDB_dbi
    /// When each dedup entry was stored (retention removes old ones); nil for
    /// a reader of a folder no writer of this build has opened.
    let dedupOrderDB: MDB_dbi?
    /// Per worker name, the highest request sequence whose dedup entry
    /// retention removed (nil: as `dedupOrderDB`).
    let dedupExpiredDB: MDB_dbi?
    /// Scope instances opened by a registration reply, not by a record
    /// (`TurnStore+Openings.swift`); nil for a reader of a folder no writer
    /// of this build has opened (looked for again at each lookup).
    var instancesDB: MDB_dbi?
    /// Requests answered rejected or refused, beside the turns
    /// (`TurnStore+Rejections.swift`); nil as `instancesDB`.
    var rejectionsDB: MDB_dbi?
    private var lockDescriptor: Int32 = -1

    /// The epoch this open runs under (writer), or the last one written (reader).
    public internal(set) var epoch: UInt64 = 0
    /// The newest committed revision (0 for an empty log). A reader refreshes it on each read.
    public private(set) var lastRevision: UInt64 = 0
    /// The oldest revision the log keeps: 1 until retention removed older
    /// records (`meta.first-revision`). A reader refreshes it on each read.
    public internal(set) var firstRevision: UInt64 = 1
    /// From this revision on, records may name applied requests whose
    /// replies are not in `dedup` yet (only in the records: `origin.request`
    /// and the revision); nil when every reply is indexed. The leader
    /// rebuilds and indexes them when it opens.
    public private(set) var unindexedFrom: UInt64?
    /// Called by each append with what it commits, before the commit (a
    /// leader ships it to its standbys: `ShippedCommit`); nil: nothing is
    /// built. A commit that then fails was shipped anyway: a standby may
    /// hold a commit its leader does not (`protocol/ha.md` §8).
    public var shipper: ((ShippedCommit) -> Void)?
    /// The name of the folder's last commit (`meta.last-commit`): the
    /// leader's epoch and number it was shipped with (`ShippedCommit.name`);
    /// nil when that commit was not shipped (no standby, or a folder not
    /// written since it had one). A retention pass leaves it as it was.
    public private(set) var lastCommit: CommitName?
    /// How many commits this writer shipped (and named) in its epoch.
    var commitsNamed: UInt64 = 0
    /// The last commit `shipper` was given, once this writer committed it
    /// too (nil while it runs, and after one that failed).
    public internal(set) var lastShippedCommit: ShippedTransaction?
    /// The encoded records of the last append, in order (the leader publishes
    /// these bytes instead of encoding each record again).
    public private(set) var lastAppended = EncodedTurnBatch.empty
    /// What the last append's retention removed (nil: it pruned nothing, or was not asked to).
    public internal(set) var lastPruned: PruneReport?
    /// Reader slots of dead processes cleared at open.
    public private(set) var clearedStaleReaders = 0

    /// The log's id (`meta.log-id`, 16 bytes; also in `cogd.identity`); nil
    /// for a reader of a folder a writer has not opened since it had one.
    public internal(set) var logID: [UInt8]?
    /// The writer's `cogd.identity`, updated after each commit.
    var identityFile: IdentityFile?
    /// The writer's state digest as of `lastRevision` (`StateDigest`): read
    /// from the last record at the first append, then kept by each commit.
    var runningDigest: StateDigest?
    /// The state digests of the newest revisions this writer committed, by
    /// revision modulo their count (what a worker's heartbeat is compared with).
    var recentDigests: [(revision: UInt64, digest: StateDigest)] = []
    /// Entry hashes of state entries recently written, by stored key (the
    /// old hash a write takes off, without reading and hashing the old
    /// value again; 0: released); cleared past `entryHashCacheLimit`.
    var entryHashes = EntryHashCache()

    /// Opens the store in `directory`.
    ///
    /// Fails clearly when the folder is missing (unless `createIfMissing` and
    /// writable), not writable, locked by another writer, written by another
    /// schema, or damaged. A writer also refuses a `data.mdb` that is
    /// missing, empty, of another log or behind what the folder's
    /// `cogd.identity` says was committed — unless `acceptDataLoss`, when it
    /// goes on from what `data.mdb` holds (`cogd leader --accept-data-loss`).
    /// - Parameter epoch: for a writer, the epoch to open, given by the
    ///   cluster's arbiter (`cogd leader --ha`: epochs are minted in etcd);
    ///   it must be above every epoch the folder has served. Nil: the next
    ///   after the folder's own.
    public init(directory: String, mode: Mode, createIfMissing: Bool = false, acceptDataLoss: Bool = false, epoch givenEpoch: UInt64? = nil) throws(TurnStoreError) {
        self.directory = directory
        self.mode = mode
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory)
        if exists && !isDirectory.boolValue {
            throw TurnStoreError(code: .missingFolder, message: "data folder \(directory) is a file, not a folder")
        }
        if !exists {
            guard mode.appends, createIfMissing else {
                throw TurnStoreError(code: .missingFolder, message: "data folder \(directory) does not exist (--data names the folder a cogd leader keeps its log in)")
            }
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw TurnStoreError(code: .notWritable, message: "cannot create data folder \(directory): \(error.localizedDescription)")
            }
        }
        if !mode.appends && !FileManager.default.fileExists(atPath: directory + "/data.mdb") {
            throw TurnStoreError(code: .missingFolder, message: "data folder \(directory) holds no turn log (no data.mdb)")
        }
        if mode != .reader {
            guard access(directory, W_OK) == 0 else {
                throw TurnStoreError(code: .notWritable, message: "data folder \(directory) is not writable")
            }
            lockDescriptor = try TurnStore.lockFolder(directory)
        }
        var remembered: LogIdentity?
        do {
            try LMDBDataFile.check(directory: directory)
            if mode.appends {
                remembered = try TurnStore.rememberedIdentity(directory: directory, acceptDataLoss: acceptDataLoss)
            }
            let environment = try LMDBEnvironment(path: directory, readOnly: mode == .reader)
            clearedStaleReaders = try environment.clearStaleReaders()
            let names = ["turns", "state", "dedup", "meta", "dedup-order", "dedup-expired", "instances", "rejections"]
            let handles = try environment.openDatabases(names)
            // The last four came later (retention, openings, rejections): a folder written before has none (a writer makes them).
            if let missing = handles.prefix(4).firstIndex(where: { $0 == nil }) {
                throw TurnStoreError(code: .corrupt, message: "data folder \(directory) has no `\(names[missing])` database")
            }
            self.environment = environment
            (turnsDB, stateDB, dedupDB, metaDB) = (handles[0]!, handles[1]!, handles[2]!, handles[3]!)
            (dedupOrderDB, dedupExpiredDB, instancesDB, rejectionsDB) = (handles[4], handles[5], handles[6], handles[7])
        } catch let error as TurnStoreError {
            TurnStore.unlock(lockDescriptor)
            throw error
        } catch let error as LMDBError {
            TurnStore.unlock(lockDescriptor)
            throw TurnStoreError(error)
        } catch {
            TurnStore.unlock(lockDescriptor)
            throw TurnStoreError(code: .lmdb, message: "\(error)")
        }
        do {
            try openMeta(remembered: remembered, acceptDataLoss: acceptDataLoss, givenEpoch: givenEpoch)
            if mode.appends { try orderUnorderedAnswers() }
            if mode.appends, let logID {
                identityFile = try IdentityFile(
                    directory: directory, identity: LogIdentity(logID: logID, epoch: epoch, revision: lastRevision))
            }
        } catch {
            environment.close()
            TurnStore.unlock(lockDescriptor)
            lockDescriptor = -1
            throw error
        }
    }

    /// The folder's `cogd.identity`, after checking that `data.mdb` is
    /// there when it says a log was: a missing or empty `data.mdb` under an
    /// identity is refused unless the loss is accepted.
    private static func rememberedIdentity(directory: String, acceptDataLoss: Bool) throws(TurnStoreError) -> LogIdentity? {
        let remembered: LogIdentity?
        do {
            remembered = try LogIdentity.read(directory: directory)
        } catch {
            if acceptDataLoss { return nil }
            throw TurnStoreError(code: error.code, message: error.message + "; " + acceptHint)
        }
        guard let remembered, !acceptDataLoss else { return remembered }
        let size = (try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? nil
        if size == nil || size == 0 {
            throw TurnStoreError(
                code: .dataLoss,
                message: "data folder \(directory): data.mdb is \(size == nil ? "missing" : "empty"), but \(LogIdentity.fileName) says "
                    + "this folder holds log \(LogIdentity.hex(remembered.logID)) up to revision \(remembered.revision) (epoch \(remembered.epoch)); "
                    + acceptHint)
        }
        return remembered
    }

    static let acceptHint =
        "restore data.mdb from a backup, or start the leader with --accept-data-loss to go on from what data.mdb holds"

    deinit {
        environment.close()
        TurnStore.unlock(lockDescriptor)
    }

    /// Releases the folder (the lock and LMDB). Later calls do nothing.
    public func close() {
        identityFile?.close()
        environment.close()
        TurnStore.unlock(lockDescriptor)
        lockDescriptor = -1
    }

    // MARK: Meta

    enum MetaKey {
        static let schema = Array("schema".utf8)
        static let epoch = Array("epoch".utf8)
        /// Schema 1 only (removed by the upgrade).
        static let lastRevision = Array("last-revision".utf8)
        static let unindexedFrom = Array("unindexed-from".utf8)
        static let logID = Array("log-id".utf8)
        /// The oldest revision kept (schema 5; absent: 1).
        static let firstRevision = Array("first-revision".utf8)
        /// The revision the log ended at when a writer first kept
        /// `dedup-order`; every dedup entry stored before is in it since.
        static let dedupOrderSince = Array("dedup-order-since".utf8)
        /// The last commit's name (`CommitName`, 16 bytes); absent: it was not shipped.
        static let lastCommit = Array("last-commit".utf8)
    }

    /// `meta.last-commit`; a value that is not 16 bytes is refused.
    static func metaCommitName(_ txn: Transaction, _ metaDB: MDB_dbi, directory: String) throws -> CommitName? {
        guard let value = try txn.get(metaDB, MetaKey.lastCommit) else { return nil }
        guard let name = CommitName(bytes: value) else {
            throw TurnStoreError(code: .corrupt, message: "data folder \(directory): meta.last-commit is \(value.count) bytes, expected 16")
        }
        return name
    }

    private func openMeta(remembered: LogIdentity?, acceptDataLoss: Bool, givenEpoch: UInt64?) throws(TurnStoreError) {
        try run { () throws in
            if mode.appends {
                try environment.write { (txn: Transaction) in
                    try checkSchema(txn)
                    var stored = try TurnStore.metaNumber(txn, metaDB, MetaKey.epoch, directory: directory) ?? 0
                    lastRevision = try lastLoggedRevision(txn)
                    var logID = try txn.get(metaDB, MetaKey.logID)
                    if let logID, logID.count != 16 {
                        throw TurnStoreError(code: .corrupt, message: "data folder \(directory): meta.log-id is \(logID.count) bytes, expected 16")
                    }
                    if let remembered {
                        if let problem = TurnStore.loss(found: logID, lastRevision, remembered: remembered) {
                            guard acceptDataLoss else {
                                throw TurnStoreError(
                                    code: .dataLoss, message: "data folder \(directory): \(problem); " + TurnStore.acceptHint)
                            }
                            // The operator accepted the loss: epochs still only go up.
                            stored = max(stored, remembered.epoch)
                        }
                    }
                    guard stored < UInt64.max else {
                        throw TurnStoreError(
                            code: .corrupt, message: "data folder \(directory): meta.epoch is \(stored), the largest there is; no new epoch can follow it")
                    }
                    if mode == .standby {
                        epoch = stored
                    } else if let givenEpoch {
                        guard givenEpoch > stored else {
                            throw TurnStoreError(
                                code: .corrupt,
                                message: "data folder \(directory): the cluster gave epoch \(givenEpoch), but this folder has served epoch \(stored): "
                                    + "an epoch is never served twice")
                        }
                        epoch = givenEpoch
                    } else {
                        epoch = stored + 1
                    }
                    if logID == nil, mode == .writer {
                        logID = LogIdentity.newLogID()
                        try txn.put(metaDB, MetaKey.logID, logID!)
                    }
                    self.logID = logID
                    unindexedFrom = try TurnStore.metaNumber(txn, metaDB, MetaKey.unindexedFrom, directory: directory)
                    firstRevision = try TurnStore.metaNumber(txn, metaDB, MetaKey.firstRevision, directory: directory) ?? 1
                    lastCommit = try TurnStore.metaCommitName(txn, metaDB, directory: directory)
                    // A log stays schema 4 until retention first removes records (then 5).
                    let schema = try TurnStore.metaNumber(txn, metaDB, MetaKey.schema, directory: directory)
                    try txn.put(metaDB, MetaKey.schema, TurnStore.bytes(schema ?? TurnStore.wholeLogSchemaVersion))
                    if mode == .writer { try txn.put(metaDB, MetaKey.epoch, TurnStore.bytes(epoch)) }
                }
            } else {
                try environment.read { (txn: Transaction) in
                    try checkSchema(txn)
                    try refreshMeta(txn)
                }
            }
        }
    }

    /// Refuses a folder of another schema: a newer one ("upgrade cogd"), an
    /// older one ("run cogd log upgrade"). A folder without `meta.schema`
    /// and without turns is new.
    private func checkSchema(_ txn: Transaction) throws {
        let schema = try TurnStore.metaNumber(txn, metaDB, MetaKey.schema, directory: directory)
        if schema == nil, try txn.last(turnsDB) == nil { return }
        try TurnStore.refuseSchema(schema ?? 0, directory: directory)
    }

    /// Throws unless `schema` is this build's.
    static func refuseSchema(_ schema: UInt64, directory: String) throws(TurnStoreError) {
        if schema > TurnStore.schemaVersion {
            throw TurnStoreError(
                code: .newerSchema,
                message: "data folder \(directory) has schema version \(schema); this cogd reads up to \(TurnStore.schemaVersion) — upgrade cogd")
        }
        if schema < TurnStore.wholeLogSchemaVersion {
            let lacks = schema < 3 ? "cannot tell a nil value from a release" : "carry no state digest"
            throw TurnStoreError(
                code: .olderSchema,
                message: "data folder \(directory) has schema version \(schema); this cogd reads schemas \(TurnStore.wholeLogSchemaVersion) "
                    + "and \(TurnStore.schemaVersion) only (its records \(lacks)) — run `cogd log upgrade --data \(directory)` to rewrite it")
        }
    }

    /// What is wrong with `data.mdb` given what the folder remembers; nil when nothing.
    private static func loss(found logID: [UInt8]?, _ lastRevision: UInt64, remembered: LogIdentity) -> String? {
        let expected = "\(LogIdentity.fileName) says this folder holds log \(LogIdentity.hex(remembered.logID)) up to revision \(remembered.revision) (epoch \(remembered.epoch))"
        guard let logID else {
            return "data.mdb holds a log without an id, ending at revision \(lastRevision), but \(expected)"
        }
        guard logID == remembered.logID else {
            return "data.mdb holds another log (\(LogIdentity.hex(logID)), ending at revision \(lastRevision)), but \(expected)"
        }
        guard lastRevision >= remembered.revision else {
            return "data.mdb ends at revision \(lastRevision), behind what was committed: \(expected)"
        }
        return nil
    }

    private func refreshMeta(_ txn: Transaction) throws {
        logID = try txn.get(metaDB, MetaKey.logID)
        epoch = try TurnStore.metaNumber(txn, metaDB, MetaKey.epoch, directory: directory) ?? 0
        lastRevision = try lastLoggedRevision(txn)
        unindexedFrom = try TurnStore.metaNumber(txn, metaDB, MetaKey.unindexedFrom, directory: directory)
        firstRevision = try TurnStore.metaNumber(txn, metaDB, MetaKey.firstRevision, directory: directory) ?? 1
        lastCommit = try TurnStore.metaCommitName(txn, metaDB, directory: directory)
    }

    /// A meta number; a value that is not 8 bytes is refused (never read in part).
    static func metaNumber(_ txn: Transaction, _ metaDB: MDB_dbi, _ key: [UInt8], directory: String) throws -> UInt64? {
        guard let value = try txn.get(metaDB, key) else { return nil }
        guard value.count == 8 else {
            throw TurnStoreError(
                code: .corrupt,
                message: "data folder \(directory): meta.\(String(decoding: key, as: UTF8.self)) is \(value.count) bytes, expected 8")
        }
        return number(value)
    }

    /// The last key of `turns` (0 for an empty log).
    private func lastLoggedRevision(_ txn: Transaction) throws -> UInt64 {
        guard let last = try txn.last(turnsDB) else { return 0 }
        return try TurnStore.revision(key: last.key, directory: directory)
    }

    /// A `turns` key as a revision; a key that is not 8 bytes, or is 0, is refused.
    static func revision(key: [UInt8], directory: String) throws(TurnStoreError) -> UInt64 {
        guard key.count == 8, number(key) != 0 else {
            throw TurnStoreError(
                code: .corrupt,
                message: "data folder \(directory): a `turns` key is \(key.count) bytes (\(key.map { String($0, radix: 16) }.joined(separator: " "))), not an 8-byte revision from 1")
        }
        return number(key)
    }

    // MARK: Appending

    /// Commits `drafts` as consecutive turns in one transaction (group
    /// commit), updating the state table in the same transaction. Returns the
    /// revisions they got. Nothing is visible to readers before this returns.
    @discardableResult
    public func append(_ drafts: [TurnDraft], at time: Date = Date()) throws(TurnStoreError) -> Range<UInt64> {
        try append(drafts, replies: [], at: time)
    }

    /// Commits `drafts` as the next revisions, stamped with this epoch and
    /// `time`, and `replies` as dedup entries, in one durable transaction;
    /// returns the revisions the drafts got. `index` records, in the same
    /// transaction, that applied requests' replies start to be left out of
    /// `dedup` (from one of this commit's revisions) or that all are in it now.
    /// `retention` other than `.everything` also removes, in the same
    /// transaction, a bounded number of the oldest records and dedup entries
    /// it no longer keeps (about twice what the commit adds, at least 1,024;
    /// `lastPruned` says what went). `openings` are scope instances opened
    /// without a record (by registration replies), kept in `instances` so a
    /// reader can name them (`openings(of:)`). `rejections` are requests
    /// answered rejected or refused, kept in `rejections` under the revision
    /// the log ends at with this commit, stamped with `time`
    /// (`TurnStore+Rejections.swift`); they are not turns and change no state.
    @discardableResult
    public func append(
        _ drafts: [TurnDraft], replies: [(RequestID, [UInt8])], index: DedupIndexChange? = nil, retention: Retention = .everything,
        openings: [ScopeEvent] = [], rejections: [RejectionRecord] = [], at time: Date = Date()
    ) throws(TurnStoreError) -> Range<UInt64> {
        // Maintenance (`cogd log compact`) may index replies, never append turns.
        guard mode == .writer || (mode == .maintenance && drafts.isEmpty && index == .indexed) else {
            throw TurnStoreError(code: .notWritable, message: "the store in \(directory) was opened read-only")
        }
        let first = try nextRevision(count: drafts.count)
        if case .unindexedFrom(let revision)? = index, !(first..<(first + UInt64(drafts.count))).contains(revision) {
            throw TurnStoreError(
                code: .outOfOrder,
                message: "unindexed-from \(revision) is not a revision of this commit (\(first)..<\(first + UInt64(drafts.count)))")
        }
        let digests = try stateDigests(after: drafts)
        let batch = EncodedTurnBatch(drafts: drafts) { [epoch] in
            TurnStamp(revision: first + UInt64($0), epoch: epoch, time: time, stateDigest: digests[$0])
        }
        var shipment: ShippedCommit?
        if shipper != nil, let logID, !drafts.isEmpty || !replies.isEmpty || index != nil || !openings.isEmpty || !rejections.isEmpty {
            commitsNamed &+= 1
            shipment = ShippedCommit(
                epoch: epoch, number: commitsNamed, logID: logID, firstRevision: first, time: time, records: batch,
                replies: replies.map { ShippedCommit.DedupAnswer(request: $0.0, reply: $0.1) }, index: index, retention: retention,
                openings: openings, rejections: rejections)
        }
        try shipping(shipment, revisionBefore: first - 1) { () throws(TurnStoreError) in
            try commit(
                drafts, batch, firstRevision: first, replies: replies, index: index, retention: retention, openings: openings,
                rejections: rejections, now: time, name: shipment?.name)
            committed(digests, firstRevision: first)
        }
        return first..<(first + UInt64(drafts.count))
    }

    /// Appends records that already carry their revisions (which must follow
    /// the last one), with `replies` as dedup entries, in one transaction.
    /// Each gets the state digest this store computes after it (the one it
    /// carries is not trusted).
    public func append(records: [TurnRecord], replies: [(RequestID, [UInt8])] = []) throws(TurnStoreError) {
        guard mode == .writer else {
            throw TurnStoreError(code: .notWritable, message: "the store in \(directory) was opened read-only")
        }
        _ = try nextRevision(count: records.count)
        for (offset, record) in records.enumerated() where record.revision != lastRevision + 1 + UInt64(offset) {
            throw TurnStoreError(
                code: .outOfOrder,
                message: "turn \(record.revision) does not follow the last revision \(lastRevision + UInt64(offset))")
        }
        let drafts = records.map(\.draft)
        let digests = try stateDigests(after: drafts)
        let first = lastRevision + 1
        let batch = EncodedTurnBatch(drafts: drafts) { index in
            var stamp = records[index].stamp
            stamp.stateDigest = digests[index]
            return stamp
        }
        try commit(drafts, batch, firstRevision: first, replies: replies)
        committed(digests, firstRevision: first)
    }

    /// The revision after the last, once `count` more revisions are known to fit.
    private func nextRevision(count: Int) throws(TurnStoreError) -> UInt64 {
        guard UInt64(count) < UInt64.max - lastRevision else {
            throw TurnStoreError(
                code: .outOfOrder, message: "the log in \(directory) ends at revision \(lastRevision); \(count) more do not fit in 64 bits")
        }
        return lastRevision + 1
    }

    /// The one write path: each record under its revision, each write's latest
    /// value in the state table, the last revision and the dedup replies, all
    /// in one durable transaction. `name` is the commit's name as shipped
    /// (`meta.last-commit`); an unnamed commit removes the last one's.
    func commit(
        _ contents: [TurnDraft], _ batch: EncodedTurnBatch, firstRevision: UInt64, replies: [(RequestID, [UInt8])],
        index: DedupIndexChange? = nil, retention: Retention = .everything, openings: [ScopeEvent] = [], rejections: [RejectionRecord] = [],
        now: Date = Date(), name: CommitName? = nil, standbyMeta: StandbyMeta? = nil
    ) throws(TurnStoreError) {
        lastPruned = nil
        guard !contents.isEmpty || !replies.isEmpty || index != nil || !openings.isEmpty || !rejections.isEmpty || standbyMeta != nil else {
            return
        }
        let last = firstRevision + UInt64(contents.count) - 1
        let state = StateBatch(batch)
        let unindexedAfter: UInt64?
        switch index {
        case .unindexedFrom(let revision)?: unindexedAfter = min(revision, unindexedFrom ?? revision)
        case .indexed?: unindexedAfter = nil
        case nil: unindexedAfter = unindexedFrom
        }
        // The entry hashes hold this commit's writes already: a failed commit forgets them.
        defer { if lastRevision != last, !contents.isEmpty { entryHashes.removeAll() } }
        let pruned = try run { () throws in
            try environment.write { (txn: Transaction) -> PruneReport? in
                try batch.bytes.withUnsafeBytes { all in
                    try txn.withCursor(turnsDB) { turns in
                        var start = 0
                        for index in contents.indices {
                            let end = batch.ends[index]
                            try withUnsafeBytes(of: (firstRevision + UInt64(index)).bigEndian) { key in
                                try turns.put(key: key, value: UnsafeRawBufferPointer(rebasing: all[start..<end]), append: true)
                            }
                            start = end
                        }
                    }
                    try txn.withCursor(stateDB) { cursor in
                        try state.forEach(in: all) { key, value in
                            if let value { try cursor.put(key: key, value: value) } else { try txn.delete(stateDB, key: key) }
                        }
                    }
                }
                var key: [UInt8] = []
                key.reserveCapacity(64)
                for (request, reply) in replies {
                    try reply.withUnsafeBytes { value in
                        try TurnStore.withDedupKey(request, in: &key) { try txn.put(dedupDB, key: $0, value: value) }
                    }
                }
                try recordDedupOrder(txn, replies.lazy.map(\.0), answeredAt: last, buffer: &key)
                try recordOpenings(txn, openings)
                try recordRejections(txn, rejections, at: last, time: now)
                switch index {
                case .unindexedFrom(let revision)?: try txn.put(metaDB, MetaKey.unindexedFrom, TurnStore.bytes(revision))
                case .indexed?: _ = try txn.delete(metaDB, MetaKey.unindexedFrom)
                case nil: break
                }
                if let name {
                    try txn.put(metaDB, MetaKey.lastCommit, name.bytes)
                } else if lastCommit != nil {
                    _ = try txn.delete(metaDB, MetaKey.lastCommit)
                }
                if let standbyMeta {
                    if standbyMeta.epoch > epoch { try txn.put(metaDB, MetaKey.epoch, TurnStore.bytes(standbyMeta.epoch)) }
                    if logID == nil { try txn.put(metaDB, MetaKey.logID, standbyMeta.logID) }
                }
                guard retention != .everything else { return nil }
                let added = contents.count + replies.count + rejections.count
                return try prune(
                    txn, retention, now: now, lastRevision: last, unindexedFrom: unindexedAfter,
                    recordLimit: max(TurnStore.pruneLimit, 2 * contents.count), dedupLimit: max(TurnStore.pruneLimit, 2 * added))
            }
        }
        if let pruned { pruneCommitted(pruned) }
        lastCommit = name
        switch index {
        case .unindexedFrom(let revision)?: unindexedFrom = revision
        case .indexed?: unindexedFrom = nil
        case nil: break
        }
        if let standbyMeta { try adopt(standbyMeta) }
        if !contents.isEmpty {
            lastRevision = last
            identityFile?.record(revision: last)
        }
        lastAppended = batch
    }

    // MARK: Reading

    /// The latest value of one durable source (and key), if it has one.
    public func value(name: String, key: [UInt8]?) throws(TurnStoreError) -> [UInt8]? {
        try run { () throws in
            try environment.read { (txn: Transaction) in
                let stored = StateLayout.entry(name: name, key: key, value: nil).key
                return try txn.get(stateDB, stored).flatMap { StateLayout.value(stored: $0, storedKey: stored, key: key) }
            }
        }
    }

    /// Every entry of the state table, in key order.
    public func stateEntries() throws(TurnStoreError) -> [StateEntry] {
        try run { () throws in
            try environment.read { (txn: Transaction) in
                var entries: [StateEntry] = []
                try txn.scan(stateDB, from: nil) { key, value in
                    entries.append(StateLayout.parse(key: key, value: value))
                    return true
                }
                return entries
            }
        }
    }

    /// The entries of one durable source (every key of a box, or the one
    /// value of a keyless source), in key order, and the revision they are
    /// as of — both from one read, so a writer beside it cannot split them
    /// (`cogd get`).
    public func state(named name: String) throws(TurnStoreError) -> (revision: UInt64, entries: [StateEntry]) {
        let prefix = Array(name.utf8) + [0]
        return try run { () throws in
            try environment.read { (txn: Transaction) in
                try refreshMeta(txn)
                var entries: [StateEntry] = []
                try txn.scan(stateDB, from: prefix) { key, value in
                    guard key.starts(with: prefix) else { return false }
                    entries.append(StateLayout.parse(key: key, value: value))
                    return true
                }
                return (lastRevision, entries)
            }
        }
    }

    /// A view of the state table as of the last commit, read a part at a
    /// time while appends go on (one LMDB read transaction held open until
    /// the reader is closed; while it is, pages it sees are not reused).
    public func stateSnapshot() throws(TurnStoreError) -> StateSnapshotReader {
        let held = try run { () throws in try environment.beginHeldRead() }
        // The revision and its digest as the held read sees them: the last record's.
        let seen: (revision: UInt64, digest: StateDigest)? = try run { () throws in
            try held.read { txn in
                guard let last = try txn.last(turnsDB) else { return (0, try TurnStore.stateTableDigest(txn, stateDB)) }
                let revision = try TurnStore.revision(key: last.key, directory: directory)
                return (revision, try recordDigest(last.value, revision: revision))
            }
        }
        guard let seen else {
            throw TurnStoreError(code: .snapshotEnded, message: "the state snapshot was given up before its first read; take a new one")
        }
        return StateSnapshotReader(held: held, stateDB: stateDB, revision: seen.revision, stateDigest: seen.digest)
    }

    /// Records from `revision` on, in revision order: at most `limit` of
    /// them and — past the first — no more than `maximumBytes` of stored
    /// records in all.
    public func records(from revision: UInt64, limit: Int = .max, maximumBytes: Int = .max) throws(TurnStoreError) -> [TurnRecord] {
        try run { () throws in
            try environment.read { (txn: Transaction) in
                try refreshMeta(txn)
                var records: [TurnRecord] = []
                var bytes = 0
                try txn.scan(turnsDB, from: TurnStore.bytes(revision)) { key, value in
                    bytes += value.count
                    guard records.isEmpty || bytes <= maximumBytes else { return false }
                    do {
                        records.append(try TurnRecord.decode(value))
                    } catch {
                        throw TurnStoreError(
                            code: .corrupt, message: "turn \(TurnStore.number(key)) in \(directory) is damaged: \(error)")
                    }
                    return records.count < limit
                }
                return records
            }
        }
    }

    /// The newest `count` records, in revision order.
    public func lastRecords(_ count: Int) throws(TurnStoreError) -> [TurnRecord] {
        try refresh()
        let start = lastRevision >= UInt64(count) ? lastRevision - UInt64(count) + 1 : 1
        return try records(from: start, limit: count)
    }

    /// Re-reads the epoch and last revision (readers beside a writer).
    public func refresh() throws(TurnStoreError) {
        try run { () throws in try environment.read { (txn: Transaction) in try refreshMeta(txn) } }
    }

    // MARK: Dedup

    /// The highest request sequence of `worker` answered: the highest the
    /// dedup table holds, or that retention removed from it (`expiredSequence`).
    public func lastDedupSequence(worker: String) throws(TurnStoreError) -> UInt64? {
        let prefix = Array(worker.utf8) + [0]
        return try run { () throws in
            try environment.read { (txn: Transaction) in
                let expired = try self.expiredSequence(txn, worker: worker)
                guard let key = try txn.lastKey(dedupDB, before: prefix + [UInt8](repeating: 0xff, count: 9)),
                    key.count == prefix.count + 8, Array(key.prefix(prefix.count)) == prefix
                else { return expired }
                return max(TurnStore.number(Array(key.suffix(8))), expired ?? 0)
            }
        }
    }

    /// The highest request sequence of `worker` whose answer retention
    /// removed from the dedup table (nil: none): a request of that name at
    /// or below it that has no dedup entry was answered long ago, and a
    /// retry of it is refused `expired`, never run again.
    public func expiredSequence(worker: String) throws(TurnStoreError) -> UInt64? {
        try run { () throws in try environment.read { (txn: Transaction) in try self.expiredSequence(txn, worker: worker) } }
    }

    /// The stored reply to a request, if it was applied before.
    public func dedupReply(for request: RequestID) throws(TurnStoreError) -> [UInt8]? {
        try run { () throws in
            try environment.read { (txn: Transaction) in try txn.get(dedupDB, TurnStore.dedupKey(request)) }
        }
    }

    // MARK: Statistics

    /// Counts, sizes and the revision range.
    public func statistics() throws(TurnStoreError) -> StoreStatistics {
        try run { () throws in
            try environment.read { (txn: Transaction) in
                try refreshMeta(txn)
                let turns = try environment.statistics(of: turnsDB, in: txn)
                let state = try environment.statistics(of: stateDB, in: txn)
                let dedup = try environment.statistics(of: dedupDB, in: txn)
                // The first revision stored (0: none), which a sound log's meta.first-revision names.
                let firstRevision = try txn.first(turnsDB).map { TurnStore.number($0.key) } ?? 0
                let fileSize = (try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? 0
                let pages = try environment.pageUse(in: txn)
                let expiredNames = try dedupExpiredDB.map { try environment.statistics(of: $0, in: txn).entries } ?? 0
                return StoreStatistics(
                    epoch: epoch, firstRevision: firstRevision, lastRevision: lastRevision, turns: turns.entries,
                    stateEntries: state.entries, dedupEntries: dedup.entries,
                    turnsBytes: turns.pages * turns.pageSize, stateBytes: state.pages * state.pageSize,
                    fileBytes: fileSize, mapBytes: environment.mapSize, recordBytes: try txn.valueBytes(turnsDB),
                    dedupBytes: dedup.pages * dedup.pageSize, pageSize: pages.pageSize, usedPages: pages.usedPages,
                    freePages: pages.freePages, expiredNames: expiredNames)
            }
        }
    }

    // MARK: Keys

    static func bytes(_ number: UInt64) -> [UInt8] {
        withUnsafeBytes(of: number.bigEndian) { Array($0) }
    }

    static func number(_ bytes: [UInt8]) -> UInt64 {
        bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The worker name's UTF-8, a zero byte, then the sequence (8 bytes, big-endian).
    static func dedupKey(_ request: RequestID) -> [UInt8] {
        var key: [UInt8] = []
        return withDedupKey(request, in: &key) { Array($0) }
    }

    /// Writes `request`'s dedup key — after `revision`'s 8 bytes when given
    /// (a `dedup-order` key) — into `buffer`, and passes the bytes to `body`:
    /// a commit reuses one buffer for every request it answers.
    static func withDedupKey<T>(
        _ request: RequestID, after revision: UInt64? = nil, in buffer: inout [UInt8], _ body: (UnsafeRawBufferPointer) throws -> T
    ) rethrows -> T {
        buffer.removeAll(keepingCapacity: true)
        if let revision { withUnsafeBytes(of: revision.bigEndian) { buffer.append(contentsOf: $0) } }
        buffer.append(contentsOf: request.worker.utf8)
        buffer.append(0)
        withUnsafeBytes(of: request.sequence.bigEndian) { buffer.append(contentsOf: $0) }
        return try buffer.withUnsafeBytes(body)
    }

    // MARK: Plumbing

    var turnsHandle: MDB_dbi { turnsDB }
    var stateHandle: MDB_dbi { stateDB }
    var metaHandle: MDB_dbi { metaDB }

    /// A database's handle by its name (tests).
    private func handle(named database: String) -> MDB_dbi {
        ["turns": turnsDB, "state": stateDB, "dedup": dedupDB, "meta": metaDB][database]!
    }

    /// Reads one raw entry (tests).
    func rawRead(database: String, key: [UInt8]) throws(TurnStoreError) -> [UInt8]? {
        let dbi = handle(named: database)
        return try run { () throws in try environment.read { (txn: Transaction) in try txn.get(dbi, key) } }
    }

    /// Writes or deletes one raw entry, bypassing every rule (tests of verify).
    func rawWrite(database: String, key: [UInt8], value: [UInt8]?) throws(TurnStoreError) {
        let dbi = handle(named: database)
        try run { () throws in
            try environment.write { (txn: Transaction) in
                if let value { try txn.put(dbi, key, value) } else { try txn.delete(dbi, key) }
            }
        }
    }

    func runRead<T>(_ body: (Transaction) throws -> T) throws(TurnStoreError) -> T {
        try run { () throws in try environment.read(body) }
    }

    private func run<T>(_ body: () throws -> T) throws(TurnStoreError) -> T { try TurnStoreError.catching(body) }

    static func lockFolder(_ directory: String) throws(TurnStoreError) -> Int32 {
        let path = directory + "/cogd.lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = pread(descriptor, &buffer, 31, 0)
            let holder = count > 0 ? String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            Glibc.close(descriptor)
            throw TurnStoreError(
                code: .locked, message: "data folder \(directory) is locked by another writer (pid \(holder))")
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pwrite(descriptor, pid, pid.count, 0)
        return descriptor
    }

    static func unlock(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        flock(descriptor, LOCK_UN)
        Glibc.close(descriptor)
    }
}

/// What `cogd log stats` prints.
public struct StoreStatistics: Equatable, Sendable {
    public let epoch: UInt64
    public let firstRevision: UInt64
    public let lastRevision: UInt64
    public let turns: Int
    public let stateEntries: Int
    public let dedupEntries: Int
    public let turnsBytes: Int
    public let stateBytes: Int
    public let fileBytes: Int
    public let mapBytes: Int
    /// The bytes of the records kept (their stored size, summed).
    public let recordBytes: Int
    /// The pages of the `dedup` table, in bytes.
    public let dedupBytes: Int
    /// LMDB's page size, the pages the file has ever used (it is at least
    /// that long), and the pages on its free list (reused by later commits).
    public let pageSize: Int
    public let usedPages: Int
    public let freePages: Int
    /// Worker names whose oldest answers retention removed (`dedup-expired`).
    public let expiredNames: Int
}

// MARK: - Verification

/// What `verify()` found: nothing, or the first problem.
public struct VerifyReport: Equatable, Sendable {
    public let turns: Int
    /// The oldest revision the log keeps (1: the whole log).
    public let firstRevision: UInt64
    public let lastRevision: UInt64
    public let stateEntries: Int
    /// The state digest of the state table (which, in a sound log, every
    /// record's digest led up to).
    public let stateDigest: StateDigest
    /// How many records' `state` was checked against the replay: every one
    /// of a whole log; of a log whose oldest records retention removed, those
    /// that write only entries an earlier kept record wrote (the others
    /// overwrite values whose earlier bytes went with the removed records).
    public let digestsChecked: Int
    /// State entries no kept record writes: their values came from removed
    /// records, so only the state table's digest (against the last record's)
    /// vouches for them. 0 for a whole log.
    public let entriesFromRemovedRecords: Int
    /// The first problem, in words; nil when the log is sound.
    public let problem: String?

    public var isSound: Bool { problem == nil }
}

extension TurnStore {
    /// Checks the log (`cogd log verify`, `protocol/turnlog.md` §3a).
    ///
    /// A whole log (`firstRevision` 1): revisions are contiguous from 1,
    /// every record passes its checksum, decodes and carries the digest of
    /// the state after it (computed along the log from the empty state), and
    /// the state table equals the replay of the log.
    ///
    /// A log whose oldest records retention removed starts from its first
    /// kept record, whose predecessor state is gone: revisions are
    /// contiguous from `meta.first-revision` to the last, every record
    /// passes its checksum and decodes; a record's `state` is checked
    /// against its predecessor's plus its writes when every entry it writes
    /// was written by an earlier kept record (the others are counted in
    /// `digestsChecked`'s complement); every entry a kept record writes
    /// holds the last value written (or is absent, released); and the state
    /// table's digest equals the last record's.
    ///
    /// Either way, every kept rejection (`rejections`, §2d) decodes and sits
    /// at a revision the log reached.
    public func verify() throws(TurnStoreError) -> VerifyReport {
        // One read transaction: a consistent snapshot, even beside a writer.
        try runRead { txn in
            let unindexedFrom = try TurnStore.metaNumber(txn, self.metaHandle, MetaKey.unindexedFrom, directory: self.directory)
            let first = try TurnStore.metaNumber(txn, self.metaHandle, MetaKey.firstRevision, directory: self.directory) ?? 1
            let whole = first == 1
            // Per stored key, the last value a kept record wrote (nil: released).
            var written: [[UInt8]: [UInt8]?] = [:]
            // The digest along the log (nil: not known yet, before the first
            // kept record of a pruned log), and each written entry's hash in
            // it (0: absent); an entry no kept record wrote has none.
            var running: StateDigest? = whole ? StateDigest() : nil
            var hashes: [[UInt8]: UInt128] = [:]
            var lastStated: StateDigest?
            var expected = first
            var problem: String?
            var count = 0
            var checked = 0
            try txn.scan(self.turnsHandle, from: nil) { key, value in
                count += 1
                guard key.count == 8 else {
                    problem = "a `turns` key after revision \(expected - 1) is \(key.count) bytes, not an 8-byte revision"
                    return false
                }
                let revision = TurnStore.number(key)
                if revision < first {
                    problem = "the log holds revision \(revision), below meta.first-revision \(first) (the oldest revision it keeps)"
                    return false
                }
                guard revision == expected else {
                    problem = "revision \(expected) is missing (the next stored one is \(revision))"
                    return false
                }
                let record: TurnRecord
                do {
                    record = try TurnRecord.decode(value)
                } catch {
                    problem = "turn \(revision) is damaged: \(error)"
                    return false
                }
                guard record.revision == revision else {
                    problem = "turn stored under \(revision) says it is revision \(record.revision)"
                    return false
                }
                var digest = running ?? StateDigest()
                var known = running != nil
                for write in record.writes {
                    let entry = StateLayout.entry(name: write.name, key: write.key, value: write.value)
                    written.updateValue(entry.value, forKey: entry.key)
                    let new = write.value.map { StateDigest.entryHash(name: write.name, key: write.key, value: $0) } ?? 0
                    if let old = hashes[entry.key] ?? (whole ? 0 : nil) {
                        digest.replace(entryHash: old, with: new)
                    } else {
                        known = false  // its value before came from a removed record
                    }
                    hashes[entry.key] = new
                }
                if known {
                    guard record.stateDigest == digest else {
                        problem =
                            "turn \(revision) says the state digest after it is \(record.stateDigest), "
                            + "but the replay of the log up to it gives \(digest)"
                        return false
                    }
                    checked += 1
                }
                running = known ? digest : record.stateDigest
                lastStated = record.stateDigest
                expected += 1
                return true
            }
            let lastRevision = count == 0 ? 0 : expected - 1
            if problem == nil, count == 0, !whole {
                problem = "meta.first-revision is \(first), but the log holds no records (retention always keeps the newest)"
            }
            if problem == nil, let unindexedFrom, unindexedFrom > lastRevision {
                problem = "meta says replies are unindexed from revision \(unindexedFrom) but the log ends at \(lastRevision)"
            }
            if problem == nil, let unindexedFrom, unindexedFrom < first {
                problem =
                    "meta says replies are unindexed from revision \(unindexedFrom), but the log keeps revisions from \(first) only: "
                    + "records holding replies not in dedup were removed"
            }
            var stored: [[UInt8]: [UInt8]] = [:]
            var tableDigest = StateDigest()
            try txn.scan(self.stateHandle, from: nil) { key, value in
                stored[key] = value
                let entry = StateLayout.parse(key: key, value: value)
                tableDigest.replace(entryHash: 0, with: StateDigest.entryHash(name: entry.name, key: entry.key, value: entry.value))
                return true
            }
            var fromRemoved = 0
            if problem == nil {
                for key in written.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) where stored[key] != written[key]! {
                    let entry = StateLayout.parse(key: key, value: [])
                    let what = "\(entry.name)\(entry.key.map { "[\($0.count) key bytes]" } ?? "")"
                    problem =
                        written[key]! == nil
                        ? "state holds \(what), which the last record that wrote it released"
                        : "state of \(what) differs from the replay of the log"
                    break
                }
                let unwritten = stored.keys.filter { written[$0] == nil }
                if whole, problem == nil, let extra = unwritten.sorted(by: { $0.lexicographicallyPrecedes($1) }).first {
                    problem = "state holds \(StateLayout.parse(key: extra, value: []).name), which no turn in the log wrote"
                }
                if !whole { fromRemoved = unwritten.count }
                let expectedDigest = whole ? running ?? StateDigest() : lastStated ?? StateDigest()
                if problem == nil, tableDigest != expectedDigest {
                    problem =
                        whole
                        // Equal tables have equal digests: only a broken hash gets here.
                        ? "the state table's digest is \(tableDigest), but the last record's is \(expectedDigest)"
                        : "the state table's digest is \(tableDigest), but the last record says the state after it is \(expectedDigest)"
                }
            }
            if problem == nil, let rejectionsDB = self.rejectionsDB {
                // Rejections on the record (§2d): each decodes and sits at a revision the log reached.
                try txn.scan(rejectionsDB, from: nil) { key, value in
                    guard let rejection = RejectionRecord(key: key, value: value) else {
                        problem = "a `rejections` entry (key of \(key.count) bytes\(key.count == 16 ? ", revision \(TurnStore.number(key))" : "")) does not decode"
                        return false
                    }
                    guard rejection.revision <= lastRevision else {
                        problem = "a rejection is kept at revision \(rejection.revision), past the log's last revision \(lastRevision)"
                        return false
                    }
                    return true
                }
            }
            return VerifyReport(
                turns: count, firstRevision: first, lastRevision: lastRevision, stateEntries: stored.count, stateDigest: tableDigest,
                digestsChecked: checked, entriesFromRemovedRecords: fromRemoved, problem: problem)
        }
    }
}

/// How one `state` entry is stored (`turnlog.md` §2): under its durable
/// name, 0, and encoded key — or, when that is longer than LMDB's 511-byte
/// key limit, under the name, 0, 0xFF and the SHA-256 of the encoded key,
/// with the value prefixed by the key's length (8 bytes, big-endian) and
/// the key. (An encoded key never starts with 0xFF, CBOR's "break".)
enum StateLayout {
    static let maximumKeySize = 511
    static let digestMarker: UInt8 = 0xFF

    /// Whether an entry is stored under its name, 0 and key as they are
    /// (else under the key's digest): when that fits LMDB, or has no key.
    static func isPlain(nameBytes: Int, keyBytes: Int?) -> Bool {
        guard let keyBytes else { return true }
        return nameBytes + 1 + keyBytes <= maximumKeySize
    }

    /// The stored key of a name and key (`entry(…).key`, with one allocation for a plain one).
    static func storedKey(name: String, key: [UInt8]?) -> [UInt8] {
        let nameCount = name.utf8.count
        guard isPlain(nameBytes: nameCount, keyBytes: key?.count) else { return entry(name: name, key: key, value: nil).key }
        var stored: [UInt8] = []
        stored.reserveCapacity(nameCount + 1 + (key?.count ?? 0))
        stored.append(contentsOf: name.utf8)
        stored.append(0)
        if let key { stored.append(contentsOf: key) }
        return stored
    }

    /// The stored key, and the stored value when `value` is one.
    static func entry(name: String, key: [UInt8]?, value: [UInt8]?) -> (key: [UInt8], value: [UInt8]?) {
        guard !isPlain(nameBytes: name.utf8.count, keyBytes: key?.count), let key else {
            return (Array(name.utf8) + [0] + (key ?? []), value)
        }
        return (Array(name.utf8) + [0, digestMarker] + SHA256.hash(key), value.map { TurnStore.bytes(UInt64(key.count)) + key + $0 })
    }

    /// The value a stored entry holds for `key` (nil if a digest entry holds another key).
    static func value(stored: [UInt8], storedKey: [UInt8], key: [UInt8]?) -> [UInt8]? {
        guard let (held, value) = unwrap(storedKey: storedKey, stored: stored) else { return stored }
        return held == key ? value : nil
    }

    static func parse(key: [UInt8], value: [UInt8]) -> StateEntry {
        let split = key.firstIndex(of: 0) ?? key.count
        let name = String(decoding: key[..<split], as: UTF8.self)
        if let (held, inner) = unwrap(storedKey: key, stored: value) { return StateEntry(name: name, key: held, value: inner) }
        let rest = split < key.count ? Array(key[(split + 1)...]) : []
        return StateEntry(name: name, key: rest.isEmpty ? nil : rest, value: value)
    }

    /// A digest entry's key and value; nil for a plain entry.
    private static func unwrap(storedKey: [UInt8], stored: [UInt8]) -> (key: [UInt8], value: [UInt8])? {
        guard let split = storedKey.firstIndex(of: 0), storedKey.count == split + 34, storedKey[split + 1] == digestMarker,
            stored.count >= 8
        else { return nil }
        let length = Int(clamping: TurnStore.number(Array(stored[0..<8])))
        guard length <= stored.count - 8 else { return nil }  // a length from the file: no `8 + length` before it is checked
        return (Array(stored[8..<(8 + length)]), Array(stored[(8 + length)...]))
    }
}

/// A group commit's state puts, made from its encoded records (no write's
/// strings or arrays are touched again). A large one (from `sortThreshold`
/// writes) puts in key order, each key once (its latest write): puts in key
/// order mostly land on the cursor's current leaf page, where LMDB skips the
/// descent from the root. (`cogd bench log` at 1,000 turns per transaction:
/// +13% turns/s; at 100 no difference beyond noise, so smaller commits put in
/// write order.)
struct StateBatch {
    static let sortThreshold = 256

    /// A write's value: bytes of the encoded batch, bytes of its own (a key
    /// stored under its digest keeps its key beside the value), or released.
    enum Value {
        case span(Range<Int>)
        case own([UInt8])
        case released
    }

    private var keys: [UInt8] = []
    /// Per write: where its stored key starts and ends in `keys`, and its value.
    private var entries: [(start: Int32, end: Int32, value: Value)] = []

    init(_ batch: EncodedTurnBatch) {
        keys.reserveCapacity(batch.writeSpans.count * 40)
        entries.reserveCapacity(batch.writeSpans.count)
        batch.bytes.withUnsafeBytes { bytes in
            for span in batch.writeSpans {
                let start = Int32(keys.count)
                if StateLayout.isPlain(nameBytes: span.name.count, keyBytes: span.key?.count) {
                    keys.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[span.name]))
                    keys.append(0)
                    if let key = span.key { keys.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[key])) }
                    entries.append((start, Int32(keys.count), span.value.map { .span($0) } ?? .released))
                } else {
                    // Too long for an LMDB key: stored under its digest (rare; copies are fine).
                    let entry = StateLayout.entry(
                        name: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[span.name]), as: UTF8.self),
                        key: span.key.map { Array(bytes[$0]) }, value: span.value.map { Array(bytes[$0]) })
                    keys.append(contentsOf: entry.key)
                    entries.append((start, Int32(keys.count), entry.value.map { .own($0) } ?? .released))
                }
            }
        }
    }

    /// Calls `body` with each stored key and its value (nil: released):
    /// in key order, each key once with its latest value, from
    /// `sortThreshold` writes; else every write in write order. `bytes` are
    /// the batch's.
    func forEach(
        in bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer?) throws -> Void
    ) rethrows {
        try keys.withUnsafeBytes { all in
            guard let base = all.baseAddress else { return }
            func put(_ index: Int) throws {
                let entry = entries[index]
                let key = UnsafeRawBufferPointer(start: base + Int(entry.start), count: Int(entry.end - entry.start))
                switch entry.value {
                case .span(let range): try body(key, UnsafeRawBufferPointer(rebasing: bytes[range]))
                case .own(let value): try value.withUnsafeBytes { try body(key, $0) }
                case .released: try body(key, nil)
                }
            }
            guard entries.count >= StateBatch.sortThreshold else {
                for index in entries.indices { try put(index) }
                return
            }
            func compare(_ a: Int, _ b: Int) -> Int32 {
                let (x, y) = (entries[a], entries[b])
                let (xCount, yCount) = (Int(x.end - x.start), Int(y.end - y.start))
                let order = memcmp(base + Int(x.start), base + Int(y.start), min(xCount, yCount))
                return order != 0 ? order : Int32(xCount - yCount)
            }
            // Equal keys stay in write order, so the last of a run is the latest.
            let order = entries.indices.sorted { a, b in
                let c = compare(a, b)
                return c != 0 ? c < 0 : a < b
            }
            for (position, index) in order.enumerated() {
                if position + 1 < order.count, compare(index, order[position + 1]) == 0 { continue }
                try put(index)
            }
        }
    }
}
