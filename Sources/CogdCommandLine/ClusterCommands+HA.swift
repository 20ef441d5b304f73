import Cog
import CogCluster
import CogLog
import CogProtocol
import CogWire
import Foundation
import Synchronization

/// `cogd leader --ha`: before it serves, the node waits for etcd to make it
/// the leader (ha.md §4), logging who leads meanwhile; once it leads, its
/// epoch is the one etcd minted and every release passes the arbiter's gate.
extension ClusterCommands {
    /// Where the wait for the lead ended.
    enum LeadWait {
        /// This node leads `epoch`; `arbiter` keeps the lease; `kept`: the
        /// commits it applied last as a standby (an old leader catches up from them).
        case lead(epoch: UInt64, arbiter: Arbiter, kept: KeptCommits?)
        /// It will not lead: the exit status to return (refused: 1; stopped by a signal: 0).
        case exit(Int32)
    }

    /// What the arbiter's thread reported that the waiting command line acts on.
    private final class LeadState: Sendable {
        let ended = Mutex<LeadWait?>(nil)
        /// What the node is doing, for systemd's status and /readyz.
        let standing = Mutex<String>("")
        /// Where the node that leads serves (nil: no one, or unknown), and its epoch.
        let leaderEndpoint = Mutex<String?>(nil)
        /// The epoch it leads (a restarted leader at the same endpoint is followed anew).
        let leaderEpoch = Mutex<UInt64?>(nil)
    }

    /// Starts the arbiter for `ha` and waits until this node leads, is
    /// refused, or `stop` is set. Every event is logged: `standby` (who
    /// leads), `lead`, `step-down` (ERROR), `ha-refused`, `ha-note`.
    static func awaitLead(
        _ ha: Command.HighAvailability, options: Command.LeaderOptions, log: OperatorLog, stop: StopFlag, metrics: MetricsBoard?,
        notifier: ServiceNotifier, stepDown: StepDownNotice
    ) -> LeadWait {
        // The highest epoch this node's own log has served: etcd may not hold a lower one.
        var ownEpoch: UInt64 = 0
        // Whether the folder holds a log: one without may not lead a cluster that has had a leader (ha.md §4).
        var holdsLog = false
        if FileManager.default.fileExists(atPath: options.dataFolder + "/data.mdb") {
            do {
                let store = try TurnStore(directory: options.dataFolder, mode: .reader)
                ownEpoch = store.epoch
                holdsLog = store.logID != nil
                store.close()
            } catch {
                log.failure("\(escaped: error)")
                return .exit(1)
            }
        }
        let endpoints: [EtcdGateway.Endpoint]
        do { endpoints = try EtcdGateway.endpoints(ha.etcd) } catch {
            log.failure("\(escaped: error)")
            return .exit(1)
        }
        // The run's lease is recorded in the folder, so the next run can revoke it if this one dies holding it (ha.md §4.1).
        let runRecord = RunRecord(dataFolder: options.dataFolder)
        do { try FileManager.default.createDirectory(atPath: options.dataFolder, withIntermediateDirectories: true) } catch {
            log.failure("cannot create data folder \(escaped: options.dataFolder): \(escaped: error.localizedDescription)")
            return .exit(1)
        }
        let state = LeadState()
        let cluster = OperatorLog.Value.text(ha.cluster)
        let node = OperatorLog.Value.text(ha.node)
        let arbiter = Arbiter(
            gateway: EtcdGateway(endpoints: endpoints),
            configuration: {
                var configuration = ArbiterCore.Configuration(
                    cluster: ha.cluster, node: ha.node, endpoint: options.requestsEndpoint, leaseSeconds: ha.leaseSeconds, ownEpoch: ownEpoch)
                configuration.holdsLog = holdsLog
                configuration.runFields = RunRecord.thisRun()
                // A folder without a record (new, or destroyed with the run that led) asks etcd's copy of it (ha.md §4.1).
                configuration.deadRunLease = runRecord.exists
                    ? runRecord.deadRunLease() : Self.deadRunInEtcd(endpoints, cluster: ha.cluster, node: ha.node, leaseSeconds: ha.leaseSeconds)
                return configuration
            }(),
            runRecord: runRecord,
            onEvent: { event in
                switch event {
                case .lead(let epoch):
                    log.log(.info, "lead", "node \(ha.node) leads cluster \(ha.cluster) in epoch \(epoch) (minted in etcd)",
                        ["cluster": cluster, "node": node, "epoch": .number(Double(epoch))])
                case .follow(let leader):
                    state.leaderEndpoint.withLock { $0 = leader?.endpoint }
                    state.leaderEpoch.withLock { $0 = leader?.epoch }
                    let standing = "standby: " + (leader.map { "node \($0.node) leads cluster \(ha.cluster) in epoch \($0.epoch)" } ?? "no node leads cluster \(ha.cluster)")
                    state.standing.withLock { $0 = standing }
                    metrics?.setReadiness(false, standing)
                    if let leader {
                        log.log(.info, "standby", "node \(leader.node) leads cluster \(ha.cluster) in epoch \(leader.epoch)"
                            + (leader.endpoint.isEmpty ? "" : " at \(TerminalText.escaped(leader.endpoint))") + "; this node waits as a standby",
                            ["cluster": cluster, "node": node, "leader": .text(leader.node), "epoch": .number(Double(leader.epoch))])
                    } else {
                        log.log(.info, "standby", "no node leads cluster \(ha.cluster); this node waits", ["cluster": cluster, "node": node])
                    }
                case .stepDown(let reason):
                    stepDown.log(node: ha.node, cluster: ha.cluster, reason: reason, to: log)
                    state.ended.withLock { if $0 == nil { $0 = .exit(1) } }
                case .refuse(let reason):
                    log.log(.error, "ha-refused", reason, ["cluster": cluster, "node": node, "reason": .text(reason)])
                    state.ended.withLock { if $0 == nil { $0 = .exit(1) } }
                case .note(let text):
                    log.log(.warn, "ha-note", text, ["cluster": cluster, "node": node])
                }
            })
        log.log(
            .info, "ha", "node \(ha.node) of cluster \(ha.cluster): asking etcd at \(endpoints.map(\.description).joined(separator: ", ")) "
                + "who leads (lease TTL \(ha.leaseSeconds) s)",
            ["cluster": cluster, "node": node, "leaseSeconds": .number(Double(ha.leaseSeconds))])
        // A standby's /metrics shows its role; /readyz says it is not serving (503) and who leads.
        state.standing.withLock { $0 = "standby: no node of cluster \(ha.cluster) is known to lead yet" }
        metrics?.setReadiness(false, state.standing.withLock { $0 })
        // The node keeps its folder a copy of the leader's log while it waits (ha.md §9), from the
        // first time it learns who leads: a start etcd refuses leaves the folder untouched.
        var follower: StandbyFollower?
        defer { follower?.close() }
        // Workers and tools that ask this node are sent to the one that leads (ha.md §10).
        let door: StandbyDoor
        // Under CURVE the node follows the log with its standby key; every node serves with the cluster's one leader key.
        var standbyKeys: CurveClientKeys?
        do {
            var authentication: Leader.Authentication?
            if let secret = options.curveSecret, let peers = options.peersFile {
                let pair = try CurveKeyPair.load(secretKeyFile: secret)
                authentication = Leader.Authentication(keyPair: pair, peersFile: peers)
                if let standbyKey = options.standbyKey {
                    standbyKeys = CurveClientKeys(pair: try CurveKeyPair.load(secretKeyFile: standbyKey), leaderKey: pair.publicKey)
                }
            }
            door = try StandbyDoor(endpoint: options.requestsEndpoint, turnsEndpoint: options.turnsEndpoint, authentication: authentication)
        } catch let error as ZMQError where error.operation.hasPrefix("zmq_bind(") {
            log.failure("\(escaped: bindFailure(error, options, removedFolder: false))")
            return .exit(1)
        } catch {
            log.failure("\(escaped: error)")
            return .exit(1)
        }
        // Closed (both endpoints) before the node binds them as the leader.
        defer { door.close() }
        arbiter.run()
        // Under systemd (Type=notify) a standby is still starting: it says who leads and pushes the start timeout on.
        var lastNotice = ContinuousClock.now - .seconds(60)
        while true {
            if ContinuousClock.now - lastNotice >= .seconds(5) {
                lastNotice = .now
                _ = notifier.notify(["EXTEND_TIMEOUT_USEC=15000000", "STATUS=\(state.standing.withLock { $0 })"])
            }
            if let metrics {
                metrics.notePass()
                if metrics.isWanted {
                    metrics.publish(
                        arbiter.metricFamilies() + [
                            .single(
                                "cogd_ha_not_leader_answers_total", .counter,
                                help: "Requests this standby answered not-leader (workers and tools sent on to the node that leads).",
                                Double(door.answered))
                        ])
                }
            }
            if let ended = state.ended.withLock({ $0 }) { return ended }
            if let epoch = arbiter.leadingEpoch { return .lead(epoch: epoch, arbiter: arbiter, kept: follower?.keptCommits) }
            if stop.isStopped {
                arbiter.resign()
                waitFinished(arbiter)
                return .exit(0)
            }
            let leader = state.leaderEndpoint.withLock { $0 }.flatMap { $0.isEmpty ? nil : $0 }
            if follower == nil, leader != nil {
                do {
                    follower = try StandbyFollower(node: ha.node, dataFolder: options.dataFolder, keys: standbyKeys) { event, message, warning in
                        log.log(warning ? .warn : .info, event, message, ["cluster": cluster, "node": node])
                    }
                } catch {
                    log.failure("\(escaped: error)")
                    arbiter.resign()
                    waitFinished(arbiter)
                    return .exit(1)
                }
            }
            if let follower {
                let epoch = state.leaderEpoch.withLock { $0 }
                door.pass(leader: leader, epoch: epoch ?? 0, timeout: .zero)
                follower.pass(leaderEndpoint: leader, leaderEpoch: epoch, timeout: .milliseconds(20))
                if follower.holdsLog != holdsLog {
                    holdsLog = follower.holdsLog
                    arbiter.holdsLog(holdsLog)
                }
            } else {
                door.pass(leader: leader, epoch: state.leaderEpoch.withLock { $0 } ?? 0, timeout: .milliseconds(20))
            }
        }
    }

    /// The `step-down` event (ha.md §4.6), logged once: by the arbiter when
    /// it steps down, or by the serving loop when the release gate closed
    /// first (the arbiter still waiting on etcd, as when the node is cut off).
    final class StepDownNotice: Sendable {
        private let logged = Mutex(false)

        func log(node: String, cluster: String, reason: String, to log: OperatorLog) {
            guard logged.withLock({ (done: inout Bool) -> Bool in
                defer { done = true }
                return !done
            }) else { return }
            log.log(.error, "step-down", "node \(node) steps down: \(reason)", ["cluster": .text(cluster), "node": .text(node), "reason": .text(reason)])
        }
    }

    /// Waits (at most 3 s) for the arbiter's last request, a resign's revoke.
    /// The lease etcd's `runs/NODE` names when that run was this machine's and has certainly ended (ha.md §4.1), else nil
    /// (none there, another machine's or boot's, alive, or etcd did not answer: the arbiter's start reports that).
    static func deadRunInEtcd(_ endpoints: [EtcdGateway.Endpoint], cluster: String, node: String, leaseSeconds: Int64) -> Int64? {
        let key = ArbiterRecords.Keys(cluster: cluster).run(node)
        let answer = EtcdGateway(endpoints: endpoints).perform(.read([key]), limit: Arbiter.requestLimit(leaseSeconds: leaseSeconds))
        guard case .values(let values) = answer, let record = values[key] else {
            return nil
        }
        return RunRecord.deadRunLease(record: record.value)
    }

    static func waitFinished(_ arbiter: Arbiter) {
        for _ in 0..<150 where !arbiter.isFinished { usleep(20_000) }
    }
}
