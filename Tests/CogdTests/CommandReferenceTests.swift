import Foundation
import Testing

/// The repository's root folder (this file is Tests/CogdTests/…).
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// docs/commands.md is the programs' own help, generated from it: the
/// reference and `--help` never differ (issue 30).
@Suite("The command reference is the programs' own help")
struct CommandReferenceTests {
    @Test func `docs/commands.md is what deploy/gen-commands-doc.sh writes from the built cogd and cogd-lab`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let generated = folder.path + "/commands.md"
        let script = repositoryRoot.appendingPathComponent("deploy/gen-commands-doc.sh").path
        let run = try runProgram(
            URL(fileURLWithPath: "/bin/bash"), [script, cogdExecutable().deletingLastPathComponent().path, generated])
        try #require(run.status == 0, "\(run)")
        let expected = try String(contentsOfFile: generated, encoding: .utf8)
        let committed = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/commands.md"), encoding: .utf8)
        // Name the first page that differs, so the fix is plain.
        let differing = zip(expected.components(separatedBy: "\n### "), committed.components(separatedBy: "\n### "))
            .first { $0.0 != $0.1 }.map { String($0.0.prefix(80)) }
        #expect(
            committed == expected,
            "docs/commands.md differs from the programs' help (first at: \(differing ?? "the end")): run deploy/gen-commands-doc.sh")
        // Every runtime subcommand and the lab's are in it.
        for page in ["cogd leader", "cogd worker", "cogd tail", "cogd call", "cogd status", "cogd get", "cogd ops", "cogd-lab drill", "cogd-lab sim", "cogd-lab bench"] {
            #expect(committed.contains("\n### \(page)\n"), "\(page)")
        }
    }
}
