import CogLog

/// Whether a worker's replica holds the state the log says it should at the
/// revision it applied: its heartbeat's state digest against the record's
/// (`cogd status`, `protocol/cogwire.md` §3).
enum StateDigestAgreement: String, Sendable {
    case agrees, differs
    /// The heartbeat carried no digest (an older worker), or the leader
    /// cannot read the digest of that revision.
    case unknown
}

extension Leader {
    /// Compares the state digest a worker reports for `revision` with the
    /// one the log holds for it (recent revisions from memory, older ones
    /// from their records). A record that cannot be read makes it
    /// `unknown`, reported as such: nothing is decided on it.
    func digestAgreement(_ revision: UInt64, _ reported: StateDigest?) -> StateDigestAgreement {
        guard let reported, revision <= durable.store.lastRevision else { return .unknown }
        let expected: StateDigest?
        do {
            expected = try durable.store.stateDigest(at: revision)
        } catch {
            return .unknown
        }
        guard let expected else { return .unknown }
        return expected == reported ? .agrees : .differs
    }
}
