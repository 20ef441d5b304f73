import Foundation

/// A consumer of the graph: a reaction (`run`, `watch`, `status.watch`), a
/// scope's selector, or an export. It has sources but no value; the graph
/// flags it like any node, and the flush runs it — in registration order —
/// only when something it read really changed.
@MainActor
final class ReactionNode: Node {
    /// Exports (0) offer before reactions (1) run, within one flush.
    let order: Int
    /// Registration order, assigned by the graph.
    var sequence = 0
    var queued = false
    var retired = false
    var unlinkAfterRun = false
    /// Whether a run is recorded as an `effect` (scope selectors and exports are not).
    let recordsEffect: Bool
    /// Whether a run counts in `reactionsRun` (an Observation boundary's notices do not).
    let countsRun: Bool
    private var body: (@MainActor (ReactionReader) -> Void)?

    init(
        label: String, order: Int = 1, recordsEffect: Bool = true, countsRun: Bool = true,
        body: @escaping @MainActor (ReactionReader) -> Void
    ) {
        self.order = order
        self.recordsEffect = recordsEffect
        self.countsRun = countsRun
        self.body = body
        super.init(kind: .consumer, descriptor: nil, key: .none, label: label, state: .dirty)
    }

    override func recompute(graph: Graph) -> Bool {
        guard !retired, let body else { return false }
        graph.reactionWillRun(self)
        graph.tracking(self) { body(ReactionReader(graph: graph, node: self)) }
        if unlinkAfterRun {
            graph.trimSources(of: self, to: 0)
            release()
        }
        return false
    }

    /// Drops the body and whatever it captured.
    func release() {
        body = nil
        unlinkAfterRun = false
    }
}

/// Detects turn → reaction → turn chains that run more than 64 turns without
/// the runtime going idle, and keeps one warning per chain for diagnostics.
@MainActor
final class TurnChainGuard {
    static let limit = 64
    static let maximumCauses = 256

    private(set) var warningCount = 0
    private(set) var lastWarning: CogTurnChainWarning?
    private var turns = 0
    private var causes: [CogTurnChainCause] = []
    private var truncated = false
    private var warned = false

    var isIdle: Bool { turns == 0 }

    func turnStarted(named name: String) {
        turns += 1
        note(.turn(name))
        if turns > TurnChainGuard.limit && !warned {
            warned = true
            warningCount += 1
            let warning = CogTurnChainWarning(
                uninterruptedTurnCount: turns, causalChain: causes, causalChainIsTruncated: truncated)
            lastWarning = warning
            // Turn names can come from a peer (a replica applies the leader's records under their names).
            let chain = causes.suffix(8).map { TerminalText.escaped($0.description) }.joined(separator: " → ")
            let line = "cog: warning: \(turns) turns ran without going idle (a turn → reaction → turn loop?): … \(chain)\n"
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    func reactionRan(named name: String) {
        guard turns > 0 else { return }
        note(.reaction(name))
    }

    private func note(_ cause: CogTurnChainCause) {
        if causes.count < TurnChainGuard.maximumCauses {
            causes.append(cause)
        } else {
            truncated = true
        }
    }

    func wentIdle() {
        if let warning = lastWarning, warned {
            lastWarning = CogTurnChainWarning(
                uninterruptedTurnCount: max(warning.uninterruptedTurnCount, turns),
                causalChain: causes, causalChainIsTruncated: truncated)
        }
        turns = 0
        causes.removeAll(keepingCapacity: true)
        truncated = false
        warned = false
    }
}
