import Cog
import CogCodec
import CogLog

/// Stored values that no longer decode as the types their declarations have
/// in this process now — a field renamed or retyped in a durable value's
/// type (`README` "Evolving your types"). A leader refuses to start over
/// such a state table (instead of trapping when an op first reads the
/// value); `cogd log verify` lists them, and the older records' writes too.
@MainActor
public struct StoredValueAudit {
    /// One value that does not decode.
    public struct Finding: Equatable, Sendable, CustomStringConvertible {
        public let name: String
        public let key: [UInt8]?
        /// The revision whose record wrote it (nil: not found in the log).
        public let revision: UInt64?
        /// Why it does not decode, and where the declaration is.
        public let reason: String
        public let site: String

        /// `name[key]`, the key shown as CBOR diagnostic text.
        public var entry: String { name + (key.map { "[\(CBORText.display(bytes: $0))]" } ?? "") }

        public var description: String {
            "the stored value of `\(entry)`\(revision.map { " (written at revision \($0))" } ?? "") does not decode as its declaration at \(site) declares it now: \(reason)"
        }
    }

    /// The state table's entries that do not decode, in key order, each with
    /// the revision that last wrote it.
    public static func stateTable(of store: TurnStore) throws(TurnStoreError) -> [Finding] {
        let codec = ReplicaCodec()
        var failing: [(entry: StateEntry, reason: String, site: String)] = []
        for entry in try store.stateEntries() {
            if case .fails(let reason, let site) = Cogs.checkStoredValue(named: entry.name, key: entry.key, value: entry.value, codec: codec) {
                failing.append((entry, reason, site))
            }
        }
        guard !failing.isEmpty else { return [] }
        // Which records wrote them last: one pass over the log, only when something fails.
        let wanted = Set(failing.map { TurnWrite.entryKey(name: $0.entry.name, key: $0.entry.key) })
        var writtenAt: [[UInt8]: UInt64] = [:]
        try store.forEachRecord { record in
            for write in record.writes where wanted.contains(write.entryKey) { writtenAt[write.entryKey] = record.revision }
        }
        return failing.map { failure in
            Finding(
                name: failure.entry.name, key: failure.entry.key,
                revision: writtenAt[TurnWrite.entryKey(name: failure.entry.name, key: failure.entry.key)], reason: failure.reason,
                site: failure.site)
        }
    }

    /// Writes in the log's records that do not decode now (history: what
    /// the state table holds is `stateTable(of:)`), at most `limit` listed,
    /// and how many there are in all.
    public static func records(of store: TurnStore, limit: Int = 10) throws(TurnStoreError) -> (listed: [Finding], count: Int) {
        let codec = ReplicaCodec()
        var listed: [Finding] = []
        var count = 0
        try store.forEachRecord { record in
            for write in record.writes {
                guard let value = write.value,
                    case .fails(let reason, let site) = Cogs.checkStoredValue(named: write.name, key: write.key, value: value, codec: codec)
                else { continue }
                count += 1
                if listed.count < limit {
                    listed.append(Finding(name: write.name, key: write.key, revision: record.revision, reason: reason, site: site))
                }
            }
        }
        return (listed, count)
    }
}

/// A leader cannot serve a state table whose values its types no longer read.
public struct UndecodableStateError: Error, CustomStringConvertible {
    public let findings: [StoredValueAudit.Finding]

    public var description: String {
        let first = findings[0]
        let more = findings.count > 1 ? " (and \(findings.count - 1) more: `cogd log verify` lists them)" : ""
        return "\(first)\(more). A field renamed or retyped cannot read the values written before: keep its name and type "
            + "(add new fields as optionals), or move the data under a new durable name. The leader did not start; nothing was changed."
    }
}
