import Cog
import Foundation

/// Renders CBOR items as text for people (`cogd tail`) and as JSON for tools
/// (`cogd tail --json`). Both are deterministic; neither is parsed back.
public enum CBORText {
    /// JSON-like text: maps as `{"k": v}`, dates as ISO 8601, UUIDs as
    /// strings, byte strings as `h'…'` hex.
    public static func display(_ value: CBORValue) -> String {
        var output = ""
        write(value, into: &output, json: false)
        return output
    }

    /// Strict JSON: byte strings become base64 text, dates ISO 8601 text,
    /// non-text map keys their display text, NaN and infinities `null`.
    public static func json(_ value: CBORValue) -> String {
        var output = ""
        write(value, into: &output, json: true)
        return output
    }

    /// Decodes `bytes` and renders them; malformed bytes render as `h'…'`.
    public static func display(bytes: [UInt8]) -> String {
        guard let value = try? CBORReader.decode(bytes) else { return "h'\(hex(bytes))'" }
        return display(value)
    }

    /// Decodes `bytes` and renders them as JSON (malformed: a hex string).
    public static func json(bytes: [UInt8]) -> String {
        guard let value = try? CBORReader.decode(bytes) else { return quoted(hex(bytes)) }
        return json(value)
    }

    private static func write(_ value: CBORValue, into output: inout String, json: Bool) {
        switch value {
        case .unsigned(let n):
            output += String(n)
        case .negative(let n):
            output += n == UInt64.max ? "-18446744073709551616" : String(-1 - Int128(n))
        case .bytes(let bytes):
            output += json ? quoted(Data(bytes).base64EncodedString()) : "h'\(hex(bytes))'"
        case .text(let text):
            output += json ? quoted(text) : TerminalText.quoted(text)
        case .array(let items):
            output += "["
            for (index, item) in items.enumerated() {
                if index > 0 { output += ", " }
                write(item, into: &output, json: json)
            }
            output += "]"
        case .map(let entries):
            output += "{"
            for (index, entry) in entries.enumerated() {
                if index > 0 { output += ", " }
                if case .text(let key) = entry.key {
                    output += json ? quoted(key) : TerminalText.quoted(key)
                } else {
                    output += json ? quoted(display(entry.key)) : display(entry.key)
                }
                output += ": "
                write(entry.value, into: &output, json: json)
            }
            output += "}"
        case .tag(CBORTag.epochDate, .float(let seconds)):
            output += quoted(iso8601(seconds))
        case .tag(CBORTag.uuid, .bytes(let bytes)) where bytes.count == 16:
            let uuid = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            output += quoted(uuid.uuidString)
        case .tag(let tag, let item):
            if json {
                write(item, into: &output, json: json)
            } else {
                output += "\(tag)("
                write(item, into: &output, json: json)
                output += ")"
            }
        case .bool(let flag):
            output += flag ? "true" : "false"
        case .null:
            output += "null"
        case .float(let double):
            if double.isFinite {
                output += double == double.rounded() && abs(double) < 1e15 ? String(format: "%.1f", double) : "\(double)"
            } else {
                output += json ? "null" : (double.isNaN ? "NaN" : (double > 0 ? "Infinity" : "-Infinity"))
            }
        case .encoded(let bytes):
            output += json ? self.json(bytes: bytes) : display(bytes: bytes)
        }
    }

    /// A JSON string literal. Besides what JSON requires, it escapes every
    /// character `TerminalText.isUnsafe` names (DEL, C1 controls, bidi
    /// controls) as `\uXXXX`, so JSON read on a terminal is safe too.
    public static func quoted(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where TerminalText.isUnsafe(scalar): output += String(format: "\\u%04x", scalar.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// `2026-11-30T08:40:01.123Z`: UTC, rounded to the millisecond. Written
    /// here (the proleptic Gregorian calendar from a day count) because a
    /// Foundation formatter costs tens of microseconds per call, which made
    /// `cogd tail --json` of a long log take minutes.
    public static func iso8601(_ seconds: Double) -> String {
        guard seconds.isFinite else { return seconds.description }
        let milliseconds = Int64((seconds * 1_000).rounded(.toNearestOrEven))
        let (days, dayMilliseconds) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = civilDate(daysSince1970: days)
        let (hour, rest) = floorDivision(dayMilliseconds, 3_600_000)
        let (minute, rest2) = floorDivision(rest, 60_000)
        let (second, millisecond) = floorDivision(rest2, 1_000)
        var text = year < 0 ? "-" : ""
        text += digits(abs(year), 4) + "-" + digits(month, 2) + "-" + digits(day, 2)
        text += "T" + digits(hour, 2) + ":" + digits(minute, 2) + ":" + digits(second, 2) + "." + digits(millisecond, 3) + "Z"
        return text
    }

    /// Quotient and remainder with the remainder in `0..<divisor`.
    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }

    /// Year, month and day of a day count from 1970-01-01, counting in
    /// 400-year eras (146,097 days) of years starting in March, so the leap
    /// day falls at the end of each year.
    private static func civilDate(daysSince1970: Int64) -> (Int64, Int64, Int64) {
        let fromEraStart = daysSince1970 + 719_468  // days from 0000-03-01
        let (era, dayOfEra) = floorDivision(fromEraStart, 146_097)
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    private static func digits(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}

extension TurnRecord {
    /// The record as one line of JSON (`cogd tail --json`; fields documented
    /// in `protocol/turnlog.md`).
    public var jsonLine: String {
        var origin: [String] = []
        if let worker = self.origin.worker { origin.append("\"worker\": \(CBORText.quoted(worker))") }
        if let instance = self.origin.instance { origin.append("\"instance\": \(instance)") }
        if let request = self.origin.request {
            origin.append("\"request\": {\"worker\": \(CBORText.quoted(request.worker)), \"seq\": \(request.sequence)}")
        }
        let writes = writes.map { write in
            "{\"name\": \(CBORText.quoted(write.name)), \"key\": \(write.key.map { CBORText.json(bytes: $0) } ?? "null"), "
                + "\"value\": \(write.value.map { CBORText.json(bytes: $0) } ?? "null"), \"released\": \(write.isRelease)}"
        }
        return "{\"revision\": \(revision), \"epoch\": \(epoch), \"time\": \(CBORText.quoted(CBORText.iso8601(time.timeIntervalSince1970))), "
            + "\"name\": \(CBORText.quoted(name)), \"origin\": {\(origin.joined(separator: ", "))}, "
            + "\"writes\": [\(writes.joined(separator: ", "))], \"scopeEvents\": \(scopeEvents.count)}"
    }

    /// The record as people read it (`cogd tail`): a header line, then one
    /// line per write, `name[key] = value`. Names and text from the record
    /// are escaped (`TerminalText`), so a record is always these lines.
    public var displayLines: [String] { displayLines(scopes: [:]) }

    /// A scope instance as people read it: `#EPOCH.N`, from its number
    /// `EPOCH << 32 | N` (`protocol/cogwire.md` §6): `#1.3` is 4294967299.
    public static func instanceText(_ instance: UInt64) -> String {
        "#\(instance >> 32).\(instance & 0xffff_ffff)"
    }

    /// What a scope event names, `Scope.path[member]`, escaped: how `cogd
    /// tail` names an instance it saw open (`displayLines(scopes:)`).
    public static func scopeLabel(_ event: ScopeEvent) -> String {
        // A mechanism's root (`cogwire.md` §6a): a scope named by no `.`, with no member identity.
        let isRoot = event.identity == nil && !event.scope.contains(".")
        return TerminalText.escaped(event.scope) + (event.identity.map { "[\(CBORText.display(bytes: $0))]" } ?? (isRoot ? " (root)" : ""))
    }

    /// The lines of `displayLines`, naming the instance a turn came from
    /// (`scope TrailScreens.trailScreen[1] #1.1`) when `scopes` holds its
    /// label (`scopeLabel` of the event that opened it), else by number.
    public func displayLines(scopes: [UInt64: String]) -> [String] {
        let originText: String
        if self.origin.isSystem {
            originText = "system"
        } else {
            var parts: [String] = []
            if let worker = self.origin.worker { parts.append("worker \(TerminalText.escaped(worker))") }
            if let instance = self.origin.instance {
                parts.append("scope " + (scopes[instance].map { "\($0) " } ?? "") + TurnRecord.instanceText(instance))
            }
            if let request = self.origin.request { parts.append("request \(TerminalText.escaped(request.description))") }
            originText = parts.joined(separator: ", ")
        }
        var lines = ["#\(revision)  \(CBORText.iso8601(time.timeIntervalSince1970))  \(TerminalText.escaped(name))  (\(originText), epoch \(epoch))"]
        for write in writes {
            let key = write.key.map { "[\(CBORText.display(bytes: $0))]" } ?? ""
            let value = write.value.map { CBORText.display(bytes: $0) } ?? "released"
            lines.append("    \(TerminalText.escaped(write.name))\(key) = \(value)")
        }
        // Scope instances the turn opened or retired (placements and moves
        // in a worker group among them), after the writes.
        for event in scopeEvents {
            let owner = event.worker.map { " on \(TerminalText.escaped($0))" } ?? ""
            lines.append(
                "    \(event.kind == .open ? "opens " : "retires") \(TurnRecord.scopeLabel(event)) \(TurnRecord.instanceText(event.instance))\(owner)")
        }
        return lines
    }
}
