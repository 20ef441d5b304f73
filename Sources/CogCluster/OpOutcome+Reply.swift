import Cog
import CogProtocol

extension OpOutcome {
    /// What a mechanism sees of the leader's (or the worker's own) answer.
    init(_ outcome: OpReply.Outcome) {
        switch outcome {
        case .applied(let revision): self = .applied(revision: revision)
        case .unchanged: self = .unchanged
        case .refused(let code, let reason): self = .refused(code: code, reason: reason)
        case .rejected(let code, let detail): self = .rejected(code: code.text, detail: detail)
        }
    }
}
