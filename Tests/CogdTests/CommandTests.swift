import Testing

@testable import CogLab
@testable import CogdCommandLine

@Suite("cogd command line")
struct CommandTests {
    @Test func `no arguments and --help show help`() throws {
        #expect(try Command.parse([]) == .help(topic: nil))
        #expect(try Command.parse(["--help"]) == .help(topic: nil))
        #expect(try Command.parseLab(["help", "bench"]) == .help(topic: "bench"))
        #expect(try Command.parseLab(["bench", "-h"]) == .help(topic: "bench"))
    }

    @Test func `bench graph parses its options in both spellings`() throws {
        let parsed = try LabParse.parseBench(["graph", "--json", "--runs", "3", "--only=steady,deep"])
        var expected = BenchOptions(suite: .graph)
        expected.json = true
        expected.runs = 3
        expected.only = ["steady", "deep"]
        #expect(parsed == expected)
        #expect(try LabParse.parseBench(["graph", "--runs=5"]) == BenchOptions(suite: .graph, runs: 5))
    }

    @Test func `bench cluster --curve needs a shape it compares with CURVE on`() throws {
        var expected = BenchOptions(suite: .cluster)
        expected.curve = true
        #expect(try LabParse.parseBench(["cluster", "--curve"]) == expected)
        expected.only = ["lag", "throughput-16"]
        #expect(try LabParse.parseBench(["cluster", "--only", "lag,throughput-16", "--curve"]) == expected)
        #expect(
            throws: Command.UsageError(
                message: "--curve compares the round-trip and throughput-16 shapes; add one of them to --only", subcommand: "bench")
        ) {
            try LabParse.parseBench(["cluster", "--curve", "--only", "lag,throughput-4"])
        }
        #expect(throws: Command.UsageError(message: "unknown option '--curve'", subcommand: "bench")) {
            try LabParse.parseBench(["log", "--curve"])
        }
    }

    @Test func `unknown subcommands, options, suites and shapes are usage errors`() {
        #expect(throws: Command.UsageError(message: "unknown subcommand 'lead'", subcommand: nil)) {
            try Command.parse(["lead"])
        }
        #expect(throws: Command.UsageError(message: "unknown option '--fast'", subcommand: "bench")) {
            try LabParse.parseBench(["graph", "--fast"])
        }
        #expect(throws: Command.UsageError(message: "unknown bench suite 'disk' (one of: graph, log, cluster, groups, retention, quick)", subcommand: "bench")) {
            try LabParse.parseBench(["disk"])
        }
        #expect(throws: Command.UsageError(message: "missing suite (one of: graph, log, cluster, groups, retention, quick)", subcommand: "bench")) {
            try LabParse.parseBench([])
        }
        #expect(throws: Command.UsageError(message: "--runs takes a whole number from 1 to 1000, not 'many'", subcommand: "bench")) {
            try LabParse.parseBench(["graph", "--runs", "many"])
        }
        #expect(throws: Command.UsageError(message: "--runs needs a value", subcommand: "bench")) {
            try LabParse.parseBench(["graph", "--runs"])
        }
        #expect(throws: Command.UsageError(message: "--json takes no value", subcommand: "bench")) {
            try LabParse.parseBench(["graph", "--json=yes"])
        }
        #expect(throws: Command.UsageError.self) {
            try LabParse.parseBench(["graph", "--only", "steady,spiral"])
        }
    }

    @Test func `tail and log parse their options`() throws {
        var tail = Command.TailOptions()
        tail.dataFolder = "d"
        tail.last = 5
        tail.follow = true
        tail.json = true
        tail.namePattern = "deposit*"
        #expect(try Command.parse(["tail", "--data", "d", "--last=5", "--follow", "--json", "--name", "deposit*"]) == .tail(tail))
        #expect(try Command.parse(["tail"]) == .tail(Command.TailOptions()))
        #expect(try Command.parse(["log", "verify", "--data", "x"]) == .logVerify(dataFolder: "x"))
        #expect(try Command.parse(["log", "stats", "--json"]) == .logStats(dataFolder: "cogd-data", json: true))
        #expect(try Command.parse(["log", "upgrade", "--data", "old"]) == .logUpgrade(dataFolder: "old"))
        #expect(throws: Command.UsageError(message: "unknown option '--json' for log upgrade", subcommand: "log")) {
            try Command.parse(["log", "upgrade", "--json"])
        }
        #expect(throws: Command.UsageError(message: "--from and --last cannot be used together", subcommand: "tail")) {
            try Command.parse(["tail", "--from", "3", "--last", "2"])
        }
        #expect(throws: Command.UsageError(message: "--from takes a revision (1 or more), not '0'", subcommand: "tail")) {
            try Command.parse(["tail", "--from", "0"])
        }
        #expect(throws: Command.UsageError(message: "unknown log action 'repair' (one of: verify, stats, upgrade, soak, compact, backup)", subcommand: "log")) {
            try Command.parse(["log", "repair"])
        }
        #expect(throws: Command.UsageError(message: "unknown option '--json' for log verify", subcommand: "log")) {
            try Command.parse(["log", "verify", "--json"])
        }
    }

    @Test func `leader, worker, call and status parse their options`() throws {
        var leader = Command.LeaderOptions()
        leader.dataFolder = "d"
        leader.requestsEndpoint = "tcp://127.0.0.1:1"
        #expect(try Command.parse(["leader", "--data", "d", "--requests=tcp://127.0.0.1:1"]) == .leader(leader))
        leader.acceptDataLoss = true
        #expect(try Command.parse(["leader", "--data", "d", "--requests=tcp://127.0.0.1:1", "--accept-data-loss"]) == .leader(leader))
        guard case .worker(let worker) = try Command.parse(["worker", "--name", "w1", "--leader", "tcp://127.0.0.1:9"]) else {
            Issue.record("worker did not parse")
            return
        }
        #expect(worker.name == "w1")
        #expect(worker.leaderEndpoint == "tcp://127.0.0.1:9")
        guard case .call(let call) = try Command.parse(["call", "ledger.open", "{}", "--request-id", "w#3"]) else {
            Issue.record("call did not parse")
            return
        }
        #expect(call.op == "ledger.open")
        #expect(call.requestID?.description == "w#3")
        #expect(!call.printsJSON)
        guard case .call(let json) = try Command.parse(["call", "ledger.open", "{}", "--json"]) else {
            Issue.record("call --json did not parse")
            return
        }
        #expect(json.printsJSON && json.json == "{}")
        #expect(throws: Command.UsageError.self) { try Command.parse(["call", "ledger.open", "{}", "--json=yes"]) }
        // Everything after `--` is an argument, a negative number too.
        guard case .call(let negative) = try Command.parse(["call", "--leader", "tcp://127.0.0.1:9", "--", "trails.tickHike", "-5"]) else {
            Issue.record("call with -- did not parse")
            return
        }
        #expect(negative.op == "trails.tickHike" && negative.json == "-5" && negative.leaderEndpoint == "tcp://127.0.0.1:9")
        #expect(try Command.parse(["status", "--json"]) == .status(leaderEndpoint: "tcp://127.0.0.1:5701", json: true, timeout: .seconds(5)))
        #expect(throws: Command.UsageError(message: "unknown rig 'bank' (one of: trails, ledger, ledger-greeter, ledger-peers, ledger-concierge, ledger-herald, replica)", subcommand: "leader")) {
            try Command.parse(["leader", "--rig", "bank"])
        }
        #expect(throws: Command.UsageError(message: "call takes an op name and a JSON argument", subcommand: "call")) {
            try Command.parse(["call", "ledger.open"])
        }
    }

    @Test func `worker --group refuses a C1 control character as the leader would, and takes format characters`() throws {
        #expect(throws: Command.UsageError(message: "--group takes a name of 1 to 255 bytes with no control characters, not 'g\u{9B}2J'", subcommand: "worker")) {
            try Command.parse(["worker", "--group", "g\u{9B}2J"])
        }
        guard case .worker(let worker) = try Command.parse(["worker", "--group", "g\u{200E}\u{2028}"]) else {
            Issue.record("worker did not parse")
            return
        }
        #expect(worker.group == "g\u{200E}\u{2028}")
    }

    @Test func `get and ops parse their options`() throws {
        var get = Command.GetOptions(name: "ledger.balance", key: #""alice""#, json: true)
        #expect(try Command.parse(["get", "ledger.balance", #""alice""#, "--json"]) == .get(get))
        get.key = nil
        get.json = false
        get.leaderEndpoint = "tcp://127.0.0.1:5701"
        get.timeout = .seconds(2)
        #expect(try Command.parse(["get", "--leader", "127.0.0.1:5701", "ledger.balance", "--timeout=2"]) == .get(get))
        // A key that starts with `-` goes after `--`.
        #expect(try Command.parse(["get", "--", "ledger.balance", "-5"]) == .get(Command.GetOptions(name: "ledger.balance", key: "-5")))
        // Keys from the environment only count with --leader.
        let environment = ["COGD_KEY": "a.key", "COGD_LEADER_KEY": "l.pub"]
        #expect(try Command.parse(["get", "x"], environment: environment) == .get(Command.GetOptions(name: "x")))
        guard case .get(let withKeys) = try Command.parse(["get", "x", "--leader", "127.0.0.1:1"], environment: environment) else {
            Issue.record("get --leader did not parse")
            return
        }
        #expect(withKeys.keys == Command.ClientKeyFiles(key: "a.key", leaderKey: "l.pub"))
        #expect(try Command.parse(["ops"]) == .ops(json: false))
        #expect(try Command.parse(["ops", "--json"]) == .ops(json: true))
        #expect(try Command.parse(["get", "--help"]) == .help(topic: "get"))
        #expect(try Command.parse(["ops", "-h"]) == .help(topic: "ops"))
        let refusals: [([String], String)] = [
            (["get"], "get takes the NAME of a durable source (and, for a box, a KEY as JSON)"),
            (["get", "a", "1", "2"], "unexpected argument '2' (get takes NAME and at most one KEY)"),
            (["get", "a", "alice"], "the key is not JSON (a text key is '\"alice\"'): invalid value at line 1, column 1: `alice`"),
            (["get", "a", "--data", "d", "--leader", "127.0.0.1:1"], "--data and --leader cannot be used together: read the data folder, or ask the leader"),
            (["get", "a", "--timeout", "1"], "--timeout goes with --leader (reading the data folder does not wait)"),
            (["get", "a", "--key", "k", "--leader-key", "l"], "--key and --leader-key go with --leader (reading the data folder needs no key)"),
            (["get", "a", "--follow"], "unknown option '--follow'"),
            (["ops", "ledger"], "unexpected argument 'ledger'"),
        ]
        for (arguments, message) in refusals {
            #expect(throws: Command.UsageError(message: message, subcommand: arguments[0])) { try Command.parse(arguments) }
        }
    }

    @Test func `drill parses its options`() throws {
        var options = Drill.Options()
        options.workers = 3
        options.seconds = 10
        options.seed = 42
        options.killLeaderEvery = 2.5
        #expect(try LabParse.parseDrill(["--workers", "3", "--seconds=10", "--seed", "42", "--kill-leader-every", "2.5"]) == options)
        #expect(try Command.parse(["leader", "--help"]) == .help(topic: "leader"))
        #expect(throws: Command.UsageError(message: "--seed takes a whole number, not 'x'", subcommand: "drill")) {
            try LabParse.parseDrill(["--seed", "x"])
        }
        #expect(Drill.Options().trapEvery == 6)
        var traps = Drill.Options()
        traps.trapEvery = 0
        #expect(try LabParse.parseDrill(["--trap-every", "0"]) == traps)
        traps.trapEvery = 2.5
        #expect(try LabParse.parseDrill(["--trap-every=2.5"]) == traps)
        #expect(throws: Command.UsageError(message: "--trap-every takes a number of seconds, 0 for none, not '-1'", subcommand: "drill")) {
            try LabParse.parseDrill(["--trap-every", "-1"])
        }
    }

    @Test func `leader --snapshot-part-bytes takes bytes from 1 KiB to 64 MiB`() throws {
        #expect(Command.LeaderOptions().snapshotPartBytes == 64 << 10)
        var leader = Command.LeaderOptions()
        leader.snapshotPartBytes = 65_536
        #expect(try Command.parse(["leader", "--snapshot-part-bytes", "65536"]) == .leader(leader))
        #expect(throws: Command.UsageError(message: "--snapshot-part-bytes takes bytes from 1024 to 67108864, not '512'", subcommand: "leader")) {
            try Command.parse(["leader", "--snapshot-part-bytes", "512"])
        }
    }

    @Test func `tail counts past a revision without trapping at the last one a file or a leader could claim`() {
        #expect(TailCommand.revision(after: 5) == 6)
        #expect(TailCommand.revision(after: .max) == .max)
    }

    @Test func `leader --requests and --turns must differ, however spelled`() throws {
        let message =
            "--requests and --turns must differ (both are tcp://127.0.0.1:5711): the leader listens on each, one for requests, one for its turn stream"
        #expect(throws: Command.UsageError(message: message, subcommand: "leader")) {
            try Command.parse(["leader", "--requests", "127.0.0.1:5711", "--turns", "tcp://127.0.0.1:5711"])
        }
        #expect(throws: Command.UsageError(message: message, subcommand: "leader")) {
            try Command.parse(["leader", "--turns", "127.0.0.1:5711", "--requests", "127.0.0.1:5711"])
        }
    }

    @Test func `leader --snapshot-deadline takes seconds`() throws {
        #expect(Command.LeaderOptions().snapshotDeadline == 30)
        var leader = Command.LeaderOptions()
        leader.snapshotDeadline = 0.5
        #expect(try Command.parse(["leader", "--snapshot-deadline", "0.5"]) == .leader(leader))
        for text in ["0", "-1", "x"] {
            #expect(throws: Command.UsageError(message: "--snapshot-deadline takes seconds (more than 0, at most 86400), not '\(text)'", subcommand: "leader")) {
                try Command.parse(["leader", "--snapshot-deadline", text])
            }
        }
    }
}
