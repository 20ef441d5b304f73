import Observation

/// How a runtime follows the outside `@Observable` properties selectors
/// link in with `c.track` (`CogTesting` can pick the path).
package enum ExternalObservationTrackingMode: Sendable {
    /// `Observations`: continuous tracking; mutations made between two
    /// suspension points of the main actor coalesce into one publication.
    case automatic
    /// One-shot `withObservationTracking`, re-armed on the main actor after
    /// each change, then read and published.
    case legacy
}

/// One outside Observation read feeding one hidden source that selectors
/// depend on like any source. It stays on the main actor with the model,
/// so `Tracked` need not be `Sendable`. Its publications are local system
/// turns named as Cog names them: `c.track(\Type.property)` (`c.track(Type)`
/// where the key path prints no name) or `c.track closure at
/// File.swift:line:column`.
@MainActor
final class ExternalBridge<Tracked> {
    let cell: ManualNode<Tracked>
    private(set) var read: @MainActor () -> Tracked
    private unowned let graph: Graph
    private let mode: ExternalObservationTrackingMode
    private var task: Task<Void, Never>?
    private var cancelled = false
    /// The legacy registration now armed; an older one (replaced by a
    /// selector rerun) that fires is ignored.
    private var armed = 0

    init(
        label: String, graph: Graph, mode: ExternalObservationTrackingMode,
        read: @escaping @MainActor () -> Tracked
    ) {
        self.graph = graph
        self.mode = mode
        self.read = read
        self.cell = ManualNode(cellLabel: label, value: read(), equals: nil)
    }

    /// Arms the observation and returns the value read while arming.
    @discardableResult
    func start() -> Tracked {
        switch mode {
        case .legacy:
            let value = arm()
            cell.storage = value
            return value
        case .automatic:
            let value = read()
            cell.storage = value
            task?.cancel()
            // The first element is the value just read; each later one is a
            // coalesced change, read again on the main actor and published.
            // (An explicit `@MainActor` on this closure crashes Swift 6.3's
            // IR generation; it is inferred from the bridge.)
            let changes = Observations { [weak self] () -> Bool in
                _ = self?.read()
                return true
            }
            task = Task.immediate { @MainActor [weak self] in
                var first = true
                for await _ in changes {
                    if first {
                        first = false
                        continue
                    }
                    guard let self, !self.cancelled else { return }
                    self.publish(self.read())
                }
            }
            return value
        }
    }

    /// A selector rerun with a new closure (the closure form): the bridge
    /// follows what the new closure reads from now on.
    func replaceRead(_ read: @escaping @MainActor () -> Tracked) -> Tracked {
        self.read = read
        return start()
    }

    func cancel() {
        cancelled = true
        task?.cancel()
        task = nil
    }

    /// Reads under a one-shot tracking whose change (reported from `willSet`)
    /// re-arms on the main actor once the setter has finished. A mutation
    /// made between the report and the re-arm can be missed.
    private func arm() -> Tracked {
        armed += 1
        let registration = armed
        return withObservationTracking { read() } onChange: { [weak self] in
            let bridge = self
            Task { @MainActor in bridge?.consumeChange(of: registration) }
        }
    }

    private func consumeChange(of registration: Int) {
        guard !cancelled, registration == armed else { return }
        let value = arm()
        graph.externalObservationRearmed()
        publish(value)
    }

    private func publish(_ value: Tracked) {
        graph.systemTurn(named: cell.label) { [weak self, unowned graph] _ in
            guard let self else { return }
            graph.stage(value, into: self.cell)
        }
    }
}

/// What identifies one bridge in a runtime: one property of one object
/// (shared by every selector that tracks it), or one closure call site of
/// one selector's state.
struct ExternalBridgeKey: Hashable {
    let object: ObjectIdentifier
    let keyPath: AnyKeyPath?
    let site: String?
}

extension Graph {
    /// The key-path form: one bridge per object and property.
    func trackedProperty<Root: Observable & AnyObject, Tracked>(
        _ root: Root, _ keyPath: KeyPath<Root, Tracked>, trackedBy observer: Node
    ) -> Tracked {
        let key = ExternalBridgeKey(object: ObjectIdentifier(root), keyPath: keyPath, site: nil)
        let bridge: ExternalBridge<Tracked>
        if let existing = externalBridges[key] {
            bridge = unsafeDowncast(existing.bridge, to: ExternalBridge<Tracked>.self)
        } else {
            bridge = ExternalBridge(
                label: "c.track(\(keyPathLabel(keyPath, of: Root.self)))", graph: self,
                mode: externalObservationTracking
            ) { root[keyPath: keyPath] }
            externalBridges[key] = ExternalBridgeEntry(bridge: bridge, cancel: bridge.cancel)
            bridge.start()
        }
        track(bridge.cell, into: observer)
        return bridge.cell.value
    }

    /// The closure form: one bridge per selector state and call site; each
    /// run replaces the closure and re-arms it.
    func trackedRead<Tracked>(
        site: String, trackedBy observer: Node, read: @escaping @MainActor () -> Tracked
    ) -> Tracked {
        let key = ExternalBridgeKey(object: ObjectIdentifier(observer), keyPath: nil, site: site)
        let value: Tracked
        let bridge: ExternalBridge<Tracked>
        if let existing = externalBridges[key] {
            bridge = unsafeDowncast(existing.bridge, to: ExternalBridge<Tracked>.self)
            value = bridge.replaceRead(read)
        } else {
            bridge = ExternalBridge(
                label: "c.track closure at \(site)", graph: self, mode: externalObservationTracking, read: read)
            externalBridges[key] = ExternalBridgeEntry(bridge: bridge, cancel: bridge.cancel)
            value = bridge.start()
        }
        track(bridge.cell, into: observer)
        return value
    }

    /// Stops the closure bridges of a selector state being released: its
    /// next incarnation makes its own.
    func cancelClosureBridges(of node: Node) {
        guard !externalBridges.isEmpty else { return }
        let object = ObjectIdentifier(node)
        for (key, entry) in externalBridges where key.object == object && key.keyPath == nil {
            entry.cancel()
            externalBridges[key] = nil
        }
    }

    /// Stops every bridge (the runtime's teardown).
    func cancelExternalBridges() {
        for entry in externalBridges.values { entry.cancel() }
        externalBridges = [:]
    }

    /// Wakes a test waiting for the next legacy re-arm.
    func externalObservationRearmed() {
        if !externalObservationRearmAcknowledgements.isEmpty {
            externalObservationRearmAcknowledgements.removeFirst().acknowledge()
        }
    }

    /// `\Type.property` where the runtime can print it; on Linux an
    /// `@Observable` property's key path prints no name, so the type alone.
    private func keyPathLabel<Root>(_ keyPath: AnyKeyPath, of: Root.Type) -> String {
        let text = "\(keyPath)"
        return text.contains("<") ? "\(Root.self)" : text
    }
}

/// A bridge without its value type, as the runtime keeps it.
@MainActor
struct ExternalBridgeEntry {
    let bridge: AnyObject
    let cancel: @MainActor () -> Void
}
