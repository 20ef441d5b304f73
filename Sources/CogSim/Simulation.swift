import Cog
import CogCodec
import CogProtocol
import Foundation
import LedgerRig
import TrailsRig

/// What one simulated run does (`cogd sim`).
public struct SimConfiguration: Sendable {
    public var seed: UInt64
    /// Steps with faults; then the faults stop and the run goes on until
    /// every replica has converged (or `settleLimit` of simulated time passed).
    public var steps: Int
    public var workers: Int
    /// Rules switched off, to show the checker catches their absence.
    public var broken: Set<SimRule>
    public var faults: Bool
    public var heartbeatTimeout: Duration = .seconds(3)
    /// How long a snapshot's requester may take nothing before the leader gives it up.
    public var snapshotDeadline: Duration = .seconds(2)
    /// The workers form one group (`cogwire.md` §6a): the leader places each
    /// scope member on one of them, and the checker holds it to that.
    public var groups = false
    /// How long, once faults stop, everything has to converge.
    public var settleLimit: Duration = .seconds(120)
    /// The leader's log keeps only its newest turns, as `cogd leader
    /// --retain-turns N` does (N drawn per seed, 2 to 24): after each
    /// commit the older records go, and the answers stored before them, so
    /// a replica that falls behind is answered `compacted` and syncs from a
    /// snapshot, and a late retry is answered `expired`. Off: every record
    /// is kept.
    public var retention = true

    public init(seed: UInt64, steps: Int = 20_000, workers: Int = 3, broken: Set<SimRule> = [], faults: Bool = true) {
        self.seed = seed
        self.steps = steps
        self.workers = workers
        self.broken = broken
        self.faults = faults
    }
}

/// A rule `cogd sim --break` can switch off.
public enum SimRule: String, Sendable, CaseIterable {
    case instanceCheck = "instance-check"
    case dedup
    case heartbeatExpiry = "heartbeat-expiry"
    /// The replicas' check of each record's state digest.
    case digestCheck = "digest-check"
    /// One owner per scope member in a group (with `--groups`).
    case exclusivePlacement = "exclusive-placement"
    /// A worker's lease (with `--groups`): a worker cut off from the leader
    /// suspends its placed instances' effects before the leader moves them.
    case workerLease = "worker-lease"
    /// The leader's snapshot sender gives up a requester that reads nothing.
    case snapshotDeadline = "snapshot-deadline"
    /// A restarted leader quarantines the request whose body crashed its predecessor.
    case quarantine
    /// A selector whose value cannot be read retires nothing (broken: read
    /// as no members, every instance open under it retires).
    case selectorEncoding = "selector-encoding"

    var leaderRule: LeaderRule? {
        switch self {
        case .instanceCheck: .instanceCheck
        case .dedup: .dedup
        case .heartbeatExpiry: .heartbeatExpiry
        case .exclusivePlacement: .exclusivePlacement
        case .selectorEncoding: .selectorEncoding
        case .digestCheck, .workerLease, .snapshotDeadline, .quarantine: nil
        }
    }
}

/// A rule the checker saw broken.
public struct SimViolation: Error, Sendable {
    /// Which invariant (`lost-ack`, `applied-twice`, `replica-diverged`, …).
    public let invariant: String
    public let message: String
    public let step: Int
    public let time: Duration
    /// The last events before it, oldest first.
    public let trace: [String]
}

/// What a run did.
public struct SimResult: Sendable {
    public let seed: UInt64
    public let steps: Int
    public let violation: SimViolation?
    /// A hash of the log and the replicas' ends: one seed, one fingerprint.
    public let fingerprint: UInt64
    public let counts: [String: Int]
    public let revisions: UInt64
}

/// The leader core and replica cores of a small cluster, with the real
/// graph and the Ledger rig, on a simulated network, disk and clock, driven
/// by one seed; a checker looks at everything after every step.
@MainActor
public final class Simulation {
    let configuration: SimConfiguration
    var random: SimRandom
    var now: Duration = .zero
    var step = 0
    let log = MemoryLog()
    var leader: SimLeader?
    var leaderIncarnation = 0
    var leaderDownUntil: Duration?
    var leaderPausedUntil: Duration?
    /// When the leader last came up or back from a pause (dead workers are
    /// given up by `heartbeatTimeout` after this).
    var leaderUpSince: Duration = .zero
    var workers: [SimWorker] = []
    var packets: [Packet] = []
    var packetOrder: UInt64 = 0
    /// When the last in-order packet of each connection arrives.
    var channelClock: [Int: Duration] = [:]
    var checker = SimChecker()
    /// The request whose body crashed the last leader, for the next one to settle.
    var leftOver: LeaderCore.LeftOverRequest?
    /// Requests a body crash quarantined: never applied, whatever retries come.
    var quarantined: Set<RequestID> = []
    /// Parts queued to a requester that reads nothing (down or cut off), by its identity.
    var heldParts: [[UInt8]: Int] = [:]
    var counts: [String: Int] = [:]
    var trace: [String] = []
    var violation: SimViolation?
    var faultsOn = true
    /// How many turns the leader's log keeps (nil: every one).
    var retainedTurns: UInt64?
    /// The sequence of the simulation's own fault requests (`sim-faults`).
    var faultSequence: UInt64 = 0

    static let accounts = ["alba", "bo", "cyd", "dee", "eli", "fay", "gus", "hal"]
    static let openingBalance = 1_000
    static var totalMoney: Int { accounts.count * openingBalance }

    public init(configuration: SimConfiguration) {
        self.configuration = configuration
        random = SimRandom(seed: configuration.seed)
        faultsOn = configuration.faults
        LedgerRig.register()
        TrailsRig.register()
        _ = SimRig.rig
    }

    public func run() -> SimResult {
        if configuration.retention { retainedTurns = UInt64(random.int(2...24)) }
        faultsOn = false
        startLeader()
        openAccounts()
        faultsOn = configuration.faults
        for index in 0..<configuration.workers {
            let worker = SimWorker(index: index, name: "w\(index + 1)")
            workers.append(worker)
            start(worker)
        }
        while violation == nil, step < configuration.steps {
            advance()
        }
        if violation == nil { settle() }
        return SimResult(
            seed: configuration.seed, steps: step, violation: violation, fingerprint: fingerprint(), counts: counts,
            revisions: log.lastRevision)
    }

    // MARK: Steps

    /// One step: time moves, faults strike, due messages arrive, every node
    /// ticks, clients act, and the checker looks.
    func advance() {
        step += 1
        now += random.milliseconds(1, 20)
        if faultsOn { injectFaults() }
        restartDueNodes()
        serveLeader()
        pumpSnapshots()
        for worker in workers where worker.alive { serve(worker) }
        for worker in workers where worker.alive { act(worker) }
        check()
    }

    /// Faults stop; the network heals; every node comes back; the run goes
    /// on until everything has converged, within `settleLimit`.
    func settle() {
        faultsOn = false
        for worker in workers { worker.blockedToLeaderUntil = nil; worker.blockedFromLeaderUntil = nil }
        if leaderPausedUntil != nil {
            leaderPausedUntil = nil
            leaderUpSince = now
        }
        note("faults stop; the network heals")
        let deadline = now + configuration.settleLimit
        while violation == nil {
            if leader == nil, leaderDownUntil == nil { leaderDownUntil = now }
            for worker in workers where !worker.alive && worker.restartAt == nil { worker.restartAt = now }
            // The desks' selector is mended: the run ends with every selector readable.
            if selectorSpoiled { spoilSelector(false) }
            if let lagging = unconverged() ?? (selectorSpoiled ? "sim.accounts is still spoiled" : nil) {
                guard now < deadline else {
                    fail("no-convergence", "\(Int(configuration.settleLimit.components.seconds)) s after the faults stopped, \(lagging)")
                    return
                }
                advance()
            } else {
                return
            }
        }
    }

    /// Why the cluster has not converged yet (nil: it has).
    func unconverged() -> String? {
        guard let leader else { return "the leader is down" }
        _ = leader
        for worker in workers {
            guard worker.alive else { return "\(worker.name) is down" }
            guard worker.core.isSynced, worker.core.epoch == log.epoch else { return "\(worker.name) has not synced with epoch \(log.epoch)" }
            guard worker.core.appliedRevision == log.lastRevision else {
                return "\(worker.name) is at revision \(worker.core.appliedRevision) of \(log.lastRevision) (\(worker.core.summary))"
            }
            if let oldest = worker.outstanding.first {
                return "\(worker.name)'s request \(oldest.request) (\(oldest.op)) is unanswered"
            }
            if let scope = worker.registrationSentAt.keys.sorted(by: { $0.rawValue < $1.rawValue }).first {
                return "\(worker.name)'s registration over \(scope.source) is unanswered"
            }
        }
        return nil
    }

    // MARK: The leader

    func startLeader() {
        if leaderIncarnation > 0 { log.reopen() }
        leaderIncarnation += 1
        let node = SimLeader(
            simulation: self, snapshotDeadline: configuration.snapshotDeadline, neverGivesUp: configuration.broken.contains(.snapshotDeadline))
        var broken = Set<LeaderRule>()
        for rule in configuration.broken { if let rule = rule.leaderRule { broken.insert(rule) } }
        do {
            node.core = try LeaderCore(
                log: log, ports: node, registry: try OpRegistry(rigs: [LedgerRig.rig, TrailsRig.rig, SimRig.rig]),
                settings: {
                    var settings = LeaderCore.Settings(
                        heartbeatTimeout: configuration.heartbeatTimeout, turnsEndpoint: "sim://turns", broken: broken)
                    settings.placesGroups = configuration.groups
                    // Replies indexed every 8 (not 1,024): this small cluster's epochs are short, and
                    // retention keeps every record from the oldest unindexed reply on.
                    if configuration.retention { settings.indexInterval = 8 }
                    return settings
                }())
        } catch {
            fail("start", "the leader core could not start: \(error)")
            return
        }
        leader = node
        leaderDownUntil = nil
        leaderUpSince = now
        note("leader starts (epoch \(log.epoch))")
        if let left = leftOver {
            leftOver = nil
            // The leader's own rule, after its core rebuilt the unindexed replies (off under --break quarantine).
            if !configuration.broken.contains(.quarantine) {
                do {
                    if try node.core.settle(left) == .quarantined {
                        quarantined.insert(left.request)
                        count("quarantined")
                        note("\(left.request) quarantined: answered rejected(crashed-leader) for good")
                    }
                } catch {
                    fail("start", "the left-over request could not be settled: \(error)")
                    return
                }
            } else {
                quarantined.insert(left.request)
            }
        }
        if node.core.hasWork { carry(node.core.step(.endBatch, now: now)) }
    }

    func crashLeader(for downtime: Duration) {
        guard leader != nil else { return }
        leader = nil
        leaderDownUntil = now + downtime
        // Its connections break: what was on the way to or from it is lost.
        packets.removeAll { $0.leaderIncarnation == leaderIncarnation }
        count("leader-crashes")
        note("leader crashes (down \(Self.shown(downtime)) s)")
    }

    /// The bank opens before the run: eight accounts of 1,000.
    func openAccounts() {
        guard let leader else { return }
        for (index, account) in Simulation.accounts.enumerated() {
            let argument = (try? CBOREncoder().encode(Opening(account: account, balance: Simulation.openingBalance))) ?? []
            let request = OpRequest(request: RequestID(worker: "sim-setup", sequence: UInt64(index + 1)), op: "ledger.open", argument: argument)
            carry(leader.core.step(.message(from: Array("sim-setup".utf8), frames: [WireMessage.op(request).encoded()]), now: now))
        }
        carry(leader.core.step(.endBatch, now: now))
        checker.scan(log, simulation: self)
    }

    func serveLeader() {
        guard let leader else { return }
        if let until = leaderPausedUntil {
            guard now >= until else { return }
            leaderPausedUntil = nil
            leaderUpSince = now
            note("leader resumes")
        }
        var due: [Packet] = []
        packets.removeAll { packet in
            guard case .toLeader = packet.kind, packet.deliverAt <= now else { return false }
            due.append(packet)
            return true
        }
        for packet in due.sorted(by: Packet.inOrder) {
            guard case .toLeader(let identity, let frame) = packet.kind, self.leader === leader else { continue }
            leader.running = nil
            carry(leader.core.step(.message(from: identity, frames: [frame]), now: now))
            if faultsOn, var body = leader.running, self.leader === leader, random.chance(0.003) {
                // The op's body crashes the leader (a trap): its fatal-signal handler marks the note.
                body.crashed = true
                crashLeader(for: random.milliseconds(300, 3_000))
                leftOver = body
                note("leader crashes in the body of \(body.request) (\(body.op))")
                count("body-crashes")
                return
            }
        }
        leader.running = nil
        guard self.leader === leader else { return }
        carry(leader.core.step(.tick, now: now))
        if self.leader === leader, leader.core.hasWork { carry(leader.core.step(.endBatch, now: now)) }
    }

    /// Carries out the leader core's effects.
    func carry(_ effects: [LeaderCore.Effect]) {
        for effect in effects {
            guard let leader else { return }
            switch effect {
            case .send(let peer, let frame):
                checker.leaderSent(frame, simulation: self)
                sendToWorker(peer, frame, stream: false)
            case .sendStatus:
                break
            case .startSnapshot(let peer, let whole):
                carrySnapshot(leader.snapshots.start(to: peer, whole: whole, source: .success(MemorySnapshot(log)), now: now))
            case .commit(let commit):
                if faultsOn, random.chance(0.01) {
                    log.failingCommits = 1
                    count("failed-commits")
                }
                let answer: LeaderCore.Input
                do {
                    let revisions = try log.append(commit, secondsSince1970: Simulation.seconds(now))
                    answer = .committed(revisions)
                    count("commits")
                    // Retention, in the same transaction (as `TurnStore.append(…, retention:)`).
                    prune()
                } catch {
                    answer = .commitFailed(cause: "simulated disk failure")
                    note("a commit fails")
                }
                checker.scan(log, simulation: self)
                if faultsOn, case .committed = answer, random.chance(0.003) {
                    // Committed, but the process dies before anyone hears of it.
                    crashLeader(for: random.milliseconds(200, 3_000))
                    return
                }
                carry(leader.core.step(answer, now: now))
            case .publish(let revisions):
                // The commit's records, as the leader publishes its batch from memory (retention may
                // already have removed the older of them from the log).
                guard revisions.lowerBound >= 1, revisions.upperBound - 1 <= UInt64(log.records.count) else { continue }
                let records = Array(log.records[Int(revisions.lowerBound - 1)..<Int(revisions.upperBound - 1)])
                let frame = WireMessage.turns(epoch: log.epoch, records: records).encoded()
                for worker in workers where worker.alive && worker.subscribed {
                    sendToWorker(worker.identity, frame, stream: true)
                }
            case .standby:
                break  // The simulated workers are no standbys.
            }
        }
    }

    /// Retention (`--retain-turns N`, `protocol/turnlog.md` §2a): the
    /// records but the newest `retainedTurns` go, as `Retention.turns`
    /// keeps them in `TurnStore`, and with them the answers stored before
    /// the first revision kept. The log keeps the rest of the rule: never
    /// the newest record, nor one whose reply is not indexed yet.
    func prune() {
        guard let keep = retainedTurns, log.lastRevision >= keep else { return }
        let first = log.firstRevision
        log.prune(below: log.lastRevision - keep + 1)
        if log.firstRevision > first { counts["pruned-records", default: 0] += Int(log.firstRevision - first) }
    }

    /// Whether `sim.accounts` is spoiled in the log's state (its encoding fails).
    var selectorSpoiled: Bool {
        log.state[TurnWrite.entryKey(name: SimRig.spoiledName, key: nil)]?.value == [0xf5]
    }

    /// Spoils (or mends) the desks' selector, `sim.accounts`: a request of
    /// the simulation's own (`sim-faults`) in the leader's next batch, which
    /// may fail, or be lost with a crash, like any.
    func spoilSelector(_ spoiled: Bool) {
        guard let leader, leaderPausedUntil == nil else { return }
        faultSequence += 1
        let request = OpRequest(
            request: RequestID(worker: "sim-faults", sequence: faultSequence), op: SimRig.spoilOp,
            argument: spoiled ? [0xf5] : [0xf4])
        count(spoiled ? "selector-spoils" : "selector-mends")
        note(spoiled ? "sim.accounts is spoiled: its value cannot be encoded" : "sim.accounts is mended")
        carry(leader.core.step(.message(from: Array("sim-faults".utf8), frames: [WireMessage.op(request).encoded()]), now: now))
    }

    /// Offers the next part of each snapshot (the leader's own
    /// `SnapshotSender`, parts of about 512 bytes so that several parts,
    /// lost or reordered, are the common case). A requester that is down or
    /// cut off from the leader takes nothing: its queue is full after two
    /// parts, and the sender must give it up at its deadline.
    func pumpSnapshots() {
        guard let leader, !leader.snapshots.isEmpty else { return }
        let (_, effects) = leader.snapshots.pump(now: now, epoch: log.epoch, reopen: { [log] in MemorySnapshot(log) }) { peer, frame in
            let worker = workers.first { $0.identity == peer }
            if faultsOn, let worker, worker.alive, random.chance(0.02) {
                // The requester dies in the middle of its snapshot.
                crash(worker, for: random.milliseconds(200, 3_000))
                count("requester-crashes")
            }
            let reading = worker.map { $0.alive && ($0.blockedFromLeaderUntil.map { now >= $0 } ?? true) } ?? false
            guard reading else {
                let held = heldParts[peer, default: 0]
                guard held < 2 else { return .full }
                heldParts[peer] = held + 1
                return .taken
            }
            sendToWorker(peer, frame, stream: false)
            return .taken
        }
        carrySnapshot(effects)
    }

    /// Does what the leader's snapshot sender asks.
    func carrySnapshot(_ effects: [SnapshotSender<MemorySnapshot>.Effect]) {
        for effect in effects {
            guard let leader else { return }
            switch effect {
            case .count(let event):
                leader.core.countEvent(event)
                count(event.text)
            case .refuse(let peer, let refusal):
                leader.core.countError(refusal)
                sendToWorker(peer, WireMessage.error(refusal).encoded(), stream: false)
            case .ended(let peer):
                heldParts[peer] = nil
                carry(leader.core.step(.snapshotEnded(peer), now: now))
            case .streamed:
                count("snapshots-streamed")
            }
        }
    }

    // MARK: Workers

    func start(_ worker: SimWorker) {
        worker.incarnation += 1
        worker.alive = true
        worker.restartAt = nil
        worker.deadSince = nil
        worker.identity = Array("\(worker.name)/\(worker.incarnation)".utf8)
        worker.core = ReplicaCore(
            settings: ReplicaCore.Settings(
                name: worker.name, checksDigest: !configuration.broken.contains(.digestCheck), group: configuration.groups ? "sim" : nil,
                lease: configuration.broken.contains(.workerLease) ? nil : ReplicaCore.lease(heartbeatTimeout: configuration.heartbeatTimeout)))
        worker.cogs = Cogs.replica()
        worker.subscribed = false
        worker.outstanding = []
        worker.book = ReplicaScopes()
        worker.registrationSentAt = [:]
        worker.mismatchesSeen = 0
        worker.compactedSeen = 0
        note("\(worker.name) starts (incarnation \(worker.incarnation))")
        carry(worker, worker.core.step(.start, now: now))
    }

    func crash(_ worker: SimWorker, for downtime: Duration?) {
        guard worker.alive else { return }
        worker.alive = false
        worker.deadSince = now
        worker.restartAt = downtime.map { now + $0 }
        packets.removeAll { $0.worker == worker.index && $0.workerIncarnation == worker.incarnation }
        count("worker-crashes")
        note("\(worker.name) crashes (\(downtime.map { "down \(Self.shown($0)) s" } ?? "for good"))")
    }

    func serve(_ worker: SimWorker) {
        var due: [Packet] = []
        packets.removeAll { packet in
            guard packet.worker == worker.index, case .toWorker = packet.kind, packet.deliverAt <= now else { return false }
            due.append(packet)
            return true
        }
        for packet in due.sorted(by: Packet.inOrder) {
            guard worker.alive, packet.workerIncarnation == worker.incarnation, case .toWorker(let frame, let stream) = packet.kind else { continue }
            let message: WireMessage
            do {
                message = try WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
            } catch {
                fail("undecodable", "\(worker.name) could not decode a message the leader sent: \(error.code.text): \(error.message)")
                return
            }
            if stream {
                guard worker.subscribed, case .turns(let epoch, let records) = message else { continue }
                carry(worker, worker.core.step(.published(epoch: epoch, records: records), now: now))
            } else {
                carry(worker, worker.core.step(.leader(message), now: now))
            }
        }
        if worker.alive { carry(worker, worker.core.step(.tick, now: now)) }
    }

    func carry(_ worker: SimWorker, _ effects: [ReplicaCore.Effect]) {
        // The core's state is already past the whole step: the replica is
        // checked once its graph has caught up with it, after the effects.
        // A replica that has just found its digest wrong is re-syncing: its
        // state is checked once the snapshot has put it right.
        var applied = false
        defer {
            if worker.core.compactedCatchUps != worker.compactedSeen {
                // Its catch-up reached below what the leader's log keeps: it syncs from a snapshot.
                counts["compacted-catch-ups", default: 0] += worker.core.compactedCatchUps - worker.compactedSeen
                worker.compactedSeen = worker.core.compactedCatchUps
            }
            if worker.core.digestMismatches != worker.mismatchesSeen {
                worker.mismatchesSeen = worker.core.digestMismatches
                count("digest-mismatches")
            } else if applied, violation == nil {
                checker.checkReplica(worker, at: worker.core.appliedRevision, simulation: self)
            }
        }
        for effect in effects {
            guard violation == nil else { return }
            switch effect {
            case .send(let message):
                sendToLeader(from: worker, message.encoded())
            case .subscribe:
                worker.subscribed = true
            case .applySnapshot(let revision, let entries, let absent):
                do {
                    try worker.cogs.restoreDurableState(
                        named: "sync",
                        writes: absent.map { CogDurableWrite(name: $0.name, key: $0.key, value: nil) }
                            + entries.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                        codec: worker.codec)
                } catch {
                    fail("replica-apply", "\(worker.name) could not apply a snapshot: \(error)")
                }
                worker.book.snapshotApplied()
                _ = revision
                applied = true
            case .apply(let record):
                // The shipped rules of the worker's book (ReplicaScopes): events, then the replies the record reaches.
                _ = worker.book.applied(record, worker: worker.name)
                for event in record.scopeEvents where event.worker == worker.name && event.kind == .retire { worker.stale.append(event.instance) }
                do {
                    try worker.cogs.applyReplicatedTurn(
                        named: record.name, writes: record.writes.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                        codec: worker.codec)
                } catch {
                    fail("replica-apply", "\(worker.name) could not apply revision \(record.revision): \(error)")
                }
                _ = worker.book.reached(record.revision)
                applied = true
            case .firstSync, .registerScopesAnew:
                worker.forgetInstances()
                for scope in SimWorker.Scope.registered(grouped: configuration.groups) { register(worker, scope, anew: true) }
            case .forgetInstances:
                worker.forgetInstances()
            case .reply(let reply):
                if reply.outcome.rejection?.code == .retiredScope { count("retired-refused") }
                checker.workerHeard(reply, by: worker, simulation: self)
                if !SimChecker.isTransient(reply.outcome) { worker.outstanding.removeAll { $0.request == reply.request } }
            case .registered(let registration, let revision, let members):
                guard let scope = SimWorker.Scope(rawValue: registration) else { continue }
                worker.registrationSentAt[scope] = nil
                _ = worker.book.replied(registration: scope.rawValue, revision: revision, members: members, applied: worker.core.appliedRevision)
            case .refused(let error):
                note("\(worker.name) refused: \(error.code)")
            case .suspendEffects:
                count("lease-expiries")
                note("\(worker.name)'s lease runs out: its placed instances' effects stop")
            case .resumeEffects:
                note("\(worker.name)'s lease is renewed: its placed instances' effects start again")
            case .followLeader:
                // One leader here: no standby ever answers `not-leader`.
                fail("replica-follow", "\(worker.name) was told to follow another leader, and this simulation has one")
            }
        }
    }

    /// Sends a registration: `anew` when the scopes register again (the
    /// book starts over for it), else a resend of one unanswered.
    func register(_ worker: SimWorker, _ scope: SimWorker.Scope, anew: Bool = false) {
        if anew { worker.book.registering(scope.rawValue, applied: worker.core.appliedRevision) }
        worker.registrationSentAt[scope] = now
        let spec = ScopeRegistration(
            worker: worker.name, registration: scope.rawValue, path: scope.path, source: scope.source, key: nil, form: scope.form)
        sendToLeader(from: worker, WireMessage.scopeRegister(spec).encoded())
    }

    /// A client's work: now and then a new op; a request or registration
    /// unanswered for a second is sent again, as it was.
    func act(_ worker: SimWorker) {
        for index in worker.outstanding.indices where now - worker.outstanding[index].sentAt >= .seconds(1) {
            worker.outstanding[index].sentAt = now
            count("retries")
            sendToLeader(from: worker, worker.outstanding[index].frame)
        }
        for scope in SimWorker.Scope.registered(grouped: configuration.groups) {
            if let sentAt = worker.registrationSentAt[scope], now - sentAt >= .seconds(2) { register(worker, scope) }
        }
        guard faultsOn, worker.core.isSynced, worker.core.displaced == nil, worker.outstanding.count < 4, random.chance(0.15) else { return }
        guard let sequence = worker.core.nextSequence() else { return }
        let request = RequestID(worker: worker.name, sequence: sequence)
        let op = randomOp(for: worker)
        let frame = WireMessage.op(OpRequest(request: request, op: op.name, argument: op.argument, instance: op.instance)).encoded()
        worker.outstanding.append(SimWorker.Outstanding(request: request, op: op.name, frame: frame, sentAt: now))
        count("ops")
        sendToLeader(from: worker, frame)
    }

    /// A ledger op three times in four, else a trails op; some run in a
    /// scope instance — now and then one that has retired.
    func randomOp(for worker: SimWorker) -> (name: String, argument: [UInt8], instance: UInt64?) {
        random.int(0...3) == 0 ? randomTrailsOp(for: worker) : randomLedgerOp(for: worker)
    }

    func randomLedgerOp(for worker: SimWorker) -> (name: String, argument: [UInt8], instance: UInt64?) {
        let encoder = CBOREncoder()
        let account = random.pick(Simulation.accounts)
        switch random.int(0...99) {
        case 0..<50:
            var other = random.pick(Simulation.accounts)
            if other == account { other = Simulation.accounts[(Simulation.accounts.firstIndex(of: account)! + 1) % Simulation.accounts.count] }
            let transfer = Transfer(from: account, to: other, amount: random.int(1...400))
            return ("ledger.transfer", (try? encoder.encode(transfer)) ?? [], nil)
        case 50..<60 where configuration.groups:
            // A greeting from the mechanism's root: stamped with the root's
            // instance where this worker holds it (or a retired one).
            let (_, instance) = scopeMember(of: worker, in: .root)
            return ("ledger.greet", (try? encoder.encode("root")) ?? [], instance)
        case 50..<75:
            // A greeting from the greeter scope's child (or the desk) for an account.
            let (member, instance) = scopeMember(of: worker, in: random.chance(0.5) ? .accounts : .desks)
            let name = member.flatMap { try? CBORDecoder().decode(String.self, from: $0) } ?? account
            return ("ledger.greet", (try? encoder.encode(name)) ?? [], instance)
        case 75..<87:
            return ("ledger.close", (try? encoder.encode(account)) ?? [], nil)
        default:
            return ("ledger.open", (try? encoder.encode(Opening(account: account, balance: 0))) ?? [], nil)
        }
    }

    func randomTrailsOp(for worker: SimWorker) -> (name: String, argument: [UInt8], instance: UInt64?) {
        let encoder = CBOREncoder()
        let screen = random.int(1...6)
        switch random.int(0...99) {
        case 0..<30:
            return ("trails.openScreen", (try? encoder.encode(ScreenOpening(screen: screen, trail: "trail-\(random.int(1...4))"))) ?? [], nil)
        case 30..<50:
            return ("trails.closeScreen", (try? encoder.encode(screen)) ?? [], nil)
        case 50..<80:
            // A screen's child accepts its trail, with the screen as receipt.
            let (member, instance) = scopeMember(of: worker, in: .screens)
            let receipt = member.flatMap { try? CBORDecoder().decode(TrailScreenID.self, from: $0) } ?? screen
            let trail = Trail(id: "trail-\(receipt)", name: "Trail \(receipt)", lengthKm: Double(random.int(1...40)) / 2)
            return ("trails.accept", (try? encoder.encode(TrailAcceptance(trail: trail, receipt: receipt))) ?? [], instance)
        case 80..<90:
            return ("trails.journal", (try? encoder.encode("line \(step) from \(worker.name)")) ?? [], nil)
        default:
            return ("trails.tickHike", (try? encoder.encode(random.int(1...60))) ?? [], nil)
        }
    }

    /// A member of one of the worker's scopes and its instance: mostly a
    /// live one, sometimes a retired instance (the leader must refuse it);
    /// none when the scope has no members.
    func scopeMember(of worker: SimWorker, in scope: SimWorker.Scope) -> (identity: [UInt8]?, instance: UInt64?) {
        if !worker.stale.isEmpty, random.chance(0.3) { return (nil, random.pick(worker.stale)) }
        let members = (worker.instances[scope] ?? [:]).keys.sorted { $0.lexicographicallyPrecedes($1) }
        guard !members.isEmpty else { return (nil, nil) }
        let identity = random.pick(members)
        return (identity, worker.instances[scope]?[identity])
    }

    // MARK: The network

    func sendToLeader(from worker: SimWorker, _ frame: [UInt8]) {
        if let until = worker.blockedToLeaderUntil, now < until {
            count("partitioned")
            return
        }
        enqueue(Packet(
            deliverAt: now, order: 0, kind: .toLeader(identity: worker.identity, frame: frame), worker: worker.index,
            workerIncarnation: worker.incarnation, leaderIncarnation: leaderIncarnation))
    }

    func sendToWorker(_ peer: [UInt8], _ frame: [UInt8], stream: Bool) {
        guard let worker = workers.first(where: { $0.identity == peer }), worker.alive else { return }
        if let until = worker.blockedFromLeaderUntil, now < until {
            count("partitioned")
            return
        }
        enqueue(Packet(
            deliverAt: now, order: 0, kind: .toWorker(frame: frame, stream: stream), worker: worker.index,
            workerIncarnation: worker.incarnation, leaderIncarnation: leaderIncarnation))
    }

    /// Puts a packet on the wire: delayed, and with faults on, sometimes
    /// lost, duplicated or held long enough to be overtaken.
    func enqueue(_ packet: Packet) {
        var packet = packet
        if faultsOn, random.chance(0.02) {
            count("lost")
            return
        }
        let copies = faultsOn && random.chance(0.01) ? 2 : 1
        if copies == 2 { count("duplicated") }
        // One connection delivers in order (as TCP does); with faults on, a
        // packet is now and then held long enough for later ones to overtake it.
        let channel = packet.channel
        for _ in 0..<copies {
            packetOrder += 1
            packet.order = packetOrder
            if faultsOn, random.chance(0.05) {
                packet.deliverAt = now + random.milliseconds(5, 400)
                count("reordered")
            } else {
                packet.deliverAt = max(now + random.milliseconds(0, 5), channelClock[channel] ?? .zero)
                channelClock[channel] = packet.deliverAt
            }
            packets.append(packet)
        }
    }

    /// Whether the worker process that uses `peer` is running (a partition
    /// does not close a connection; a crash does).
    func isConnected(_ peer: [UInt8]) -> Bool {
        workers.contains { $0.identity == peer && $0.alive }
    }

    // MARK: Faults

    func injectFaults() {
        if leader != nil, random.chance(0.0004) { crashLeader(for: random.milliseconds(300, 4_000)) }
        // The desks' selector becomes unreadable for a while (a few seconds, on average).
        if leader != nil, random.chance(selectorSpoiled ? 0.004 : 0.001) { spoilSelector(!selectorSpoiled) }
        if leader != nil, leaderPausedUntil == nil, random.chance(0.0004) {
            let pause = random.milliseconds(500, 7_000)
            leaderPausedUntil = now + pause
            count("pauses")
            note("leader pauses \(Self.shown(pause)) s")
        }
        if random.chance(0.0002) {
            // Mostly past the heartbeat timeout; now and then past the
            // snapshot and catch-up patience too.
            let jump = random.chance(0.2) ? random.milliseconds(30_000, 90_000) : random.milliseconds(1_000, 8_000)
            now += jump
            leaderUpSince = now
            count("clock-jumps")
            note("the clock jumps \(Self.shown(jump)) s")
        }
        for worker in workers {
            if worker.alive, worker.core.isSynced, random.chance(0.0003) {
                // A replica's memory goes wrong (a bit flip, a bug applying a write).
                worker.core.corruptState { self.random.int(0...($0 - 1)) }
                count("corruptions")
                note("\(worker.name)'s replica state is spoiled")
            }
            if worker.alive, random.chance(0.0003) {
                crash(worker, for: random.chance(0.3) ? nil : random.milliseconds(300, 12_000))
            }
            if random.chance(0.0008) {
                let length = random.milliseconds(300, 12_000)
                switch random.int(0...2) {
                case 0:
                    worker.blockedToLeaderUntil = now + length
                    worker.blockedFromLeaderUntil = now + length
                    note("\(worker.name) is cut off from the leader for \(Self.shown(length)) s")
                case 1:
                    worker.blockedToLeaderUntil = now + length
                    note("\(worker.name) cannot reach the leader for \(Self.shown(length)) s (one way)")
                default:
                    worker.blockedFromLeaderUntil = now + length
                    note("the leader cannot reach \(worker.name) for \(Self.shown(length)) s (one way)")
                }
                count("partitions")
            }
        }
    }

    func restartDueNodes() {
        if leader == nil, let until = leaderDownUntil, now >= until { startLeader() }
        for worker in workers where !worker.alive {
            if let at = worker.restartAt, now >= at { start(worker) }
        }
    }

    // MARK: Checking

    func check() {
        guard violation == nil else { return }
        checker.scan(log, simulation: self)
        checker.checkMoney(simulation: self)
        checker.checkGivenUp(simulation: self)
        checker.checkEffectOwners(simulation: self)
        // A requester that reads nothing is given up at the deadline: the
        // leader never holds a view (and the file growth it pins) longer.
        if let leader, leaderPausedUntil == nil, let oldest = leader.snapshots.oldestProgress,
            now - oldest > configuration.snapshotDeadline + .seconds(1)
        {
            fail("snapshot-held", "a snapshot has waited \(Self.shown(now - oldest)) s for a requester that takes nothing (deadline \(Self.shown(configuration.snapshotDeadline)) s)")
        }
    }

    func fail(_ invariant: String, _ message: String) {
        guard violation == nil else { return }
        violation = SimViolation(invariant: invariant, message: message, step: step, time: now, trace: trace)
    }

    func note(_ event: String) {
        trace.append("[\(step) t=\(Self.shown(now))] \(event)")
        if trace.count > 40 { trace.removeFirst(trace.count - 40) }
    }

    func count(_ name: String) { counts[name, default: 0] += 1 }

    /// Seconds with three decimals.
    nonisolated static func shown(_ duration: Duration) -> String {
        let millis = duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
        let fraction = String(millis % 1_000)
        return "\(millis / 1_000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// FNV-1a over the log's records and each replica's end.
    func fingerprint() -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x100_0000_01b3
            }
        }
        for record in log.records {
            mix(withUnsafeBytes(of: record.revision.bigEndian, Array.init))
            mix(record.name.utf8)
            mix((record.origin.request?.description ?? "-").utf8)
            for write in record.writes { mix(write.value ?? [0xff]) }
        }
        for worker in workers { mix(withUnsafeBytes(of: worker.core.appliedRevision.bigEndian, Array.init)) }
        return hash
    }
}

/// The leader process: its core, and what the core asks of its driver.
@MainActor
final class SimLeader: LeaderPorts {
    unowned let simulation: Simulation
    var core: LeaderCore!
    /// The snapshots it streams: the leader's own sender over the simulated log.
    var snapshots: SnapshotSender<MemorySnapshot>

    init(simulation: Simulation, snapshotDeadline: Duration, neverGivesUp: Bool) {
        self.simulation = simulation
        snapshots = SnapshotSender(partBytes: 512, deadline: snapshotDeadline)
        snapshots.neverGivesUp = neverGivesUp
    }

    /// The request whose body runs now (the running-request note), cleared when the batch's messages are read.
    var running: LeaderCore.LeftOverRequest?

    func noteRunning(_ request: RequestID, op: String, digest: [UInt8]) throws(TurnStoreError) {
        running = LeaderCore.LeftOverRequest(request: request, op: op, digest: digest, crashed: false, diedTwice: false)
    }

    func isConnected(_ peer: [UInt8], probe: [UInt8]) -> Bool { simulation.isConnected(peer) }
}

/// One worker process (and the client in it): a replica core, the replica's
/// graph, a scope over the open accounts, and the requests it waits on.
@MainActor
final class SimWorker {
    struct Outstanding {
        let request: RequestID
        let op: String
        let frame: [UInt8]
        var sentAt: Duration
    }

    /// The worker's scope registrations: a child per open account, a child
    /// per open trail screen, a desk per open account over the computed
    /// selector `sim.accounts` (which the simulation makes unreadable now
    /// and then), and (in a group) the mechanism's root, which the leader
    /// places on one member (`cogwire.md` §6a).
    enum Scope: UInt64, CaseIterable {
        case accounts = 1
        case screens = 2
        case root = 3
        case desks = 4

        var source: String {
            switch self {
            case .accounts: "ledger.accounts"
            case .screens: "trails.openScreens"
            case .root: ScopeRegistration.rootSource
            case .desks: SimRig.selectorName
            }
        }

        var path: String {
            switch self {
            case .accounts: "Sim.greeter"
            case .screens: "Sim.screens"
            case .root: "Sim"
            case .desks: "Sim.desk"
            }
        }

        var form: ScopeRegistration.Form { self == .root ? .bool : .each }

        /// The durable source whose elements are the members this scope
        /// selects while its selector can be read (`sim.accounts` reads the
        /// open accounts); nil for the root, always selected.
        var selection: String? {
            switch self {
            case .accounts, .desks: "ledger.accounts"
            case .screens: "trails.openScreens"
            case .root: nil
            }
        }

        /// The scopes a worker registers: the root only in a group.
        static func registered(grouped: Bool) -> [Scope] { grouped ? allCases : [.accounts, .screens, .desks] }
    }

    let index: Int
    let name: String
    var incarnation = 0
    var alive = false
    var restartAt: Duration?
    var deadSince: Duration?
    var identity: [UInt8] = []
    var core: ReplicaCore
    var cogs = Cogs.replica()
    let codec = ReplicaCodec()
    var subscribed = false
    var outstanding: [Outstanding] = []
    /// Which instance each member of each registration has (the rules the
    /// worker ships with, `ReplicaScopes`).
    var book = ReplicaScopes()
    /// Each scope's members and the instances the leader minted for them, as the book says.
    var instances: [Scope: [[UInt8]: UInt64]] {
        var all: [Scope: [[UInt8]: UInt64]] = [:]
        for scope in Scope.allCases {
            let members = book.instances(registration: scope.rawValue)
            if !members.isEmpty { all[scope] = members }
        }
        return all
    }
    /// Instances that retired: sent now and then, to be refused.
    var stale: [UInt64] = []
    /// Registrations sent and not answered yet (sent again after 2 s).
    var registrationSentAt: [Scope: Duration] = [:]
    /// The replica core's digest mismatches already seen by the checker.
    var mismatchesSeen = 0
    /// The replica core's catch-ups answered `compacted` already counted.
    var compactedSeen = 0
    var blockedToLeaderUntil: Duration?
    var blockedFromLeaderUntil: Duration?

    init(index: Int, name: String) {
        self.index = index
        self.name = name
        core = ReplicaCore(settings: ReplicaCore.Settings(name: name))
    }

    func forgetInstances() {
        stale += instances.values.flatMap(\.values).sorted()
        if stale.count > 64 { stale.removeFirst(stale.count - 64) }
        book.forgetInstances()
    }
}

/// A message on the simulated wire.
struct Packet {
    enum Kind {
        case toLeader(identity: [UInt8], frame: [UInt8])
        case toWorker(frame: [UInt8], stream: Bool)
    }

    var deliverAt: Duration
    var order: UInt64
    var kind: Kind
    var worker: Int
    var workerIncarnation: Int
    var leaderIncarnation: Int

    /// The connection it travels on: a worker's requests (each way) or its turn stream.
    var channel: Int {
        switch kind {
        case .toLeader: worker * 3
        case .toWorker(_, let stream): worker * 3 + (stream ? 2 : 1)
        }
    }

    static func inOrder(_ a: Packet, _ b: Packet) -> Bool {
        a.deliverAt == b.deliverAt ? a.order < b.order : a.deliverAt < b.deliverAt
    }
}

/// The simulated log's state table as of one revision, read in parts like
/// the leader's LMDB view.
final class MemorySnapshot: SnapshotSource {
    let revision: UInt64
    let stateDigest: StateDigest
    private let entries: [StateEntry]
    private var position = 0

    init(_ log: MemoryLog) {
        revision = log.lastRevision
        stateDigest = log.stateDigest
        entries = log.stateEntries
    }

    func next(maximumBytes: Int, size: (StateEntry) -> Int) throws(TurnStoreError) -> (entries: [StateEntry], more: Bool) {
        var taken: [StateEntry] = []
        var total = 0
        while position < entries.count {
            let entrySize = size(entries[position])
            if !taken.isEmpty, total + entrySize > maximumBytes { break }
            taken.append(entries[position])
            total += entrySize
            position += 1
        }
        return (taken, position < entries.count)
    }

    func close() {}
}
