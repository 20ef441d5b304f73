import CogCodec
import CogLog
import Foundation

/// Where `cogd tail --since` starts: at the first turn whose record time
/// (`protocol/turnlog.md` §3, `time`: the writer's wall clock at commit) is
/// at or after a moment — given as an RFC 3339 timestamp
/// (`2026-12-01T20:15:00Z`, `2026-12-01T21:15:00.5+01:00`) or as a duration
/// before now (`90s`, `10m`, `2h`, `7d`, as `--retain-age` takes it).
enum TailSince: Equatable, CustomStringConvertible {
    case time(Date)
    case ago(seconds: Double)

    /// `text` as `--since` takes it; a usage error says both forms.
    static func parse(_ text: String) throws(Command.UsageError) -> TailSince {
        if let seconds = Retention.parseDuration(text) { return .ago(seconds: seconds) }
        if let date = rfc3339(text) { return .time(date) }
        throw Command.UsageError(
            message: "--since takes an RFC 3339 time like 2026-12-01T20:15:00Z (or with an offset, +01:00) or a duration "
                + "before now: a whole number and s, m, h or d (90s, 10m, 2h, 7d), not '\(text)'",
            subcommand: "tail")
    }

    /// An RFC 3339 date-time (`T` or a space between date and time, `Z` or
    /// an offset, optional fractional seconds); nil for anything else.
    static func rfc3339(_ text: String) -> Date? {
        var normalized = text.uppercased()
        if normalized.count > 10, normalized[normalized.index(normalized.startIndex, offsetBy: 10)] == " " {
            normalized.replaceSubrange(
                normalized.index(normalized.startIndex, offsetBy: 10)...normalized.index(normalized.startIndex, offsetBy: 10), with: "T")
        }
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        if let date = plain.date(from: normalized) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: normalized)
    }

    /// The moment meant, with `now` for a duration.
    func date(now: Date = Date()) -> Date {
        switch self {
        case .time(let date): date
        case .ago(let seconds): now.addingTimeInterval(-seconds)
        }
    }

    var description: String {
        switch self {
        case .time(let date): CBORText.iso8601(date.timeIntervalSince1970)
        case .ago: "\(CBORText.iso8601(date().timeIntervalSince1970))"
        }
    }

    /// The first revision in `first…last` whose record time is at or after
    /// `moment`, found by bisection (records are in commit order, so their
    /// times rise); nil when every one is older. `time` reads a revision's
    /// record time, nil when retention removed it meanwhile (taken as older).
    static func firstRevision(
        atOrAfter moment: Date, first: UInt64, last: UInt64, time: (UInt64) throws -> Date?
    ) rethrows -> UInt64? {
        guard first <= last, first > 0 else { return nil }
        var low = first
        var high = last + 1
        while low < high {
            let middle = low + (high - low) / 2
            if let recorded = try time(middle), recorded >= moment {
                high = middle
            } else {
                low = middle + 1
            }
        }
        return low <= last ? low : nil
    }
}
