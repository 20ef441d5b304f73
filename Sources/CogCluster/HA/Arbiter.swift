import CogProtocol
import Foundation
import Synchronization

/// Runs an `ArbiterCore` against etcd on a thread of its own (`cogd-arbiter`):
/// the timer, the requests through `EtcdGateway`, and what the effects mean
/// for the node (ha.md §4).
///
/// The release gate is what the serving thread asks before anything leaves
/// (`mayRelease()`): it reads the core's deadline from an atomic and the
/// clock, so a leader whose arbiter thread is stuck in a slow request, or
/// whose whole process was stopped past the deadline, still releases
/// nothing at or after it.
public final class Arbiter: SyncKeyWriter, @unchecked Sendable {
    /// What the node hears from its arbiter.
    public enum Event: Sendable, Equatable {
        /// This node leads `epoch`.
        case lead(epoch: UInt64)
        /// Another node leads (nil: no one yet).
        case follow(ArbiterRecords.Leader?)
        /// The role is over: release nothing more, and stop.
        case stepDown(reason: String)
        /// The node cannot join its cluster.
        case refuse(reason: String)
        /// Worth an operator's line (a failed request, a wait).
        case note(String)
    }

    public let configuration: ArbiterCore.Configuration
    private let gateway: EtcdGateway
    private let onEvent: @Sendable (Event) -> Void
    private let start = ContinuousClock.now
    /// The core's release deadline in nanoseconds from `start`; 0: none.
    private let deadlineNanoseconds = Atomic<Int64>(0)
    private let resignRequested = Atomic<Bool>(false)
    private let epochLed = Atomic<UInt64>(0)
    private let epochSeen = Atomic<UInt64>(0)
    private let renewals = Atomic<UInt64>(0)
    private let renewalFailures = Atomic<UInt64>(0)
    private let requestFailures = Atomic<UInt64>(0)
    private let finished = Atomic<Bool>(false)
    private let lock = NSLock()
    private var thread: Thread?
    /// The sync key write the leader asked for, not yet taken by the loop (under `lock`).
    private var syncRequest: [String]?
    /// The answers to sync key writes, oldest first (under `lock`).
    private var syncAnswers: [Bool] = []
    /// Whether the node's folder holds a log now, not yet told to the core (under `lock`).
    private var holdsLogChange: Bool?

    /// The node's folder holds a log now, or does not (ha.md §4: a node
    /// without one may not take the lead). Called from the waiting command line.
    public func holdsLog(_ holds: Bool) {
        lock.withLock { holdsLogChange = holds }
    }

    /// Asks for etcd's sync key to name `standbys` (ha.md §9); the answer
    /// comes through `takeSyncAnswer()`. Called from the serving thread.
    public func requestSync(standbys: [String]) {
        lock.withLock { syncRequest = standbys }
    }

    /// The oldest answer to a sync key write not taken yet: true, written; false, failed.
    public func takeSyncAnswer() -> Bool? {
        lock.withLock { syncAnswers.isEmpty ? nil : syncAnswers.removeFirst() }
    }

    /// Where the run's lease is recorded for the node's next run (ha.md §4.1); nil: nowhere.
    private let runRecord: RunRecord?

    /// - Parameter onEvent: called on the arbiter's thread, in order.
    public init(
        gateway: EtcdGateway, configuration: ArbiterCore.Configuration, runRecord: RunRecord? = nil,
        onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.gateway = gateway
        self.configuration = configuration
        self.runRecord = runRecord
        self.onEvent = onEvent
    }

    private var now: Duration { ContinuousClock.now - start }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds &* 1_000_000_000 &+ duration.components.attoseconds / 1_000_000_000
    }

    /// Whether this node may release a reply, a turn or a snapshot now.
    public func mayRelease() -> Bool {
        let deadline = deadlineNanoseconds.load(ordering: .acquiring)
        return deadline > 0 && Self.nanoseconds(now) < deadline
    }

    /// The epoch this node leads while its gate is open; nil otherwise.
    public var leadingEpoch: UInt64? {
        let epoch = epochLed.load(ordering: .acquiring)
        return epoch > 0 && mayRelease() ? epoch : nil
    }

    /// Whether the arbiter's thread has ended (stepped down, refused or resigned).
    public var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Starts the thread.
    public func run() {
        let thread = Thread { [self] in loop() }
        thread.name = "cogd-arbiter"
        lock.withLock { self.thread = thread }
        thread.start()
    }

    /// Gives the role up at the next step (a leader revokes its lease so a
    /// standby takes over at once); the release gate closes now.
    public func resign() {
        deadlineNanoseconds.store(0, ordering: .releasing)
        resignRequested.store(true, ordering: .releasing)
    }

    /// The longest one request may take: a fifth of the TTL, within 0.2–2 s.
    var requestLimit: Duration { Self.requestLimit(leaseSeconds: configuration.leaseSeconds) }
    /// Each etcd request's time limit (ha.md §3): a fifth of the TTL, within 0.2–2 s.
    public static func requestLimit(leaseSeconds: Int64) -> Duration { min(max(.seconds(leaseSeconds) / 5, .milliseconds(200)), .seconds(2)) }

    private func loop() {
        var core = ArbiterCore(configuration)
        var effects = core.start(now: now)
        while true {
            var answers: [EtcdAnswer] = []
            for effect in effects {
                switch effect {
                case .send(let request):
                    let answer = gateway.perform(request, limit: requestLimit)
                    count(request, answer)
                    answers.append(answer)
                case .lead(let epoch):
                    epochLed.store(epoch, ordering: .releasing)
                    publish(core)
                    onEvent(.lead(epoch: epoch))
                case .follow(let leader): onEvent(.follow(leader))
                case .stepDown(let reason):
                    publish(core)
                    onEvent(.stepDown(reason: reason))
                case .refuse(let reason): onEvent(.refuse(reason: reason))
                case .note(let text): onEvent(.note(text))
                case .syncWritten: lock.withLock { syncAnswers.append(true) }
                case .syncWriteFailed(let reason):
                    lock.withLock { syncAnswers.append(false) }
                    onEvent(.note("the sync key was not written: \(reason)"))
                case .leaseGranted(let lease):
                    // Recorded before the presence key is put on it (the next effect).
                    do { try runRecord?.write(lease: lease) } catch {
                        onEvent(.note("could not record this run's lease (\(error)): if this run dies, its name stays taken until the lease's TTL ends"))
                    }
                }
            }
            publish(core)
            if core.role == .stopped && answers.isEmpty { break }
            if let answer = answers.first {
                effects = core.answered(answer, now: now)
                continue
            }
            if resignRequested.load(ordering: .acquiring) {
                effects = core.resign(now: now)
                if effects.isEmpty { break }
                continue
            }
            if let standbys = lock.withLock({ () -> [String]? in
                defer { syncRequest = nil }
                return syncRequest
            }) {
                effects = core.writeSync(standbys: standbys, now: now)
                continue
            }
            if let holds = lock.withLock({ () -> Bool? in
                defer { holdsLogChange = nil }
                return holdsLogChange
            }) {
                core.holdsLog(holds)
            }
            Thread.sleep(forTimeInterval: 0.02)
            effects = core.tick(now: now)
        }
        deadlineNanoseconds.store(0, ordering: .releasing)
        finished.store(true, ordering: .releasing)
    }

    private func count(_ request: EtcdRequest, _ answer: EtcdAnswer) {
        switch (request, answer) {
        case (.keepAlive, .keptAlive(let seconds)) where seconds > 0: renewals.add(1, ordering: .relaxed)
        case (.keepAlive, _): renewalFailures.add(1, ordering: .relaxed)
        default: break
        }
        if case .failed = answer { requestFailures.add(1, ordering: .relaxed) }
    }

    /// The `/metrics` families of this node's role (`protocol/metrics.md` §3a).
    public func metricFamilies() -> [MetricFamily] {
        let deadline = deadlineNanoseconds.load(ordering: .acquiring)
        let left = deadline > 0 ? max(0, Double(deadline - Self.nanoseconds(now)) / 1e9) : 0
        let labels = [MetricFamily.Label("cluster", configuration.cluster), MetricFamily.Label("node", configuration.node)]
        func family(_ name: String, _ kind: MetricFamily.Kind, _ help: String, _ value: Double) -> MetricFamily {
            MetricFamily(name, kind, help: help, samples: [MetricFamily.Sample(labels: labels, value: value)])
        }
        return [
            family("cogd_ha_leader", .gauge, "1 while this node leads its cluster and its lease holds, else 0.", leadingEpoch == nil ? 0 : 1),
            family("cogd_ha_epoch", .gauge, "The highest epoch this node has seen in etcd (the one it leads, while it leads).",
                Double(max(epochLed.load(ordering: .relaxed), epochSeen.load(ordering: .relaxed)))),
            family("cogd_ha_lease_seconds_left", .gauge, "Seconds until this leader's release deadline; 0 when it does not lead.", left),
            family("cogd_ha_lease_renewals_total", .counter, "Lease renewals etcd confirmed.", Double(renewals.load(ordering: .relaxed))),
            family("cogd_ha_lease_renewal_failures_total", .counter, "Lease renewals that failed or found the lease ended.",
                Double(renewalFailures.load(ordering: .relaxed))),
            family("cogd_ha_etcd_failures_total", .counter, "Requests to etcd that got no answer (unreachable, timed out, garbage, an etcd error).",
                Double(requestFailures.load(ordering: .relaxed))),
        ]
    }

    private func publish(_ core: ArbiterCore) {
        epochSeen.store(core.epochSeen, ordering: .relaxed)
        guard case .leading = core.role, !resignRequested.load(ordering: .acquiring) else {
            deadlineNanoseconds.store(0, ordering: .releasing)
            return
        }
        deadlineNanoseconds.store(Self.nanoseconds(core.releaseDeadline), ordering: .releasing)
    }
}

/// Who writes etcd's sync key for a leader that ships to standbys (ha.md §9): its arbiter.
public protocol SyncKeyWriter: AnyObject, Sendable {
    /// Asks for the sync key to name `standbys`; answered through `takeSyncAnswer()`.
    func requestSync(standbys: [String])
    /// The oldest answer not taken yet: true, written; false, failed; nil: none yet.
    func takeSyncAnswer() -> Bool?
}
