import Cog
import CogProtocol
import CogWire
import Foundation

/// What a worker counts for its operator (`/metrics`), beside its sync state.
public struct WorkerOperations: Sendable {
    /// Hellos sent: the first, then one per rejoin and one per retry while
    /// the leader refuses the name (0.5 s doubling to 5 s apart), key or rig (every 5 s).
    public internal(set) var hellos: UInt64 = 0
    /// Snapshots applied: the first sync, then one per re-sync.
    public internal(set) var snapshotsApplied: UInt64 = 0
    /// Replies to this worker's requests, by outcome.
    public internal(set) var applied: UInt64 = 0
    public internal(set) var unchanged: UInt64 = 0
    public internal(set) var rejected: UInt64 = 0
    /// Replies saying the op's body refused (`refused`, its app's code).
    public internal(set) var refused: UInt64 = 0
    /// Op requests the socket could not take (its queue to the leader full):
    /// each answered here, rejected `unavailable`, and counted in `rejected` too.
    public internal(set) var unsentRequests: UInt64 = 0
    /// Scope registrations the socket could not take at once, kept and sent again.
    public internal(set) var registrationRetries: UInt64 = 0
    /// The newest revision the leader announced (a welcome, a published turn).
    public internal(set) var newestSeenRevision: UInt64 = 0

    mutating func sawRevision(_ revision: UInt64) { newestSeenRevision = max(newestSeenRevision, revision) }

    mutating func count(_ outcome: OpReply.Outcome) {
        switch outcome {
        case .applied: applied &+= 1
        case .unchanged: unchanged &+= 1
        case .rejected: rejected &+= 1
        case .refused: refused &+= 1
        }
    }

    /// Re-syncs: snapshots applied after the first.
    public var resyncs: UInt64 { snapshotsApplied > 0 ? snapshotsApplied - 1 : 0 }
}

extension Worker {
    /// The leader silent this long: `/readyz` says 503.
    public static let readySilenceLimit: Duration = .seconds(5)

    /// Seconds since the leader last sent this worker anything.
    public var secondsSinceLeaderHeard: Double {
        let elapsed = (ContinuousClock.now - lastHeardFromLeader).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    /// Whether `/readyz` says 200, and why (one line).
    public var readiness: (ready: Bool, reason: String) {
        if let refusal = accessRefused ?? rigRefused ?? displaced { return (false, "refused by the leader: \(refusal.code): \(refusal.message)") }
        guard isSynced else { return (false, "not synced yet: saying hello to the leader at \(configuration.leaderEndpoint)") }
        let silence = secondsSinceLeaderHeard
        guard silence < Double(Worker.readySilenceLimit.components.seconds) else {
            return (false, "no answer from the leader at \(configuration.leaderEndpoint) for \(Int(silence)) s")
        }
        return (true, "synced, applied revision \(appliedRevision), epoch \(epoch ?? 0)")
    }

    /// Every worker metric, as of now (`protocol/metrics.md`).
    public func metricFamilies() -> [MetricFamily] {
        let ops = operations
        return [
            .single("cogd_worker_synced", .gauge, help: "1 once the replica applied a snapshot from the leader, else 0.", isSynced ? 1 : 0),
            .single("cogd_worker_applied_revision", .gauge, help: "The newest revision applied to the replica.", Double(appliedRevision)),
            .single(
                "cogd_worker_lag_revisions", .gauge, help: "Revisions the leader announced that the replica has not applied.",
                Double(ops.newestSeenRevision > appliedRevision ? ops.newestSeenRevision - appliedRevision : 0)),
            .single("cogd_worker_leader_silence_seconds", .gauge, help: "Seconds since the leader last sent anything.", secondsSinceLeaderHeard),
            .single(
                "cogd_worker_reconnects_total", .counter,
                help: "Times the worker joined the leader again after it had joined (a leader restart, given up, refused meanwhile); hellos retried while refused do not count.",
                Double(core.rejoins)),
            .single("cogd_worker_resyncs_total", .counter, help: "Snapshots applied after the first sync.", Double(ops.resyncs)),
            .single("cogd_worker_reactions_total", .counter, help: "Reaction bodies run on the replica.", Double(cogs.reactionsRun)),
            .labelled(
                "cogd_worker_requests_total", .counter, help: "Replies to this worker's op requests, by outcome.",
                label: "outcome", [("applied", Double(ops.applied)), ("unchanged", Double(ops.unchanged)), ("rejected", Double(ops.rejected)), ("refused", Double(ops.refused))]),
            MetricFamily(
                "cogd_worker_rejections_total", .counter,
                help: "Rejections of this worker's own op requests, by op and code (only pairs seen; past 64 pairs, op and code _other).",
                samples: rejections.counts.sorted { $0.key < $1.key }.map { series, count in
                    MetricFamily.Sample(labels: [MetricFamily.Label("op", series.op), MetricFamily.Label("code", series.code)], value: Double(count))
                }),
            .single(
                "cogd_worker_requests_unsent_total", .counter,
                help: "Op requests the socket could not take (its queue to the leader full), each answered here rejected unavailable.",
                Double(ops.unsentRequests)),
            .single(
                "cogd_worker_lease_suspended", .gauge,
                help: "1 while the lease has run out (no welcome within the leader's heartbeat timeout less the margin): placed instances' effects are suspended.",
                isSuspended ? 1 : 0),
            .single(
                "cogd_worker_lease_expiries_total", .counter,
                help: "Times the lease ran out and the placed instances' tasks and reactions were suspended.", Double(leaseExpiries)),
            .single("cogd_worker_digest_mismatches_total", .counter, help: "Records or snapshots whose state digest differed from the replica's.", Double(digestMismatches)),
            .single("cogd_process_resident_memory_bytes", .gauge, help: "Resident memory of this process.", residentMemoryBytes()),
        ]
    }

    /// Once per pass: `/healthz`'s heartbeat, readiness, and fresh figures
    /// when a scrape asked, with `extra` families of the process's own
    /// after the worker's (`cogd worker`'s `cogd_worker_setting_info`).
    public func publish(to board: MetricsBoard, adding extra: [MetricFamily] = []) {
        board.notePass()
        let (ready, reason) = readiness
        board.setReadiness(ready, reason)
        if board.isWanted { board.publish(metricFamilies() + extra) }
    }
}
