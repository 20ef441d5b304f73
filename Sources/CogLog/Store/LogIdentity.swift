import CogCodec
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What a data folder remembers about its log outside `data.mdb`
/// (`cogd.identity`, `protocol/turnlog.md` §1): which log it holds (the id
/// also kept in `meta.log-id`) and how far it got, so a writer that finds
/// `data.mdb` emptied, replaced or behind refuses to restart history.
///
/// The file is 99 bytes of fixed-width text, rewritten in place:
///
/// ```
/// cogd-log 5f0c…(32 hex digits)
/// epoch 00000000000000000007
/// revision 00000000000000001234
/// ```
///
/// - Important: written only after the commit it describes returned, and
///   without fsync (a plain `pwrite`, cheap on the commit path): the page
///   cache outlives the process, and a file lost to a power cut can only
///   be behind `data.mdb`, never ahead of it.
struct LogIdentity: Equatable {
    static let fileName = "cogd.identity"
    var logID: [UInt8]
    var epoch: UInt64
    var revision: UInt64

    /// Where the revision's 20 digits lie in the file.
    static let revisionOffset = 78

    var text: String {
        "cogd-log \(LogIdentity.hex(logID))\nepoch \(LogIdentity.digits(epoch))\nrevision \(LogIdentity.digits(revision))\n"
    }

    static func digits(_ value: UInt64) -> String {
        let text = String(value)
        return String(repeating: "0", count: 20 - text.count) + text
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// A new random log id (16 bytes).
    static func newLogID() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Reads the folder's identity: nil when there is none; throws when the
    /// file is there but is not one.
    static func read(directory: String) throws(TurnStoreError) -> LogIdentity? {
        let path = directory + "/" + fileName
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        guard lines.count == 3, lines[0].hasPrefix("cogd-log "), lines[1].hasPrefix("epoch "), lines[2].hasPrefix("revision "),
            let epoch = UInt64(lines[1].dropFirst(6)), let revision = UInt64(lines[2].dropFirst(9))
        else {
            throw TurnStoreError(
                code: .dataLoss,
                message: "data folder \(directory): \(fileName) is damaged (\(data.count) bytes); it must say which log the folder holds")
        }
        let hexID = Array(lines[0].dropFirst(9).utf8)
        guard hexID.count == 32 else {
            throw TurnStoreError(code: .dataLoss, message: "data folder \(directory): \(fileName) is damaged (its log id is not 32 hex digits)")
        }
        var logID: [UInt8] = []
        for index in stride(from: 0, to: 32, by: 2) {
            guard let byte = UInt8(String(decoding: hexID[index..<(index + 2)], as: UTF8.self), radix: 16) else {
                throw TurnStoreError(code: .dataLoss, message: "data folder \(directory): \(fileName) is damaged (its log id is not hex)")
            }
            logID.append(byte)
        }
        return LogIdentity(logID: logID, epoch: epoch, revision: revision)
    }
}

/// The open identity file of a writer: rewritten whole at open, its
/// revision updated after each commit.
final class IdentityFile {
    private var descriptor: Int32
    let path: String

    init(directory: String, identity: LogIdentity) throws(TurnStoreError) {
        path = directory + "/" + LogIdentity.fileName
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        let bytes = Array(identity.text.utf8)
        guard pwrite(descriptor, bytes, bytes.count, 0) == bytes.count, ftruncate(descriptor, off_t(bytes.count)) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw TurnStoreError(code: .notWritable, message: "cannot write \(path): \(reason)")
        }
    }

    /// Why the last update failed, if it did.
    private(set) var failure: String?

    /// Records that the log reached `revision` (one small pwrite, no fsync).
    /// It runs after the commit returned, so it never fails the commit: a
    /// failed update leaves the file behind `data.mdb`, which is safe (a
    /// later loss of the newest turns may then go unnoticed), and is kept
    /// in `failure`.
    func record(revision: UInt64) {
        let digits = Array(LogIdentity.digits(revision).utf8)
        guard descriptor >= 0 else { return }
        if pwrite(descriptor, digits, digits.count, off_t(LogIdentity.revisionOffset)) != digits.count {
            failure = "cannot write \(path): \(String(cString: strerror(errno)))"
        }
    }

    /// Records `revision` and flushes the file: for a log taken back to it
    /// (`TurnStore.closeTakingBack`), whose file must never be ahead of `data.mdb`.
    func recordDurably(revision: UInt64) throws(TurnStoreError) {
        failure = nil
        record(revision: revision)
        if failure == nil, fdatasync(descriptor) != 0 { failure = "cannot flush \(path): \(String(cString: strerror(errno)))" }
        if let failure { throw TurnStoreError(code: .notWritable, message: failure) }
    }

    func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }

    deinit { close() }
}
