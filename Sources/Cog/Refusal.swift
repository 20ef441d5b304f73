/// An op body saying no: a short code of the app's own that a program
/// switches on, and a reason a person reads. A refused turn keeps nothing
/// (every write of the body is discarded, no revision is used) and the
/// requester is answered `refused` with the code and reason
/// (`protocol/cogwire.md` §4, "Refusals"); the leader stores that answer,
/// so a retry gets it again.
///
/// An op refuses with `try c.refuse(code, reason)` on its writer:
///
/// ```swift
/// let withdrawOp = RemoteOp<Withdrawal>(name: "bank.withdraw") { c, w in
///   let balance = c[_balanceCogs[w.account]]
///   guard balance >= w.amount else {
///     try c.refuse("insufficient-funds", "\(w.account) has \(balance), the withdrawal needs \(w.amount)")
///   }
///   c[_balanceCogs[w.account]] = balance - w.amount
/// }
/// ```
///
/// Why a throw: a refusal must end the body where it is decided (nothing
/// after it may write), and Swift leaves a closure early only by returning
/// or throwing; a `Never` call could only trap. So an op body may throw
/// (`RemoteOp`'s body is `throws`), and `refuse` is `throws(Refusal) ->
/// Never`: the compiler sees that the body ends there. A plain `turn { c in
/// … }` body does not throw, so `try c.refuse` does not compile where no
/// requester could be answered; a body that never refuses is a
/// non-throwing closure, which Swift accepts for a throwing one, so every
/// op written before refusals compiles unchanged. (The body is untyped
/// `throws`, not `throws(Refusal)`: Swift 6 infers `any Error` for a
/// closure with a `try` in it unless the closure spells its type, which
/// every op would then have to.) Any other error a body throws is
/// answered `bad-refusal` naming it: nothing is kept either.
///
/// The code and reason are checked when the refusal is made (`init`), so a
/// bad one never reaches the wire, a metric label or a terminal: a code
/// must be 1 to `maximumCodeBytes` bytes of `a`–`z`, `0`–`9`, `-` and `.`,
/// and a reason at most `maximumReasonBytes` bytes of UTF-8. One that is
/// not is still a refusal (nothing is kept), under the code `bad-refusal`
/// with a reason saying what was wrong, the offending text escaped and
/// shortened.
public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The app's code (`insufficient-funds`), or `bad-refusal`.
    public let code: String
    /// What a person reads (`alice has 30, the transfer needs 50`).
    public let reason: String

    /// The longest code, in bytes (a code is a metric label: short and plain).
    public static let maximumCodeBytes = 64
    /// The longest reason, in bytes of UTF-8.
    public static let maximumReasonBytes = 512
    /// The code a refusal with a bad code or reason is answered under.
    public static let badRefusalCode = "bad-refusal"

    /// A refusal with `code` and `reason`, checked: see the type's notes.
    public init(_ code: String, _ reason: String) {
        if let problem = Refusal.codeProblem(code) {
            self.code = Refusal.badRefusalCode
            self.reason = Refusal.bounded(
                "the op refused with the code \(Refusal.excerpt(code)), which \(problem); its reason: \(Refusal.excerpt(reason, bytes: 200))")
        } else if reason.utf8.count > Refusal.maximumReasonBytes {
            self.code = Refusal.badRefusalCode
            self.reason = Refusal.bounded(
                "the op refused \(code) with a reason of \(reason.utf8.count) bytes; a reason holds at most \(Refusal.maximumReasonBytes): "
                    + Refusal.excerpt(reason, bytes: 200))
        } else {
            self.code = code
            self.reason = reason
        }
    }

    /// The refusal of a body that threw `error`, something other than a
    /// `Refusal`: `bad-refusal`, naming it.
    init(thrown error: any Error) {
        self.code = Refusal.badRefusalCode
        self.reason = Refusal.bounded(
            "the op threw \(Refusal.excerpt(String(describing: error), bytes: 300)), which is not a Refusal; an op refuses with try c.refuse(code, reason)")
    }

    /// What is wrong with `code` as a refusal code, or nil when it is one.
    public static func codeProblem(_ code: String) -> String? {
        if code.isEmpty { return "is empty" }
        if code.utf8.count > maximumCodeBytes { return "is \(code.utf8.count) bytes long; a code is at most \(maximumCodeBytes)" }
        if !code.utf8.allSatisfy(isCodeByte) { return "has a character other than a-z, 0-9, '-' and '.'" }
        return nil
    }

    static func isCodeByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// `text` quoted and escaped (`TerminalText.quoted`), its first `bytes`
    /// bytes or so, with `…` when shortened.
    private static func excerpt(_ text: String, bytes: Int = 80) -> String {
        TerminalText.quoted(prefix(text, bytes: bytes)) + (text.utf8.count > bytes ? "…" : "")
    }

    /// `text` cut to at most `bytes` bytes of UTF-8 (whole characters,
    /// `…` added within the bound when cut): an outside name put into a
    /// reason, so the reason stays within `maximumReasonBytes`.
    ///
    /// ```swift
    /// try c.refuse("unknown-account", "no account named \(Refusal.shortened(name, toBytes: 100))")
    /// ```
    public static func shortened(_ text: String, toBytes bytes: Int) -> String {
        guard text.utf8.count > bytes else { return text }
        return prefix(text, bytes: max(0, bytes - 3)) + "…"
    }

    /// The longest prefix of whole characters within `bytes` bytes of UTF-8.
    private static func prefix(_ text: String, bytes: Int) -> String {
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let size = text[index].utf8.count
            guard used + size <= bytes else { break }
            used += size
            end = text.index(after: index)
        }
        return String(text[..<end])
    }

    private static func bounded(_ text: String) -> String { shortened(text, toBytes: maximumReasonBytes) }

    /// `refused CODE: REASON`, the reason escaped for a terminal.
    public var description: String { "refused \(code): \(TerminalText.escaped(reason))" }
}

extension Writer {
    /// Refuses the op this body runs for, ending the body: nothing it
    /// wrote is kept, and the requester is answered `refused` with `code`
    /// and `reason` (`Refusal`; a bad code or reason is answered
    /// `bad-refusal`).
    ///
    /// ```swift
    /// guard accounts.contains(t.to) else { try c.refuse("unknown-account", "no account named \(t.to)") }
    /// ```
    ///
    /// - Important: only an op body (`RemoteOp`) can refuse: a refusal that
    ///   ends a nested op's body refuses the whole turn it joined.
    public func refuse(_ code: String, _ reason: String) throws(Refusal) -> Never {
        throw Refusal(code, reason)
    }
}
