import Foundation
import Testing

@Suite("cogd tail and log", .timeLimit(.minutes(1)))
struct LogCommandTests {
    @Test func `tail prints the last turns with their writes, as text and as JSON`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "12", "--batch", "4"]).status == 0)
        let text = try runCogd(["tail", "--data", folder.path, "--last", "2"])
        #expect(text.status == 0)
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 6)
        #expect(lines[0].hasPrefix("#11  "))
        #expect(lines[0].hasSuffix("  soak.set(_:)  (system, epoch 1)"))
        #expect(lines[1] == "    soak.value[11] = 11")
        #expect(lines[2] == "    soak.last = 11")
        let json = try runCogd(["tail", "--data", folder.path, "--from", "12", "--json"])
        #expect(json.stdout.hasPrefix("{\"revision\": 12, \"epoch\": 1, \"time\": \""))
        #expect(json.stdout.contains("\"writes\": [{\"name\": \"soak.value\", \"key\": 12, \"value\": 12, \"released\": false}"))
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(object?["name"] as? String == "soak.set(_:)")
        let filtered = try runCogd(["tail", "--data", folder.path, "--name", "nothing*"])
        #expect(filtered.stdout.isEmpty)
    }

    @Test func `log verify and stats report a sound log`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        _ = try runCogd(["log", "soak", "--data", folder.path, "--count", "30", "--batch", "10"])
        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0)
        #expect(verify.stdout.hasPrefix("ok: 30 turns, revisions 1…30 contiguous, every record decodes"))
        let stats = try runCogd(["log", "stats", "--data", folder.path, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
        #expect(object?["lastRevision"] as? Int == 30)
        #expect(object?["turns"] as? Int == 30)
        #expect(object?["stateEntries"] as? Int == 31)
        #expect(object?["unindexedFrom"] is NSNull, "the embedded writer leaves no reply unindexed")
    }

    @Test func `a missing data folder and bad options get clear errors`() throws {
        let missing = try runCogd(["tail", "--data", "/nonexistent/cogd-data"])
        #expect(missing.status == 1)
        #expect(missing.stderr == "Error: data folder /nonexistent/cogd-data does not exist\n")
        let usage = try runCogd(["tail", "--bogus"])
        #expect(usage.status == 64)
        #expect(usage.stderr.hasPrefix("Error: unknown option '--bogus'\nUsage: cogd tail"))
        #expect(usage.stderr.hasSuffix("See 'cogd tail --help'\n"))
    }
}

@Suite("cogd tail --follow", .timeLimit(.minutes(1)))
struct TailFollowTests {
    @Test func `follow prints turns as they commit, beside the running writer`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        _ = try runCogd(["log", "soak", "--data", folder.path, "--count", "3"])
        let tail = try CogdProcess(["tail", "--data", folder.path, "--follow", "--json"])
        defer { tail.stop() }
        // Only once tail has printed what is already there does the writer add more.
        #expect(tail.waitForLine { $0.hasPrefix("{\"revision\": 3,") } != nil)
        let writer = Process()
        writer.executableURL = cogdExecutable()
        writer.arguments = ["log", "soak", "--data", folder.path, "--count", "20", "--batch", "5"]
        writer.standardOutput = FileHandle.nullDevice
        try writer.run()
        waitForExit(writer)
        #expect(tail.waitForLine { $0.hasPrefix("{\"revision\": 23,") } != nil)
        let revisions = tail.lines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["revision"] as? Int
        }
        #expect(revisions == Array(1...23))
    }
}
