import CogCodec
import CogProtocol

/// A leader's shipping rules (the very `ShipCore` that `cogd leader --ha
/// --sync` runs, ha.md §9) against two or three standbys and a model of
/// etcd's sync key, on a simulated clock, driven by one seed (`cogd-lab sim
/// --shipping`): commits shipped at a changing rate; a network with random
/// delays, in order on each connection and in any order across them,
/// that loses messages only with the connection; standbys killed and
/// started again, frozen past the heartbeat timeout, wiped (they sync a
/// copy), and cut off (the connection ends: `gone`); sync key writes that
/// etcd answers late or fails. Each seed draws `--sync one` or `quorum:2`
/// (or takes `sync`), strict or with a degrade-after, the heartbeat
/// timeout and how many commits the leader keeps.
///
/// After every step the checker holds the rule the sync key exists for
/// (ha.md §9, rules 1–4): every standby that etcd's sync key names (the
/// value etcd last wrote, not the one asked for) holds every commit the
/// leader released — so whichever of them takes the lead holds every
/// turn released — the key names at most K standbys, and releases never
/// go backwards. Once faults stop, every commit shipped is released.
///
/// The leader itself fails over now and then (`failovers`): it crashes,
/// and a standby etcd's sync key names takes the lead in the next epoch
/// with its own copy as the log (its commits are all released at once, as
/// `cogd leader --ha` releases what it inherited). The old leader comes
/// back as a standby, its last few commits lost with the crash (shipped
/// before its own commit) and now and then its folder destroyed; its
/// hello names its copy's epoch, and log matching (`StandbyMatch`) finds
/// a deposed leader's tail and sends it a copy. The checker adds that the
/// new leader's log holds every commit any leader released
/// (`failover-lacks-release`): the commits taken back with a deposed
/// leader's tail are only ones never released.
///
/// After every step whose last commit released nothing, it also asks what
/// the leader would do were it to step down then (ha.md §5): keep that
/// commit (`ShipCore.lastCommitAcknowledgedByNamed`, with the
/// acknowledgements that would reach it within the 100 ms it listens), or
/// take it back. A commit kept must be in the log of every standby etcd
/// names or may yet name, since any of them may take the lead; the probe
/// changes nothing and draws nothing from the seed.
public struct ShipSimulation {
    public struct Configuration: Sendable {
        public var seed: UInt64
        public var steps: Int
        /// `one` or `quorum:2`; nil: each seed draws one.
        public var sync: ShipCore.SyncMode?
        /// The broken rule (`ship-sync-key`): the sync key names every
        /// standby in step while releases wait only for the K the rules
        /// named, the fastest; the checker must catch it.
        public var brokenSyncKey: Bool
        /// Sync key writes the leader gave up on (no answer in time) that
        /// etcd applies all the same, later, as it can any request
        /// (`--late-sync-writes`); off, a failed write is not applied. Each
        /// write compares the sync key's revision as the leader last read
        /// it (ha.md §9 rule 5), so a late one lands only if no write was
        /// confirmed after it was sent.
        public var lateSyncWrites: Bool
        /// The broken rule (`sync-key-compare`): a sync key write compares
        /// only the leader key, so a write the leader gave up on may land
        /// after a later one was confirmed; with `lateSyncWrites` the
        /// checker must catch it.
        public var uncomparedSyncWrites: Bool
        /// The broken rule (`step-down-keep`): a leader stepping down keeps
        /// its last commit once the standbys the sync key names for certain
        /// hold it, not counting those a write in flight or unanswered may
        /// add; the checker must catch it.
        public var stepDownNamedOnly: Bool
        /// The broken rule (`failover-any`): when the leader crashes, any
        /// standby with a copy may take the lead, not only one etcd's sync
        /// key names; the checker must catch it.
        public var anyStandbyLeads: Bool

        public init(
            seed: UInt64, steps: Int = 20_000, sync: ShipCore.SyncMode? = nil, brokenSyncKey: Bool = false, lateSyncWrites: Bool = false,
            uncomparedSyncWrites: Bool = false, stepDownNamedOnly: Bool = false, anyStandbyLeads: Bool = false
        ) {
            self.seed = seed
            self.steps = steps
            self.sync = sync
            self.brokenSyncKey = brokenSyncKey
            self.lateSyncWrites = lateSyncWrites
            self.uncomparedSyncWrites = uncomparedSyncWrites
            self.stepDownNamedOnly = stepDownNamedOnly
            self.anyStandbyLeads = anyStandbyLeads
        }
    }

    public struct Result: Sendable {
        public let seed: UInt64
        public let steps: Int
        public let violation: SimViolation?
        public let sync: ShipCore.SyncMode
        /// Seconds of holding after which the leader degrades; nil: strict.
        public let degradeAfter: Double?
        public let standbys: Int
        /// Commits shipped in the run by every leader (after those the first
        /// inherited), how many of them were released, and how many were
        /// taken back: a deposed leader's tail, which no leader released.
        public let shipped: UInt64
        public let released: UInt64
        public let takenBack: UInt64
        /// What happened, by name: `releases`, `copies`, `catch-ups`, `drops`, `sync-writes`, the faults dealt, …
        public let counts: [String: Int]
        public let simulatedSeconds: Double
    }

    /// What the leader sends a standby (ha.md §9).
    enum Down {
        case welcome(sequence: UInt64)
        case ship(sequence: UInt64, commit: [UInt8])
        /// `ship-resync`: a copy of the log follows.
        case resync(sequence: UInt64)
        /// The copy's parts, as one message: the leader's commits through
        /// `sequence` (their digests and epochs) as they were when it took the copy.
        case copy(sequence: UInt64, commits: ArraySlice<UInt64>, digests: ArraySlice<UInt64>, epochs: ArraySlice<UInt64>)
        /// `error unavailable` (a refused acknowledgement).
        case refused(String)
    }

    /// What a standby sends the leader.
    enum Up {
        /// `standby-hello`: its copy's last commit, the digest there and
        /// that commit's epoch (0: it holds none).
        case hello(revision: Int, digest: UInt64, epoch: UInt64)
        case ack(sequence: UInt64)
        case copied(sequence: UInt64)
    }

    /// One connection between a standby and the leader: in order each way;
    /// when it ends, what was on its way is lost.
    struct Connection {
        /// The connection's identity, as the leader's rules know it.
        let peer: [UInt8]
        /// The epoch of the leader at its other end (the commits it ships are of it).
        let epoch: UInt64
        var down: [Sent<Down>] = []
        var up: [Sent<Up>] = []
    }

    /// A message on its way, there at `at`.
    struct Sent<Message> {
        let at: Duration
        let message: Message
    }

    /// One standby, as `StandbyFollower` behaves: it says hello until
    /// welcomed, applies each ship that is the next sequence, acknowledges
    /// after applying, and says its last acknowledgement again when quiet.
    struct Standby {
        let name: String
        /// The commits it applied, in order (a commit is a value here), the
        /// digest after each (index 0: none), and the epoch each was
        /// written in. They survive a kill, not a wipe.
        var log: [UInt64]
        var digests: [UInt64]
        var epochs: [UInt64]
        var connection: Connection?
        /// The last commit applied in step (nil: not in step, it says hello).
        var applied: UInt64?
        var quietUntil: Duration = .zero
        var lastHello: Duration = .zero
        var lastAcknowledged: Duration = .zero
        /// Not connected: connects again at this time.
        var reconnectAt: Duration?
        /// Killed: starts again at this time.
        var downUntil: Duration?
        var frozenUntil: Duration?

        /// Its data folder destroyed: it holds no commit.
        mutating func wipe() {
            log = []
            digests = [0]
            epochs = []
        }
    }

    /// The sync key write on its way to etcd: applied at `appliesAt` when it
    /// succeeds, answered at `answersAt`.
    struct SyncWrite {
        /// What the rules asked for, and what etcd writes (the same but with `brokenSyncKey`).
        let asked: [String]
        let written: [String]
        let appliesAt: Duration
        let answersAt: Duration
        var succeeds: Bool
        /// The sync key's revision the write compares (as the leader last read it).
        let expected: Int
        var applied = false
    }

    let configuration: Configuration
    var random: SimRandom
    var now: Duration = .zero
    var step = 0
    var faults = true
    var core: ShipCore
    let sync: ShipCore.SyncMode
    let quorum: Int
    let degradeAfter: Double?
    /// The leader's log: every commit shipped (a value), the digest after
    /// each (index 0: none), and the epoch each was written in.
    var commits: [UInt64]
    var digests: [UInt64]
    var epochs: [UInt64]
    /// The leader's node, and its epoch (each failover takes the next).
    var leaderName = "n1"
    var epoch: UInt64 = 2
    /// Commits shipped by every leader, released, and taken back with a
    /// deposed leader's tail (shipped, never released).
    var shippedCount: UInt64 = 0
    var releasedCount: UInt64 = 0
    var takenBack: UInt64 = 0
    /// Every commit any leader released: how many, and the digest after the last.
    var releasedChain: (count: Int, digest: UInt64) = (0, 0)
    /// The most recent commits the leader keeps for a catch-up or after a copy (as its `KeptCommits`).
    let window: Int
    var standbys: [Standby] = []
    /// etcd's sync key as last written and its revision (writes so far),
    /// the revision the leader last read, the write on its way, and writes
    /// the leader gave up on that etcd applies yet (`lateSyncWrites`).
    var syncKey: [String] = []
    var syncKeyRevision = 0
    var syncRevisionRead = 0
    var syncWrite: SyncWrite?
    var lateWrites: [Sent<(written: [String], expected: Int)>] = []
    /// Connections that ended, as the leader's socket watch notices them.
    var goneNotices: [Sent<(node: String, peer: [UInt8])>] = []
    /// The chance that a step ships commits (one to three), changed now and then (0: idle).
    var shipRate: Double
    var lastRelease: UInt64
    /// The releases noted in the trace's last line (consecutive ones share it).
    var releaseRun: (first: UInt64, count: Int)?
    var lastState: ShipCore.State = .held
    var connections = 0
    var counts: [String: Int] = [:]
    /// A rule broken inside a step, reported at its end.
    var pending: SimViolation?
    var trace: [String] = []

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        var random = SimRandom(seed: configuration.seed)
        let sync = configuration.sync ?? (random.chance(0.5) ? .one : .quorum(2))
        guard case .quorum(let count) = sync else {
            fatalError("internal inconsistency: the shipping simulation runs `one` or `quorum:K`, not \(sync)")
        }
        let degradeAfter = random.chance(0.5) ? nil : Double(random.int(2...12)) / 2
        let standbyTimeout = Double(random.int(2...6)) / 2
        let window = random.pick([16, 64, 256, 4_096])
        // The commits this node applied as a standby before it took the lead (in epoch 1): shipped and released already.
        let inherited = random.int(0...20)
        var digests: [UInt64] = [0]
        let commits = (0..<inherited).map { _ in random.next() }
        for commit in commits { digests.append(Self.digest(digests[digests.count - 1], commit)) }
        let epochs = [UInt64](repeating: 1, count: inherited)
        for index in 0..<random.int(2...3) {
            // Each standby starts holding some of those (none, a few, all).
            let holds = random.int(0...inherited)
            standbys.append(Standby(
                name: "n\(index + 2)", log: Array(commits[..<holds]), digests: Array(digests[...holds]), epochs: Array(epochs[..<holds]),
                reconnectAt: .zero))
        }
        shipRate = random.pick([0.1, 0.4, 0.8])
        self.sync = sync
        quorum = count
        self.degradeAfter = degradeAfter
        self.window = window
        self.commits = commits
        self.digests = digests
        self.epochs = epochs
        releasedChain = (inherited, digests[inherited])
        self.random = random
        core = ShipCore(.init(sync: sync, degradeAfter: degradeAfter, standbyTimeout: standbyTimeout, window: window), inherited: UInt64(inherited))
        lastRelease = UInt64(inherited)
    }

    public static func run(_ configuration: Configuration) -> Result {
        var simulation = ShipSimulation(configuration)
        let violation = simulation.runAll()
        return Result(
            seed: configuration.seed, steps: simulation.step, violation: violation, sync: simulation.sync, degradeAfter: simulation.degradeAfter,
            standbys: simulation.standbys.count, shipped: simulation.shippedCount, released: simulation.releasedCount,
            takenBack: simulation.takenBack, counts: simulation.counts,
            simulatedSeconds: Self.seconds(simulation.now))
    }

    /// How long after the faults stop every commit shipped must be released.
    static let settleSeconds: Int64 = 60

    mutating func runAll() -> SimViolation? {
        note("the leader ships with --sync \(sync), " + (degradeAfter.map { "degrading after \(Self.shown($0)) s" } ?? "strict")
            + ", heartbeat timeout \(Self.shown(core.configuration.standbyTimeout)) s, keeping \(window) commits; \(commits.count) inherited")
        while step < configuration.steps {
            if let violation = advance() { return violation }
        }
        // Faults stop, and shipping: within a minute everything shipped is released.
        faults = false
        shipRate = 0
        for index in standbys.indices {
            if standbys[index].downUntil != nil { standbys[index].downUntil = now }
            standbys[index].frozenUntil = nil
        }
        note("faults stop; \(commits.count) commits shipped, \(core.releasedThrough) released")
        let settleBy = now + .seconds(Self.settleSeconds)
        while now < settleBy {
            if let violation = advance() { return violation }
            if core.releasedThrough == UInt64(commits.count) { return nil }
        }
        let acknowledged = standbys.map { "\($0.name) at \(core.standbys[$0.name].map { String($0.acknowledged) } ?? "not in step")" }
        return violation(
            "no-progress",
            "\(Self.settleSeconds) s after faults stopped, \(core.releasedThrough) of \(commits.count) commits shipped are released "
                + "(\(Self.shown(core.state)); the rules name \(Self.listed(core.named)); \(acknowledged.joined(separator: ", ")))")
    }

    mutating func note(_ text: String) {
        releaseRun = nil
        trace.append("\(Simulation.shown(now)) s  \(text)")
        if trace.count > 60 { trace.removeFirst(trace.count - 60) }
    }

    mutating func count(_ name: String) { counts[name, default: 0] += 1 }

    func violation(_ invariant: String, _ message: String) -> SimViolation {
        SimViolation(invariant: invariant, message: message, step: step, time: now, trace: trace)
    }

    mutating func fail(_ invariant: String, _ message: String) {
        pending = pending ?? violation(invariant, message)
    }

    /// The rules' clock: seconds since the leader started.
    var clock: Double { Self.seconds(now) }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Adds a commit to the leader's log.
    mutating func append(_ commit: UInt64) {
        commits.append(commit)
        digests.append(Self.digest(digests[digests.count - 1], commit))
        epochs.append(epoch)
        shippedCount += 1
    }

    /// The digest of a log after `commit`, from the digest before it.
    static func digest(_ before: UInt64, _ commit: UInt64) -> UInt64 {
        var z = (before ^ commit) &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    static func encoded(_ commit: UInt64) -> [UInt8] { withUnsafeBytes(of: commit.littleEndian) { Array($0) } }

    static func decoded(_ bytes: [UInt8]) -> UInt64 { bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) } }

    /// Whether a standby's log holds the leader's commits 1 through `count`.
    func holds(_ standby: Standby, through count: UInt64) -> Bool {
        standby.log.count >= Int(count) && standby.digests[Int(count)] == digests[Int(count)]
    }

    /// How many of the leader's first `count` commits a standby's log holds
    /// (the two logs agree up to there).
    func held(by standby: Standby, upTo count: Int) -> Int {
        var held = min(standby.log.count, count)
        while held > 0, standby.digests[held] != digests[held] { held -= 1 }
        return held
    }

    // MARK: Steps

    mutating func advance() -> SimViolation? {
        step += 1
        now += random.milliseconds(5, 60)
        if faults { strike() }
        shipCommits()
        serveEtcd()
        serveLeader()
        for index in standbys.indices { serve(index) }
        carry(core.tick(now: clock))
        if core.state != lastState {
            lastState = core.state
            if lastState == .degraded { count("degraded") }
            note("the leader's shipping is \(Self.shown(lastState))")
        }
        if pending == nil { probeStepDown() }
        return pending ?? check()
    }

    /// How long a leader stepping down listens for acknowledgements of its last commit (`Leader.stepDownAcknowledgementWait`).
    static let stepDownListen: Duration = .milliseconds(100)

    /// Were the leader to step down now: with a last commit that released
    /// nothing, whether it would keep it (`step-down-keeps`) or take it back
    /// (`step-down-takes-back`), counting the acknowledgements that reach it
    /// within `stepDownListen`, each from the connection the rules keep for
    /// its standby (as `Leader` reads them). A commit kept must be in the log
    /// of every standby etcd names or may yet name (`step-down-kept-lacking`).
    mutating func probeStepDown() {
        guard core.lastCommitHeld else { return }
        var late: [String: UInt64] = [:]
        for standby in standbys {
            guard let connection = standby.connection, core.standbys[standby.name]?.peer == connection.peer else { continue }
            for sent in connection.up where sent.at <= now + Self.stepDownListen {
                if case .ack(let sequence) = sent.message { late[standby.name] = max(late[standby.name] ?? 0, sequence) }
            }
        }
        let keeps =
            configuration.stepDownNamedOnly
            ? !core.named.isEmpty && core.named.allSatisfy { max(core.standbys[$0]?.acknowledged ?? 0, late[$0] ?? 0) >= core.lastSequence }
            : core.lastCommitAcknowledgedByNamed(late: late)
        guard keeps else {
            count("step-down-takes-back")
            return
        }
        count("step-down-keeps")
        let last = UInt64(commits.count)
        guard let lacking = standbys.first(where: { mayBeNamed($0.name) && !holds($0, through: last) }) else { return }
        fail(
            "step-down-kept-lacking",
            "were the leader to step down now it would keep commit \(last), which released nothing, and \(lacking.name) lacks it while etcd "
                + (syncKey.contains(lacking.name) ? "names it" : "may yet name it (a write on its way)")
                + " (etcd's sync key names \(Self.listed(syncKey)); the rules name \(Self.listed(core.named)))")
    }

    /// Whether etcd's sync key names the standby, or may yet: a write on
    /// its way that may land, or a late one whose compare still holds.
    /// Finer than `named(_:)`, which the faults use to spare a standby from
    /// a wipe and which also counts writes that can no longer land.
    func mayBeNamed(_ node: String) -> Bool {
        syncKey.contains(node)
            || syncWrite.map { !$0.applied && $0.written.contains(node) } == true
            || lateWrites.contains { $0.message.written.contains(node) && comparesHold($0.message.expected) }
    }

    /// A state as `cogd status` shows it.
    static func shown(_ state: ShipCore.State) -> String {
        switch state {
        case .sync: "sync"
        case .degraded: "degraded"
        case .held: "held"
        case .async: "async"
        }
    }

    mutating func strike() {
        if random.chance(0.0004) { return failOver() }
        let pick = random.int(0...(standbys.count - 1))
        let up = standbys[pick].downUntil == nil
        if random.chance(0.0015), up {
            kill(pick, wipe: false)
        } else if random.chance(0.0015), up, standbys[pick].frozenUntil == nil {
            let timeout = core.configuration.standbyTimeout
            let pause = random.milliseconds(Int(timeout * 500), Int(timeout * 2_500))
            standbys[pick].frozenUntil = now + pause
            count("freezes")
            note("\(standbys[pick].name) frozen for \(Simulation.shown(pause)) s (heartbeat timeout \(Self.shown(timeout)) s)")
        } else if random.chance(0.0006), up, !named(standbys[pick].name) {
            // A standby the sync key names holds a copy the rule counts on; its loss is a failure past what K covers.
            kill(pick, wipe: true)
        } else if random.chance(0.0012), up, let peer = standbys[pick].connection?.peer {
            standbys[pick].connection = nil
            standbys[pick].applied = nil
            let back = random.milliseconds(10, 500)
            standbys[pick].reconnectAt = now + back
            goneNotices.append(Sent(at: now + random.milliseconds(1, 100), message: (standbys[pick].name, peer)))
            count("connection-drops")
            note("\(standbys[pick].name)'s connection ends; it connects again in \(Simulation.shown(back)) s")
        } else if random.chance(0.003) {
            shipRate = random.pick([0, 0, 0.1, 0.4, 0.8, 1])
        }
    }

    /// Whether etcd's sync key names the standby, or may once a write on its way lands.
    func named(_ node: String) -> Bool {
        syncKey.contains(node) || syncWrite?.written.contains(node) == true || lateWrites.contains { $0.message.written.contains(node) }
    }

    /// Kills a standby (it loses what was on its way), and with `wipe` its copy.
    mutating func kill(_ index: Int, wipe: Bool) {
        let peer = standbys[index].connection?.peer
        let back = wipe ? random.milliseconds(500, 5_000) : random.milliseconds(200, 6_000)
        standbys[index].connection = nil
        standbys[index].applied = nil
        standbys[index].frozenUntil = nil
        standbys[index].downUntil = now + back
        let name = standbys[index].name
        if wipe {
            standbys[index].wipe()
            count("wipes")
            note("\(name) killed and its copy wiped; back in \(Simulation.shown(back)) s")
            // Its acknowledgements from before must count for nothing: the leader sees its connection end now.
            if core.standbys[name] != nil { carry(core.gone(name, now: clock)) }
        } else {
            count("kills")
            note("\(name) killed; back in \(Simulation.shown(back)) s")
            // The leader's socket watch mostly sees the connection end; else the heartbeat timeout does.
            if let peer, random.chance(0.8) { goneNotices.append(Sent(at: now + random.milliseconds(1, 300), message: (name, peer))) }
        }
    }

    /// The leader crashes, and the next leader takes the lead in the next
    /// epoch (ha.md §4): a standby etcd's sync key names that is up and has
    /// a copy, or else the old leader itself, restarted (the nodes the
    /// leader key may go to); one time in five the old leader, even beside
    /// such a standby (none campaigned within its deferral). What was on its way to or from the old leader
    /// is lost with its connections; its last few commits may be lost with
    /// the crash (shipped before its own commit of them, so never
    /// released). Its campaign rewrites the sync key: it names no standby
    /// until the new leader's rules add them.
    mutating func failOver() {
        // The sync key write on its way lands before the campaign or never (the campaign's compare fails it after).
        if let write = syncWrite, !write.applied, write.succeeds, comparesHold(write.expected), random.chance(0.5) {
            syncKey = write.written
            syncKeyRevision += 1
            note("etcd's sync key names \(Self.listed(syncKey)) (a write the leader sent before it crashed)")
        }
        syncWrite = nil
        goneNotices = []
        let kept = random.chance(0.3) ? max(Int(lastRelease), commits.count - random.int(1...3)) : commits.count
        let old = Standby(
            name: leaderName, log: Array(commits[..<kept]), digests: Array(digests[...kept]), epochs: Array(epochs[..<kept]), connection: nil)
        let candidates = standbys.indices.filter {
            (configuration.anyStandbyLeads || syncKey.contains(standbys[$0].name)) && standbys[$0].downUntil == nil
                && standbys[$0].frozenUntil == nil && !standbys[$0].log.isEmpty
        }
        let next: Standby
        if !candidates.isEmpty, random.chance(0.8) {
            next = standbys.remove(at: random.pick(candidates))
            var deposed = old
            let back = random.milliseconds(500, 6_000)
            deposed.downUntil = now + back
            if random.chance(0.25) {
                deposed.wipe()
                count("leader-folders-destroyed")
                note("the leader \(leaderName) crashes and its data folder is destroyed; back in \(Simulation.shown(back)) s as a standby")
            } else {
                note("the leader \(leaderName) crashes holding commits through \(kept) of \(commits.count); back in \(Simulation.shown(back)) s as a standby")
            }
            standbys.append(deposed)
        } else {
            next = old
            count("leader-restarts")
            note("the leader \(leaderName) crashes holding commits through \(kept) of \(commits.count) and takes the lead again")
        }
        guard next.log.count >= releasedChain.count, next.digests[releasedChain.count] == releasedChain.digest else {
            return fail(
                "failover-lacks-release",
                "\(next.name) takes the lead in epoch \(epoch + 1) holding commits through \(held(by: next, upTo: releasedChain.count)) only, and commits through \(releasedChain.count) were released"
                    + " (etcd's sync key names \(Self.listed(syncKey)))")
        }
        // What the old leader shipped past the log the new one holds is taken back: never released.
        takenBack += UInt64(commits.count - held(by: next, upTo: commits.count))
        leaderName = next.name
        epoch += 1
        commits = next.log
        digests = next.digests
        epochs = next.epochs
        // Its log is released at once, as a leader releases what it inherited.
        releasedCount += UInt64(commits.count - releasedChain.count)
        releasedChain = (commits.count, digests[commits.count])
        core = ShipCore(core.configuration, inherited: UInt64(commits.count))
        lastRelease = UInt64(commits.count)
        lastState = core.state
        releaseRun = nil
        syncKey = []
        syncKeyRevision += 1
        syncRevisionRead = syncKeyRevision
        for index in standbys.indices {
            standbys[index].connection = nil
            standbys[index].applied = nil
            if standbys[index].downUntil == nil { standbys[index].reconnectAt = now + random.milliseconds(10, 500) }
        }
        count("failovers")
        note("\(leaderName) leads in epoch \(epoch) with commits through \(commits.count); the sync key names no standby")
    }

    mutating func shipCommits() {
        guard random.chance(shipRate) else { return }
        for _ in 0..<random.int(1...3) {
            append(random.next())
            carry(core.shipped(Self.encoded(commits[commits.count - 1]), now: clock))
        }
    }

    mutating func serveEtcd() {
        while let index = lateWrites.firstIndex(where: { $0.at <= now }) {
            let late = lateWrites.remove(at: index).message
            guard comparesHold(late.expected) else {
                count("late-sync-writes-refused")
                note("etcd refuses a write the leader gave up on: the sync key changed since the leader read it")
                continue
            }
            syncKey = late.written
            syncKeyRevision += 1
            count("late-sync-writes")
            note("etcd applies a write the leader gave up on: the sync key names \(Self.listed(syncKey))")
        }
        guard var write = syncWrite else { return }
        if !write.applied, now >= write.appliesAt {
            write.applied = true
            if write.succeeds, comparesHold(write.expected) {
                syncKey = write.written
                syncKeyRevision += 1
                note("etcd's sync key names \(Self.listed(syncKey))")
            } else if write.succeeds {
                write.succeeds = false
                note("etcd refuses the write naming \(Self.listed(write.written)): the sync key changed since the leader read it")
            }
            syncWrite = write
        }
        guard now >= write.answersAt else { return }
        syncWrite = nil
        // Before its next write, the leader reads the key (ArbiterCore does after any write, confirmed or not).
        syncRevisionRead = syncKeyRevision
        if write.succeeds {
            carry(core.syncWritten(now: clock))
        } else {
            count("sync-write-failures")
            note("the sync key write naming \(Self.listed(write.asked)) failed")
            carry(core.syncWriteFailed(now: clock))
        }
    }

    /// Whether a sync key write that compares `expected` lands (always, with the compare broken).
    func comparesHold(_ expected: Int) -> Bool { configuration.uncomparedSyncWrites || expected == syncKeyRevision }

    static func listed(_ names: [String]) -> String { names.isEmpty ? "no standby" : names.joined(separator: ", ") }

    /// Seconds as the options write them: `2`, `2.5`.
    static func shown(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }

    /// The standbys' messages that arrived, in the order they arrived, and the connections seen to end.
    mutating func serveLeader() {
        var arrived: [Sent<(index: Int, order: Int, message: Up)>] = []
        for index in standbys.indices {
            while let first = standbys[index].connection?.up.first, first.at <= now {
                standbys[index].connection?.up.removeFirst()
                arrived.append(Sent(at: first.at, message: (index, arrived.count, first.message)))
            }
        }
        // In the order they arrived; at one instant, by standby, each connection's in the order sent.
        arrived.sort { ($0.at, $0.message.index, $0.message.order) < ($1.at, $1.message.index, $1.message.order) }
        for sent in arrived {
            // Only while its connection lasts (a message on its way when it ended was lost with it).
            guard let peer = standbys[sent.message.index].connection?.peer else { continue }
            receive(sent.message.message, from: peer, node: standbys[sent.message.index].name)
        }
        while let index = goneNotices.firstIndex(where: { $0.at <= now }) {
            let notice = goneNotices.remove(at: index).message
            // A connection's end counts only while it is the one the rules keep for the node (as the leader's watch does).
            if core.standbys[notice.node]?.peer == notice.peer {
                note("the leader sees \(notice.node)'s connection end")
                carry(core.gone(notice.node, now: clock))
            }
        }
    }

    /// The model's one log, as a hello names it.
    static let logID: [UInt8] = Array(repeating: 0xc0, count: 16)

    /// The leader's driver (`Leader.standbyMessage`): a hello in step, behind
    /// (the kept commits after it), or not (a copy); an acknowledgement; a copy in place.
    mutating func receive(_ message: Up, from peer: [UInt8], node: String) {
        let last = commits.count
        let kept = min(window, last)
        switch message {
        case .hello(let revision, let digest, let helloEpoch):
            // The leader's rule (`StandbyMatch`), on this model's log: one commit a revision, each named by its epoch
            // and revision, each digest a chain of the commits; the kept commits must hold its last one (`KeptCommits.after`).
            let named = revision == 0 ? nil : CommitName(epoch: helloEpoch, number: UInt64(revision))
            let hello = StandbyMatch.Hello(
                logID: revision == 0 ? nil : Self.logID, epoch: helloEpoch, revision: UInt64(revision), digest: StateDigest(value: UInt128(digest)),
                lastCommit: named)
            let held = revision >= 1 && revision <= last
            let record = held ? StandbyMatch.Record(epoch: epochs[revision - 1], digest: StateDigest(value: UInt128(digests[revision]))) : nil
            let isKept = held && revision > last - kept && epochs[revision - 1] == helloEpoch
            let log = StandbyMatch.Log(
                logID: Self.logID, epoch: epoch, lastRevision: UInt64(last), record: record, commitsAfter: false,
                keepsAllAfter: revision >= 1 && revision > last - kept, oldestKept: UInt64(last - kept + 1),
                lastCommit: last == 0 ? nil : CommitName(epoch: epochs[last - 1], number: UInt64(last)), keptAfterNamed: isKept ? last - revision : nil)
            switch StandbyMatch.of(hello, log) {
            case .behind:
                count("catch-ups")
                note("\(node) says hello at commit \(revision), behind: the leader sends it the \(last - revision) after it")
                carry(core.copied(by: peer, node: node, through: UInt64(revision), missed: commits[revision...].map(Self.encoded), now: clock))
            case .inStep:
                note("\(node) says hello at commit \(revision), in step")
                carry(core.hello(from: peer, node: node, inStep: true, now: clock))
            case .copy(let reason):
                // Commits this log does not hold: a deposed leader's tail (its own, or one a deposed leader shipped it).
                if revision > last || (held && digests[revision] != digest) { count("deposed-tails") }
                note("\(node) says hello at commit \(revision) of epoch \(helloEpoch): \(reason)")
                carry(core.hello(from: peer, node: node, inStep: false, now: clock))
            }
        case .ack(let sequence):
            carry(core.acknowledged(from: peer, node: node, through: sequence, now: clock))
        case .copied(let sequence):
            let missed = sequence <= UInt64(last) && UInt64(last) - sequence <= UInt64(kept) ? commits[Int(sequence)...].map(Self.encoded) : nil
            note("\(node) has the copy through commit \(sequence)" + (missed == nil ? "; the leader no longer keeps the commits since" : ""))
            carry(core.copied(by: peer, node: node, through: sequence, missed: missed, now: clock))
        }
    }

    /// Performs the rules' effects, as `Leader.carryShipping` does.
    mutating func carry(_ effects: [ShipCore.Effect]) {
        for effect in effects {
            switch effect {
            case .ship(let peer, let sequence, let commit):
                send(.ship(sequence: sequence, commit: commit), to: peer)
            case .welcome(let peer, let sequence):
                note("the leader welcomes \(name(of: peer)) at commit \(sequence)")
                send(.welcome(sequence: sequence), to: peer)
            case .resync(let peer, let node, let sequence):
                guard sequence == UInt64(commits.count) else {
                    return fail("copy-behind", "the rules ask for a copy of the log through commit \(sequence) for \(node), and \(commits.count) were shipped")
                }
                count("copies")
                let transfer = random.milliseconds(50, 2_000)
                note("the leader sends \(node) a copy of the log through commit \(sequence) (\(Simulation.shown(transfer)) s on the way)")
                send(.resync(sequence: sequence), to: peer)
                send(.copy(sequence: sequence, commits: commits[...], digests: digests[...], epochs: epochs[...]), to: peer, after: transfer)
            case .writeSync(let asked):
                guard syncWrite == nil else {
                    return fail("two-sync-writes", "the rules ask etcd to name \(Self.listed(asked)) while the write naming \(Self.listed(syncWrite!.asked)) is on its way")
                }
                count("sync-writes")
                // Broken: every standby in step is named, while releases wait for those the rules named.
                let written = configuration.brokenSyncKey ? asked + core.standbys.keys.sorted().filter { !asked.contains($0) } : asked
                let slow = faults && random.chance(0.05)
                let appliesAt = now + (slow ? random.milliseconds(300, 3_000) : random.milliseconds(2, 80))
                let succeeds = !(faults && random.chance(0.08))
                syncWrite = SyncWrite(
                    asked: asked, written: written, appliesAt: appliesAt, answersAt: appliesAt + random.milliseconds(1, 20), succeeds: succeeds,
                    expected: syncRevisionRead)
                if !succeeds, configuration.lateSyncWrites, random.chance(0.5) {
                    // No answer in time: the leader is told it failed, and etcd may apply it later all the same.
                    lateWrites.append(Sent(at: appliesAt + random.milliseconds(0, 2_000), message: (written, syncRevisionRead)))
                }
                note("the leader asks etcd's sync key to name \(Self.listed(asked))"
                    + (written == asked ? "" : "; broken, it writes \(Self.listed(written)) (every standby in step)"))
            case .release(let through):
                guard through > lastRelease else {
                    return fail("release-went-back", "the rules release through commit \(through) after releasing through \(lastRelease)")
                }
                guard through <= UInt64(commits.count) else {
                    return fail("release-unshipped", "the rules release through commit \(through), and \(commits.count) were shipped")
                }
                count("releases")
                let acknowledged = core.named.map { "\($0) at \(core.standbys[$0].map { String($0.acknowledged) } ?? "gone")" }
                let run = releaseRun.map { ($0.first, $0.count + 1) } ?? (lastRelease + 1, 1)
                if releaseRun != nil { trace.removeLast() }
                note((run.0 == through ? "released commit \(through)" : "released commits \(run.0)–\(through)") + (run.1 > 1 ? " in \(run.1) releases" : "")
                    + " (\(Self.shown(core.state)); the rules name \(acknowledged.isEmpty ? "no standby" : acknowledged.joined(separator: ", ")))")
                releaseRun = run
                releasedCount += through - lastRelease
                releasedChain = (Int(through), digests[Int(through)])
                lastRelease = through
            case .drop(let node, let reason):
                count("drops")
                // By cause: the heartbeat timeout, the window, the connection's end, a hello again.
                count(reason.hasPrefix("silent") ? "drops-silent" : reason.hasPrefix("more than") ? "drops-behind"
                    : reason.hasPrefix("its connection") ? "drops-gone" : "drops-hello-again")
                note("the leader drops \(node): \(reason)")
            case .refuse(let peer, let reason):
                count("refusals")
                send(.refused(reason), to: peer)
            }
        }
    }

    func name(of peer: [UInt8]) -> String {
        standbys.first { $0.connection?.peer == peer }?.name ?? "a connection that ended"
    }

    /// Sends to a standby's connection; to one that ended, nothing goes.
    mutating func send(_ message: Down, to peer: [UInt8], after extra: Duration = .zero) {
        guard let index = standbys.firstIndex(where: { $0.connection?.peer == peer }) else { return }
        let at = max(now + delay() + extra, standbys[index].connection!.down.last?.at ?? .zero)
        standbys[index].connection!.down.append(Sent(at: at, message: message))
    }

    /// A message's time on the way: mostly quick, now and then a spike.
    mutating func delay() -> Duration {
        faults && random.chance(0.01) ? random.milliseconds(100, 1_500) : random.milliseconds(1, 20)
    }

    // MARK: The standbys

    mutating func serve(_ index: Int) {
        if let until = standbys[index].downUntil {
            guard now >= until else { return }
            standbys[index].downUntil = nil
            standbys[index].reconnectAt = now
            note("\(standbys[index].name) starts again, holding commits through \(standbys[index].log.count)")
        }
        if let until = standbys[index].frozenUntil {
            guard now >= until else { return }
            standbys[index].frozenUntil = nil
            note("\(standbys[index].name) runs again")
        }
        if standbys[index].connection == nil {
            guard let at = standbys[index].reconnectAt, now >= at else { return }
            connections += 1
            standbys[index].connection = Connection(peer: Array("\(standbys[index].name)#\(connections)".utf8), epoch: epoch)
            standbys[index].reconnectAt = nil
            standbys[index].applied = nil
            standbys[index].lastHello = now - .seconds(60)
            standbys[index].quietUntil = now
        }
        let standby = standbys[index]
        if standby.applied == nil, now >= standby.quietUntil, now - standby.lastHello >= .seconds(1) {
            hello(index)
        }
        if let applied = standby.applied, now - standby.lastAcknowledged >= .milliseconds(500) {
            count("keep-alives")
            sendUp(index, .ack(sequence: applied))
        }
        var acknowledge: UInt64?
        while let first = standbys[index].connection?.down.first, first.at <= now {
            standbys[index].connection?.down.removeFirst()
            if let sequence = take(index, first.message) { acknowledge = sequence }
            if pending != nil { return }
        }
        if let acknowledge { sendUp(index, .ack(sequence: acknowledge)) }
    }

    mutating func hello(_ index: Int) {
        standbys[index].lastHello = now
        let standby = standbys[index]
        sendUp(index, .hello(revision: standby.log.count, digest: standby.digests[standby.log.count], epoch: standby.epochs.last ?? 0))
    }

    mutating func sendUp(_ index: Int, _ message: Up) {
        guard let connection = standbys[index].connection else { return }
        if case .ack = message { standbys[index].lastAcknowledged = now }
        standbys[index].connection!.up.append(Sent(at: max(now + delay(), connection.up.last?.at ?? .zero), message: message))
    }

    /// One message from the leader (`StandbyFollower.take`); the sequence to acknowledge, if any.
    mutating func take(_ index: Int, _ message: Down) -> UInt64? {
        let name = standbys[index].name
        switch message {
        case .welcome(let sequence):
            guard holds(standbys[index], through: sequence) else {
                fail("welcomed-out-of-step", "the leader welcomes \(name) at commit \(sequence), and its copy holds \(standbys[index].log.count) commits"
                    + (standbys[index].log.count >= Int(sequence) ? ", others than the leader's" : ""))
                return nil
            }
            standbys[index].applied = sequence
            return nil
        case .ship(let sequence, let bytes):
            guard let last = standbys[index].applied else { return nil }
            guard sequence == last &+ 1 else {
                // One was lost on the way: it says hello again.
                count("out-of-step")
                note("\(name) gets commit \(sequence) after \(last); it says hello again")
                standbys[index].applied = nil
                hello(index)
                return nil
            }
            let commit = Self.decoded(bytes)
            let position = Int(sequence) - 1
            if position < standbys[index].log.count {
                // Applied already (welcomed behind what it holds): applying it again changes nothing.
                guard standbys[index].log[position] == commit else {
                    fail("standby-diverged", "\(name) is shipped commit \(sequence), and holds another commit there")
                    return nil
                }
            } else {
                standbys[index].log.append(commit)
                standbys[index].digests.append(Self.digest(standbys[index].digests[position], commit))
                standbys[index].epochs.append(standbys[index].connection?.epoch ?? 0)
            }
            standbys[index].applied = sequence
            return sequence
        case .resync:
            standbys[index].applied = nil
            standbys[index].quietUntil = now + .seconds(30)
            return nil
        case .copy(let sequence, let commits, let digests, let epochs):
            standbys[index].log = Array(commits)
            standbys[index].digests = Array(digests)
            standbys[index].epochs = Array(epochs)
            standbys[index].quietUntil = now + .seconds(5)
            note("\(name) puts the copy in place (commits through \(sequence))")
            sendUp(index, .copied(sequence: sequence))
            return nil
        case .refused(let reason):
            // Said once for every acknowledgement on its way: noted the first time.
            if standbys[index].applied != nil || now >= standbys[index].quietUntil { note("\(name) is refused: \(reason)") }
            standbys[index].applied = nil
            standbys[index].quietUntil = now + .seconds(5)
            return nil
        }
    }

    // MARK: The checker

    /// The sync key's rule, at this instant.
    func check() -> SimViolation? {
        let released = core.releasedThrough
        if released < lastRelease {
            return violation("release-went-back", "the rules say commits through \(released) are released, after releasing through \(lastRelease)")
        }
        for name in syncKey {
            guard let standby = standbys.first(where: { $0.name == name }) else {
                return violation("unknown-named", "etcd's sync key names \(name), which is no standby")
            }
            if !holds(standby, through: released) {
                return violation(
                    "named-lacks-release",
                    "etcd's sync key names \(Self.listed(syncKey)); \(name) holds the leader's commits through \(held(by: standby, upTo: Int(released))) only, and commits through \(released) were released"
                        + " (the rules name \(Self.listed(core.named)), \(Self.shown(core.state)))")
            }
        }
        if syncKey.count > quorum {
            return violation("too-many-named", "etcd's sync key names \(Self.listed(syncKey)): more than the \(quorum) of --sync \(sync)")
        }
        return nil
    }
}
