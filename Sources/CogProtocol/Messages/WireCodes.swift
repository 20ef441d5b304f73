import CogCodec

/// Every code cogd says or counts, in one type: the codes of wire `error`
/// messages (`protocol/cogwire.md` §2), of `rejected` op outcomes (§4,
/// "Rejection codes") and the leader's own events (`protocol/metrics.md` §3,
/// §5). On the wire, in `cogd status` and in metric labels a code is its
/// `text`. A code this build does not know (a newer peer's) reads as
/// `.other(text)`, so every `switch` over codes decides that too, and a new
/// code does not compile until each exhaustive `switch` has decided it.
public enum CogdCode: Hashable, Sendable, CustomStringConvertible {
    // Wire errors (cogwire §2); the five after `gone` are rejections too.
    case malformed
    case version
    case oversize
    case unknownType
    case notAllowed
    case gone
    case unavailable
    case nameInUse
    /// The connection's key is not in the leader's peers file (any more).
    case unknownKey
    /// The message or request acts in a worker name the connection's key does not hold.
    case notYourName
    /// The key's role may not send this message or run this op.
    case roleForbids
    case helloFirst
    case revisionAhead
    case tooManyRegistrations
    case registerAgain
    case rigMismatch
    case busy
    /// A catch-up from a revision the leader's log no longer keeps
    /// (retention removed it): the worker syncs from a snapshot instead.
    case compacted

    // Rejections of op requests (cogwire §4).
    case unknownOp
    case badArgument
    case badRequest
    case retiredScope
    case tooLarge
    case requestMismatch
    case crashedLeader
    /// A retry of a request answered so long ago that retention removed
    /// its answer from the dedup table: it is not run again.
    case expired
    /// The op's body refused: the code a `refused` outcome travels under
    /// in the `rejected` map, which readers of earlier builds read (its
    /// own code is the app's, in the outcome's `refusal`).
    case refused

    // The leader's own events (metrics §3, §5).
    /// A reply or message a peer's queue could not take (it is gone, or past its backlog).
    case sendDropped
    /// The running-request note could not be cleared after a batch.
    case noteFailed
    /// Retention could not remove old records between batches (tried again later).
    case pruneFailed
    /// A turn message could not be published (subscribers catch up by the gap).
    case publishFailed
    /// A record too large for one turn message (fetched by the gap).
    case turnUnpublished
    /// A connection closed for sending only part of a message for too long (cogwire §8).
    case unfinishedMessage
    /// A snapshot under way replaced by its requester's new request.
    case snapshotReplaced
    /// A snapshot given up: its requester took nothing for the deadline.
    case snapshotAbandoned
    /// A commit that failed.
    case commitFailed
    /// A scope selector whose value could not be read (nothing retired on it).
    case selectorUnreadable
    /// A CURVE handshake the leader's ZAP handler refused (a key not in the peers file).
    case handshakeRefused
    /// A handshake that failed before authentication (a peer not speaking ZeroMQ, a wrong mechanism).
    case handshakeFailed

    /// A code this build does not know, as it came.
    case other(String)

    /// Where a code is said: as a wire `error`, as a `rejected` outcome,
    /// or as an event the leader counts.
    public struct Uses: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let wireError = Uses(rawValue: 1)
        public static let rejection = Uses(rawValue: 2)
        public static let event = Uses(rawValue: 4)
    }

    /// Every code this build knows.
    public static let known: [CogdCode] = [
        .malformed, .version, .oversize, .unknownType, .notAllowed, .gone, .unavailable, .nameInUse,
        .unknownKey, .notYourName, .roleForbids, .helloFirst, .revisionAhead, .tooManyRegistrations,
        .registerAgain, .rigMismatch, .busy, .compacted,
        .unknownOp, .badArgument, .badRequest, .retiredScope, .tooLarge, .requestMismatch, .crashedLeader,
        .expired, .refused,
        .sendDropped, .noteFailed, .pruneFailed, .publishFailed, .turnUnpublished, .unfinishedMessage,
        .snapshotReplaced, .snapshotAbandoned, .commitFailed, .selectorUnreadable, .handshakeRefused,
        .handshakeFailed,
    ]

    private static let byText: [String: CogdCode] = Dictionary(uniqueKeysWithValues: known.map { ($0.text, $0) })

    /// The code a text names (`.other` when this build does not know it).
    public init(_ text: String) {
        self = CogdCode.byText[text] ?? .other(text)
    }

    /// The code a text names, when this build knows it.
    public init?(known text: String) {
        guard let code = CogdCode.byText[text] else { return nil }
        self = code
    }

    /// The code as it goes on the wire and in labels.
    public var text: String {
        switch self {
        case .malformed: "malformed"
        case .version: "version"
        case .oversize: "oversize"
        case .unknownType: "unknown-type"
        case .notAllowed: "not-allowed"
        case .gone: "gone"
        case .unavailable: "unavailable"
        case .nameInUse: "name-in-use"
        case .unknownKey: "unknown-key"
        case .notYourName: "not-your-name"
        case .roleForbids: "role-forbids"
        case .helloFirst: "hello-first"
        case .revisionAhead: "revision-ahead"
        case .tooManyRegistrations: "too-many-registrations"
        case .registerAgain: "register-again"
        case .rigMismatch: "rig-mismatch"
        case .busy: "busy"
        case .compacted: "compacted"
        case .unknownOp: "unknown-op"
        case .badArgument: "bad-argument"
        case .badRequest: "bad-request"
        case .retiredScope: "retired-scope"
        case .tooLarge: "too-large"
        case .requestMismatch: "request-mismatch"
        case .crashedLeader: "crashed-leader"
        case .expired: "expired"
        case .refused: "refused"
        case .sendDropped: "send-dropped"
        case .noteFailed: "note-failed"
        case .pruneFailed: "prune-failed"
        case .publishFailed: "publish-failed"
        case .turnUnpublished: "turn-unpublished"
        case .unfinishedMessage: "unfinished-message"
        case .snapshotReplaced: "snapshot-replaced"
        case .snapshotAbandoned: "snapshot-abandoned"
        case .commitFailed: "commit-failed"
        case .selectorUnreadable: "selector-unreadable"
        case .handshakeRefused: "handshake-refused"
        case .handshakeFailed: "handshake-failed"
        case .other(let text): text
        }
    }

    /// Where this code is said (empty for a code this build does not know).
    public var uses: Uses {
        switch self {
        case .malformed, .version, .oversize, .unknownType, .notAllowed, .gone, .helloFirst, .revisionAhead,
            .tooManyRegistrations, .registerAgain, .rigMismatch, .busy, .compacted:
            .wireError
        case .unavailable, .nameInUse, .unknownKey, .notYourName, .roleForbids:
            [.wireError, .rejection]
        case .unknownOp, .badArgument, .badRequest, .retiredScope, .tooLarge, .requestMismatch, .crashedLeader,
            .expired, .refused:
            .rejection
        case .sendDropped, .noteFailed, .pruneFailed, .publishFailed, .turnUnpublished, .unfinishedMessage,
            .snapshotReplaced, .snapshotAbandoned, .commitFailed, .selectorUnreadable, .handshakeRefused,
            .handshakeFailed:
            .event
        case .other:
            []
        }
    }

    public var description: String { text }
}

extension CogdCode: Codable {
    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}

/// An op request refused: its code and what to say about it.
public struct Rejection: Sendable, Equatable, Error {
    public var code: CogdCode
    public var detail: String

    public init(_ code: CogdCode, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// The `rejected` reason as it goes on the wire: `"code: detail"`.
    public var reason: String { "\(code.text): \(detail)" }

    /// Reads a wire reason back (nil when it does not start with a known code).
    public init?(reason: String) {
        guard let colon = reason.firstIndex(of: ":"), let code = CogdCode(known: String(reason[..<colon])) else { return nil }
        self.code = code
        self.detail = String(reason[reason.index(after: colon)...].drop { $0 == " " })
    }
}

extension OpReply.Outcome {
    /// A rejection, its code and detail as separate fields.
    public static func rejected(_ rejection: Rejection) -> Self { .rejected(code: rejection.code, detail: rejection.detail) }

    /// The rejection this outcome carries.
    public var rejection: Rejection? {
        guard case .rejected(let code, let detail) = self else { return nil }
        return Rejection(code, detail)
    }

    /// A rejection's `reason` text, `"code: detail"` (what readers of
    /// earlier builds read, and what a person is shown) — for a refusal
    /// `"refused: CODE: REASON"`; nil for any other outcome.
    public var reason: String? {
        switch self {
        case .rejected(let code, let detail): return code.text.isEmpty ? detail : "\(code.text): \(detail)"
        case .refused(let code, let reason): return "\(OpReply.Outcome.refusedCode): \(OpReply.Outcome.refusedDetail(code: code, reason: reason))"
        case .applied, .unchanged: return nil
        }
    }

    /// The `code` of the `rejected` map a refusal travels in, which readers
    /// of earlier builds read (`protocol/cogwire.md` §4, "Refusals").
    public static let refusedCode = CogdCode.refused

    /// The `detail` of the `rejected` map a refusal travels in: `"CODE: REASON"`.
    static func refusedDetail(code: String, reason: String) -> String { "\(code): \(reason)" }

    /// Reads the `reason` of a leader before code and detail were fields:
    /// the code is the text before the first colon, when it is one this
    /// build knows; otherwise the whole text is the detail and the code is empty.
    init(legacyReason reason: String) {
        if let rejection = Rejection(reason: reason) {
            self = .rejected(rejection)
        } else {
            self = .rejected(code: .other(""), detail: reason)
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
                self = .rejected(code: CogdCode(code), detail: detail)
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
            try body.encode(code.text, forKey: .code)
            try body.encode(detail, forKey: .detail)
            try body.encode(reason ?? "", forKey: .reason)
        case .refused(let code, let refusalReason):
            var body = container.nestedContainer(keyedBy: RejectedKeys.self, forKey: .rejected)
            try body.encode(OpReply.Outcome.refusedCode.text, forKey: .code)
            try body.encode(OpReply.Outcome.refusedDetail(code: code, reason: refusalReason), forKey: .detail)
            try body.encode(reason ?? "", forKey: .reason)
            var refusal = body.nestedContainer(keyedBy: RefusalKeys.self, forKey: .refusal)
            try refusal.encode(code, forKey: .code)
            try refusal.encode(refusalReason, forKey: .reason)
        }
    }
}

extension WireError {
    public init(_ code: CogdCode, _ message: String, request: RequestID? = nil) {
        self.init(code: code, message: message, request: request)
    }
}

/// Why a connection's key may not send a message (`protocol/cogwire.md` §9):
/// answered as a wire `error` to a message, and as a rejection to an `op`
/// request, under the same code (by an exhaustive switch, so a new denial
/// cannot compile without its code).
public enum Denial: Sendable, Equatable, CaseIterable {
    case unknownKey
    case notYourName
    case roleForbids

    public var code: CogdCode {
        switch self {
        case .unknownKey: .unknownKey
        case .notYourName: .notYourName
        case .roleForbids: .roleForbids
        }
    }
}
