extension Cogs {
    /// Seam for `CogTesting.seed`: a quiet write with no turn.
    package func seedQuietly<V>(_ cog: Cog<V>.Manual, to value: V) {
        graph.seed(cog.ref, to: value)
    }

    /// Seam for `CogTesting`: acknowledge at the next async completion check.
    package func registerAsyncCompletionCheck(_ acknowledgement: MainActorCleanupAcknowledgement) {
        graph.asyncCompletionCheckAcknowledgements.append(acknowledgement)
    }

    /// Seam for `CogTesting`: acknowledge at the next release by grace.
    package func registerGraceRelease(_ acknowledgement: MainActorCleanupAcknowledgement) {
        graph.lifetimes.releaseAcknowledgements.append(acknowledgement)
    }

    /// Seam for `CogTesting`: acknowledge when the grace timer next checks its states.
    package func registerGraceReleaseCheck(_ acknowledgement: MainActorCleanupAcknowledgement) {
        graph.lifetimes.checkAcknowledgements.append(acknowledgement)
    }

    /// Seam for `CogTesting`: acknowledge at the end of this runtime's teardown.
    package func registerDeinitCleanup(_ acknowledgement: MainActorCleanupAcknowledgement) {
        deinitCleanupAcknowledgements.append(acknowledgement)
    }

    /// Seam for the graph bench: states waiting for their grace to pass.
    package var statesInGrace: Int { graph.lifetimes.waitingCount }

    /// Seam for the graph bench: states this runtime holds.
    package var liveStateCount: Int { graph.liveStateCount }

    /// Seam for `CogTesting`: live Observation boundaries.
    package var observationBoundaryCountForTesting: Int { graph.observationBoundaryCount }

    /// Seam for `CogTesting`: whether a manual source has an Observation boundary.
    package func hasObservationBoundaryForTesting<V>(for cog: Cog<V>.Manual) -> Bool {
        graph.existingNode(for: cog.ref)?.boundary != nil
    }

    /// Seam for `CogTesting`: whether an automatic cog has an Observation boundary.
    package func hasObservationBoundaryForTesting<V>(for cog: Cog<V>) -> Bool {
        graph.existingNode(for: cog.ref)?.boundary != nil
    }

    /// Seam for `CogTesting`: whether an async cog has an Observation boundary.
    package func hasObservationBoundaryForTesting<V: Sendable>(for cog: Cog<V>.Async) -> Bool {
        graph.existingNode(for: cog.ref)?.boundary != nil
    }

    /// Seam for `CogTesting`: acknowledge after the next legacy re-arm of a `c.track` bridge.
    package func registerExternalObservationRearm(_ acknowledgement: MainActorCleanupAcknowledgement) {
        graph.externalObservationRearmAcknowledgements.append(acknowledgement)
    }
}
