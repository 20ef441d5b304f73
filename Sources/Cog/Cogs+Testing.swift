extension Cogs {
    /// Seam for `CogTesting.seed`: a quiet write with no turn.
    package func seedQuietly<V>(_ cog: Cog<V>.Manual, to value: V) {
        graph.seed(cog.ref, to: value)
    }

    /// Seam for `CogTesting`: acknowledge at the next async completion check.
    package func registerAsyncCompletionCheck(_ acknowledgement: MainActorCleanupAcknowledgement) {
        graph.asyncCompletionCheckAcknowledgements.append(acknowledgement)
    }
}
