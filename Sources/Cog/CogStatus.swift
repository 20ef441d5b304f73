/// The full state of an async cog, for code that draws spinners or errors.
///
/// Derive values from the plain read (`c[asyncCog]`), not from the status:
/// the status changes on every reload, the value only when a load succeeds
/// with a different value.
public struct CogStatus<Value> {
    /// Where the latest generation stands.
    public enum Kind: Sendable, Equatable {
        case pending, success, failure
    }

    /// Pending, success or failure.
    public var kind: Kind {
        boundary?.access(.kind)
        return storedKind
    }
    /// The last accepted value, or the default before any success.
    public var value: Value {
        boundary?.access(.value)
        return storedValue
    }
    /// Whether any generation has succeeded (tells a successful `nil` from the resting default).
    public var hasSucceeded: Bool {
        boundary?.access(.hasSucceeded)
        return storedHasSucceeded
    }
    /// The current failure, only while `kind == .failure`.
    public var error: (any Error)? {
        boundary?.access(.error)
        return storedError
    }

    /// `kind == .pending`.
    public var isLoading: Bool {
        boundary?.access(.isLoading)
        return storedKind == .pending
    }

    let storedKind: Kind
    let storedValue: Value
    let storedHasSucceeded: Bool
    let storedError: (any Error)?
    /// Set on a status returned by `cogs.status[x]`: each field read inside
    /// `withObservationTracking` registers that field alone.
    let boundary: ObservationBoundary?

    public init(kind: Kind, value: Value, hasSucceeded: Bool, error: (any Error)?) {
        self.init(kind: kind, value: value, hasSucceeded: hasSucceeded, error: error, boundary: nil)
    }

    init(kind: Kind, value: Value, hasSucceeded: Bool, error: (any Error)?, boundary: ObservationBoundary?) {
        self.storedKind = kind
        self.storedValue = value
        self.storedHasSucceeded = hasSucceeded
        self.storedError = error
        self.boundary = boundary
    }

    /// This status, reporting its field reads to `boundary`.
    func observed(by boundary: ObservationBoundary) -> CogStatus {
        CogStatus(
            kind: storedKind, value: storedValue, hasSucceeded: storedHasSucceeded, error: storedError,
            boundary: boundary)
    }
}

extension CogStatus: Sendable where Value: Sendable {}

/// The work an async selector returns.
///
/// ```swift
/// let forecastCogs = CogBox<Forecast?, ZipCode>.Async(default: nil) { c, zip in
///   let service = c[weatherServiceCog]
///   return .run { try await service.forecast(for: zip) }
/// }
/// ```
///
/// - Important: a `.run` body inherits the actor of the code that makes it,
///   as a `Task { }` body does: written in a selector, it runs on the main
///   actor (`AsyncTests`, ASYNC-15), where it may touch main-actor state
///   between its awaits. Work that must leave it (CPU-heavy work, a blocking
///   call) says so: `.run { @concurrent in … }`. Either way the result is
///   published on the main actor, after the generation check.
///
/// `.stream(_:)` (in `Cog+Stream.swift`) makes work whose every element is
/// a result; only `.latest` async cogs take `Work`, so only they stream.
public struct Work<Value: Sendable>: Sendable {
    let body: WorkBody<Value>

    /// One-shot work: the returned value (or thrown error) is the
    /// generation's result. The body runs on the caller's actor unless it
    /// is marked `@concurrent`.
    public static func run(
        @_inheritActorContext _ operation: sending @escaping @Sendable @isolated(any) () async throws -> sending Value
    ) -> Work {
        Work(body: .run(operation))
    }
}

/// How async work replaces itself: `.latest` cancels the run in flight when
/// a dependency changes or a refresh asks, and drops its late result.
public enum LatestPolicy: Sendable {
    case latest
}
