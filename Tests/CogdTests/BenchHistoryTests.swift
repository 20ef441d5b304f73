import Foundation
import Testing

/// The repository's root folder (this file is Tests/CogdTests/…).
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The benchmark history (issue 27): docs/benchmark-history.csv is the
/// record; the table in docs/benchmarks.md and the chart are drawn from it
/// by deploy/bench-history.py and never drift from it.
@Suite("The benchmark history")
struct BenchHistoryTests {
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/bin/env"

    static func check(root: URL) throws -> (status: Int32, stderr: String) {
        let script = root.appendingPathComponent("deploy/bench-history.py").path
        let arguments = python.hasSuffix("env") ? ["python3", script, "--check"] : [script, "--check"]
        let run = try runProgram(URL(fileURLWithPath: python), arguments)
        return (run.status, run.stderr)
    }

    @Test func `the table and the chart are what the history file gives`() throws {
        let run = try Self.check(root: repositoryRoot)
        #expect(run.status == 0, "\(run.stderr)")
    }

    @Test func `a row added to the history and not rendered is named stale`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let copy = URL(fileURLWithPath: folder.path)
        for path in ["deploy/bench-history.py", "docs/benchmark-history.csv", "docs/benchmarks.md", "docs/images/benchmark-history.svg"] {
            let target = copy.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent(path), to: target)
        }
        let history = copy.appendingPathComponent("docs/benchmark-history.csv")
        let added = try String(contentsOf: history, encoding: .utf8) + "2026-12-06,abcdef0,quiet,log.batch-1,4000,4500,0.89\n"
        try added.write(to: history, atomically: true, encoding: .utf8)
        let run = try Self.check(root: copy)
        #expect(run.status == 1)
        #expect(
            run.stderr.contains("docs/benchmarks.md is not what docs/benchmark-history.csv gives; run deploy/bench-history.py")
                && run.stderr.contains("docs/images/benchmark-history.svg is not what"),
            "\(run.stderr)")
    }
}
