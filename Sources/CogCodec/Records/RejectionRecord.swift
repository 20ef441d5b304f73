import Cog
import Foundation

/// A request the leader answered without a turn — rejected, or refused by
/// its op's body — as kept beside the turns in the `rejections` database
/// (`protocol/turnlog.md` §2d). It is not a turn: it has no revision of its
/// own and changed no state; it sits at the revision the log ended at when
/// it was answered, so a reader shows it between that turn and the next.
///
/// ```swift
/// for rejection in try store.rejections(from: 12, through: 12) { print(rejection.displayLine) }
/// ```
///
/// - Important: the leader writes one in the commit that makes its answer
///   durable, and one more for each retry answered from `dedup` (marked
///   `earlier`). Transient rejections (`unavailable`, `request-mismatch`, …)
///   are kept nowhere, here neither.
public struct RejectionRecord: Equatable, Sendable {
    /// Rejected by the leader (a rejection code, `cogwire.md` §4), or refused by the op's body (the app's own code).
    public enum Kind: String, Codable, Sendable {
        case rejected, refused
    }

    /// The revision the log ended at when the request was answered (0: no turn yet).
    public var revision: UInt64
    /// Its place among the entries of that revision, from 0.
    public var order: UInt64
    /// When the answer was committed (the commit's time, as its records').
    public var time: Date
    /// Who asked: the requester's worker name and request sequence.
    public var request: RequestID
    /// The op's name (cut at `maximumOpBytes`).
    public var op: String
    /// The request digest (`turnlog.md` §3): 8 bytes.
    public var digest: [UInt8]
    public var kind: Kind
    /// A rejection code (`bad-argument`, `retired-scope`, …), or a refusal's app code.
    public var code: String
    /// What a person reads: the rejection's detail, or the refusal's reason (cut at `maximumReasonBytes`).
    public var reason: String
    /// True for a retry answered from `dedup`: nothing ran, the answer is the earlier one's.
    public var earlier: Bool

    /// The longest op name kept, in UTF-8 bytes (as the `running-request` note, `turnlog.md` §1).
    public static let maximumOpBytes = 1_024
    /// The longest code kept (a refusal code holds at most 64, `cogwire.md` §4).
    public static let maximumCodeBytes = 64
    /// The longest reason kept (a refusal's reason holds at most 512; a rejection's detail is cut here).
    public static let maximumReasonBytes = 1_024

    public init(
        revision: UInt64 = 0, order: UInt64 = 0, time: Date = Date(timeIntervalSince1970: 0), request: RequestID, op: String, digest: [UInt8],
        kind: Kind, code: String, reason: String, earlier: Bool = false
    ) {
        self.revision = revision
        self.order = order
        self.time = time
        self.request = request
        self.op = RejectionRecord.cut(op, to: RejectionRecord.maximumOpBytes)
        self.digest = digest
        self.kind = kind
        self.code = RejectionRecord.cut(code, to: RejectionRecord.maximumCodeBytes)
        self.reason = RejectionRecord.cut(reason, to: RejectionRecord.maximumReasonBytes)
        self.earlier = earlier
    }

    /// `text` cut to at most `bytes` of UTF-8, at a character boundary.
    static func cut(_ text: String, to bytes: Int) -> String {
        guard text.utf8.count > bytes else { return text }
        var kept = 0
        var end = text.startIndex
        for index in text.unicodeScalars.indices {
            let length = text.unicodeScalars[index].utf8.count
            guard kept + length <= bytes else { break }
            kept += length
            end = text.unicodeScalars.index(after: index)
        }
        return String(text.unicodeScalars[..<end])
    }

    /// The key: the revision, then the order, each 8 bytes big-endian.
    public var key: [UInt8] { RejectionRecord.key(revision: revision, order: order) }

    public static func key(revision: UInt64, order: UInt64) -> [UInt8] {
        withUnsafeBytes(of: revision.bigEndian, Array.init) + withUnsafeBytes(of: order.bigEndian, Array.init)
    }

    /// The stored value (`turnlog.md` §2d): a deterministic CBOR map of text
    /// keys `time` (tag 1), `worker`, `seq`, `op`, `digest` (bytes), `kind`,
    /// `code`, `reason`, and `earlier` (`true`, only for a retry).
    struct Stored: Codable {
        var time: Date
        var worker: String
        var seq: UInt64
        var op: String
        var digest: [UInt8]
        var kind: Kind
        var code: String
        var reason: String
        var earlier: Bool?
    }

    /// The value's bytes.
    public func encoded() throws -> [UInt8] {
        try CBOREncoder().encode(stored)
    }

    /// Reads an entry back from its key and value; nil when the key is not
    /// 16 bytes or the value does not decode as one.
    public init?(key: [UInt8], value: [UInt8]) {
        guard key.count == 16, let stored = try? CBORDecoder().decode(Stored.self, from: value) else { return nil }
        let number = { (bytes: ArraySlice<UInt8>) in bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        self.init(
            revision: number(key[0..<8]), order: number(key[8..<16]), time: stored.time,
            request: RequestID(worker: stored.worker, sequence: stored.seq), op: stored.op, digest: stored.digest, kind: stored.kind,
            code: stored.code, reason: stored.reason, earlier: stored.earlier == true)
    }

    /// One line for people (`cogd tail --rejections`), text escaped:
    /// `#12 + 2026-12-05T08:01:02.003Z  refused insufficient-funds: … (op ledger.withdraw(_:), request W#3, digest 1a2b…)`.
    public var displayLine: String {
        let retry = earlier ? " (a retry answered from an earlier request)" : ""
        return "#\(revision) +  \(CBORText.iso8601(time.timeIntervalSince1970))  \(kind.rawValue) \(TerminalText.escaped(code)): "
            + "\(TerminalText.escaped(reason))  (op \(TerminalText.escaped(op)), request \(TerminalText.escaped(request.description)), "
            + "digest \(CBORText.hex(digest)))\(retry)"
    }

    /// One line of JSON (`cogd tail --rejections --json`): `"rejection": true`
    /// tells it from a turn's line.
    public var jsonLine: String {
        "{\"rejection\": true, \"revision\": \(revision), \"order\": \(order), \"time\": \(CBORText.quoted(CBORText.iso8601(time.timeIntervalSince1970))), "
            + "\"kind\": \(CBORText.quoted(kind.rawValue)), \"code\": \(CBORText.quoted(code)), \"reason\": \(CBORText.quoted(reason)), "
            + "\"op\": \(CBORText.quoted(op)), \"request\": {\"worker\": \(CBORText.quoted(request.worker)), \"seq\": \(request.sequence)}, "
            + "\"digest\": \(CBORText.quoted(CBORText.hex(digest))), \"earlier\": \(earlier)}"
    }
}
