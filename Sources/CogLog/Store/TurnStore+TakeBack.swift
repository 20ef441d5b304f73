import CogCodec

/// A commit this writer shipped and then committed, named by LMDB's
/// transaction id: what a leader that steps down may take back
/// (`TurnStore.closeTakingBack`).
public struct ShippedTransaction: Sendable, Equatable {
    /// LMDB's id of the commit's transaction.
    public let transaction: UInt64
    /// The log's last revision before the commit, and after it.
    public let revisionBefore: UInt64
    public let lastRevision: UInt64

    /// The commit as the environment numbered it: nil when it wrote nothing
    /// (LMDB then numbers no transaction, and there is nothing to take back).
    init?(after previous: UInt64, _ transaction: UInt64, revisionBefore: UInt64, lastRevision: UInt64) {
        guard transaction == previous &+ 1 else { return nil }
        self.transaction = transaction
        self.revisionBefore = revisionBefore
        self.lastRevision = lastRevision
    }
}

extension TurnStore {
    /// Gives `commit` to `shipper` (nil: nothing is shipped), then runs
    /// `body`, the local commit of it, and notes that transaction as the
    /// last one shipped: what a leader that steps down may take back.
    func shipping<Result>(
        _ commit: ShippedCommit?, revisionBefore: UInt64, _ body: () throws(TurnStoreError) -> Result
    ) throws(TurnStoreError) -> Result {
        guard let commit, let shipper else { return try body() }
        let before = environment.lastTransaction
        lastShippedCommit = nil
        // Shipped before the local commit, so a standby's commit runs beside this one.
        shipper(commit)
        let result = try body()
        lastShippedCommit = ShippedTransaction(after: before, environment.lastTransaction, revisionBefore: revisionBefore, lastRevision: lastRevision)
        return result
    }

    /// The last commit this writer shipped, while it is still the last
    /// transaction of the environment (nil once anything else committed).
    public var lastTransactionIfShipped: ShippedTransaction? {
        guard let commit = lastShippedCommit, environment.lastTransaction == commit.transaction else { return nil }
        return commit
    }

    /// Closes the store, and takes back `commit`, its last transaction, so
    /// the folder holds the log as it was before it (`protocol/turnlog.md`
    /// §1b): for a leader that stepped down whose last commit released
    /// nothing, so it can follow the next leader's log from the revision
    /// before instead of being sent a whole copy (`protocol/ha.md` §5).
    ///
    /// The store is closed whatever happens. Throws, with the folder as it
    /// was, when another transaction followed `commit`, when another process
    /// holds a read of the folder (its view could be overwritten once the
    /// transaction's pages are reused), or when a file cannot be written.
    /// `cogd.identity` is rewritten first, and flushed, so it is never ahead
    /// of `data.mdb`: a crash between the two leaves the commit in place.
    public func closeTakingBack(_ commit: ShippedTransaction) throws(TurnStoreError) {
        defer { close() }
        guard mode == .writer else {
            throw TurnStoreError(code: .notWritable, message: "the store in \(directory) was opened read-only")
        }
        guard lastTransactionIfShipped == commit else {
            throw TurnStoreError(
                code: .outOfOrder, message: "another transaction followed the commit of revisions \(commit.revisionBefore + 1)…\(commit.lastRevision)")
        }
        let readers = try TurnStoreError.catching { try environment.readersInTransactions() }
        guard readers == 0 else {
            throw TurnStoreError(
                code: .locked, message: "\(readers) read\(readers == 1 ? "" : "s") of \(directory) \(readers == 1 ? "is" : "are") open (cogd tail or cogd log?)")
        }
        guard let identityFile else {
            throw TurnStoreError(code: .notWritable, message: "data folder \(directory) has no \(LogIdentity.fileName) open")
        }
        try identityFile.recordDurably(revision: commit.revisionBefore)
        identityFile.close()
        environment.close()
        try LMDBDataFile.takeBackLastTransaction(directory: directory, transaction: commit.transaction)
    }
}
