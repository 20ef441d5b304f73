/// The `c` a reaction receives: tracked reads of settled state. It has no
/// write API — a reaction that wants to change state calls an op, which runs
/// as a later turn.
@MainActor
public struct ReactionReader {
    @usableFromInline let graph: Graph
    @usableFromInline let node: Node

    @usableFromInline
    init(graph: Graph, node: Node) {
        self.graph = graph
        self.node = node
    }

    /// Reads an automatic cog and depends on it.
    @inlinable
    public subscript<V>(_ cog: Cog<V>) -> V { graph.read(cog.ref, as: V.self, trackedBy: node) }
    /// Reads a manual source and depends on it.
    @inlinable
    public subscript<V>(_ cog: Cog<V>.Manual) -> V { graph.read(cog.ref, as: V.self, trackedBy: node) }
    /// Reads through a projection and depends on its source.
    @inlinable
    public subscript<V>(_ cog: Cog<V>.Projection) -> V { graph.read(cog.ref, as: V.self, trackedBy: node) }
    /// Reads an async cog's value and depends on it.
    public subscript<V: Sendable>(_ cog: Cog<V>.Async) -> V {
        graph.readAsyncValue(cog.ref, as: V.self, trackedBy: node)
    }

    /// Reads the settled value without depending on it.
    @inlinable
    public func peek<V>(_ cog: Cog<V>) -> V { graph.read(cog.ref, as: V.self, trackedBy: nil) }
    /// Reads the current value without depending on it.
    @inlinable
    public func peek<V>(_ cog: Cog<V>.Manual) -> V { graph.read(cog.ref, as: V.self, trackedBy: nil) }
    /// Reads the current value without depending on it.
    @inlinable
    public func peek<V>(_ cog: Cog<V>.Projection) -> V { graph.read(cog.ref, as: V.self, trackedBy: nil) }
    /// Reads the async value without depending on it.
    public func peek<V: Sendable>(_ cog: Cog<V>.Async) -> V { graph.readAsyncValue(cog.ref, as: V.self, trackedBy: nil) }

    /// The status lens: `c.status[asyncCog]` is tracked, `c.status.peek(asyncCog)` is not.
    public var status: Reader<Void>.StatusReader { Reader<Void>.StatusReader(graph: graph, node: node) }
}

/// Whether a watch calls its handler at registration (`.run`, with the
/// current value as both old and new) or only on later changes (`.skip`).
public enum CogWatchStart: Sendable {
    case skip
    case run
}
