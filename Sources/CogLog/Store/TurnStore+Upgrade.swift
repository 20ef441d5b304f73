import CogCodec
import Foundation
internal import CLMDB

/// What `TurnStore.upgrade(directory:)` did.
public struct UpgradeReport: Equatable, Sendable {
    /// The schema the folder had (4 or 5 when there was nothing to do).
    public let fromSchema: UInt64
    /// Records rewritten as schema 4.
    public let recordsRewritten: Int
    /// Writes whose `null` was read as a release (what it meant to every reader of the old schema).
    public let nullWritesAsReleases: Int
    /// State entries removed so that the state table equals the replay of the upgraded log.
    public let stateEntriesRemoved: Int
}

extension TurnStore {
    /// Rewrites a schema 1, 2 or 3 folder as schema 4 (`cogd log upgrade`;
    /// a schema 4 or 5 folder is left as it is):
    /// every record gets the digest of the state after it (`StateDigest`,
    /// computed along the log from revision 1, one entry hash per state
    /// entry held in memory meanwhile) and its checksum. From schemas 1 and
    /// 2, a write whose value is `null` — which every reader of those schemas
    /// read as a release — becomes a release; a state entry such a release
    /// leaves behind is removed, so the state table stays the replay of the
    /// log. Then `meta.schema` becomes 4.
    ///
    /// Records are rewritten 10,000 to a transaction; the schema changes in
    /// the last one, so an interrupted upgrade is simply run again (records
    /// already rewritten are recognised by their checksum).
    ///
    /// - Important: takes the folder's writer lock: no leader may run meanwhile.
    public static func upgrade(directory: String) throws(TurnStoreError) -> UpgradeReport {
        guard FileManager.default.fileExists(atPath: directory + "/data.mdb") else {
            throw TurnStoreError(code: .missingFolder, message: "data folder \(directory) holds no turn log (no data.mdb)")
        }
        let lock = try lockFolder(directory)
        defer { unlock(lock) }
        try LMDBDataFile.check(directory: directory)
        return try TurnStoreError.catching {
            let environment = try LMDBEnvironment(path: directory, readOnly: false)
            defer { environment.close() }
            let handles = try environment.openDatabases(["turns", "state", "meta"])
            guard let turnsDB = handles[0], let stateDB = handles[1], let metaDB = handles[2] else {
                throw TurnStoreError(code: .corrupt, message: "data folder \(directory) is not a turn log (a database is missing)")
            }
            let schema = try environment.read { txn in
                try metaNumber(txn, metaDB, MetaKey.schema, directory: directory) ?? (try txn.last(turnsDB) == nil ? wholeLogSchemaVersion : 1)
            }
            if (wholeLogSchemaVersion...schemaVersion).contains(schema) {
                return UpgradeReport(fromSchema: schema, recordsRewritten: 0, nullWritesAsReleases: 0, stateEntriesRemoved: 0)
            }
            if schema > schemaVersion { try refuseSchema(schema, directory: directory) }
            var rewritten = 0
            var nullWrites = 0
            // Per state key: whether its last write in the log is a release.
            var releasedLast: [[UInt8]: Bool] = [:]
            // The state digest along the log, and each entry's hash in it.
            var digest = StateDigest()
            var hashes: [[UInt8]: UInt128] = [:]
            var from: [UInt8]? = nil
            while true {
                // The body may run again (a grown map): it returns its tallies instead of adding them up.
                let chunk = try environment.write { txn in
                    var chunk = UpgradeChunk(digest: digest)
                    try txn.scan(turnsDB, from: from) { key, value in
                        guard chunk.scanned < 10_000 else {
                            chunk.next = key
                            return false
                        }
                        chunk.scanned += 1
                        let revision = try TurnStore.revision(key: key, directory: directory)
                        var record: TurnRecord
                        var rewrite = true
                        if value.starts(with: TurnRecordChecksum.prefix), (try? TurnRecordChecksum.check(value)) != nil {
                            record = try TurnRecord.decode(value)  // rewritten by an interrupted upgrade
                            rewrite = false
                        } else if value.starts(with: TurnRecordChecksum.schema3Prefix),
                            (try? TurnRecordChecksum.check(value, prefix: TurnRecordChecksum.schema3Prefix)) != nil
                        {
                            record = try TurnRecord.decodeSchema3(value, revision: revision)
                        } else {
                            let legacy = try TurnRecord.decodeSchema2(value, revision: revision)
                            record = legacy.record
                            chunk.nullWrites += legacy.nullWrites
                        }
                        for write in record.writes {
                            let stored = StateLayout.entry(name: write.name, key: write.key, value: nil).key
                            chunk.releasedLast[stored] = write.value == nil
                            let new = write.value.map { StateDigest.entryHash(name: write.name, key: write.key, value: $0) }
                            chunk.digest.replace(entryHash: chunk.hashes[stored] ?? hashes[stored] ?? 0, with: new ?? 0)
                            chunk.hashes[stored] = new ?? 0
                        }
                        if rewrite || record.stateDigest != chunk.digest {
                            record.stateDigest = chunk.digest
                            chunk.records.append((key, record.encoded()))
                        }
                        return true
                    }
                    for (key, value) in chunk.records { try txn.put(turnsDB, key, value) }
                    if chunk.next == nil {
                        // The last chunk: state equals the replay, then the schema.
                        var merged = releasedLast
                        merged.merge(chunk.releasedLast) { $1 }
                        for (key, released) in merged where released {
                            if try txn.delete(stateDB, key) { chunk.stateEntriesRemoved += 1 }
                        }
                        _ = try txn.delete(metaDB, MetaKey.lastRevision)
                        try txn.put(metaDB, MetaKey.schema, bytes(wholeLogSchemaVersion))
                    }
                    return chunk
                }
                rewritten += chunk.records.count
                nullWrites += chunk.nullWrites
                releasedLast.merge(chunk.releasedLast) { $1 }
                hashes.merge(chunk.hashes) { $1 }
                digest = chunk.digest
                guard let next = chunk.next else {
                    return UpgradeReport(
                        fromSchema: schema, recordsRewritten: rewritten, nullWritesAsReleases: nullWrites,
                        stateEntriesRemoved: chunk.stateEntriesRemoved)
                }
                from = next
            }
        }
    }
}

/// One transaction's work in an upgrade.
private struct UpgradeChunk {
    /// The state digest after the last record scanned.
    var digest: StateDigest
    /// Entry hashes the chunk's writes left, by stored key (0: released).
    var hashes: [[UInt8]: UInt128] = [:]
    var scanned = 0
    var records: [([UInt8], [UInt8])] = []
    var nullWrites = 0
    var releasedLast: [[UInt8]: Bool] = [:]
    var stateEntriesRemoved = 0
    /// The key to go on from; nil when this was the last chunk.
    var next: [UInt8]?
}

extension TurnRecord {
    /// Reads a record as schema 3 wrote it (checksummed, no `state`): the
    /// caller checked its checksum.
    static func decodeSchema3(_ bytes: [UInt8], revision: UInt64) throws(TurnStoreError) -> TurnRecord {
        do {
            guard case .map(var fields) = try CBORValue.parse(bytes) else {
                throw CodecError(code: .typeMismatch, path: [], message: "a record is a map")
            }
            fields.append((key: .text("state"), value: .bytes([UInt8](repeating: 0, count: StateDigest.size))))
            return try CBORDecoder().decode(TurnRecord.self, fromTree: .map(fields))
        } catch {
            throw TurnStoreError(code: .corrupt, message: "turn \(revision) does not decode as a schema 3 record: \(error)")
        }
    }

    /// Reads a record as schemas 1 and 2 wrote it (no `crc`; a write's
    /// `value: null` meant a release to every reader then, so it is one).
    static func decodeSchema2(_ bytes: [UInt8], revision: UInt64) throws(TurnStoreError) -> (record: TurnRecord, nullWrites: Int) {
        do {
            guard case .map(var fields) = try CBORValue.parse(bytes) else {
                throw CodecError(code: .typeMismatch, path: [], message: "a record is a map")
            }
            var nullWrites = 0
            for index in fields.indices where fields[index].key == .text("writes") {
                guard case .array(let writes) = fields[index].value else { continue }
                fields[index].value = .array(
                    writes.map { write in
                        guard case .map(var entries) = write, let at = entries.firstIndex(where: { $0.key == .text("value") }),
                            entries[at].value == .null
                        else { return write }
                        nullWrites += 1
                        entries.remove(at: at)
                        entries.append((key: .text("released"), value: .bool(true)))
                        return .map(entries)
                    })
            }
            fields.append((key: .text("state"), value: .bytes([UInt8](repeating: 0, count: StateDigest.size))))
            return (try CBORDecoder().decode(TurnRecord.self, fromTree: .map(fields)), nullWrites)
        } catch {
            throw TurnStoreError(code: .corrupt, message: "turn \(revision) does not decode as a schema 2 record: \(error)")
        }
    }
}

extension TurnStore {
    /// Rewrites this schema's folder the way schema `schema` (1, 2 or 3)
    /// left it (tests of the upgrade and of the refusal): records without
    /// `state`; for 1 and 2 also without checksums, `null` for nil values and
    /// releases alike, the state table as it was (a nil value stored as
    /// `f6`); `except` keeps some records as they are.
    package static func rewriteAsOlderSchema(directory: String, schema: UInt64, except kept: Set<UInt64> = []) throws {
        precondition((1...3).contains(schema), "internal inconsistency: no schema \(schema) to rewrite as")
        let store = try TurnStore(directory: directory, mode: .writer)
        defer { store.close() }
        for record in try store.records(from: 1) where !kept.contains(record.revision) {
            guard case .map(let fields) = try CBORValue.parse(try CBOREncoder().encode(record)) else { continue }
            let stripped = fields.filter { $0.key != .text("state") }
            let old: [UInt8]
            if schema == 3 {
                var bytes = CBORWriter.encode(.map(stripped))
                bytes.withUnsafeMutableBytes { TurnRecordChecksum.seal($0) }
                old = bytes
            } else {
                old = CBORWriter.encode(.map(stripped.filter { $0.key != .text("crc") }.map { field -> (key: CBORValue, value: CBORValue) in
                    guard field.key == .text("writes"), case .array(let writes) = field.value else { return field }
                    return (field.key, .array(writes.map { write in
                        guard case .map(let entries) = write else { return write }
                        return .map(entries.map { $0.key == .text("released") ? (key: .text("value"), value: .null) : $0 })
                    }))
                }))
            }
            try store.rawWrite(database: "turns", key: bytes(record.revision), value: old)
        }
        try store.rawWrite(database: "meta", key: MetaKey.schema, value: bytes(schema))
        if schema == 1 { try store.rawWrite(database: "meta", key: MetaKey.lastRevision, value: bytes(store.lastRevision)) }
    }
}
