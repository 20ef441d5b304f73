import Foundation
import Testing

@testable import CogdCommandLine

/// The environment variables the docs name: each works on every command
/// that takes the option it sets, an option wins over it, and one set but
/// not read by a command is said once (issue 30).
@Suite("COGD_* variables work where a user would set them")
struct EnvironmentTests {
    @Test func `COGD_DATA, COGD_REQUESTS and COGD_TURNS are the leader's defaults, and its options win`() throws {
        let environment = ["COGD_DATA": "/srv/cogd", "COGD_REQUESTS": "127.0.0.1:6701", "COGD_TURNS": "127.0.0.1:6702"]
        guard case .leader(let leader) = try Command.parse(["leader"], environment: environment) else {
            Issue.record("not a leader command")
            return
        }
        #expect(leader.dataFolder == "/srv/cogd")
        #expect(leader.requestsEndpoint == "tcp://127.0.0.1:6701")
        #expect(leader.turnsEndpoint == "tcp://127.0.0.1:6702")
        guard case .leader(let given) = try Command.parse(["leader", "--data", "here", "--turns", "127.0.0.1:7702"], environment: environment) else {
            Issue.record("not a leader command")
            return
        }
        #expect(given.dataFolder == "here" && given.turnsEndpoint == "tcp://127.0.0.1:7702" && given.requestsEndpoint == "tcp://127.0.0.1:6701")
        #expect(throws: Command.UsageError(message: "COGD_REQUESTS takes an endpoint like tcp://127.0.0.1:5701 or 127.0.0.1:5701, not 'tcp://': no port (HOST:PORT)", subcommand: "leader")) {
            try Command.parse(["leader"], environment: ["COGD_REQUESTS": "tcp://"])
        }
    }

    @Test func `COGD_DATA is every --data's default, and get asks COGD_LEADER unless given --data`() throws {
        let environment = ["COGD_DATA": "/srv/cogd"]
        guard case .tail(let tail) = try Command.parse(["tail"], environment: environment) else { throw CancellationError() }
        #expect(tail.dataFolder == "/srv/cogd")
        #expect(try Command.parse(["log", "verify"], environment: environment) == .logVerify(dataFolder: "/srv/cogd"))
        #expect(try Command.parse(["log", "stats", "--data", "x"], environment: environment) == .logStats(dataFolder: "x", json: false))
        guard case .get(let fromFolder) = try Command.parse(["get", "ledger.balance"], environment: environment) else { throw CancellationError() }
        #expect(fromFolder.dataFolder == "/srv/cogd" && fromFolder.leaderEndpoint == nil)

        let both = ["COGD_DATA": "/srv/cogd", "COGD_LEADER": "127.0.0.1:6701"]
        guard case .get(let fromLeader) = try Command.parse(["get", "ledger.balance"], environment: both) else { throw CancellationError() }
        #expect(fromLeader.leaderEndpoint == "tcp://127.0.0.1:6701")
        guard case .get(let told) = try Command.parse(["get", "ledger.balance", "--data", "mine"], environment: both) else { throw CancellationError() }
        #expect(told.dataFolder == "mine" && told.leaderEndpoint == nil)
    }

    @Test func `a COGD_ variable a subcommand does not read is said, naming who reads it`() {
        let environment = ["COGD_REQUESTS": "127.0.0.1:1", "COGD_LEADER": "127.0.0.1:1", "COGD_COLOUR": "1", "COGD": "./cogd", "HOME": "/root"]
        // COGD_COLOUR and COGD are no subcommand's (a script's own): not cogd's to judge.
        #expect(
            Command.unreadVariables(subcommand: "worker", environment: environment) == [
                "COGD_REQUESTS is set, but worker does not read it (read by: leader)"
            ])
        #expect(
            Command.unreadVariables(subcommand: "leader", environment: environment) == [
                "COGD_LEADER is set, but leader does not read it (read by: call, get, status, tail, worker)"
            ])
        #expect(Command.unreadVariables(subcommand: "get", environment: ["COGD_LEADER": "x", "COGD_DATA": "y"]).isEmpty)
    }

    @Test func `a leader started with only COGD_DATA, COGD_REQUESTS and COGD_TURNS binds where they say`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let environment = ["COGD_DATA": folder.path + "/data", "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns]
        let leader = try CogdProcess(executable: cogdExecutable(), ["leader"], environment: environment)
        defer { leader.stop() }
        let started = leader.waitForLine { $0.contains("cogd leader: data") }
        #expect(started?.contains("data \(folder.path)/data, requests \(ports.requests), turns \(ports.turns),") == true, "\(leader.lines)")
        let applied = try runCogd(["call", "ledger.open", #"{"account": "alice", "balance": 5}"#, "--leader", ports.requests])
        #expect(applied.status == 0 && applied.stdout.hasPrefix("applied revision 1"), "\(applied)")
        #expect(FileManager.default.fileExists(atPath: folder.path + "/data/data.mdb"))
        // A tool given a variable it does not read says so once, and still does its work.
        let status = try runCogd(["status", "--leader", ports.requests], environment: ["COGD_TURNS": ports.turns])
        #expect(status.status == 0, "\(status)")
        #expect(status.stderr == "note: COGD_TURNS is set, but status does not read it (read by: leader)\n", "\(status.stderr)")
        // tail reads a data folder; one that is missing with COGD_LEADER set says how to follow that leader.
        let tail = try runCogd(["tail", "--data", folder.path + "/none"], environment: ["COGD_LEADER": ports.requests])
        #expect(tail.status == 1, "\(tail)")
        #expect(
            tail.stderr.hasSuffix(
                "(COGD_LEADER is set: tail reads a data folder unless given --connect TURNS-ENDPOINT, the leader's turn stream, "
                    + "which it follows, catching up from COGD_LEADER with --from or --since)\n"), "\(tail.stderr)")
        // Said once, not again by a process it starts: sim restarts itself (deterministic hashing).
        let sim = try runCogdLab(["sim", "--seed", "1", "--steps", "100"], environment: ["COGD_DATA": folder.path])
        #expect(sim.status == 0, "\(sim)")
        #expect(sim.stderr == "note: COGD_DATA is set, but sim does not read it (read by: get, leader, log, tail)\n", "\(sim.stderr)")
        // A help page or the version runs nothing: it says nothing of the variables.
        for arguments in [["status", "--help"], ["help", "status"], ["version"]] {
            let quiet = try runCogd(arguments, environment: ["COGD_TURNS": ports.turns, "COGD_DATA": folder.path])
            #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(arguments): \(quiet.stderr)")
        }
    }
}
