import CogProtocol
import CogWire
import Foundation
import Testing

@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

/// The repository's root (this file is Tests/CogdTests/…).
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// Set once, read from another thread.
private final class StopSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// What a new user following the README tripped over (issue 17): parsed forms.
@Suite("cogd walkthrough: usage errors say the right thing")
struct WalkthroughParseTests {
    @Test func `an endpoint error shows the port the option takes: turns for --connect and --turns, requests for the rest`() {
        #expect(
            throws: Command.UsageError(
                message: "--connect takes an endpoint like tcp://127.0.0.1:5702 or 127.0.0.1:5702, not '5702': no port (HOST:PORT)",
                subcommand: "tail")
        ) { try Command.parse(["tail", "--connect", "5702"]) }
        #expect(
            throws: Command.UsageError(
                message: "--turns takes an endpoint like tcp://127.0.0.1:5702 or 127.0.0.1:5702, not '::1:5702': "
                    + "an IPv6 address goes in brackets: [::1]:5702",
                subcommand: "leader")
        ) { try Command.parse(["leader", "--turns", "::1:5702"]) }
        #expect(
            throws: Command.UsageError(
                message: "--leader takes an endpoint like tcp://127.0.0.1:5701 or 127.0.0.1:5701, not '5701': no port (HOST:PORT)",
                subcommand: "call")
        ) { try Command.parse(["call", "ledger.open", "{}", "--leader", "5701"]) }
    }

    @Test func `call refuses --request-id with --name, naming both`() {
        #expect(
            throws: Command.UsageError(
                message: "give --request-id or --name, not both: --request-id W#N names the request whole, --name a name for one the call makes",
                subcommand: "call")
        ) { try Command.parse(["call", "ledger.open", "{}", "--request-id", "me#1", "--name", "x"]) }
        // Each alone still parses.
        #expect(throws: Never.self) { try Command.parse(["call", "ledger.open", "{}", "--request-id", "me#1"]) }
        #expect(throws: Never.self) { try Command.parse(["call", "ledger.open", "{}", "--name", "x"]) }
    }

    @Test func `a bare word given as call's JSON is told how a text is written`() {
        #expect(
            throws: Command.UsageError(
                message: "the argument is not JSON (a text is written '\"bob\"' in JSON): invalid value at line 1, column 1: `bob`",
                subcommand: "call")
        ) { try Command.parse(["call", "ledger.close", "bob"]) }
        // Not a bare word: no hint about texts.
        #expect(CallArgument.refusal(of: #"{"a": x}"#) == "the argument is not JSON: invalid value at line 1, column 7: `x}`")
        #expect(CallArgument.refusal(of: #""bob""#) == nil)
    }

    @Test func `log without an action lists soak too; tail --connect refuses --follow`() {
        #expect(throws: Command.UsageError(message: "missing action (verify, stats, upgrade, soak, compact or backup)", subcommand: "log")) {
            try Command.parse(["log"])
        }
        #expect(
            throws: Command.UsageError(
                message: "--follow reads the data folder; --connect always follows (until --to, --count or Ctrl-C)", subcommand: "tail")
        ) { try Command.parse(["tail", "--connect", "127.0.0.1:5702", "--follow"]) }
    }

    @Test func `help pages: exit statuses for worker, tail and log; call's examples; status's --json list unbroken`() throws {
        for subcommand in ["worker", "tail", "log"] {
            let page = try runCogd([subcommand, "--help"])
            #expect(page.status == 0 && page.stdout.contains("\nExit status:\n"), "\(subcommand): \(page.stdout)")
            #expect(page.stdout.contains("\n  64  a usage error\n") || page.stdout.contains("\n  64  a usage error ("), "\(subcommand): \(page.stdout)")
        }
        let tail = try runCogd(["tail", "--help"]).stdout
        #expect(tail.contains("\n  1   a failure: ") && tail.contains("\n  4   with --connect: nothing answers within --timeout"), "\(tail)")
        let call = try runCogd(["call", "--help"]).stdout
        #expect(call.contains("--request-id console#7") && call.contains("--name ops-console"), "\(call)")
        let status = try runCogd(["status", "--help"]).stdout
        let lines = status.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines.contains("tool?, settings?}], errors {code: count}, openScopeInstances, placement?,"), "\(status)")
        #expect(!lines.contains { $0.hasSuffix("{code:") || $0 == "count}," }, "\(status)")
        #expect(status.contains("turns each may be below 1"), "\(status)")
    }
}

/// The same, against a real leader on loopback.
@Suite("cogd walkthrough: against a leader", .serialized, .timeLimit(.minutes(10)))
struct WalkthroughClusterTests {
    @Test func `a tool given the other endpoint says so the same way every time, exit 4, without blaming keys`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let wrong =
            "Error: \(ports.turns) is a leader's turn stream, not its requests endpoint: --leader takes the requests endpoint "
            + "(tcp://127.0.0.1:5701 by default, the leader's --requests), not the turn stream\n"
        for _ in 0..<3 {
            for arguments in [["status"], ["call", "ledger.open", "{}"], ["get", "ledger.balance"]] {
                let result = try runCogd(arguments + ["--leader", ports.turns, "--timeout", "2"], timeout: .seconds(30))
                #expect(result.status == 4 && result.stderr == wrong && result.stdout.isEmpty, "\(arguments): \(result)")
            }
        }
        // A worker says so the same way, after its start line, and exits 4 (it does not wait for a leader there).
        for _ in 0..<3 {
            let worker = try runCogd(["worker", "--name", "wy", "--leader", ports.turns], timeout: .seconds(30))
            #expect(worker.status == 4 && worker.stderr.hasSuffix("\n" + wrong) && worker.stdout.isEmpty, "\(worker)")
            #expect(!worker.stderr.contains(" WARN "), "\(worker)")
        }
        // status --watch says it once and exits, as status does (--count 3: it was said at every redraw).
        for extra in [[], ["--json"]] {
            let watch = try runCogd(
                ["status", "--leader", ports.turns, "--watch", "0.2", "--count", "3", "--timeout", "2"] + extra, timeout: .seconds(60))
            #expect(watch.status == 4 && watch.stderr == wrong && watch.stdout.isEmpty, "\(extra): \(watch)")
        }
        let tail = try runCogd(["tail", "--connect", ports.requests, "--timeout", "2"], timeout: .seconds(30))
        #expect(tail.status == 4, "\(tail)")
        #expect(
            tail.stderr
                == "Error: \(ports.requests) is a leader's requests endpoint, not its turn stream: --connect takes the turn stream "
                + "(tcp://127.0.0.1:5702 by default, the leader's --turns), not the requests endpoint\n",
            "\(tail)")
    }

    @Test func `call --name numbers its requests from the name's last answered sequence, across leader restarts; a retry is deduplicated`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path, options: ["--log-level", "debug"])
        func call(_ json: String, _ extra: [String] = ["--name", "ranger"]) throws -> (status: Int32, stdout: String, stderr: String) {
            try runCogd(["call", "ledger.open", json, "--leader", ports.requests] + extra)
        }
        let first = try call(#"{"account": "alice", "balance": 5}"#)
        #expect(first.status == 0 && first.stdout == "applied revision 1 (request ranger#1)\n", "\(first)")
        let second = try call(#"{"account": "bob", "balance": 6}"#)
        #expect(second.status == 0 && second.stdout == "applied revision 2 (request ranger#2)\n", "\(second)")
        // The first call again, by its id: answered from the first run, not applied twice.
        let retry = try call(#"{"account": "alice", "balance": 5}"#, ["--request-id", "ranger#1"])
        #expect(retry.status == 0 && retry.stdout == "answered from an earlier request: applied at revision 1 (request ranger#1)\n", "\(retry)")
        // --json says so in a field; a rejection (a first answer: earlier false) gives its code and detail apart, exit 3.
        let retryJSON = try call(#"{"account": "alice", "balance": 5}"#, ["--request-id", "ranger#1", "--json"])
        #expect(retryJSON.status == 0 && retryJSON.stdout == #"{"earlier":true,"outcome":"applied","request":"ranger#1","revision":1}"# + "\n", "\(retryJSON)")
        let rejectedJSON = try runCogd(["call", "ledger.nosuch", "{}", "--leader", ports.requests, "--request-id", "json#2", "--json"])
        #expect(
            rejectedJSON.status == 3
                && rejectedJSON.stdout
                    == #"{"code":"unknown-op","detail":"no op named `ledger.nosuch` is registered","earlier":false,"outcome":"rejected","request":"json#2"}"#
                    + "\n", "\(rejectedJSON)")
        // Each call said hello as a tool under the name and goodbye as it closed.
        #expect(leader.waitForLine { $0.contains(" DEBUG cogd leader: tool ranger left (said goodbye;") } != nil, "\(leader.lines)")
        leader.interrupt()
        #expect(leader.waitForLine { $0.contains("cogd leader: stopped at revision 2") } != nil, "\(leader.lines)")
        leader.stop()
        leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let afterRestart = try call(#"{"account": "carol", "balance": 7}"#)
        #expect(afterRestart.status == 0 && afterRestart.stdout == "applied revision 3 (request ranger#3)\n", "\(afterRestart)")
        // A name a live worker holds is not shared: the call says why at once (one hello, one refusal), not after retrying.
        let worker = try ports.startWorker("w1", rig: "replica", group: "replicas")
        defer { worker.stop() }
        let refusedBefore = try ports.errorCounts()["name-in-use"] ?? 0
        let taken = try call(#"{"account": "dave", "balance": 8}"#, ["--name", "w1"])
        #expect(taken.status == 1 && taken.stdout.isEmpty, "\(taken)")
        #expect(taken.stderr.hasPrefix("Error: the leader refused the request: name-in-use: another process is connected as worker w1 "), "\(taken)")
        #expect(
            taken.stderr.hasSuffix(" (a running worker holds that name: give the call a name of its own, or leave out --name)\n"), "\(taken)")
        #expect(try ports.errorCounts()["name-in-use"] == refusedBefore + 1, "one hello refused, none retried")
        #expect(try runCogd(["tail", "--data", folder.path, "--from", "4"]).stderr.contains("the log ends at revision 3"), "nothing ran as w1")
        // A name another tool holds (another call in flight) is let go soon: that one the call waits for.
        let otherCall = try RawPeer(endpoint: ports.requests)
        guard case .welcome? = try otherCall.exchange(.hello(worker: "ranger", lastRevision: 0, tool: true)) else {
            Issue.record("the raw tool was not welcomed")
            return
        }
        let waiting = try CogdProcess(["call", "ledger.open", #"{"account": "erin", "balance": 9}"#, "--leader", ports.requests, "--name", "ranger", "--timeout", "20"])
        defer { waiting.stop() }
        #expect(waitUntil { ((try? ports.errorCounts())?["name-in-use"] ?? 0) >= refusedBefore + 3 }, "its hello said again while the tool holds the name")
        try otherCall.send([WireMessage.goodbye(worker: "ranger").encoded()])
        #expect(waiting.waitForLine { $0.hasPrefix("applied") } == "applied revision 4 (request ranger#4)", "\(waiting.lines)")
        waitForExit(waiting.process, timeout: .seconds(30))
        #expect(!waiting.process.isRunning && waiting.process.terminationStatus == 0, "\(waiting.lines)")
    }

    @Test func `an unknown op is rejected with where ops are listed; status labels commits that hold no turn`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let unknown = try runCogd(["call", "ledger.nosuch", "{}", "--leader", ports.requests])
        #expect(unknown.status == 3, "\(unknown)")
        #expect(
            unknown.stderr.hasPrefix("rejected: unknown-op: no op named `ledger.nosuch` is registered (request ")
                && unknown.stderr.hasSuffix(") (`cogd ops` lists the ops this cogd serves)\n"), "\(unknown.stderr)")
        // The trap op is the lab's (`cogd-lab leader --trap-op`): to cogd it is an op like any unknown one.
        let trap = try runCogd(["call", "ledger.trap", #""x""#, "--leader", ports.requests])
        #expect(trap.status == 3, "\(trap)")
        #expect(trap.stderr.hasSuffix(") (`cogd ops` lists the ops this cogd serves)\n"), "\(trap.stderr)")
        // Rejected (twice above) and unchanged answers are committed without a turn: 1 turn in 4 commits.
        #expect(try ports.call("ledger.open", #"{"account": "a", "balance": 1}"#).hasPrefix("applied revision 1"))
        #expect(try ports.call("ledger.open", #"{"account": "a", "balance": 1}"#).hasPrefix("unchanged"))
        let status = try runCogd(["status", "--leader", ports.requests])
        let commits = status.stdout.split(separator: "\n").first { $0.hasPrefix("commits   ") }.map(String.init) ?? ""
        #expect(commits.hasPrefix("commits   4 (latest 4: "), "\(status.stdout)")
        #expect(commits.hasSuffix(", 0.2 turns each; some hold no turn, only answers of ops that changed nothing)"), "\(commits)")
    }

    @Test func `a second leader on taken ports or a locked folder names the option and the next step, leaving no folder behind`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let other = TemporaryFolder()
        defer { other.cleanUp() }
        let sameRequests = try runCogd(["leader", "--data", other.path, "--requests", ports.requests, "--turns", "127.0.0.1:\(freePort())"])
        #expect(sameRequests.status == 1, "\(sameRequests)")
        #expect(
            sameRequests.stderr
                == "Error: cannot listen on \(ports.requests) (--requests): something already listens there, likely another leader "
                + "(`cogd status --leader \(ports.requests)` asks it); stop it, or give --requests another endpoint "
                + "(the data folder \(other.path) this start had made was removed)\n",
            "\(sameRequests.stderr)")
        #expect(!FileManager.default.fileExists(atPath: other.path), "the folder it made is gone")
        let sameTurns = try runCogd(["leader", "--data", other.path, "--requests", "127.0.0.1:\(freePort())", "--turns", ports.turns])
        #expect(sameTurns.status == 1, "\(sameTurns)")
        #expect(
            sameTurns.stderr.hasPrefix("Error: cannot listen on \(ports.turns) (--turns): something already listens there, likely another leader; "),
            "\(sameTurns.stderr)")
        #expect(!FileManager.default.fileExists(atPath: other.path), "the folder it made is gone")
        // A folder that existed is left as it was.
        try FileManager.default.createDirectory(atPath: other.path, withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: other.path + "/mine.txt"))
        let existing = try runCogd(["leader", "--data", other.path, "--requests", ports.requests, "--turns", "127.0.0.1:\(freePort())"])
        #expect(existing.status == 1 && !existing.stderr.contains("was removed"), "\(existing)")
        #expect(FileManager.default.fileExists(atPath: other.path + "/mine.txt"))

        let locked = try runCogd(["leader", "--data", folder.path, "--requests", "127.0.0.1:\(freePort())", "--turns", "127.0.0.1:\(freePort())"])
        #expect(locked.status == 1, "\(locked)")
        #expect(
            locked.stderr.hasPrefix("Error: data folder \(folder.path) is locked by another writer (pid ")
                && locked.stderr.hasSuffix("): a leader serves from this folder; stop it first, or use another --data\n"), "\(locked.stderr)")
    }

    @Test func `tail --connect says on stderr that it follows; tail --name with no match says so and exits 0`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        for account in ["x", "y"] {
            #expect(try ports.call("ledger.open", #"{"account": "\#(account)", "balance": 1}"#).hasPrefix("applied revision"))
        }
        // Turns keep coming until one reaches the subscriber (it joins asynchronously); bounded.
        let stop = StopSignal()
        let caller = Thread {
            var account = 0
            while !stop.isSet && account < 200 {
                _ = try? runCogd(["call", "ledger.open", #"{"account": "a\#(account)", "balance": 1}"#, "--leader", ports.requests])
                account += 1
                usleep(100_000)
            }
        }
        caller.start()
        let tail = try runCogd(["tail", "--connect", ports.turns, "--count", "1"], timeout: .seconds(60))
        stop.set()
        #expect(tail.status == 0, "\(tail)")
        #expect(tail.stderr == "cogd tail: following \(ports.turns) (Ctrl-C stops)\n", "\(tail)")
        #expect(tail.stdout.hasPrefix("#") && tail.stdout.contains("  ledger.open  "), "stdout holds the turn only: \(tail.stdout)")
        _ = waitUntil { caller.isFinished }

        let none = try runCogd(["tail", "--data", folder.path, "--name", "nomatch*"])
        let turns = try runCogd(["tail", "--data", folder.path, "--last", "100000", "--json"]).stdout.split(separator: "\n").count
        #expect(none.status == 0 && none.stdout.isEmpty, "\(none)")
        #expect(none.stderr == "cogd tail: no turn matches --name 'nomatch*' (\(turns) turns read)\n", "\(none)")
        let some = try runCogd(["tail", "--data", folder.path, "--name", "ledger.*", "--last", "1"])
        #expect(some.status == 0 && some.stderr.isEmpty && some.stdout.contains("  ledger.open  "), "\(some)")
        // Following, it says once that nothing matches yet and waits; a match then prints.
        for (account, balance) in [("walkA", 5), ("walkB", 0)] {
            _ = try runCogd(["call", "ledger.open", #"{"account": "\#(account)", "balance": \#(balance)}"#, "--leader", ports.requests])
        }
        let read = try runCogd(["tail", "--data", folder.path, "--last", "100000", "--json"]).stdout.split(separator: "\n").count
        let waiting = try CogdProcess(["tail", "--data", folder.path, "--name", "ledger.tr*", "--follow", "--count", "1"])
        defer { waiting.stop() }
        let note = waiting.waitForLine { $0.hasPrefix("cogd tail: ") }
        #expect(note == "cogd tail: no turn matches --name 'ledger.tr*' yet (\(read) turns read); waiting for one (Ctrl-C stops)", "\(waiting.lines)")
        #expect(waiting.process.isRunning, "it waits: \(waiting.lines)")
        let transfer = try runCogd(["call", "ledger.transfer", #"{"from": "walkA", "to": "walkB", "amount": 1}"#, "--leader", ports.requests])
        #expect(transfer.stdout.hasPrefix("applied revision"), "\(transfer)")
        #expect(waiting.waitForLine { $0.hasPrefix("#") } .map { $0.contains("  ledger.transfer  ") } == true, "\(waiting.lines)")
        waitForExit(waiting.process, timeout: .seconds(10))
        #expect(waiting.lines.filter { $0.hasPrefix("cogd tail: ") }.count == 1, "said once: \(waiting.lines)")
    }

    @Test func `local-cluster.sh checks COGD at once, relative to the caller's directory, and --help lists its variables`() throws {
        let caller = TemporaryFolder()
        try FileManager.default.createDirectory(atPath: caller.path, withIntermediateDirectories: true)
        defer { caller.cleanUp() }
        let script = repositoryRoot.appendingPathComponent("deploy/local-cluster.sh").path
        let missing = try CogdProcess(
            executable: URL(fileURLWithPath: "/bin/bash"), [script, "--demo"], environment: ["COGD": "./cogd"],
            directory: URL(fileURLWithPath: caller.path))
        defer { missing.stop() }
        missing.waitForLine(timeout: .seconds(20)) { _ in false }
        waitForExit(missing.process, timeout: .seconds(5))
        #expect(missing.process.terminationStatus == 1, "\(missing.lines)")
        #expect(missing.lines == ["local-cluster.sh: COGD=./cogd: no executable cogd at \(caller.path)/./cogd"], "\(missing.lines)")

        // Relative COGD and COGD_DATA are found from the caller's directory.
        try FileManager.default.createSymbolicLink(atPath: caller.path + "/cogd", withDestinationPath: cogdExecutable().path)
        let ports = ClusterPorts()
        let demo = try CogdProcess(
            executable: URL(fileURLWithPath: "/bin/bash"), [script, "--demo"],
            environment: ["COGD": "./cogd", "COGD_DATA": "data", "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns],
            directory: URL(fileURLWithPath: caller.path))
        defer { demo.stop() }
        #expect(demo.waitForLine(timeout: .seconds(90)) { $0.contains("stopped leader and workers") } != nil, "\(demo.lines)")
        #expect(demo.lines.contains { $0.hasPrefix("cogd leader: stopped at revision") }, "\(demo.lines)")
        #expect(FileManager.default.fileExists(atPath: caller.path + "/data/data.mdb"), "the data folder is in the caller's directory")

        let help = try runProgram(URL(fileURLWithPath: "/bin/bash"), [script, "--help"])
        #expect(help.status == 0, "\(help)")
        for variable in ["COGD ", "COGD_DATA ", "COGD_REQUESTS ", "COGD_TURNS "] {
            #expect(help.stdout.contains("\n  \(variable)"), "\(variable): \(help.stdout)")
        }
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        for variable in ["`COGD`", "`COGD_DATA`", "`COGD_REQUESTS`", "`COGD_TURNS`"] {
            #expect(readme.contains(variable), "the README names \(variable)")
        }
    }
}
