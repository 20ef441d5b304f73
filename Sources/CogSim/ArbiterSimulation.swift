import CogProtocol

/// The arbiter cores of a cluster's nodes (the very `ArbiterCore` that
/// `cogd leader --ha` runs) against a model of etcd, on a simulated clock,
/// driven by one seed (`cogd-lab sim --arbiter`): requests and answers with
/// random latency and spikes past the request limit (a renewal etcd applies
/// whose answer the node never gets), nodes frozen past their lease, killed
/// and restarted, etcd unreachable for a while, and each node's clock
/// running up to 1% fast or slow.
///
/// After every step the checker holds the rule the release gate exists for
/// (ha.md §4–5): a node whose gate is open holds the leader key in etcd at
/// that moment, on a lease etcd has not let go — so no two nodes release
/// at once and a deposed leader releases nothing. Every epoch is led by one
/// node, and epochs only grow. Once faults stop, some node must lead again.
public struct ArbiterSimulation {
    public struct Configuration: Sendable {
        public var seed: UInt64
        public var steps: Int
        public var nodes: Int
        /// The broken rule (`arbiter-deadline`): the checker must catch it.
        public var brokenDeadline: Bool

        public init(seed: UInt64, steps: Int = 20_000, nodes: Int = 3, brokenDeadline: Bool = false) {
            self.seed = seed
            self.steps = steps
            self.nodes = nodes
            self.brokenDeadline = brokenDeadline
        }
    }

    public struct Result: Sendable {
        public let seed: UInt64
        public let steps: Int
        public let violation: SimViolation?
        /// Times a node took the lead (the first included).
        public let leads: Int
        public let stepDowns: Int
        public let highestEpoch: UInt64
        public let simulatedSeconds: Double
    }

    /// etcd as the arbiter sees it: keys with revisions, leases that end
    /// on the true clock.
    struct Etcd {
        var revision: Int64 = 1
        var keys: [String: (value: String, modRevision: Int64, lease: Int64)] = [:]
        var leases: [Int64: (ttl: Int64, expiry: Duration)] = [:]
        var nextLease: Int64 = 100

        mutating func expire(now: Duration) {
            for (id, lease) in leases where lease.expiry <= now {
                leases[id] = nil
                keys = keys.filter { $0.value.lease != id }
            }
        }

        mutating func apply(_ request: EtcdRequest, now: Duration) -> EtcdAnswer {
            expire(now: now)
            switch request {
            case .grantLease(let seconds):
                nextLease += 1
                leases[nextLease] = (seconds, now + .seconds(seconds))
                return .granted(lease: nextLease, seconds: seconds)
            case .keepAlive(let id):
                guard let lease = leases[id] else { return .keptAlive(seconds: 0) }
                leases[id] = (lease.ttl, now + .seconds(lease.ttl))
                return .keptAlive(seconds: lease.ttl)
            case .revoke(let id):
                leases[id] = nil
                keys = keys.filter { $0.value.lease != id }
                return .revoked
            case .read(let names):
                var values: [String: EtcdValue] = [:]
                for name in names { if let key = keys[name] { values[name] = EtcdValue(value: key.value, modRevision: key.modRevision) } }
                return .values(values)
            case .transaction(let compares, let puts):
                guard compares.allSatisfy({ (keys[$0.key]?.modRevision ?? 0) == $0.modRevision }) else { return .transaction(succeeded: false) }
                if puts.contains(where: { $0.lease != 0 && leases[$0.lease] == nil }) {
                    return .failed(EtcdFailure(.refused, "etcd error 5: etcdserver: requested lease not found"))
                }
                revision += 1
                for put in puts { keys[put.key] = (put.value, revision, put.lease) }
                return .transaction(succeeded: true)
            }
        }
    }

    /// One node: its process (a core while it runs), its clock, its request in flight.
    struct Node {
        let name: String
        /// Its clock's rate against the true one, and where it started.
        let rate: Double
        let offset: Duration
        var core: ArbiterCore?
        var pausedUntil: Duration?
        var restartAt: Duration?
        var epochLed: UInt64 = 0
        var request: Flight?
        /// The lease of the run that ended (killed, stepped down, resigned): its next run revokes it (ha.md §4.1).
        var deadRunLease: Int64?

        func local(_ now: Duration) -> Duration {
            let nanoseconds = Double(now.components.seconds) * 1e9 + Double(now.components.attoseconds) / 1e9
            return offset + .nanoseconds(Int64(nanoseconds * rate))
        }
    }

    /// A request on its way: etcd applies it at `appliesAt` (even after the
    /// node gave up on it), its answer reaches the node at `answersAt`, or
    /// the node gives up at `givesUpAt`.
    struct Flight {
        let request: EtcdRequest
        let appliesAt: Duration
        let answersAt: Duration
        let givesUpAt: Duration
        var answer: EtcdAnswer?
    }

    let configuration: Configuration
    var random: SimRandom
    var now: Duration = .zero
    var step = 0
    var etcd = Etcd()
    var etcdDownUntil: Duration?
    var nodes: [Node] = []
    /// A rule broken inside a step (an epoch led twice), reported at its end.
    var pending: SimViolation?
    /// Requests whose node gave up on them, still to reach etcd.
    var late: [(request: EtcdRequest, at: Duration)] = []
    var trace: [String] = []
    var leads = 0
    var stepDowns = 0
    var epochsLed: [UInt64: String] = [:]
    var highestEpoch: UInt64 = 0
    var faults = true
    let ttl: Int64

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        random = SimRandom(seed: configuration.seed)
        ttl = Int64(random.int(2...5))
        for index in 0..<configuration.nodes {
            let rate = 1 + Double(random.int(-100...100)) / 10_000
            nodes.append(Node(name: "n\(index + 1)", rate: rate, offset: random.milliseconds(0, 100_000)))
        }
    }

    public static func run(_ configuration: Configuration) -> Result {
        var simulation = ArbiterSimulation(configuration)
        let violation = simulation.runAll()
        return Result(
            seed: configuration.seed, steps: simulation.step, violation: violation, leads: simulation.leads, stepDowns: simulation.stepDowns,
            highestEpoch: simulation.highestEpoch,
            simulatedSeconds: Double(simulation.now.components.seconds) + Double(simulation.now.components.attoseconds) / 1e18)
    }

    mutating func runAll() -> SimViolation? {
        for index in nodes.indices { start(index) }
        while step < configuration.steps {
            if let violation = advance() { return violation }
        }
        // Faults stop: within a few TTLs some node leads again.
        faults = false
        for index in nodes.indices where nodes[index].core == nil { nodes[index].restartAt = now }
        etcdDownUntil = nil
        for index in nodes.indices { nodes[index].pausedUntil = nil }
        let settleBy = now + .seconds(ttl * 6)
        while now < settleBy {
            if let violation = advance() { return violation }
            if nodes.indices.contains(where: { nodes[$0].core?.mayRelease(now: nodes[$0].local(now)) == true }) { return nil }
        }
        return violation("no-leader", "no node leads \(ttl * 6) s after faults stopped")
    }

    mutating func note(_ text: String) {
        trace.append("\(Simulation.shown(now)) s  \(text)")
        if trace.count > 60 { trace.removeFirst(trace.count - 60) }
    }

    func violation(_ invariant: String, _ message: String) -> SimViolation {
        SimViolation(invariant: invariant, message: message, step: step, time: now, trace: trace)
    }

    // MARK: Steps

    mutating func advance() -> SimViolation? {
        step += 1
        now += random.milliseconds(5, 60)
        if faults { strike() }
        if let until = etcdDownUntil, now >= until {
            etcdDownUntil = nil
            note("etcd answers again")
        }
        late.sort { $0.at < $1.at }
        while let first = late.first, first.at <= now {
            late.removeFirst()
            if etcdDownUntil == nil { _ = etcd.apply(first.request, now: first.at) }
        }
        etcd.expire(now: now)
        if let sync = etcd.keys["/cogd/sim/sync"], let leader = etcd.keys["/cogd/sim/leader"], random.chance(0.02),
            var record = ArbiterRecords.Sync(text: sync.value), record.standbys.isEmpty
        {
            // As a leader does once its standbys acknowledged every turn (shipping): they may take over.
            record.standbys = nodes.map(\.name).filter { $0 != record.leader }
            etcd.revision += 1
            etcd.keys["/cogd/sim/sync"] = (record.text, etcd.revision, 0)
            note("sync names \(record.standbys.joined(separator: ", ")) beside \(leader.value)")
        }
        for index in nodes.indices {
            serve(index)
        }
        return pending ?? check()
    }

    mutating func strike() {
        let pick = random.int(0...(nodes.count - 1))
        if random.chance(0.002), nodes[pick].core != nil, nodes[pick].pausedUntil == nil {
            let pause = random.milliseconds(Int(ttl) * 300, Int(ttl) * 2_500)
            nodes[pick].pausedUntil = now + pause
            note("\(nodes[pick].name) frozen for \(Simulation.shown(pause)) s")
        } else if random.chance(0.001), nodes[pick].core != nil {
            kill(pick, restartIn: random.milliseconds(200, 4_000), why: "killed")
        } else if random.chance(0.0008), etcdDownUntil == nil {
            let outage = random.milliseconds(Int(ttl) * 300, Int(ttl) * 2_000)
            etcdDownUntil = now + outage
            note("etcd unreachable for \(Simulation.shown(outage)) s")
        } else if random.chance(0.0005), let core = nodes[pick].core, case .leading = core.role, nodes[pick].pausedUntil == nil {
            // A clean stop: the leader resigns (revokes its lease).
            var resigning = core
            let effects = resigning.resign(now: nodes[pick].local(now))
            for case .send(let request) in effects { late.append((request, now + random.milliseconds(1, 20))) }
            nodes[pick].deadRunLease = core.lease
            nodes[pick].core = nil
            nodes[pick].request = nil
            nodes[pick].restartAt = now + random.milliseconds(200, 2_000)
            note("\(nodes[pick].name) resigns and stops")
        }
    }

    mutating func kill(_ index: Int, restartIn: Duration, why: String) {
        if let flight = nodes[index].request, flight.appliesAt > now, flight.answer == nil { late.append((flight.request, flight.appliesAt)) }
        nodes[index].deadRunLease = nodes[index].core?.lease
        nodes[index].core = nil
        nodes[index].request = nil
        nodes[index].pausedUntil = nil
        nodes[index].restartAt = now + restartIn
        note("\(nodes[index].name) \(why); back in \(Simulation.shown(restartIn)) s")
    }

    mutating func start(_ index: Int) {
        var settings = ArbiterCore.Configuration(cluster: "sim", node: nodes[index].name, leaseSeconds: ttl, ownEpoch: nodes[index].epochLed)
        settings.deadlineFromAnswer = configuration.brokenDeadline
        settings.deadRunLease = nodes[index].deadRunLease
        nodes[index].deadRunLease = nil
        var core = ArbiterCore(settings)
        nodes[index].restartAt = nil
        let effects = core.start(now: nodes[index].local(now))
        nodes[index].core = core
        note("\(nodes[index].name) starts")
        carry(index, effects)
    }

    mutating func serve(_ index: Int) {
        if nodes[index].core == nil {
            if let at = nodes[index].restartAt, now >= at { start(index) }
            return
        }
        if let until = nodes[index].pausedUntil {
            guard now >= until else { return }
            nodes[index].pausedUntil = nil
            note("\(nodes[index].name) runs again")
        }
        let local = nodes[index].local(now)
        if var flight = nodes[index].request {
            if flight.answer == nil, now >= flight.appliesAt, flight.appliesAt <= flight.givesUpAt {
                flight.answer = etcdDownUntil == nil
                    ? etcd.apply(flight.request, now: flight.appliesAt)
                    : .failed(EtcdFailure(.unreachable, "connect: connection refused"))
                nodes[index].request = flight
            }
            if let answer = flight.answer, now >= flight.answersAt {
                nodes[index].request = nil
                carry(index, nodes[index].core!.answered(answer, now: local))
            } else if now >= flight.givesUpAt {
                // The node gives up; etcd may still apply the request when it arrives.
                if flight.answer == nil { late.append((flight.request, flight.appliesAt)) }
                nodes[index].request = nil
                carry(index, nodes[index].core!.answered(.failed(EtcdFailure(.timedOut, "no answer in time")), now: local))
            }
            return
        }
        carry(index, nodes[index].core!.tick(now: local))
    }

    mutating func carry(_ index: Int, _ effects: [ArbiterCore.Effect]) {
        for effect in effects {
            switch effect {
            case .send(let request):
                let limit = min(max(.seconds(ttl) / 5, Duration.milliseconds(200)), .seconds(2))
                // Mostly quick; now and then a spike past the limit.
                let there = faults && random.chance(0.03) ? random.milliseconds(100, 3_000) : random.milliseconds(1, 15)
                let back = faults && random.chance(0.03) ? random.milliseconds(100, 3_000) : random.milliseconds(1, 15)
                nodes[index].request = Flight(
                    request: request, appliesAt: now + there, answersAt: now + there + back, givesUpAt: now + limit, answer: nil)
            case .syncWritten, .syncWriteFailed:
                break  // The simulated nodes ship nothing: no sync key writes are asked for.
            case .lead(let epoch):
                leads += 1
                nodes[index].epochLed = epoch
                if let other = epochsLed[epoch] {
                    pending = pending ?? violation("epoch-twice", "\(nodes[index].name) leads epoch \(epoch), already led by \(other)")
                }
                if epoch <= highestEpoch {
                    pending = pending ?? violation("epoch-went-back", "\(nodes[index].name) leads epoch \(epoch) after epoch \(highestEpoch)")
                }
                epochsLed[epoch] = epochsLed[epoch] ?? nodes[index].name
                highestEpoch = max(highestEpoch, epoch)
                note("\(nodes[index].name) leads epoch \(epoch)")
            case .stepDown(let reason):
                stepDowns += 1
                kill(index, restartIn: random.milliseconds(100, 1_500), why: "steps down (\(reason))")
            case .refuse(let reason):
                kill(index, restartIn: random.milliseconds(500, 3_000), why: "refused (\(reason))")
            case .follow, .note, .leaseGranted:
                break
            }
            if nodes[index].core == nil { return }
        }
    }

    /// The gate's rule, at this instant, for every node that runs.
    func check() -> SimViolation? {
        var open: [String] = []
        for node in nodes {
            guard let core = node.core, node.pausedUntil == nil, core.mayRelease(now: node.local(now)) else { continue }
            guard case .leading(let epoch) = core.role else { continue }
            open.append(node.name)
            guard let key = etcd.keys["/cogd/sim/leader"], let leader = ArbiterRecords.Leader(text: key.value),
                leader.node == node.name, leader.epoch == epoch, let lease = etcd.leases[key.lease], lease.expiry > now
            else {
                let holder = etcd.keys["/cogd/sim/leader"]?.value ?? "no one"
                return violation(
                    "stale-leader", "\(node.name) may release in epoch \(epoch) while etcd's leader key names \(holder) (its lease ended or went to another)")
            }
            if epochsLed[epoch] != node.name {
                return violation("epoch-twice", "epoch \(epoch) was led by \(epochsLed[epoch] ?? "?") and \(node.name)")
            }
        }
        if open.count > 1 { return violation("two-leaders", "\(open.joined(separator: " and ")) may release at once") }
        return nil
    }
}
