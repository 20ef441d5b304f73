/// The leader's side of shipping its log to standbys (ha.md §9): which
/// standby gets which commit, which standbys the `sync` key names, and how
/// far the leader may release — a reply, a published turn, an answer — with
/// `--sync one` or `quorum:K`, only as far as K standbys the sync key names
/// have acknowledged, each after its own commit.
///
/// A pure state machine: the driver (the leader) passes each commit it
/// ships (`shipped`), each standby's hello and acknowledgement, the etcd
/// answer to a sync key write, and a `tick`, with the monotonic time in
/// seconds, and performs the effects. Releases are counted in shipped
/// commits: the driver tags what it would release with `lastSequence` and
/// lets it go once `releasedThrough` reaches the tag.
///
/// The rules:
/// - Any standby the sync key names may take the lead, so each must hold
///   every commit released: the key names at most K, and a release goes
///   only as far as every standby named has acknowledged.
/// - A standby is added to the sync key only once it has acknowledged every
///   commit shipped (the tip), while fewer than K are named; a named
///   standby whose connection is gone is replaced by one at the tip, and so
///   is one still connected that has held releases for `replaceAfter`
///   seconds without acknowledging the tip. Only
///   one change to the key is in flight; while one that names a new
///   standby is, nothing more is released, so the standby named holds
///   everything released before it.
/// - While the sync key names fewer than K standbys, nothing is released
///   (`held`), unless the leader degraded: after `degradeAfter` seconds in
///   which releases did not move, it writes the sync key without the
///   standbys no longer connected and, once etcd confirms, below K, releases on its own durability
///   (`degraded`), as far as the standbys still named hold — so no named
///   standby can take the lead with less than was released. A standby that
///   catches up again is added back, and the leader leaves `degraded` once
///   K are named.
/// - A sync key write that failed may still land (etcd applied it, the
///   answer was lost): the standbys it would have added count as named for
///   releases until a later write is confirmed.
/// - A standby silent for `standbyTimeout` seconds is dropped (its
///   acknowledgements no longer arrive); a standby more than `window`
///   commits behind is dropped too, and must sync again.
/// - With `--sync none`, everything shipped is released at once; standbys
///   in step are named all the same, so one can take the lead, losing what
///   it had not acknowledged.
public struct ShipCore: Sendable {
    public enum SyncMode: Sendable, Equatable, CustomStringConvertible {
        /// Ship without waiting: turns released may be lost on failover.
        case none
        /// Release what `count` standbys named in the sync key acknowledged (`one`: 1).
        case quorum(Int)

        public static let one = SyncMode.quorum(1)

        /// `none`, `one` or `quorum:K` (K from 1 to 8); nil for anything else.
        public init?(text: String) {
            switch text {
            case "none": self = .none
            case "one": self = .quorum(1)
            default:
                guard text.hasPrefix("quorum:"), let count = Int(text.dropFirst("quorum:".count)), (1...8).contains(count) else { return nil }
                self = .quorum(count)
            }
        }

        public var description: String {
            switch self {
            case .none: "none"
            case .quorum(1): "one"
            case .quorum(let count): "quorum:\(count)"
            }
        }
    }

    public struct Configuration: Sendable, Equatable {
        public var sync: SyncMode
        /// Seconds of holding after which the leader drops silent standbys
        /// from the sync key and releases on its own durability; nil: strict, it holds.
        public var degradeAfter: Double?
        /// Seconds without a word from a standby after which it is dropped.
        public var standbyTimeout: Double
        /// The most shipped commits a standby may leave unacknowledged
        /// (and the most the core keeps for a standby syncing a copy).
        public var window: Int

        /// Seconds of holding after which a named standby that has not
        /// acknowledged the tip is replaced by a spare that has (frozen,
        /// slow, cut off but still connected): the spare holds everything,
        /// so the swap is safe, and replies wait this long, not `standbyTimeout`.
        public var replaceAfter: Double

        public init(
            sync: SyncMode = .one, degradeAfter: Double? = nil, standbyTimeout: Double = 5, window: Int = ShipCore.defaultWindow, replaceAfter: Double = 1
        ) {
            self.sync = sync
            self.degradeAfter = degradeAfter
            self.standbyTimeout = standbyTimeout
            self.window = window
            self.replaceAfter = replaceAfter
        }
    }

    /// What `cogd status` says of the leader's replication.
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// K named standbys acknowledge: released turns are on K + 1 machines.
        case sync
        /// Released on the leader's durability alone; no failover.
        case degraded
        /// Too few named standbys: replies are held.
        case held
        /// `--sync none`.
        case async

        public var description: String {
            switch self {
            case .sync: "sync"
            case .degraded: "degraded"
            case .held: "no standby: replies held"
            case .async: "async (--sync none: turns released may be lost on failover)"
            }
        }
    }

    /// One standby as the leader knows it.
    public struct Standby: Sendable, Equatable {
        public var node: String
        /// Its connection (the driver's opaque identity).
        public var peer: [UInt8]
        /// The highest shipped commit it acknowledged.
        public var acknowledged: UInt64
        /// When it was last heard from.
        public var heard: Double
    }

    public enum Effect: Sendable, Equatable {
        /// Send this shipped commit (`sequence`, bytes) to the standby's connection.
        case ship(to: [UInt8], sequence: UInt64, commit: [UInt8])
        /// The standby is in step: commits after `sequence` follow (`ship-welcome`).
        case welcome(to: [UInt8], sequence: UInt64)
        /// The standby's copy does not match: it must sync a copy of the
        /// log taken now (`ship-resync`); `sequence` is the last commit the copy holds.
        case resync(to: [UInt8], node: String, sequence: UInt64)
        /// Write the sync key naming these standbys (answer with `syncWritten` or `syncWriteFailed`).
        case writeSync(standbys: [String])
        /// Everything tagged up to this sequence may be released now.
        case release(through: UInt64)
        /// The standby is dropped, for this reason (logged).
        case drop(node: String, reason: String)
        /// The hello is refused (answered `error unavailable` with this message).
        case refuse(to: [UInt8], reason: String)
    }

    public private(set) var configuration: Configuration
    /// Standbys connected, by node name.
    public private(set) var standbys: [String: Standby] = [:]
    /// The standbys etcd's sync key names (confirmed writes only).
    public private(set) var named: [String] = []
    /// The last shipped commit's sequence (0: none yet).
    public private(set) var lastSequence: UInt64 = 0
    /// Everything tagged up to this sequence may be released.
    public private(set) var releasedThrough: UInt64 = 0
    /// Whether the leader released on its own durability since the sync key lost its standbys.
    public private(set) var degraded = false
    /// The sync key write in flight, if any.
    public private(set) var writing: [String]?
    /// Since when releases have been held (nil: not held).
    private var heldSince: Double?
    /// Standbys a sync key write that failed would have added: etcd may
    /// still apply a write whose answer never came (a timeout), so until a
    /// later write is confirmed each may be named, and releases go only as
    /// far as they hold too.
    public private(set) var maybeNamed: [String] = []

    /// The most standbys connected at once (a cluster has a few nodes;
    /// the names a peer can say are not allowed to grow the leader's memory).
    public static let maximumStandbys = 16
    /// The shipped commits a leader keeps for catch-ups and the commits
    /// after a copy, and how far behind a standby may fall before it is
    /// dropped: enough for a copy of a large log to be sent and put in
    /// place under a steady load (the bytes kept are bounded apart).
    public static let defaultWindow = 65_536

    /// - Parameter inherited: commits the node applied as a standby before it
    ///   took the lead, kept by the driver for catch-up: counted as shipped
    ///   (sequences 1 through `inherited`) and released, before its own.
    public init(_ configuration: Configuration, inherited: UInt64 = 0) {
        self.configuration = configuration
        lastSequence = inherited
        releasedThrough = inherited
    }

    /// Whether the last shipped commit is still held: nothing tagged with
    /// it (a reply, a publication, a snapshot, an answer) has been released.
    /// A leader that steps down may then take that commit back (ha.md §5).
    public var lastCommitHeld: Bool { releasedThrough < lastSequence }

    /// Whether every standby the sync key names or may name — each node
    /// that may take the lead: the named, and those a write in flight or a
    /// failed one would add, as etcd may yet apply it — holds the last
    /// shipped commit, counting `late` acknowledgements (node → sequence,
    /// each read from that standby's own connection) that came after the
    /// release gate shut. A leader stepping down then keeps that commit
    /// rather than taking it back (ha.md §5).
    public func lastCommitAcknowledgedByNamed(late: [String: UInt64]) -> Bool {
        let mayLead = Set(named + maybeNamed + (writing ?? []))
        return !named.isEmpty && mayLead.allSatisfy { max(standbys[$0]?.acknowledged ?? 0, late[$0] ?? 0) >= lastSequence }
    }

    public var state: State {
        guard case .quorum(let count) = configuration.sync else { return .async }
        if degraded { return .degraded }
        return named.count >= count ? .sync : .held
    }

    // MARK: Inputs

    /// The leader shipped a commit (its encoded `ShippedCommit`): every
    /// standby in step gets it.
    public mutating func shipped(_ commit: [UInt8], now: Double) -> [Effect] {
        lastSequence &+= 1
        var effects: [Effect] = []
        for node in standbys.keys.sorted() {
            guard let standby = standbys[node] else { continue }
            if lastSequence &- standby.acknowledged > UInt64(configuration.window) {
                effects += drop(node, reason: "more than \(configuration.window) commits behind")
            } else {
                effects.append(.ship(to: standby.peer, sequence: lastSequence, commit: commit))
            }
        }
        return effects + advance(now: now)
    }

    /// A standby said hello. `inStep`: the driver found its copy to be the
    /// leader's as of the last commit (same log, its last revision the
    /// leader's, the same state digest there, no later epoch); otherwise it
    /// must sync a copy.
    public mutating func hello(from peer: [UInt8], node: String, inStep: Bool, now: Double) -> [Effect] {
        guard standbys[node] != nil || standbys.count < ShipCore.maximumStandbys else {
            return [.refuse(to: peer, reason: "the leader serves \(ShipCore.maximumStandbys) standbys already; this one is not taken")]
        }
        var effects: [Effect] = []
        if standbys[node] != nil { effects += drop(node, reason: "it connected again") }
        guard inStep else { return effects + [.resync(to: peer, node: node, sequence: lastSequence)] }
        standbys[node] = Standby(node: node, peer: peer, acknowledged: lastSequence, heard: now)
        return effects + [.welcome(to: peer, sequence: lastSequence)] + advance(now: now)
    }

    /// A standby that synced a copy holding every commit through
    /// `sequence` is in step from there: it gets the commits after it
    /// (`missed`: the driver's kept commits after `sequence`, oldest first;
    /// nil when it kept them no longer, and the standby syncs again).
    public mutating func copied(by peer: [UInt8], node: String, through sequence: UInt64, missed: [[UInt8]]?, now: Double) -> [Effect] {
        guard let missed, sequence <= lastSequence, UInt64(missed.count) == lastSequence - sequence,
            missed.count <= configuration.window
        else { return [.resync(to: peer, node: node, sequence: lastSequence)] }
        guard standbys[node] != nil || standbys.count < ShipCore.maximumStandbys else {
            return [.refuse(to: peer, reason: "the leader serves \(ShipCore.maximumStandbys) standbys already; this one is not taken")]
        }
        var effects: [Effect] = []
        if standbys[node] != nil { effects += drop(node, reason: "it connected again") }
        standbys[node] = Standby(node: node, peer: peer, acknowledged: sequence, heard: now)
        effects.append(.welcome(to: peer, sequence: sequence))
        for (offset, commit) in missed.enumerated() {
            effects.append(.ship(to: peer, sequence: sequence + 1 + UInt64(offset), commit: commit))
        }
        return effects + advance(now: now)
    }

    /// A standby acknowledged every commit through `sequence`, each after its
    /// own commit. One the leader does not keep (dropped — silent, too far
    /// behind, its connection ended — while it went on) is refused, so it
    /// says hello again instead of acknowledging to a leader that ships it nothing.
    public mutating func acknowledged(from peer: [UInt8], node: String, through sequence: UInt64, now: Double) -> [Effect] {
        guard var standby = standbys[node], standby.peer == peer else {
            return [.refuse(to: peer, reason: "this leader does not keep standby \(node) in step (it was dropped); say standby-hello again")]
        }
        standby.heard = now
        standby.acknowledged = max(standby.acknowledged, min(sequence, lastSequence))
        standbys[node] = standby
        return advance(now: now)
    }

    /// The standby's connection is gone.
    public mutating func gone(_ node: String, now: Double) -> [Effect] {
        guard standbys[node] != nil else { return [] }
        return drop(node, reason: "its connection ended") + advance(now: now)
    }

    /// etcd confirmed the sync key write in flight.
    public mutating func syncWritten(now: Double) -> [Effect] {
        guard let written = writing else { return [] }
        writing = nil
        // Whether it named a standby the key did not (an addition or a replacement), not only removed some.
        let grew = written.contains { !named.contains($0) }
        named = written
        // A write the leader gave up on lands before a later one is confirmed, or never: the key is this one now.
        maybeNamed = []
        if case .quorum(let count) = configuration.sync {
            if named.count >= count {
                degraded = false
            } else if !grew {
                // Standbys removed, below the quorum: the leader degrades (no one removed can take the lead).
                degraded = true
            }
        }
        return advance(now: now)
    }

    /// The sync key write in flight failed (etcd unreachable, or the key changed): tried again later.
    public mutating func syncWriteFailed(now: Double) -> [Effect] {
        for added in writing ?? [] where !named.contains(added) && !maybeNamed.contains(added) { maybeNamed.append(added) }
        writing = nil
        return advance(now: now)
    }

    /// Time passes: silent standbys are dropped, and holding too long degrades.
    public mutating func tick(now: Double) -> [Effect] {
        var effects: [Effect] = []
        for node in standbys.keys.sorted() where now - (standbys[node]?.heard ?? now) > configuration.standbyTimeout {
            effects += drop(node, reason: "silent for more than \(configuration.standbyTimeout) s")
        }
        return effects + advance(now: now)
    }

    // MARK: Rules

    private mutating func drop(_ node: String, reason: String) -> [Effect] {
        standbys[node] = nil
        return [.drop(node: node, reason: reason)]
    }

    /// How far releases may go now, and the sync key change to ask for.
    private mutating func advance(now: Double) -> [Effect] {
        var effects: [Effect] = []
        let target: UInt64
        switch configuration.sync {
        case .none:
            target = lastSequence
            effects += changeSync(count: nil, now: now)  // named all the same: a failover may lose what was released
        case .quorum(let count):
            // Every standby named may take the lead (ha.md §4), so each must hold all that is released: a
            // release goes as far as the least of theirs (one that left counts 0, and holds releases until
            // it is replaced or, degrading, removed).
            // So must a standby a failed write would have named: etcd may apply that write yet (none of them is named:
            // the key changes only when a write is confirmed, which forgets them).
            let leastNamed = (named + maybeNamed).map { standbys[$0]?.acknowledged ?? 0 }.min()
            if writing.map({ $0.contains { !named.contains($0) } }) == true {
                target = releasedThrough  // a standby is being added: it must hold all that is released
            } else if named.count >= count {
                target = leastNamed!
            } else if degraded {
                target = leastNamed ?? lastSequence  // below the quorum: the leader's own durability, and the named still hold it
            } else {
                target = releasedThrough
            }
            effects += changeSync(count: count, now: now)
        }
        if target > releasedThrough {
            releasedThrough = target
            heldSince = nil
            effects.append(.release(through: target))
        }
        // Held: since releases last moved while something waited.
        heldSince = releasedThrough < lastSequence ? (heldSince ?? now) : nil
        return effects
    }

    /// The one sync key change to ask for now, if any: add a standby that
    /// acknowledged the tip; or, held past `degradeAfter`, remove the named
    /// standbys that are not acknowledging.
    private mutating func changeSync(count quorum: Int?, now: Double) -> [Effect] {
        guard writing == nil else { return [] }
        let count = quorum ?? 0
        if let ready = standbys.keys.sorted().first(where: { !named.contains($0) && standbys[$0]!.acknowledged == lastSequence }) {
            // With a quorum, at most K are named; a standby that left is replaced by one at the tip.
            let connected = named.filter { standbys[$0] != nil }
            if quorum == nil || named.count < count {
                writing = named + [ready]
                return [.writeSync(standbys: writing!)]
            } else if connected.count < count {
                writing = connected + [ready]
                return [.writeSync(standbys: writing!)]
            } else if quorum != nil, let heldSince, now - heldSince >= configuration.replaceAfter,
                let laggard = connected.filter({ standbys[$0]!.acknowledged < lastSequence })
                    .min(by: { (standbys[$0]!.acknowledged, $0) < (standbys[$1]!.acknowledged, $1) })
            {
                // Releases held by a named standby still connected but behind, beside a spare at the tip: the spare takes its place.
                writing = connected.filter { $0 != laggard } + [ready]
                return [.writeSync(standbys: writing!)]
            }
        }
        guard let degradeAfter = configuration.degradeAfter, let heldSince, now - heldSince >= degradeAfter else { return [] }
        // Kept: the named standbys still connected (one silent past `standbyTimeout` is dropped).
        let keeping = named.filter { standbys[$0] != nil }
        guard keeping.count < named.count || (named.count < count && !degraded) else { return [] }
        writing = keeping
        return [.writeSync(standbys: keeping)]
    }
}
