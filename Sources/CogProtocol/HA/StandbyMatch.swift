import CogCodec

/// What a leader does with a standby's `standby-hello` (ha.md §9): welcome
/// it in step, catch it up from the commits it keeps, or send it a copy —
/// log matching, as a pure rule. The driver reads its log for the facts
/// (`Leader`) and performs the answer (`ShipCore.hello` or `copied`).
public enum StandbyMatch: Equatable, Sendable {
    /// In step: it holds every commit this leader has.
    case inStep
    /// Behind on this log: the kept commits after its revision follow.
    case behind
    /// Not this log as of its revision, or missing commits no longer kept: a copy, for this reason (logged).
    case copy(reason: String)

    /// What the standby's hello says of its copy.
    public struct Hello: Equatable, Sendable {
        public var logID: [UInt8]?
        /// The epoch of the copy's last record (the highest it applied, for a copy with none).
        public var epoch: UInt64
        public var revision: UInt64
        public var digest: StateDigest?

        public init(logID: [UInt8]?, epoch: UInt64, revision: UInt64, digest: StateDigest?) {
            self.logID = logID
            self.epoch = epoch
            self.revision = revision
            self.digest = digest
        }
    }

    /// What the leader's log says at the hello's revision.
    public struct Log: Equatable, Sendable {
        public var logID: [UInt8]?
        /// The leader's epoch, and its log's last revision.
        public var epoch: UInt64
        public var lastRevision: UInt64
        /// The epoch and state digest of the leader's record at the hello's
        /// revision (nil: it holds none there, or the revision is 0).
        public var record: (epoch: UInt64, digest: StateDigest?)?
        /// Whether it keeps commits made after that revision (with or without a record).
        public var commitsAfter: Bool
        /// Whether the commits it keeps reach back to one at or before that revision.
        public var keepsAllAfter: Bool
        /// The first revision of the oldest commit kept (nil: none kept), for the reason's words.
        public var oldestKept: UInt64?

        public init(
            logID: [UInt8]?, epoch: UInt64, lastRevision: UInt64, record: (epoch: UInt64, digest: StateDigest?)?, commitsAfter: Bool,
            keepsAllAfter: Bool, oldestKept: UInt64?
        ) {
            self.logID = logID
            self.epoch = epoch
            self.lastRevision = lastRevision
            self.record = record
            self.commitsAfter = commitsAfter
            self.keepsAllAfter = keepsAllAfter
            self.oldestKept = oldestKept
        }

        public static func == (lhs: Log, rhs: Log) -> Bool {
            lhs.logID == rhs.logID && lhs.epoch == rhs.epoch && lhs.lastRevision == rhs.lastRevision
                && lhs.record?.epoch == rhs.record?.epoch && lhs.record?.digest == rhs.record?.digest && lhs.commitsAfter == rhs.commitsAfter
                && lhs.keepsAllAfter == rhs.keepsAllAfter && lhs.oldestKept == rhs.oldestKept
        }
    }

    /// The rule: the standby's copy is this log as of its revision when it
    /// is the same log, its revision is not past the log's last, and the
    /// leader's record there is of the epoch the copy applied (one leader
    /// per epoch writes each revision once: a record is named by its
    /// revision and epoch, as in Raft) with the same state digest — else it
    /// holds another log or a deposed leader's tail. A copy that is this log
    /// lacks commits when it is behind on records, or when commits without
    /// a record (dedup answers, refusals) came after its last one.
    public static func of(_ hello: Hello, _ log: Log) -> StandbyMatch {
        if let mismatch = mismatch(hello, log) { return .copy(reason: mismatch) }
        let lacksCommits = hello.revision < log.lastRevision || log.commitsAfter
        guard lacksCommits else { return .inStep }
        if log.keepsAllAfter { return .behind }
        guard hello.logID != nil else { return .copy(reason: "its folder holds no log yet") }
        return .copy(
            reason: "the commits after its revision \(hello.revision) are no longer all kept"
                + (log.oldestKept.map { " (those kept follow revision \($0 &- 1))" } ?? " (none is kept)"))
    }

    /// Why the copy is not this log as of its revision; nil when it is.
    static func mismatch(_ hello: Hello, _ log: Log) -> String? {
        guard hello.epoch <= log.epoch else { return "its epoch \(hello.epoch) is above this leader's" }
        guard hello.revision <= log.lastRevision else { return "its revision \(hello.revision) is past this log's last" }
        // An empty copy beside a log with no turn yet takes the log's id from its first commit.
        guard let logID = hello.logID else { return hello.revision == 0 ? nil : "its copy names no log" }
        guard logID == log.logID else { return "its copy is another log" }
        guard hello.revision > 0 else { return nil }
        guard let record = log.record else { return "this log no longer holds its revision \(hello.revision)" }
        guard record.epoch == hello.epoch else {
            return "it has applied epoch \(hello.epoch) and this log's revision \(hello.revision) is of epoch \(record.epoch)"
        }
        return hello.digest == record.digest ? nil : "its state digest at revision \(hello.revision) differs from this log's"
    }
}
