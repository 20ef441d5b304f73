import Cog
import CogCodec
import CogProtocol

/// The rejections of a worker's own requests, as its operator sees them:
/// each one kept for the log (op, scope instance, code, detail) and counted
/// by op and code for `/metrics` (`cogd_worker_rejections_total`,
/// `protocol/metrics.md` §4).
///
/// A pure value the worker drives: it notes each request as it goes out
/// (`sent`), each answer as it comes back (`answered`), and the command
/// line takes what to log once a pass (`take`). Every count and list is
/// bounded: the requests remembered, the rejections kept between two
/// takes, and the label pairs counted (past `seriesLimit`, the overflow
/// series `op="_other", code="_other"`).
///
/// - Important: an outcome added to `OpReply.Outcome` is a compile error in
///   `answered` until it says whether it is reported (the switch there).
public struct WorkerRejections: Sendable {
    /// One rejection of one of this worker's requests.
    public struct Rejection: Sendable, Equatable {
        public var request: RequestID
        /// The op's stable name ("" when the worker no longer remembers
        /// the request: more than `requestsRemembered` went unanswered).
        public var op: String
        /// The turn's composed name: the mechanism or scope path, then the op.
        public var turnName: String?
        /// The scope instance that owned the request (nil: the mechanism's own).
        public var instance: UInt64?
        /// What a program switches on (`cogwire.md` §4, "Rejection codes").
        public var code: String
        /// What a person reads.
        public var detail: String
        /// Answered from `dedup`: the rejection an earlier request with this id got.
        public var earlier: Bool
        /// The op's body refused (`code` and `detail` are the app's code and
        /// reason); false: the leader (or this worker) rejected the request.
        public var refused = false
    }

    /// One label pair of `cogd_worker_rejections_total`.
    public struct Series: Hashable, Sendable, Comparable {
        public var op: String
        public var code: String

        public static func < (a: Series, b: Series) -> Bool { (a.op, a.code) < (b.op, b.code) }
    }

    /// What is remembered of a request sent, to name it when it is answered.
    struct Sent: Sendable {
        var op: String
        var turnName: String?
        var instance: UInt64?
    }

    /// Requests remembered while unanswered (the oldest half forgotten past it).
    public static let requestsRemembered = 4_096
    /// Rejections kept for the log between two `take`s (past it, counted as dropped).
    public static let reportsKept = 256
    /// Label pairs counted one by one; the rest under `overflow`.
    public static let seriesLimit = 64
    /// The label value of the overflow series, and of a code that is not a short name.
    public static let overflow = "_other"

    private var sent: [RequestID: Sent] = [:]
    private var sentOrder: [RequestID] = []
    private var reports: [Rejection] = []
    private var dropped: UInt64 = 0
    /// Rejections counted, by op and code.
    public private(set) var counts: [Series: UInt64] = [:]

    public init() {}

    /// A request goes out: remember its op and owner until it is answered.
    mutating func sent(_ request: RequestID, op: String, turnName: String?, instance: UInt64?) {
        if sent.updateValue(Sent(op: op, turnName: turnName, instance: instance), forKey: request) == nil { sentOrder.append(request) }
        if sentOrder.count > Self.requestsRemembered {
            let half = Self.requestsRemembered / 2
            for old in sentOrder.prefix(half) { sent[old] = nil }
            sentOrder.removeFirst(half)
        }
    }

    /// A request is answered (by the leader, or by the worker itself for
    /// one it could not send): a rejection is counted and kept for the
    /// log, and returned; any other outcome, nil.
    @discardableResult
    mutating func answered(_ reply: OpReply, op fallback: Sent? = nil) -> Rejection? {
        let about = sent.removeValue(forKey: reply.request) ?? fallback
        switch reply.outcome {
        case .applied, .unchanged:
            return nil
        case .rejected(let code, let detail):
            let rejection = Rejection(
                request: reply.request, op: about?.op ?? "", turnName: about?.turnName, instance: about?.instance, code: code.text, detail: detail,
                earlier: reply.earlier == true)
            count(op: rejection.op, code: code.text)
            keep(rejection)
            return rejection
        case .refused(let code, let reason):
            // Logged like a rejection; counted by outcome only
            // (`cogd_worker_requests_total{outcome="refused"}`): the app's codes are its own.
            let refusal = Rejection(
                request: reply.request, op: about?.op ?? "", turnName: about?.turnName, instance: about?.instance, code: code, detail: reason,
                earlier: reply.earlier == true, refused: true)
            keep(refusal)
            return refusal
        }
    }

    private mutating func keep(_ rejection: Rejection) {
        if reports.count < Self.reportsKept {
            reports.append(rejection)
        } else {
            dropped &+= 1
        }
    }

    /// The rejections kept since the last take, and how many more were not kept.
    public mutating func take() -> (rejections: [Rejection], dropped: UInt64) {
        defer {
            reports = []
            dropped = 0
        }
        return (reports, dropped)
    }

    private mutating func count(op: String, code: String) {
        let label = Self.isShortName(code) ? code : Self.overflow
        var series = Series(op: op.isEmpty ? Self.overflow : op, code: label)
        if counts[series] == nil && counts.count >= Self.seriesLimit {
            series = Series(op: Self.overflow, code: Self.overflow)
        }
        counts[series, default: 0] &+= 1
    }

    /// A code as the protocol writes them: 1 to 64 of `a`–`z`, `0`–`9`, `-`.
    static func isShortName(_ code: String) -> Bool {
        let bytes = code.utf8
        return (1...64).contains(bytes.count) && bytes.allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2d }
    }
}
