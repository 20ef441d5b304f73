import Cog

extension Cogs {
    /// How many states have an Observation boundary: one per state read
    /// with `cogs[x]` or `cogs.status[x]`, none for states only peeked,
    /// watched or read by other cogs.
    ///
    /// ```swift
    /// _ = cogs[forecastCog]
    /// #expect(cogs.observationBoundaryCount == 1)
    /// ```
    public var observationBoundaryCount: Int { observationBoundaryCountForTesting }

    /// Whether `cog` has an Observation boundary (a pinning read made one).
    public func hasObservationBoundary<Value>(for cog: Cog<Value>.Manual) -> Bool {
        hasObservationBoundaryForTesting(for: cog)
    }

    /// Whether `cog` has an Observation boundary (a pinning read made one).
    public func hasObservationBoundary<Value>(for cog: Cog<Value>) -> Bool {
        hasObservationBoundaryForTesting(for: cog)
    }

    /// Whether `cog` has an Observation boundary (a pinning read of its value or status made one).
    public func hasObservationBoundary<Value: Sendable>(for cog: Cog<Value>.Async) -> Bool {
        hasObservationBoundaryForTesting(for: cog)
    }
}
