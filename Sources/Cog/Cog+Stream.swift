/// What a generation of async work does: return once, or deliver elements.
enum WorkBody<Value: Sendable>: Sendable {
    /// One-shot: the returned value (or thrown error) is the generation's
    /// result. It runs where it is isolated (the selector's actor, unless
    /// `@concurrent`).
    case run(@Sendable @isolated(any) () async throws -> Value)
    /// Elements, iterated on the graph's actor: `publish` takes each element
    /// and says whether to go on (false once the generation is replaced).
    case stream(@MainActor @Sendable (_ publish: (Value) -> Bool) async throws -> Void)
}

/// Holds a sequence that is not `Sendable` on its way from the selector (on
/// the graph's actor) to the generation's task (on the graph's actor too):
/// it is only ever iterated there, one iterator per generation.
private struct GraphActorSequence<Sequence: AsyncSequence>: @unchecked Sendable {
    let sequence: Sequence
}

extension Work {
    /// Work whose every element is a result (D25): each changed element is
    /// its own turn; the status is pending before the first; a dependency
    /// change or `refresh` cancels the stream and drops its late elements; a
    /// natural end publishes nothing (the last element stays, or the default
    /// stays pending); a throw is one failure and no restart; cancellation
    /// Cog caused is silent. For an `Equatable` value an element equal to the
    /// one before it publishes nothing.
    ///
    /// Each generation makes a new iterator of `sequence`, on the graph's
    /// actor. Only `.latest` async cogs take `Work` (ordered policies take
    /// `RunWork`, which has no `stream`), so streams are latest-wins by type.
    ///
    /// ```swift
    /// let priceCog = Cog<Int>.Async(default: 0) { c in
    ///   let feed = c[priceFeedCog]
    ///   return .stream(feed.prices())
    /// }
    /// ```
    public static func stream<S: AsyncSequence>(_ sequence: S) -> Work where S.Element == Value {
        let source = GraphActorSequence(sequence: sequence)
        return Work(body: .stream { publish in
            var iterator = source.sequence.makeAsyncIterator()
            while let element = try await iterator.next(isolation: MainActor.shared) {
                guard publish(element) else { return }
            }
        })
    }
}
