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

    public let kind: Kind
    /// The last accepted value, or the default before any success.
    public let value: Value
    /// Whether any generation has succeeded (tells a successful `nil` from the resting default).
    public let hasSucceeded: Bool
    /// The current failure, only while `kind == .failure`.
    public let error: (any Error)?

    /// `kind == .pending`.
    public var isLoading: Bool { kind == .pending }

    public init(kind: Kind, value: Value, hasSucceeded: Bool, error: (any Error)?) {
        self.kind = kind
        self.value = value
        self.hasSucceeded = hasSucceeded
        self.error = error
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
///   actor (seeds D19, ASYNC-15), where it may touch main-actor state
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
