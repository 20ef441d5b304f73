import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The record of an HA node's run in its data folder, `cogd.ha-run`
/// (ha.md §4.1): the lease the run holds and the process that holds it.
///
/// A run that dies holding its lease (SIGKILL, a crash, an OOM kill) keeps
/// its presence key — and the leader key, if it led — in etcd until the
/// lease's TTL runs out. The node's next run on the same machine reads the
/// record, and when that process certainly no longer exists it revokes the
/// lease at once: a process that does not exist releases nothing, so the
/// standby may take over without waiting out the TTL.
///
/// "Certainly" is what keeps this safe: the record names the machine's boot
/// and the PID namespace it was written in, and a lease is called dead only
/// when both are this process's own and the PID is gone (no such process,
/// a zombie, or this process itself). A folder copied to another machine,
/// or a run still alive, is never revoked: the node waits as without a record.
public struct RunRecord: Sendable {
    public let path: String

    /// The most a record holds; a longer file is not a record of ours.
    static let byteLimit = 512

    public init(dataFolder: String) {
        path = dataFolder + "/cogd.ha-run"
    }

    /// Whether the folder holds a record (of whatever run).
    public var exists: Bool { FileManager.default.fileExists(atPath: path) }

    /// The lease of the previous run when that run has certainly ended, else nil.
    public func deadRunLease() -> Int64? {
        read().flatMap(Self.deadRunLease(record:))
    }

    /// The lease a record's line names (the folder's, or etcd's `runs/NODE`)
    /// when that run has certainly ended, else nil.
    public static func deadRunLease(record text: String) -> Int64? {
        guard text.utf8.count <= byteLimit, let here = Self.machine(), let fields = Self.fields(text),
            let lease = fields["lease"].flatMap({ Int64($0) }), lease > 0,
            let pid = fields["pid"].flatMap({ Int32($0) }), pid > 0,
            fields["boot"] == here.boot, fields["pidns"] == here.pidNamespace
        else { return nil }
        return Self.processEnded(pid) ? lease : nil
    }

    /// Records `lease` as this run's (written whole to a temporary file and renamed, so a torn write is never read).
    public func write(lease: Int64) throws {
        guard let process = Self.thisRun() else {
            throw RunRecordError("this machine's boot id or PID namespace cannot be read from /proc")
        }
        let text = "lease \(lease) \(process)\n"
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw RunRecordError("cannot write \(path): \(error.localizedDescription)")
        }
    }

    /// This process as a record names it: `boot BOOT pidns NS pid PID` (nil when /proc does not say).
    public static func thisRun() -> String? {
        machine().map { "boot \($0.boot) pidns \($0.pidNamespace) pid \(getpid())" }
    }

    private func read() -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: Self.byteLimit + 1), data.count <= Self.byteLimit else { return nil }
        return String(data: data, encoding: .utf8)
    }

    /// `key value` pairs on one line; nil unless the line is exactly that.
    static func fields(_ text: String) -> [String: String]? {
        let words = text.trimmingCharacters(in: .newlines).split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard words.count == 8 else { return nil }
        var fields: [String: String] = [:]
        for index in stride(from: 0, to: words.count, by: 2) {
            guard !words[index + 1].isEmpty, fields.updateValue(words[index + 1], forKey: words[index]) == nil else { return nil }
        }
        return fields
    }

    /// This machine's boot id and this process's PID namespace, as the record names them.
    static func machine() -> (boot: String, pidNamespace: String)? {
        guard let boot = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines),
            !boot.isEmpty, !boot.contains(" ")
        else { return nil }
        var buffer = [CChar](repeating: 0, count: 128)
        let count = readlink("/proc/self/ns/pid", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let namespace = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard !namespace.contains(" ") else { return nil }
        return (boot, namespace)
    }

    /// Whether process `pid` of this PID namespace has certainly ended.
    static func processEnded(_ pid: Int32) -> Bool {
        if pid == getpid() { return true }
        if kill(pid, 0) != 0 { return errno == ESRCH }
        // It exists: dead only if it is a zombie not yet reaped (state Z or X after the name's closing parenthesis).
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(after: close)...].drop { $0 == " " }.first
        return state == "Z" || state == "X"
    }
}

public struct RunRecordError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
