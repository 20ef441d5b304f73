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
