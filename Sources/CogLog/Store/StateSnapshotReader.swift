internal import CLMDB
import CogCodec

/// The state table as of one revision, read a part at a time (`TurnStore.stateSnapshot()`).
/// Reads after the store's map grew (or the store closed) throw
/// `snapshotEnded`: the view is gone, a new snapshot must be taken.
public final class StateSnapshotReader {
    /// The revision the view holds.
    public let revision: UInt64
    /// The state digest at `revision` (its record's): what the entries add up to.
    public let stateDigest: StateDigest
    private let held: HeldRead
    private let stateDB: MDB_dbi
    /// The last stored key read; nil before the first part.
    private var lastKey: [UInt8]?
    public private(set) var isFinished = false

    init(held: HeldRead, stateDB: MDB_dbi, revision: UInt64, stateDigest: StateDigest) {
        self.held = held
        self.stateDB = stateDB
        self.revision = revision
        self.stateDigest = stateDigest
    }

    /// The next entries in key order, as many as fit `maximumBytes` by
    /// `size` (at least one while any are left), and whether more follow.
    public func next(maximumBytes: Int, size: (StateEntry) -> Int) throws(TurnStoreError) -> (entries: [StateEntry], more: Bool) {
        guard !isFinished else { return ([], false) }
        var entries: [StateEntry] = []
        var total = 0
        var more = false
        var last = lastKey
        try TurnStoreError.catching {
            let read: Void? = try held.read { (txn: Transaction) throws in
                try txn.scan(stateDB, from: lastKey) { key, value in
                    if key == lastKey { return true }
                    let entry = StateLayout.parse(key: key, value: value)
                    let entrySize = size(entry)
                    if !entries.isEmpty, total + entrySize > maximumBytes {
                        more = true
                        return false
                    }
                    entries.append(entry)
                    total += entrySize
                    last = key
                    return true
                }
            }
            guard read != nil else {
                throw TurnStoreError(code: .snapshotEnded, message: "the state snapshot at revision \(revision) was given up; take a new one")
            }
        }
        lastKey = last
        if !more {
            isFinished = true
            held.end()
        }
        return (entries, more)
    }

    /// Ends the view (its read transaction); later reads throw `snapshotEnded`.
    public func close() { held.end() }
}
