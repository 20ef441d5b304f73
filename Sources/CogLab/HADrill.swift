import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import CogdCommandLine
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab drill --ha`: a high-availability drill on the real binaries. A
/// real etcd on loopback decides which of two or three nodes (`cogd leader
/// --ha --sync one`, n1, n2 and n3, each with its own data folder) leads;
/// with three, the sync key names one standby and the other is a spare.
/// Pipelined transfers flow through clients that follow the leader
/// themselves (`HAClient`) and retry with the same request id; on a seeded
/// schedule the drill kills, wipes and freezes the leader, makes it die
/// between shipping a commit and its own commit of it, kills a standby and
/// freezes etcd. The verdict, read from the log of the node that leads at
/// the end, checks that nothing acknowledged was lost or applied twice,
/// that every revision released is in that log, that the other nodes' logs
/// agree with it, that no epoch had two leaders, and how long the cluster
/// took to answer again. No workers.
struct HADrill {
    /// The faults, in the order they were added; each run draws from those `--faults` names.
    enum Fault: String, CaseIterable, Equatable, Sendable {
        /// SIGKILL the leader; start it again after a moment (as a standby).
        case killLeader = "kill-leader"
        /// SIGKILL the leader and destroy its data folder; start it again on an empty one (it must be sent a copy).
        case wipeLeader = "wipe-leader"
        /// SIGSTOP the leader past its lease, then SIGCONT: it must step down (exit 1) releasing nothing; start it again.
        case freezeLeader = "freeze-leader"
        /// SIGKILL a standby (the leader holds its replies meanwhile); start it again after a moment. With three
        /// nodes, the named standby half the time (kept down until the spare is named in its place), else the spare.
        case killStandby = "kill-standby"
        /// SIGSTOP etcd past the lease, then SIGCONT: the leader steps down at its deadline; service resumes.
        case freezeEtcd = "freeze-etcd"
        /// The leader exits 70 right after shipping a commit, before its own commit of it (`CrashAfterShip`): a
        /// standby may hold a commit the leader lacks. Half the time the leader is kept down until a standby
        /// leads, and returns behind it; else it is started again after a moment and, revoking its lease, most
        /// often leads again from its shorter log, the standby's extra commit replaced by a copy.
        case crashAfterShip = "crash-after-ship"

        /// Whether the leader's service moves (or may move) to another node: its time counts as a failover.
        var isFailover: Bool { self != .killStandby && self != .freezeEtcd }

        /// Its band on the `--report` page.
        var reportKind: DrillReport.Fault.Kind {
            switch self {
            case .killLeader: .haLeaderKill
            case .wipeLeader: .haLeaderWipe
            case .freezeLeader: .haLeaderFreeze
            case .killStandby: .haStandbyKill
            case .freezeEtcd: .haEtcdFreeze
            case .crashAfterShip: .haCrashAfterShip
            }
        }
    }

    static let cluster = "drill"
    /// The answers' outcomes, in the verdict's order.
    static let outcomeNames = ["applied", "unchanged", "refused", "rejected"]
    /// The numbers of nodes a drill runs (`--nodes`).
    static let nodeCounts = 2...3
    /// Ports a run of `nodes` nodes takes: etcd's client and peer, and each node's requests and turns.
    static func portsNeeded(nodes: Int) -> Int { 2 + 2 * nodes }

    /// Why a leader's `standby-copy` line says its standby was not in step, as
    /// a verdict key: its folder was empty (first start, a destroyed folder),
    /// the commits it lacked were no longer kept (the leader started after
    /// them: every node stopped, as when etcd was frozen), or it held another
    /// leader's tail (a record of another epoch at its revision, past the
    /// leader's last, or a last commit not in the leader's log); ha.md §9.
    static func copyCause(_ line: Substring) -> String {
        if line.contains("its folder holds no log yet") { return "empty-folder" }
        if line.contains("are no longer all kept") || line.contains("is not among the commits this leader keeps") { return "commits-not-kept" }
        if line.contains("it has applied epoch") || line.contains("is past this log's last") || line.contains("a deposed leader's tail") {
            return "another-tail"
        }
        return "other"
    }

    /// The verdict's copy causes, in the order it names them, with their words.
    static let copyCauseNames: KeyValuePairs<String, String> = [
        "empty-folder": "to an empty folder", "commits-not-kept": "whose missing commits were no longer kept",
        "another-tail": "holding another leader's tail", "other": "for another cause",
    ]

    /// `copyCauses` as the verdict's words: ": 4 to an empty folder, 3 whose …", or nothing without a copy.
    static func copyCauseWords(_ causes: [String: Int]) -> String {
        let parts = copyCauseNames.compactMap { cause in causes[cause.key].map { "\($0) \(cause.value)" } }
        return parts.isEmpty ? "" : ": " + parts.joined(separator: ", ")
    }
    /// How long a named standby killed in a three-node run is kept down at most, waiting for the spare to be
    /// named in its place (the leader drops it after its heartbeat timeout, 5 s by default); a leader that
    /// crashed after shipping, waiting for a standby to take over (past the lease TTL), this beyond the TTL.
    static let replacementWait = Duration.seconds(12)
    /// How long a leader given the crash-after-ship cue may take to ship a commit and die.
    static let crashWait = Duration.seconds(10)

    /// One node: its folder and endpoints, its process now, and every process's stderr file.
    final class Node {
        let name: String
        let folder: String
        let requests: String
        let turns: String
        var process: Child?
        var errorFiles: [String] = []
        /// When to start it again (after a drill kill or its own exit).
        var restartAt: ContinuousClock.Instant?
        /// The drill froze it (SIGSTOP) and let it go: it must exit 1 by itself.
        var mustStepDown: ContinuousClock.Instant?
        /// When its current process started.
        var startedAt = ContinuousClock.now
        /// A node the drill keeps down until another takes its part (`ActiveFault.replaced`), at most until then.
        var heldDownUntil: ContinuousClock.Instant?
        /// The file whose presence makes it, leading, die after its next shipped commit (`CrashAfterShip`).
        let crashTrigger: String

        init(name: String, folder: String, requests: String, turns: String, crashTrigger: String) {
            self.name = name
            self.folder = folder
            self.requests = requests
            self.turns = turns
            self.crashTrigger = crashTrigger
        }

        var isRunning: Bool { process?.isRunning == true }
    }

    /// A fault in progress.
    struct ActiveFault {
        var kind: Fault
        /// The node it struck (nil: etcd).
        var node: Int?
        var at: ContinuousClock.Instant
        /// When the frozen process (the leader or etcd) is let go.
        var thawAt: ContinuousClock.Instant?
        /// From when a recovery is timed (the fault; for etcd, its thaw).
        var timedFrom: ContinuousClock.Instant
        /// The fault is over once an applied answer comes after this (a restart's, or the thaw's).
        var settled = false
        /// crash-after-ship: the leader was given its cue and has not died yet (timed from its death).
        var awaitingCrash = false
        /// crash-after-ship: the dead leader is kept down until a standby leads (else started again after a moment).
        var keepDown = false
        /// A read of etcd after the fault found the struck node's part taken by another: for kill-standby, the
        /// sync key names another standby (the struck one was the spare, or the spare replaced it), so releases
        /// need not wait for its return; for crash-after-ship, another node leads (a standby took over).
        var replaced = false
        /// Its band in the report's timeline (with `--report`), ended when it settles.
        var band: Int?
    }

    struct Verdict {
        var faults: [Fault: Int] = [:]
        var failovers = 0
        /// Leaders that died on the crash-after-ship cue (the fault struck), those of them kept down until a
        /// standby led, and cues not acted on in time.
        var crashesAfterShip = 0
        var crashesKeptDown = 0
        var crashesNotStruck: [String] = []
        /// kill-standby's victims: the standby the sync key named, and the spare (three nodes).
        var standbyKills = (named: 0, spare: 0)
        /// Times a read of the sync key found another standby named within one epoch (the spare in place of one gone).
        var syncReplacements = 0
        /// Standbys sent the commits they lacked (catch-up) and sent a copy of the log, per the leaders' own log lines.
        var catchUps = 0
        var copies = 0
        /// The copies by why the standby was not in step (`copyCause(_:)`).
        var copyCauses: [String: Int] = [:]
        /// Leaders that stepped down and took back a last commit that released nothing (`taken-back`), or kept it (`not-taken-back`).
        var takenBack = 0
        var notTakenBack = 0
        /// Leaders that kept such a commit because their standbys acknowledged it as they stepped down.
        var keptAcknowledged = 0
        /// How each other node's log stands beside the survivor's (a prefix, behind, a deposed leader's tail).
        var otherLogs: [String] = []
        /// Records another node holds that neither match the survivor's nor belong to a deposed leader's tail.
        var logDisagreements: [String] = []
        /// What the clients sent, resent and switched, and what was left unanswered.
        var traffic = (sent: 0, retried: 0, switches: 0, otherAnswers: 0, unanswered: 0)
        /// The answers by outcome: applied, unchanged, refused, rejected.
        var outcomes: [String: Int] = [:]
        var lost: [String] = []
        var duplicated: [String] = []
        var releasedLost: [String] = []
        /// Epochs led by more than one node, per the nodes' `lead` lines.
        var twoLeaders: [String] = []
        /// First answers (not from dedup) whose record's epoch the answering node did not lead.
        var wrongEpochReleases: [String] = []
        /// Epochs after the first that a node served from an empty log (its folder destroyed): a clue, not a check.
        var emptyLeads: [String] = []
        /// Records whose epoch no node's `lead` line names.
        var unledEpochs: [String] = []
        var leadLines: [UInt64: [String]] = [:]
        var problem: String?
        var total = 0
        var expectedTotal = 0
        var moneyConserved = true
        var failoverTimes: [Double] = []
        /// Which fault the slowest failover followed.
        var slowestFailover = ""
        var standbyTimes: [Double] = []
        var etcdTimes: [Double] = []
        /// Frozen leaders that stepped down (exit 1) and those that did not.
        var steppedDown = 0
        /// Nodes that stepped down (exit 1) while etcd was frozen: the leader at its deadline, a standby when its presence lease may have ended.
        var etcdStepDowns = 0
        var notSteppedDown: [String] = []
        /// Node processes that ended by themselves outside a fault that explains it (restarted; not violations).
        var unplannedExits: [String] = []
        /// Those of them that died of a crash signal (SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE): the drill
        /// sends none of these, so each is a node's own crash, and a violation.
        var crashedNodes: [String] = []
        static let crashSignals: Set<Int32> = [SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE]

        /// Whether a node process that ended this way crashed.
        static func crashed(_ ending: Child.Ending) -> Bool {
            if case .signal(let signal) = ending { crashSignals.contains(signal) } else { false }
        }
        /// Faults never followed by an applied answer before the run ended.
        var unrecovered: [String] = []
        var survivor = "?"
        var turns = 0
        var survivorRevision: UInt64 = 0

        /// The epochs each node led, per the `lead` lines.
        func leads(of node: String) -> Int { leadLines.values.filter { $0.contains(node) }.count }

        func violations(leaseTTL: Int) -> [String] {
            var list: [String] = []
            if !lost.isEmpty { list.append("\(lost.count) acknowledged transfers lost (first: \(lost[0]))") }
            if !duplicated.isEmpty { list.append("\(duplicated.count) requests applied twice (first: \(duplicated[0]))") }
            if !releasedLost.isEmpty { list.append("\(releasedLost.count) released revisions the survivor lacks (first: \(releasedLost[0]))") }
            if !twoLeaders.isEmpty { list.append("two nodes led one epoch: \(twoLeaders.joined(separator: "; "))") }
            if !wrongEpochReleases.isEmpty {
                list.append("\(wrongEpochReleases.count) answers released by a node that did not lead their epoch (first: \(wrongEpochReleases[0]))")
            }
            if !unledEpochs.isEmpty { list.append("records of epochs no node said it led: \(unledEpochs.joined(separator: ", "))") }
            if let problem { list.append("log: \(problem)") }
            if !moneyConserved { list.append("money not conserved: total \(total), expected \(expectedTotal)") }
            if !notSteppedDown.isEmpty { list.append("\(notSteppedDown.count) frozen leaders did not step down (first: \(notSteppedDown[0]))") }
            if !unrecovered.isEmpty { list.append("\(unrecovered.count) faults never answered again (first: \(unrecovered[0]))") }
            if !crashedNodes.isEmpty { list.append("\(crashedNodes.count) node processes crashed (first: \(crashedNodes[0]))") }
            if !crashesNotStruck.isEmpty { list.append("\(crashesNotStruck.count) crash-after-ship cues the leader did not die on (first: \(crashesNotStruck[0]))") }
            if !logDisagreements.isEmpty {
                list.append("\(logDisagreements.count) nodes' logs disagree with the survivor's (first: \(logDisagreements[0]))")
            }
            let bar = Double(leaseTTL) * 1_000 + 1_000
            let p99 = ClusterBench.percentile(failoverTimes, 0.99)
            if !failoverTimes.isEmpty, p99 > bar {
                list.append(String(format: "failover p99 %.0f ms above the lease TTL + 1 s (%.0f ms)", p99, bar))
            }
            return list
        }
    }

    let options: Drill.Options
    /// The nodes' names: n1, n2 and, with `--nodes 3`, n3.
    let nodeNames: [String]
    /// The sequence of restarts, fault times and the load, from the seed.
    private lazy var random = SplitMix64(seed: options.seed)
    /// The sequence of the faults dealt and whom they strike, from the seed alone (the load's draws,
    /// which follow the answers' timing, do not move it).
    private lazy var faultRandom = SplitMix64(seed: options.seed ^ 0x6a09_e667_f3bc_c908)
    /// The fault kinds still to deal before the deck is shuffled again.
    private var faultDeck: [Fault] = []

    init(options: Drill.Options) {
        self.options = options
        nodeNames = (1...options.nodes).map { "n\($0)" }
    }

    /// The nodes' names in words: "n1 and n2", "n1, n2 and n3".
    private var nodeList: String { nodeNames.dropLast().joined(separator: ", ") + " and " + nodeNames.last! }

    private mutating func jitter(_ every: Double) -> Duration { random.jitter(every) }

    private mutating func moment() -> Duration { .milliseconds(Int64(200 + random.next() % 600)) }

    mutating func run() throws -> Int32 {
        let runFolder = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-hadrill-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: runFolder, withIntermediateDirectories: true)
        // COGD_HA_DRILL_KEEP=1 keeps the nodes' folders and logs (said on stderr) to look into a failed run.
        let keep = ProcessInfo.processInfo.environment["COGD_HA_DRILL_KEEP"] == "1"
        defer { if keep { printError("drill --ha: kept \(runFolder)") } else { try? FileManager.default.removeItem(atPath: runFolder) } }
        let ports = try LoopbackPorts(range: options.ports, count: Self.portsNeeded(nodes: options.nodes))
        printError(ports.line("drill --ha"))
        let etcd = EtcdServer(clientPort: ports.next(), peerPort: ports.next())
        defer { etcd.stop() }
        let nodes = nodeNames.map {
            Node(
                name: $0, folder: runFolder + "/" + $0, requests: ports.nextEndpoint(), turns: ports.nextEndpoint(),
                crashTrigger: runFolder + "/\($0).crash-after-ship")
        }
        let nodeNames = self.nodeNames
        // Every node process is stopped on every path (before etcd: a leader resigns its lease).
        defer { for node in nodes { node.process?.thaw(); node.process?.stop() } }
        try etcd.start()
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let ttl = options.leaseTTL
        // With crash-after-ship dealt, each node dies after a shipped commit while its trigger file exists.
        let crashes = options.faults.contains(.crashAfterShip)
        func launch(_ node: Node) throws {
            try FileManager.default.createDirectory(atPath: node.folder, withIntermediateDirectories: true)
            // A cue left from before (the node stopped leading before it shipped) is not this run's.
            try? FileManager.default.removeItem(atPath: node.crashTrigger)
            let errors = runFolder + "/\(node.name)-\(node.errorFiles.count + 1).err"
            node.errorFiles.append(errors)
            node.process = try Child(
                executable,
                [
                    "leader", "--ha", etcd.url, "--cluster", Self.cluster, "--name", node.name, "--sync", "one",
                    "--lease-ttl", String(ttl), "--data", node.folder, "--requests", node.requests, "--turns", node.turns,
                ],
                errors: errors,
                environment: ["SWIFT_BACKTRACE": "enable=no"].merging(crashes ? [CrashAfterShip.environmentVariable: node.crashTrigger] : [:]) { $1 })
            node.startedAt = .now
            node.restartAt = nil
            node.mustStepDown = nil
            node.heldDownUntil = nil
        }
        // n1 first, so it leads epoch 1; the others a moment later, as its standbys.
        try launch(nodes[0])
        for node in nodes.dropFirst() {
            usleep(300_000)
            try launch(node)
        }

        var verdict = Verdict()
        let context = try ZMQContext()
        defer { context.close() }
        let clients = try (0..<4).map {
            try HAClient(context: context, endpoints: nodes.map(\.requests), name: "\(Drill.clientNamePrefix)\($0)-\(getpid())")
        }
        defer { for client in clients { client.close() } }
        let accounts = 10
        let opening = 1_000
        verdict.expectedTotal = accounts * opening
        for account in 0..<accounts {
            clients[0].enqueue(op: "ledger.open", argument: ["account": .text("acct\(account)"), "balance": .unsigned(UInt64(opening))])
        }
        var load = DrillLoad(accounts: accounts, churnPerForty: 2, churnOutstanding: 40)
        let start = ContinuousClock.now
        let end = start + .seconds(options.seconds)
        var nextFault = start + .seconds(2) + jitter(options.faultEvery)
        var active: ActiveFault?
        var etcdFrozen = false
        var lastRead = start - .seconds(1)
        var leaderName: String?
        var syncNames: [String] = []
        /// The epoch and the standby of the last sync key read that named one (to see the spare replace it).
        var syncSeen: (epoch: String, standby: String)?
        var lastProgress = start
        let leaseSeconds = Double(ttl)
        // With --report: answers and faults over time, in buckets (bounded by the run's length).
        let timeline = options.reportFolder == nil ? nil : DrillTimeline(start: start, seconds: options.seconds)

        /// A line of the run's progress (not with --json): what happened when.
        func say(_ text: String) {
            guard !options.json else { return }
            print(String(format: "drill --ha t=%.1fs ", ClusterBench.seconds(ContinuousClock.now - start)) + text)
            fflush(nil)
        }
        /// Ends the report's band of a fault that no applied answer followed (`why`: until when it was waited for).
        func giveUp(_ fault: ActiveFault, at instant: ContinuousClock.Instant, _ why: String) {
            guard let timeline, let band = fault.band else { return }
            timeline.endFault(band, at: instant, detail: timeline.faults[band].detail + "; no applied answer after it \(why)")
        }
        /// Ends the active fault once an applied answer shows service is back; records its time.
        func settle(with answer: HAClient.Answer) {
            guard var fault = active, !fault.settled else { return }
            // A frozen or dead node's answers (read late) do not count until it was started again.
            if let struck = fault.node, answer.node == struck, nodes[struck].startedAt < fault.at { return }
            // With its named standby killed the leader releases nothing new until it is back or the spare is named in
            // its place: earlier answers were on their way at the kill.
            if fault.kind == .killStandby, let struck = fault.node, nodes[struck].startedAt < fault.at, !fault.replaced { return }
            if fault.kind == .freezeEtcd && fault.thawAt != nil { return }
            // Timed from the leader's death, not from its cue.
            if fault.awaitingCrash { return }
            guard answer.at > fault.timedFrom else { return }
            let milliseconds = ClusterBench.seconds(answer.at - fault.timedFrom) * 1_000
            switch fault.kind {
            case .killLeader, .wipeLeader, .freezeLeader, .crashAfterShip:
                if milliseconds > (verdict.failoverTimes.max() ?? 0) {
                    verdict.slowestFailover = "\(fault.kind.rawValue) at t=\(Int(ClusterBench.seconds(fault.at - start)))s"
                }
                verdict.failoverTimes.append(milliseconds)
            case .killStandby: verdict.standbyTimes.append(milliseconds)
            case .freezeEtcd: verdict.etcdTimes.append(milliseconds)
            }
            fault.settled = true
            active = fault
            let recovered = String(
                format: "first applied answer %.0f ms after the %@ (from %@)", milliseconds, fault.kind == .freezeEtcd ? "thaw" : fault.kind == .crashAfterShip ? "crash" : "fault", nodeNames[answer.node])
            if let timeline, let band = fault.band { timeline.endFault(band, at: answer.at, detail: timeline.faults[band].detail + "; " + recovered) }
            say("\(fault.kind.rawValue): \(recovered)")
        }

        while true {
            let now = ContinuousClock.now
            let outstanding = clients.contains { $0.outstanding > 0 }
            let restarting = nodes.contains { $0.restartAt != nil || !$0.isRunning }
            // Done once the load is answered and every process runs again: a fault still untimed then has no answer left to time it.
            if now >= end, !outstanding, !restarting, !etcdFrozen, active?.thawAt == nil, !nodes.contains(where: { $0.mustStepDown != nil }) { break }
            if now > end + .seconds(45) { break }

            // Who leads, and whom the sync key names, as etcd says (not while it is frozen).
            if !etcdFrozen, now - lastRead >= .milliseconds(250) {
                lastRead = now
                if let values = etcd.read(["/cogd/\(Self.cluster)/leader", "/cogd/\(Self.cluster)/sync"], limit: .milliseconds(500)) {
                    leaderName = values["/cogd/\(Self.cluster)/leader"].flatMap { $0.split(separator: " ").first.map(String.init) }
                    let sync = values["/cogd/\(Self.cluster)/sync"]?.split(separator: " ").map(String.init) ?? []
                    syncNames = Array(sync.dropFirst())
                    // `EPOCH LEADER STANDBY`: another standby in the same epoch is the spare named in place of one gone.
                    if sync.count == 3 {
                        if let seen = syncSeen, seen.epoch == sync[0], seen.standby != sync[2] { verdict.syncReplacements += 1 }
                        syncSeen = (sync[0], sync[2])
                    }
                    if var fault = active, let struck = fault.node, !fault.replaced {
                        switch fault.kind {
                        case .killStandby: fault.replaced = syncNames.count == 2 && !syncNames.contains(nodeNames[struck])
                        case .crashAfterShip: fault.replaced = !fault.awaitingCrash && leaderName != nil && leaderName != nodeNames[struck]
                        default: break
                        }
                        active = fault
                    }
                }
            }

            // Node processes that ended by themselves.
            for (index, node) in nodes.enumerated() where node.restartAt == nil && node.heldDownUntil == nil && node.process != nil && !node.isRunning {
                let ending = node.process!.ending
                let said = node.process!.lastErrorLine(in: node.errorFiles.last!) ?? node.process!.lastLines(in: node.errorFiles.last!) ?? "nothing"
                if var fault = active, fault.awaitingCrash, fault.node == index, ending == .exited(CrashAfterShip.exitStatus) {
                    // The leader died on its cue, after shipping and before its own commit: the failover is timed from here.
                    verdict.crashesAfterShip += 1
                    fault.awaitingCrash = false
                    fault.timedFrom = now
                    active = fault
                    say("crash-after-ship: \(node.name) died after shipping a commit, before its own commit of it")
                    if fault.keepDown {
                        // Until a standby leads (past the lease TTL): the one holding the commit takes over.
                        verdict.crashesKeptDown += 1
                        node.heldDownUntil = now + .seconds(options.leaseTTL) + Self.replacementWait
                    } else {
                        node.restartAt = now + moment()
                    }
                    continue
                } else if node.mustStepDown != nil {
                    if ending == .exited(1) {
                        verdict.steppedDown += 1
                    } else {
                        verdict.notSteppedDown.append("\(node.name) \(ending) after its thaw: \(said)")
                    }
                } else if active?.kind == .freezeEtcd, ending == .exited(1) {
                    // The leader steps down at its deadline while etcd is frozen: the fault's own effect.
                    verdict.etcdStepDowns += 1
                } else {
                    verdict.unplannedExits.append("\(node.name) \(ending): \(said)")
                    if Verdict.crashed(ending) {
                        verdict.crashedNodes.append("\(node.name) \(ending): \(said)")
                    }
                    timeline?.fault(.haNodeExit, at: now, detail: "unplanned: \(node.name) \(ending): \(said); started again")
                }
                node.mustStepDown = nil
                // Started again at once: it is back as a standby as soon as it can be.
                node.restartAt = now + .milliseconds(100)
            }
            // A node kept down: started again once another took its part, or at its deadline.
            for node in nodes {
                guard let until = node.heldDownUntil, active?.replaced == true || now >= until else { continue }
                node.heldDownUntil = nil
                node.restartAt = now >= until ? now + moment() : now
            }
            // Restarts due (not while etcd is frozen: a start that cannot reach etcd is refused).
            for node in nodes {
                guard let at = node.restartAt, now >= at, !etcdFrozen else { continue }
                try launch(node)
            }

            // The fault in progress: thaws, and the end of a settled one.
            if var fault = active {
                if let thaw = fault.thawAt, now >= thaw {
                    fault.thawAt = nil
                    if let index = fault.node {
                        nodes[index].process?.thaw()
                        nodes[index].mustStepDown = now
                    } else {
                        etcd.resume()
                        etcdFrozen = false
                        fault.timedFrom = now
                    }
                    active = fault
                }
                // A leader given the crash-after-ship cue that has not died on it: the cue is taken back.
                if fault.awaitingCrash, now - fault.at > Self.crashWait, let index = fault.node {
                    try? FileManager.default.removeItem(atPath: nodes[index].crashTrigger)
                    verdict.crashesNotStruck.append("\(nodes[index].name) at t=\(Int(ClusterBench.seconds(fault.at - start)))s")
                    fault.awaitingCrash = false
                    fault.settled = true
                    if let timeline, let band = fault.band {
                        timeline.endFault(band, at: now, detail: timeline.faults[band].detail + "; the leader did not die on its cue")
                    }
                    active = fault
                }
                // A frozen leader let go must exit by itself; past 15 s it did not step down.
                for node in nodes {
                    guard let since = node.mustStepDown, now - since > .seconds(15), node.isRunning else { continue }
                    verdict.notSteppedDown.append("\(node.name) still running 15 s after its thaw")
                    node.mustStepDown = nil
                    node.process?.killHard()
                    node.restartAt = now + .milliseconds(100)
                }
                if let current = active, current.settled, current.thawAt == nil, nodes.allSatisfy({ $0.isRunning && $0.restartAt == nil && $0.mustStepDown == nil }) {
                    active = nil
                    nextFault = now + jitter(options.faultEvery)
                } else if let current = active, !current.settled, now - current.at > .seconds(60) {
                    verdict.unrecovered.append("\(current.kind.rawValue) at t=\(Int(ClusterBench.seconds(current.at - start)))s")
                    giveUp(current, at: now, "within 60 s")
                    active = nil
                    nextFault = now + jitter(options.faultEvery)
                }
            }

            // The next fault, once the cluster is whole: every node runs, and the sync key names the leader and a standby.
            // None so late that the load ends before the cluster can answer again.
            if active == nil, now < end - .seconds(options.leaseTTL + 4), now >= nextFault, let leader = leaderName, let leaderIndex = nodes.firstIndex(where: { $0.name == leader }),
                nodes.allSatisfy({ $0.isRunning && $0.restartAt == nil }),
                syncNames.count == 2, syncNames[0] == leader, let namedIndex = nodes.firstIndex(where: { $0.name == syncNames[1] })
            {
                // Dealt from a shuffled deck of the kinds asked for, so a run meets each kind about as often as the others.
                if faultDeck.isEmpty {
                    faultDeck = options.faults
                    for index in faultDeck.indices.reversed() where index > 0 {
                        faultDeck.swapAt(index, Int(faultRandom.next() % UInt64(index + 1)))
                    }
                }
                let kind = faultDeck.removeLast()
                // kill-standby's victim: the named standby, or (three nodes) the spare half the time.
                let spareIndex = nodes.indices.first { $0 != leaderIndex && $0 != namedIndex }
                let standbyIndex = kind == .killStandby && faultRandom.next() % 2 == 1 ? spareIndex ?? namedIndex : namedIndex
                verdict.faults[kind, default: 0] += 1
                var fault = ActiveFault(kind: kind, node: leaderIndex, at: now, timedFrom: now)
                /// What the fault did, in words (the report's).
                let what: String
                switch kind {
                case .killLeader, .wipeLeader:
                    nodes[leaderIndex].process?.killHard()
                    if kind == .wipeLeader {
                        try? FileManager.default.removeItem(atPath: nodes[leaderIndex].folder)
                    }
                    nodes[leaderIndex].restartAt = now + moment()
                    what = "\(leader) (leader) SIGKILLed\(kind == .wipeLeader ? ", its data folder destroyed" : ""), started again after a moment"
                case .freezeLeader:
                    nodes[leaderIndex].process?.freeze()
                    // Just past the lease (its release deadline falls before): it must step down as soon as it runs.
                    fault.thawAt = now + .milliseconds(Int64(leaseSeconds * 1_000) + 200)
                    what = "\(leader) (leader) SIGSTOPped just past the lease TTL, then SIGCONTed: it must step down"
                case .killStandby:
                    fault.node = standbyIndex
                    nodes[standbyIndex].process?.killHard()
                    if standbyIndex != namedIndex {
                        verdict.standbyKills.spare += 1
                        nodes[standbyIndex].restartAt = now + moment()
                        what = "\(nodes[standbyIndex].name) (the spare standby) SIGKILLed, started again after a moment"
                    } else if spareIndex != nil {
                        // Kept down until the leader drops it and names the spare in its place, so the replacement is exercised.
                        verdict.standbyKills.named += 1
                        nodes[standbyIndex].heldDownUntil = now + Self.replacementWait
                        what = "\(nodes[standbyIndex].name) (the named standby) SIGKILLed, started again once the spare is named in its place"
                    } else {
                        verdict.standbyKills.named += 1
                        nodes[standbyIndex].restartAt = now + moment()
                        what = "\(nodes[standbyIndex].name) (standby) SIGKILLed, started again after a moment"
                    }
                case .freezeEtcd:
                    fault.node = nil
                    etcd.pause()
                    etcdFrozen = true
                    fault.thawAt = now + .milliseconds(Int64(leaseSeconds * 1_000) + 1_500)
                    what = "etcd SIGSTOPped for the lease TTL + 1.5 s, then SIGCONTed"
                case .crashAfterShip:
                    // The leader dies at its next shipped commit (`CrashAfterShip`); the drill starts it again when it has.
                    try Data().write(to: URL(fileURLWithPath: nodes[leaderIndex].crashTrigger))
                    fault.awaitingCrash = true
                    fault.keepDown = faultRandom.next() % 2 == 0
                    what = "\(leader) (leader) made to exit right after shipping a commit, before its own commit of it; started again "
                        + (fault.keepDown ? "once a standby leads" : "after a moment")
                }
                fault.band = timeline?.fault(kind.reportKind, at: now, detail: what)
                active = fault
                say("\(kind.rawValue): \(fault.node.map { "\(nodes[$0].name) (\($0 == leaderIndex ? "leader" : $0 == namedIndex ? "named standby" : "spare standby"))" } ?? "etcd")")
                leaderName = nil
                syncNames = []
            }

            if now < end { try load.feed(transfers: clients, churn: clients[3], random: &random) }
            for client in clients { try client.pump(now: now) }
            let sockets = clients.flatMap(\.sockets)
            let ready = try ZMQSocket.poll(sockets, timeout: .milliseconds(5))
            for (index, client) in clients.enumerated() {
                for node in 0..<nodes.count where ready[index * nodes.count + node] {
                    for answer in try client.receive(from: node, timeline: timeline) { settle(with: answer) }
                }
            }
            if now - lastProgress >= .seconds(1) {
                lastProgress = now
                if !options.json {
                    let answered = clients.reduce(0) { $0 + $1.answers.count }
                    let faults = verdict.faults.values.reduce(0, +)
                    print("drill --ha t=\(Int(ClusterBench.seconds(now - start)))s sent \(clients.reduce(0) { $0 + $1.sent }) answered \(answered) faults \(faults) leader \(leaderName ?? "-")\(active.map { " (\($0.kind.rawValue))" } ?? "")")
                    fflush(nil)
                }
            }
        }
        if let fault = active, !fault.settled {
            if ContinuousClock.now > end + .seconds(45) {
                verdict.unrecovered.append("\(fault.kind.rawValue) at t=\(Int(ClusterBench.seconds(fault.at - start)))s")
            }
            giveUp(fault, at: .now, "before the run ended")
        }
        if etcdFrozen { etcd.resume() }

        // The survivor: the node etcd names as leader now (read a few times: one may be taking over).
        var survivorIndex: Int?
        /// The epoch it leads (`NODE EPOCH ENDPOINT`).
        var survivorEpoch: UInt64 = 0
        for _ in 0..<40 where survivorIndex == nil {
            if let value = etcd.read(["/cogd/\(Self.cluster)/leader"])?["/cogd/\(Self.cluster)/leader"]?.split(separator: " "), let name = value.first {
                survivorIndex = nodes.firstIndex { $0.name == String(name) }
                survivorEpoch = value.dropFirst().first.flatMap { UInt64($0) } ?? 0
            }
            if survivorIndex == nil { usleep(250_000) }
        }
        // The standbys stop first, so the leader cannot hand over while it stops.
        for (index, node) in nodes.enumerated() where index != survivorIndex { node.process?.thaw(); node.process?.stop() }
        if let survivorIndex { nodes[survivorIndex].process?.stop() }

        for (index, node) in nodes.enumerated() {
            for file in node.errorFiles {
                guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
                for line in text.split(separator: "\n") {
                    // A leader's `standby-catch-up` and `standby-copy` lines (ha.md §9).
                    if line.contains(" of this log: sending it the ") { verdict.catchUps += 1 }
                    // A stepped-down leader's `taken-back` and `not-taken-back` lines (ha.md §5).
                    if line.contains(" leader: took back its last commit (") { verdict.takenBack += 1 }
                    if line.contains(" leader: kept its last commit") {
                        if line.contains("every standby that may take the lead acknowledged it") {
                            verdict.keptAcknowledged += 1
                        } else {
                            verdict.notTakenBack += 1
                        }
                    }
                    if line.contains(" is not in step"), line.contains(": sending it a copy of the log at revision ") {
                        verdict.copies += 1
                        verdict.copyCauses[Self.copyCause(line), default: 0] += 1
                    }
                    // A leader's start line (`…, epoch E, revision R, …`): one that serves a later epoch from an empty log.
                    if line.contains(" leader: data "), let range = line.range(of: ", revision 0, "),
                        let epoch = line[..<range.lowerBound].split(separator: " ").last.flatMap({ UInt64($0) }), epoch > 1
                    {
                        verdict.emptyLeads.append("epoch \(epoch) by \(node.name)")
                    }
                    guard let range = line.range(of: "node \(node.name) leads cluster \(Self.cluster) in epoch ") else { continue }
                    let digits = line[range.upperBound...].prefix { $0.isNumber }
                    // Only its own `lead` lines: a standby's line may name it as the leader of a crashed run's epoch.
                    guard line[range.upperBound...].dropFirst(digits.count).hasPrefix(" (minted in etcd)"), let epoch = UInt64(digits) else { continue }
                    verdict.leadLines[epoch, default: []].append(nodeNames[index])
                }
            }
        }
        verdict.failovers = max(0, verdict.leadLines.count - 1)
        verdict.twoLeaders = verdict.leadLines.filter { Set($0.value).count > 1 }.sorted { $0.key < $1.key }
            .map { "epoch \($0.key) led by \(Set($0.value).sorted().joined(separator: " and "))" }

        guard let survivorIndex else {
            verdict.problem = "no node leads at the end (etcd names none): nothing to read"
            return try finish(verdict, ports: ports, timeline: timeline)
        }
        let survivor = nodes[survivorIndex]
        verdict.survivor = survivor.name
        let store = try TurnStore(directory: survivor.folder, mode: .reader)
        defer { store.close() }
        let report = try store.verify()
        verdict.problem = report.problem
        verdict.turns = report.turns
        verdict.survivorRevision = store.lastRevision
        var appliedBy: [RequestID: [UInt64]] = [:]
        var recordAt: [UInt64: (request: RequestID?, epoch: UInt64, digest: StateDigest)] = [:]
        var unled = Set<UInt64>()
        for record in try store.records(from: 1) {
            if let request = record.origin.request { appliedBy[request, default: []].append(record.revision) }
            recordAt[record.revision] = (record.origin.request, record.epoch, record.stateDigest)
            if verdict.leadLines[record.epoch] == nil { unled.insert(record.epoch) }
        }
        verdict.unledEpochs = unled.sorted().map { "epoch \($0)" }
        for (index, node) in nodes.enumerated() where index != survivorIndex {
            let comparison = Self.compare(node, with: recordAt.mapValues { ($0.epoch, $0.digest) }, lastRevision: store.lastRevision, leading: survivorEpoch)
            verdict.otherLogs.append(comparison.line)
            if let disagreement = comparison.disagreement { verdict.logDisagreements.append(disagreement) }
        }
        for client in clients {
            verdict.traffic.sent += client.sent
            verdict.traffic.retried += client.retried
            verdict.traffic.switches += client.switches
            verdict.traffic.otherAnswers += client.otherAnswers
            verdict.traffic.unanswered += client.outstanding
            for (request, answer) in client.answers {
                switch answer.outcome {
                case .applied(let revision):
                    verdict.outcomes["applied", default: 0] += 1
                    let node = nodeNames[answer.node]
                    if appliedBy[request] == nil { verdict.lost.append("\(request) at revision \(revision) (from \(node))") }
                    guard let record = recordAt[revision], record.request == request else {
                        verdict.releasedLost.append("\(request) at revision \(revision) (from \(node)): the survivor's log \(revision > store.lastRevision ? "ends at \(store.lastRevision)" : "holds another request there")")
                        continue
                    }
                    if !answer.earlier, verdict.leadLines[record.epoch]?.contains(node) != true {
                        verdict.wrongEpochReleases.append("\(request) at revision \(revision) of epoch \(record.epoch) answered by \(node)")
                    }
                case .unchanged: verdict.outcomes["unchanged", default: 0] += 1
                case .refused: verdict.outcomes["refused", default: 0] += 1
                case .rejected: verdict.outcomes["rejected", default: 0] += 1
                }
            }
        }
        verdict.duplicated = appliedBy.filter { $0.value.count > 1 }.map { "\($0.key) at revisions \($0.value)" }.sorted()
        for entry in try store.stateEntries() where entry.name == "ledger.balance" {
            let (sum, overflow) = verdict.total.addingReportingOverflow((try? CBORDecoder().decode(Int.self, from: entry.value)) ?? 0)
            verdict.total = overflow ? Int.max : sum
        }
        verdict.moneyConserved = verdict.total == verdict.expectedTotal
        return try finish(verdict, ports: ports, timeline: timeline)
    }

    /// How `node`'s log stands beside the survivor's (`survivor`: the epoch and state digest of each of its
    /// records; `leading`: the epoch it leads): a line for the verdict, and a disagreement if there is one.
    /// Where the two differ, and past the survivor's last revision, the node may hold only a deposed leader's
    /// tail: records of an earlier epoch than the survivor's at their revision (or than the one it leads), which
    /// it would be sent a copy in place of (ha.md §9). A record of the same or a later epoch there would mean
    /// two leaders' turns at one revision.
    private static func compare(
        _ node: Node, with survivor: [UInt64: (epoch: UInt64, digest: StateDigest)], lastRevision: UInt64, leading: UInt64
    ) -> (line: String, disagreement: String?) {
        let records: [TurnRecord]
        do {
            let store = try TurnStore(directory: node.folder, mode: .reader)
            defer { store.close() }
            records = try store.records(from: 1)
        } catch {
            return ("\(node.name) holds no log to compare (\(error))", nil)
        }
        var agreedThrough: UInt64 = 0
        var tail: (from: UInt64, count: Int, epochs: Set<UInt64>)?
        for record in records {
            let theirs = survivor[record.revision]
            if tail == nil, let theirs, theirs.epoch == record.epoch, theirs.digest == record.stateDigest {
                agreedThrough = record.revision
                continue
            }
            let over = theirs?.epoch ?? leading
            guard record.epoch < over else {
                let survivorSide = theirs.map { "the survivor's is of epoch \($0.epoch)\($0.epoch == record.epoch ? ", another turn" : "")" } ?? "past the survivor's last, which leads epoch \(leading)"
                return (
                    "\(node.name) disagrees at revision \(record.revision)",
                    "\(node.name)'s revision \(record.revision) is of epoch \(record.epoch); \(survivorSide)"
                )
            }
            tail = (tail?.from ?? record.revision, (tail?.count ?? 0) + 1, (tail?.epochs ?? []).union([record.epoch]))
        }
        var line = "\(node.name) agrees through revision \(agreedThrough)"
        if agreedThrough < lastRevision { line += " (\(lastRevision - agreedThrough) behind)" }
        if let tail {
            line += ", then holds a deposed leader's tail: \(tail.count) records from revision \(tail.from), epoch \(tail.epochs.sorted().map(String.init).joined(separator: ", "))"
        }
        return (line, nil)
    }

    /// Prints the verdict, after writing the report with `--report`; the exit status.
    private func finish(_ verdict: Verdict, ports: LoopbackPorts, timeline: DrillTimeline?) throws -> Int32 {
        var reportFile: String?
        if let timeline, let reportFolder = options.reportFolder {
            let recovery = recoveryTimes(verdict)
            reportFile = try Drill.writeReport(
                timeline.report(
                    title: "cogd-lab drill --ha, seed \(options.seed): etcd and nodes \(nodeList), lease TTL \(options.leaseTTL) s, \(options.seconds) s",
                    loadSeconds: options.seconds,
                    recoveryLines: [
                        "failover (leader killed, frozen or crashed after shipping) → first applied answer: \(recovery.failover)",
                        "standby killed → first applied answer: \(recovery.standby)",
                        "etcd frozen, thawed → first applied answer: \(recovery.etcd)",
                    ] + verdict.failoverTimes.enumerated().map { String(format: "failover %d: %.0f ms", $0.offset + 1, $0.element) },
                    verdictLines: render(verdict, ports: ports, json: false, reportFile: nil).split(separator: "\n").map(String.init)),
                into: reportFolder)
        }
        print(render(verdict, ports: ports, json: options.json, reportFile: reportFile))
        return verdict.violations(leaseTTL: options.leaseTTL).isEmpty ? 0 : 1
    }

    /// The failovers' p99 must be within this, ms: the lease TTL + 1 s.
    private var failoverBar: Int { options.leaseTTL * 1_000 + 1_000 }

    /// The recovery times as the verdict and the report say them: the failovers (beside the lease TTL and the
    /// bar their p99 is held to), a standby's kill, etcd's freeze (from its thaw).
    private func recoveryTimes(_ verdict: Verdict) -> (failover: String, standby: String, etcd: String) {
        func times(_ values: [Double]) -> String {
            guard !values.isEmpty else { return "none" }
            return String(
                format: "p50 %.0f ms, p99 %.0f ms, max %.0f ms over %d", ClusterBench.percentile(values, 0.5), ClusterBench.percentile(values, 0.99),
                values.max() ?? 0, values.count)
        }
        let slowest = verdict.slowestFailover.isEmpty ? "" : ", slowest after \(verdict.slowestFailover)"
        return (
            "\(times(verdict.failoverTimes))\(slowest) (lease TTL \(options.leaseTTL) s; bar p99 ≤ \(failoverBar) ms)",
            times(verdict.standbyTimes), times(verdict.etcdTimes)
        )
    }

    /// The command line that runs this drill again.
    var command: String {
        let faults = options.faults == Fault.allCases ? "" : " --faults \(options.faults.map(\.rawValue).joined(separator: ","))"
        let nodes = options.nodes == Drill.Options().nodes ? "" : " --nodes \(options.nodes)"
        return "cogd-lab drill --ha\(nodes) --seconds \(options.seconds) --lease-ttl \(options.leaseTTL) --fault-every \(options.faultEvery)\(faults) --seed \(options.seed)\(options.portsOption)"
    }

    private func render(_ verdict: Verdict, ports: LoopbackPorts, json: Bool, reportFile: String?) -> String {
        let violations = verdict.violations(leaseTTL: options.leaseTTL)
        func figures(_ values: [Double]) -> (p50: Double, p99: Double, max: Double) {
            (ClusterBench.percentile(values, 0.5), ClusterBench.percentile(values, 0.99), values.max() ?? 0)
        }
        let failover = figures(verdict.failoverTimes)
        let standby = figures(verdict.standbyTimes)
        let etcdFigures = figures(verdict.etcdTimes)
        let epochs = verdict.leadLines.keys.sorted()
        if json {
            let faults = Fault.allCases.map { "\(CBORText.quoted($0.rawValue)): \(verdict.faults[$0] ?? 0)" }.joined(separator: ", ")
            let leaders = epochs.map { "\(CBORText.quoted(String($0))): [\(Set(verdict.leadLines[$0]!).sorted().map(CBORText.quoted).joined(separator: ", "))]" }
                .joined(separator: ", ")
            let leads = nodeNames.map { "\(CBORText.quoted($0)): \(verdict.leads(of: $0))" }.joined(separator: ", ")
            return "{\"seed\": \(options.seed), \"command\": \(CBORText.quoted(command)), \"nodes\": \(options.nodes), \"leaseTTL\": \(options.leaseTTL), \"faults\": {\(faults)}, "
                + "\"crashesAfterShip\": \(verdict.crashesAfterShip), \"crashesKeptDown\": \(verdict.crashesKeptDown), \"crashesNotStruck\": \(verdict.crashesNotStruck.count), "
                + "\"standbyKills\": {\"named\": \(verdict.standbyKills.named), \"spare\": \(verdict.standbyKills.spare)}, \"syncReplacements\": \(verdict.syncReplacements), \"catchUps\": \(verdict.catchUps), \"copies\": \(verdict.copies), "
                + "\"copyCauses\": {\(Self.copyCauseNames.map { "\"\($0.key)\": \(verdict.copyCauses[$0.key] ?? 0)" }.joined(separator: ", "))}, "
                + "\"failovers\": \(verdict.failovers), \"leadsByNode\": {\(leads)}, \"sent\": \(verdict.traffic.sent), "
                + Self.outcomeNames.map { "\"\($0)\": \(verdict.outcomes[$0] ?? 0), " }.joined()
                + "\"retried\": \(verdict.traffic.retried), \"switches\": \(verdict.traffic.switches), "
                + "\"unanswered\": \(verdict.traffic.unanswered), \"survivor\": \(CBORText.quoted(verdict.survivor)), \"turns\": \(verdict.turns), "
                + "\"lost\": \(verdict.lost.count), \"duplicated\": \(verdict.duplicated.count), \"releasedLost\": \(verdict.releasedLost.count), "
                + "\"twoLeadersInAnEpoch\": \(verdict.twoLeaders.count), \"emptyLeads\": [\(verdict.emptyLeads.map(CBORText.quoted).joined(separator: ", "))], \"wrongEpochReleases\": \(verdict.wrongEpochReleases.count), "
                + "\"leaders\": {\(leaders)}, \"logSound\": \(verdict.problem == nil), \"moneyConserved\": \(verdict.moneyConserved), "
                + "\"otherLogs\": [\(verdict.otherLogs.map(CBORText.quoted).joined(separator: ", "))], \"logDisagreements\": \(verdict.logDisagreements.count), "
                + "\"steppedDown\": \(verdict.steppedDown), \"takenBack\": \(verdict.takenBack), \"notTakenBack\": \(verdict.notTakenBack), \"keptAcknowledged\": \(verdict.keptAcknowledged), \"notSteppedDown\": \(verdict.notSteppedDown.count), \"etcdStepDowns\": \(verdict.etcdStepDowns), "
                + "\"unplannedExits\": \(verdict.unplannedExits.count), \"crashedNodes\": \(verdict.crashedNodes.count), "
                + "\"failoverMsP50\": \(failover.p50), \"failoverMsP99\": \(failover.p99), \"failoverMsMax\": \(failover.max), \"failoverBarMs\": \(failoverBar), "
                + "\"standbyKillMsP50\": \(standby.p50), \"etcdFreezeMsP50\": \(etcdFigures.p50), "
                + "\"ports\": \(ports.json), \"report\": \(reportFile.map(CBORText.quoted) ?? "null"), \"violations\": [\(violations.map(CBORText.quoted).joined(separator: ", "))]}"
        }
        let faultLine = Fault.allCases.filter { options.faults.contains($0) }.map { kind in
            let count = "\(kind.rawValue) \(verdict.faults[kind] ?? 0)"
            switch kind {
            case .killStandby where options.nodes > 2: return count + " (named \(verdict.standbyKills.named), spare \(verdict.standbyKills.spare))"
            case .crashAfterShip:
                return count + " (the leader died on \(verdict.crashesAfterShip), kept down until a standby led \(verdict.crashesKeptDown)"
                    + "\(verdict.crashesNotStruck.isEmpty ? "" : ", did NOT die on \(verdict.crashesNotStruck.count)"))"
            default: return count
            }
        }.joined(separator: ", ")
        let spare = options.nodes > 2 ? "the sync key names one standby, the other is a spare; " : ""
        let leaders = epochs.map { "\($0): \(Set(verdict.leadLines[$0]!).sorted().joined(separator: "+"))" }.joined(separator: ", ")
        let recovery = recoveryTimes(verdict)
        var lines = [
            "drill --ha verdict (seed \(options.seed))",
            "  cluster          etcd on 127.0.0.1, nodes \(nodeList) (--sync one: \(spare)--lease-ttl \(options.leaseTTL)); clients follow the leader; no workers",
            "  faults           \(faultLine)",
            "  failovers        \(verdict.failovers) (epochs led: \(leaders.isEmpty ? "none" : leaders); per node: \(nodeNames.map { "\($0) \(verdict.leads(of: $0))" }.joined(separator: ", ")))"
                + (options.nodes > 2 ? "; the spare named in place of a standby gone: \(verdict.syncReplacements)" : ""),
            "  requests         the drill's clients sent \(verdict.traffic.sent): "
                + Self.outcomeNames.map { "\($0) \(verdict.outcomes[$0] ?? 0), " }.joined()
                + "retried \(verdict.traffic.retried), switched node \(verdict.traffic.switches), unanswered \(verdict.traffic.unanswered)",
            "  log              the survivor's (\(verdict.survivor)): \(verdict.turns) turns, \(verdict.problem.map { "PROBLEM: \(escaped: $0)" } ?? "contiguous, decodes, state equals replay")",
            "  lost             \(verdict.lost.count)",
            "  duplicated       \(verdict.duplicated.count)",
            "  released-lost    \(verdict.releasedLost.count) (acknowledged revisions the survivor's log lacks or holds for another request)",
            "  standbys         caught up \(verdict.catchUps) times, sent a copy \(verdict.copies) times (per the leaders' logs\(Self.copyCauseWords(verdict.copyCauses)))",
            "  other logs       \(verdict.otherLogs.isEmpty ? "none read" : verdict.otherLogs.map { "\(escaped: $0)" }.joined(separator: "; "))"
                + (verdict.logDisagreements.isEmpty ? "" : "; DISAGREE: \(verdict.logDisagreements.map { "\(escaped: $0)" }.joined(separator: "; "))"),
            "  epochs           \(verdict.twoLeaders.isEmpty ? "never two leaders in one epoch" : "TWO LEADERS: \(verdict.twoLeaders.joined(separator: "; "))"); "
                + "first answers from a node that did not lead their record's epoch: \(verdict.wrongEpochReleases.count)",
            "  empty leads      \(verdict.emptyLeads.isEmpty ? "none" : verdict.emptyLeads.joined(separator: ", ") + " (a node led a later epoch from an empty folder)")",
            "  step-down        \(verdict.steppedDown) frozen leaders stepped down (exit 1)\(verdict.notSteppedDown.isEmpty ? "" : ", \(verdict.notSteppedDown.count) did NOT")"
                + "; \(verdict.etcdStepDowns) nodes stepped down while etcd was frozen; "
                + "leaders that took back a last commit that released nothing as they stepped down: \(verdict.takenBack)"
                + "\(verdict.notTakenBack == 0 ? "" : ", that kept one: \(verdict.notTakenBack)")"
                + "\(verdict.keptAcknowledged == 0 ? "" : ", that kept one their standbys acknowledged as they stepped down: \(verdict.keptAcknowledged)"); unplanned node exits \(verdict.unplannedExits.count)\(verdict.unplannedExits.first.map { " (first: \(escaped: $0))" } ?? "")",
            "  failover         leader killed, frozen or crashed after shipping → first applied answer: \(recovery.failover)",
            "  standby killed   → first applied answer: \(recovery.standby)",
            "  etcd frozen      thawed → first applied answer: \(recovery.etcd)",
            "  money            \(verdict.total) of \(verdict.expectedTotal) \(verdict.moneyConserved ? "(conserved)" : "(NOT conserved)")",
            "  reproduce        \(command)",
        ]
        lines.append(violations.isEmpty ? "PASS" : "FAIL: " + violations.map { "\(escaped: $0)" }.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }
}
