import Cog
import CogCodec
import CogLog
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The operator's log of a leader or worker: one line per event on
/// standard error, with a timestamp and a level (`--log-format`,
/// `--log-level`; README "Watching it run").
///
/// - `text`: `2026-12-01T20:25:11.123Z INFO  cogd leader: worker w1 joined …`;
///   peer text in the message escaped (`TerminalText`): it stays on its line.
/// - `json`: `{"time":"…","level":"info","event":"worker-joined","source":"cogd leader","message":"…",…}`,
///   the event's fields beside the message, every string JSON-escaped.
public final class OperatorLog: Sendable {
    public enum Format: String, Sendable, CaseIterable {
        case text, json
    }

    public enum Level: String, Sendable, CaseIterable, Comparable {
        case debug, info, warn, error

        var rank: Int { Level.allCases.firstIndex(of: self)! }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    /// A field's value: text, or a number written as one in JSON.
    public enum Value: Sendable, Equatable {
        case text(String)
        case number(Double)
    }

    public let format: Format
    public let minimum: Level
    /// Who speaks: `cogd leader`, `cogd worker NAME` (escaped for the terminal).
    public let source: String
    /// Where lines go (standard error; tests may pass a pipe's descriptor).
    private let descriptor: Int32

    public static let defaultFormat = Format.text
    public static let defaultLevel = Level.info

    public init(source: String, format: Format = OperatorLog.defaultFormat, minimum: Level = OperatorLog.defaultLevel, descriptor: Int32 = 2) {
        self.source = source
        self.format = format
        self.minimum = minimum
        self.descriptor = descriptor
    }

    /// Whether lines at `level` are written (build costly messages only then).
    public func enabled(_ level: Level) -> Bool { level >= minimum }

    /// Writes one event: `event` names it (`worker-joined`), `message` says
    /// it in words — each piece of peer text in it escaped as it is put in
    /// (`TerminalText.escaped`) — and `fields` carry its values for JSON,
    /// peer text as it came (JSON-escaped here, with every character
    /// `TerminalText.isUnsafe` names).
    public func log(_ level: Level, _ event: String, _ message: @autoclosure () -> String, _ fields: KeyValuePairs<String, Value> = [:]) {
        guard enabled(level) else { return }
        let time = OperatorLog.timestamp()
        var line: String
        switch format {
        case .text:
            let label = level.rawValue.uppercased()
            line = time + " " + label + String(repeating: " ", count: 6 - label.count) + source + ": " + message()
        case .json:
            line = "{\"time\":\"\(time)\",\"level\":\"\(level.rawValue)\",\"event\":\(OperatorLog.json(event)),"
            line += "\"source\":\(OperatorLog.json(source)),\"message\":\(OperatorLog.json(message()))"
            for (name, value) in fields {
                switch value {
                case .text(let text): line += ",\(OperatorLog.json(name)):\(OperatorLog.json(text))"
                case .number(let number):
                    line += ",\(OperatorLog.json(name)):" + (number.isFinite ? MetricFamily.format(number) : "null")
                }
            }
            line += "}"
        }
        fflush(nil)  // what was printed before comes first
        writeLine(line + "\n")
    }

    /// What stops the process (it exits 1 next): under `text` the usual
    /// `Error: …` line, for a person at a terminal; under `json` an `error`
    /// event `failed`, so a log shipper reads only JSON lines.
    /// `message` is escaped for the terminal already.
    public func failure(_ message: String) {
        switch format {
        case .text:
            let line = "Error: " + message + "\n"
            fflush(nil)
            writeLine(line)
        case .json:
            log(.error, "failed", message)
        }
    }

    private func writeLine(_ text: String) {
        var line = text
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }

    /// Now, in UTC to the millisecond: `2026-12-01T20:25:11.123Z`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = Int(now.tv_nsec / 1_000_000)
        let fraction = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
    }

    /// `text` as a JSON string: quotes, backslashes and every control
    /// character escaped (a peer's text cannot end the line or the string).
    static func json(_ text: String) -> String { CBORText.quoted(text) }
}

/// Summarises counts that grow often (rejections by code): at most one line
/// per code per `interval`, carrying how many came since the last line.
public struct CountSummary: Sendable {
    public let interval: Duration
    private var reported: [String: UInt64] = [:]
    private var lastReport: ContinuousClock.Instant?

    public init(interval: Duration = .seconds(10)) { self.interval = interval }

    /// The codes whose count grew since the last report, with how much, once
    /// `interval` has passed since it (the first growth is reported at once).
    public mutating func due(_ counts: [String: UInt64], now: ContinuousClock.Instant = .now) -> [(code: String, added: UInt64, total: UInt64)] {
        if let lastReport, now - lastReport < interval { return [] }
        var grown: [(String, UInt64, UInt64)] = []
        for (code, total) in counts.sorted(by: { $0.key < $1.key }) where total > reported[code] ?? 0 {
            grown.append((code, total - (reported[code] ?? 0), total))
            reported[code] = total
        }
        if !grown.isEmpty { lastReport = now }
        return grown
    }
}
