import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `CounterApp` (Tests/CounterApp): a user's own executable, one call of
/// `CogdCommandLine.main(rigs:)` with a rig of its own, run as real
/// processes on loopback.
@Suite("your own executable on cogd", .timeLimit(.minutes(10)))
struct CustomRigTests {
    /// The `CounterApp` executable built beside `cogd`.
    func counterApp() -> URL {
        cogdExecutable().deletingLastPathComponent().appendingPathComponent("CounterApp")
    }

    /// Runs `CounterApp` to completion (bounded); exit status and both
    /// outputs. `build` picks another build of the app (`COUNTER_BUILD`).
    func run(_ arguments: [String], build: String? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        try runProgram(counterApp(), arguments, environment: build.map { ["COUNTER_BUILD": $0] } ?? [:], timeout: .seconds(30))
    }

    @Test func `a leader serves the app's op, a worker runs its mechanism and scope, and cogd reads its log`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try CogdProcess(
            executable: counterApp(), ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("CounterApp leader: data") }?.contains("rig counter") == true, "the leader names the default rig")

        let bump = try run(["call", "counter.bump", "5", "--leader", ports.requests])
        #expect(bump.status == 0 && bump.stdout.hasPrefix("applied revision 1"), "\(bump)")
        // Only the given rigs' ops are served: the ledger's is unknown here.
        let foreign = try run(["call", "ledger.open", #"{"account": "a", "balance": 1}"#, "--leader", ports.requests])
        #expect(foreign.status == 3 && foreign.stderr.contains("no op named `ledger.open`"), "\(foreign)")

        let worker = try CogdProcess(executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "w1"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("rig counter") } != nil)
        #expect(worker.waitForLine { $0.hasSuffix(": counter 5") } != nil, "the worker's mechanism saw the replicated count")

        // Opening the scope makes the worker's scope child bump by 100 (its request carries the scope instance).
        let open = try run(["call", "counter.setBonus", "true", "--leader", ports.requests])
        #expect(open.status == 0, "\(open)")
        #expect(worker.waitForLine { $0.hasSuffix(": counter 105") } != nil, "the bonus scope's op applied")

        // `cogd` itself reads the app's log (beside the running leader).
        let tail = try runCogd(["tail", "--data", folder.path, "--json"])
        #expect(tail.status == 0)
        #expect(tail.stdout.contains("counter.bump") && tail.stdout.contains("counter.setBonus"), "\(tail.stdout)")
        let status = try run(["status", "--leader", ports.requests])
        #expect(status.status == 0 && status.stdout.contains("w1: applied"), "\(status)")
        // The app says what it is: its name and version, with cogd's, in status, version and its log lines.
        #expect(status.stdout.contains("leader    CounterApp 2.3.0 (cogd 0.1.0), up "), "\(status.stdout)")
        let version = try run(["version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("CounterApp 2.3.0\ncogd 0.1.0\nLMDB "), "\(version.stdout)")
        #expect(worker.lines.contains { $0.contains("CounterApp worker w1:") } && !worker.lines.contains { $0.contains("cogd worker") }, "\(worker.lines)")
        // Its help's examples name its own ops and sources, never the demo's ledger.
        let help = try run(["help", "call"]).stdout + (try run(["help", "get"]).stdout) + (try run(["help", "tail"]).stdout)
        #expect(help.contains("CounterApp call counter.bump 1 --leader 127.0.0.1:5701") && help.contains("CounterApp get counter.count --data"), "\(help)")
        #expect(help.contains("--name 'counter.*'") && !help.contains("ledger") && !help.contains("trails"), "\(help)")
    }

    @Test func `--rig chooses among the app's rigs, and the app carries no lab command, rig or op of cogd's`() throws {
        let unknown = try run(["worker", "--rig", "trails"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("Error: unknown rig 'trails' (one of: counter, replica)\nUsage: CounterApp worker"), "\(unknown.stderr)")
        #expect(unknown.stderr.hasSuffix("See 'CounterApp worker --help'\n"))

        let help = try run(["help"])
        #expect(help.status == 0)
        #expect(help.stdout.hasPrefix("CounterApp — "), "\(help.stdout)")
        for lab in ["drill", "sim", "bench", "ledger", "trails"] {
            #expect(!help.stdout.contains(lab), "CounterApp help names \(lab): \(help.stdout)")
        }
        let workerHelp = try run(["worker", "--help"])
        #expect(workerHelp.stdout.contains("Rigs (--rig NAME, default counter):\n  counter "), "\(workerHelp.stdout)")
        #expect(!workerHelp.stdout.contains("ledger") && !workerHelp.stdout.contains("trails"), "\(workerHelp.stdout)")
        let leaderHelp = try run(["leader", "--help"])
        #expect(!leaderHelp.stdout.contains("--trap-op") && !leaderHelp.stdout.contains("ledger"), "\(leaderHelp.stdout)")
        let trap = try run(["leader", "--trap-op"])
        #expect(trap.status == 64 && trap.stderr.hasPrefix("Error: unknown option '--trap-op'\n"), "\(trap)")

        // Only its own ops.
        let ops = try run(["ops", "--json"])
        #expect(ops.status == 0, "\(ops)")
        let names = ops.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["name"] as? String
        }
        #expect(!names.isEmpty && names.allSatisfy { $0.hasPrefix("counter.") }, "\(names)")

        // The lab's commands say where they went.
        for arguments in [["drill", "--seconds", "1"], ["sim", "--seed", "1"], ["bench", "cluster"]] {
            let result = try run(arguments)
            #expect(result.status == 64, "\(arguments): \(result)")
            #expect(
                result.stderr.hasPrefix(
                    "Error: '\(arguments[0])' is not part of the runtime: benchmarks, drills and the simulator are in cogd-lab, "
                        + "the lab's own executable (swift build -c release --product cogd-lab; then cogd-lab \(arguments[0]) --help)\n"),
                "\(arguments): \(result.stderr)")
        }
    }

    @Test func `a worker built with an incompatible rig is refused, naming what differs; one that lacks what the leader added joins`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try CogdProcess(
            executable: counterApp(), ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("CounterApp leader: data") } != nil)

        let renamed = try CogdProcess(
            executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "renamed"], environment: ["COUNTER_BUILD": "renamed"])
        defer { renamed.stop() }
        let refusal = renamed.waitForLine { $0.contains("the leader refuses this worker's rig") }
        #expect(
            refusal?.contains(
                "worker renamed's rig counter differs from the leader's: ops the leader does not serve: `counter.add`") == true,
            "\(renamed.lines)")
        let bumped = try CogdProcess(
            executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "bumped"], environment: ["COUNTER_BUILD": "bumped"])
        defer { bumped.stop() }
        #expect(bumped.waitForLine { $0.contains("its schema version is 2, the leader's 1") } != nil, "\(bumped.lines)")
        // Same names, same schema, another argument type: refused at hello, naming the op and both shapes.
        let argtyped = try CogdProcess(
            executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "argtyped"], environment: ["COUNTER_BUILD": "argtyped"])
        defer { argtyped.stop() }
        let typeRefusal = argtyped.waitForLine { $0.contains("the leader refuses this worker's rig") }
        #expect(
            typeRefusal?.contains(
                "worker argtyped's rig counter differs from the leader's: op `counter.bump` takes integer at the leader, string in this worker's rig")
                == true,
            "\(argtyped.lines)")
        // The leader's own log names the worker and what differs, too.
        let leaderLine = leader.waitForLine { $0.contains("refused worker argtyped's hello") }
        #expect(leaderLine?.contains("WARN") == true && leaderLine?.contains("op `counter.bump` takes integer at the leader, string in this worker's rig") == true, "\(leader.lines)")

        // A build from before the leader's added the bonus source and op: compatible, it syncs.
        let older = try CogdProcess(
            executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "older"], environment: ["COUNTER_BUILD": "older"])
        defer { older.stop() }
        #expect(older.waitForLine { $0.contains("synced at revision") } != nil, "\(older.lines)")
        let bump = try run(["call", "counter.bump", "3", "--leader", ports.requests])
        #expect(bump.status == 0, "\(bump)")
        #expect(older.waitForLine { $0.contains("applied 1") } != nil)

        // The refused workers never held their names; the leader counts the refusals.
        let status = try run(["status", "--leader", ports.requests, "--json"])
        #expect(status.stdout.contains(#""rig-mismatch": "#) && !status.stdout.contains(#""name": "renamed""#), "\(status)")
        #expect(!renamed.lines.contains { $0.contains("synced at revision") })
        #expect(!argtyped.lines.contains { $0.contains("synced at revision") } && !status.stdout.contains(#""name": "argtyped""#))
    }

    @Test func `a worker whose own request is rejected logs it at WARN naming the op, its scope instance and the code, and counts it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try CogdProcess(
            executable: counterApp(), ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("CounterApp leader: data") } != nil)
        let metrics = freePort()
        let worker = try CogdProcess(
            executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "sloppy", "--metrics", "127.0.0.1:\(metrics)"],
            environment: ["COUNTER_BUILD": "sloppy"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(worker.lines)")

        // Opening the bonus scope makes the worker's scope child send `counter.bump` with text.
        let open = try run(["call", "counter.setBonus", "true", "--leader", ports.requests])
        #expect(open.status == 0, "\(open)")
        let line = worker.waitForLine { $0.contains("was rejected") }
        #expect(line?.contains(" WARN  CounterApp worker sloppy: op `counter.bump` (turn ") == true, "\(worker.lines)")
        #expect(line?.contains("bonus.counter.bump, scope instance ") == true, "\(line ?? "")")
        #expect(line?.contains(") was rejected bad-argument: ") == true, "\(line ?? "")")
        #expect(line?.hasSuffix("; request sloppy#1") == true, "\(line ?? "")")

        var samples: [String: Double] = [:]
        let counted = try waitUntil {
            samples = try MetricsEndpointTests.scrape(metrics).samples
            return samples[#"cogd_worker_rejections_total{code="bad-argument",op="counter.bump"}"#] != nil
        }
        #expect(counted, "\(samples)")
        #expect(samples[#"cogd_worker_rejections_total{code="bad-argument",op="counter.bump"}"#] == 1)
        #expect(samples[#"cogd_worker_requests_total{outcome="rejected"}"#] == 1)
    }

    @Test func `a build whose durable type changed is refused at start, naming the value and the revision; log verify lists it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        do {
            let leader = try CogdProcess(
                executable: counterApp(), ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
            defer { leader.stop() }
            #expect(leader.waitForLine { $0.contains("CounterApp leader: data") } != nil)
            #expect(try run(["call", "counter.bump", "5", "--leader", ports.requests]).stdout.hasPrefix("applied revision 1"))
            #expect(try run(["call", "counter.bump", "2", "--leader", ports.requests]).stdout.hasPrefix("applied revision 2"))
        }
        // The build that declares the count as text cannot read the numbers stored.
        let refused = try run(["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns], build: "retyped")
        #expect(refused.status == 1, "\(refused)")
        #expect(
            refused.stderr.contains(
                "the stored value of `counter.count` (written at revision 2) does not decode as its declaration at CounterApp/Counter.swift:"),
            "\(refused.stderr)")
        #expect(refused.stderr.contains("The leader did not start; nothing was changed."))
        let verify = try run(["log", "verify", "--data", folder.path], build: "retyped")
        #expect(verify.status == 1)
        #expect(verify.stderr.contains("Error: log verify: the stored value of `counter.count` (written at revision 2) does not decode"))
        #expect(verify.stderr.contains("2 writes in the records do not decode with this build's types"), "\(verify.stderr)")
        // The build that wrote them still reads them: nothing was lost.
        let fine = try run(["log", "verify", "--data", folder.path])
        #expect(fine.status == 0 && fine.stdout.contains("every value decodes with this build's types"), "\(fine)")
        let leader = try CogdProcess(
            executable: counterApp(), ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("CounterApp leader: data") } != nil)
        #expect(try run(["call", "counter.bump", "1", "--leader", ports.requests]).stdout.hasPrefix("applied revision 3"))
        // A worker of the retyped build (its rig's version unchanged) is
        // refused at hello: the fingerprint carries the value's shape.
        let worker = try CogdProcess(
            executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "w-retyped"], environment: ["COUNTER_BUILD": "retyped"])
        defer { worker.stop() }
        let refusal = worker.waitForLine { $0.contains("the leader refuses this worker's rig") }
        #expect(
            refusal?.contains("durable source `counter.count` holds integer at the leader, string in this worker's rig") == true,
            "\(worker.lines)")
        #expect(!worker.lines.contains { $0.contains("synced at revision") })
        // A change the shapes cannot see (a validating decoder of the same
        // shape): the worker joins, then stops at the snapshot, saying why,
        // instead of following the log wrongly.
        let validating = try CogdProcess(
            executable: counterApp(), ["worker", "--leader", ports.requests, "--name", "w-validating"], environment: ["COUNTER_BUILD": "validating"])
        defer { validating.stop() }
        let stopped = validating.waitForLine { $0.contains("holds a value this worker's build cannot read") }
        #expect(stopped?.contains("the snapshot of revision 3 holds a value this worker's build cannot read") == true, "\(validating.lines)")
        #expect(stopped?.contains("bump the rig's schemaVersion so the leader refuses this build at hello") == true)
        #expect(waitUntil(timeout: .seconds(10)) { !validating.process.isRunning }, "the worker stopped")
        #expect(validating.process.terminationStatus == 1)
    }
}
