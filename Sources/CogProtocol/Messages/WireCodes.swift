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

/// Why an op request was refused: the `code` field of a `rejected`
/// outcome (`protocol/cogwire.md` §4).
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
    /// A rejection, its code and detail as separate fields.
    public static func rejected(_ rejection: Rejection) -> Self { .rejected(code: rejection.code.rawValue, detail: rejection.detail) }

    /// The rejection this outcome carries, when this build knows its code.
    public var rejection: Rejection? {
        guard case .rejected(let code, let detail) = self, let known = RejectionCode(rawValue: code) else { return nil }
        return Rejection(known, detail)
    }

    /// A rejection's `reason` text, `"code: detail"` (what readers of
    /// earlier builds read, and what a person is shown) — for a refusal
    /// `"refused: CODE: REASON"`; nil for any other outcome.
    public var reason: String? {
        switch self {
        case .rejected(let code, let detail): return code.isEmpty ? detail : "\(code): \(detail)"
        case .refused(let code, let reason): return "\(OpReply.Outcome.refusedCode): \(OpReply.Outcome.refusedDetail(code: code, reason: reason))"
        case .applied, .unchanged: return nil
        }
    }

    /// The `code` of the `rejected` map a refusal travels in, which readers
    /// of earlier builds read (`protocol/cogwire.md` §4, "Refusals").
    public static let refusedCode = "refused"

    /// The `detail` of the `rejected` map a refusal travels in: `"CODE: REASON"`.
    static func refusedDetail(code: String, reason: String) -> String { "\(code): \(reason)" }

    /// Reads the `reason` of a leader before code and detail were fields:
    /// the code is the text before the first colon, when it is one this
    /// build knows; otherwise the whole text is the detail and the code is empty.
    init(legacyReason reason: String) {
        if let rejection = Rejection(reason: reason) {
            self = .rejected(rejection)
        } else {
            self = .rejected(code: "", detail: reason)
        }
    }

    private enum CodingKeys: String, CodingKey { case applied, unchanged, rejected }
    private enum AppliedKeys: String, CodingKey { case revision }
    private enum RejectedKeys: String, CodingKey { case code, detail, reason, refusal }
    private enum RefusalKeys: String, CodingKey { case code, reason }
    private struct NoKeys: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "an outcome has exactly one of applied, unchanged, rejected"))
        }
        switch key {
        case .applied:
            let body = try container.nestedContainer(keyedBy: AppliedKeys.self, forKey: .applied)
            self = .applied(revision: try body.decode(UInt64.self, forKey: .revision))
        case .unchanged:
            _ = try container.nestedContainer(keyedBy: NoKeys.self, forKey: .unchanged)
            self = .unchanged
        case .rejected:
            let body = try container.nestedContainer(keyedBy: RejectedKeys.self, forKey: .rejected)
            if body.contains(.refusal) {
                let refusal = try body.nestedContainer(keyedBy: RefusalKeys.self, forKey: .refusal)
                self = .refused(code: try refusal.decode(String.self, forKey: .code), reason: try refusal.decode(String.self, forKey: .reason))
            } else if let code = try body.decodeIfPresent(String.self, forKey: .code), let detail = try body.decodeIfPresent(String.self, forKey: .detail) {
                self = .rejected(code: code, detail: detail)
            } else {
                self = OpReply.Outcome(legacyReason: try body.decode(String.self, forKey: .reason))
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .applied(let revision):
            var body = container.nestedContainer(keyedBy: AppliedKeys.self, forKey: .applied)
            try body.encode(revision, forKey: .revision)
        case .unchanged:
            _ = container.nestedContainer(keyedBy: NoKeys.self, forKey: .unchanged)
        case .rejected(let code, let detail):
            var body = container.nestedContainer(keyedBy: RejectedKeys.self, forKey: .rejected)
            try body.encode(code, forKey: .code)
            try body.encode(detail, forKey: .detail)
            try body.encode(reason ?? "", forKey: .reason)
        case .refused(let code, let refusalReason):
            var body = container.nestedContainer(keyedBy: RejectedKeys.self, forKey: .rejected)
            try body.encode(OpReply.Outcome.refusedCode, forKey: .code)
            try body.encode(OpReply.Outcome.refusedDetail(code: code, reason: refusalReason), forKey: .detail)
            try body.encode(reason ?? "", forKey: .reason)
            var refusal = body.nestedContainer(keyedBy: RefusalKeys.self, forKey: .refusal)
            try refusal.encode(code, forKey: .code)
            try refusal.encode(refusalReason, forKey: .reason)
        }
    }
}

extension WireError {
    public init(_ code: WireErrorCode, _ message: String, request: RequestID? = nil) {
        self.init(code: code.rawValue, message: message, request: request)
    }

    /// The code, when this build knows it.
    public var knownCode: WireErrorCode? { WireErrorCode(rawValue: code) }
}

/// Why a connection's key may not send a message (`protocol/cogwire.md` §9):
/// answered as a wire `error` to a message, and as a rejection to an `op`
/// request. Each denial has both codes, by an exhaustive switch, so a new
/// one cannot compile without deciding both.
public enum Denial: Sendable, Equatable, CaseIterable {
    case unknownKey
    case notYourName
    case roleForbids

    public var wireCode: WireErrorCode {
        switch self {
        case .unknownKey: .unknownKey
        case .notYourName: .notYourName
        case .roleForbids: .roleForbids
        }
    }

    public var rejectionCode: RejectionCode {
        switch self {
        case .unknownKey: .unknownKey
        case .notYourName: .notYourName
        case .roleForbids: .roleForbids
        }
    }
}

/// What the leader counts beside the wire's error codes and the rejection
/// codes: its own events, in `cogd status`'s errors and
/// `cogd_leader_errors_total{code}` (`protocol/metrics.md` §3, §5). Counted
/// by value, so a misspelt event does not compile.
public enum LeaderEvent: String, Sendable, CaseIterable, Hashable {
    /// A reply or message a peer's queue could not take (it is gone, or past its backlog).
    case sendDropped = "send-dropped"
    /// The running-request note could not be cleared after a batch.
    case noteFailed = "note-failed"
    /// Retention could not remove old records between batches (tried again later).
    case pruneFailed = "prune-failed"
    /// A turn message could not be published (subscribers catch up by the gap).
    case publishFailed = "publish-failed"
    /// A record too large for one turn message (fetched by the gap).
    case turnUnpublished = "turn-unpublished"
    /// A connection closed for sending only part of a message for too long (cogwire §8).
    case unfinishedMessage = "unfinished-message"
    /// A snapshot under way replaced by its requester's new request.
    case snapshotReplaced = "snapshot-replaced"
    /// A snapshot given up: its requester took nothing for the deadline.
    case snapshotAbandoned = "snapshot-abandoned"
    /// A commit that failed.
    case commitFailed = "commit-failed"
    /// A scope selector whose value could not be read (nothing retired on it).
    case selectorUnreadable = "selector-unreadable"
    /// A CURVE handshake the leader's ZAP handler refused (a key not in the peers file).
    case handshakeRefused = "handshake-refused"
    /// A handshake that failed before authentication (a peer not speaking ZeroMQ, a wrong mechanism).
    case handshakeFailed = "handshake-failed"
}
