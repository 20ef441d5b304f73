import Observation

/// The `c` an automatic selector receives: tracked reads (`c[x]`), untracked
/// settled reads (`c.peek(x)`), the async status lens and `curr`.
///
/// Whatever the selector reads through `c[…]` in its latest run is exactly
/// what it depends on; dependencies are re-tracked every run.
///
/// - Important: use it only while the selector runs; a stored reader traps.
@MainActor
public struct Reader<Value> {
    @usableFromInline let graph: Graph
    @usableFromInline let node: Node

    @usableFromInline
    init(graph: Graph, node: Node) {
        self.graph = graph
        self.node = node
    }

    /// Reads an automatic cog (or a box member) and depends on it.
    @inlinable
    public subscript<V>(_ cog: Cog<V>) -> V {
        graph.read(cog.ref, as: V.self, trackedBy: node)
    }

    /// Reads a manual source and depends on it.
    @inlinable
    public subscript<V>(_ cog: Cog<V>.Manual) -> V {
        graph.read(cog.ref, as: V.self, trackedBy: node)
    }

    /// Reads through a read-only projection and depends on its source.
    @inlinable
    public subscript<V>(_ cog: Cog<V>.Projection) -> V {
        graph.read(cog.ref, as: V.self, trackedBy: node)
    }

    /// Reads an async cog's last accepted value (or its default) and depends on it.
    public subscript<V: Sendable>(_ cog: Cog<V>.Async) -> V {
        graph.readAsyncValue(cog.ref, as: V.self, trackedBy: node)
    }

    /// Reads the settled value without depending on it.
    @inlinable
    public func peek<V>(_ cog: Cog<V>) -> V { graph.read(cog.ref, as: V.self, trackedBy: nil) }
    /// Reads the settled value without depending on it.
    @inlinable
    public func peek<V>(_ cog: Cog<V>.Manual) -> V { graph.read(cog.ref, as: V.self, trackedBy: nil) }
    /// Reads the settled value without depending on it.
    @inlinable
    public func peek<V>(_ cog: Cog<V>.Projection) -> V { graph.read(cog.ref, as: V.self, trackedBy: nil) }
    /// Reads the async value without depending on it.
    public func peek<V: Sendable>(_ cog: Cog<V>.Async) -> V { graph.readAsyncValue(cog.ref, as: V.self, trackedBy: nil) }

    /// This state's own previous value (`nil` on its first run); never an edge.
    public var curr: Value? {
        if let typed = node as? TypedNode<Value> { return typed.storage }
        return graph.currentStatus(of: node) as? Value
    }

    /// Links one property of an outside `@Observable` model into this
    /// selector: the selector depends on it like a source, and a change of
    /// that property (no other) runs it again with the newest value.
    ///
    /// ```swift
    /// let targetLabelCog = Cog<String> { c in "\(c.track(thermostat, \.target)) °C" }
    /// ```
    ///
    /// Every selector tracking the same property of the same object shares
    /// one bridge, which keeps the object alive for the runtime's lifetime.
    /// A change reaches the graph as a local system turn named
    /// `c.track(Type)` (Linux prints no property name for an `@Observable`
    /// key path), on the main actor, after the setter: through
    /// `Observations`, mutations made before the main actor next suspends
    /// coalesce into one turn with the newest value.
    ///
    /// - Important: the model lives on the main actor with the runtime.
    ///   Under `Cogs.forTesting(externalObservationTracking: .legacy)` a
    ///   one-shot `withObservationTracking` is re-armed after each change; a
    ///   mutation made between the change and the re-arm can be missed.
    public func track<Root: Observable & AnyObject, Tracked>(
        _ root: Root, _ keyPath: KeyPath<Root, Tracked>
    ) -> Tracked {
        graph.trackedProperty(root, keyPath, trackedBy: node)
    }

    /// Links a synchronous read of an outside `@Observable` model into this
    /// selector: every property `read` touches is tracked, as with the
    /// key-path form.
    ///
    /// ```swift
    /// let displayNameCog = Cog<String> { c in
    ///   c.track(profile) { "\($0.given) \($0.family)" }
    /// }
    /// ```
    ///
    /// Each selector state and call site owns one bridge; each run of the
    /// selector replaces its closure, so a closure whose captured inputs
    /// changed tracks only what it reads now. Its turns are named after the
    /// call site (`c.track closure at Module/File.swift:12:7`).
    public func track<Root: Observable & AnyObject, Tracked>(
        _ root: Root, fileID: StaticString = #fileID, line: UInt = #line, column: UInt = #column,
        read: @escaping @MainActor (Root) -> Tracked
    ) -> Tracked {
        graph.trackedRead(site: "\(fileID):\(line):\(column)", trackedBy: node) { read(root) }
    }

    /// The status lens: `c.status[asyncCog]` is tracked, `c.status.peek(asyncCog)` is not.
    public var status: StatusReader { StatusReader(graph: graph, node: node) }

    /// The tracked status lens of a selector.
    @MainActor
    public struct StatusReader {
        let graph: Graph
        let node: Node

        /// The async cog's full status, tracked.
        public subscript<V: Sendable>(_ cog: Cog<V>.Async) -> CogStatus<V> {
            graph.readAsyncStatus(cog.ref, as: V.self, trackedBy: node)
        }

        /// The async cog's full status, untracked.
        public func peek<V: Sendable>(_ cog: Cog<V>.Async) -> CogStatus<V> {
            graph.readAsyncStatus(cog.ref, as: V.self, trackedBy: nil)
        }
    }

    /// The cycle a read of `cog` would close right now, without trapping; a
    /// test seam for cycle messages.
    public func cycleDiagnostic<V>(ifReading cog: Cog<V>) -> CogCycleDiagnostic? {
        guard let target = graph.existingNode(for: cog.ref),
            let path = graph.cyclePath(closingAt: target)
        else { return nil }
        return CogCycleDiagnostic(path: path)
    }
}

/// A cycle found in the graph: the closed path of labels, first and last equal.
public struct CogCycleDiagnostic: Sendable, Equatable {
    public let path: [String]
    /// The text a cycle's trap starts with: `Cog dependency cycle: a → b → a.`
    /// (labels escaped for a terminal).
    public var message: String { TrapMessage.cyclePath(path) }
}

/// The `c` a turn body receives: reads see this turn's staged writes, writes
/// stage values that publish together when the body returns.
///
/// ```swift
/// turn { c in
///   c[_countCog] += 1
///   c[_todoTitleCogs[id]] = title
/// }
/// ```
///
/// - Important: it is valid only inside its turn body; using a stored or
///   captured writer later traps.
@MainActor
public struct Writer {
    @usableFromInline let graph: Graph
    @usableFromInline let serial: UInt64

    @usableFromInline
    init(graph: Graph, serial: UInt64) {
        self.graph = graph
        self.serial = serial
    }

    /// Marks this writer's turn refused (an op body threw `refusal`).
    func refuseTurn(_ refusal: Refusal) { graph.refuseTurn(refusal, serial: serial) }

    /// The staged value of `cog` in this turn, or its committed value.
    @inlinable
    public subscript<V>(_ cog: Cog<V>.Manual) -> V {
        get { graph.staged(cog.ref, as: V.self, serial: serial) }
        nonmutating set { graph.stage(newValue, into: cog.ref, serial: serial) }
    }
}
