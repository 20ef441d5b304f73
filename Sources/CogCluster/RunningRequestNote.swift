import CogLog
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The request whose op body the leader is running, noted in a small file
/// of the data folder (`running-request`) before the body runs and cleared
/// once the batch's bodies are done, so a body that traps (and kills the
/// process) is known at the next start and quarantined instead of run again
/// — a poison pill is never retried into a crash loop (DESIGN §5).
///
/// The note is a plain `pwrite` with no `fsync`: the page cache outlives the
/// process, which is all a process crash needs (an unacknowledged request
/// needs nothing more after a power loss).
///
/// Layout (`protocol/turnlog.md` §1): 4 bytes big-endian length N, then N
/// bytes of deterministic CBOR `{"op": text, "seq": uint, "worker": text}`;
/// N = 0 means no request is running.
///
/// - Important: one writer, the leader's serving thread; the data folder's
///   writer lock makes it the only one.
final class RunningRequestNote {
    /// A request noted as running.
    struct Entry: Codable, Equatable {
        var op: String
        var seq: UInt64
        var worker: String

        var request: RequestID { RequestID(worker: worker, sequence: seq) }
    }

    static let fileName = "running-request"
    /// The most a note may hold (a worker name is at most 255 bytes; an op
    /// name longer than this is cut, which only shortens what is logged).
    static let maximumBytes = 4_096

    private let descriptor: Int32
    private let path: String
    private var isClear = false

    init(dataFolder: String) throws(TurnStoreError) {
        path = (dataFolder as NSString).appendingPathComponent(RunningRequestNote.fileName)
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(descriptor) }

    /// The request a previous process noted and never cleared (it stopped
    /// while that body ran), if any. A note that does not decode is reported
    /// as an error, never trusted.
    func leftOver() throws(TurnStoreError) -> Entry? {
        var header = [UInt8](repeating: 0, count: 4)
        let got = header.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 4, 0) }
        guard got == 4 else { return nil }  // a new or empty file
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length > 0 else { return nil }
        guard length <= RunningRequestNote.maximumBytes else {
            throw TurnStoreError(code: .corrupt, message: "\(path) claims \(length) bytes (at most \(RunningRequestNote.maximumBytes))")
        }
        var body = [UInt8](repeating: 0, count: length)
        let read = body.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, length, 4) }
        guard read == length, let entry = try? CBORDecoder().decode(Entry.self, from: body) else {
            throw TurnStoreError(code: .corrupt, message: "\(path) holds a note that does not decode")
        }
        return entry
    }

    /// Notes that `request`'s body (op `op`) runs now.
    func note(_ request: RequestID, op: String) throws(TurnStoreError) {
        let shortOp = op.utf8.count > 1_024 ? String(decoding: op.utf8.prefix(1_024), as: UTF8.self) : op
        let body = (try? CBOREncoder().encode(Entry(op: shortOp, seq: request.sequence, worker: request.worker))) ?? []
        let length = UInt32(body.count)
        let bytes = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
        try write(bytes)
        isClear = false
    }

    /// No body runs now.
    func clear() throws(TurnStoreError) {
        guard !isClear else { return }
        try write([0, 0, 0, 0])
        isClear = true
    }

    private func write(_ bytes: [UInt8]) throws(TurnStoreError) {
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else {
            throw TurnStoreError(code: .notWritable, message: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}

/// A request a previous leader process was running when it stopped,
/// answered `rejected("crashed-leader: …")` at the next start.
public struct QuarantinedRequest: Sendable, Equatable {
    public let request: RequestID
    public let op: String
}
