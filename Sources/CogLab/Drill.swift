import CogdCommandLine
import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab drill`: a crash-and-restart recovery drill on the real binaries. A
/// leader and workers run on loopback over a fresh data folder; pipelined
/// transfers flow through clients that retry with the same request id; the
/// leader and workers are killed with SIGKILL on a seeded schedule and
/// restarted; on another, a client sends `ledger.trap`, whose body kills the
/// leader (`--trap-op`), and the drill restarts it when it sees it die. The
/// verdict checks what an operator must be able to trust.
///
/// With `--curve` the same runs under CURVE: the leader, each worker and the
/// drill's clients authenticate with keys made in the data folder's `keys`
/// folder, and the leader lets in only what its peers file there lists
/// (`LoopbackCurveKeys`).
struct Drill {
    struct Options: Equatable {
        var workers = 2
        var seconds = 20
        var killLeaderEvery: Double = 5
        var killWorkerEvery: Double = 7
        /// About how often a client sends `ledger.trap` (one at a time); 0: never.
        var trapEvery: Double = 6
        var seed: UInt64 = 1
        var json = false
        /// Run the cluster with CURVE on: keys for the leader, each worker
        /// and the drill's clients, and a peers file listing them (`--curve`).
        var curve = false
        /// Run over this data folder (for example one prefilled with a large
        /// log) instead of a fresh one; it is kept afterwards.
        var dataFolder: String?
        /// Run a group of this many workers instead (`--group-workers`, 0: off):
        /// `GroupDrill`, worker kills only.
        var groupWorkers = 0
        /// The leader's heartbeat timeout in a group drill (`--heartbeat-timeout`).
        var heartbeatTimeout: Double = 2
        /// In a group drill, about how often a worker is frozen (SIGSTOP) past
        /// the heartbeat timeout and let go again (`--freeze-worker-every`; 0: never).
        var freezeWorkerEvery: Double = 0
        /// In a group drill, about how often a worker's link to the leader's
        /// requests socket is cut past the heartbeat timeout and mended
        /// (`--cut-worker-every`; 0: never). Each worker then talks to the
        /// leader through a `LinkRelay`.
        var cutWorkerEvery: Double = 0
        /// How often a group drill kills a worker unless `--kill-worker-every` says.
        static let groupKillWorkerEvery: Double = 5
        /// The loopback ports the leader serves on are picked free from this range (`--ports A-B`).
        var ports = PortRange.standard
        /// Write an HTML report of the run into this folder (`--report DIR`; `DrillReport`).
        var reportFolder: String?
        /// The report's file in `--report`'s folder.
        static let reportFileName = "drill-report.html"
        /// How many ports a drill takes (the leader's requests and turns endpoints).
        static let portsNeeded = 2
        /// Run the high-availability drill instead (`--ha`, `HADrill`): etcd and two or three nodes, no workers.
        var ha = false
        /// With `--ha`: how many nodes, 2 or 3 (`--nodes`); the third is a spare standby the sync key names only in place of another.
        var nodes = 2
        /// With `--ha`: the nodes' `--lease-ttl` (2–3600 s).
        var leaseTTL = 2
        /// With `--ha`: about how often a fault strikes, once the last one is over (`--fault-every`).
        var faultEvery: Double = 4
        /// With `--ha`: the faults drawn from (`--faults a,b,…`).
        var faults = HADrill.Fault.allCases

        /// Why `--data` cannot be run over: it already holds a turn log
        /// (`data.mdb` or `cogd.identity`), so the run would append to it and
        /// its verdict would not be the reproduce line's. Nil: empty or new.
        var dataFolderProblem: String? {
            guard let dataFolder else { return nil }
            guard let held = ["data.mdb", "cogd.identity"].first(where: { FileManager.default.fileExists(atPath: dataFolder + "/" + $0) }) else {
                return nil
            }
            return "--data names a folder that already holds a log (\(dataFolder)/\(held)); a drill over it would append to that log "
                + "and its verdict and reproduce line would not be this run's alone: give an empty or new folder"
        }

        /// A fresh data folder for a run without `--data` (removed afterwards): never one an earlier run left.
        static func freshFolder() -> String {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-drill-\(getpid())-\(UUID().uuidString)").path
            // Removed if the run is interrupted (as its own `defer` removes it otherwise).
            Child.interruptGuard?.add(folder: folder)
            return folder
        }

        /// ` --ports A-B` when not the default (for the reproduce line).
        var portsOption: String { ports == PortRange.standard ? "" : " --ports \(ports)" }
    }

    struct Verdict {
        var leaderKills = 0
        var workerKills = 0
        var sent = 0
        var applied = 0
        var unchanged = 0
        /// Answered `refused`: the op's body said no (an overdraft), nothing kept.
        var refused = 0
        var rejected = 0
        var retried = 0
        var lost: [String] = []
        var duplicated: [String] = []
        var problem: String?
        var moneyConserved = true
        var total = 0
        var expectedTotal = 0
        var unconverged: [String] = []
        var recoveries: [Double] = []
        var unanswered = 0
        /// Turns applied for a scope instance the log had already retired, or from another epoch.
        var retiredApplied: [String] = []
        /// Turns owned by a scope instance (the greeter's), and requests the leader refused as retired.
        var scopeOwned = 0
        var retiredRejected = 0
        /// `ledger.trap` requests sent; leader processes that died of one (not
        /// a drill kill); trap requests answered `rejected("crashed-leader: …")`.
        var trapRequests = 0
        var trapCrashes = 0
        var trapRejected = 0
        /// Trap requests answered otherwise, or never; and those that killed the leader more than once.
        var trapWrong: [String] = []
        var trapCrashLoops: [String] = []
        /// Other requests answered `crashed-leader`: drill kills twice while
        /// their body ran — one such kill only lets the retry run once more
        /// (`protocol/turnlog.md` §1a; rejected, never applied).
        var quarantined = 0
        /// Requests answered rejected whose turn is nevertheless in the log.
        var rejectedApplied: [String] = []
        /// Drill clients whose last security handshake with the leader failed
        /// (`--curve`: a key the leader does not let in), and why.
        var handshakeProblems: [String] = []
        /// Leader processes that stopped by themselves other than of a trap request.
        var unexpectedExits: [String] = []
        /// Records named `ledger.trap` (its body never writes).
        var trapRecords: [String] = []
        /// More `crashed-leader` answers than leader restarts (each start quarantines at most one request).
        var restarts = 0
        /// `crashed-leader` in the last leader process's status, and what it
        /// must be given how the process before it ended.
        var crashedLeaderCount: Int?
        var crashedLeaderExpected: ClosedRange<Int> = 0...0

        var violations: [String] {
            var list: [String] = []
            if !lost.isEmpty { list.append("\(lost.count) acknowledged turns lost (first: \(lost[0]))") }
            if !duplicated.isEmpty { list.append("\(duplicated.count) requests applied twice (first: \(duplicated[0]))") }
            if let problem { list.append("log: \(problem)") }
            if !moneyConserved { list.append("money not conserved: total \(total), expected \(expectedTotal)") }
            if !unconverged.isEmpty { list.append("replicas not converged: \(unconverged.joined(separator: ", "))") }
            if !retiredApplied.isEmpty { list.append("\(retiredApplied.count) turns applied from retired or dead-epoch instances (first: \(retiredApplied[0]))") }
            if !rejectedApplied.isEmpty { list.append("\(rejectedApplied.count) requests answered rejected but applied (first: \(rejectedApplied[0]))") }
            if !trapWrong.isEmpty { list.append("\(trapWrong.count) trap requests not answered crashed-leader (first: \(trapWrong[0]))") }
            if !trapCrashLoops.isEmpty { list.append("\(trapCrashLoops.count) trap requests killed the leader more than once (first: \(trapCrashLoops[0]))") }
            if !trapRecords.isEmpty { list.append("\(trapRecords.count) records named ledger.trap (first: \(trapRecords[0]))") }
            if !unexpectedExits.isEmpty { list.append("\(unexpectedExits.count) unexpected leader exits (first: \(unexpectedExits[0]))") }
            if !handshakeProblems.isEmpty {
                list.append("\(handshakeProblems.count) clients not let in by the leader (first: \(handshakeProblems[0]))")
            }
            if trapRejected + quarantined > restarts {
                list.append("\(trapRejected + quarantined) requests answered crashed-leader over \(restarts) leader restarts")
            }
            if let count = crashedLeaderCount, !crashedLeaderExpected.contains(count) {
                list.append("the last leader counts \(count) crashed-leader, expected \(crashedLeaderExpected.lowerBound)…\(crashedLeaderExpected.upperBound)")
            }
            return list
        }
    }

    /// The op that traps on demand (the leaders run with `--trap-op`).
    static let trapOpName = "ledger.trap"

    /// The name of worker `index` (under `--curve`, also its key's name and its peers line's).
    static func workerName(_ index: Int) -> String { "drill-w\(index)" }

    /// The name every drill client's requests carry starts so (`drill-c0-PID`):
    /// under `--curve` the clients' peers line is `KEY client drill-c* ledger.*`.
    static let clientNamePrefix = "drill-c"
    /// The ops the drill's clients may run under `--curve` (open, transfer, close, trap).
    static let clientOps = ["ledger.*"]

    /// How a leader process ended.
    enum LeaderEnd {
        /// The first process: nothing ended before it.
        case none
        case drillKill
        /// It died of a trap request's body.
        case trapCrash
        /// By itself, not of a trap request (a violation).
        case other
    }

    let options: Options
    /// The fault schedule's sequence: when each kill and trap comes, which
    /// worker, how long a restart waits. The load draws from a sequence of its
    /// own, so a rerun with the seed meets the same faults at the same times
    /// whatever the machine's speed made of the load.
    private var random: SplitMix64
    /// The load's sequence (the transfers' accounts and amounts).
    private var loadRandom: SplitMix64

    init(options: Options) {
        self.options = options
        random = SplitMix64(seed: options.seed)
        loadRandom = SplitMix64(seed: options.seed ^ 0x6C6F_6164)
    }

    /// Even workers run greeter scopes over the accounts (a durable source);
    /// odd ones concierge scopes over the wealthy accounts (an automatic cog
    /// the leader evaluates), which open and retire as money moves.
    static func rig(forWorker index: Int) -> String {
        index % 2 == 0 ? "ledger-greeter" : "ledger-concierge"
    }

    mutating func run() throws -> Int32 {
        // Interrupted (Ctrl-C, SIGTERM), every kind of drill stops the processes it started and removes
        // its fresh folder, instead of leaving them serving on their ports (`Child.interruptGuard`).
        let interruptGuard = LabInterruptGuard(what: "drill")
        Child.interruptGuard = interruptGuard
        defer {
            Child.interruptGuard = nil
            interruptGuard.end()
        }
        if options.groupWorkers > 0 {
            var group = GroupDrill(options: options)
            return try group.run()
        }
        if options.ha {
            var drill = HADrill(options: options)
            return try drill.run()
        }
        let folder = options.dataFolder ?? Options.freshFolder()
        defer { if options.dataFolder == nil { try? FileManager.default.removeItem(atPath: folder) } }
        if let problem = options.dataFolderProblem { throw LabError(message: problem) }
        let ports = try LoopbackPorts(range: options.ports, count: Options.portsNeeded)
        printError(ports.line("drill"))
        let requests = ports.nextEndpoint()
        let turns = ports.nextEndpoint()
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // Under --curve: keys for the leader, each worker and the clients, and the peers file, in DATA/keys.
        var curveKeys: LoopbackCurveKeys?
        if options.curve {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            curveKeys = try LoopbackCurveKeys(
                folder: folder + "/keys", workers: (0..<options.workers).map(Drill.workerName),
                clientNames: Drill.clientNamePrefix + "*", clientOps: Drill.clientOps)
        }
        let leaderCurve = curveKeys.map { ["--curve-secret", $0.leaderSecretFile, "--peers", $0.peersFile] } ?? []
        var verdict = Verdict()
        // The leader's stderr (the last process's): why it stopped, if not by a drill kill.
        let leaderErrors = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-drill-\(getpid())-leader.err").path
        defer { try? FileManager.default.removeItem(atPath: leaderErrors) }
        func startLeader() throws -> Child {
            // No crash backtrace (the "Fatal error:" line is still written): a
            // SIGKILL that lands while a trapped leader runs the backtracer
            // leaves `swift-backtrace` behind, blocked for good and holding
            // the leader's inherited descriptors (data.mdb, and the socket by
            // which Foundation learns that the child ended, so the drill
            // would never see it end).
            try Child(
                executable, ["leader", "--data", folder, "--requests", requests, "--turns", turns, "--trap-op"] + leaderCurve,
                errors: leaderErrors, environment: ["SWIFT_BACKTRACE": "enable=no"])
        }
        var leader = try startLeader()
        /// How the process before the current leader ended (what its start may quarantine).
        var previousLeaderEnd = LeaderEnd.none
        // Each worker's stderr (its last process's): why it stopped, if it did by itself.
        let workerErrors = (0..<options.workers).map {
            FileManager.default.temporaryDirectory.appendingPathComponent("cogd-drill-\(getpid())-w\($0).err").path
        }
        defer { for path in workerErrors { try? FileManager.default.removeItem(atPath: path) } }
        func startWorker(_ index: Int) throws -> Child {
            let name = Drill.workerName(index)
            let curve = curveKeys.map { ["--key", $0.workerKeyFiles[name]!, "--leader-key", $0.leaderPublicFile] } ?? []
            return try Child(
                executable, ["worker", "--leader", requests, "--name", name, "--rig", Drill.rig(forWorker: index)] + curve,
                errors: workerErrors[index], environment: ["SWIFT_BACKTRACE": "enable=no"])
        }
        var workers = try (0..<options.workers).map(startWorker)
        defer {
            leader.stop()
            for worker in workers { worker.stop() }
        }
        let context = try ZMQContext()
        defer { context.close() }
        let accounts = 10
        let opening = 1_000
        verdict.expectedTotal = accounts * opening
        let clients = try (0..<4).map {
            try DrillClient(context: context, endpoint: requests, name: "\(Drill.clientNamePrefix)\($0)-\(getpid())", keys: curveKeys?.clients)
        }
        // Closed before the context (which waits for every socket).
        defer { for client in clients { client.close() } }
        for account in 0..<accounts {
            clients[0].enqueue(op: "ledger.open", argument: ["account": .text("acct\(account)"), "balance": .unsigned(UInt64(opening))])
        }
        let start = ContinuousClock.now
        let end = start + .seconds(options.seconds)
        // With --report: answers and faults over time, in buckets (bounded by the run's length).
        let timeline = options.reportFolder == nil ? nil : DrillTimeline(start: start, seconds: options.seconds)
        /// The report's band for the leader's last death, until its next first applied turn.
        var openLeaderFault: Int?
        var nextLeaderKill = start + jitter(options.killLeaderEvery)
        var nextWorkerKill = start + jitter(options.killWorkerEvery)
        /// When the leader was last restarted, until its first applied turn.
        var leaderDownSince: ContinuousClock.Instant?
        var restartLeaderAt: ContinuousClock.Instant?
        var lastProgress = start
        var load = DrillLoad(accounts: accounts, churnPerForty: 2, churnOutstanding: 40)
        var nextTrap = options.trapEvery > 0 ? start + jitter(options.trapEvery) : nil
        /// Trap requests sent (by client), the one not yet answered (one at a
        /// time, so a leader that dies of a trap died of that one), and how
        /// many times each killed the leader.
        var trapRequests: [RequestID: Int] = [:]
        var trapInFlight: RequestID?
        var trapCrashesBy: [RequestID: Int] = [:]
        /// Classifies how the leader process ended and schedules its restart.
        func leaderEnded(byDrillKill: Bool, now: ContinuousClock.Instant) {
            let fault: (kind: DrillReport.Fault.Kind, detail: String)
            switch leader.ending {
            case .signal(SIGKILL) where byDrillKill:
                verdict.leaderKills += 1
                previousLeaderEnd = .drillKill
                fault = (.leaderKill, "leader SIGKILLed by the drill")
            case .signal(let signal) where (signal == SIGILL || signal == SIGTRAP) && trapInFlight != nil:
                // fatalError: SIGILL on x86_64, SIGTRAP on arm64.
                verdict.trapCrashes += 1
                trapCrashesBy[trapInFlight!, default: 0] += 1
                previousLeaderEnd = .trapCrash
                fault = (.trap, "leader died of \(trapInFlight!) (signal \(signal))")
            case let ending:
                verdict.unexpectedExits.append("\(ending)\(leader.lastErrorLine(in: leaderErrors).map { ": \($0)" } ?? "")")
                previousLeaderEnd = .other
                fault = (.leaderExit, "leader \(ending)")
            }
            if let timeline {
                if let open = openLeaderFault {
                    timeline.endFault(open, at: now, detail: timeline.faults[open].detail + "; died again before a turn was applied")
                }
                openLeaderFault = timeline.fault(fault.kind, at: now, detail: fault.detail)
            }
            verdict.restarts += 1
            restartLeaderAt = now + .milliseconds(Int64(50 + random.next() % 250))
        }
        while ContinuousClock.now < end || clients.contains(where: { $0.outstanding > 0 }) || restartLeaderAt != nil {
            let now = ContinuousClock.now
            if now > end + .seconds(30) { break }
            if let id = trapInFlight, let client = trapRequests[id], clients[client].answers[id] != nil { trapInFlight = nil }
            if restartLeaderAt == nil, !leader.isRunning {
                // Not a drill kill: the leader stopped by itself (a trap request, or a failure).
                leaderEnded(byDrillKill: false, now: now)
            }
            if now < end {
                // Churned accounts open a greeter scope on every worker, and retire
                // it at closing — with greetings still in flight.
                try load.feed(transfers: clients, churn: clients[3], random: &loadRandom)
                if let at = nextTrap, now >= at {
                    if trapInFlight == nil {
                        let client = Int(random.next() % UInt64(clients.count))
                        let id = clients[client].enqueue(
                            op: Drill.trapOpName, argument: [:], raw: try CBOREncoder().encode("drill trap \(trapRequests.count + 1)"))
                        trapRequests[id] = client
                        trapInFlight = id
                    }
                    nextTrap = now + jitter(options.trapEvery)
                }
                if now >= nextLeaderKill, restartLeaderAt == nil {
                    // A leader dying of a trap just now is counted as such, not as this kill.
                    leader.killHard()
                    leaderEnded(byDrillKill: true, now: now)
                    nextLeaderKill = now + jitter(options.killLeaderEvery)
                }
                if now >= nextWorkerKill, !workers.isEmpty {
                    let index = Int(random.next() % UInt64(workers.count))
                    workers[index].killHard()
                    verdict.workerKills += 1
                    timeline?.fault(.workerKill, at: now, detail: "\(Drill.workerName(index)) SIGKILLed and started again")
                    workers[index] = try startWorker(index)
                    nextWorkerKill = now + jitter(options.killWorkerEvery)
                }
            }
            if let at = restartLeaderAt, now >= at {
                leader = try startLeader()
                leaderDownSince = ContinuousClock.now
                restartLeaderAt = nil
            }
            for client in clients { try client.pump(now: now) }
            let ready = try ZMQSocket.poll(clients.map(\.socket), timeout: .milliseconds(5))
            for (index, client) in clients.enumerated() where ready[index] {
                let firstApplied = try client.receiveReplies(timeline: timeline)
                if firstApplied, let down = leaderDownSince {
                    let recovered = ContinuousClock.now
                    let milliseconds = ClusterBench.seconds(recovered - down) * 1_000
                    verdict.recoveries.append(milliseconds)
                    leaderDownSince = nil
                    if let timeline, let open = openLeaderFault {
                        timeline.endFault(
                            open, at: recovered,
                            detail: timeline.faults[open].detail + String(format: "; restarted, first applied turn %.0f ms after the restart", milliseconds))
                        openLeaderFault = nil
                    }
                }
            }
            if now - lastProgress >= .seconds(1) {
                lastProgress = now
                // The handshake events queue up: read them now and then.
                for client in clients { try client.checkHandshakes() }
                if !options.json {
                    let answered = clients.reduce(0) { $0 + $1.answers.count }
                    let elapsed = Int(ClusterBench.seconds(now - start))
                    print("drill t=\(elapsed)s sent \(clients.reduce(0) { $0 + $1.sent }) answered \(answered) kills leader \(verdict.leaderKills) worker \(verdict.workerKills) traps \(trapRequests.count) (leader died of \(verdict.trapCrashes))")
                    fflush(nil)
                }
            }
        }
        for client in clients {
            try client.checkHandshakes()
            if let problem = client.handshakeProblem { verdict.handshakeProblems.append("\(client.name): \(problem)") }
        }
        // Quiesce: let workers catch up, then read the verdict.
        var status: LeaderStatus?
        // (A worker restarted under its name may wait out the heartbeat timeout
        // before it holds the name again; on a loaded machine that takes a while.)
        let settleDeadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < settleDeadline {
            if case .status(let current)? = try CogdCommandLine.request(
                .statusRequest, leader: requests, timeout: .seconds(2), keys: curveKeys?.clientKeyFiles) {
                status = current
                if current.workers.count == options.workers && current.workers.allSatisfy({ $0.lag == 0 && $0.appliedRevision == current.revision }) { break }
            }
            usleep(200_000)
        }
        if let status {
            verdict.retiredRejected = Int(status.count(.retiredScope))
            verdict.crashedLeaderCount = Int(status.count(.crashedLeader))
            let behind = status.workers.filter { $0.appliedRevision != status.revision }.map { "\($0.name) at \($0.appliedRevision) of \(status.revision)" }
            verdict.unconverged = behind
            if status.workers.count < options.workers { verdict.unconverged.append("\(options.workers - status.workers.count) workers not reporting") }
            let listed = Set(status.workers.map(\.name))
            for (index, worker) in workers.enumerated() where worker.isRunning && !listed.contains(Drill.workerName(index)) {
                // Running yet not listed: what it last said is the clue.
                verdict.unconverged.append(
                    "\(Drill.workerName(index)) running but not listed\(worker.lastLines(in: workerErrors[index]).map { ", last said: \($0)" } ?? ", said nothing")")
            }
            for (index, worker) in workers.enumerated() where !worker.isRunning {
                // The drill restarts workers only after its own kills.
                verdict.unconverged.append(
                    "drill-w\(index) \(worker.ending)\(worker.lastErrorLine(in: workerErrors[index]).map { ": \($0)" } ?? "")")
            }
        } else {
            verdict.unconverged = ["the leader did not answer status"]
        }
        leader.stop()
        for worker in workers { worker.stop() }
        // A start quarantines at most the one request the process before it
        // was running: surely one after a trap crash, maybe one after a kill
        // (when that request was running at an earlier kill too).
        switch previousLeaderEnd {
        // (Every run starts on an empty folder: `--data` holding a log is refused.)
        case .none: verdict.crashedLeaderExpected = 0...0
        case .trapCrash: verdict.crashedLeaderExpected = 1...1
        case .drillKill, .other: verdict.crashedLeaderExpected = 0...1
        }

        let store = try TurnStore(directory: folder, mode: .reader)
        let report = try store.verify()
        verdict.problem = report.problem
        var appliedBy: [RequestID: [UInt64]] = [:]
        var retiredInstances = Set<UInt64>()
        for record in try store.records(from: 1) {
            if let request = record.origin.request { appliedBy[request, default: []].append(record.revision) }
            if record.name == Drill.trapOpName || record.origin.request.map({ trapRequests[$0] != nil }) == true {
                verdict.trapRecords.append("revision \(record.revision) named \(record.name)")
            }
            if let instance = record.origin.instance {
                verdict.scopeOwned += 1
                if retiredInstances.contains(instance) {
                    verdict.retiredApplied.append("revision \(record.revision) from retired instance \(instance)")
                } else if instance >> 32 != record.epoch {
                    verdict.retiredApplied.append("revision \(record.revision) (epoch \(record.epoch)) from instance \(instance) of epoch \(instance >> 32)")
                }
            }
            for event in record.scopeEvents where event.kind == .retire { retiredInstances.insert(event.instance) }
        }
        for client in clients {
            verdict.sent += client.sent
            verdict.retried += client.retried
            verdict.unanswered += client.outstanding
            for (request, outcome) in client.answers {
                switch outcome {
                case .applied(let revision):
                    verdict.applied += 1
                    if appliedBy[request]?.contains(revision) != true { verdict.lost.append("\(request) at revision \(revision)") }
                case .unchanged: verdict.unchanged += 1
                case .refused:
                    verdict.refused += 1
                    if let revisions = appliedBy[request] { verdict.rejectedApplied.append("\(request) (refused) at revisions \(revisions)") }
                case .rejected(let code, _):
                    verdict.rejected += 1
                    if let revisions = appliedBy[request] { verdict.rejectedApplied.append("\(request) at revisions \(revisions)") }
                    if code == .crashedLeader, trapRequests[request] == nil { verdict.quarantined += 1 }
                }
            }
        }
        verdict.trapRequests = trapRequests.count
        for (request, client) in trapRequests.sorted(by: { $0.key.sequence < $1.key.sequence }) {
            switch clients[client].answers[request] {
            case .rejected(.crashedLeader, _)?: verdict.trapRejected += 1
            case let outcome?: verdict.trapWrong.append("\(request) answered \(outcome)")
            case nil: verdict.trapWrong.append("\(request) unanswered")
            }
        }
        verdict.trapCrashLoops = trapCrashesBy.filter { $0.value > 1 }.map { "\($0.key) killed it \($0.value) times" }.sorted()
        verdict.duplicated = appliedBy.filter { $0.value.count > 1 }.map { "\($0.key) at revisions \($0.value)" }.sorted()
        verdict.total = 0
        for entry in try store.stateEntries() where entry.name == "ledger.balance" {
            // Checked: a balance read from the file must not trap the drill; a sum that overflows saturates (and is not conserved).
            let (sum, overflow) = verdict.total.addingReportingOverflow((try? CBORDecoder().decode(Int.self, from: entry.value)) ?? 0)
            verdict.total = overflow ? Int.max : sum
        }
        verdict.moneyConserved = verdict.total == verdict.expectedTotal
        var reportFile: String?
        if let timeline, let reportFolder = options.reportFolder {
            reportFile = try Drill.writeReport(
                timeline.report(
                    title: "cogd-lab drill, seed \(options.seed): \(options.workers) workers, \(options.seconds) s",
                    loadSeconds: options.seconds, recoveryLines: recoveryLines(verdict),
                    verdictLines: render(verdict, turns: report.turns, ports: ports, json: false, reportFile: nil).split(separator: "\n").map(String.init)),
                into: reportFolder)
        }
        print(render(verdict, turns: report.turns, ports: ports, json: options.json, reportFile: reportFile))
        return verdict.violations.isEmpty ? 0 : 1
    }

    /// Writes `report`'s page into `folder` (made when missing) as `drill-report.html`; says where on stderr; returns its path.
    static func writeReport(_ report: DrillReport, into folder: String) throws -> String {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = URL(fileURLWithPath: folder).appendingPathComponent(Options.reportFileName).path
        try Data(DrillReport.html(report).utf8).write(to: URL(fileURLWithPath: path))
        printError("drill: report written to \(path)")
        return path
    }

    /// The report's recovery lines: the figures, then each restart.
    private func recoveryLines(_ verdict: Verdict) -> [String] {
        let recoveries = verdict.recoveries
        guard !recoveries.isEmpty else { return ["no leader restart reached an applied turn"] }
        return [
            String(
                format: "leader restart → first applied turn: p50 %.0f ms, p99 %.0f ms, max %.0f ms over %d restarts",
                ClusterBench.percentile(recoveries, 0.5), ClusterBench.percentile(recoveries, 0.99), recoveries.max() ?? 0, recoveries.count)
        ] + recoveries.enumerated().map { String(format: "restart %d: %.0f ms", $0.offset + 1, $0.element) }
    }

    private mutating func jitter(_ every: Double) -> Duration { random.jitter(every) }

    private func render(_ verdict: Verdict, turns: Int, ports: LoopbackPorts, json: Bool, reportFile: String?) -> String {
        let recoveries = verdict.recoveries
        let p50 = ClusterBench.percentile(recoveries, 0.5)
        let p99 = ClusterBench.percentile(recoveries, 0.99)
        // Without --data: a run's folder is always fresh, and the one given now holds this run's log.
        let command = "cogd-lab drill --workers \(options.workers) --seconds \(options.seconds) --kill-leader-every \(options.killLeaderEvery) --kill-worker-every \(options.killWorkerEvery) --trap-every \(options.trapEvery) --seed \(options.seed)\(options.curve ? " --curve" : "")\(options.portsOption)"
        if json {
            return "{\"seed\": \(options.seed), \"command\": \(CBORText.quoted(command)), \"leaderKills\": \(verdict.leaderKills), "
                + "\"workerKills\": \(verdict.workerKills), \"sent\": \(verdict.sent), \"applied\": \(verdict.applied), "
                + "\"unchanged\": \(verdict.unchanged), \"refused\": \(verdict.refused), \"rejected\": \(verdict.rejected), \"retried\": \(verdict.retried), "
                + "\"unanswered\": \(verdict.unanswered), \"turns\": \(turns), \"lost\": \(verdict.lost.count), "
                + "\"duplicated\": \(verdict.duplicated.count), \"logSound\": \(verdict.problem == nil), "
                + "\"moneyConserved\": \(verdict.moneyConserved), \"replicasConverged\": \(verdict.unconverged.isEmpty), "
                + "\"scopeOwnedTurns\": \(verdict.scopeOwned), \"retiredScopeRejections\": \(verdict.retiredRejected), "
                + "\"retiredInstanceApplications\": \(verdict.retiredApplied.count), "
                + "\"trapRequests\": \(verdict.trapRequests), \"trapCrashes\": \(verdict.trapCrashes), "
                + "\"trapRejectedCrashedLeader\": \(verdict.trapRejected), \"quarantined\": \(verdict.quarantined), "
                + "\"rejectedButApplied\": \(verdict.rejectedApplied.count), \"unexpectedLeaderExits\": \(verdict.unexpectedExits.count), "
                + "\"lastLeaderCrashedLeaderCount\": \(verdict.crashedLeaderCount.map(String.init) ?? "null"), "
                + "\"curve\": \(options.curve), \"handshakeProblems\": \(verdict.handshakeProblems.count), "
                + "\"recoveryMsP50\": \(p50), \"recoveryMsP99\": \(p99), \"ports\": \(ports.json), \"report\": \(reportFile.map(CBORText.quoted) ?? "null"), \"violations\": [\(verdict.violations.map(CBORText.quoted).joined(separator: ", "))]}"
        }
        let clientsLine = "\(Drill.clientNamePrefix)*, \(Drill.clientOps.joined(separator: " "))"
        let letIn = verdict.handshakeProblems.isEmpty ? "every client let in" : "\(verdict.handshakeProblems.count) clients NOT let in"
        let authentication =
            options.curve
            ? "CURVE on: leader, \(options.workers) worker keys and a client key (\(clientsLine)) in the peers file; \(letIn)"
            : "none (CURVE off; loopback)"
        var lines = [
            "drill verdict (seed \(options.seed))",
            "  authentication   \(authentication)",
            "  kills            leader \(verdict.leaderKills), workers \(verdict.workerKills)",
            "  requests         the drill's client sent \(verdict.sent): applied \(verdict.applied), unchanged \(verdict.unchanged), refused \(verdict.refused), rejected \(verdict.rejected), retried \(verdict.retried), unanswered \(verdict.unanswered)",
            "  log              \(turns) turns, \(verdict.problem.map { "PROBLEM: \(escaped: $0)" } ?? "contiguous, decodes, state equals replay")",
            "  lost             \(verdict.lost.count)",
            "  duplicated       \(verdict.duplicated.count)",
            "  money            \(verdict.total) of \(verdict.expectedTotal) \(verdict.moneyConserved ? "(conserved)" : "(NOT conserved)")",
            "  replicas         \(verdict.unconverged.isEmpty ? "converged" : "NOT converged: \(escaped: verdict.unconverged.joined(separator: "; "))")",
            "  scopes           \(verdict.scopeOwned) turns owned by scope instances, \(verdict.retiredRejected) late requests from retired instances refused by the leader (retired-scope: the workers' own, not the client's), \(verdict.retiredApplied.count) applied from retired or dead-epoch instances",
            "  traps            \(verdict.trapRequests) ledger.trap requests, \(verdict.trapCrashes) killed the leader, \(verdict.trapRejected) answered rejected(crashed-leader), \(verdict.trapCrashLoops.count) killed it twice, \(verdict.trapRecords.count) in the log",
            "  quarantined      \(verdict.quarantined) other requests answered crashed-leader (drill kills twice while their body ran); "
                + "requests answered rejected yet in the log: \(verdict.rejectedApplied.isEmpty ? "none" : "\(verdict.rejectedApplied.count) (VIOLATION)")",
            "  last leader      counts \(verdict.crashedLeaderCount.map(String.init) ?? "?") crashed-leader (expected \(verdict.crashedLeaderExpected.lowerBound == verdict.crashedLeaderExpected.upperBound ? "\(verdict.crashedLeaderExpected.lowerBound)" : "\(verdict.crashedLeaderExpected.lowerBound)–\(verdict.crashedLeaderExpected.upperBound)")), \(verdict.unexpectedExits.count) unexpected exits",
            "  recovery         leader restart → first applied turn p50 \(String(format: "%.0f", p50)) ms, p99 \(String(format: "%.0f", p99)) ms",
            "  reproduce        \(command)",
        ]
        lines.append(verdict.violations.isEmpty ? "PASS" : "FAIL: " + verdict.violations.map { "\(escaped: $0)" }.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }
}

/// A child `cogd` process of the drill.
final class Child {
    private let process = Process()
    /// The guard of the run under way: each child started meanwhile is
    /// stopped if the run is interrupted (set and cleared by the run, on its
    /// own thread, before and after it starts any child).
    nonisolated(unsafe) static var interruptGuard: LabInterruptGuard?
    private let interruptGuard = Child.interruptGuard

    /// How the process ended.
    enum Ending: Equatable, CustomStringConvertible {
        case running
        case exited(Int32)
        case signal(Int32)

        var description: String {
            switch self {
            case .running: "still running"
            case .exited(let status): "exited with status \(status)"
            case .signal(let signal): "killed by signal \(signal) (\(String(cString: strsignal(signal))))"
            }
        }
    }

    /// `errors`: a file that receives the process's stderr (created anew).
    /// `environment`: variables set for the child on top of the drill's.
    init(_ executable: URL, _ arguments: [String], errors: String? = nil, environment: [String: String] = [:]) throws {
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardOutput = FileHandle.nullDevice
        if let errors, FileManager.default.createFile(atPath: errors, contents: nil), let handle = FileHandle(forWritingAtPath: errors) {
            process.standardError = handle
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        interruptGuard?.add(process)
        // Its stderr file goes with the run's folders if the run is interrupted.
        if let errors { interruptGuard?.add(folder: errors) }
    }

    var isRunning: Bool { process.isRunning }

    var processIdentifier: pid_t { process.processIdentifier }

    var ending: Ending {
        if process.isRunning { return .running }
        return process.terminationReason == .uncaughtSignal ? .signal(process.terminationStatus) : .exited(process.terminationStatus)
    }

    /// The last `Error:` or `Fatal error:` line the process wrote to `errors`.
    func lastErrorLine(in errors: String) -> String? {
        guard let text = try? String(contentsOfFile: errors, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").last { $0.contains("Error:") || $0.contains("Fatal error:") }.map(String.init)
    }

    /// The last few lines the process wrote to its error file, joined with " | ".
    func lastLines(in errors: String, count: Int = 3) -> String? {
        guard let text = try? String(contentsOfFile: errors, encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n").suffix(count)
        return lines.isEmpty ? nil : lines.map { TerminalText.escaped(String($0)) }.joined(separator: " | ")
    }

    /// Freezes the process (SIGSTOP), as a stalled host or a paused VM would.
    func freeze() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGSTOP)
    }

    /// Lets a frozen process run again (SIGCONT).
    func thaw() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGCONT)
    }

    func killHard() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        // Foundation learns of the exit when every holder of the child's
        // end of its status socket is gone (see `init`): normally at once.
        for _ in 0..<5_000 where process.isRunning { usleep(2_000) }
        if !process.isRunning { interruptGuard?.remove(process) }
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<1_000 where process.isRunning { usleep(5_000) }
        if process.isRunning { killHard() }
        if !process.isRunning { interruptGuard?.remove(process) }
    }
}

/// A pipelining client that retries a request with the same id until answered.
final class DrillClient {
    let socket: ZMQSocket
    let name: String
    /// Watches the security handshakes under CURVE (nil without keys).
    private let handshakes: HandshakeWatch?
    /// The last handshake failure not followed by a success, as of the last `checkHandshakes()`.
    private(set) var handshakeProblem: HandshakeWatch.Problem?
    private var nextSequence: UInt64 = 1
    private var inFlight: [RequestID: (frame: [UInt8], sentAt: ContinuousClock.Instant)] = [:]
    /// When each request in flight was first sent (its latency runs from there to its answer).
    private var firstSent: [RequestID: ContinuousClock.Instant] = [:]
    private(set) var answers: [RequestID: OpReply.Outcome] = [:]
    private(set) var sent = 0
    private(set) var retried = 0
    var outstanding: Int { inFlight.count }

    /// `keys`: connect with CURVE (the leader's peers file must list the pair, under a name pattern `name` matches).
    init(context: ZMQContext, endpoint: String, name: String, keys: CurveClientKeys? = nil) throws {
        self.name = name
        socket = try ZMQSocket(context, .dealer, linger: .zero)
        try socket.setIdentity(name)
        try socket.setReconnect(initial: 20, maximum: 200)
        try socket.useCurve(keys)
        handshakes = keys == nil ? nil : try HandshakeWatch(socket)
        try socket.connect(endpoint)
    }

    /// Reads the handshake events so far into `handshakeProblem`: call it
    /// now and then (the events queue up), and before judging.
    func checkHandshakes() throws {
        handshakeProblem = try handshakes?.problem()
    }

    /// Closes the watch and the socket (before the context closes).
    func close() {
        handshakes?.close()
        socket.close()
    }

    @discardableResult
    func enqueue(op: String, argument: [String: CBORValue], raw: [UInt8]? = nil) -> RequestID {
        let request = RequestID(worker: name, sequence: nextSequence)
        nextSequence += 1
        guard let bytes = raw ?? (try? CBOREncoder().encode(argument)) else { return request }
        let frame = WireMessage.op(OpRequest(request: request, op: op, argument: bytes)).encoded()
        inFlight[request] = (frame, .now - .seconds(3600))
        sent += 1
        return request
    }

    /// Sends requests never sent, and re-sends (same id) those unanswered for 1 s.
    func pump(now: ContinuousClock.Instant) throws {
        for (request, entry) in inFlight where now - entry.sentAt > .seconds(1) {
            if entry.sentAt > now - .seconds(3000) { retried += 1 } else { firstSent[request] = now }
            _ = try socket.send([entry.frame], wait: false)
            inFlight[request] = (entry.frame, now)
        }
    }

    /// Takes the replies waiting; returns whether one was an applied turn.
    /// `timeline`: records each answer's time and latency (first send → answer).
    func receiveReplies(timeline: DrillTimeline? = nil) throws -> Bool {
        var sawApplied = false
        while let frames = try socket.receive() {
            guard case .reply(let reply)? = try? WireMessage.decode(frames[frames.count - 1]) else { continue }
            guard inFlight.removeValue(forKey: reply.request) != nil else { continue }
            let sent = firstSent.removeValue(forKey: reply.request)
            answers[reply.request] = reply.outcome
            var applied = false
            if case .applied = reply.outcome { applied = true }
            if applied { sawApplied = true }
            if let timeline, let sent {
                let now = ContinuousClock.now
                timeline.answer(at: now, latency: now - sent, applied: applied)
            }
        }
        return sawApplied
    }
}

/// A small seeded generator: the same seed gives the same kill schedule.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// About `every` seconds: from half of it to one and a half times it, drawn from the sequence.
    mutating func jitter(_ every: Double) -> Duration {
        let fraction = 0.5 + Double(next() % 1_000) / 1_000
        return .milliseconds(Int64(every * fraction * 1_000))
    }
}

/// The drills' steady load: pipelined transfers among `accounts` (`acct0`…),
/// and now and then an empty account (`churn0`…`churn2`) opened or closed.
struct DrillLoad {
    let accounts: Int
    /// Of every 40 transfers, how many are followed by a churn request.
    let churnPerForty: Int
    /// The churn client's most requests unanswered.
    let churnOutstanding: Int
    /// Each transfer client's most requests unanswered.
    var transferOutstanding = 32
    private var transfers = 0

    init(accounts: Int, churnPerForty: Int, churnOutstanding: Int) {
        self.accounts = accounts
        self.churnPerForty = churnPerForty
        self.churnOutstanding = churnOutstanding
    }

    /// Tops up each of `transfers` to `transferOutstanding` with a transfer
    /// between two different accounts, then maybe sends `churn` one opening
    /// or closing.
    mutating func feed<Client: DrillLoadClient>(transfers clients: [Client], churn: Client, random: inout SplitMix64) throws {
        for client in clients where client.outstanding < transferOutstanding {
            let from = Int(random.next() % UInt64(accounts))
            let to = (from + 1 + Int(random.next() % UInt64(accounts - 1))) % accounts
            client.enqueue(op: "ledger.transfer", argument: [
                "from": .text("acct\(from)"), "to": .text("acct\(to)"), "amount": .unsigned(1 + random.next() % 50),
            ], raw: nil)
            transfers += 1
        }
        guard transfers % 40 < churnPerForty, churn.outstanding < churnOutstanding else { return }
        let name = "churn\(transfers % 3)"
        if transfers % 2 == 0 {
            churn.enqueue(op: "ledger.open", argument: ["account": .text(name), "balance": .unsigned(0)], raw: nil)
        } else {
            churn.enqueue(op: "ledger.close", argument: [:], raw: try CBOREncoder().encode(name))
        }
    }
}
