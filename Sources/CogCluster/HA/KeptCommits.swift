/// The latest shipped commits a node keeps in memory, oldest first (ha.md
/// §9): a leader keeps what it shipped, to send a standby that is behind
/// the commits it lacks (catch-up, and the commits after a copy); a standby
/// keeps what it applied, so that if it takes the lead it can catch up the
/// old leader, whose folder may lack the tail it shipped before its own
/// commit. Bounded by a count (the shipping window) and by bytes.
public struct KeptCommits: Sendable {
    public private(set) var commits: [[UInt8]] = []
    /// The first revision of each commit.
    public private(set) var firstRevisions: [UInt64] = []
    public private(set) var bytes = 0
    public let countLimit: Int
    public let byteLimit: Int

    public init(countLimit: Int, byteLimit: Int) {
        precondition(countLimit > 0 && byteLimit > 0, "internal inconsistency: kept commits need room for one")
        self.countLimit = countLimit
        self.byteLimit = byteLimit
    }

    public var count: Int { commits.count }

    /// Keeps `commit`, dropping the oldest past either limit (the newest always stays).
    public mutating func append(_ commit: [UInt8], firstRevision: UInt64) {
        commits.append(commit)
        firstRevisions.append(firstRevision)
        bytes += commit.count
        var drop = max(0, commits.count - countLimit)
        var bytesLeft = bytes
        for kept in commits[..<drop] { bytesLeft -= kept.count }
        while drop < commits.count - 1, bytesLeft > byteLimit {
            bytesLeft -= commits[drop].count
            drop += 1
        }
        guard drop > 0 else { return }
        commits.removeFirst(drop)
        firstRevisions.removeFirst(drop)
        bytes = bytesLeft
    }

    /// Forgets every commit (the folder's log was replaced by a copy).
    public mutating func removeAll() {
        commits = []
        firstRevisions = []
        bytes = 0
    }

    /// The kept commits after `revision` (every commit whose first revision
    /// is above it); nil when none is kept at or before it, so some commit
    /// after it may be gone, or when none follows it.
    public func after(revision: UInt64) -> [[UInt8]]? {
        guard let start = firstRevisions.firstIndex(where: { $0 > revision }), start > 0 else { return nil }
        return Array(commits[start...])
    }

    /// The last `count` kept commits; nil when fewer are kept.
    public func last(_ count: UInt64) -> [[UInt8]]? {
        count <= UInt64(commits.count) ? Array(commits.suffix(Int(count))) : nil
    }
}
