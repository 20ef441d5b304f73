import CogCodec
import Foundation
internal import CLMDB

/// The raw LMDB figure `cogd bench log` prints beside the store's: the same
/// number of records of the same size, appended with the same batch size to
/// one database in a fresh environment, with no encoding and no state table.
public struct RawAppendBaseline {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    /// Appends `count` records of `recordSize` bytes, `batch` per durable
    /// commit; returns the elapsed seconds.
    public func run(count: Int, recordSize: Int, batch: Int) throws -> Double {
        let appender = try Appender(directory: directory)
        let record = [UInt8](repeating: 0x5a, count: recordSize)
        let start = ContinuousClock.now
        var written = 0
        while written < count {
            let inBatch = min(batch, count - written)
            try appender.commit(record, count: inBatch)
            written += inBatch
        }
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// An open raw database that appends records in durable transactions:
    /// every raw LMDB baseline of `cogd bench` (append loops, single commits,
    /// the composed echo-and-commit server).
    public final class Appender {
        private let environment: LMDBEnvironment
        private let dbi: MDB_dbi
        private let stateDBI: MDB_dbi
        private var next: UInt64

        public init(directory: String) throws {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            environment = try LMDBEnvironment(path: directory, readOnly: false)
            let databases = try environment.openDatabases(["raw", "state"])
            guard let dbi = databases[0], let stateDBI = databases[1] else {
                throw LMDBError(code: MDB_NOTFOUND, operation: "mdb_dbi_open raw")
            }
            self.dbi = dbi
            self.stateDBI = stateDBI
            next = try environment.read { (txn: Transaction) in
                (try txn.last(dbi)).map { TurnStore.number($0.key) + 1 } ?? 1
            }
        }

        deinit { environment.close() }

        /// Appends `record` in its own durable transaction.
        public func commit(_ record: [UInt8]) throws {
            try commit(record, count: 1)
        }

        /// Appends `count` copies of `record` under the next keys, in one
        /// durable transaction: through one cursor with keys on the stack, the
        /// way the store appends its turns (the tightest loop LMDB allows).
        public func commit(_ record: [UInt8], count: Int) throws {
            try commit(record, count: count, state: StatePuts())
        }

        /// Appends as `commit(_:count:)` does and, in the same transaction,
        /// makes `state`'s puts (ready-made bytes) into a second table: the
        /// LMDB work of a store's group commit without its encoding.
        public func commit(_ record: [UInt8], count: Int, state: StatePuts) throws {
            try environment.write { (txn: Transaction) in
                try record.withUnsafeBytes { value in
                    try txn.withCursor(dbi) { cursor in
                        for offset in 0..<UInt64(count) {
                            try withUnsafeBytes(of: (next + offset).bigEndian) { key in
                                try cursor.put(key: key, value: value, append: true)
                            }
                        }
                    }
                }
                guard !state.puts.isEmpty else { return }
                try txn.withCursor(stateDBI) { cursor in
                    for put in state.puts {
                        try put.key.withUnsafeBytes { key in
                            try put.value.withUnsafeBytes { value in try cursor.put(key: key, value: value) }
                        }
                    }
                }
            }
            next += UInt64(count)
        }
    }

    /// The `state` table puts a store makes for one group commit of
    /// `drafts`, in its order (key order, each key once, from
    /// `StateBatch.sortThreshold` writes on; else write order), as bytes.
    /// Releases are left out: the baseline only puts.
    public struct StatePuts {
        public private(set) var puts: [(key: [UInt8], value: [UInt8])] = []

        public init() {}

        public init(drafts: [TurnDraft]) {
            let batch = EncodedTurnBatch(drafts: drafts, epoch: 1, firstRevision: 1)
            batch.bytes.withUnsafeBytes { bytes in
                StateBatch(batch).forEach(in: bytes) { key, value in
                    if let value { puts.append((Array(key), Array(value))) }
                }
            }
        }
    }
}
