import Cog

extension String.StringInterpolation {
    /// Interpolates text that came from a peer or a file (a name, an error,
    /// a reason) escaped for the terminal (`TerminalText.escaped`), so it
    /// stays on its line and cannot move the cursor or recolour the screen:
    /// `print("worker \(escaped: worker.name): applied \(revision)")`.
    package mutating func appendInterpolation(escaped value: Any) {
        appendLiteral(TerminalText.escaped(String(describing: value)))
    }
}
