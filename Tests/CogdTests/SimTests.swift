import Foundation
import Testing

/// `cogd sim`: the real cores and graph on a simulated network, disk and
/// clock. Each run is a separate process (the simulator needs Swift's
/// deterministic hashing, which it sets for itself by restarting once).
@Suite("cogd sim", .timeLimit(.minutes(10)))
struct SimTests {
    /// The JSON lines `cogd sim --json` printed, one per seed.
    func runs(_ arguments: [String]) throws -> (status: Int32, runs: [[String: Any]], output: String) {
        let result = try runCogdLab(["sim", "--json"] + arguments, timeout: .seconds(120))
        let runs = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        return (result.status, runs, result.stdout + result.stderr)
    }

    @Test func `several seeds with every fault pass, and each run saw the faults`() throws {
        let (status, runs, output) = try runs(["--seeds", "1-6", "--steps", "3000"])
        #expect(status == 0, "\(output)")
        #expect(runs.count == 6)
        for run in runs {
            #expect(run["pass"] as? Bool == true, "\(run)")
            let counts = run["counts"] as? [String: Int] ?? [:]
            #expect((counts["ops"] ?? 0) > 100, "clients sent ops: \(counts)")
            #expect((counts["lost"] ?? 0) > 0 && (counts["retries"] ?? 0) > 0, "messages were lost and retried: \(counts)")
            #expect((run["revisions"] as? Int ?? 0) > 50)
        }
        let seen = ["leader-crashes", "worker-crashes", "partitions", "failed-commits", "duplicated", "reordered", "pauses", "clock-jumps", "retired-refused", "corruptions", "digest-mismatches",
            "selector-spoils", "selector-mends",
        ]
        for name in seen {
            #expect(runs.contains { ($0["counts"] as? [String: Int])?[name] ?? 0 > 0 }, "no run saw \(name)")
        }
    }

    @Test func `one seed makes one run: the same fingerprint twice`() throws {
        let first = try runs(["--seed", "42", "--steps", "2000"])
        let second = try runs(["--seed", "42", "--steps", "2000"])
        #expect(first.status == 0 && second.status == 0, "\(first.output)\(second.output)")
        let one = try #require(first.runs.first?["fingerprint"] as? String)
        #expect(second.runs.first?["fingerprint"] as? String == one)
        #expect(first.runs.first?["counts"] as? [String: Int] == second.runs.first?["counts"] as? [String: Int])
    }

    @Test(arguments: [
        ("instance-check", "dead-instance"), ("dedup", "applied-twice"), ("heartbeat-expiry", "dead-holder"),
        ("digest-check", "replica-diverged"), ("snapshot-deadline", "snapshot-held"), ("quarantine", "quarantine-ran"),
        ("selector-encoding", "retired-while-selected"),
    ])
    func `a switched-off rule is caught within 20 seeds`(rule: String, invariant: String) throws {
        let (status, runs, output) = try runs(["--seeds", "1-20", "--steps", "3000", "--break", rule])
        #expect(status == 1, "\(output)")
        let failed = try #require(runs.last, "\(output)")
        #expect(failed["pass"] as? Bool == false)
        let violation = try #require(failed["violation"] as? [String: Any])
        #expect(violation["invariant"] as? String == invariant, "\(violation)")
        #expect(!(violation["trace"] as? [String] ?? []).isEmpty)
    }

    @Test func `retention prunes the log under every fault: a replica behind is answered compacted and syncs from a snapshot, a late retry is answered expired`() throws {
        let (status, runs, output) = try runs(["--seeds", "1-6", "--steps", "3000"])
        #expect(status == 0, "\(output)")
        #expect(runs.count == 6)
        let counts = runs.map { $0["counts"] as? [String: Int] ?? [:] }
        for (run, count) in zip(runs, counts) {
            #expect(run["pass"] as? Bool == true, "\(run)")
            // Most of the log went: it keeps only its newest 2 to 24 turns (and what is not indexed yet).
            #expect((count["pruned-records"] ?? 0) * 2 > run["revisions"] as? Int ?? 0, "records were pruned: \(count)")
        }
        #expect(counts.contains { ($0["compacted-catch-ups"] ?? 0) > 0 }, "a replica's catch-up was answered compacted: \(counts)")
        #expect(counts.contains { ($0["expired-answers"] ?? 0) > 0 }, "a retry was answered expired: \(counts)")
    }

    @Test func `a selector that cannot be read retires nothing, with and without --groups; read as no members, the checker sees live members retired`() throws {
        for groups in [[], ["--groups"]] {
            let (status, runs, output) = try runs(["--seeds", "1-6", "--steps", "3000"] + groups)
            #expect(status == 0, "\(output)")
            let counts = runs.map { $0["counts"] as? [String: Int] ?? [:] }
            #expect(counts.filter { ($0["selector-spoils"] ?? 0) > 0 }.count >= 5, "the desks' selector was spoiled in most runs: \(counts)")
            let broken = try self.runs(["--seeds", "1-20", "--steps", "3000", "--break", "selector-encoding"] + groups)
            #expect(broken.status == 1, "\(broken.output)")
            let violation = try #require(broken.runs.last?["violation"] as? [String: Any], "\(broken.output)")
            #expect(violation["invariant"] as? String == "retired-while-selected", "\(violation)")
            #expect((violation["message"] as? String ?? "").contains("of Sim.desk for member "), "\(violation)")
        }
    }

    @Test func `with --groups each scope member has one owner in the group through every fault; moves and re-placements happen`() throws {
        // (12 seeds: a root moves only when its owner goes, in about half the runs.)
        let (status, runs, output) = try runs(["--seeds", "1-12", "--steps", "3000", "--groups"])
        #expect(status == 0, "\(output)")
        #expect(runs.count == 12)
        #expect(runs.allSatisfy { $0["pass"] as? Bool == true }, "\(output)")
        let counts = runs.map { $0["counts"] as? [String: Int] ?? [:] }
        #expect(counts.contains { ($0["group-moves"] ?? 0) > 0 }, "a joining worker took members over: \(counts)")
        #expect(counts.contains { ($0["group-replacements"] ?? 0) > 0 }, "a gone worker's members were placed on others: \(counts)")
        #expect(counts.contains { ($0["root-moves"] ?? 0) > 0 }, "a gone worker's mechanism root opened on another: \(counts)")
        // Switched off, the checker sees a member owned twice.
        let broken = try self.runs(["--seeds", "1-5", "--steps", "3000", "--groups", "--break", "exclusive-placement"])
        #expect(broken.status == 1)
        let violation = try #require(broken.runs.last?["violation"] as? [String: Any], "\(broken.output)")
        #expect(violation["invariant"] as? String == "double-owned")
    }

    @Test func `with --groups a worker cut off from the leader stops its effects before its members move; without the lease two act at once`() throws {
        let (status, runs, output) = try runs(["--seeds", "1-6", "--steps", "3000", "--groups"])
        #expect(status == 0, "\(output)")
        let counts = runs.map { $0["counts"] as? [String: Int] ?? [:] }
        #expect(counts.contains { ($0["lease-expiries"] ?? 0) > 0 }, "a lease ran out: \(counts)")
        let broken = try self.runs(["--seeds", "1-20", "--steps", "3000", "--groups", "--break", "worker-lease"])
        #expect(broken.status == 1, "\(broken.output)")
        let violation = try #require(broken.runs.last?["violation"] as? [String: Any], "\(broken.output)")
        #expect(violation["invariant"] as? String == "two-effect-owners", "\(violation)")
    }

    @Test func `a failure prints the seed, the step, the trace and how to reproduce it`() throws {
        let result = try runCogdLab(["sim", "--seeds", "1-20", "--steps", "3000", "--break", "dedup"], timeout: .seconds(120))
        #expect(result.status == 1)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let failure = try #require(lines.first { $0.contains("FAIL") }, "\(result.stdout)")
        #expect(failure.hasPrefix("seed ") && failure.contains("at step ") && failure.contains("applied-twice: request "))
        #expect(lines.contains("trace (the last events, oldest first):"))
        #expect(lines.contains { $0.hasPrefix("reproduce: cogd-lab sim --seed ") && $0.hasSuffix("--break dedup") })
    }

    @Test func `bad options are refused with a message`() throws {
        let result = try runCogdLab(["sim", "--break", "nothing"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--break takes one of instance-check, dedup, heartbeat-expiry, digest-check, exclusive-placement, worker-lease, snapshot-deadline, quarantine, selector-encoding, arbiter-deadline, ship-sync-key, sync-key-compare, step-down-keep, failover-any, not 'nothing'"), "\(result.stderr)")
        let arbiterOnly = try runCogdLab(["sim", "--break", "arbiter-deadline"])
        #expect(arbiterOnly.status == 64 && arbiterOnly.stderr.contains("--break arbiter-deadline is the arbiter's rule: give --arbiter too"))
        let clusterOnly = try runCogdLab(["sim", "--arbiter", "--break", "dedup"])
        #expect(clusterOnly.status == 64 && clusterOnly.stderr.contains("with --arbiter, --break takes arbiter-deadline"))
        let placement = try runCogdLab(["sim", "--break", "exclusive-placement"])
        #expect(placement.status == 64)
        #expect(placement.stderr.contains("--break exclusive-placement needs --groups"))
        let lease = try runCogdLab(["sim", "--break", "worker-lease"])
        #expect(lease.status == 64)
        #expect(lease.stderr.contains("--break worker-lease needs --groups"))
        let range = try runCogdLab(["sim", "--seeds", "9-3"])
        #expect(range.status == 64)
        #expect(range.stderr.contains("--seeds takes a range A-B"))
        for (arguments, message) in [
            (["--break", "ship-sync-key"], "--break ship-sync-key is a rule of shipping: give --shipping too"),
            (["--shipping", "--break", "dedup"], "with --shipping, --break takes ship-sync-key or sync-key-compare or step-down-keep or failover-any"),
            (["--break", "sync-key-compare"], "--break sync-key-compare is a rule of shipping: give --shipping too"),
            (["--shipping", "--break", "sync-key-compare"], "--break sync-key-compare needs --late-sync-writes (only a write that lands late can land after a later one)"),
            (["--shipping", "--arbiter"], "--shipping is a mode of its own: give it without --arbiter"),
            (["--shipping", "--workers", "3"], "--workers does not apply to --shipping"),
            (["--shipping", "--sync", "quorum:3"], "--sync takes one or quorum:2 (the simulated leader has 2 or 3 standbys), not 'quorum:3'"),
            (["--sync", "one"], "--sync is an option of --shipping: give --shipping too"),
            (["--late-sync-writes"], "--late-sync-writes is an option of --shipping: give --shipping too"),
        ] {
            let refused = try runCogdLab(["sim"] + arguments)
            #expect(refused.status == 64 && refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }
    }

    @Test func `the arbiters against a model etcd: no node releases without the leader key through every fault, and a broken deadline is caught`() throws {
        let result = try runCogdLab(["sim", "--arbiter", "--seeds", "1-30", "--steps", "20000"], timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stdout)")
        let summary = try #require(result.stdout.split(separator: "\n").last.map(String.init))
        #expect(summary.hasPrefix("30 seeds passed: ") && summary.hasSuffix("no node released without holding etcd's leader key"), "\(summary)")
        // Every seed saw leaders come and go: failovers and step-downs, not a quiet run.
        for line in result.stdout.split(separator: "\n") where line.hasPrefix("seed ") {
            let leads = line.split(separator: ",").first { $0.hasSuffix(" leads") }.flatMap { Int($0.split(separator: " ")[0]) } ?? 0
            #expect(leads >= 3 && line.contains(" step-downs"), "\(line)")
        }

        let broken = try runCogdLab(["sim", "--arbiter", "--seeds", "1-20", "--steps", "20000", "--break", "arbiter-deadline"], timeout: .seconds(120))
        #expect(broken.status == 1)
        let failure = try #require(broken.stdout.split(separator: "\n").first { $0.contains("FAIL") }.map(String.init), "\(broken.stdout)")
        #expect(failure.contains("stale-leader: ") || failure.contains("two-leaders: "), "\(failure)")
        #expect(broken.stdout.contains("reproduce: cogd-lab sim --arbiter --seed ") && broken.stdout.contains("--break arbiter-deadline"))

        // With --json: one object per seed, and the failing one carries its violation.
        let passing = try self.runs(["--arbiter", "--seeds", "1-3", "--steps", "5000"])
        #expect(passing.status == 0 && passing.runs.count == 3, "\(passing.output)")
        #expect(passing.runs.map { $0["seed"] as? Int } == [1, 2, 3])
        #expect(passing.runs.allSatisfy { $0["pass"] as? Bool == true && ($0["leads"] as? Int ?? 0) >= 1 && $0["highestEpoch"] is Int }, "\(passing.runs)")
        let failing = try self.runs(["--arbiter", "--seeds", "1-20", "--steps", "20000", "--break", "arbiter-deadline"])
        #expect(failing.status == 1)
        let violation = try #require(failing.runs.last?["violation"] as? [String: Any], "\(failing.output)")
        #expect(["stale-leader", "two-leaders"].contains(violation["invariant"] as? String), "\(violation)")
    }

    @Test func `a leader's shipping rules against standbys and etcd's sync key: every standby the sync key names holds every commit released, through every fault`() throws {
        let (status, runs, output) = try runs(["--shipping", "--seeds", "1-12", "--steps", "5000"])
        #expect(status == 0, "\(output)")
        #expect(runs.count == 12)
        for run in runs {
            #expect(run["pass"] as? Bool == true, "\(run)")
            // Not a vacuous pass: commits were shipped and released, and once faults stopped all of them were,
            // but those a failover took back with a deposed leader's tail (never released).
            let shipped = run["shipped"] as? Int ?? 0
            let counts = run["counts"] as? [String: Int] ?? [:]
            #expect(shipped > 500 && (run["released"] as? Int ?? 0) + (run["takenBack"] as? Int ?? -1) == shipped, "\(run)")
            #expect((counts["releases"] ?? 0) > 20 && (counts["sync-writes"] ?? 0) > 0, "\(counts)")
        }
        #expect(Set(runs.compactMap { $0["sync"] as? String }) == ["one", "quorum:2"])
        #expect(runs.contains { $0["degradeAfter"] == nil } && runs.contains { $0["degradeAfter"] != nil }, "strict and degrading runs")
        let seen = ["kills", "freezes", "wipes", "connection-drops", "copies", "catch-ups", "drops-silent", "drops-behind", "drops-gone", "degraded",
            "refusals", "sync-write-failures", "keep-alives", "step-down-keeps", "step-down-takes-back", "failovers", "leader-restarts",
            "leader-folders-destroyed", "deposed-tails",
        ]
        for name in seen {
            #expect(runs.contains { ($0["counts"] as? [String: Int])?[name] ?? 0 > 0 }, "no run saw \(name)")
        }
        // One seed, one run.
        let again = try self.runs(["--shipping", "--seed", "5", "--steps", "5000"])
        #expect(again.runs.first?["counts"] as? [String: Int] == runs[4]["counts"] as? [String: Int])
    }

    @Test func `a sync key that names every standby in step while releases wait for the K fastest is caught, and the failure says how to reproduce it`() throws {
        let (status, runs, output) = try runs(["--shipping", "--seeds", "1-20", "--steps", "5000", "--break", "ship-sync-key"])
        #expect(status == 1, "\(output)")
        let violation = try #require(runs.last?["violation"] as? [String: Any], "\(output)")
        // Etcd's key names a standby the rules do not count on: a release, or a commit a step-down would keep, it lacks.
        #expect(["named-lacks-release", "too-many-named", "step-down-kept-lacking"].contains(violation["invariant"] as? String), "\(violation)")
        #expect(!(violation["trace"] as? [String] ?? []).isEmpty)

        let broken = try runCogdLab(["sim", "--shipping", "--seeds", "1-20", "--steps", "5000", "--break", "ship-sync-key"], timeout: .seconds(120))
        #expect(broken.status == 1)
        let lines = broken.stdout.split(separator: "\n").map(String.init)
        let failure = try #require(lines.first { $0.contains("FAIL") }, "\(broken.stdout)")
        #expect(failure.hasPrefix("seed ") && failure.contains("at step ") && failure.contains("etcd's sync key names "), "\(failure)")
        #expect(lines.contains("trace (the last events, oldest first):"))
        #expect(lines.contains { $0.hasPrefix("reproduce: cogd-lab sim --shipping --seed ") && $0.hasSuffix("--break ship-sync-key") }, "\(broken.stdout)")

        let passing = try runCogdLab(["sim", "--shipping", "--sync", "one", "--seeds", "1-3", "--steps", "3000"], timeout: .seconds(120))
        #expect(passing.status == 0, "\(passing.stdout)")
        let summary = try #require(passing.stdout.split(separator: "\n").last.map(String.init))
        #expect(summary.hasPrefix("3 seeds passed: ") && summary.contains(" 0 violations")
            && summary.contains(" failovers (") && summary.contains(" commits taken back, none released), ")
            && summary.contains("every standby etcd's sync key named held every commit released, each new leader held every commit released before it, and each of the ")
            && summary.hasSuffix(" times a leader stepping down would have kept its last commit, it was in every log etcd named or might name"), "\(summary)")
        #expect(passing.stdout.split(separator: "\n").filter { $0.hasPrefix("seed ") && $0.contains(": pass — ") && $0.contains("--sync one ") }.count == 3)
    }

    @Test func `sync key writes etcd applies after the leader gave up on them land only while the key is as the leader read it, and without that compare the checker catches one`() throws {
        let (status, runs, output) = try runs(["--shipping", "--late-sync-writes", "--seeds", "1-40", "--steps", "20000"])
        #expect(status == 0, "\(output)")
        #expect(runs.count == 40 && runs.allSatisfy { $0["pass"] as? Bool == true })
        // Not vacuous: late writes landed, and others were refused by the compare.
        let counts = runs.compactMap { $0["counts"] as? [String: Int] }
        #expect(counts.reduce(0) { $0 + ($1["late-sync-writes"] ?? 0) } > 5)
        #expect(counts.reduce(0) { $0 + ($1["late-sync-writes-refused"] ?? 0) } > 5)

        let broken = try runCogdLab(["sim", "--shipping", "--late-sync-writes", "--seeds", "11-20", "--steps", "20000", "--break", "sync-key-compare"], timeout: .seconds(120))
        #expect(broken.status == 1)
        let lines = broken.stdout.split(separator: "\n").map(String.init)
        let failure = try #require(lines.first { $0.contains("FAIL") }, "\(broken.stdout)")
        // A write the leader gave up on lands after a later one: etcd names a standby the rules forgot.
        #expect(failure.contains("named-lacks-release: etcd's sync key names ") || failure.contains("step-down-kept-lacking: "), "\(failure)")
        #expect(lines.contains { $0.contains("etcd applies a write the leader gave up on: the sync key names ") }, "\(broken.stdout)")
        #expect(lines.contains { $0.hasPrefix("reproduce: cogd-lab sim --shipping --seed ") && $0.hasSuffix("--late-sync-writes --break sync-key-compare") })
    }

    @Test func `a leader stepping down keeps its last commit only when every standby etcd may name holds it; counting the named alone is caught`() throws {
        let (status, runs, output) = try runs(["--shipping", "--seeds", "1-10", "--steps", "10000"])
        #expect(status == 0, "\(output)")
        // Not vacuous: in every seed the probe found commits to keep and commits to take back.
        for run in runs {
            let counts = run["counts"] as? [String: Int] ?? [:]
            #expect((counts["step-down-keeps"] ?? 0) > 0 && (counts["step-down-takes-back"] ?? 0) > 0, "\(counts)")
        }

        let broken = try runCogdLab(["sim", "--shipping", "--seeds", "1-12", "--steps", "10000", "--break", "step-down-keep"], timeout: .seconds(120))
        #expect(broken.status == 1)
        let lines = broken.stdout.split(separator: "\n").map(String.init)
        let failure = try #require(lines.first { $0.contains("FAIL") }, "\(broken.stdout)")
        #expect(failure.contains("step-down-kept-lacking: were the leader to step down now it would keep commit "), "\(failure)")
        #expect(failure.contains(" lacks it while etcd "), "\(failure)")
        #expect(lines.contains { $0.hasPrefix("reproduce: cogd-lab sim --shipping --seed ") && $0.hasSuffix("--break step-down-keep") }, "\(broken.stdout)")
    }

    @Test func `a standby the sync key does not name taking the lead after the leader crashes is caught: it lacks commits released before`() throws {
        let broken = try runCogdLab(["sim", "--shipping", "--seeds", "1-20", "--steps", "5000", "--break", "failover-any"], timeout: .seconds(120))
        #expect(broken.status == 1)
        let lines = broken.stdout.split(separator: "\n").map(String.init)
        let failure = try #require(lines.first { $0.contains("FAIL") }, "\(broken.stdout)")
        #expect(failure.contains(": failover-lacks-release: ") && failure.contains(" takes the lead in epoch ") && failure.contains(" were released"), "\(failure)")
        #expect(lines.contains { $0.contains("the leader ") && $0.contains(" crashes") }, "\(broken.stdout)")
        #expect(lines.contains { $0.hasPrefix("reproduce: cogd-lab sim --shipping --seed ") && $0.hasSuffix("--break failover-any") }, "\(broken.stdout)")
    }
}
