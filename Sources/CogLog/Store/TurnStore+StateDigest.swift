internal import CLMDB
import CogCodec

extension TurnStore {
    /// How many revisions' digests a writer keeps in memory (older ones are
    /// read from their records).
    static let recentDigestCount = 4_096
    /// How many entry hashes a writer keeps (64 to 128 bytes each with a
    /// short key, `EntryHashCache`): a hot entry's old hash is then neither
    /// read nor hashed again.
    static let entryHashCacheLimit = 1 << 16

    /// The state digest as of the last revision (`StateDigest`): the last
    /// record's, or for a log without records the state table's.
    ///
    /// A writer reads it once and keeps it up to date with every commit; a
    /// reader reads it at each call.
    public func currentStateDigest() throws(TurnStoreError) -> StateDigest {
        if let runningDigest { return runningDigest }
        let digest = try runRead { txn in try self.lastDigest(txn) }
        if mode.appends { runningDigest = digest }
        return digest
    }

    /// The state digest after `revision` (0: before the first record, the
    /// empty state's), from memory for a writer's recent revisions, else from
    /// the record; nil for a revision the log does not hold.
    public func stateDigest(at revision: UInt64) throws(TurnStoreError) -> StateDigest? {
        if revision == 0 { return StateDigest() }
        if !recentDigests.isEmpty {
            let kept = recentDigests[Int(revision % UInt64(TurnStore.recentDigestCount))]
            if kept.revision == revision { return kept.digest }
        }
        return try runRead { txn in
            guard let value = try txn.get(self.turnsHandle, TurnStore.bytes(revision)) else { return nil }
            return try self.recordDigest(value, revision: revision)
        }
    }

    /// The digest of the state after each draft, from the running digest:
    /// each write's old entry hash comes from `entryHashes` (the batch's
    /// earlier writes and recently written entries), else from the state
    /// table (read and hashed). O(writes), one cache exchange per write.
    ///
    /// - Important: `entryHashes` then holds the batch's writes before they
    ///   commit: a commit that fails must clear it (`append` does).
    func stateDigests(after drafts: [TurnDraft]) throws(TurnStoreError) -> [StateDigest] {
        guard !drafts.isEmpty else { return [] }
        var digest = try currentStateDigest()
        if entryHashes.count > TurnStore.entryHashCacheLimit { entryHashes.removeAll() }
        var after: [StateDigest] = []
        after.reserveCapacity(drafts.count)
        do {
            try runRead { txn in
                // Drafts and writes are read in place: copying them retained every string and array.
                try drafts.withUnsafeBufferPointer { drafts in
                    for draft in drafts.indices {
                        try drafts[draft].writes.withUnsafeBufferPointer { writes in
                            for write in writes.indices {
                                try TurnStore.withEntryBytes(writes.baseAddress! + write) { name, key, value in
                                    let plain = StateLayout.isPlain(nameBytes: name.count, keyBytes: key?.count)
                                    // A plain key is built in place; one stored under its digest is rare.
                                    let digestKey = plain ? nil : StateLayout.storedKey(name: writes[write].name, key: writes[write].key)
                                    let cached = digestKey.map { StoredKey(bytes: $0) } ?? StoredKey(plainName: name, key: key)
                                    entryHashes.prefetch(cached)  // its slot comes in while the new value is hashed
                                    let keyBytes = key ?? UnsafeRawBufferPointer(start: nil, count: 0)
                                    let new = value.map { StateDigest.entryHash(name: name, key: keyBytes, value: $0) } ?? 0
                                    // A released entry's hash is 0: absent, as in the state table.
                                    if let known = entryHashes.exchange(new, for: cached) {
                                        digest.replace(entryHash: known, with: new)
                                        return
                                    }
                                    let stored = digestKey ?? StateLayout.storedKey(name: writes[write].name, key: writes[write].key)
                                    if let held = try txn.get(self.stateHandle, stored),
                                        let old = StateLayout.value(stored: held, storedKey: stored, key: writes[write].key)
                                    {
                                        let oldHash = old.withUnsafeBytes { StateDigest.entryHash(name: name, key: keyBytes, value: $0) }
                                        digest.replace(entryHash: oldHash, with: new)
                                    } else {
                                        digest.replace(entryHash: 0, with: new)
                                    }
                                }
                            }
                        }
                        after.append(digest)
                    }
                }
            }
        } catch {
            entryHashes.removeAll()
            throw error
        }
        return after
    }

    /// Calls `body` with a write's name (UTF-8), encoded key (nil: keyless)
    /// and encoded value (nil: released), read in place.
    private static func withEntryBytes<T>(
        _ write: UnsafePointer<TurnWrite>,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer?, UnsafeRawBufferPointer?) throws -> T
    ) rethrows -> T {
        func withName(_ then: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
            if let result = try write.pointee.name.utf8.withContiguousStorageIfAvailable({ try then(UnsafeRawBufferPointer($0)) }) {
                return result
            }
            return try Array(write.pointee.name.utf8).withUnsafeBytes(then)
        }
        return try withName { name in
            func withValue(_ key: UnsafeRawBufferPointer?) throws -> T {
                guard let value = write.pointee.value else { return try body(name, key, nil) }
                return try value.withUnsafeBytes { try body(name, key, $0) }
            }
            guard let key = write.pointee.key else { return try withValue(nil) }
            return try key.withUnsafeBytes { try withValue($0) }
        }
    }

    /// After a commit of drafts from `firstRevision` holds: the running
    /// digest and the recent revisions' digests follow it.
    func committed(_ digests: [StateDigest], firstRevision: UInt64) {
        guard mode.appends, let last = digests.last else { return }
        runningDigest = last
        if recentDigests.isEmpty {
            recentDigests = Array(repeating: (0, StateDigest()), count: TurnStore.recentDigestCount)
        }
        for (offset, digest) in digests.enumerated() {
            let revision = firstRevision + UInt64(offset)
            recentDigests[Int(revision % UInt64(TurnStore.recentDigestCount))] = (revision, digest)
        }
    }

    /// The digest after the last record (`txn`'s view), or of the state
    /// table when the log holds no record.
    private func lastDigest(_ txn: Transaction) throws -> StateDigest {
        guard let last = try txn.last(turnsHandle) else { return try TurnStore.stateTableDigest(txn, stateHandle) }
        return try recordDigest(last.value, revision: try TurnStore.revision(key: last.key, directory: directory))
    }

    /// The `state` of a stored record; a damaged one is refused, naming it.
    func recordDigest(_ bytes: [UInt8], revision: UInt64) throws(TurnStoreError) -> StateDigest {
        do {
            return try TurnRecord.stateDigest(of: bytes)
        } catch {
            throw TurnStoreError(
                code: .corrupt, message: "turn \(revision) in \(directory) is damaged: \(error) (the state digest is read from it)")
        }
    }

    /// The digest of every entry of the state table as `txn` sees it.
    static func stateTableDigest(_ txn: Transaction, _ stateDB: MDB_dbi) throws -> StateDigest {
        var digest = StateDigest()
        try txn.scan(stateDB, from: nil) { key, value in
            let entry = StateLayout.parse(key: key, value: value)
            digest.replace(entryHash: 0, with: StateDigest.entryHash(name: entry.name, key: entry.key, value: entry.value))
            return true
        }
        return digest
    }
}
