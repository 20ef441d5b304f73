/// What the runaway-loop guard saw: a turn → reaction → turn chain that ran
/// more than 64 turns without the runtime going idle raises one warning,
/// kept here for tests and tools (and printed).
public struct CogTurnChainDiagnostic: Sendable {
    /// How many chains went past the limit.
    public let warningCount: Int
    /// The most recent such chain.
    public let lastWarning: CogTurnChainWarning?
    /// Whether no turn is running or queued now.
    public let isIdle: Bool
}

/// One runaway chain: how long it ran and what caused each step.
public struct CogTurnChainWarning: Sendable, Equatable {
    public let uninterruptedTurnCount: Int
    /// Turn and reaction names, in order, at most 256.
    public let causalChain: [CogTurnChainCause]
    public let causalChainIsTruncated: Bool
}

/// One step of a turn chain.
public enum CogTurnChainCause: Sendable, Equatable, CustomStringConvertible {
    case turn(String)
    case reaction(String)

    public var description: String {
        switch self {
        case .turn(let name): "turn \(name)"
        case .reaction(let name): "reaction \(name)"
        }
    }
}
