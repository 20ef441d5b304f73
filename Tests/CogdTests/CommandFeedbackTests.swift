import Foundation
import Testing

@testable import CogdCommandLine

@Suite("cogd endpoints, timeouts, patterns and JSON arguments parse")
struct CommandFeedbackParseTests {
    @Test func `host:port means tcp://host:port wherever an endpoint is taken`() throws {
        guard case .call(let call) = try Command.parse(["call", "ledger.open", "{}", "--leader", "127.0.0.1:9"]) else {
            Issue.record("call did not parse")
            return
        }
        #expect(call.leaderEndpoint == "tcp://127.0.0.1:9")
        #expect(try Command.parse(["status", "--leader=localhost:5701"]) == .status(leaderEndpoint: "tcp://localhost:5701", json: false, timeout: .seconds(5)))
        guard case .worker(let worker) = try Command.parse(["worker", "--leader", "[::1]:5701"]) else {
            Issue.record("worker did not parse")
            return
        }
        #expect(worker.leaderEndpoint == "tcp://[::1]:5701")
        guard case .leader(let leader) = try Command.parse(["leader", "--requests", "127.0.0.1:7001", "--turns", "ipc:///tmp/t"]) else {
            Issue.record("leader did not parse")
            return
        }
        #expect(leader.requestsEndpoint == "tcp://127.0.0.1:7001" && leader.turnsEndpoint == "ipc:///tmp/t")
        guard case .tail(let tail) = try Command.parse(["tail", "--connect", "127.0.0.1:5702"]) else {
            Issue.record("tail did not parse")
            return
        }
        #expect(tail.connect == "tcp://127.0.0.1:5702")
        // Given with a scheme, an endpoint is kept as it is.
        guard case .call(let full) = try Command.parse(["call", "x", "1", "--leader", "tcp://127.0.0.1:9"]) else { return }
        #expect(full.leaderEndpoint == "tcp://127.0.0.1:9")
    }

    @Test func `a malformed endpoint is a usage error that says what is wrong`() {
        let cases: [(String, String)] = [
            ("localhost", "no port (HOST:PORT)"),
            ("localhost:http", "the port must be a number from 1 to 65535"),
            ("localhost:70000", "the port must be a number from 1 to 65535"),
            (":5701", "no host before the port"),
            ("udp://127.0.0.1:5701", "unknown transport 'udp://' (one of: tcp://, ipc://, inproc://)"),
            ("tcp://::1:5701", "an IPv6 address goes in brackets: [::1]:5701"),
            ("", "it is empty"),
        ]
        for (text, why) in cases {
            #expect(
                throws: Command.UsageError(
                    message: "--leader takes an endpoint like tcp://127.0.0.1:5701 or 127.0.0.1:5701, not '\(text)': \(why)", subcommand: "call")
            ) {
                try Command.parse(["call", "x", "1", "--leader", text])
            }
        }
        #expect(throws: Command.UsageError.self) { try Command.parse(["leader", "--turns", "nowhere"]) }
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--connect", "nowhere"]) }
    }

    @Test func `COGD_LEADER sets the default --leader and --leader beats it`() throws {
        let environment = ["COGD_LEADER": "127.0.0.1:6001"]
        #expect(
            try Command.parse(["status"], environment: environment)
                == .status(leaderEndpoint: "tcp://127.0.0.1:6001", json: false, timeout: .seconds(5), leaderSource: "COGD_LEADER"))
        #expect(
            try Command.parse(["status", "--leader", "tcp://127.0.0.1:7"], environment: environment)
                == .status(leaderEndpoint: "tcp://127.0.0.1:7", json: false, timeout: .seconds(5)))
        guard case .worker(let worker) = try Command.parse(["worker"], environment: environment) else { return }
        #expect(worker.leaderEndpoint == "tcp://127.0.0.1:6001")
        #expect(
            throws: Command.UsageError(
                message: "COGD_LEADER takes an endpoint like tcp://127.0.0.1:5701 or 127.0.0.1:5701, not 'here': no port (HOST:PORT)",
                subcommand: "status")
        ) {
            try Command.parse(["status"], environment: ["COGD_LEADER": "here"])
        }
    }

    @Test func `call and status take --timeout in seconds`() throws {
        #expect(try Command.parse(["status", "--timeout", "0.5"]) == .status(leaderEndpoint: "tcp://127.0.0.1:5701", json: false, timeout: .milliseconds(500)))
        guard case .call(let call) = try Command.parse(["call", "x", "1", "--timeout=12"]) else { return }
        #expect(call.timeout == .seconds(12))
        for text in ["0", "-1", "soon"] {
            #expect(throws: Command.UsageError(message: "--timeout takes seconds (more than 0, at most 86400), not '\(text)'", subcommand: "call")) {
                try Command.parse(["call", "x", "1", "--timeout", text])
            }
        }
        #expect(Command.secondsText(.seconds(5)) == "5" && Command.secondsText(.milliseconds(500)) == "0.5")
    }

    @Test func `a malformed --name pattern is a usage error`() throws {
        #expect(throws: Command.UsageError(message: "--name takes a shell pattern like 'ledger.*' or '*deposit*', not 'ledger.[ab': a '[' is never closed by ']'", subcommand: "tail")) {
            try Command.parse(["tail", "--name", "ledger.[ab"])
        }
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--name", ""]) }
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--name", "a\\"]) }
        for good in ["ledger.*", "[]]x", "[!a]*", "a\\[b", "*deposit*"] {
            guard case .tail(let tail) = try Command.parse(["tail", "--name", good]) else { return }
            #expect(tail.namePattern == good)
        }
    }

    @Test func `a call argument that is not JSON is a usage error saying where`() {
        #expect(throws: Command.UsageError(message: "the argument is not JSON: invalid value at line 1, column 7: `x}`", subcommand: "call")) {
            try Command.parse(["call", "ledger.open", #"{"a": x}"#])
        }
        #expect(throws: Command.UsageError(message: "the argument is not JSON: invalid value at line 2, column 4: `, 3]`", subcommand: "call")) {
            try Command.parse(["call", "ledger.open", "[1,\n 2,, 3]"])
        }
        #expect(CallArgument.problem(in: #"{"a": 1"#)?.hasPrefix("it ends at line 1, column 8 before the value is complete") == true)
        #expect(CallArgument.problem(in: "5") == nil && CallArgument.problem(in: #""milk""#) == nil)
    }

    @Test func `an integer no argument can hold is refused where it is, not sent on as a float`() throws {
        let range = "(-9223372036854775808 to 18446744073709551615)"
        #expect(throws: Command.UsageError(
            message: "the integer 99999999999999999999 at line 1, column 1 is beyond what an argument holds \(range)", subcommand: "call")
        ) { try Command.parse(["call", "trails.tickHike", "99999999999999999999"]) }
        // Inside a string it is text; the one after it, negative, is found.
        #expect(
            CallArgument.oversizeInteger(in: #"{"a": "99999999999999999999", "b": [1, -99999999999999999999]}"#)
                == "the integer -99999999999999999999 at line 1, column 40 is beyond what an argument holds \(range)")
        // The ends of the range, floats and exponents pass (a float is a float).
        for fine in ["18446744073709551615", "-9223372036854775808", "1.5e30", "[0.5, -1]", #""\"99999999999999999999""#] {
            #expect(CallArgument.oversizeInteger(in: fine) == nil, "\(fine)")
        }
    }

    @Test func `version --help shows help instead of pointing at itself`() throws {
        #expect(try Command.parse(["version", "--help"]) == .help(topic: "version"))
    }
}

@Suite("cogd call, status and tail say what happened")
struct CommandFeedbackTests {
    @Test func `nothing at the endpoint: call and status exit 4 naming it within --timeout`() throws {
        let port = freePort()
        let started = ContinuousClock.now
        let call = try runCogd(["call", "ledger.open", "{}", "--leader", "127.0.0.1:\(port)", "--timeout", "0.5"], timeout: .seconds(20))
        #expect(call.status == 4, "\(call)")
        #expect(
            call.stderr == "Error: no answer from the leader at tcp://127.0.0.1:\(port) within 0.5 s: is `cogd leader` running there? "
                + "(a slow leader: --timeout SECONDS)\n", "\(call.stderr)")
        let status = try runCogd(["status", "--timeout", "0.5"], timeout: .seconds(20), environment: ["COGD_LEADER": "127.0.0.1:\(port)"])
        #expect(status.status == 4 && status.stderr.hasPrefix("Error: no answer from the leader at tcp://127.0.0.1:\(port) within 0.5 s"), "\(status)")
        #expect(ContinuousClock.now - started < .seconds(10), "both gave up after about half a second")
        let malformed = try runCogd(["status", "--leader", "127.0.0.1"], timeout: .seconds(20))
        #expect(malformed.status == 64 && malformed.stderr.contains("no port (HOST:PORT)"), "\(malformed)")
    }

    @Test func `call exits 0 applied, 0 unchanged, 3 refused, 3 rejected, and tail past the end says where the log ends`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        // host:port, without tcp://
        let plain = ports.requests.replacingOccurrences(of: "tcp://", with: "")
        let applied = try runCogd(["call", "ledger.open", #"{"account": "alice", "balance": 10}"#, "--leader", plain])
        #expect(applied.status == 0 && applied.stdout.hasPrefix("applied revision 1 (request "), "\(applied)")
        let unchanged = try runCogd(["call", "ledger.open", #"{"account": "alice", "balance": 99}"#, "--leader", plain])
        #expect(unchanged.status == 0 && unchanged.stdout.hasPrefix("unchanged: the op wrote nothing, so no new revision (request "), "\(unchanged)")
        let refused = try runCogd(["call", "ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 1000}"#, "--leader", plain])
        #expect(refused.status == 3 && refused.stdout.isEmpty, "\(refused)")
        #expect(refused.stderr.hasPrefix("refused unknown-account: no open account named bob (request "), "\(refused.stderr)")
        let rejected = try runCogd(["call", "ledger.nothing", "{}", "--leader", plain])
        #expect(rejected.status == 3 && rejected.stdout.isEmpty, "\(rejected)")
        #expect(rejected.stderr.hasPrefix("rejected: unknown-op: no op named `ledger.nothing`"), "\(rejected.stderr)")
        let status = try runCogd(["status", "--leader", plain, "--timeout", "10"])
        #expect(status.status == 0 && status.stdout.contains("revision  1"), "\(status)")
        #expect(status.stdout.contains("scopes    0 open instances\n"), "\(status)")

        let past = try runCogd(["tail", "--data", folder.path, "--from", "5"])
        #expect(past.status == 1 && past.stdout.isEmpty, "\(past)")
        #expect(past.stderr == "Error: nothing from revision 5: the log ends at revision 1 (--from 1 to 1, or --follow to wait)\n", "\(past.stderr)")
        let inside = try runCogd(["tail", "--data", folder.path, "--from", "1"])
        #expect(inside.status == 0 && inside.stdout.contains("ledger.open"), "\(inside)")
        let badPattern = try runCogd(["tail", "--data", folder.path, "--name", "ledger.[ab"])
        #expect(badPattern.status == 64 && badPattern.stderr.contains("a '[' is never closed by ']'"), "\(badPattern)")
    }

    @Test func `each help page lists its options with defaults and an example`() throws {
        let pages: [(String, [String])] = [
            ("call", ["--leader", "--timeout", "--request-id", "COGD_LEADER", "Exit status", "  3   rejected", "  4   no answer"]),
            ("status", ["--leader", "--timeout", "--json", "COGD_LEADER"]),
            ("tail", ["--data", "--from", "--last", "--follow", "--json", "--name", "--connect"]),
            ("worker", ["--leader", "--name", "--rig"]),
        ]
        for (subcommand, options) in pages {
            let help = try runCogd([subcommand, "--help"])
            #expect(help.status == 0, "\(subcommand): \(help)")
            for option in options { #expect(help.stdout.contains(option), "\(subcommand) --help names \(option): \(help.stdout)") }
            #expect(help.stdout.contains("default"), "\(subcommand) --help gives defaults")
            #expect(help.stdout.contains("Example"), "\(subcommand) --help gives an example")
        }
        let version = try runCogd(["version", "--help"])
        #expect(version.status == 0 && version.stdout.hasPrefix("Usage: cogd version"), "\(version)")
        #expect(!version.stdout.contains("--help'") && version.stderr.isEmpty)
    }
}
