/// Text that came from a peer or a file, made safe to print where people
/// read it: a turn name, a worker name, an error message, a value in
/// `cogd tail`. (Here, in the pure runtime, so that every module that
/// prints — this one's turn-chain warning included — shares one rule.)
///
/// A peer chooses its names, so raw they could end a line and print a fake
/// record after it, clear the screen or recolour it with ANSI escapes, or
/// reorder what follows with a bidi override (`docs/operations.md`,
/// "Logs": a peer's text cannot forge a line). Every such character is shown
/// as a Swift-style escape instead — `\n`, `\r`, `\t`, `\u{1B}`, `\u{202E}` —
/// and a backslash as `\\`, so the printed text is one line and reads back
/// unambiguously: `a\nb` on screen was a newline, `a\\nb` a backslash.
///
/// ```swift
/// print("worker \(TerminalText.escaped(name))")   // "worker x\u{1B}[2J"
/// ```
///
/// - Important: escape each piece of outside text as it is put into a line,
///   never a whole line after (the line's own structure would be escaped too).
///   JSON output keeps JSON's escapes (`CBORText.quoted`), which also escape
///   every character `isUnsafe` names.
public enum TerminalText {
    /// `text` with every unsafe character (`isUnsafe`) and every backslash
    /// escaped; text with neither comes back as it is.
    public static func escaped(_ text: String) -> String {
        escaping(text, quote: false)
    }

    /// `text` escaped and in double quotes, a `"` inside escaped too: a text
    /// value among others on one line (`cogd tail`'s `name[key] = value`).
    public static func quoted(_ text: String) -> String {
        "\"" + escaping(text, quote: true) + "\""
    }

    /// Whether a terminal could act on `scalar` instead of showing it: the
    /// C0 controls (U+0000–U+001F, with newline, carriage return, tab and
    /// escape), DEL (U+007F), the C1 controls (U+0080–U+009F, with the
    /// one-byte CSI), the bidi controls (U+061C, U+200E, U+200F,
    /// U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators
    /// (U+2028, U+2029).
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        case 0x2028, 0x2029: true
        default: false
        }
    }

    private static func escaping(_ text: String, quote: Bool) -> String {
        let needsWork = text.unicodeScalars.contains { scalar in
            scalar == "\\" || (quote && scalar == "\"") || isUnsafe(scalar)
        }
        guard needsWork else { return text }
        var output = ""
        output.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": output += "\\\\"
            case "\"" where quote: output += "\\\""
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where isUnsafe(scalar): output += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output
    }
}
