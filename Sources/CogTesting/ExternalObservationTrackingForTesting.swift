import Cog

/// Which path a test runtime uses for the outside `@Observable` properties
/// selectors link in with `c.track`.
///
/// ```swift
/// let cogs = Cogs.forTesting(externalObservationTracking: .legacy)
/// ```
public enum ExternalObservationTrackingForTesting: Sendable {
    /// Continuous tracking with `Observations` (what `Cogs.assemble` uses):
    /// mutations made before the main actor next suspends coalesce.
    case automatic
    /// One-shot `withObservationTracking`, re-armed on the main actor after
    /// each change; `acknowledgeNextExternalObservationRearm(with:)` tells a
    /// test when the re-arm happened, after which a mutation is never missed.
    case legacy

    var mode: ExternalObservationTrackingMode {
        switch self {
        case .automatic: .automatic
        case .legacy: .legacy
        }
    }
}

extension Cogs {
    /// Registers `acknowledgement` to be acknowledged the next time a
    /// legacy-path `c.track` bridge has re-armed after a change (before it
    /// publishes the value it read).
    public func acknowledgeNextExternalObservationRearm(with acknowledgement: MainActorCleanupAcknowledgement) {
        registerExternalObservationRearm(acknowledgement)
    }
}
