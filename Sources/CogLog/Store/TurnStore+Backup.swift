import CogCodec
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What `TurnStore.backup(to:)` wrote.
public struct BackupReport: Equatable, Sendable {
    /// The folder the copy is in.
    public let directory: String
    /// The revisions the copy holds, the epoch it was written under, and
    /// the state digest at its last revision.
    public let firstRevision: UInt64
    public let lastRevision: UInt64
    public let epoch: UInt64
    public let stateDigest: StateDigest
    /// The size of the copy's `data.mdb`, and of the folder's when the copy began.
    public let bytes: Int
    public let sourceBytes: Int
    /// Whether the copy got a `cogd.identity` (the log had an id).
    public let identityWritten: Bool
}

extension TurnStore {
    /// Writes a consistent, compacted copy of the folder's log to
    /// `destination` (`cogd log backup`): `data.mdb` as of one moment —
    /// one LMDB read, so it may run beside a leader that commits — with
    /// free pages left out (LMDB's `mdb_env_copy2` with `MDB_CP_COMPACT`),
    /// and a `cogd.identity` that names the copy's log, epoch and last
    /// revision, so a leader started on the copy opens it as it is (no
    /// `--accept-data-loss`: the copy is not behind what its own folder
    /// remembers). Both files are flushed to disk before it returns (unless `flushed` is false, below).
    /// `running-request`, `cogd.lock` and `lock.mdb` belong to the processes
    /// that use a folder and are not copied.
    ///
    /// - Important: `destination` must be a new or empty folder: a backup
    ///   never overwrites a log. While it copies, the writer cannot reuse
    ///   pages freed meanwhile (the copy holds a read), so the source file
    ///   may grow.
    ///
    /// With `flushed` false nothing is flushed: for a copy that is read back
    /// and removed at once, like the leader's copy for a standby, which the
    /// standby flushes on its own disk (ha.md §9). Flushing 100 MiB there
    /// cost about 0.2 s of a failover that waits for the copy.
    public func backup(to destination: String, flushed: Bool = true) throws(TurnStoreError) -> BackupReport {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: destination, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw TurnStoreError(code: .notWritable, message: "\(destination) is a file, not a folder: a backup goes into a new or empty folder")
            }
            let present = ((try? FileManager.default.contentsOfDirectory(atPath: destination)) ?? []).sorted()
            guard present.isEmpty else {
                throw TurnStoreError(
                    code: .notWritable,
                    message: "\(destination) is not empty (it holds \(present.prefix(3).joined(separator: ", "))\(present.count > 3 ? ", …" : "")): "
                        + "a backup goes into a new or empty folder, and never overwrites a log")
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
            } catch {
                throw TurnStoreError(code: .notWritable, message: "cannot create \(destination): \(error.localizedDescription)")
            }
        }
        let sourceBytes = (try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")[.size] as? Int) ?? 0
        let copyPath = destination + "/data.mdb"
        do {
            try environment.copy(to: destination, compact: true)
        } catch {
            unlink(copyPath)
            throw TurnStoreError(code: .lmdb, message: "cannot copy the log of \(directory) to \(destination): \(error)")
        }
        do {
            if flushed { try TurnStore.flush(copyPath) }
        } catch {
            unlink(copyPath)
            throw error
        }
        // What the copy holds, read back from it (the lock file LMDB makes
        // for that read is not part of the backup).
        let copy = try TurnStore(directory: destination, mode: .reader)
        defer {
            copy.close()
            unlink(destination + "/lock.mdb")
        }
        let digest = try copy.currentStateDigest()
        var identityWritten = false
        if let logID = copy.logID {
            let identity = LogIdentity(logID: logID, epoch: copy.epoch, revision: copy.lastRevision)
            let path = destination + "/" + LogIdentity.fileName
            guard FileManager.default.createFile(atPath: path, contents: Data(identity.text.utf8)) else {
                throw TurnStoreError(code: .notWritable, message: "cannot write \(path)")
            }
            if flushed { try TurnStore.flush(path) }
            identityWritten = true
        }
        if flushed { try TurnStore.flush(destination) }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: copyPath)[.size] as? Int) ?? 0
        return BackupReport(
            directory: destination, firstRevision: copy.firstRevision, lastRevision: copy.lastRevision, epoch: copy.epoch,
            stateDigest: digest, bytes: bytes, sourceBytes: sourceBytes, identityWritten: identityWritten)
    }

    /// Flushes a file (or a folder's entries) to disk.
    static func flush(_ path: String) throws(TurnStoreError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot flush \(path) to disk: \(String(cString: strerror(errno)))")
        }
    }
}
