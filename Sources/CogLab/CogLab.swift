import CCogdSupport
import CogCluster
import CogSim
import Cog
import CogdCommandLine
import Foundation
import LedgerRig
import TrailsRig

/// The lab: the runtime's commands (over the example rigs, with the trap
/// op behind `--trap-op`) plus what measures and tests it — `bench`,
/// `drill` and `sim` — as the executable `cogd-lab`. The runtime (`cogd`,
/// and every app built on `CogdCommandLine`) carries none of it.
public enum CogLab {
    /// The rigs the lab's leaders and workers run: Trails, then Ledger and its variants.
    static let rigs: [CogRig] = [TrailsRig.rig] + LedgerRig.rigs

    /// The rig a lab leader serves only with `--trap-op`: `ledger.trap`, whose body traps on demand.
    static let trapRig = CogRig(name: "trap-op", ops: [LedgerRig.trapOp])

    /// Runs `cogd-lab` with the process's arguments and exits with its status.
    public static func main() async -> Never {
        // Set before any thread starts, never again.
        Leader.countAllocations = { cogd_allocation_count() }
        CrashAfterShip.arm(environment: ProcessInfo.processInfo.environment)
        FreezeUnshipped.arm(environment: ProcessInfo.processInfo.environment)
        await CogdCommandLine.main(rigs: program)
    }

    /// The rigs, the trap rig and the lab's subcommands, as `CogdCommandLine` runs them.
    package static var program: Rigs {
        Rigs(rigs, trap: trapRig, extras: subcommands)
    }

    static let subcommands: [ExtraSubcommand] = [
        ExtraSubcommand(
            name: "drill",
            summary: "crash-and-restart drill: cogd drill [--workers N] [--seconds S] [--kill-leader-every D] [--kill-worker-every D] [--trap-every D] [--seed N] [--curve] [--data DIR] [--ports A-B] [--report DIR] [--json] | --group-workers N [--heartbeat-timeout S] … | --ha [--nodes 2|3] [--lease-ttl S] [--fault-every D] [--faults F,…] [--report DIR]",
            usage: { cogd in
                "Usage: \(cogd) drill [--workers N] [--seconds S] [--kill-leader-every D] [--kill-worker-every D] [--trap-every D]\n"
                    + "         [--seed N] [--curve] [--data DIR] [--ports A-B] [--report DIR] [--json]\n"
                    + "       \(cogd) drill --group-workers N [--seconds S] [--kill-worker-every D] [--heartbeat-timeout S] [--seed N] [--data DIR]\n"
                    + "         [--ports A-B] [--report DIR] [--json]\n"
                    + "       \(cogd) drill --ha [--nodes 2|3] [--seconds S] [--lease-ttl S] [--fault-every D] [--faults F[,F…]] [--seed N]\n"
                    + "         [--ports A-B] [--report DIR] [--json]"
            },
            page: { page("drill", program: $0) },
            parse: { arguments throws(CommandUsageError) in
                let options = try LabParse.parseDrill(arguments)
                // A folder that already holds a log would be appended to: the run would not be the reproduce line's.
                if let problem = options.dataFolderProblem { throw CommandUsageError(message: problem, subcommand: "drill") }
                return {
                    var drill = Drill(options: options)
                    do {
                        return try drill.run()
                    } catch {
                        printError("Error: \(escaped: error)")
                        return 1
                    }
                }
            }),
        ExtraSubcommand(
            name: "sim",
            summary: "simulate the cluster under faults from a seed: cogd sim [--seed N | --seeds A-B] [--steps N] [--workers N] [--groups | --arbiter] [--break RULE] [--json] | cogd sim --shipping [--sync MODE] [--late-sync-writes] …",
            usage: { cogd in
                "Usage: \(cogd) sim [--seed N | --seeds A-B] [--steps N] [--workers N] [--groups | --arbiter] [--break RULE]… [--json]\n"
                    + "       \(cogd) sim --shipping [--seed N | --seeds A-B] [--steps N] [--sync one|quorum:2] [--late-sync-writes] [--break RULE] [--json]"
            },
            page: { page("sim", program: $0) },
            parse: { arguments throws(CommandUsageError) in
                let options = try SimCommand.parse(arguments)
                return { await MainActor.run { SimCommand.run(options) } }
            }),
        ExtraSubcommand(
            name: "bench",
            summary: "measure the runtime (release build): cogd bench graph|log|cluster|groups [--json] [--runs N] [--only SHAPE,…] [--report DIR] [--leader-spin-wait MICROSECONDS] [--curve] [--ports A-B] | cogd bench cluster --standby [--failovers N] … | cogd bench retention [--retain-turns N] [--total-turns N] [--sample-every N] [--json] [--runs N] [--ports A-B] | cogd bench quick [--only PART,…] [--runs N] [--json] [--ports A-B]",
            usage: { cogd in
                "Usage: \(cogd) bench graph|log|cluster|groups [--json] [--runs N] [--only SHAPE[,SHAPE…]] [--report DIR] [--leader-spin-wait US] [--curve] [--ports A-B]\n"
                    + "       \(cogd) bench cluster --standby [--failovers N] [--json] [--runs N] [--only SHAPE[,SHAPE…]] [--report DIR] [--leader-spin-wait US] [--ports A-B]\n"
                    + "       \(cogd) bench retention [--retain-turns N] [--total-turns N] [--sample-every N] [--json] [--runs N] [--ports A-B]\n"
                    + "       \(cogd) bench quick [--only PART[,PART…]] [--runs N] [--json] [--ports A-B]"
            },
            page: { page("bench", program: $0) },
            parse: { arguments throws(CommandUsageError) in
                let options = try LabParse.parseBench(arguments)
                return { await bench(options) }
            }),
        // The raw ZeroMQ echo server `bench cluster` runs in a child process,
        // so its baseline crosses processes as an op does (not listed in help).
        ExtraSubcommand(
            name: ClusterBench.echoServerCommand, summary: "", hidden: true,
            usage: { cogd in "Usage: \(cogd) \(ClusterBench.echoServerCommand) ENDPOINT [COMMIT-FOLDER]" },
            page: { _ in "" },
            parse: { arguments throws(CommandUsageError) in
                guard arguments.count == 1 || arguments.count == 2 else {
                    throw CommandUsageError(message: "expected ENDPOINT [COMMIT-FOLDER]", subcommand: nil)
                }
                return { ClusterBench.serveEcho(endpoint: arguments[0], commitFolder: arguments.count == 2 ? arguments[1] : nil) }
            }),
    ]

    /// Runs one bench suite; exit 1 on a failure (and when the retention bench's file kept growing), 3 when `quick` finds a figure past its floor.
    static func bench(_ options: BenchOptions) async -> Int32 {
        if let folder = options.report {
            // The suite runs as a child (it takes its own ports); its figures are drawn here.
            do {
                return try BenchReport(options: options, folder: folder).run()
            } catch {
                printError("Error: \(escaped: error)")
                return 1
            }
        }
        do {
            // The suites that start leaders take their loopback ports now, and say which.
            let needed = options.portsNeeded.count
            let ports = needed > 0 ? try LoopbackPorts(range: options.ports, count: needed) : nil
            if let ports { printError(ports.line("bench \(options.suite.rawValue)")) }
            switch options.suite {
            case .graph:
                await GraphBench(options: options).run()
            case .log:
                try LogBench(options: options).run()
            case .groups:
                try GroupBench(options: options, ports: ports!).run()
            case .retention:
                // Exit 1 when the data file kept growing (its verdict line says so).
                guard try RetentionBench(options: options, ports: ports!).run() else { return 1 }
            case .cluster:
                // On the main actor: one shape drives an in-process `Worker`.
                try await MainActor.run { try ClusterBench(options: options, ports: ports!).run() }
            case .quick:
                // Exit 3 when a figure stays past its floor.
                return try QuickBench(options: options).run()
            }
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
        return 0
    }

    /// What `help drill|sim|bench` prints under the usage line and the summary.
    static func page(_ topic: String, program cogd: String) -> String {
        switch topic {
        case "drill":
            let defaults = Drill.Options()
            return """

                Runs a real leader and workers (ledger rigs) under pipelined, retried
                transfers, SIGKILLs them on a seeded schedule, sends ledger.trap, and
                checks that no request is lost or applied twice, money is conserved and
                the log verifies; prints the verdict and exits 1 if any check fails.

                Options:
                  --workers N             workers, 0 to 16 (default \(defaults.workers))
                  --seconds S             how long it runs (default \(defaults.seconds))
                  --kill-leader-every D   about every D seconds SIGKILL the leader (default \(formatted(defaults.killLeaderEvery)))
                  --kill-worker-every D   about every D seconds SIGKILL a worker (default \(formatted(defaults.killWorkerEvery)))
                  --trap-every D          about every D seconds send ledger.trap; 0: never (default \(formatted(defaults.trapEvery)))
                  --seed N                the schedule's seed (default \(defaults.seed))
                  --curve                 run it all with CURVE keys and a peers file (default off)
                  --data DIR              run over this folder, kept afterwards; it must be empty or new (a
                                          folder that already holds a log is refused, exit 64: a run over it
                                          would append, and its reproduce line would not reproduce it)
                                          (default: a fresh temporary folder, removed afterwards)
                  --ports A-B             serve the leader on two loopback ports (127.0.0.1) picked free
                                          in A-B, 1024 ≤ A ≤ B ≤ 65535 (with --ha, six, or eight
                                          with three nodes: etcd's two and each node's two); said on stderr
                                          at the start and as "ports" in --json (default \(PortRange.standard))
                  --report DIR            also write DIR/\(Drill.Options.reportFileName) (DIR made when missing): one
                                          self-contained page, inline SVG, no script, nothing fetched, with
                                          applied ops/s and op latency p50/p99 over time, the faults as
                                          shaded bands, the recovery times and the verdict; for every
                                          drill (with --group-workers and --ha too; with --ha a band lasts
                                          from the fault to the first applied answer after it, the failover
                                          time) (default: none)
                  --json                  the verdict as one JSON object (default: lines)
                  --group-workers N       instead, a worker group: N workers, 1 to 16, of the ledger-greeter
                                          rig in one group (--group drill), a greeter per account; every
                                          --kill-worker-every seconds (default \(formatted(Drill.Options.groupKillWorkerEvery)) here) SIGKILL one and
                                          start another; no leader kills, no traps (default off)
                  --heartbeat-timeout S   with --group-workers: the leader's, after which a killed worker's
                                          accounts move (default \(formatted(defaults.heartbeatTimeout)))
                  --freeze-worker-every D with --group-workers: about every D seconds SIGSTOP a worker for
                                          the heartbeat timeout + 1 s, then SIGCONT it; it must say
                                          lease-expired when it runs again, before it hears gone, and
                                          rejoins (protocol/cogwire.md §6b); 0: never (default 0)
                  --cut-worker-every D    with --group-workers: about every D seconds cut a worker's link to
                                          the leader (each worker talks to it through a loopback relay,
                                          which then moves nothing either way) for the heartbeat timeout
                                          + 1 s, then mend it; the worker keeps running, and must say
                                          lease-expired before it hears gone (protocol/cogwire.md §6b);
                                          0: never (default 0)
                  --ha                    instead, a high-availability drill: a real etcd on loopback (needs
                                          etcd: deploy/install-deps.sh) and two nodes, n1 and n2, each
                                          cogd leader --ha --sync one over its own folder; clients that
                                          list every node and follow the leader themselves (no answer
                                          within 0.5 s, or an answer that is not a reply: the next node,
                                          same request id); no workers (default off)
                  --nodes N               with --ha: 2 or 3 nodes; the third, n3, is a spare standby: the
                                          sync key names one standby, and the spare is named in place of
                                          one whose connection is gone (default \(defaults.nodes))
                  --lease-ttl S           with --ha: the nodes' lease TTL, 2 to 3600 (default \(defaults.leaseTTL))
                  --fault-every D         with --ha: about D seconds after the last fault is over (the
                                          cluster answers again, every node runs, the sync key names
                                          the leader and a standby), the next one (default \(formatted(defaults.faultEvery)))
                  --faults F[,F…]         with --ha: the faults dealt, each kind in turn in a
                                          shuffled order, shuffled anew each round (default all):
                                          kill-leader    SIGKILL the leader, start it again after a moment
                                          wipe-leader    the same, its data folder destroyed: it starts
                                                         empty and must be sent a copy
                                          freeze-leader  SIGSTOP the leader just past the lease TTL, then
                                                         SIGCONT: it must step down (exit 1); started again
                                          kill-standby   SIGKILL the standby (replies wait for it), start
                                                         it again after a moment; with 3 nodes, the named
                                                         one half the time (kept down until the spare is
                                                         named in its place), else the spare
                                          freeze-etcd    SIGSTOP etcd for the TTL + 1.5 s, then SIGCONT:
                                                         the leader steps down at its deadline; nodes that
                                                         exit are started again once etcd runs
                                          crash-after-ship
                                                         the leader exits right after shipping a commit
                                                         to its standbys, before its own commit of it, so
                                                         a standby holds a turn it lacks; half the time it
                                                         is kept down until a standby leads (it returns
                                                         behind and catches up), else started again after
                                                         a moment (it most often leads again from its
                                                         shorter log, and the standby is sent a copy)

                A group drill's verdict adds, read from the turn log: times an account had
                two live instances (must be 0), times an account had no live owner past
                heartbeat timeout + 1 s of its owner's kill (0), effects applied twice for
                one instance, from a retired or another worker's one, or for another
                account than the instance's (0), and for each kill the
                time to its accounts' reopening on a survivor and to their greeters' first
                greeting there (p50, p99, max), beside the heartbeat timeout; it fails if a
                kill's accounts are not all greeted again within heartbeat timeout + 1 s.

                An HA drill's verdict is read after the run from the log of the node etcd
                names leader (the survivor): failovers (epochs led after the first, and
                per node), acknowledged transfers lost, applied twice, and acknowledged
                revisions the survivor's log lacks or holds for another request (each
                must be 0); the other nodes' logs, which must agree with the survivor's
                but for a deposed leader's tail (records of an earlier epoch); money
                conserved; no epoch led by two nodes (from the nodes' own "leads … in
                epoch" log lines), and each first answer sent by the node that led its
                record's epoch; frozen leaders that did not exit 1, and crash-after-ship
                cues a leader did not die on (0); and the time from the leader's kill,
                freeze or crash to the first applied answer (p50, p99, max) beside the
                TTL. It fails if any count is not 0 or that p99 is above the TTL + 1 s.
                A standby's kill and an etcd freeze are timed apart (to the first applied
                answer, from the kill and from etcd's thaw). With 3 nodes it also counts
                the times the sync key named the spare in place of a standby gone.

                Example:
                  \(cogd) drill --workers 3 --seconds 30 --seed 7 --json
                  \(cogd) drill --group-workers 3 --seconds 120 --heartbeat-timeout 2
                  \(cogd) drill --seconds 20 --report /tmp/drill-report
                  \(cogd) drill --ha --seconds 120 --lease-ttl 2 --faults kill-leader,freeze-leader
                  \(cogd) drill --ha --seconds 60 --report /tmp/ha-report
                  \(cogd) drill --ha --nodes 3 --seconds 60 --faults kill-standby,crash-after-ship
                """
        case "sim":
            let defaults = SimCommand.Options()
            let breakRules = wrapped(
                SimRule.allCases.map(\.rawValue) + [SimCommand.arbiterRule] + SimCommand.shippingRules,
                width: 56, indent: 22)
            return """

                Runs the leader's and the workers' cores (no sockets, no disk) on a
                simulated network, disk and clock under faults chosen by the seed, checks
                the invariants after every step, and stops at the first one broken,
                printing the seed, the step and the trace (exit 1).

                Among the faults: the leader's log keeps only its newest 2 to 24 turns
                (retention, drawn per seed), so a replica that falls behind is answered
                compacted and syncs from a snapshot and a late retry is answered expired;
                and now and then the workers' desk selector (sim.accounts) cannot be
                encoded for a while, which must retire nothing (selector-encoding).

                Options:
                  --seed N            run this seed (default \(defaults.seeds.lowerBound))
                  --seeds A-B         run seeds A to B (default: --seed's one)
                  --steps N           steps per seed, 1 to 100000000 (default \(defaults.steps))
                  --workers N         simulated workers, 1 to 16 (default \(defaults.workers))
                  --groups            the workers form one group: the leader places each scope member on
                                      one of them, and the checker holds it to that (default: off)
                  --arbiter           instead of the cluster, --workers nodes' arbiters (cogd leader --ha)
                                      against a model of etcd: the checker holds that a node whose
                                      release gate is open holds etcd's leader key (default: off)
                  --shipping          instead of the cluster, a leader's shipping rules (cogd leader
                                      --ha --sync) against 2 or 3 standbys and etcd's sync key, under
                                      standbys killed, frozen, wiped and cut off, sync key writes
                                      late or failed, and the leader crashing (a standby the sync key
                                      names takes the lead, or the leader again, in the next epoch):
                                      the checker holds that every standby the sync key names holds
                                      every commit released, that it names at most K, that releases
                                      never go back, that each new leader holds every commit released
                                      before it, that a leader stepping down keeps its last commit
                                      only when every standby etcd may name holds it, and that once
                                      faults stop everything shipped is released (default: off)
                  --sync MODE         with --shipping: one or quorum:2 for every seed (default: each
                                      seed draws one, and strict or a degrade-after)
                  --late-sync-writes  with --shipping: a sync key write the leader gave up on (no
                                      answer in time) may be applied by etcd later all the same,
                                      as any etcd request can, if the sync key is still as the
                                      leader read it (default: off, a failed write is not applied)
                  --break RULE        turn a rule off to see the checker catch it, again for more
                                      (default: none); exclusive-placement and worker-lease need
                                      --groups, \(SimCommand.arbiterRule) needs --arbiter, \(SimCommand.shippingRule)
                                      (the sync key names every standby in step, releases wait for
                                      the K fastest) needs --shipping, \(SimCommand.uncomparedRule)
                                      (sync key writes compare only the leader key, so a late one
                                      can land after a later one) needs --late-sync-writes,
                                      \(SimCommand.stepDownRule) (a leader stepping down keeps its last commit
                                      once the standbys the sync key names for certain hold it) and
                                      \(SimCommand.failoverRule) (any standby with a copy may take the lead
                                      when the leader crashes) need --shipping:
                                      \(breakRules)
                  --json              one JSON object (default: lines)

                Example:
                  \(cogd) sim --seeds 1-50 --steps 5000
                  \(cogd) sim --shipping --seeds 1-50 --steps 20000
                """
        case "bench":
            return """

                Graph shapes:   \(GraphBench.shapeNames.joined(separator: ", "))
                                (each beside a hand-written Swift baseline of the same computation
                                without the graph, measured in the same run, interleaved, its ratio
                                printed: "baselineKind": "hand-written"; grace beside its own,
                                stream beside the raw AsyncStream iteration)
                Log shapes:     \(LogBench.shapeNames.joined(separator: ", "))
                Cluster shapes: \(ClusterBench.shapeNames.joined(separator: ", "))
                With --standby: \(ClusterBench.standbyShapeNames.joined(separator: ", ")) (a cluster of two nodes on a
                                lab etcd, `leader --ha … --sync one --lease-ttl \(ClusterBench.standbyLeaseTTL)`: n1 leads, n2 is
                                its synchronous standby, so each reply waits for n2's acknowledgement
                                of its own commit. The round trip p50 through n1 beside a raw ZeroMQ
                                echo + two raw LMDB commits of the same run ("baselineKind":
                                "echo-plus-two-commits"; the line "round trip p50 with --sync one"
                                gives the ratio and whether it is within \(BenchFigure.format(ClusterBench.standbyRoundTripBar))×), p99; 16-client
                                turns/s beside raw LMDB appends; the failover: the leader SIGKILLed,
                                the time until its standby applies an op (the new leader, alone,
                                releases after --degrade-after \(ClusterBench.standbyDegradeAfter) s), --failovers times, the killed
                                node back as the standby between them; the median beside the lease
                                TTL ("baselineKind": "lease-ttl"), and failover-leads: until etcd's
                                leader key names the standby. etcd comes from deploy/install-deps.sh)
                Groups shapes:  \(GroupBench.shapeNames.joined(separator: ", ")) (a leader and a group of
                                that many ledger-greeter workers: greeter children opened and greeted
                                per second beside raw LMDB appends/s; with 2 and 4, the time from a
                                member's SIGKILL to its accounts reopened and greeted on the others,
                                p50/p99, beside the heartbeat timeout, 2 s, as "baselineKind":
                                "heartbeat-timeout")
                Retention:      one long run, no shapes: a leader with --retain-turns N fed
                                ledger.transfer ops (\(RetentionBench.window) in flight) for --total-turns, its
                                data.mdb read every --sample-every turns (a line each: file size,
                                free pages, retained revisions, record bytes). Then the file's
                                growth from the first sample past both the retention window
                                filling and half the run, to the end, beside what keeping those
                                turns would take (their record bytes, measured in the run:
                                "baselineKind": "kept-record-bytes"), and turns/s beside raw LMDB
                                appends/s. "plateaued" when the growth is under \(Int(RetentionBench.plateauFraction * 100))% of the
                                kept bytes; otherwise it says so and exits 1
                Quick:          the guard CI runs (deploy/test.sh). Its parts, each run as a
                                child `bench PART --only SHAPES --runs N --json`:
                \(QuickBench.parts.map { "                  \(padded($0.suite.rawValue, to: 9)) \($0.shapes.joined(separator: ", "))" }.joined(separator: "\n"))
                                and the floors their figures are held to (ratios to the
                                baseline of the same run; allocations a count):
                \(QuickBench.floors.map { "                  \(padded($0.figure, to: 38)) \($0.words)" }.joined(separator: "\n"))
                                A part with a figure past its floor is measured again, up to
                                \(QuickBench.measurements) times; the figure fails only when past in each. Exit 0: all
                                within; 3: a figure past its floor; 1: a part could not be measured

                Options:
                  --json              one JSON object per figure: {"name", "value", "unit"}; log figures
                                      add "baseline" and "ratio", the raw LMDB figure, graph figures
                                      their hand-written baseline ("baselineKind": "hand-written"), and
                                      graph.stream the raw AsyncStream iteration; retention prints
                                      each sample as a figure (retention.file-bytes.turns-N) as it is
                                      read, and its verdict line on stderr (default: lines)
                  --runs N            timed runs per shape, the median reported, 1 to 1000 (default 7;
                                      retention: whole runs, each with a fresh leader, default 1;
                                      quick: default \(QuickBench.defaultRuns))
                  --only S1,S2        run only these shapes (default: all of the suite's); quick:
                                      these parts
                  --report DIR        also write DIR/bench-SUITE.html: each figure drawn beside its
                                      baseline of the same run (two bars and the ratio), the others in
                                      a table; one self-contained file, inline SVG, nothing fetched.
                                      The suite runs as a child of this command (default: none)
                  --leader-spin-wait US
                                      cluster: start the leader with --spin-wait US (default 0)
                  --standby           cluster: measure a leader with a synchronous standby and the
                                      failover instead (shapes above; default off)
                  --failovers N       cluster --standby: times the leader is killed, 1 to 20 (default 3)
                  --curve             cluster: then measure the round trip p50 and the 16-client
                                      turns/s again against a second leader serving with CURVE,
                                      beside the same without (interleaved runs; "baselineKind":
                                      "without-curve" in JSON) (default off)
                  --retain-turns N    retention: the leader's --retain-turns (default \(RetentionBench.defaultRetainTurns))
                  --total-turns N     retention: transfers to apply; more than --retain-turns
                                      (default 4 × --retain-turns)
                  --sample-every N    retention: read data.mdb after each N transfers (default
                                      --retain-turns / 2)
                  --ports A-B         cluster, groups, retention: serve on loopback ports (127.0.0.1)
                                      picked free in A-B, 1024 ≤ A ≤ B ≤ 65535, all taken at the
                                      start and said in one line on stderr (and as "ports" in each
                                      --json figure); the range must hold what the run needs: cluster
                                      2, +2 with round-trip, +2 with --curve; --standby 6 (etcd and
                                      two nodes), +1 with round-trip; groups 2 per shape;
                                      retention 2 per run; quick: its cluster part's (default
                                      \(PortRange.standard))

                Build in release mode first: swift build -c release --product cogd-lab

                Example:
                  \(cogd) bench cluster --only round-trip --runs 3 --json
                  \(cogd) bench cluster --standby --runs 3 --failovers 3
                  \(cogd) bench groups --runs 5
                  \(cogd) bench retention --retain-turns 100000 --total-turns 400000 --sample-every 50000
                  \(cogd) bench quick
                """
        default:
            return ""
        }
    }

    /// Words joined by commas, broken into lines of at most `width`
    /// characters, each line after the first indented by `indent` spaces.
    private static func wrapped(_ words: [String], width: Int, indent: Int) -> String {
        var lines = [""]
        for (index, word) in words.enumerated() {
            let item = index == words.count - 1 ? word : word + ","
            if lines[lines.count - 1].isEmpty {
                lines[lines.count - 1] = item
            } else if lines[lines.count - 1].count + 1 + item.count <= width {
                lines[lines.count - 1] += " " + item
            } else {
                lines.append(item)
            }
        }
        return lines.joined(separator: "\n" + String(repeating: " ", count: indent))
    }

    /// A number of seconds as help prints it: `5`, `0.5`.
    static func formatted(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
