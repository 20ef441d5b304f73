import CogProtocol

// In tests only: a code may be written as its text (`errorCounts["unknown-op"]`,
// `code == "malformed"`), which reads as the wire and the documents say it.
// A misspelt text is `.other(…)` and fails the comparison it is in.
extension CogdCode: ExpressibleByStringLiteral {
    public init(stringLiteral text: String) { self.init(text) }
}
