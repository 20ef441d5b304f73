import CogCodec
import CogdCommandLine
import CogLog
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab drill --group-workers N`: a leader and a group of N workers
/// (`cogd worker --group drill`, rig `ledger-greeter`: a greeter scope child
/// per account, whose opening greets the account once, durably) under
/// pipelined transfers and account churn. Every `--kill-worker-every`
/// seconds one worker, chosen by the seed, is SIGKILLed and a new one
/// started in its place under a new name, so the group stays N and the
/// dead one's accounts move when the leader gives it up after
/// `--heartbeat-timeout`. The leader is not killed. The verdict, read from
/// the turn log afterwards (`GroupLogCheck`), adds to the drill's checks:
/// no double ownership, every account owned by a live worker or within
/// heartbeat timeout + 1 s of its owner's kill, effects duplicated 0, and
/// each kill's move (kill → reopened on a survivor, kill → its greeter live
/// there) beside the heartbeat timeout.
///
/// With `--freeze-worker-every`, about that often one worker (not the one
/// frozen already) is SIGSTOPped for the heartbeat timeout + 1 s — the
/// leader gives it up and moves its accounts — and then let go: its log
/// must say `lease-expired` when it runs again, before it hears `gone`
/// (`protocol/cogwire.md` §6b), and it rejoins the group.
///
/// With `--cut-worker-every`, each worker talks to the leader through a
/// `LinkRelay`, and about that often one worker's relay (not a frozen one's)
/// moves nothing for the heartbeat timeout + 1 s: the worker keeps running,
/// cut off, and must say `lease-expired` before it hears `gone` once the
/// link is mended.
struct GroupDrill {
    /// The group the drill's workers join (`--group`).
    static let group = "drill"
    /// How long after a kill every account the dead worker owned must be greeted again elsewhere, beyond the heartbeat timeout.
    static let moveSlack: TimeInterval = 1

    struct Verdict {
        var workerKills = 0
        /// Workers frozen past the heartbeat timeout and let go, and those
        /// whose log did not say `lease-expired` before `given-up` after it.
        var workerFreezes = 0
        var unsuspended: [String] = []
        /// Workers whose link to the leader was cut past the heartbeat
        /// timeout and mended, and those whose log did not say
        /// `lease-expired` before `given-up` after it.
        var workerCuts = 0
        var uncut: [String] = []
        var sent = 0
        var applied = 0
        var unchanged = 0
        /// Answered `refused`: the op's body said no (an overdraft), nothing kept.
        var refused = 0
        var rejected = 0
        var retried = 0
        var unanswered = 0
        var lost: [String] = []
        var duplicated: [String] = []
        var problem: String?
        var total = 0
        var expectedTotal = 0
        var unconverged: [String] = []
        var retiredRejected = 0
        var check = GroupLogCheck(kills: [], window: 0)
        /// Per kill of a worker that owned accounts: milliseconds to reopened, and to live (nil: never).
        var reopen: [Double?] = []
        var live: [Double?] = []
        /// Kills whose accounts were not all live again within the window.
        var late: [String] = []

        var moneyConserved: Bool { total == expectedTotal }

        var violations: [String] {
            var list: [String] = []
            if !lost.isEmpty { list.append("\(lost.count) acknowledged turns lost (first: \(lost[0]))") }
            if !duplicated.isEmpty { list.append("\(duplicated.count) requests applied twice (first: \(duplicated[0]))") }
            if let problem { list.append("log: \(problem)") }
            if !moneyConserved { list.append("money not conserved: total \(total), expected \(expectedTotal)") }
            if !unconverged.isEmpty { list.append("replicas not converged: \(unconverged.joined(separator: ", "))") }
            for (what, findings) in [
                ("times an account had two live instances", check.doubleOwnership), ("accounts without a live owner", check.uncovered),
                ("effects applied twice for one instance", check.duplicatedEffects),
                ("effects from a retired or another worker's instance", check.foreignEffects),
            ] where findings.count > 0 {
                list.append("\(findings.count) \(what) (first: \(findings.first[0]))")
            }
            if check.coveredFrom == nil { list.append("the accounts were never all owned") }
            if !late.isEmpty { list.append("\(late.count) kills not moved within the window (first: \(late[0]))") }
            if !unsuspended.isEmpty {
                list.append("\(unsuspended.count) frozen workers did not stop their effects first when they ran again (first: \(unsuspended[0]))")
            }
            if !uncut.isEmpty {
                list.append("\(uncut.count) workers cut off did not stop their effects before they heard gone (first: \(uncut[0]))")
            }
            return list
        }
    }

    let options: Drill.Options
    /// The fault schedule's sequence: when each kill and trap comes, which
    /// worker, how long a restart waits. The load draws from a sequence of its
    /// own, so a rerun with the seed meets the same faults at the same times
    /// whatever the machine's speed made of the load.
    private var random: SplitMix64
    /// The load's sequence (the transfers' accounts and amounts).
    private var loadRandom: SplitMix64

    init(options: Drill.Options) {
        self.options = options
        random = SplitMix64(seed: options.seed)
        loadRandom = SplitMix64(seed: options.seed ^ 0x6C6F_6164)
    }

    mutating func run() throws -> Int32 {
        let count = options.groupWorkers
        let folder = options.dataFolder ?? Drill.Options.freshFolder()
        defer { if options.dataFolder == nil { try? FileManager.default.removeItem(atPath: folder) } }
        if let problem = options.dataFolderProblem { throw LabError(message: problem) }
        let cutting = options.cutWorkerEvery > 0
        let ports = try LoopbackPorts(range: options.ports, count: Drill.Options.portsNeeded + (cutting ? count : 0))
        printError(ports.line("drill"))
        let requestsPort = ports.next()
        let requests = "tcp://127.0.0.1:\(requestsPort)"
        let turns = ports.nextEndpoint()
        // With --cut-worker-every: each slot's worker reaches the leader through a relay the drill can cut.
        let relays = cutting ? try (0..<count).map { _ in try LinkRelay(port: ports.next(), targetPort: requestsPort) } : []
        defer { for relay in relays { relay.stop() } }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let errorsBase = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-drill-\(getpid())").path
        let leader = try Child(
            executable,
            ["leader", "--data", folder, "--requests", requests, "--turns", turns, "--heartbeat-timeout", Self.seconds(options.heartbeatTimeout)],
            errors: errorsBase + "-leader.err", environment: ["SWIFT_BACKTRACE": "enable=no"])
        defer { try? FileManager.default.removeItem(atPath: errorsBase + "-leader.err") }
        /// Each slot's current process and its name (a restarted one takes a new name: `drill-g1`, `drill-g1r2`, …).
        var generations = [Int](repeating: 0, count: count)
        /// Each worker's stderr, by its name (a frozen one's is read after it runs again).
        func errors(_ name: String) -> String { errorsBase + "-\(name).err" }
        var errorFiles: [String] = []
        func startWorker(_ slot: Int) throws -> (child: Child, name: String) {
            let name = "drill-g\(slot)" + (generations[slot] == 0 ? "" : "r\(generations[slot])")
            // The leader's heartbeat timeout: the worker's lease is it less the margin (cogwire §6b).
            let child = try Child(
                executable,
                [
                    "worker", "--leader", cutting ? relays[slot].endpoint : requests, "--name", name, "--rig", "ledger-greeter", "--group", GroupDrill.group,
                    "--heartbeat-timeout", Self.seconds(options.heartbeatTimeout),
                ],
                errors: errors(name), environment: ["SWIFT_BACKTRACE": "enable=no"])
            errorFiles.append(errors(name))
            return (child, name)
        }
        var workers = try (0..<count).map(startWorker)
        defer {
            leader.stop()
            for worker in workers { worker.child.thaw() }
            for worker in workers { worker.child.stop() }
            for file in errorFiles { try? FileManager.default.removeItem(atPath: file) }
        }
        var verdict = Verdict()
        // The group formed (every worker synced in it, so registered soon after) before the accounts open:
        // then every opening is in the turn that opened the account.
        _ = waitForStatus(requests, within: .seconds(30)) { status in
            status.workers.filter { $0.group == GroupDrill.group && $0.appliedRevision == status.revision }.count == count
        }
        usleep(500_000)
        let context = try ZMQContext()
        defer { context.close() }
        let accounts = 24
        let opening = 1_000
        verdict.expectedTotal = accounts * opening
        let clients = try (0..<4).map {
            try DrillClient(context: context, endpoint: requests, name: "\(Drill.clientNamePrefix)\($0)-\(getpid())")
        }
        defer { for client in clients { client.close() } }
        for account in 0..<accounts {
            clients[0].enqueue(op: "ledger.open", argument: ["account": .text("acct\(account)"), "balance": .unsigned(UInt64(opening))])
        }
        let start = ContinuousClock.now
        // With --report: answers and kills over time, in buckets (bounded by the run's length).
        let timeline = options.reportFolder == nil ? nil : DrillTimeline(start: start, seconds: options.seconds)
        /// Each killed worker's band (its name is never reused).
        var killFaults: [String: Int] = [:]
        let end = start + .seconds(options.seconds)
        var nextKill = start + .milliseconds(Int64(options.killWorkerEvery * 1_000))
        var kills: [GroupLogCheck.Kill] = []
        let freezing = options.freezeWorkerEvery > 0
        var nextFreeze = start + .milliseconds(Int64(options.freezeWorkerEvery * 1_000))
        /// The worker frozen now (its slot, and when it is let go), and each one let go, by name.
        var frozen: (slot: Int, thawAt: ContinuousClock.Instant)?
        var thawed: [String] = []
        let freezeLength = Duration.milliseconds(Int64((options.heartbeatTimeout + 1) * 1_000))
        var nextCut = start + .milliseconds(Int64(options.cutWorkerEvery * 1_000))
        /// The worker cut off now (its slot, and when the link is mended), and each one mended, by name.
        var cutOff: (slot: Int, mendAt: ContinuousClock.Instant)?
        var mended: [String] = []
        var lastKill = start
        var lastProgress = start
        var load = DrillLoad(accounts: accounts, churnPerForty: 3, churnOutstanding: 8)
        while ContinuousClock.now < end || clients.contains(where: { $0.outstanding > 0 }) {
            let now = ContinuousClock.now
            if now > end + .seconds(30) { break }
            if now < end {
                // A churned account's greeter opens on one member and retires, moved or not.
                try load.feed(transfers: Array(clients.dropLast()), churn: clients[3], random: &loadRandom)
                if let ice = frozen, now >= ice.thawAt {
                    workers[ice.slot].child.thaw()
                    thawed.append(workers[ice.slot].name)
                    frozen = nil
                    nextFreeze = now + .milliseconds(Int64(options.freezeWorkerEvery * 1_000))
                }
                if freezing, frozen == nil, now >= nextFreeze, now + freezeLength < end {
                    let slot = Int(random.next() % UInt64(count))
                    workers[slot].child.freeze()
                    frozen = (slot, now + freezeLength)
                    verdict.workerFreezes += 1
                }
                if let cut = cutOff, now >= cut.mendAt {
                    mended.append(workers[cut.slot].name)
                    cutOff = nil
                    nextCut = now + .milliseconds(Int64(options.cutWorkerEvery * 1_000))
                }
                if cutting, cutOff == nil, now >= nextCut, end > now + freezeLength, frozen == nil || count > 1 {
                    var slot = Int(random.next() % UInt64(count))
                    // Not the frozen one: one fault at a time for each worker.
                    if let ice = frozen, ice.slot == slot { slot = (slot + 1) % count }
                    relays[slot].cut(for: freezeLength)
                    cutOff = (slot, now + freezeLength)
                    verdict.workerCuts += 1
                }
                let spared = Set([frozen?.slot, cutOff?.slot].compactMap { $0 })
                if now >= nextKill, spared.count < count {
                    var slot = Int(random.next() % UInt64(count))
                    // Not the frozen or cut-off one: its fault is judged by what it says afterwards.
                    while spared.contains(slot) { slot = (slot + 1) % count }
                    kills.append(GroupLogCheck.Kill(worker: workers[slot].name, at: Date()))
                    if let timeline { killFaults[workers[slot].name] = timeline.fault(.workerKill, at: now, detail: "\(workers[slot].name) SIGKILLed") }
                    workers[slot].child.killHard()
                    verdict.workerKills += 1
                    generations[slot] += 1
                    workers[slot] = try startWorker(slot)
                    lastKill = now
                    nextKill = now + .milliseconds(Int64(options.killWorkerEvery * 1_000))
                }
            }
            for client in clients { try client.pump(now: now) }
            let ready = try ZMQSocket.poll(clients.map(\.socket), timeout: .milliseconds(5))
            for (index, client) in clients.enumerated() where ready[index] { _ = try client.receiveReplies(timeline: timeline) }
            if now - lastProgress >= .seconds(1), !options.json {
                lastProgress = now
                let answered = clients.reduce(0) { $0 + $1.answers.count }
                print("drill t=\(Int(ClusterBench.seconds(now - start)))s sent \(clients.reduce(0) { $0 + $1.sent }) answered \(answered) worker kills \(verdict.workerKills)")
                fflush(nil)
            }
        }
        // A worker still frozen runs again (it rejoins, as any one let go); a link still cut is mended.
        if let ice = frozen {
            workers[ice.slot].child.thaw()
            thawed.append(workers[ice.slot].name)
            lastKill = max(lastKill, ContinuousClock.now)
        }
        if let cut = cutOff {
            while relays[cut.slot].isCut { usleep(20_000) }
            mended.append(workers[cut.slot].name)
            lastKill = max(lastKill, ContinuousClock.now)
        }
        // The last kill's window passes (its move is judged like the others'), then the group settles:
        // the given-up workers gone, the live ones caught up.
        let windowEnd = lastKill + .milliseconds(Int64((options.heartbeatTimeout + Self.moveSlack) * 1_000) + 500)
        while ContinuousClock.now < windowEnd { usleep(50_000) }
        let names = Set(workers.map(\.name))
        let status = waitForStatus(requests, within: .seconds(15)) { status in
            Set(status.workers.map(\.name)) == names && status.workers.allSatisfy { $0.appliedRevision == status.revision }
        }
        if let status {
            verdict.retiredRejected = Int(status.count(.retiredScope))
            verdict.unconverged = status.workers.filter { $0.appliedRevision != status.revision }.map {
                "\($0.name) at \($0.appliedRevision) of \(status.revision)"
            }
            let listed = Set(status.workers.map(\.name))
            verdict.unconverged += names.subtracting(listed).sorted().map { "\($0) not reporting" }
            verdict.unconverged += listed.subtracting(names).sorted().map { "\($0) (killed) still listed" }
        } else {
            verdict.unconverged = ["the leader did not answer status"]
        }
        for worker in workers where !worker.child.isRunning {
            verdict.unconverged.append("\(worker.name) \(worker.child.ending)\(worker.child.lastErrorLine(in: errors(worker.name)).map { ": \($0)" } ?? "")")
        }
        if !leader.isRunning {
            verdict.unconverged.append("the leader \(leader.ending)\(leader.lastErrorLine(in: errorsBase + "-leader.err").map { ": \($0)" } ?? "")")
        }
        leader.stop()
        for worker in workers { worker.child.stop() }
        // Each worker let go, and each one cut off, said `lease-expired` before it heard `gone`.
        func stoppedFirst(_ names: [String], _ fault: String) -> [String] {
            var problems: [String] = []
            for name in Set(names).sorted() {
                let lines = ((try? String(contentsOfFile: errors(name), encoding: .utf8)) ?? "").split(separator: "\n")
                let expired = lines.indices.filter { lines[$0].contains("no welcome from the leader for") }
                let givenUp = lines.indices.filter { lines[$0].contains("the leader gave this worker up") }
                let faults = names.filter { $0 == name }.count
                if expired.count < faults {
                    problems.append("\(name): \(fault) \(faults) times, said lease-expired \(expired.count) times")
                } else if let firstGone = givenUp.first, let firstExpired = expired.first, firstGone < firstExpired {
                    problems.append("\(name): said given-up before lease-expired")
                }
            }
            return problems
        }
        verdict.unsuspended = stoppedFirst(thawed, "frozen")
        verdict.uncut = stoppedFirst(mended, "cut off")

        let store = try TurnStore(directory: folder, mode: .reader)
        defer { store.close() }
        let report = try store.verify()
        verdict.problem = report.problem
        var check = GroupLogCheck(kills: kills, window: options.heartbeatTimeout + Self.moveSlack)
        var appliedBy: [RequestID: [UInt64]] = [:]
        var last: UInt64 = 0
        var from: UInt64 = 1
        while true {
            let batch = try store.records(from: from, limit: 10_000)
            guard let tail = batch.last else { break }
            for record in batch {
                if let request = record.origin.request { appliedBy[request, default: []].append(record.revision) }
                check.read(record)
            }
            last = tail.revision
            from = last + 1
        }
        check.finish(lastRevision: last)
        for move in check.moves where !move.members.isEmpty {
            verdict.reopen.append(move.reopenMilliseconds)
            verdict.live.append(move.liveMilliseconds)
            let limit = (options.heartbeatTimeout + Self.moveSlack) * 1_000
            if let live = move.liveMilliseconds, live <= limit { continue }
            let missing = move.members.subtracting(move.closed).filter { move.live[$0] == nil }.sorted()
            verdict.late.append(
                "\(move.kill.worker): "
                    + (missing.isEmpty
                        ? "its \(move.members.count) accounts live again after \(String(format: "%.0f", move.liveMilliseconds ?? 0)) ms"
                        : "\(missing.joined(separator: ", ")) never live again"))
        }
        verdict.check = check
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
                case .rejected: verdict.rejected += 1
                case .refused: verdict.refused += 1
                }
            }
        }
        verdict.duplicated = appliedBy.filter { $0.value.count > 1 }.map { "\($0.key) at revisions \($0.value)" }.sorted()
        for entry in try store.stateEntries() where entry.name == "ledger.balance" {
            let (sum, overflow) = verdict.total.addingReportingOverflow((try? CBORDecoder().decode(Int.self, from: entry.value)) ?? 0)
            verdict.total = overflow ? Int.max : sum
        }
        var reportFile: String?
        if let timeline, let reportFolder = options.reportFolder {
            // Each kill's band lasts until its accounts' greeters were live on the others (read from the log).
            for move in check.moves {
                guard let index = killFaults[move.kill.worker] else { continue }
                let fault = timeline.faults[index]
                guard let live = move.liveMilliseconds, !move.members.isEmpty else {
                    timeline.endFault(
                        index, at: timeline.start + .milliseconds(Int64(fault.start * 1_000)),
                        detail: fault.detail + (move.members.isEmpty ? "; it owned no account" : "; its accounts were never all live again"))
                    continue
                }
                timeline.endFault(
                    index, at: timeline.start + .milliseconds(Int64(fault.start * 1_000 + live)),
                    detail: fault.detail + String(format: "; its %d accounts' greeters live on the others %.0f ms later", move.members.count, live))
            }
            let figures = render(verdict, turns: report.turns, ports: ports, json: false, reportFile: nil).split(separator: "\n").map(String.init)
            reportFile = try Drill.writeReport(
                timeline.report(
                    title: "cogd-lab drill, seed \(options.seed): a group of \(options.groupWorkers) workers, \(options.seconds) s",
                    loadSeconds: options.seconds, recoveryLines: figures.filter { $0.hasPrefix("  move ") || $0.hasPrefix("                   ") }.map {
                        String($0.dropFirst("  move             ".count)).trimmingCharacters(in: .whitespaces)
                    },
                    verdictLines: figures),
                into: reportFolder)
        }
        print(render(verdict, turns: report.turns, ports: ports, json: options.json, reportFile: reportFile))
        return verdict.violations.isEmpty ? 0 : 1
    }

    /// Asks the leader's status until `done` holds (or `within` passes); the last status answered.
    private func waitForStatus(_ requests: String, within: Duration, _ done: (LeaderStatus) -> Bool) -> LeaderStatus? {
        let deadline = ContinuousClock.now + within
        var last: LeaderStatus?
        while ContinuousClock.now < deadline {
            if case .status(let current)? = try? CogdCommandLine.request(.statusRequest, leader: requests, timeout: .seconds(2)) {
                last = current
                if done(current) { return current }
            }
            usleep(100_000)
        }
        return last
    }

    static func seconds(_ value: Double) -> String { value == value.rounded() ? String(Int(value)) : String(value) }

    private static func milliseconds(_ value: Double?) -> String { value.map { String(format: "%.0f", $0) } ?? "never" }

    /// Percentile of the measured moves; one that never completed counts as infinite (and is a violation anyway).
    private static func percentile(_ values: [Double?], _ fraction: Double) -> Double? {
        guard !values.isEmpty else { return 0 }
        let value = ClusterBench.percentile(values.map { $0 ?? .infinity }, fraction)
        return value.isFinite ? value : nil
    }

    private func render(_ verdict: Verdict, turns: Int, ports: LoopbackPorts, json: Bool, reportFile: String?) -> String {
        let check = verdict.check
        let timeout = options.heartbeatTimeout * 1_000
        let limit = (options.heartbeatTimeout + Self.moveSlack) * 1_000
        let figures = (
            reopenP50: Self.percentile(verdict.reopen, 0.5), reopenP99: Self.percentile(verdict.reopen, 0.99),
            liveP50: Self.percentile(verdict.live, 0.5), liveP99: Self.percentile(verdict.live, 0.99),
            liveMax: Self.percentile(verdict.live, 1)
        )
        // Without --data: a run's folder is always fresh, and the one given now holds this run's log.
        let command =
            "cogd-lab drill --group-workers \(options.groupWorkers) --seconds \(options.seconds) --kill-worker-every \(options.killWorkerEvery) --heartbeat-timeout \(options.heartbeatTimeout)"
            + (options.freezeWorkerEvery > 0 ? " --freeze-worker-every \(options.freezeWorkerEvery)" : "")
            + (options.cutWorkerEvery > 0 ? " --cut-worker-every \(options.cutWorkerEvery)" : "") + " --seed \(options.seed)\(options.portsOption)"
        let ownerless = verdict.workerKills - verdict.live.count
        if json {
            func number(_ value: Double?) -> String { value.map { String(format: "%.1f", $0) } ?? "null" }
            return "{\"seed\": \(options.seed), \"command\": \(CBORText.quoted(command)), \"groupWorkers\": \(options.groupWorkers), "
                + "\"workerKills\": \(verdict.workerKills), \"killsOfOwners\": \(verdict.live.count), \"sent\": \(verdict.sent), "
                + "\"workerFreezes\": \(verdict.workerFreezes), \"freezesNotSuspended\": \(verdict.unsuspended.count), "
                + "\"workerCuts\": \(verdict.workerCuts), \"cutsNotSuspended\": \(verdict.uncut.count), "
                + "\"applied\": \(verdict.applied), \"unchanged\": \(verdict.unchanged), \"refused\": \(verdict.refused), \"rejected\": \(verdict.rejected), "
                + "\"retried\": \(verdict.retried), \"unanswered\": \(verdict.unanswered), \"turns\": \(turns), \"lost\": \(verdict.lost.count), "
                + "\"duplicated\": \(verdict.duplicated.count), \"logSound\": \(verdict.problem == nil), "
                + "\"moneyConserved\": \(verdict.moneyConserved), \"replicasConverged\": \(verdict.unconverged.isEmpty), "
                + "\"doubleOwnership\": \(check.doubleOwnership.count), \"unownedAccounts\": \(check.uncovered.count), "
                + "\"ownedFromRevision\": \(check.coveredFrom.map(String.init) ?? "null"), "
                + "\"scopeEffects\": \(check.scopeEffects), \"scopeInstances\": \(check.instancesSeen.count), "
                + "\"effectsDuplicated\": \(check.duplicatedEffects.count), \"effectsFromRetiredOrForeign\": \(check.foreignEffects.count), "
                + "\"retiredScopeRejections\": \(verdict.retiredRejected), \"heartbeatTimeoutMs\": \(number(timeout)), "
                + "\"moveWindowMs\": \(number(limit)), \"reopenMsP50\": \(number(figures.reopenP50)), \"reopenMsP99\": \(number(figures.reopenP99)), "
                + "\"liveMsP50\": \(number(figures.liveP50)), \"liveMsP99\": \(number(figures.liveP99)), \"liveMsMax\": \(number(figures.liveMax)), "
                + "\"killsMovedInWindow\": \(verdict.live.count - verdict.late.count), \"ports\": \(ports.json), \"report\": \(reportFile.map(CBORText.quoted) ?? "null"), "
                + "\"violations\": [\(verdict.violations.map(CBORText.quoted).joined(separator: ", "))]}"
        }
        func beside(_ value: Double?) -> String {
            guard let value else { return "never" }
            return "\(Self.milliseconds(value)) ms (\(String(format: "%.2f", value / timeout))× the timeout)"
        }
        var lines = [
            "drill verdict (seed \(options.seed), a group of \(options.groupWorkers) workers)",
            "  kills            workers \(verdict.workerKills) (\(verdict.live.count) owned accounts, \(ownerless) owned none), leader 0",
            "  freezes          \(verdict.workerFreezes) workers SIGSTOPped past the heartbeat timeout; \(verdict.workerFreezes - verdict.unsuspended.count) said lease-expired when they ran again, before gone",
            "  cuts             \(verdict.workerCuts) workers cut off from the leader past the heartbeat timeout, running; \(verdict.workerCuts - verdict.uncut.count) said lease-expired before gone",
            "  requests         the drill's client sent \(verdict.sent): applied \(verdict.applied), unchanged \(verdict.unchanged), refused \(verdict.refused), rejected \(verdict.rejected), retried \(verdict.retried), unanswered \(verdict.unanswered)",
            "  log              \(turns) turns, \(verdict.problem.map { "PROBLEM: \(escaped: $0)" } ?? "contiguous, decodes, state equals replay")",
            "  lost             \(verdict.lost.count)",
            "  duplicated       \(verdict.duplicated.count)",
            "  money            \(verdict.total) of \(verdict.expectedTotal) \(verdict.moneyConserved ? "(conserved)" : "(NOT conserved)")",
            "  replicas         \(verdict.unconverged.isEmpty ? "converged" : "NOT converged: \(escaped: verdict.unconverged.joined(separator: "; "))")",
            "  ownership        \(check.doubleOwnership.count) times a (group, selector, account) had two live instances (checked after every record)",
            "  owned            \(check.uncovered.count) times an account had no live owner past the move window, from revision \(check.coveredFrom.map(String.init) ?? "— (never all owned)")",
            "  effects          \(check.scopeEffects) turns from \(check.instancesSeen.count) scope instances; duplicated \(check.duplicatedEffects.count); from retired or another worker's instances \(check.foreignEffects.count); \(verdict.retiredRejected) late requests from retired instances refused by the leader (retired-scope: the workers' own, not the client's)",
            "  move             kill → reopened on a survivor p50 \(beside(figures.reopenP50)), p99 \(beside(figures.reopenP99))",
            "                   kill → greeter live there  p50 \(beside(figures.liveP50)), p99 \(beside(figures.liveP99)), max \(beside(figures.liveMax))",
            "                   heartbeat timeout \(Self.milliseconds(timeout)) ms; every account live within \(Self.milliseconds(limit)) ms of the kill: \(verdict.live.count - verdict.late.count) of \(verdict.live.count) kills",
            "  reproduce        \(command)",
        ]
        lines.append(verdict.violations.isEmpty ? "PASS" : "FAIL: " + verdict.violations.map { "\(escaped: $0)" }.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }
}
