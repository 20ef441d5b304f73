/// How an export buffers values its reader has not taken yet. Turns never
/// wait for readers.
public enum CogValuesBuffering: Sendable, Equatable {
    /// Keep the newest `n` (the default keeps one: a slow reader sees the latest value).
    case newest(Int)
    /// Keep the first `n` and drop later ones.
    case oldest(Int)
    /// Keep everything.
    case unbounded
}

/// The settled values of one cog as an `AsyncSequence`: the current value
/// first, then each changed value after the turn that changed it (before
/// that turn's reactions run). Ends when the runtime is torn down.
public struct CogValues<Value: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Value
    public typealias Failure = Never

    let stream: AsyncStream<Value>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<Value>.AsyncIterator

        public mutating func next() async -> Value? {
            await base.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Value? {
            await base.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }
}

extension Cogs {
    /// Exports an automatic cog's settled values. Cancelling the iteration
    /// ends its lease; each subscriber has its own buffer.
    ///
    /// ```swift
    /// for await count in cogs.values(of: activeTodoCountCog) { badge.show(count) }
    /// ```
    public func values<V: Sendable>(of cog: Cog<V>, buffering: CogValuesBuffering = .newest(1)) -> CogValues<V> {
        export(cog.ref, buffering: buffering) { $0.graph.read(cog.ref, as: V.self, trackedBy: $0.node) }
    }

    /// Exports a manual source's values.
    public func values<V: Sendable>(of cog: Cog<V>.Manual, buffering: CogValuesBuffering = .newest(1)) -> CogValues<V> {
        export(cog.ref, buffering: buffering) { $0.graph.read(cog.ref, as: V.self, trackedBy: $0.node) }
    }

    /// Exports a source's values through its projection.
    public func values<V: Sendable>(of cog: Cog<V>.Projection, buffering: CogValuesBuffering = .newest(1)) -> CogValues<V> {
        export(cog.ref, buffering: buffering) { $0.graph.read(cog.ref, as: V.self, trackedBy: $0.node) }
    }

    /// Exports an async cog's accepted values.
    public func values<V: Sendable>(of cog: Cog<V>.Async, buffering: CogValuesBuffering = .newest(1)) -> CogValues<V> {
        export(cog.ref, buffering: buffering) { $0.graph.readAsyncValue(cog.ref, as: V.self, trackedBy: $0.node) }
    }

    private func export<V: Sendable>(
        _ ref: StateRef, buffering: CogValuesBuffering, read: @escaping @MainActor (ReactionReader) -> V
    ) -> CogValues<V> {
        let policy: AsyncStream<V>.Continuation.BufferingPolicy
        switch buffering {
        case .newest(let count):
            precondition(count > 0, "values(of: \(ref.label)) needs a buffer of at least 1, not \(count)")
            policy = .bufferingNewest(count)
        case .oldest(let count):
            precondition(count > 0, "values(of: \(ref.label)) needs a buffer of at least 1, not \(count)")
            policy = .bufferingOldest(count)
        case .unbounded:
            policy = .unbounded
        }
        let (stream, continuation) = AsyncStream.makeStream(of: V.self, bufferingPolicy: policy)
        let node = ReactionNode(label: "values(of: \(ref.label))", order: 0, recordsEffect: false) { [graph] c in
            continuation.yield(read(c))
            graph.history.record(.offer, turn: graph.history.turnNumber, name: ref.label)
        }
        let export = Export(node: node, finish: { continuation.finish() })
        exports.append(export)
        continuation.onTermination = { [weak self] _ in
            Task { @MainActor in self?.endExport(export) }
        }
        graph.register(node)
        return CogValues(stream: stream)
    }

    func endExport(_ export: Export) {
        graph.unregister(export.node)
        exports.removeAll { $0 === export }
    }

    /// One live `values(of:)` subscription.
    @MainActor
    final class Export {
        let node: ReactionNode
        let finish: @Sendable () -> Void

        init(node: ReactionNode, finish: @escaping @Sendable () -> Void) {
            self.node = node
            self.finish = finish
        }
    }
}
