import Cog
import Foundation
import Testing

@testable import CogdCommandLine

/// `cogd worker --set KEY=VALUE` (repeated) and `--settings FILE`: the app's
/// settings a rig's mechanisms read from `CogRig.Host.settings`; checked
/// before anything connects, their keys (never their values) in the
/// worker's `started` line, its `/metrics` and `cogd status`.
@Suite("A worker takes the app's settings", .serialized, .timeLimit(.minutes(10)))
struct WorkerSettingsTests {
    func worker(_ arguments: [String]) throws -> Command.WorkerOptions? {
        guard case .worker(let options) = try Command.parse(["worker"] + arguments) else { return nil }
        return options
    }

    @Test func `--set KEY=VALUE, repeated, gives the settings; a bad key, a long value and a duplicate are usage errors`() throws {
        #expect(try worker(["--set", "hold-seconds=5", "--set=mail.from=a@b"])?.settings.values == ["hold-seconds": "5", "mail.from": "a@b"])
        #expect(try worker([])?.settings.isEmpty == true)
        #expect(
            throws: Command.UsageError(
                message: "--set: setting key 'hold seconds' is not allowed: a key is 1 to 64 of A-Z a-z 0-9 _ . -", subcommand: "worker")
        ) { try worker(["--set", "hold seconds=5"]) }
        #expect(
            throws: Command.UsageError(message: "--set: setting 'k' is 4097 bytes long; a value is at most 4096 bytes", subcommand: "worker")
        ) { try worker(["--set", "k=" + String(repeating: "v", count: 4_097)]) }
        #expect(throws: Command.UsageError(message: "--set: setting 'k' is given twice", subcommand: "worker")) {
            try worker(["--set", "k=1", "--set", "k=2"])
        }
        #expect(throws: Command.UsageError(message: "--set: 'hold-seconds' is not KEY=VALUE", subcommand: "worker")) {
            try worker(["--set", "hold-seconds"])
        }
        #expect(throws: Command.UsageError(message: "give --settings once (one settings file)", subcommand: "worker")) {
            try worker(["--settings", "a", "--settings", "b"])
        }
        #expect(throws: Command.UsageError(message: "unknown option '--set'", subcommand: "leader")) {
            try Command.parse(["leader", "--set", "k=1"])
        }
    }

    @Test func `--settings FILE is read at start-up, --set winning; a missing or bad file is a usage error naming it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let file = folder.path + "/box-office.settings"
        try "# box office\nhold-seconds = 600\nvenue=hall\n".write(toFile: file, atomically: true, encoding: .utf8)
        let options = try #require(try worker(["--settings", file, "--set", "hold-seconds=5"]))
        #expect(try Command.workerSettings(options).values == ["hold-seconds": "5", "venue": "hall"])
        let missing = try #require(try worker(["--settings", folder.path + "/none"]))
        #expect(
            throws: Command.UsageError(
                message: "--settings \(folder.path)/none: cannot read the file: No such file or directory", subcommand: "worker")
        ) { try Command.workerSettings(missing) }
        let directory = try #require(try worker(["--settings", folder.path]))
        #expect(
            throws: Command.UsageError(message: "--settings \(folder.path): cannot read the file: Is a directory", subcommand: "worker")
        ) { try Command.workerSettings(directory) }
        let bad = folder.path + "/bad.settings"
        try "hold-seconds=5\nhold-seconds=6\n".write(toFile: bad, atomically: true, encoding: .utf8)
        #expect(
            throws: Command.UsageError(
                message: "--settings \(bad): line 2: setting 'hold-seconds' is given twice (first on line 1)", subcommand: "worker")
        ) { try Command.workerSettings(try #require(try worker(["--settings", bad]))) }
        let large = folder.path + "/large.settings"
        try String(repeating: "#", count: 70_000).write(toFile: large, atomically: true, encoding: .utf8)
        #expect(
            throws: Command.UsageError(
                message: "--settings \(large): the file is 65537 bytes; a settings file is at most 65536 bytes", subcommand: "worker")
        ) { try Command.workerSettings(try #require(try worker(["--settings", large]))) }
    }

    @Test func `a worker started with --set and --settings names the settings' keys, not their values, when it starts`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let file = folder.path + "/box-office.settings"
        try "venue=secret-hall\n".write(toFile: file, atomically: true, encoding: .utf8)
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path + "/data")
        defer { leader.stop() }
        let metrics = freePort()
        let worker = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger", "--set", "hold-seconds=5", "--settings", file,
            "--metrics", "127.0.0.1:\(metrics)",
        ])
        defer { worker.stop() }
        let started = worker.waitForLine { $0.contains(", rig ledger, group ledger") }
        #expect(started?.hasSuffix("rig ledger, group ledger, settings hold-seconds, venue") == true, "\(worker.lines)")
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(worker.lines)")
        #expect(!worker.lines.contains { $0.contains("secret-hall") }, "\(worker.lines)")
        // The keys go to the leader in the hello: `cogd status` lists them under the worker (never the values).
        let status = try runCogd(["status", "--leader", ports.requests])
        #expect(status.stdout.contains("  w1: applied 0, lag 0, heard ") && status.stdout.contains("\n    settings: hold-seconds, venue\n"), "\(status.stdout)")
        let json = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((object?["workers"] as? [[String: Any]])?.first?["settings"] as? [String] == ["hold-seconds", "venue"], "\(json.stdout)")
        #expect(!status.stdout.contains("secret-hall") && !json.stdout.contains("secret-hall"))
        let scrape = try MetricsEndpointTests.get(metrics, "/metrics").body
        #expect(scrape.contains("cogd_worker_setting_info{key=\"hold-seconds\"} 1\n"), "\(scrape)")
        #expect(scrape.contains("cogd_worker_setting_info{key=\"venue\"} 1\n"), "\(scrape)")
        #expect(!scrape.contains("secret-hall"), "\(scrape)")
        worker.stop()

        let plain = try CogdProcess(["worker", "--leader", ports.requests, "--name", "w2", "--rig", "ledger", "--log-format", "json"])
        defer { plain.stop() }
        let line = plain.waitForLine { logEvent($0)?["event"] as? String == "started" }.flatMap(logEvent)
        #expect(line?["settings"] as? String == "", "\(plain.lines)")
        #expect((line?["message"] as? String)?.hasSuffix("group ledger") == true, "\(plain.lines)")

        let missing = try runCogd(["worker", "--leader", ports.requests, "--name", "w3", "--settings", folder.path + "/none"], timeout: .seconds(20))
        #expect(missing.status == 64, "\(missing)")
        #expect(
            missing.stderr.hasPrefix("Error: --settings \(folder.path)/none: cannot read the file: No such file or directory\n"),
            "\(missing.stderr)")
        #expect(missing.stderr.contains("See 'cogd worker --help'"), "\(missing.stderr)")
    }
}
