import Cog
import CogCodec
import CogLog
import CogProtocol

/// Something the leader would release — a reply, a status, a snapshot, a
/// publication — held until the standbys acknowledge the commits it
/// reflects (ha.md §9).
struct HeldRelease {
    /// The last shipped commit when it was made: it leaves once the rules release through it.
    var tag: UInt64
    var effect: LeaderCore.Effect
    /// The records a held publication sends.
    var batch: EncodedTurnBatch
}

/// The leader's side of shipping its log to standbys: the driver of `ShipCore`.
extension Leader {
    /// The shipping rules' clock: seconds since the leader started.
    private var shipNow: Double {
        Double(now.components.seconds) + Double(now.components.attoseconds) / 1e18
    }

    /// With `configuration.shipping`: every commit is shipped, before it runs.
    func startShipping() {
        guard let shipping = configuration.shipping else { return }
        shipCore = ShipCore(shipping.rules)
        store.shipper = { [unowned self] commit in
            MainActor.assumeIsolated { self.ship(commit) }
        }
    }

    private func ship(_ commit: ShippedCommit) {
        guard var rules = shipCore else { return }
        let bytes = commit.encoded()
        recentShipped.append(bytes)
        if recentShipped.count > rules.configuration.window { recentShipped.removeFirst(recentShipped.count - rules.configuration.window) }
        let effects = rules.shipped(bytes, now: shipNow)
        shipCore = rules
        carryShipping(effects)
    }

    /// Whether `effect` must wait for the standbys (it is then kept, in order).
    func holdsForStandbys(_ effect: LeaderCore.Effect) -> Bool {
        guard let rules = shipCore else { return false }
        guard !heldReleases.isEmpty || rules.lastSequence > rules.releasedThrough else { return false }
        heldReleases.append(HeldRelease(tag: rules.lastSequence, effect: effect, batch: store.lastAppended))
        return true
    }

    /// A standby's `standby-hello` or `ship-ack`.
    func standbyMessage(_ message: WireMessage, from peer: [UInt8]) {
        guard var rules = shipCore else {
            deliver(WireMessage.error(WireError(.notAllowed, "this leader ships its log to no standby (it runs without --ha)")).encoded(), to: peer)
            return
        }
        let effects: [ShipCore.Effect]
        switch message {
        case .standbyHello(let node, let logID, let standbyEpoch, let revision, let digest):
            effects = rules.hello(
                from: peer, node: node, inStep: inStep(logID: logID, epoch: standbyEpoch, revision: revision, digest: digest), now: shipNow)
        case .shipAck(let node, let sequence):
            effects = rules.acknowledged(from: peer, node: node, through: sequence, now: shipNow)
        default:
            return
        }
        shipCore = rules
        carryShipping(effects)
    }

    /// Whether a standby's copy, as its hello describes it, is this log as of the last commit.
    private func inStep(logID: [UInt8]?, epoch standbyEpoch: UInt64, revision: UInt64, digest: StateDigest?) -> Bool {
        guard standbyEpoch <= epoch, revision == store.lastRevision else { return false }
        guard let logID else { return revision == 0 }  // an empty copy beside a log with no turn yet takes the log's id from its first commit
        guard logID == store.logID else { return false }
        guard revision > 0 else { return true }
        return digest != nil && (try? store.stateDigest(at: revision)) == digest
    }

    /// Once per pass of the serving loop: etcd's answers to sync key writes, and the rules' timers.
    func tickShipping() {
        guard var rules = shipCore else { return }
        var effects: [ShipCore.Effect] = []
        while let written = configuration.shipping?.syncKey?.takeSyncAnswer() {
            effects += written ? rules.syncWritten(now: shipNow) : rules.syncWriteFailed(now: shipNow)
        }
        effects += rules.tick(now: shipNow)
        shipCore = rules
        carryShipping(effects)
    }

    private func carryShipping(_ effects: [ShipCore.Effect]) {
        var writtenNow = false
        for effect in effects {
            switch effect {
            case .ship(let peer, let sequence, let commit):
                deliver(WireMessage.ship(epoch: epoch, sequence: sequence, commit: commit).encoded(), to: peer)
            case .welcome(let peer, let sequence):
                deliver(WireMessage.shipWelcome(epoch: epoch, sequence: sequence).encoded(), to: peer)
            case .resync(let peer, _):
                deliver(WireMessage.shipResync(epoch: epoch, revision: store.lastRevision).encoded(), to: peer)
            case .writeSync(let standbys):
                if let writer = configuration.shipping?.syncKey {
                    writer.requestSync(standbys: standbys)
                } else {
                    writtenNow = true
                }
                configuration.operatorLog?.log(
                    .info, "sync-key", "asking etcd's sync key to name \(standbys.isEmpty ? "no standby" : standbys.map(TerminalText.escaped).joined(separator: ", "))",
                    ["standbys": .text(standbys.joined(separator: " "))])
            case .release(let through):
                releaseHeld(through: through)
            case .drop(let node, let reason):
                configuration.operatorLog?.log(
                    .warn, "standby-dropped", "standby \(TerminalText.escaped(node)) dropped: \(reason)", ["node": .text(node), "reason": .text(reason)])
            }
        }
        if writtenNow, var rules = shipCore {
            let more = rules.syncWritten(now: shipNow)
            shipCore = rules
            carryShipping(more)
        }
    }

    /// Lets go, in order, what was held for the commits through `through`.
    private func releaseHeld(through: UInt64) {
        var released = 0
        for held in heldReleases {
            guard held.tag <= through else { break }
            released += 1
            guard mayRelease() else { continue }
            release(held.effect, batch: held.batch)
        }
        heldReleases.removeFirst(released)
    }
}
