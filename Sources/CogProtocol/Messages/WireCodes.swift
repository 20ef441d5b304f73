import CogCodec

/// The codes of `error` messages (`protocol/cogwire.md` §2). On the wire a
/// code is its raw text; a code this build does not know decodes as a
/// `WireError` whose `knownCode` is nil.
public enum WireErrorCode: String, Sendable, CaseIterable, Hashable {
    case malformed
    case version
    case oversize
    case unknownType = "unknown-type"
    case notAllowed = "not-allowed"
    case gone
    case unavailable
    case nameInUse = "name-in-use"
    case helloFirst = "hello-first"
    case revisionAhead = "revision-ahead"
    case tooManyRegistrations = "too-many-registrations"
    case registerAgain = "register-again"
    case rigMismatch = "rig-mismatch"
    case busy
    /// The connection's key is not in the leader's peers file (any more).
    case unknownKey = "unknown-key"
    /// The message acts in a worker name the connection's key does not hold.
    case notYourName = "not-your-name"
    /// The key's role may not send this message.
    case roleForbids = "role-forbids"
    /// A catch-up from a revision the leader's log no longer keeps
    /// (retention removed it): the worker syncs from a snapshot instead.
    case compacted
}

/// Why an op request was refused: the code that starts a `rejected`
/// reason (`"code: detail"`, `protocol/cogwire.md` §4).
public enum RejectionCode: String, Sendable, CaseIterable, Hashable {
    case unknownOp = "unknown-op"
    case badArgument = "bad-argument"
    case badRequest = "bad-request"
    case retiredScope = "retired-scope"
    case nameInUse = "name-in-use"
    case unavailable
    case tooLarge = "too-large"
    case requestMismatch = "request-mismatch"
    case crashedLeader = "crashed-leader"
    /// The connection's key is not in the leader's peers file (any more).
    case unknownKey = "unknown-key"
    /// The request's worker name is not one the connection's key holds.
    case notYourName = "not-your-name"
    /// The key's role may not run this op (an observer, or a client outside its op patterns).
    case roleForbids = "role-forbids"
    /// A retry of a request answered so long ago that retention removed
    /// its answer from the dedup table: it is not run again.
    case expired
}

/// An op request refused: its code and what to say about it.
public struct Rejection: Sendable, Equatable, Error {
    public var code: RejectionCode
    public var detail: String

    public init(_ code: RejectionCode, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// The `rejected` reason as it goes on the wire: `"code: detail"`.
    public var reason: String { "\(code.rawValue): \(detail)" }

    /// Reads a wire reason back (nil when it does not start with a known code).
    public init?(reason: String) {
        guard let colon = reason.firstIndex(of: ":"), let code = RejectionCode(rawValue: String(reason[..<colon])) else { return nil }
        self.code = code
        self.detail = String(reason[reason.index(after: colon)...].drop { $0 == " " })
    }
}

extension OpReply.Outcome {
    /// A rejection, as its wire reason.
    public static func rejected(_ rejection: Rejection) -> Self { .rejected(reason: rejection.reason) }

    /// The rejection this outcome carries, when its reason starts with a known code.
    public var rejection: Rejection? {
        guard case .rejected(let reason) = self else { return nil }
        return Rejection(reason: reason)
    }
}

extension WireError {
    public init(_ code: WireErrorCode, _ message: String, request: RequestID? = nil) {
        self.init(code: code.rawValue, message: message, request: request)
    }

    /// The code, when this build knows it.
    public var knownCode: WireErrorCode? { WireErrorCode(rawValue: code) }
}
