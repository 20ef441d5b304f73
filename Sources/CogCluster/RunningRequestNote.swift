import CogCodec
internal import CCrashMark
import CogLog
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The request whose op body the leader is running, noted in a small file
/// of the data folder (`running-request`) before the body runs and cleared
/// once the batch's bodies are done, so a body that traps (and kills the
/// process) is known at the next start and quarantined instead of run again
/// — a poison pill is never retried into a crash loop (`protocol/cogwire.md` §4).
///
/// The note is a store into the file mapped shared, with no `fsync`: the
/// page cache outlives the process, which is all a process crash needs (an
/// unacknowledged request needs nothing more after a power loss), and it
/// costs no system call per request.
///
/// A crash is told from an outside kill (`protocol/turnlog.md` §1a): the
/// handlers `arm` installs for the fatal signals a crash raises (SIGILL and
/// SIGTRAP for a Swift trap, SIGSEGV, SIGBUS, SIGFPE, SIGABRT) write the
/// signal's number into the crash mark before the process dies of it;
/// SIGKILL cannot be caught and leaves the mark 0. The next start
/// quarantines a marked note's request; an unmarked one's may run once
/// more, and is kept as the survivor: should it be noted again at another
/// unmarked death, it is quarantined then.
///
/// Layout (`protocol/turnlog.md` §1): 4 bytes big-endian length N, then N
/// bytes of deterministic CBOR `{"op": text, "seq": uint, "digest": bytes, "worker": text}`
/// (N = 0: no request is running) in 4,096 bytes; at 4,100 the crash mark
/// (one byte); at 4,104 the survivor, in the note's form (4 bytes of length,
/// then up to 4,096 bytes). The file is 8,204 bytes.
///
/// - Important: one writer, the leader's serving thread; the data folder's
///   writer lock makes it the only one.
final class RunningRequestNote {
    /// A request noted as running.
    struct Entry: Codable, Equatable {
        var op: String
        var seq: UInt64
        var worker: String
        /// The digest of its op and argument (`RequestDigest`).
        var digest: [UInt8]?

        var request: RequestID { RequestID(worker: worker, sequence: seq) }
    }

    static let fileName = "running-request"
    /// The most a note may hold (a worker name is at most 255 bytes; an op
    /// name longer than 1,024 bytes is cut, which only shortens what is logged).
    static let maximumBytes = 4_096

    private let descriptor: Int32
    private let path: String
    /// The file mapped shared: a note is a store into the page cache (no
    /// system call per request), which outlives the process.
    private let mapping: UnsafeMutableRawPointer
    /// Where the crash mark is: the number of the fatal signal that stopped
    /// the process while a note was set, or 0.
    static let markOffset = 4 + maximumBytes
    /// Where the survivor is: the request noted, unmarked, when an earlier
    /// process died (outside kill), in the note's form.
    static let survivorOffset = markOffset + 4
    private static let mappedBytes = survivorOffset + 4 + maximumBytes
    private var isClear = false

    /// What a previous process left noted.
    struct LeftOver: Equatable {
        var entry: Entry
        /// The fatal signal a handler marked it with (a crash), or nil (an
        /// outside kill, SIGKILL or power loss).
        var crashSignal: Int32?
    }

    init(dataFolder: String) throws(TurnStoreError) {
        path = (dataFolder as NSString).appendingPathComponent(RunningRequestNote.fileName)
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        var stats = stat()
        guard fstat(descriptor, &stats) == 0 else {
            let message = String(cString: strerror(errno))
            close(descriptor)
            throw TurnStoreError(code: .notWritable, message: "cannot read \(path): \(message)")
        }
        // Grown (never shrunk) to the mapped size: a short file reads as zeros past its end.
        if stats.st_size < RunningRequestNote.mappedBytes, ftruncate(descriptor, off_t(RunningRequestNote.mappedBytes)) != 0 {
            let message = String(cString: strerror(errno))
            close(descriptor)
            throw TurnStoreError(code: .notWritable, message: "cannot size \(path): \(message)")
        }
        guard let mapped = mmap(nil, RunningRequestNote.mappedBytes, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0),
            mapped != MAP_FAILED
        else {
            let message = String(cString: strerror(errno))
            close(descriptor)
            throw TurnStoreError(code: .notWritable, message: "cannot map \(path): \(message)")
        }
        mapping = mapped
    }

    deinit {
        cogd_crash_mark_disarm(descriptor)
        munmap(mapping, RunningRequestNote.mappedBytes)
        close(descriptor)
    }

    /// The request a previous process noted and never cleared (it stopped
    /// while that body ran), if any, with the signal that marked it a crash.
    /// A note that does not decode is reported as an error, never trusted.
    func leftOver() throws(TurnStoreError) -> LeftOver? {
        guard let entry = try entry(at: 0, what: "note") else { return nil }
        let mark = mapping.load(fromByteOffset: RunningRequestNote.markOffset, as: UInt8.self)
        return LeftOver(entry: entry, crashSignal: mark == 0 ? nil : Int32(mark))
    }

    /// The request noted, unmarked, when an earlier process died, if any.
    func survivor() throws(TurnStoreError) -> Entry? {
        try entry(at: RunningRequestNote.survivorOffset, what: "survivor")
    }

    private func entry(at offset: Int, what: String) throws(TurnStoreError) -> Entry? {
        let length = (0..<4).reduce(0) { $0 << 8 | Int(mapping.load(fromByteOffset: offset + $1, as: UInt8.self)) }
        guard length > 0 else { return nil }
        guard length <= RunningRequestNote.maximumBytes else {
            throw TurnStoreError(code: .corrupt, message: "\(path) claims \(length) bytes for its \(what) (at most \(RunningRequestNote.maximumBytes))")
        }
        let body = [UInt8](UnsafeRawBufferPointer(start: mapping + offset + 4, count: length))
        guard let entry = try? CBORDecoder().decode(Entry.self, from: body) else {
            throw TurnStoreError(code: .corrupt, message: "\(path) holds a \(what) that does not decode")
        }
        return entry
    }

    /// At start, once the left-over note is dealt with: keeps it as the
    /// survivor (`keep`) or forgets the survivor (`forget`), clears the note
    /// and the crash mark, and flushes the file (once per start, so a power
    /// loss does not give a survivor a third run).
    func settle(keepingNoteAsSurvivor keep: Bool, forgettingSurvivor forget: Bool) throws(TurnStoreError) {
        if keep {
            (mapping + RunningRequestNote.survivorOffset).copyMemory(from: mapping, byteCount: 4 + RunningRequestNote.maximumBytes)
        } else if forget {
            for index in 0..<4 { mapping.storeBytes(of: 0, toByteOffset: RunningRequestNote.survivorOffset + index, as: UInt8.self) }
        }
        setLength(0)
        mapping.storeBytes(of: 0, toByteOffset: RunningRequestNote.markOffset, as: UInt8.self)
        isClear = true
        guard msync(mapping, RunningRequestNote.mappedBytes, MS_SYNC) == 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot flush \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The alternate signal stack a serving thread gets, for the crash
    /// handlers (they, and the Swift runtime's backtracer after them, need
    /// far less).
    static let signalStackBytes = 256 << 10

    /// Gives the calling thread (the one that runs op bodies) an alternate
    /// signal stack, so that a body that overflows the thread's stack still
    /// has its crash marked (`turnlog.md` §1a); nil when the thread has one
    /// already or none could be mapped. Released on the same thread.
    static func giveThreadSignalStack() -> UnsafeMutableRawPointer? {
        cogd_crash_mark_alternate_stack(signalStackBytes)
    }

    /// Takes back the calling thread's stack from `giveThreadSignalStack`.
    static func releaseThreadSignalStack(_ stack: UnsafeMutableRawPointer?) {
        cogd_crash_mark_alternate_stack_release(stack, signalStackBytes)
    }

    /// Installs the fatal-signal handlers that mark a crash in this file
    /// (`cogd_crash_mark_arm`); disarmed when the note is released.
    func arm() throws(TurnStoreError) {
        let failed = cogd_crash_mark_arm(descriptor, Int64(RunningRequestNote.markOffset))
        guard failed == 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot install the crash handlers for \(path): \(String(cString: strerror(failed)))")
        }
    }

    /// Notes that `request`'s body (op `op`) runs now. The body goes in
    /// first and its length last, so a process killed in between leaves no
    /// note rather than half of one.
    func note(_ request: RequestID, op: String, digest: [UInt8]) throws(TurnStoreError) {
        // Deterministic CBOR written in place (keys in encoded order: "op",
        // "seq", "worker"): no allocation per request.
        setLength(0)
        var offset = 4
        func byte(_ value: UInt8) {
            mapping.storeBytes(of: value, toByteOffset: offset, as: UInt8.self)
            offset += 1
        }
        func head(_ major: UInt8, _ value: UInt64) {
            let type = major << 5
            let width: UInt64
            switch value {
            case 0..<24: byte(type | UInt8(value)); return
            case 24..<256: byte(type | 24); width = 1
            case 256..<65_536: byte(type | 25); width = 2
            case 65_536..<4_294_967_296: byte(type | 26); width = 4
            default: byte(type | 27); width = 8
            }
            // Big-endian, without an array literal of shifts (no allocation).
            var shift = (width - 1) * 8
            while true {
                byte(UInt8(truncatingIfNeeded: value >> shift))
                if shift == 0 { break }
                shift -= 8
            }
        }
        // The closures below take the offset by value: one that captured
        // `offset` itself would check exclusive access to it at run time.
        let mapping = self.mapping
        func text<S: Collection<UInt8>>(_ utf8: S) {
            head(3, UInt64(utf8.count))
            // In one copy where the bytes are contiguous (a native string's are).
            let at = offset
            if utf8.withContiguousStorageIfAvailable({ RunningRequestNote.copy(UnsafeRawBufferPointer($0), to: mapping + at) }) != nil {
                offset += utf8.count
            } else {
                for value in utf8 { byte(value) }
            }
        }
        // A worker name holds at most 255 bytes (checked before any op runs);
        // the op name is cut at 1,024 bytes, on a character boundary.
        guard request.worker.utf8.count <= 255 else {
            throw TurnStoreError(code: .notWritable, message: "a worker name over 255 bytes cannot be noted")
        }
        head(5, 4)
        text("op".utf8)
        if op.utf8.count <= 1_024 {
            text(op.utf8)
        } else {
            var cut = Array(op.utf8.prefix(1_024))
            while !cut.isEmpty, String(validating: cut, as: UTF8.self) == nil { cut.removeLast() }
            text(cut)
        }
        text("seq".utf8)
        head(0, request.sequence)
        text("digest".utf8)
        head(2, UInt64(digest.count))
        let at = offset
        digest.withUnsafeBytes { RunningRequestNote.copy($0, to: mapping + at) }
        offset += digest.count
        text("worker".utf8)
        text(request.worker.utf8)
        setLength(offset - 4)
        isClear = false
    }

    private static func copy(_ bytes: UnsafeRawBufferPointer, to destination: UnsafeMutableRawPointer) {
        if let base = bytes.baseAddress { destination.copyMemory(from: base, byteCount: bytes.count) }
    }

    /// Keeps a request another process's crash stopped: what a standby is
    /// told (`ship-crashed`, `protocol/ha.md` §9), noted as that leader's
    /// own note would be, marked with `signal`, and flushed. Should this
    /// node take the lead, it quarantines the request at start as if its
    /// own process had crashed running it.
    func record(_ request: RequestID, op: String, digest: [UInt8], signal: UInt8) throws(TurnStoreError) {
        try note(request, op: op, digest: digest)
        mapping.storeBytes(of: signal, toByteOffset: RunningRequestNote.markOffset, as: UInt8.self)
        guard msync(mapping, RunningRequestNote.mappedBytes, MS_SYNC) == 0 else {
            throw TurnStoreError(code: .notWritable, message: "cannot flush \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// No body runs now.
    func clear() throws(TurnStoreError) {
        guard !isClear else { return }
        setLength(0)
        isClear = true
    }

    private func setLength(_ length: Int) {
        for index in 0..<4 { mapping.storeBytes(of: UInt8(truncatingIfNeeded: length >> (24 - 8 * index)), toByteOffset: index, as: UInt8.self) }
    }
}

/// A request a previous leader process was running when it stopped,
/// answered `rejected("crashed-leader: …")` at the next start — or, when
/// no crash marked it, let run once more (`Leader.spared`).
public struct QuarantinedRequest: Sendable, Equatable {
    public let request: RequestID
    public let op: String
    /// The fatal signal that stopped the process while it ran (a crash), or
    /// nil: killed from outside (quarantined at its second such death).
    public let crashSignal: Int32?

    public init(request: RequestID, op: String, crashSignal: Int32? = nil) {
        self.request = request
        self.op = op
        self.crashSignal = crashSignal
    }

    /// The signal's name (`SIGILL`), or its number.
    public var signalName: String? {
        crashSignal.map { signal in
            switch signal {
            case SIGSEGV: "SIGSEGV"
            case SIGILL: "SIGILL"
            case SIGTRAP: "SIGTRAP"
            case SIGABRT: "SIGABRT"
            case SIGBUS: "SIGBUS"
            case SIGFPE: "SIGFPE"
            default: "signal \(signal)"
            }
        }
    }
}
