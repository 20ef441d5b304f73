import CogCodec
import CogLog
import Foundation
import Testing

@Suite("cogd tail and log", .timeLimit(.minutes(10)))
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

    @Test func `tail stops at --to and after --count, also when following`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "12", "--batch", "4"]).status == 0)
        func revisions(_ arguments: [String]) throws -> [String] {
            let result = try runCogd(["tail", "--data", folder.path] + arguments, timeout: .seconds(20))
            #expect(result.status == 0, "\(arguments): \(result)")
            return result.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }.map { String($0.prefix { $0 != " " }) }
        }
        #expect(try revisions(["--from", "3", "--to", "5"]) == ["#3", "#4", "#5"])
        #expect(try revisions(["--from", "10", "--count", "2"]) == ["#10", "#11"])
        // Following ends once the count (or --to) is reached, instead of waiting for more.
        #expect(try revisions(["--from", "11", "--follow", "--count", "2"]) == ["#11", "#12"])
        #expect(try revisions(["--from", "12", "--follow", "--to", "12"]) == ["#12"])
        let clash = try runCogd(["tail", "--data", folder.path, "--from", "5", "--to", "3"])
        #expect(clash.status == 64)
        #expect(clash.stderr.hasPrefix("Error: --to 3 is before --from 5"))
        let both = try runCogd(["tail", "--data", folder.path, "--last", "3", "--count", "2"])
        #expect(both.status == 64)
        #expect(both.stderr.hasPrefix("Error: --count and --last cannot be used together"))
    }

    @Test func `tail and verify show a nil value as a value and only a discard as released`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        do {
            let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
            try store.append([TurnDraft(name: "load()", writes: [TurnWrite(name: "trails.loaded", key: nil, value: try CBOREncoder().encode(5))])])
            try store.append([TurnDraft(name: "closeScreen()", writes: [TurnWrite(name: "trails.loaded", key: nil, value: [0xf6])])])
            try store.append([TurnDraft(name: "discard", writes: [TurnWrite(name: "trails.loaded", key: nil, value: nil)])])
        }
        let text = try runCogd(["tail", "--data", folder.path])
        #expect(text.status == 0)
        let writes = text.stdout.split(separator: "\n").filter { $0.hasPrefix("    ") }
        #expect(writes == ["    trails.loaded = 5", "    trails.loaded = null", "    trails.loaded = released"])
        let json = try runCogd(["tail", "--data", folder.path, "--json"])
        let lines = json.stdout.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[1].contains(#""writes": [{"name": "trails.loaded", "key": null, "value": null, "released": false}]"#))
        #expect(lines[2].contains(#""writes": [{"name": "trails.loaded", "key": null, "value": null, "released": true}]"#))
        #expect(json.stdout.components(separatedBy: #""released": true"#).count == 2, "released only for the discard")
        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0, "\(verify.stderr)")
    }

    @Test func `a schema 2 folder is refused naming cogd log upgrade, which converts it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "6", "--batch", "3"]).status == 0)
        try TurnStore.rewriteAsOlderSchema(directory: folder.path, schema: 2)
        let hint = "run `cogd log upgrade --data \(folder.path)` to rewrite it"
        for arguments in [["tail", "--data", folder.path], ["log", "verify", "--data", folder.path], ["log", "soak", "--data", folder.path, "--count", "1"]] {
            let refused = try runCogd(arguments)
            #expect(refused.status == 1, "\(arguments)")
            #expect(refused.stderr.contains("has schema version 2; this cogd reads schemas 4 and 5 only"), "\(arguments): \(refused.stderr)")
            #expect(refused.stderr.contains(hint), "\(arguments)")
        }
        let upgrade = try runCogd(["log", "upgrade", "--data", folder.path])
        #expect(upgrade.status == 0, "\(upgrade.stderr)")
        #expect(upgrade.stdout == "ok: upgraded \(folder.path) from schema 2 to 4: 6 records rewritten with checksums and state digests, 0 null writes recorded as releases, 0 state entries they released removed\n")
        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stdout.hasPrefix("ok: 6 turns"))
        #expect(try runCogd(["log", "upgrade", "--data", folder.path]).stdout == "ok: \(folder.path) already has schema 4; nothing to do\n")
    }

    @Test func `log verify and stats report a sound log`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        _ = try runCogd(["log", "soak", "--data", folder.path, "--count", "30", "--batch", "10"])
        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0)
        #expect(verify.stdout.hasPrefix("ok: 30 turns, revisions 1…30 contiguous, every record decodes and carries the state digest of the replay"))
        let digest = try TurnStore(directory: folder.path, mode: .reader).currentStateDigest()
        #expect(verify.stdout.contains("state table (31 entries, digest \(digest)) equals the replay of the log"), "\(verify.stdout)")
        let stats = try runCogd(["log", "stats", "--data", folder.path, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
        #expect(object?["lastRevision"] as? Int == 30)
        #expect(object?["turns"] as? Int == 30)
        #expect(object?["stateEntries"] as? Int == 31)
        #expect(object?["unindexedFrom"] is NSNull, "the embedded writer leaves no reply unindexed")
    }

    @Test func `tail --to without --from prints the last turns up to it, not nothing`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        _ = try runCogd(["log", "soak", "--data", folder.path, "--count", "30", "--batch", "10"])
        func revisions(_ arguments: [String]) throws -> [String] {
            let result = try runCogd(["tail", "--data", folder.path] + arguments)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }.map { String($0.prefix { $0 != " " }) }
        }
        #expect(try revisions(["--to", "12", "--last", "3"]) == ["#10", "#11", "#12"])
        #expect(try revisions(["--to", "3"]) == ["#1", "#2", "#3"])
        #expect(try revisions(["--to", "25"]) == (16...25).map { "#\($0)" })
    }

    @Test func `log stats counts in words: one entry, one turn`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        _ = try runCogd(["log", "soak", "--data", folder.path, "--count", "1", "--batch", "1"])
        let stats = try runCogd(["log", "stats", "--data", folder.path])
        #expect(stats.status == 0, "\(stats.stderr)")
        let lines = stats.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("revisions    1…1 (1 turn)"), "\(stats.stdout)")
        #expect(lines.contains { $0.hasPrefix("state        ") && $0.hasSuffix(" entries") || $0 == "state        1 entry" }, "\(stats.stdout)")
        #expect(!stats.stdout.contains(" 1 entries") && !stats.stdout.contains(" 1 turns"), "\(stats.stdout)")
    }

    @Test func `a missing data folder and bad options get clear errors`() throws {
        let missing = try runCogd(["tail", "--data", "/nonexistent/cogd-data"])
        #expect(missing.status == 1)
        #expect(missing.stderr == "Error: data folder /nonexistent/cogd-data does not exist (--data names the folder a cogd leader keeps its log in)\n")
        let usage = try runCogd(["tail", "--bogus"])
        #expect(usage.status == 64)
        #expect(usage.stderr.hasPrefix("Error: unknown option '--bogus'\nUsage: cogd tail"))
        // A near miss of one of the subcommand's options is named; one that belongs to another action is not guessed at.
        let typo = try runCogd(["status", "--leadr", "127.0.0.1:1"])
        #expect(typo.status == 64 && typo.stderr.hasPrefix("Error: unknown option '--leadr' (did you mean --leader?)\nUsage: cogd status"), "\(typo)")
        let retention = try runCogd(["leader", "--retian-turns", "5"])
        #expect(retention.stderr.hasPrefix("Error: unknown option '--retian-turns' (did you mean --retain-turns?)\n"), "\(retention)")
        let version = try runCogd(["version"])
        #expect(version.stdout.range(of: #"^cogd \S+\nLMDB \d+\.\d+\.\d+\nZeroMQ \d+\.\d+\.\d+\n$"#, options: .regularExpression) != nil, "\(version)")
        let elsewhere = try runCogdLab(["bench", "retention", "--curve"])
        #expect(elsewhere.status == 64 && elsewhere.stderr.hasPrefix("Error: unknown option '--curve'\n"), "\(elsewhere)")
        #expect(usage.stderr.hasSuffix("See 'cogd tail --help'\n"))
    }
}

@Suite("cogd tail --follow", .timeLimit(.minutes(10)))
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
