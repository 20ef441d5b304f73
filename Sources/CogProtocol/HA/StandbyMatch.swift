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
        /// The name of the copy's last commit (nil: that commit was not shipped, or the copy has none).
        public var lastCommit: CommitName?

        public init(logID: [UInt8]?, epoch: UInt64, revision: UInt64, digest: StateDigest?, lastCommit: CommitName? = nil) {
            self.logID = logID
            self.epoch = epoch
            self.revision = revision
            self.digest = digest
            self.lastCommit = lastCommit
        }
    }

    /// A record as log matching names it: its epoch and the state digest after it.
    public struct Record: Equatable, Sendable {
        public var epoch: UInt64
        public var digest: StateDigest?

        public init(epoch: UInt64, digest: StateDigest?) {
            self.epoch = epoch
            self.digest = digest
        }
    }

    /// What the leader's log says at the hello's revision.
    public struct Log: Equatable, Sendable {
        public var logID: [UInt8]?
        /// The leader's epoch, and its log's last revision.
        public var epoch: UInt64
        public var lastRevision: UInt64
        /// The leader's record at the hello's revision (nil: it holds none there, or the revision is 0).
        public var record: Record?
        /// Whether it keeps commits made after that revision (with or without a record).
        public var commitsAfter: Bool
        /// Whether the commits it keeps reach back to one at or before that revision.
        public var keepsAllAfter: Bool
        /// The first revision of the oldest commit kept (nil: none kept), for the reason's words.
        public var oldestKept: UInt64?
        /// The name of the leader's folder's last commit (nil: not shipped).
        public var lastCommit: CommitName?
        /// How many kept commits follow the one the hello names (nil: none
        /// is named, or no kept commit has its name).
        public var keptAfterNamed: Int?

        public init(
            logID: [UInt8]?, epoch: UInt64, lastRevision: UInt64, record: Record?, commitsAfter: Bool, keepsAllAfter: Bool, oldestKept: UInt64?,
            lastCommit: CommitName? = nil, keptAfterNamed: Int? = nil
        ) {
            self.logID = logID
            self.epoch = epoch
            self.lastRevision = lastRevision
            self.record = record
            self.commitsAfter = commitsAfter
            self.keepsAllAfter = keepsAllAfter
            self.oldestKept = oldestKept
            self.lastCommit = lastCommit
            self.keptAfterNamed = keptAfterNamed
        }
    }

    /// The rule: the standby's copy is this log as of its revision when it
    /// is the same log, its revision is not past the log's last, and the
    /// leader's record there is of the epoch the copy applied (one leader
    /// per epoch writes each revision once: a record is named by its
    /// revision and epoch, as in Raft) with the same state digest — else it
    /// holds another log or a deposed leader's tail. A copy that names its
    /// last commit is then placed by that name, which also tells apart
    /// commits without a record (dedup answers, refusals, openings): in
    /// step when it is the leader's last, behind when a kept commit has it,
    /// and a deposed leader's tail when the kept commits reach back past its
    /// record and none has it. A copy that names none (its last commit was
    /// not shipped) lacks commits when it is behind on records, or when
    /// commits without a record came after its last one.
    public static func of(_ hello: Hello, _ log: Log) -> StandbyMatch {
        if let mismatch = mismatch(hello, log) { return .copy(reason: mismatch) }
        if let named = hello.lastCommit { return placed(named, hello, log) }
        let lacksCommits = hello.revision < log.lastRevision || log.commitsAfter
        guard lacksCommits else { return .inStep }
        if log.keepsAllAfter { return .behind }
        guard hello.logID != nil else { return .copy(reason: "its folder holds no log yet") }
        return .copy(
            reason: "the commits after its revision \(hello.revision) are no longer all kept"
                + (log.oldestKept.map { " (those kept follow revision \($0 &- 1))" } ?? " (none is kept)"))
    }

    /// Where the copy's last commit, `named`, is in the log.
    static func placed(_ named: CommitName, _ hello: Hello, _ log: Log) -> StandbyMatch {
        switch log.keptAfterNamed {
        case 0?:
            // The newest kept: in step when the folder ends there too.
            return named == log.lastCommit ? .inStep : .copy(reason: "this leader's folder changed after its last commit (\(named)) without shipping")
        case _?:
            return .behind
        case nil where named == log.lastCommit:
            // The leader's last, though not kept (it has shipped nothing since it started).
            return .inStep
        case nil where log.keepsAllAfter:
            return .copy(reason: "its last commit (\(named)) is not in this log: a deposed leader's tail")
        case nil:
            return .copy(
                reason: "its last commit (\(named)) is not among the commits this leader keeps"
                    + (log.oldestKept.map { " (those kept follow revision \($0 &- 1))" } ?? " (none is kept)"))
        }
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
