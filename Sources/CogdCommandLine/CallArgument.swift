import Cog
import Foundation

/// The JSON argument of `cogd call`: where it stops being JSON, said so a
/// person can find it, before anything is sent.
enum CallArgument {
    /// What is wrong with `text` as JSON (any value, a bare number or string
    /// too), naming the line, the column and the text there; nil when it parses.
    ///
    /// ```swift
    /// CallArgument.problem(in: #"{"a": x}"#)   // "invalid value at line 1, column 7: `x}`"
    /// ```
    static func problem(in text: String) -> String? {
        if text.allSatisfy(\.isWhitespace) { return "it is empty (give a JSON value: {}, 5, \"text\", true …)" }
        let bytes = Array(text.utf8)
        do {
            _ = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
            return nil
        } catch {
            let description = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            // Foundation says "… around character N." (a UTF-8 offset) or "Unexpected end of file …".
            if let range = description.range(of: "character "),
                let offset = Int(description[range.upperBound...].prefix { $0.isNumber }), offset <= bytes.count
            {
                let what = description[..<range.lowerBound].replacingOccurrences(of: " around ", with: "").lowercased()
                return "\(what) at \(position(of: offset, in: bytes)): `\(snippet(from: offset, in: bytes))`"
            }
            if description.contains("end of file") {
                return "it ends at \(position(of: bytes.count, in: bytes)) before the value is complete (a missing `}`, `]` or `\"`?)"
            }
            return description
        }
    }

    /// How a text is written in JSON, when `text` is a bare word that is no
    /// JSON value (`bob` gives `a text is written '"bob"' in JSON`); nil otherwise.
    static func textHint(for text: String) -> String? {
        let word = text.trimmingCharacters(in: .whitespaces)
        guard let first = word.unicodeScalars.first, first.properties.isAlphabetic, word.count <= 40,
            word.unicodeScalars.allSatisfy({ $0.properties.isAlphabetic || "0123456789._-".unicodeScalars.contains($0) })
        else { return nil }
        return "a text is written '\"\(word)\"' in JSON"
    }

    /// What `call` says of an argument that is not JSON: where, and the hint for a bare word.
    static func refusal(of text: String) -> String? {
        guard let problem = problem(in: text) else { return nil }
        return "the argument is not JSON\(textHint(for: text).map { " (\($0))" } ?? ""): \(problem)"
    }

    /// The first integer in `text` (valid JSON) that no op argument can hold
    /// (below −2^63 or above 2^64−1: JSON would carry it on as a float), where
    /// it is; nil when there is none.
    ///
    /// ```swift
    /// CallArgument.oversizeInteger(in: "[1, 99999999999999999999]")
    /// // "the integer 99999999999999999999 at line 1, column 5 is beyond what an argument holds (-9223372036854775808 to 18446744073709551615)"
    /// ```
    static func oversizeInteger(in text: String) -> String? {
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                // Past the string (escapes included).
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") { index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1 }
                index += 1
                continue
            }
            guard byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else {
                index += 1
                continue
            }
            let start = index
            index += 1
            while index < bytes.count, "0123456789.eE+-".utf8.contains(bytes[index]) { index += 1 }
            let token = String(decoding: bytes[start..<index], as: UTF8.self)
            guard !token.contains(where: { ".eE".contains($0) }), Int64(token) == nil, UInt64(token) == nil else { continue }
            return "the integer \(token) at \(position(of: start, in: bytes)) is beyond what an argument holds "
                + "(\(Int64.min) to \(UInt64.max))"
        }
        return nil
    }

    /// `line L, column C` (both from 1) of the byte at `offset`.
    private static func position(of offset: Int, in bytes: [UInt8]) -> String {
        let before = bytes[..<offset]
        let line = before.count { $0 == 0x0a } + 1
        let lineStart = before.lastIndex(of: 0x0a).map { $0 + 1 } ?? 0
        let column = String(decoding: bytes[lineStart..<offset], as: UTF8.self).count + 1
        return "line \(line), column \(column)"
    }

    /// Up to 20 characters from `offset` to the end of its line, control characters escaped.
    private static func snippet(from offset: Int, in bytes: [UInt8]) -> String {
        let rest = String(decoding: bytes[offset...], as: UTF8.self)
        let line = rest.prefix { $0 != "\n" }
        let text = line.count > 20 ? line.prefix(20) + "…" : line
        return text.isEmpty ? "(end of line)" : TerminalText.escaped(String(text))
    }
}
