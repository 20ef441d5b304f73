import Observation

/// The Swift Observation side of one state read by `cogs[x]` or
/// `cogs.status[x]`: a registrar and one field per thing a reader can look
/// at. A read inside `withObservationTracking` registers the field it read;
/// the graph sends a notice for a field only when a settled turn changed it.
///
/// The fields carry no data; their key paths connect a registrar access to a
/// later mutation. A manual or automatic state uses `value`; an async state
/// uses `value` and one field per public field of `CogStatus`.
final class ObservationBoundary: Observable, Sendable {
    enum Field: Sendable {
        case value, kind, hasSucceeded, error, isLoading
    }

    private let registrar = ObservationRegistrar()

    var value: Bool { false }
    var kind: Bool { false }
    var hasSucceeded: Bool { false }
    var error: Bool { false }
    var isLoading: Bool { false }

    /// Registers a read of `field` with the tracking in progress, if any.
    func access(_ field: Field) {
        switch field {
        case .value: registrar.access(self, keyPath: \.value)
        case .kind: registrar.access(self, keyPath: \.kind)
        case .hasSucceeded: registrar.access(self, keyPath: \.hasSucceeded)
        case .error: registrar.access(self, keyPath: \.error)
        case .isLoading: registrar.access(self, keyPath: \.isLoading)
        }
    }

    /// Tells whoever tracked `field` that it changed.
    func notice(_ field: Field) {
        switch field {
        case .value: registrar.withMutation(of: self, keyPath: \.value) {}
        case .kind: registrar.withMutation(of: self, keyPath: \.kind) {}
        case .hasSucceeded: registrar.withMutation(of: self, keyPath: \.hasSucceeded) {}
        case .error: registrar.withMutation(of: self, keyPath: \.error) {}
        case .isLoading: registrar.withMutation(of: self, keyPath: \.isLoading) {}
        }
    }
}

/// A state's boundary and the consumer that keeps it current: the consumer
/// reads the state like a watch (so the state is a hot root, settled in the
/// flush of every turn that may change it) and sends the notices, before
/// exports offer and reactions run (the flush's fourth step).
@MainActor
final class BoundaryLink {
    let observation: ObservationBoundary
    let consumer: ReactionNode

    init(observation: ObservationBoundary, consumer: ReactionNode) {
        self.observation = observation
        self.consumer = consumer
    }
}

extension Graph {
    /// The flush position of boundary notices: before exports (0) and reactions (1).
    static let boundaryOrder = -1

    /// A pinning read of a manual or automatic state: registers its `value`
    /// with the tracking in progress, making the boundary on the first read.
    func observedRead(of node: Node, _ ref: StateRef) {
        if let boundary = node.boundary {
            boundary.observation.access(.value)
            return
        }
        let observation = ObservationBoundary()
        var baseline = true
        let consumer = ReactionNode(
            label: node.label, order: Graph.boundaryOrder, recordsEffect: false, countsRun: false
        ) { [unowned self] c in
            // Runs only when the state really changed (an equal value stops the flags).
            _ = self.resolve(ref, trackedBy: c.node)
            if baseline {
                baseline = false
                return
            }
            self.history.record(.notice, turn: self.history.turnNumber, name: ref.label)
            observation.notice(.value)
        }
        attach(BoundaryLink(observation: observation, consumer: consumer), to: node)
        observation.access(.value)
    }

    /// A pinning read of an async state (`cogs[x]` or `cogs.status[x]`): its
    /// boundary, made on the first read. Its consumer watches the status,
    /// which changes on every status turn, and sends a notice for each field
    /// that turn changed: `value` only when a success changed the value (by
    /// the declaration's equality rule, if it has one).
    func asyncBoundary<Value: Sendable>(_ ref: StateRef, as: Value.Type) -> ObservationBoundary {
        let node = asyncNode(ref, as: Value.self)
        if let boundary = node.boundary { return boundary.observation }
        let observation = ObservationBoundary()
        let equals = node.elementEquals
        var last: CogStatus<Value>?
        let consumer = ReactionNode(
            label: node.label, order: Graph.boundaryOrder, recordsEffect: false, countsRun: false
        ) { [unowned self] c in
            let new = self.readAsyncStatus(ref, as: Value.self, trackedBy: c.node)
            defer { last = new }
            guard let old = last else { return }
            var changed: [ObservationBoundary.Field] = []
            if old.kind != new.kind { changed.append(.kind) }
            if old.isLoading != new.isLoading { changed.append(.isLoading) }
            if old.hasSucceeded != new.hasSucceeded { changed.append(.hasSucceeded) }
            if old.error != nil || new.error != nil { changed.append(.error) }
            if new.kind == .success, equals.map({ !$0(old.value, new.value) }) ?? true { changed.append(.value) }
            guard !changed.isEmpty else { return }
            self.history.record(.notice, turn: self.history.turnNumber, name: ref.label)
            for field in changed { observation.notice(field) }
        }
        attach(BoundaryLink(observation: observation, consumer: consumer), to: node)
        return observation
    }

    private func attach(_ link: BoundaryLink, to node: Node) {
        node.boundary = link
        observationBoundaryCount += 1
        register(link.consumer)
    }

    /// Lets a state with a boundary be released (`discard`): the boundary's
    /// consumer goes when it is the state's only consumer left, and whoever
    /// tracked the state hears of the release (the next read makes it anew).
    func detachBoundaryIfLastConsumer(of node: Node) {
        guard let link = node.boundary, node.observers.count == 1, node.observers[0].node === link.consumer
        else { return }
        unregister(link.consumer)
        node.boundary = nil
        observationBoundaryCount -= 1
        let label = node.label
        let notify = { [unowned self] in
            self.history.record(.notice, turn: self.history.turnNumber, name: label)
            link.observation.notice(.value)
        }
        if phase == .body {
            whenTurnEnds { _ in notify() }
        } else {
            notify()
        }
    }
}
