import Cog

extension Cogs {
    /// Makes one isolated runtime for a test or preview.
    ///
    /// `seeding` runs after the runtime exists and before any mechanism
    /// operates, so an `initial: .run` watch sees seeded values; `mechanisms`
    /// then operate in order, as at assembly. Runtimes made here are never
    /// installed: make as many as tests need, one per test.
    ///
    /// `clock` and `whileObservedGrace` decide when unobserved automatic,
    /// async and `.whileObserved` states are released (30 s on the
    /// continuous clock by default); a test injects a `TestClock`.
    /// `externalObservationTracking` picks how `c.track` follows outside
    /// `@Observable` models (`.legacy` tests the re-arm path).
    ///
    /// ```swift
    /// let cogs = Cogs.forTesting(seeding: { $0.seed(_countCog, to: 5) })
    /// let clock = TestClock()
    /// let graced = Cogs.forTesting(clock: clock, whileObservedGrace: .seconds(1))
    /// ```
    public static func forTesting(
        clock: any Clock<Duration> = ContinuousClock(),
        whileObservedGrace: Duration = .seconds(30),
        externalObservationTracking: ExternalObservationTrackingForTesting = .automatic,
        seeding: ((Cogs) -> Void)? = nil,
        mechanisms: [any Mechanism] = []
    ) -> Cogs {
        let cogs = Cogs(
            clock: clock, whileObservedGrace: whileObservedGrace,
            externalObservationTracking: externalObservationTracking.mode)
        seeding?(cogs)
        cogs.operate(mechanisms)
        return cogs
    }

    /// Places `value` in a manual source quietly: no turn, no history entry,
    /// no reaction. Dependents are still flagged, so they re-check on the next
    /// real turn, and an equal value changes nothing.
    ///
    /// - Important: test setup only; it traps inside a turn, computation or reaction.
    public func seed<V>(_ cog: Cog<V>.Manual, to value: V) {
        seedQuietly(cog, to: value)
    }

    /// Registers `acknowledgement` to be acknowledged at the next async
    /// completion check (a finished generation's result, published or dropped).
    public func acknowledgeNextAsyncCompletionCheck(with acknowledgement: MainActorCleanupAcknowledgement) {
        registerAsyncCompletionCheck(acknowledgement)
    }

    /// Registers `acknowledgement` to be acknowledged when the next state is
    /// released because its grace passed with no consumer.
    public func acknowledgeNextDerivedRelease(with acknowledgement: MainActorCleanupAcknowledgement) {
        registerGraceRelease(acknowledgement)
    }

    /// Registers `acknowledgement` to be acknowledged the next time the grace
    /// timer checks its states (whether or not it releases any).
    public func acknowledgeNextDerivedReleaseCheck(with acknowledgement: MainActorCleanupAcknowledgement) {
        registerGraceReleaseCheck(acknowledgement)
    }

    /// Registers `acknowledgement` to be acknowledged when this runtime's
    /// teardown has finished on the main actor: every scope retired (its
    /// reactions unregistered, its tasks cancelled), exports finished, and
    /// the mechanisms it retained released. A test that drops its last
    /// reference from another executor awaits it instead of sleeping.
    ///
    /// ```swift
    /// let cleanup = MainActorCleanupAcknowledgement()
    /// cogs.acknowledgeDeinitCleanup(with: cleanup)
    /// // drop the last reference, from any executor
    /// await cleanup.wait()
    /// ```
    public func acknowledgeDeinitCleanup(with acknowledgement: MainActorCleanupAcknowledgement) {
        registerDeinitCleanup(acknowledgement)
    }
}

extension Cogs {
    /// Assembles the app's one runtime with the real `Cogs.assemble` (and so
    /// its once-per-process guard), runs `body` with it, and frees the
    /// install slot when `body` returns, so a test can check code that needs
    /// the installed runtime without leaving it installed for other tests.
    ///
    /// It is synchronous on purpose: nothing else on the main actor can run
    /// while the slot is taken. It is not re-entrant: an `assemble` (or
    /// another `withAssembledCogs`) inside `body` traps, as a second
    /// assembly does.
    ///
    /// ```swift
    /// Cogs.withAssembledCogs(mechanisms: [WeatherMechanism()]) { cogs in
    ///   #expect(Cogs.isBootstrappedApp(cogs))
    /// }
    /// #expect(!Cogs.hasBootstrappedApp)
    /// ```
    public static func withAssembledCogs<Result>(
        mechanisms: [any Mechanism] = [], _ body: (Cogs) throws -> Result
    ) rethrows -> Result {
        try withInstalledAppForTesting(mechanisms: mechanisms, body)
    }

    /// Whether `cogs` is the runtime `Cogs.assemble` installed (never one
    /// made by `forTesting`).
    public static func isBootstrappedApp(_ cogs: Cogs) -> Bool {
        isInstalledAppForTesting(cogs)
    }

    /// Whether this process's install slot is taken: `Cogs.assemble` ran,
    /// outside a `withAssembledCogs` that has returned since.
    public static var hasBootstrappedApp: Bool {
        hasInstalledAppForTesting
    }
}

/// The mechanism `forTestingWithController` adds last: it hands its
/// controller to the test.
private struct ProbeMechanism: Mechanism {
    let name = "CogTesting.Probe"
    let capture: @MainActor (MechanismController) -> Void

    func operate(_ m: MechanismController) { capture(m) }
}

extension Cogs {
    /// Like `forTesting`, and also returns a controller that acts as an
    /// app-lifetime mechanism operating last (named `CogTesting.Probe`), so a
    /// test can register reactions and scopes directly.
    public static func forTestingWithController(
        clock: any Clock<Duration> = ContinuousClock(),
        whileObservedGrace: Duration = .seconds(30),
        externalObservationTracking: ExternalObservationTrackingForTesting = .automatic,
        seeding: ((Cogs) -> Void)? = nil,
        mechanisms: [any Mechanism] = []
    ) -> (cogs: Cogs, controller: MechanismController) {
        var probe: MechanismController?
        let cogs = forTesting(
            clock: clock, whileObservedGrace: whileObservedGrace,
            externalObservationTracking: externalObservationTracking, seeding: seeding,
            mechanisms: mechanisms + [ProbeMechanism { probe = $0 }])
        guard let probe else { fatalError("internal inconsistency: the probe mechanism did not operate") }
        return (cogs, probe)
    }
}

extension Cogs {
    /// Like `forTesting`, over a durable store (for example a `CogLog`
    /// `DurableTurnStore` in a temporary folder).
    public static func forTesting(
        store: any CogDurableStore,
        clock: any Clock<Duration> = ContinuousClock(),
        whileObservedGrace: Duration = .seconds(30),
        seeding: ((Cogs) -> Void)? = nil,
        mechanisms: [any Mechanism] = []
    ) -> Cogs {
        let cogs = Cogs(durableStore: store, clock: clock, whileObservedGrace: whileObservedGrace)
        seeding?(cogs)
        cogs.operate(mechanisms)
        return cogs
    }
}
