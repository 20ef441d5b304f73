/// Grace expiry (`docs/api-guide.md`): an automatic cog, an async state or a
/// `.whileObserved` manual source that no consumer observes is released once
/// its grace period passes, unless a consumer (or a one-shot read) comes
/// back first. `.app` sources and pinned states (`cogs[x]`) never expire.
///
/// One timer per runtime sleeps until the earliest deadline, so at most one
/// sleeper is ever active, and a state never has more than that one
/// (ASYNC-22, ASYNC-29, LIFE-10). A consumer (or a pin) that returns before
/// expiry takes its state off the list; when no state waits any more, the
/// sleeper is cancelled at once, before it even starts if it has not
/// (LIFE-04, LIFE-07, LIFE-08). A renewal of the one waiting state replaces
/// its sleeper with one for the new deadline, as Cog's state replaces its
/// own: no obsolete sleeper is left behind (ASYNC-22, ASYNC-23, LIFE-10).
/// The timer's task reads its deadline when it starts, so renewals made
/// before it runs (a peek loop on the main actor) move that deadline and
/// make no task of their own.
///
/// - Important: grace releases only the in-memory node. A durable source's
///   stored value stays in the store (the next read loads it); on a replica
///   the replicated value is parked and the next read gets it back.
@MainActor
final class Lifetimes {
    /// The grace of automatic and async cogs and of `.whileObserved` sources
    /// declared without their own.
    let whileObservedGrace: Duration
    /// Whether a released durable source keeps its value here (a replica,
    /// whose replicated values exist nowhere else in the process).
    let parksDurableSources: Bool
    /// Time on the grace clock, as an offset from the runtime's start.
    fileprivate let now: @Sendable () -> Duration
    fileprivate let sleep: @Sendable (Duration) async throws -> Void

    /// States with a deadline, in the order their grace started (a state
    /// may appear twice; its `graceDeadline` is the one that counts).
    fileprivate var waiting: [Node] = []
    /// How many states have a deadline (`graceDeadline != nil`).
    fileprivate var deadlineCount = 0
    fileprivate var timer: Task<Void, Never>?
    /// The deadline the timer sleeps (or, not started yet, will sleep) until.
    fileprivate var timerDeadline: Duration?
    /// Whether the timer's task has read `timerDeadline` and gone to sleep:
    /// a later deadline then needs a new task; before, it only moves.
    fileprivate var timerSleeping = false
    fileprivate var timerSerial: UInt64 = 0
    /// Set while an expiry pass releases states: sources they leave with no
    /// consumer are due at once (an internal edge keeps nothing alive).
    fileprivate var expiring = false
    fileprivate var parked: [StateRef: Any] = [:]

    var releaseAcknowledgements: [MainActorCleanupAcknowledgement] = []
    var checkAcknowledgements: [MainActorCleanupAcknowledgement] = []

    /// The production default: 30 s on the continuous clock.
    static let defaultGrace = Duration.seconds(30)

    convenience init() {
        self.init(clock: ContinuousClock(), whileObservedGrace: Lifetimes.defaultGrace)
    }

    init<C: Clock>(clock: C, whileObservedGrace: Duration, parksDurableSources: Bool = false)
    where C.Duration == Duration {
        precondition(whileObservedGrace >= .zero, "whileObservedGrace must not be negative (\(whileObservedGrace))")
        self.whileObservedGrace = whileObservedGrace
        self.parksDurableSources = parksDurableSources
        let start = clock.now
        now = { start.duration(to: clock.now) }
        sleep = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
    }

    /// How long a state of `descriptor` outlives its last consumer (nil: never released).
    func grace(of descriptor: Descriptor) -> Duration? {
        (descriptor as? any LifetimeDeclaring)?.grace(whileObserved: whileObservedGrace)
    }

    /// Set when the runtime goes away: no timer starts again.
    fileprivate var stopped = false

    /// Stops the timer for good (the runtime is going away; its teardown
    /// drops every lease, which must not start new grace).
    func stop() {
        stopped = true
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }

    /// The leader logged a release of `ref`: a parked value goes too.
    func forgetParked(_ ref: StateRef) {
        guard !parked.isEmpty else { return }
        parked[ref] = nil
    }

    /// How many states wait for their grace to pass (diagnostics, the bench).
    var waitingCount: Int { waiting.reduce(0) { $0 + ($1.graceDeadline != nil && !$1.released ? 1 : 0) } }
}

/// A declaration whose states may be released when unobserved.
protocol LifetimeDeclaring: AnyObject {
    func grace(whileObserved: Duration) -> Duration?
}

extension ComputedDescriptor: LifetimeDeclaring {
    func grace(whileObserved: Duration) -> Duration? { whileObserved }
}

extension AsyncDescriptor: LifetimeDeclaring {
    func grace(whileObserved: Duration) -> Duration? { whileObserved }
}

extension ManualDescriptor: LifetimeDeclaring {
    func grace(whileObserved: Duration) -> Duration? {
        guard case .whileObserved(_, let grace) = lifetime else { return nil }
        return grace ?? whileObserved
    }
}

/// A durable source whose released value a replica parks and restores.
@MainActor
protocol ParkingDescriptor: AnyObject {
    var parksWhenReleased: Bool { get }
    func makeNode(key: StateKey, restoring value: Any) -> Node
}

extension ManualDescriptor: ParkingDescriptor {
    var parksWhenReleased: Bool { durable != nil }

    func makeNode(key: StateKey, restoring value: Any) -> Node {
        let node = ManualNode<Value>(descriptor: self, key: key)
        node.storage = (value as! Value)
        return node
    }
}

@MainActor
protocol ParkableNode: AnyObject {
    var committedValue: Any? { get }
}

extension ManualNode: ParkableNode {
    var committedValue: Any? { storage.map { $0 as Any } }
}

/// A state with work in flight that release must stop.
@MainActor
protocol WorkReleasing: AnyObject {
    /// Cancels the work (its late result is dropped: the node is released)
    /// and resolves pending refresh handles as `.released`.
    func releaseWork()
}

extension AsyncNode: WorkReleasing {
    func releaseWork() {
        cancelAllWork()  // the one-shot run or stream, and every ordered run and waiting input
        let pending = refreshes
        refreshes = []
        for entry in pending { entry.handle.resolve(.released) }
    }
}

extension Graph {
    /// The node for `ref`: a replica's parked value if it has one, else new.
    func makeNode(for ref: StateRef) -> Node {
        if !lifetimes.parked.isEmpty, let value = lifetimes.parked.removeValue(forKey: ref),
            let parking = ref.descriptor as? any ParkingDescriptor
        {
            return parking.makeNode(key: ref.key, restoring: value)
        }
        return ref.descriptor.makeNode(key: ref.key, graph: self)
    }

    /// A one-shot read (`peek`, `status.peek`, `refresh`) of a state no
    /// consumer observes: transient demand starts or renews its grace.
    func demandedOnce(_ node: Node) {
        startGrace(node)
    }

    /// `node` lost its last consumer.
    func lastConsumerLeft(_ node: Node) {
        guard !node.released else { return }
        startGrace(node)
    }

    /// A consumer came back to `node`, or a pinning read pinned it, before
    /// its grace passed: it no longer waits, and a sleeper no state needs
    /// is cancelled.
    func graceInterrupted(_ node: Node) {
        guard node.graceDeadline != nil else { return }
        node.graceDeadline = nil
        let lifetimes = self.lifetimes
        lifetimes.deadlineCount -= 1
        guard lifetimes.deadlineCount == 0, !lifetimes.expiring else { return }
        lifetimes.waiting.removeAll(keepingCapacity: true)
        lifetimes.timer?.cancel()
        lifetimes.timer = nil
        lifetimes.timerDeadline = nil
    }

    private func startGrace(_ node: Node) {
        guard let grace = node.grace, !lifetimes.stopped else { return }
        let lifetimes = self.lifetimes
        if lifetimes.expiring {
            // Orphaned by a release in this pass: due now, released with it.
            if node.graceDeadline == nil { lifetimes.deadlineCount += 1 }
            node.graceDeadline = lifetimes.now()
            lifetimes.waiting.append(node)
            return
        }
        let deadline = lifetimes.now() + grace
        guard node.graceDeadline != nil else {
            lifetimes.waiting.append(node)
            lifetimes.deadlineCount += 1
            node.graceDeadline = deadline
            armGraceTimer(for: deadline)
            return
        }
        // A renewal. With no other state waiting, the sleeper is this
        // state's own: it is replaced by one for the new deadline.
        node.graceDeadline = deadline
        armGraceTimer(for: deadline, replacing: lifetimes.deadlineCount == 1)
    }

    /// Makes the one timer wake no later than `deadline` (`replacing`: at
    /// `deadline` with a sleeper of its own, even if one sleeps already).
    private func armGraceTimer(for deadline: Duration, replacing: Bool = false) {
        let lifetimes = self.lifetimes
        if lifetimes.timer != nil, !lifetimes.timerSleeping {
            // Not asleep yet: it will sleep until whatever the deadline is then.
            if replacing || lifetimes.timerDeadline.map({ deadline < $0 }) ?? true {
                lifetimes.timerDeadline = deadline
            }
            return
        }
        if !replacing, lifetimes.timer != nil, let armed = lifetimes.timerDeadline, armed <= deadline { return }
        lifetimes.timer?.cancel()
        lifetimes.timerSerial &+= 1
        let serial = lifetimes.timerSerial
        let sleep = lifetimes.sleep
        lifetimes.timerDeadline = deadline
        lifetimes.timerSleeping = false
        lifetimes.timer = Task { @MainActor [weak self] in
            guard let deadline = self?.timerStartsSleeping(serial) else { return }
            do {
                try await sleep(deadline)
            } catch {
                return
            }
            guard !Task.isCancelled else { return }
            self?.expireGrace(timer: serial)
        }
    }

    /// The timer `serial` starts: the deadline it sleeps until, nil if it
    /// was replaced or stopped before it ran.
    private func timerStartsSleeping(_ serial: UInt64) -> Duration? {
        let lifetimes = self.lifetimes
        guard serial == lifetimes.timerSerial, !Task.isCancelled, let deadline = lifetimes.timerDeadline else {
            return nil
        }
        lifetimes.timerSleeping = true
        return deadline
    }

    /// The timer fired: releases every state whose deadline has passed and
    /// that is still unobserved, then sleeps until the next deadline.
    private func expireGrace(timer serial: UInt64) {
        let lifetimes = self.lifetimes
        guard serial == lifetimes.timerSerial else { return }
        lifetimes.timer = nil
        lifetimes.timerDeadline = nil
        let now = lifetimes.now()
        guard phase == .idle, !isBusyWithGraphWork else {
            armGraceTimer(for: now)
            return
        }
        lifetimes.expiring = true
        var kept: [Node] = []
        var index = 0
        while index < lifetimes.waiting.count {
            let node = lifetimes.waiting[index]
            index += 1
            guard let deadline = node.graceDeadline else { continue }
            if node.released || !node.observers.isEmpty || node.pinned {
                node.graceDeadline = nil
                lifetimes.deadlineCount -= 1
            } else if deadline > now {
                kept.append(node)
            } else {
                node.graceDeadline = nil
                lifetimes.deadlineCount -= 1
                releaseAfterGrace(node)
            }
        }
        lifetimes.waiting = kept.filter { $0.graceDeadline != nil }
        lifetimes.expiring = false
        if !lifetimes.checkAcknowledgements.isEmpty {
            lifetimes.checkAcknowledgements.removeFirst().acknowledge()
        }
        if let next = lifetimes.waiting.lazy.compactMap(\.graceDeadline).min() {
            armGraceTimer(for: next)
        }
    }

    /// Releases the in-memory node of one unobserved state. Its work stops,
    /// what it read may lose its last consumer (and go with it), and a
    /// later read makes it afresh — with no stale `curr`. Never logs a
    /// release: a durable source's stored value stays.
    private func releaseAfterGrace(_ node: Node) {
        guard !node.released, node.observers.isEmpty, !node.pinned, !node.busy,
            let descriptor = node.descriptor
        else { return }
        if let working = node as? any WorkReleasing { working.releaseWork() }
        if lifetimes.parksDurableSources, let parking = descriptor as? any ParkingDescriptor, parking.parksWhenReleased,
            let value = (node as? any ParkableNode)?.committedValue
        {
            lifetimes.parked[StateRef(descriptor: descriptor, key: node.key)] = value
        }
        trimSources(of: node, to: 0)
        cancelClosureBridges(of: node)
        removeFromTable(node)
        node.released = true
        node.resetValue()
        if !lifetimes.releaseAcknowledgements.isEmpty {
            lifetimes.releaseAcknowledgements.removeFirst().acknowledge()
        }
    }
}

extension Graph {
    /// A `cogs[x]` read of an async cog: the state stays until `discard` or the runtime ends.
    func pin(_ ref: StateRef) {
        let node = node(for: ref)
        node.pinned = true
        if node.graceDeadline != nil { graceInterrupted(node) }
    }
}

extension Graph {
    /// A generation finished after its state was released and freed: its
    /// result is dropped, and a test waiting for the check hears of it.
    func droppedResultOfReleasedState() {
        if !asyncCompletionCheckAcknowledgements.isEmpty {
            asyncCompletionCheckAcknowledgements.removeFirst().acknowledge()
        }
    }
}
