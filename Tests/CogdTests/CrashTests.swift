import CogLog
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Reads lines from a child's standard output, bounded by a deadline.
private final class LineReader {
    private let handle: FileHandle
    private var buffer = Data()

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next line, or nil at end of stream.
    func nextLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0a) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }
}

@Suite("Crash safety", .timeLimit(.minutes(10)))
struct CrashTests {
    @Test(arguments: [1, 7, 50])
    func `a writer killed with SIGKILL loses no reported turn and leaves a sound log`(batch: Int) throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        var generator = SystemRandomNumberGenerator()
        var reported: UInt64 = 0
        for round in 0..<3 {
            let process = Process()
            process.executableURL = cogdExecutable()
            process.arguments = ["log", "soak", "--data", folder.path, "--batch", String(batch)]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            let reader = LineReader(out.fileHandleForReading)
            let killAfter = Int.random(in: 5...60, using: &generator)
            var lines = 0
            while lines < killAfter, let line = reader.nextLine() {
                guard line.hasPrefix("committed "), let revision = UInt64(line.dropFirst("committed ".count)) else {
                    Issue.record("unexpected output in round \(round): \(line)")
                    break
                }
                #expect(revision > reported)
                reported = revision
                lines += 1
            }
            kill(process.processIdentifier, SIGKILL)
            waitForExit(process)
            #expect(process.terminationReason == .uncaughtSignal)

            let store = try TurnStore(directory: folder.path, mode: .reader)
            let report = try store.verify()
            #expect(report.problem == nil)
            #expect(report.lastRevision >= reported, "every reported revision is present after the kill")
            let records = try store.records(from: reported, limit: 1)
            #expect(records.first?.revision == reported)
            store.close()
        }
        #expect(reported > 0)
    }
}
