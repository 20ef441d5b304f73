import CogCodec

/// The latest shipped commits a node keeps in memory, oldest first (ha.md
/// §9): a leader keeps what it shipped, to send a standby that is behind
/// the commits it lacks (catch-up, and the commits after a copy); a standby
/// keeps what it applied, so that if it takes the lead it can catch up the
/// old leader, whose folder may lack the tail it shipped before its own
/// commit. Bounded by a count (the shipping window) and by bytes.
public struct KeptCommits: Sendable {
    /// Every commit appended and not yet compacted away: the kept ones are
    /// those from `start` on (the ones before it are emptied as they go, and
    /// removed in one step once they are half the array, so that each append
    /// costs the same however many are kept).
    private var storage: [[UInt8]] = []
    private var revisions: [UInt64] = []
    private var names: [CommitName?] = []
    private var start = 0
    public private(set) var bytes = 0
    public let countLimit: Int
    public let byteLimit: Int
    /// The name of the commit just before the oldest kept, when every commit
    /// after it is kept: the folder's last commit when keeping began, then
    /// each commit dropped in turn (nil: unknown, or a retention pass, unnamed).
    /// A copy whose last commit it is lacks exactly the kept commits.
    public private(set) var base: CommitName?

    /// `base`: the name of the folder's last commit as keeping begins (nil: none).
    public init(countLimit: Int, byteLimit: Int, base: CommitName? = nil) {
        precondition(countLimit > 0 && byteLimit > 0, "internal inconsistency: kept commits need room for one")
        self.countLimit = countLimit
        self.byteLimit = byteLimit
        self.base = base
    }

    public var count: Int { storage.count - start }
    /// The kept commits, oldest first.
    public var commits: [[UInt8]] { Array(storage[start...]) }
    /// The first revision of each kept commit.
    public var firstRevisions: [UInt64] { Array(revisions[start...]) }
    /// Each kept commit with its first revision and its name (nil: a retention pass), oldest first.
    public var entries: [(commit: [UInt8], firstRevision: UInt64, name: CommitName?)] {
        (start..<storage.count).map { (storage[$0], revisions[$0], names[$0]) }
    }
    /// The first revision of the oldest kept commit.
    public var oldestRevision: UInt64? { start < revisions.count ? revisions[start] : nil }

    /// Keeps `commit`, dropping the oldest past either limit (the newest always stays).
    public mutating func append(_ commit: [UInt8], firstRevision: UInt64, name: CommitName?) {
        storage.append(commit)
        revisions.append(firstRevision)
        names.append(name)
        bytes += commit.count
        while count > countLimit || (count > 1 && bytes > byteLimit) {
            bytes -= storage[start].count
            base = names[start]
            storage[start] = []
            start += 1
        }
        if start >= 64, start * 2 >= storage.count {
            storage.removeFirst(start)
            revisions.removeFirst(start)
            names.removeFirst(start)
            start = 0
        }
    }

    /// Forgets every commit (the folder's log was replaced by a copy whose
    /// last commit is named `base`).
    public mutating func removeAll(base: CommitName?) {
        storage = []
        revisions = []
        names = []
        start = 0
        bytes = 0
        self.base = base
    }

    /// The kept commits after `revision` (every commit whose first revision
    /// is above it); nil when none is kept at or before it, so some commit
    /// after it may be gone, or when none follows it.
    public func after(revision: UInt64) -> [[UInt8]]? {
        let low = firstIndex(above: revision)
        guard low > start, low < revisions.count else { return nil }
        return Array(storage[low...])
    }

    /// The kept commits after the one named `name` (empty when it is the
    /// newest; all of them when it is `base`); nil when neither a kept
    /// commit nor `base` has that name.
    public func after(name: CommitName) -> [[UInt8]]? {
        if name == base { return Array(storage[start...]) }
        guard let found = names[start...].lastIndex(of: name) else { return nil }
        return Array(storage[(found + 1)...])
    }

    /// How many kept commits start after `revision`, and the first revision
    /// of the first of them (nil when none does).
    public func following(revision: UInt64) -> (count: Int, firstRevision: UInt64?) {
        let low = firstIndex(above: revision)
        return (revisions.count - low, low < revisions.count ? revisions[low] : nil)
    }

    /// The index of the first kept commit whose first revision is above
    /// `revision` (`revisions.count` when none is): first revisions rise, so by halving.
    private func firstIndex(above revision: UInt64) -> Int {
        var low = start
        var high = revisions.count
        while low < high {
            let middle = low + (high - low) / 2
            if revisions[middle] > revision { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// The last `count` kept commits; nil when fewer are kept.
    public func last(_ count: UInt64) -> [[UInt8]]? {
        count <= UInt64(self.count) ? Array(storage.suffix(Int(count))) : nil
    }
}
