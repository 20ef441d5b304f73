import Foundation
import Testing

/// The clients in `clients/`, written from `protocol/` alone, run against the
/// built `cogd`: an independent worker and an adversarial peer. Each starts
/// and stops its own leader, prints `ok …` / `FAIL …` per check and ends with
/// `N passed, N failed`; checks the leader fails today are listed in the
/// script's `KNOWN_GAPS` and do not fail it.
@Suite("External clients (protocol/ from outside)", .serialized)
struct ExternalClientTests {
    /// Debian's python3 (where python3-zmq, python3-cbor2 and python3-lmdb
    /// install), else the first python3 on PATH.
    static func python() -> String {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
    }

    static func run(script: String) throws -> (status: Int32, output: String) {
        let repository = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try runBounded(
            URL(fileURLWithPath: "/usr/bin/env"),
            [python(), repository.appendingPathComponent("clients/\(script)").path, cogdExecutable().path], timeout: .seconds(150))
    }

    static func expectClean(_ script: String) throws {
        let (status, output) = try run(script: script)
        let lines = output.split(separator: "\n").map(String.init)
        let summary = lines.last ?? ""
        let failures = lines.filter { $0.hasPrefix("FAIL") }
        #expect(status == 0, "\(script) exited \(status); failures:\n\(failures.joined(separator: "\n"))\n\(output.suffix(2000))")
        #expect(summary.hasSuffix(" passed, 0 failed"), "\(script) summary: \(summary)")
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("the independent client (worker from protocol/) passes")
    func independent() throws { try Self.expectClean("independent.py") }

    @Test("the adversarial client leaves the leader serving and the log verified")
    func adversarial() throws { try Self.expectClean("adversarial.py") }
}
