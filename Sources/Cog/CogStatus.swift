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

/// The work an async selector returns; it runs off the graph's actor.
///
/// ```swift
/// let forecastCogs = CogBox<Forecast?, ZipCode>.Async(default: nil) { c, zip in
///   let service = c[weatherServiceCog]
///   return .run { try await service.forecast(for: zip) }
/// }
/// ```
///
/// `.stream(_:)` (in `Cog+Stream.swift`) makes work whose every element is
/// a result; only `.latest` async cogs take `Work`, so only they stream.
public struct Work<Value: Sendable>: Sendable {
    let body: WorkBody<Value>

    /// One-shot work: the returned value (or thrown error) is the generation's result.
    public static func run(_ operation: @escaping @Sendable () async throws -> Value) -> Work {
        Work(body: .run(operation))
    }
}

/// How async work replaces itself: `.latest` cancels the run in flight when
/// a dependency changes or a refresh asks, and drops its late result.
public enum LatestPolicy: Sendable {
    case latest
}
