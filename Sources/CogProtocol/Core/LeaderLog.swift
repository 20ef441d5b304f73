import CogCodec

/// What the leader core reads from its turn log: committed state only (the
/// batch being built lives in the core). `TurnStore` (LMDB) in `Leader`; an
/// in-memory log in `cogd sim`.
public protocol LeaderLog: AnyObject {
    /// The epoch this leader runs under.
    var epoch: UInt64 { get }
    /// The newest committed revision (0: none).
    var lastRevision: UInt64 { get }
    /// The oldest revision the log keeps (1 until retention removed older records).
    var firstRevision: UInt64 { get }
    /// From this revision on, records may name applied requests whose
    /// replies are not in the dedup table yet (`turnlog.md` §2).
    var unindexedFrom: UInt64? { get }
    /// A durable source's committed encoded value.
    func value(name: String, key: [UInt8]?) throws(TurnStoreError) -> [UInt8]?
    /// The stored reply to a request (digest, then the reply frame).
    func dedupReply(for request: RequestID) throws(TurnStoreError) -> [UInt8]?
    /// The highest sequence answered for `worker`: the dedup table's, or
    /// one whose answer retention removed.
    func lastDedupSequence(worker: String) throws(TurnStoreError) -> UInt64?
    /// The highest sequence of `worker` whose answer retention removed from
    /// the dedup table (nil: none).
    func expiredSequence(worker: String) throws(TurnStoreError) -> UInt64?
    /// Committed records from `revision` on: at most `limit`, and past the
    /// first about `maximumBytes` of them.
    func records(from revision: UInt64, limit: Int, maximumBytes: Int) throws(TurnStoreError) -> [TurnRecord]
    /// The state digest after `revision` (nil: no such record).
    func stateDigest(at revision: UInt64) throws(TurnStoreError) -> StateDigest?
}

extension LeaderLog {
    /// Calls `body` with every committed record from `revision` on, in
    /// revision order, read 10,000 at a time.
    package func forEachRecord(from revision: UInt64 = 1, _ body: (TurnRecord) -> Void) throws(TurnStoreError) {
        var next = revision
        while next <= lastRevision {
            let records = try self.records(from: next, limit: 10_000, maximumBytes: .max)
            guard let last = records.last else { return }
            records.forEach(body)
            next = last.revision + 1
        }
    }
}

/// What the leader core asks of its driver while it steps, and needs the
/// answer to at once.
@MainActor
public protocol LeaderPorts: AnyObject {
    /// Notes, where a crash of the process cannot lose it, that `request`'s
    /// body runs now (a body that traps is then answered `crashed-leader`
    /// at the next start instead of run again). A failure refuses the request.
    func noteRunning(_ request: RequestID, op: String, digest: [UInt8]) throws(TurnStoreError)
    /// Whether `peer` is still connected: sends it `probe` (a welcome, harmless
    /// to a live holder) and reports whether the transport could.
    func isConnected(_ peer: [UInt8], probe: [UInt8]) -> Bool
}

/// What one commit of the leader writes in one transaction: the batch's
/// turns, its dedup rows, what changes about the dedup index, and the
/// scope instances registration replies opened since the last commit
/// (kept so a log reader can name them, `turnlog.md` §2c), and the
/// requests answered rejected or refused since the last commit, retries
/// answered from `dedup` among them (`turnlog.md` §2d; the store stamps
/// their revision, order and time).
public struct LeaderCommit: Sendable {
    public var drafts: [TurnDraft]
    public var replies: [(RequestID, [UInt8])]
    public var index: DedupIndexChange?
    public var openings: [ScopeEvent] = []
    public var rejections: [RejectionRecord] = []
}
