/// What a commit records about the `dedup` index (`turnlog.md` §2).
public enum DedupIndexChange: Sendable, Equatable {
    /// Applied requests' replies are left out of `dedup` from this revision
    /// (one of the commit's) on; their records keep them.
    case unindexedFrom(UInt64)
    /// Every reply is in `dedup` now (the commit stores the missing ones).
    case indexed
}
