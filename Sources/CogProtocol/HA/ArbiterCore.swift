/// Who leads a cluster of cogd nodes, decided through etcd (ha.md): the
/// node's lease, its presence key, the campaign for the leader key, the
/// renewals, and the local deadline past which a leader releases nothing.
///
/// A pure state machine: the driver (`Arbiter` in `CogCluster`) calls
/// `start`, `answered` with etcd's answer to the one request in flight, and
/// `tick` on a timer, passing the monotonic time, and performs the effects.
/// At most one request is in flight at a time.
///
/// The rules (ha.md §4):
/// - One lease per node, granted at start, renewed every third of its TTL.
///   The node's presence key and, while it leads, the leader key live on it.
/// - A node takes a name only when no live node holds it (its presence key
///   is put only if absent); a name held past one TTL after start belongs to
///   another live node and the start is refused.
/// - A node whose previous run on the same machine is known to have ended
///   (the driver's run record: that process no longer exists) revokes that
///   run's lease before it asks for its own, so the presence key and any
///   leader key the dead run held go at once rather than a TTL later.
/// - The leader key is taken only when absent, by a node the sync key allows
///   (the last leader or a synchronous standby; anyone on a cluster that has
///   never had a leader), in one transaction that also mints the next epoch
///   and rewrites the sync key, each compared at the revision the node read —
///   so epochs come from etcd and two nodes never mint the same one.
/// - A leader rewrites the sync key only while the leader key is its own
///   and the sync key is as it last read it (both revisions compared), so a
///   write whose answer was lost lands before the next write or never.
/// - The release deadline is the send time of the last renewal etcd
///   confirmed, plus the TTL it confirmed, less a tenth of it (at least
///   100 ms) for the two clocks' rates. etcd counts the TTL from when the
///   renewal reached it, later than the send, so the deadline falls before
///   etcd can let the key go. A leader past its deadline steps down: it
///   releases nothing more and stops.
/// - A lease etcd says has ended ends the node's role at once.
/// - A campaign whose answer was lost (the transaction applied in etcd, the
///   answer never came) is won all the same: the next read finds the leader
///   key naming the node in the epoch it asked for, on its own lease.
public struct ArbiterCore: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var cluster: String
        public var node: String
        /// Where clients reach this node (in the leader key), or empty.
        public var endpoint: String
        /// The lease's TTL in whole seconds (2–3600).
        public var leaseSeconds: Int64
        /// The highest epoch in this node's own log: etcd must not hold a lower one.
        public var ownEpoch: UInt64
        /// Whether this node's data folder holds a log. A node without one
        /// (a new node, a folder destroyed) may not take the lead of a
        /// cluster that has had a leader, even where the sync key names it:
        /// it waits until a copy gives it one (`holdsLog(_:)`, ha.md §4).
        public var holdsLog = true
        /// The lease of this node's previous run, when that run is known to
        /// have ended (its process no longer exists: ha.md §4.1): revoked at
        /// start. Nil when unknown or possibly alive.
        public var deadRunLease: Int64?
        /// This run's process as the run record names it (`boot BOOT pidns
        /// NS pid PID`): put at `runs/NODE` on the lease, after `lease ID`,
        /// with the presence key (ha.md §4.1). Nil: not put.
        public var runFields: String?
        /// The simulator's broken rule (`cogd-lab sim --arbiter --break
        /// arbiter-deadline`): the deadline counts from when a renewal's
        /// answer came, with no margin — the mistake its checker must catch.
        public var deadlineFromAnswer = false

        public init(cluster: String, node: String, endpoint: String = "", leaseSeconds: Int64 = 5, ownEpoch: UInt64 = 0) {
            self.cluster = cluster
            self.node = node
            self.endpoint = endpoint
            self.leaseSeconds = leaseSeconds
            self.ownEpoch = ownEpoch
        }

        /// The lease TTLs a node accepts.
        public static let leaseSecondsRange: ClosedRange<Int64> = 2...3600
    }

    /// The node's data folder now holds a log, or no longer does (a standby's copy arrived).
    public mutating func holdsLog(_ holds: Bool) { configuration.holdsLog = holds }

    public enum Role: Sendable, Equatable {
        case starting
        /// Not leading; `leader` leads (nil: no one, or not known yet).
        case standby(leader: ArbiterRecords.Leader?)
        case leading(epoch: UInt64)
        /// Stepped down, refused, or resigned: the node's role is over.
        case stopped
    }

    public enum Effect: Sendable, Equatable {
        /// Ask etcd this; answer with `answered`.
        case send(EtcdRequest)
        /// This node leads `epoch`: serve, releasing only before `releaseDeadline`.
        case lead(epoch: UInt64)
        /// Another node leads (nil: no one does yet).
        case follow(ArbiterRecords.Leader?)
        /// Release nothing more, now, and stop (the role is over).
        case stepDown(reason: String)
        /// The node cannot join the cluster: stop with this message.
        case refuse(reason: String)
        /// Something an operator should hear of (a failed request, a wait).
        case note(String)
        /// etcd's sync key now names these standbys (a `writeSync` done).
        case syncWritten([String])
        /// The sync key was not written (etcd failed, or the leader key
        /// changed since this node read it); ask again later.
        case syncWriteFailed(String)
        /// etcd granted this lease: record it as this run's (before the
        /// next effect puts the presence key on it), so that the node's
        /// next run can revoke it if this one dies holding it.
        case leaseGranted(Int64)
    }

    public private(set) var configuration: Configuration
    public let keys: ArbiterRecords.Keys
    public private(set) var role: Role = .starting
    /// The lease this node holds, once granted.
    public private(set) var lease: Int64?
    /// Past this (monotonic) time the lease may have ended in etcd: a
    /// leader releases nothing at or after it.
    public private(set) var releaseDeadline: Duration = .zero
    /// The highest epoch this node has seen in etcd.
    public private(set) var epochSeen: UInt64 = 0

    private enum Step: Equatable {
        case revokeDeadRun
        case grant
        case claim
        case read
        case campaign(epoch: UInt64)
        case renew(sentAt: Duration)
        case resign
        case writeSync([String])
    }

    /// The request in flight.
    private var inFlight: Step?
    /// The epoch this node's last campaign asked for: a leader key naming
    /// the node in it is the node's own, even when the campaign's answer
    /// was lost (the transaction applied, the answer never came).
    private var campaigned: UInt64?
    private var startedAt: Duration = .zero
    /// Whether the presence key is ours, and whether the wait for it was noted.
    private var claimed = false
    private var presenceWaitNoted = false
    private var nextRenewal: Duration = .zero
    private var nextRead: Duration = .zero
    private var nextClaim: Duration = .zero
    /// While leading: the leader key's revision as last read (a sync key
    /// write is compared against it, so it lands only while the key is ours).
    private var leaderKeyRevision: Int64?
    /// While leading: the sync key's revision as last read (nil: unknown,
    /// after any write). A sync key write is compared against it too, so a
    /// write whose answer was lost lands before the next one or never: the
    /// key's values follow one chain of writes (ha.md §9 rule 5).
    private var syncKeyRevision: Int64?
    /// The sync key's standbys a leader asked for, not yet sent.
    private var syncWanted: [String]?
    /// Since when this node, the sync key's leader, has let its standbys
    /// take the lead first (nil: not deferring).
    private var deferringSince: Duration?
    /// How long the sync key's leader lets a standby it names take the lead
    /// first when no node leads (ha.md §4 rule 4): three read intervals.
    public var deferral: Duration { readInterval * 3 }

    /// A leader asks for the sync key to name `standbys` (ha.md §9): sent
    /// when no other request is in flight and the leader key's revision is
    /// known, answered by `syncWritten` or `syncWriteFailed`. A later ask
    /// replaces one not yet sent.
    public mutating func writeSync(standbys: [String], now: Duration) -> [Effect] {
        guard case .leading = role else { return [.syncWriteFailed("this node does not lead")] }
        syncWanted = standbys
        return tick(now: now)
    }

    public init(_ configuration: Configuration) {
        precondition(ArbiterRecords.isValidName(configuration.cluster) && ArbiterRecords.isValidName(configuration.node),
            "internal inconsistency: the arbiter was given a cluster or node name the command line should have refused")
        precondition(Configuration.leaseSecondsRange.contains(configuration.leaseSeconds),
            "internal inconsistency: lease TTL \(configuration.leaseSeconds) s outside \(Configuration.leaseSecondsRange)")
        self.configuration = configuration
        keys = ArbiterRecords.Keys(cluster: configuration.cluster)
    }

    /// The lease's TTL.
    public var ttl: Duration { .seconds(configuration.leaseSeconds) }
    /// Taken off the confirmed TTL for the deadline: a tenth, at least 100 ms.
    public var margin: Duration { max(ttl / 10, .milliseconds(100)) }
    /// How often the lease is renewed: a third of the TTL.
    public var renewalInterval: Duration { ttl / 3 }
    /// How often a standby reads who leads: an eighth of the TTL, at most 100 ms.
    public var readInterval: Duration { min(ttl / 8, .milliseconds(100)) }
    /// How soon a failed request is tried again.
    public var retryInterval: Duration { min(ttl / 10, .milliseconds(250)) }

    /// Whether a leader may release now.
    public func mayRelease(now: Duration) -> Bool {
        if case .leading = role { return now < releaseDeadline }
        return false
    }

    public mutating func start(now: Duration) -> [Effect] {
        precondition(role == .starting && inFlight == nil, "internal inconsistency: the arbiter started twice")
        startedAt = now
        if let dead = configuration.deadRunLease {
            return send(.revokeDeadRun, .revoke(lease: dead))
        }
        return send(.grant, .grantLease(seconds: configuration.leaseSeconds))
    }

    /// Gives up the role: a leader revokes its lease so that a standby may
    /// take over at once rather than after the TTL.
    public mutating func resign(now: Duration) -> [Effect] {
        role = .stopped
        releaseDeadline = .zero
        guard let lease, inFlight == nil else { return [] }
        return send(.resign, .revoke(lease: lease))
    }

    public mutating func tick(now: Duration) -> [Effect] {
        switch role {
        case .starting, .standby, .leading: break
        case .stopped: return []
        }
        if claimed, now >= releaseDeadline {
            let reason = if case .leading(let epoch) = role {
                "the lease could not be renewed in time: epoch \(epoch) ends at the local deadline, before etcd can give the leader key to another node"
            } else {
                "the lease could not be renewed in time: this node's presence in etcd may have ended"
            }
            return stop(.stepDown(reason: reason))
        }
        guard inFlight == nil, let lease else { return [] }
        if now >= nextRenewal { return send(.renew(sentAt: now), .keepAlive(lease: lease)) }
        if let standbys = syncWanted, case .leading(let epoch) = role, let leaderKeyRevision, let syncKeyRevision {
            syncWanted = nil
            // The write changes the key's revision: the next one reads it first.
            self.syncKeyRevision = nil
            let sync = ArbiterRecords.Sync(epoch: epoch, leader: configuration.node, standbys: standbys)
            return send(.writeSync(standbys), .transaction(
                compares: [
                    EtcdCompare(key: keys.leader, modRevision: leaderKeyRevision),
                    EtcdCompare(key: keys.sync, modRevision: syncKeyRevision),
                ],
                puts: [EtcdPut(key: keys.sync, value: sync.text)]))
        }
        if !claimed {
            return now >= nextClaim ? send(.claim, claimRequest(lease: lease)) : []
        }
        // A standby reads who leads to take over when no one does; a leader,
        // to step down if its key was taken from it (deleted by hand).
        if now >= nextRead { return send(.read, readRequest) }
        return []
    }

    public mutating func answered(_ answer: EtcdAnswer, now: Duration) -> [Effect] {
        guard let step = inFlight else { return [] }
        inFlight = nil
        if role == .stopped { return [] }
        if case .failed(let failure) = answer { return failed(step, failure, now: now) }
        switch (step, answer) {
        case (.revokeDeadRun, .revoked):
            // The grant is sent now: the lease's time counts from here.
            startedAt = now
            return [.note("revoked lease \(configuration.deadRunLease ?? 0) of this node's previous run, which ended holding it")]
                + send(.grant, .grantLease(seconds: configuration.leaseSeconds))

        case (.grant, .granted(let lease, let seconds)):
            guard seconds > 0 else { return refuse("etcd granted a lease of \(seconds) s; it cannot keep this node's presence") }
            self.lease = lease
            releaseDeadline = startedAt + .seconds(seconds) - margin
            nextRenewal = startedAt + renewalInterval
            return [.leaseGranted(lease)] + send(.claim, claimRequest(lease: lease))

        case (.claim, .transaction(let succeeded)):
            guard succeeded else {
                if now - startedAt > ttl + margin {
                    return refuse(
                        "another node named \(configuration.node) is running in cluster \(configuration.cluster): its presence key \(keys.member(configuration.node)) "
                            + "stayed on a live lease for longer than the lease TTL (\(configuration.leaseSeconds) s); give each node its own --name")
                }
                nextClaim = now + readInterval
                // Said once: the claim is tried again every read interval until the TTL has passed.
                guard !presenceWaitNoted else { return [] }
                presenceWaitNoted = true
                return [.note("waiting for the presence key \(keys.member(configuration.node)): a node of this name held it (a crashed run's lease ends within \(configuration.leaseSeconds) s)")]
            }
            claimed = true
            return send(.read, readRequest)

        case (.read, .values(let values)):
            return read(values, now: now)

        case (.campaign(let epoch), .transaction(let succeeded)):
            guard succeeded else { return send(.read, readRequest) }
            return won(epoch, now: now)

        case (.renew(let sentAt), .keptAlive(let seconds)):
            guard seconds > 0 else {
                return stop(.stepDown(reason: "etcd says this node's lease has ended: its presence and any leader key it held are gone"))
            }
            releaseDeadline = configuration.deadlineFromAnswer
                ? max(releaseDeadline, now + .seconds(seconds)) : max(releaseDeadline, sentAt + .seconds(seconds) - margin)
            nextRenewal = sentAt + renewalInterval
            return []

        case (.resign, .revoked):
            return []

        case (.writeSync(let standbys), .transaction(let succeeded)):
            guard succeeded else {
                leaderKeyRevision = nil
                return send(.read, readRequest) + [.syncWriteFailed("the leader key or the sync key changed since this node read them")]
            }
            // The next write compares the key's new revision: read it now.
            nextRead = now
            return [.syncWritten(standbys)]

        default:
            return failed(step, EtcdFailure(.garbage, "an answer of another kind than the request asked for"), now: now)
        }
    }

    // MARK: - Steps

    private mutating func read(_ values: [String: EtcdValue], now: Duration) -> [Effect] {
        let epochValue = values[keys.epoch]
        let epoch: UInt64
        if let epochValue {
            guard let number = ArbiterRecords.number(epochValue.value) else {
                return garbageRecord(keys.epoch, epochValue.value, now: now)
            }
            epoch = number
        } else {
            epoch = 0
        }
        if epoch < configuration.ownEpoch, role == .starting {
            return refuse(
                "etcd holds epoch \(epoch) for cluster \(configuration.cluster), below this node's own log (epoch \(configuration.ownEpoch)): "
                    + "--ha names another etcd than the cluster's, or etcd's data was lost; point --ha at the cluster's etcd "
                    + "(or, to start the cluster anew on this etcd, put \(configuration.ownEpoch) at \(keys.epoch) first)")
        }
        epochSeen = max(epochSeen, epoch)
        var sync: ArbiterRecords.Sync?
        if let syncValue = values[keys.sync] {
            guard let parsed = ArbiterRecords.Sync(text: syncValue.value) else { return garbageRecord(keys.sync, syncValue.value, now: now) }
            sync = parsed
        }
        if let leaderValue = values[keys.leader] {
            guard let leader = ArbiterRecords.Leader(text: leaderValue.value) else {
                return garbageRecord(keys.leader, leaderValue.value, now: now)
            }
            epochSeen = max(epochSeen, leader.epoch)
            deferringSince = nil
            if leader.node == configuration.node, leader.epoch == campaigned, role != .stopped {
                leaderKeyRevision = leaderValue.modRevision
                syncKeyRevision = values[keys.sync]?.modRevision ?? 0
                if case .leading = role {} else { return won(leader.epoch, now: now) }
            }
            return follow(leader, now: now)
        }
        guard sync?.allows(configuration.node) ?? true, let lease else {
            var effects = follow(nil, now: now)
            if let sync, !effects.isEmpty {
                effects.append(.note("no node leads; only \(([sync.leader] + sync.standbys).joined(separator: ", ")) may take the lead (epoch \(sync.epoch)'s leader and synchronous standbys)"))
            }
            return effects
        }
        guard configuration.holdsLog || epoch == 0 else {
            var effects = follow(nil, now: now)
            if !effects.isEmpty {
                effects.append(.note("no node leads; this node's folder holds no log, so it may not take the lead of a cluster at epoch \(epoch): it waits for a copy from the next leader"))
            }
            return effects
        }
        guard epoch < UInt64(UInt32.max) else {
            return stop(.refuse(reason: "etcd's epoch for cluster \(configuration.cluster) is \(epoch), the last a log can hold: no epoch can follow it"))
        }
        // The last leader lets a synchronous standby take the lead first: it may have died after shipping a
        // commit it never committed, which the standby holds. A standby that leads keeps that commit and
        // catches this node up from it; this node leading would write over it and send the standby a copy.
        if let sync, sync.leader == configuration.node, !sync.standbys.isEmpty {
            let since = deferringSince ?? now
            if now - since < deferral {
                var effects = follow(nil, now: now)
                if deferringSince == nil {
                    effects.append(.note(
                        "no node leads; this node led epoch \(sync.epoch) and lets its synchronous "
                            + "\(sync.standbys.count == 1 ? "standby" : "standbys") \(sync.standbys.joined(separator: ", ")) take the lead first (it may hold a commit this node "
                            + "shipped but did not commit); this node campaigns in \(ArbiterCore.milliseconds(deferral)) ms if none does"))
                }
                deferringSince = since
                return effects
            }
        }
        deferringSince = nil
        let next = epoch + 1
        let leader = ArbiterRecords.Leader(node: configuration.node, epoch: next, endpoint: configuration.endpoint)
        let newSync = ArbiterRecords.Sync(epoch: next, leader: configuration.node, standbys: [])
        campaigned = next
        return send(.campaign(epoch: next), .transaction(
            compares: [
                EtcdCompare(key: keys.leader, modRevision: 0),
                EtcdCompare(key: keys.epoch, modRevision: epochValue?.modRevision ?? 0),
                EtcdCompare(key: keys.sync, modRevision: values[keys.sync]?.modRevision ?? 0),
            ],
            puts: [
                EtcdPut(key: keys.leader, value: leader.text, lease: lease),
                EtcdPut(key: keys.epoch, value: String(next)),
                EtcdPut(key: keys.sync, value: newSync.text),
            ]))
    }

    private mutating func won(_ epoch: UInt64, now: Duration) -> [Effect] {
        epochSeen = max(epochSeen, epoch)
        // A campaign's answer that comes after the deadline (the node was
        // frozen while it was on its way) leads nothing: the lease may have
        // ended and another node may lead a later epoch already.
        guard now < releaseDeadline else {
            return stop(.stepDown(reason: "won epoch \(epoch) in etcd, but the answer came after the lease's local deadline: another node may lead by now"))
        }
        role = .leading(epoch: epoch)
        nextRead = now + readInterval
        return [.lead(epoch: epoch)]
    }

    private mutating func follow(_ leader: ArbiterRecords.Leader?, now: Duration) -> [Effect] {
        nextRead = now + readInterval
        switch role {
        case .leading(let epoch):
            // The leader key is ours while the lease lives; another's means ours ended.
            guard leader?.node == configuration.node && leader?.epoch == epoch else {
                return stop(.stepDown(reason: "etcd names \(leader.map { "\($0.node) in epoch \($0.epoch)" } ?? "no leader") while this node leads epoch \(epoch)"))
            }
            return []
        case .standby(let known) where known == leader:
            return []
        case .starting, .standby:
            role = .standby(leader: leader)
            return [.follow(leader)]
        case .stopped:
            return []
        }
    }

    private mutating func failed(_ step: Step, _ failure: EtcdFailure, now: Duration) -> [Effect] {
        switch step {
        case .revokeDeadRun:
            // The dead run's lease ends by itself within its TTL: wait for it as without a record.
            startedAt = now
            return [.note("could not revoke lease \(configuration.deadRunLease ?? 0) of this node's previous run (\(failure)); its presence ends within the TTL")]
                + send(.grant, .grantLease(seconds: configuration.leaseSeconds))
        case .grant, .claim:
            return refuse("etcd could not be used (\(failure)); check that --ha names the cluster's etcd client URLs and that etcd is running")
        case .renew:
            nextRenewal = now + retryInterval
        case .read, .campaign, .writeSync:
            nextRead = now + retryInterval
        case .resign:
            break
        }
        if case .writeSync = step {
            // etcd may apply the write yet; the next one compares the sync key's revision as read after this.
            return [.syncWriteFailed("etcd request failed (\(failure))")]
        }
        return [.note("etcd request failed (\(failure)); trying again")]
    }

    private mutating func garbageRecord(_ key: String, _ value: String, now: Duration) -> [Effect] {
        let shown = ArbiterCore.shown(value)
        if role == .starting {
            return refuse("etcd's \(key) holds \(shown), which no cogd node writes; remove the cluster's keys only if no node of it runs, or name another --cluster")
        }
        nextRead = now + retryInterval
        return [.note("etcd's \(key) holds \(shown), which no cogd node writes; not taking the lead while it does")]
    }

    private var readRequest: EtcdRequest { .read([keys.leader, keys.epoch, keys.sync]) }

    private func claimRequest(lease: Int64) -> EtcdRequest {
        var puts = [EtcdPut(key: keys.member(configuration.node), value: configuration.node, lease: lease)]
        if let fields = configuration.runFields {
            puts.append(EtcdPut(key: keys.run(configuration.node), value: "lease \(lease) \(fields)", lease: lease))
        }
        return .transaction(compares: [EtcdCompare(key: keys.member(configuration.node), modRevision: 0)], puts: puts)
    }

    private mutating func send(_ step: Step, _ request: EtcdRequest) -> [Effect] {
        precondition(inFlight == nil || step == .resign, "internal inconsistency: a second etcd request while one is in flight")
        inFlight = step
        return [.send(request)]
    }

    private mutating func refuse(_ reason: String) -> [Effect] { stop(.refuse(reason: reason)) }

    private mutating func stop(_ effect: Effect) -> [Effect] {
        role = .stopped
        releaseDeadline = .zero
        return [effect]
    }

    /// A duration in whole milliseconds, for a log line.
    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// A value from etcd as an operator may see it: at most 64 characters,
    /// control characters and quotes escaped.
    public static func shown(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars.prefix(64) {
            switch scalar.value {
            case 0x20..<0x7F where scalar != "\"" && scalar != "\\": out.unicodeScalars.append(scalar)
            case 0xA0...: out.unicodeScalars.append(scalar)
            default: out += "\\u{\(String(scalar.value, radix: 16))}"
            }
        }
        return out + (value.unicodeScalars.count > 64 ? "…\"" : "\"")
    }
}
