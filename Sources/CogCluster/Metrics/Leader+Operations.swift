import Cog
import CogLog
import CogProtocol
import CogWire
import Foundation

/// What the leader keeps for its operator — `/metrics` figures and the
/// log's rate limits — beside the serving state (`Leader.operations`).
struct LeaderOperations {
    /// Seconds per commit (the LMDB write transaction, fsync included).
    var commitDuration = MetricHistogram(bounds: [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
    ])
    /// Seconds a held reply, turn or snapshot waited for standbys' acknowledgements (ha.md §9).
    var releaseWait = MetricHistogram(bounds: [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
    ])
    /// Turns per commit (group commit: more under load).
    var commitTurns = MetricHistogram(bounds: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024, 2_048, 4_096])
    var turnsCommitted: UInt64 = 0
    var snapshotsStarted: UInt64 = 0
    var snapshotsStreamed: UInt64 = 0
    /// The last revision of each recent commit and when it committed, oldest
    /// first (a worker's lag in seconds: since the first commit it lacks).
    var recentCommits: [(revision: UInt64, at: ContinuousClock.Instant)] = []
    /// The data file's use, read at most every `fileUseInterval`.
    var fileUse: (fileBytes: Int, pageSize: Int, usedPages: Int, freePages: Int)?
    var fileUseRead: ContinuousClock.Instant?
    /// Rejections, one line per code per 10 s.
    var rejectionSummary = CountSummary()
    /// Other error replies and events, one line per code per 10 s.
    var errorSummary = CountSummary()
    var lastSummaryLook = ContinuousClock.now
    /// Slow commits since the last line about them (one line per 10 s).
    var slowCommits: UInt64 = 0
    var slowestCommit: Duration = .zero
    var lastSlowCommitLine: ContinuousClock.Instant?
    /// Name conflicts by worker name (a refused process says hello again
    /// and again: one line per name per 10 s).
    var conflicts = PerNameLines()
    /// Rig refusals by worker name, likewise.
    var rigRefusals = PerNameLines()

    static let recentCommitsKept = 4_096
    static let fileUseInterval: Duration = .seconds(5)
}

extension Leader {
    /// A commit over this long is logged (`warn`, at most one line per 10 s with a count).
    public static let slowCommitThreshold: Duration = .milliseconds(250)

    /// A commit of `turns` turns ending at `lastRevision` took `duration`.
    func noteCommit(_ duration: Duration, turns: Int, lastRevision: UInt64) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        operations.commitDuration.observe(seconds)
        operations.commitTurns.observe(Double(turns))
        operations.turnsCommitted &+= UInt64(turns)
        if turns > 0 {
            if operations.recentCommits.count >= LeaderOperations.recentCommitsKept {
                operations.recentCommits.removeFirst(LeaderOperations.recentCommitsKept / 2)
            }
            operations.recentCommits.append((lastRevision, .now))
        }
        if duration > Leader.slowCommitThreshold {
            operations.slowCommits += 1
            operations.slowestCommit = max(operations.slowestCommit, duration)
        }
    }

    func noteSnapshotStarted() { operations.snapshotsStarted &+= 1 }

    /// A snapshot went out whole to `identity` (`parts` messages).
    func noteSnapshotStreamed(to identity: [UInt8], parts: UInt64, revision: UInt64) {
        operations.snapshotsStreamed &+= 1
        let peer = String(decoding: identity, as: UTF8.self)
        configuration.operatorLog?.log(
            .info, "snapshot-streamed",
            "snapshot of revision \(revision) streamed to \(TerminalText.escaped(peer)) in \(parts) part\(parts == 1 ? "" : "s")",
            ["peer": .text(peer), "revision": .number(Double(revision)), "parts": .number(Double(parts))])
    }

    /// Once per pass of the serving loop: healthz's heartbeat, fresh figures
    /// when a scrape asked, and the log's events.
    func operationsPass() {
        if let board = configuration.metricsBoard {
            board.notePass()
            if board.isWanted { board.publish(metricFamilies() + (configuration.extraMetrics?() ?? [])) }
        }
        guard let log = configuration.operatorLog else { return }
        for event in takeCoreEvents() {
            switch event {
            case .joined(let worker, _, _, true):
                // Tools come and go with each command (`call --name` twice a call): DEBUG, not INFO.
                log.log(
                    .debug, "tool-joined", "tool \(TerminalText.escaped(worker)) connected (cogd get, tail --connect or call --name)",
                    ["worker": .text(worker)])
            case .timedOut(let worker, let seconds, true):
                // A tool reads and closes; it sends no heartbeat and held no instance.
                log.log(
                    .debug, "tool-left", "tool \(TerminalText.escaped(worker)) left: silent for \(Int(seconds)) s (a tool holds no scope instance)",
                    ["worker": .text(worker), "reason": .text("timeout")])
            case .joined(let worker, let group, let revision, _):
                log.log(
                    .info, "worker-joined",
                    "worker \(TerminalText.escaped(worker)) joined" + (group.map { " group \(TerminalText.escaped($0))" } ?? "")
                        + " (its replica at revision \(revision))",
                    ["worker": .text(worker), "group": .text(group ?? ""), "revision": .number(Double(revision))])
            case .timedOut(let worker, let seconds, _):
                log.log(
                    .warn, "worker-timed-out",
                    "worker \(TerminalText.escaped(worker)) left: silent for \(Int(seconds)) s (heartbeat timeout); its scope instances retire",
                    ["worker": .text(worker), "silentSeconds": .number(seconds)])
            case .saidGoodbye(let worker, true):
                log.log(
                    .debug, "tool-left", "tool \(TerminalText.escaped(worker)) left (said goodbye; a tool holds no scope instance)",
                    ["worker": .text(worker), "reason": .text("goodbye")])
            case .saidGoodbye(let worker, false):
                log.log(
                    .info, "worker-left", "worker \(TerminalText.escaped(worker)) left (said goodbye as it stopped); its scope instances retire",
                    ["worker": .text(worker), "reason": .text("goodbye")])
            case .nameTakenOver(let worker):
                log.log(
                    .info, "worker-replaced", "worker \(TerminalText.escaped(worker)): a new process took the name over from one that is gone",
                    ["worker": .text(worker)])
            case .rigRefused(let worker, let reason):
                guard let more = operations.rigRefusals.lineDue(for: worker, now: ContinuousClock.now) else { continue }
                log.log(
                    .warn, "rig-refused",
                    "refused worker \(TerminalText.escaped(worker))'s hello: \(TerminalText.escaped(reason))"
                        + (more > 0 ? " (\(more) more refusals since the last line)" : ""),
                    ["worker": .text(worker), "reason": .text(reason), "more": .number(Double(more))])
            case .placementHeld(let seconds):
                log.log(
                    .info, "placement-held",
                    "this leader follows an earlier one: group scopes are placed in \(String(format: "%g", seconds)) s (the heartbeat timeout), "
                        + "once a worker the earlier leader placed them on has stopped them (its lease runs out first)",
                    ["seconds": .number(seconds)])
            case .placementReleased(let registrations):
                log.log(
                    .info, "placement-released", "group scopes are placed from now on (\(registrations) registrations kept meanwhile)",
                    ["registrations": .number(Double(registrations))])
            case .nameConflict(let worker):
                guard let more = operations.conflicts.lineDue(for: worker, now: ContinuousClock.now) else { continue }
                log.log(
                    .warn, "name-conflict",
                    "another process asked for worker name \(TerminalText.escaped(worker)) while its holder is connected; refused name-in-use"
                        + (more > 0 ? " (\(more) more refusals since the last line)" : ""),
                    ["worker": .text(worker), "more": .number(Double(more))])
            }
        }
        let now = ContinuousClock.now
        guard now - operations.lastSummaryLook >= .seconds(1) else { return }
        operations.lastSummaryLook = now
        let (rejections, errors) = countsByKind
        for (code, added, total) in operations.rejectionSummary.due(LeaderStatus.byText(rejections), now: now) {
            log.log(
                .warn, "rejections",
                "\(added) request\(added == 1 ? "" : "s") rejected \(code) "
                    + "in the last \(operations.rejectionSummary.interval.components.seconds) s or so (\(total) since start)",
                ["code": .text(code), "count": .number(Double(added)), "total": .number(Double(total))])
        }
        for (code, added, total) in operations.errorSummary.due(LeaderStatus.byText(errors), now: now) {
            if code == CogdCode.helloFirst.text {
                // Not a fault: a worker whose heartbeat reaches a leader that
                // does not know it yet (it restarted) is told hello-first and
                // says hello — the protocol working (`protocol/metrics.md` §5).
                log.log(
                    .info, "workers-reintroduced",
                    "\(added) message\(added == 1 ? "" : "s") from worker\(added == 1 ? "" : "s") this leader does not know yet answered hello-first "
                        + "in the last \(operations.errorSummary.interval.components.seconds) s or so (\(total) since start): "
                        + "workers re-introducing themselves (as after a leader restart) say hello next",
                    ["code": .text(code), "count": .number(Double(added)), "total": .number(Double(total))])
                continue
            }
            log.log(
                .warn, "errors",
                "\(added) message\(added == 1 ? "" : "s") answered with the error \(code) "
                    + "in the last \(operations.errorSummary.interval.components.seconds) s or so (\(total) since start)",
                ["code": .text(code), "count": .number(Double(added)), "total": .number(Double(total))])
        }
        if operations.slowCommits > 0, operations.lastSlowCommitLine.map({ now - $0 >= .seconds(10) }) ?? true {
            let millis = Double(operations.slowestCommit.components.attoseconds) / 1e15 + Double(operations.slowestCommit.components.seconds) * 1e3
            log.log(
                .warn, "slow-commits",
                "\(operations.slowCommits) commit\(operations.slowCommits == 1 ? "" : "s") over "
                    + "\(Leader.slowCommitThreshold.components.attoseconds / 1_000_000_000_000_000) ms, the slowest \(Int(millis)) ms "
                    + "(is the disk busy? `cogd bench log` measures it)",
                ["count": .number(Double(operations.slowCommits)), "slowestSeconds": .number(millis / 1e3)])
            operations.slowCommits = 0
            operations.slowestCommit = .zero
            operations.lastSlowCommitLine = now
        }
    }

    /// Seconds since the first commit a worker at `applied` lacks (0 when it
    /// lacks none; the oldest commit remembered when that one is older).
    func lagSeconds(applied: UInt64, last: UInt64, now: ContinuousClock.Instant) -> Double {
        guard applied < last, !operations.recentCommits.isEmpty else { return 0 }
        let commits = operations.recentCommits
        var low = 0
        var high = commits.count - 1
        while low < high {
            let middle = (low + high) / 2
            if commits[middle].revision > applied { high = middle } else { low = middle + 1 }
        }
        let elapsed = (now - commits[low].at).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    /// Every leader metric, as of now (`protocol/metrics.md`).
    func metricFamilies() -> [MetricFamily] {
        let now = ContinuousClock.now
        if operations.fileUseRead.map({ now - $0 >= LeaderOperations.fileUseInterval }) ?? true {
            operations.fileUse = try? store.fileUse()
            operations.fileUseRead = now
        }
        let (rejections, errors) = countsByKind
        let last = lastRevision
        // Tools (`cogd get`, `tail --connect`) read and close: neither workers nor lagging.
        let workers = core.workerStatus(now: self.now).filter { $0.tool != true }
        func worker(_ value: (LeaderStatus.Worker) -> Double) -> [MetricFamily.Sample] {
            workers.map { MetricFamily.Sample(labels: [.init("worker", $0.name)], value: value($0)) }
        }
        var families: [MetricFamily] = [
            .single("cogd_leader_epoch", .gauge, help: "The leader's epoch (one more at each start).", Double(epoch)),
            .single("cogd_leader_revision", .gauge, help: "The newest revision committed.", Double(last)),
            .single("cogd_leader_first_revision", .gauge, help: "The oldest revision the log keeps (retention).", Double(firstRevision)),
            .labelled(
                "cogd_leader_requests_total", .counter, help: "Op requests answered, by outcome (deduplicated: a retry answered from dedup).",
                label: "outcome", LeaderCore.RequestOutcome.allCases.map { ($0.rawValue, Double(core.requestOutcomes[$0] ?? 0)) }),
            .labelled(
                "cogd_leader_rejections_total", .counter, help: "Op requests answered rejected, by rejection code.",
                label: "code", CogdCode.known.filter { $0.uses.contains(.rejection) && $0 != .refused }.map { ($0.text, Double(rejections[$0] ?? 0)) }),
            MetricFamily(
                "cogd_leader_refusals_total", .counter,
                help: "Op requests whose body refused, by op and the app's refusal code (past \(LeaderCore.maximumRefusalSeries - 1) pairs, counted under op and code _other).",
                samples: core.refusalCounts.sorted { ($0.key.op, $0.key.code) < ($1.key.op, $1.key.code) }.map {
                    MetricFamily.Sample(labels: [.init("op", $0.key.op), .init("code", $0.key.code)], value: Double($0.value))
                }),
            .labelled(
                "cogd_leader_errors_total", .counter, help: "Error replies and events other than rejection codes, by code (as cogd status shows them).",
                label: "code",
                errors.map { ($0.key.text, Double($0.value)) }.sorted { $0.0 < $1.0 }),
            .single(
                "cogd_leader_dedup_hits_total", .counter, help: "Retried requests answered from the dedup table instead of run again.",
                Double(core.requestOutcomes[.deduplicated] ?? 0)),
            .single("cogd_leader_turns_committed_total", .counter, help: "Turns committed by this process.", Double(operations.turnsCommitted)),
            operations.commitDuration.family("cogd_leader_commit_duration_seconds", help: "How long each commit (LMDB write transaction) took."),
            operations.commitTurns.family("cogd_leader_commit_batch_turns", help: "Turns per commit."),
            .single("cogd_leader_connected_workers", .gauge, help: "Workers that said hello and are not given up.", Double(workers.count)),
            MetricFamily(
                "cogd_leader_worker_lag_revisions", .gauge, help: "Revisions committed that the worker has not reported applied.",
                samples: worker { Double($0.lag) }),
            MetricFamily(
                "cogd_leader_worker_lag_seconds", .gauge, help: "Seconds since the first commit the worker has not reported applied (0: none).",
                samples: worker { [self] in lagSeconds(applied: $0.appliedRevision, last: last, now: now) }),
            MetricFamily(
                "cogd_leader_worker_silence_seconds", .gauge, help: "Seconds since the worker's last message.",
                samples: worker { $0.secondsSinceHeard }),
            .single("cogd_leader_open_scope_instances", .gauge, help: "Scope instances open now.", Double(core.openScopeInstanceCount)),
            .single("cogd_leader_snapshot_streams", .gauge, help: "Snapshots being streamed now.", Double(snapshotStreamCount)),
            .single("cogd_leader_snapshots_started_total", .counter, help: "Snapshots asked for and begun.", Double(operations.snapshotsStarted)),
            .single("cogd_leader_snapshots_streamed_total", .counter, help: "Snapshots sent whole.", Double(operations.snapshotsStreamed)),
        ]
        if let use = operations.fileUse {
            families += [
                .single("cogd_leader_data_file_bytes", .gauge, help: "Size of data.mdb.", Double(use.fileBytes)),
                .single("cogd_leader_data_free_pages", .gauge, help: "Pages on LMDB's free list (reused before the file grows).", Double(use.freePages)),
                .single("cogd_leader_data_page_size_bytes", .gauge, help: "LMDB's page size.", Double(use.pageSize)),
            ]
        }
        families += shippingFamilies()
        families.append(.single("cogd_process_resident_memory_bytes", .gauge, help: "Resident memory of this process.", residentMemoryBytes()))
        return families
    }

    /// With `--sync` (`protocol/metrics.md` §3b): the sync state, each standby's acknowledgements, what is held.
    private func shippingFamilies() -> [MetricFamily] {
        guard let rules = shipCore else { return [] }
        let states: [ShipCore.State] = [.sync, .degraded, .held, .async]
        let names = ["sync", "degraded", "held", "async"]
        let standbys = rules.standbys.values.sorted { $0.node < $1.node }
        return [
            .labelled(
                "cogd_ha_sync_state", .gauge, help: "1 for the leader's replication state now (sync, degraded, held: no standby, async: --sync none), else 0.",
                label: "state", zip(states, names).map { ($1, rules.state == $0 ? 1 : 0) }),
            .single("cogd_ha_shipped_commits", .gauge, help: "Commits shipped to standbys in this epoch (the last one's sequence).", Double(rules.lastSequence)),
            .single("cogd_ha_released_commits", .gauge, help: "Shipped commits whose replies and turns may leave (acknowledged as --sync asks).", Double(rules.releasedThrough)),
            .single("cogd_ha_held_releases", .gauge, help: "Replies, turns, statuses and snapshots waiting for standbys' acknowledgements.", Double(heldReleases.count)),
            .single("cogd_ha_named_standbys", .gauge, help: "Standbys etcd's sync key names.", Double(rules.named.count)),
            MetricFamily(
                "cogd_ha_standby_lag_commits", .gauge, help: "Commits shipped that the connected standby has not acknowledged.",
                samples: standbys.map { MetricFamily.Sample(labels: [.init("standby", $0.node)], value: Double(rules.lastSequence - $0.acknowledged)) }),
            .single("cogd_ha_copy_streams", .gauge, help: "Copies of the log being sent to standbys not in step.", Double(copyStreams.count)),
            operations.releaseWait.family(
                "cogd_ha_release_wait_seconds", help: "How long each held reply, turn, status or snapshot waited for standbys' acknowledgements."),
        ]
    }
}

/// One log line per name per 10 s for a refusal a process repeats (its
/// hello, again and again), with how many were not logged since.
struct PerNameLines {
    private var names: [String: (lastLine: ContinuousClock.Instant, since: UInt64)] = [:]
    static let interval: Duration = .seconds(10)
    /// Names remembered at most (seen once long ago, they are forgotten: a line may then come sooner).
    static let limit = 1_024

    /// The refusals of `name` not logged since its last line when a line is
    /// due now (and notes it); nil when it is not (and counts this one).
    mutating func lineDue(for name: String, now: ContinuousClock.Instant) -> UInt64? {
        if let earlier = names[name], now - earlier.lastLine < PerNameLines.interval {
            names[name]!.since &+= 1
            return nil
        }
        if names.count >= PerNameLines.limit {
            names = names.filter { now - $0.value.lastLine < PerNameLines.interval }
            if names.count >= PerNameLines.limit { names = [:] }
        }
        let more = names[name]?.since ?? 0
        names[name] = (now, 0)
        return more
    }
}

