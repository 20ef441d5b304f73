/// How much of its turn log a writer keeps (`cogd leader --retain-turns N |
/// --retain-age DURATION | --retain-bytes SIZE`, `protocol/turnlog.md` §2a).
///
/// Older records are removed a few at a time (`TurnStore.append(…,
/// retention:)` and `TurnStore.prune(_:now:)`); the state table keeps every
/// current value, so nothing current is lost. Records whose applied
/// requests' replies are not indexed yet (`TurnStore.unindexedFrom`) and the
/// newest record are always kept. The answers the `dedup` table holds are
/// kept as long as the records around them: an answer stored while the log
/// ended before the first revision kept is removed too (its request's
/// retries are then refused `expired`, never run again).
///
/// ```swift
/// try store.append(drafts, replies: replies, retention: .turns(100_000))
/// ```
public enum Retention: Sendable, Equatable, CustomStringConvertible {
    /// Every record, for good (the default: a log that was never pruned
    /// stays readable by cogd builds that predate retention).
    case everything
    /// The newest `count` revisions (at least 1).
    case turns(UInt64)
    /// The records committed within the last `seconds` (by the record's
    /// `time`, against the writer's clock), and always the newest one.
    case age(seconds: Double)
    /// As many of the newest records as keep the `turns` database within
    /// `bytes` (its pages, as `cogd log stats` counts them), and always the newest one.
    case bytes(UInt64)

    public var description: String {
        switch self {
        case .everything: "keeps every turn"
        case .turns(let count): "keeps the newest \(count) turn\(count == 1 ? "" : "s")"
        case .age(let seconds): "keeps the turns of the last \(Retention.durationText(seconds))"
        case .bytes(let bytes): "keeps the newest turns within \(Retention.sizeText(bytes)) of records"
        }
    }

    /// `seconds` in the largest whole unit that fits (`7d`, `90m`, `45s`).
    public static func durationText(_ seconds: Double) -> String {
        for (unit, size) in [("d", 86_400.0), ("h", 3_600.0), ("m", 60.0)] where seconds >= size && seconds.truncatingRemainder(dividingBy: size) == 0 {
            return "\(Int(seconds / size))\(unit)"
        }
        return seconds == seconds.rounded() ? "\(Int(seconds))s" : "\(seconds)s"
    }

    /// `bytes` in the largest binary unit that divides it (`512MiB`, `10GiB`).
    public static func sizeText(_ bytes: UInt64) -> String {
        for (unit, shift) in [("TiB", UInt64(40)), ("GiB", 30), ("MiB", 20), ("KiB", 10)] where bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift)\(unit)"
        }
        return "\(bytes) bytes"
    }

    /// Reads a duration: a whole number and a unit, `s`, `m`, `h` or `d`
    /// (`30s`, `15m`, `12h`, `7d`); nil for anything else, zero, or more than 100 years.
    public static func parseDuration(_ text: String) -> Double? {
        guard let unit = text.last, let size = ["s": 1.0, "m": 60, "h": 3_600, "d": 86_400][String(unit)],
            let count = UInt64(text.dropLast()), count > 0
        else { return nil }
        let seconds = Double(count) * size
        return seconds <= 100 * 365 * 86_400 ? seconds : nil
    }

    /// Reads a size: a whole number of bytes, or one with a unit — `KiB`,
    /// `MiB`, `GiB`, `TiB` (powers of 1,024) or `KB`, `MB`, `GB`, `TB` (of
    /// 1,000); nil for anything else, zero, or one that overflows 64 bits.
    public static func parseSize(_ text: String) -> UInt64? {
        let units: [(String, UInt64)] = [
            ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
            ("KB", 1_000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000), ("B", 1),
        ]
        var number = Substring(text)
        var multiplier: UInt64 = 1
        if let (unit, size) = units.first(where: { text.hasSuffix($0.0) }) {
            number = text.dropLast(unit.count)
            multiplier = size
        }
        guard let count = UInt64(number), count > 0 else { return nil }
        let (bytes, overflow) = count.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : bytes
    }
}
