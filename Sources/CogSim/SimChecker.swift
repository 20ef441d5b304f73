import Cog
import CogCodec
import CogProtocol
import LedgerRig

/// The invariants of `docs/testing.md` ("What the checker holds"), checked after every step from what the
/// simulation can see: the log (the truth), what the leader sent, what each
/// worker applied and heard.
@MainActor
struct SimChecker {
    /// Records read so far.
    private var scanned: UInt64 = 0
    private var lastEpoch: UInt64 = 0
    /// The state table as of `scanned`, and an order-free hash of it after
    /// each revision (index 0: the empty state).
    private var truth: [[UInt8]: [UInt8]] = [:]
    private var truthHash: UInt64 = 0
    private var hashes: [UInt64] = [0]
    /// Which record applied each request.
    private var appliedBy: [RequestID: UInt64] = [:]
    /// Scope instances: who holds each and from which revision on, and the
    /// revision whose record retired it.
    private var minted: [UInt64: (worker: String, revision: UInt64)] = [:]
    private var retired: [UInt64: UInt64] = [:]
    /// Instances retired because the leader gave their worker up (silent
    /// past the heartbeat timeout) or another process took its name: their
    /// worker learns it only when it hears from the leader again.
    private var givenUp: Set<UInt64> = []
    /// The final answer each request got (a later one must be the same).
    private var answers: [RequestID: OpReply.Outcome] = [:]
    /// Requests answered `expired` (retention removed their answer): never
    /// applied from then on.
    private var expiredHeard: Set<RequestID> = []
    /// With groups: the live instance of each member of each scope (by
    /// path) in the current epoch — at most one (`cogwire.md` §6a).
    private var owned: [String: [[UInt8]: UInt64]] = [:]
    private var ownedEpoch: UInt64 = 0
    /// Registration replies not yet counted: each takes effect after the
    /// record of its revision (a move retires on the old owner there first).
    private var pendingReplies: [(path: String, revision: UInt64, members: [ScopeMember])] = []

    // MARK: The log

    /// Reads the records committed since the last look.
    mutating func scan(_ log: MemoryLog, simulation: Simulation) {
        while scanned < log.lastRevision {
            let record = log.records[Int(scanned)]
            scanned += 1
            guard record.revision == scanned else {
                return simulation.fail("revisions", "the record at position \(scanned) has revision \(record.revision)")
            }
            guard record.epoch >= lastEpoch else {
                return simulation.fail("revisions", "revision \(record.revision) has epoch \(record.epoch), after epoch \(lastEpoch)")
            }
            lastEpoch = record.epoch
            if let request = record.origin.request {
                if simulation.quarantined.contains(request) {
                    return simulation.fail(
                        "quarantine-ran", "request \(request), whose body crashed the leader, was run again and applied at revision \(record.revision)")
                }
                if let earlier = appliedBy[request] {
                    return simulation.fail(
                        "applied-twice", "request \(request) was applied at revision \(earlier) and again at \(record.revision)")
                }
                if expiredHeard.contains(request) {
                    return simulation.fail(
                        "expired-ran", "request \(request) was answered expired, then applied at revision \(record.revision)")
                }
                appliedBy[request] = record.revision
            }
            if let instance = record.origin.instance {
                if let problem = instanceProblem(instance, worker: record.origin.worker ?? "", record: record) {
                    return simulation.fail("dead-instance", "revision \(record.revision) (\(record.name)) ran in \(problem)")
                }
            }
            for write in record.writes {
                let key = write.entryKey
                if let old = truth[key] { truthHash &-= SimChecker.entryHash(key, old) }
                truth[key] = write.value
                if let new = write.value { truthHash &+= SimChecker.entryHash(key, new) }
            }
            if simulation.configuration.groups, record.origin.request == nil, record.scopeEvents.contains(where: { $0.kind == .open }) {
                // Members moved to a joining worker, or re-placed from a gone one.
                simulation.count(record.name == LeaderCore.scopesMovedTurn ? "group-moves" : "group-replacements")
            }
            for event in record.scopeEvents {
                switch event.kind {
                case .open:
                    minted[event.instance] = (event.worker ?? "", record.revision)
                    // The mechanism's root opened (again) on a member: `placed` holds it to one owner too.
                    if event.scope == SimWorker.Scope.root.path { simulation.count("root-moves") }
                    if simulation.configuration.groups {
                        placed(event.instance, path: event.scope, identity: event.identity ?? [], at: record.revision, simulation: simulation)
                    }
                case .retire:
                    retired[event.instance] = retired[event.instance] ?? record.revision
                    if record.name == LeaderCore.workerGoneTurn || record.name == LeaderCore.nameTakenOverTurn { givenUp.insert(event.instance) }
                    if owned[event.scope]?[event.identity ?? []] == event.instance { owned[event.scope]?[event.identity ?? []] = nil }
                }
            }
            if record.origin.request != nil, let problem = retiredWhileSelected(record) {
                return simulation.fail("retired-while-selected", problem)
            }
            hashes.append(truthHash)
            takeReplies(upTo: scanned, simulation: simulation)
        }
        takeReplies(upTo: scanned, simulation: simulation)
    }

    /// A turn retires a scope instance only for a member its selector no
    /// longer selects (`protocol/cogwire.md` §6): after the turn, the
    /// member is not in the selector's value. (A selector that cannot be
    /// read retires nothing; one that would read it as "no members" retires
    /// members still selected.) Retirements for other causes — a worker
    /// gone, a registration replaced, a member moved — are system records.
    private func retiredWhileSelected(_ record: TurnRecord) -> String? {
        for event in record.scopeEvents where event.kind == .retire {
            guard let scope = SimWorker.Scope.allCases.first(where: { $0.path == event.scope }), let source = scope.selection else { continue }
            let identity = event.identity ?? []
            guard let value = truth[TurnWrite.entryKey(name: source, key: nil)],
                case .array(let items)? = try? CBORValue.parse(value),
                items.contains(where: { $0.encodedBytes == identity })
            else { continue }
            return "revision \(record.revision) (\(record.name)) retired instance \(event.instance) of \(event.scope) for member "
                + "\(CBORText.display(bytes: identity)), which \(scope.source) still selects (\(source) holds it)"
        }
        return nil
    }

    /// Counts the registration replies of revisions up to `revision`.
    private mutating func takeReplies(upTo revision: UInt64, simulation: Simulation) {
        guard !pendingReplies.isEmpty else { return }
        let due = pendingReplies.filter { $0.revision <= revision }
        pendingReplies.removeAll { $0.revision <= revision }
        for reply in due {
            for member in reply.members { placed(member.instance, path: reply.path, identity: member.identity, at: reply.revision, simulation: simulation) }
        }
    }

    /// A group's member opened on an instance: no other instance of it may be live.
    private mutating func placed(_ instance: UInt64, path: String, identity: [UInt8], at revision: UInt64, simulation: Simulation) {
        let epoch = instance >> 32
        if epoch > ownedEpoch {
            // A new epoch ended every instance of the older ones, by rule.
            owned = [:]
            ownedEpoch = epoch
        }
        // A reply counted after the record that already retired its instance (moved on).
        guard epoch == ownedEpoch, retired[instance] == nil else { return }
        if let other = owned[path]?[identity], other != instance, retired[other] == nil {
            let holder = minted[other]?.worker ?? "?"
            return simulation.fail(
                "double-owned",
                "at revision \(revision) member \(CBORText.display(bytes: identity)) of \(path) got instance \(instance) for \(minted[instance]?.worker ?? "?") "
                    + "while instance \(other) of \(holder) is live")
        }
        owned[path, default: [:]][identity] = instance
    }

    /// Why `instance` could not act for `worker` in `record` (nil: it could).
    private func instanceProblem(_ instance: UInt64, worker: String, record: TurnRecord) -> String? {
        guard let holder = minted[instance], holder.revision < record.revision else {
            return "instance \(instance), which the leader never gave \(worker) before it"
        }
        guard holder.worker == worker else { return "instance \(instance), which belongs to \(holder.worker), not \(worker)" }
        if let end = retired[instance], end < record.revision { return "instance \(instance), retired at revision \(end)" }
        guard instance >> 32 == record.epoch else { return "instance \(instance) of epoch \(instance >> 32), in epoch \(record.epoch)" }
        return nil
    }

    /// The leader sent `frame`: a registration reply mints instances.
    mutating func leaderSent(_ frame: [UInt8], simulation: Simulation) {
        guard frame.count < 64 << 10, case .scopeRegistered(let worker, let registration, let revision, let members)? = try? WireMessage.decode(frame)
        else { return }
        for member in members where minted[member.instance] == nil { minted[member.instance] = (worker, revision) }
        if simulation.configuration.groups, let scope = SimWorker.Scope(rawValue: registration) {
            pendingReplies.append((scope.path, revision, members))
            takeReplies(upTo: scanned, simulation: simulation)
        }
    }

    // MARK: Replicas

    /// A replica says it holds revision `revision`: its state must be the log's then.
    func checkReplica(_ worker: SimWorker, at revision: UInt64, simulation: Simulation) {
        guard revision < hashes.count else {
            return simulation.fail("replica-ahead", "\(worker.name) applied revision \(revision); the log ends at \(hashes.count - 1)")
        }
        var hash: UInt64 = 0
        for (key, value) in worker.core.encodedState { hash &+= SimChecker.entryHash(key, value) }
        guard hash == hashes[Int(revision)] else {
            return simulation.fail("replica-diverged", "\(worker.name)'s state at revision \(revision) is not the leader's")
        }
        let total = worker.cogs.peek(totalMoneyCog)
        if worker.core.isSynced, total != Simulation.totalMoney {
            simulation.fail("money", "\(worker.name)'s replica holds \(total) in all, not \(Simulation.totalMoney), at revision \(revision)")
        }
    }

    // MARK: Clients

    /// Whether an outcome is a refusal a retry may see change (nothing was kept).
    static func isTransient(_ outcome: OpReply.Outcome) -> Bool {
        switch outcome.rejection?.code {
        case .unavailable?, .nameInUse?: true
        default: false
        }
    }

    /// A worker's client heard `reply`: one request id gets one answer, and an
    /// applied answer names the record that applied it.
    mutating func workerHeard(_ reply: OpReply, by worker: SimWorker, simulation: Simulation) {
        guard !SimChecker.isTransient(reply.outcome) else { return }
        if reply.outcome.rejection?.code == .expired {
            // A retry whose answer retention removed (`turnlog.md` §2a): refused,
            // never run again, whatever it was answered before. Only a
            // sequence up to the highest whose answer went, with no answer
            // kept, may be.
            let expired: UInt64?
            do {
                expired = try simulation.log.expiredSequence(worker: reply.request.worker)
            } catch {
                return simulation.fail("expired", "the simulated log could not say which answers expired: \(error)")
            }
            guard let expired, reply.request.sequence <= expired else {
                return simulation.fail(
                    "expired-kept", "request \(reply.request) was answered expired, but no answer of \(reply.request.worker) at or above it was removed")
            }
            guard simulation.log.dedup[reply.request] == nil else {
                return simulation.fail("expired-kept", "request \(reply.request) was answered expired, and the dedup table still holds its answer")
            }
            expiredHeard.insert(reply.request)
            simulation.count("expired-answers")
            return
        }
        if let earlier = answers[reply.request], earlier != reply.outcome {
            return simulation.fail("two-answers", "request \(reply.request) was answered \(earlier), then \(reply.outcome)")
        }
        answers[reply.request] = reply.outcome
        if case .applied(let revision) = reply.outcome {
            guard appliedBy[reply.request] == revision else {
                return simulation.fail(
                    "lost-ack",
                    "request \(reply.request) was answered applied at revision \(revision), but the log \(appliedBy[reply.request].map { "applied it at \($0)" } ?? "does not hold it")")
            }
        }
    }

    // MARK: The bank and the dead

    /// Money is conserved: the leader's graph holds what the bank opened with.
    func checkMoney(simulation: Simulation) {
        guard let leader = simulation.leader else { return }
        let total = leader.core.cogs.peek(totalMoneyCog)
        if total != Simulation.totalMoney {
            simulation.fail("money", "the leader's graph holds \(total) in all, not \(Simulation.totalMoney)")
        }
    }

    /// A worker dead longer than the heartbeat timeout (while the leader
    /// ran) holds no live instance any more.
    func checkGivenUp(simulation: Simulation) {
        guard simulation.leader != nil, simulation.leaderPausedUntil == nil else { return }
        let grace = simulation.configuration.heartbeatTimeout + .milliseconds(500)
        for worker in simulation.workers where !worker.alive {
            guard let dead = worker.deadSince, simulation.now - max(dead, simulation.leaderUpSince) > grace else { continue }
            let epoch = simulation.log.epoch
            let held = minted.filter { $0.value.worker == worker.name && $0.key >> 32 == epoch && retired[$0.key] == nil }.keys.sorted()
            if let instance = held.first {
                return simulation.fail(
                    "dead-holder", "\(worker.name) has been dead \(Simulation.seconds(simulation.now - dead)) s, yet instance \(instance) is live")
            }
        }
    }

    /// With groups, at most one worker acts for each scope member at any
    /// time: a worker acts for the members it holds an instance of (in its
    /// own view) while it runs and its lease holds (`cogwire.md` §6b). A
    /// worker cut off from the leader must stop before the leader gives it
    /// up and moves its members to another: its view keeps an instance the
    /// log retired until it hears from the leader again.
    ///
    /// Not checked here: an instance retired by any other record (moved to
    /// a worker that joined, deselected), which its worker stops as it
    /// applies that record — a worker the leader still hears from.
    func checkEffectOwners(simulation: Simulation) {
        guard simulation.configuration.groups else { return }
        var owners: [String: [[UInt8]: (worker: String, instance: UInt64)]] = [:]
        for worker in simulation.workers where worker.alive && !worker.core.isSuspended {
            for (scope, members) in worker.instances.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                for (identity, instance) in members.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) })
                where retired[instance] == nil || givenUp.contains(instance) {
                    if let other = owners[scope.path]?[identity] {
                        return simulation.fail(
                            "two-effect-owners",
                            "member \(CBORText.display(bytes: identity)) of \(scope.path) acts on \(other.worker) (instance \(other.instance)) "
                                + "and on \(worker.name) (instance \(instance)) at once")
                    }
                    owners[scope.path, default: [:]][identity] = (worker.name, instance)
                }
            }
        }
    }

    /// An entry's hash (64 bits, FNV-1a then a finalizer), summed over the state.
    static func entryHash(_ key: [UInt8], _ value: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        hash ^= 0xff
        hash &*= 0x100_0000_01b3
        for byte in value {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        hash = (hash ^ (hash >> 30)) &* 0xBF58_476D_1CE4_E5B9
        return hash ^ (hash >> 31)
    }
}
