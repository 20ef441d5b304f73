import Cog
import Foundation
import Synchronization

/// One metric as `/metrics` exposes it (Prometheus text format 0.0.4,
/// `protocol/metrics.md`): a name, its help, its type and its samples.
public struct MetricFamily: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    /// One line of the family: `name` + `suffix`, its labels and its value.
    public struct Sample: Sendable, Equatable {
        public var suffix: String
        public var labels: [Label]
        public var value: Double

        public init(suffix: String = "", labels: [Label] = [], value: Double) {
            self.suffix = suffix
            self.labels = labels
            self.value = value
        }
    }

    public struct Label: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public var name: String
    public var help: String
    public var kind: Kind
    public var samples: [Sample]

    public init(_ name: String, _ kind: Kind, help: String, samples: [Sample]) {
        self.name = name
        self.help = help
        self.kind = kind
        self.samples = samples
    }

    /// A family of one unlabelled sample.
    public static func single(_ name: String, _ kind: Kind, help: String, _ value: Double) -> MetricFamily {
        MetricFamily(name, kind, help: help, samples: [Sample(value: value)])
    }

    /// A family of one sample per label value (`counts` in label order).
    public static func labelled(_ name: String, _ kind: Kind, help: String, label: String, _ values: [(String, Double)]) -> MetricFamily {
        MetricFamily(name, kind, help: help, samples: values.map { Sample(labels: [Label(label, $0.0)], value: $0.1) })
    }

    /// The families in the text exposition format, version 0.0.4.
    public static func exposition(_ families: [MetricFamily]) -> String {
        var text = ""
        for family in families {
            text += "# HELP \(family.name) \(escapeHelp(family.help))\n"
            text += "# TYPE \(family.name) \(family.kind.rawValue)\n"
            for sample in family.samples {
                text += family.name + sample.suffix
                if !sample.labels.isEmpty {
                    text += "{" + sample.labels.map { "\($0.name)=\"\(escapeLabel($0.value))\"" }.joined(separator: ",") + "}"
                }
                text += " " + format(sample.value) + "\n"
            }
        }
        return text
    }

    /// `\` and newline escaped, as the format asks of help text.
    static func escapeHelp(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// `\`, `"` and newline escaped, as the format asks of label values
    /// (a worker name comes from a peer: nothing in it ends the line); a
    /// value with a character a terminal acts on (an escape, a bidi
    /// control) is first written as the text logs write it
    /// (`TerminalText.escaped`), so a `curl` of `/metrics` shows it inert.
    static func escapeLabel(_ value: String) -> String {
        let text = value.unicodeScalars.contains { TerminalText.isUnsafe($0) } ? TerminalText.escaped(value) : value
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// Whole numbers without a fraction, others as Swift's shortest form; `+Inf`, `-Inf`, `NaN`.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}

/// A histogram with fixed upper bounds: `observe` costs a short scan, no
/// allocation; the family it becomes is cumulative (`_bucket{le=…}`,
/// `_sum`, `_count`).
public struct MetricHistogram: Sendable {
    public let bounds: [Double]
    private var counts: [UInt64]
    public private(set) var count: UInt64 = 0
    public private(set) var sum: Double = 0

    public init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count)
    }

    public mutating func observe(_ value: Double) {
        count &+= 1
        sum += value
        if let index = bounds.firstIndex(where: { value <= $0 }) { counts[index] &+= 1 }
    }

    public func family(_ name: String, help: String) -> MetricFamily {
        var samples: [MetricFamily.Sample] = []
        var cumulative: UInt64 = 0
        for (bound, count) in zip(bounds, counts) {
            cumulative &+= count
            samples.append(.init(suffix: "_bucket", labels: [.init("le", MetricFamily.format(bound))], value: Double(cumulative)))
        }
        samples.append(.init(suffix: "_bucket", labels: [.init("le", "+Inf")], value: Double(count)))
        samples.append(.init(suffix: "_sum", value: sum))
        samples.append(.init(suffix: "_count", value: Double(count)))
        return MetricFamily(name, .histogram, help: help, samples: samples)
    }
}

/// What the serving thread shows the metrics server: the families as of
/// its last look, and whether it is ready. The serving thread publishes
/// only when a scrape asked (`wanted`), between batches: a scrape never
/// holds a lock across a commit, and costs nothing while no one scrapes.
public final class MetricsBoard: Sendable {
    private struct Published: Sendable {
        var families: [MetricFamily] = []
        var generation: UInt64 = 0
        var ready = false
        var reason = "starting"
    }

    private let published = Mutex(Published())
    private let wanted = Atomic<Bool>(false)
    /// Nanoseconds since `origin` when the serving loop last went round.
    private let lastPass = Atomic<Int64>(0)
    private let origin = ContinuousClock.now

    public init() {}

    /// Whether a scrape waits for fresh figures (the serving loop looks each pass).
    public var isWanted: Bool { wanted.load(ordering: .relaxed) }

    /// The serving loop went round (what `/healthz` looks at).
    public func notePass() {
        let elapsed = (ContinuousClock.now - origin).components
        lastPass.store(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000, ordering: .relaxed)
    }

    /// Seconds since the serving loop last went round.
    public var secondsSincePass: Double {
        let elapsed = (ContinuousClock.now - origin).components
        let now = elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000
        return Double(now - lastPass.load(ordering: .relaxed)) / 1e9
    }

    public func publish(_ families: [MetricFamily]) {
        wanted.store(false, ordering: .relaxed)
        published.withLock {
            $0.families = families
            $0.generation &+= 1
        }
    }

    public func setReadiness(_ ready: Bool, _ reason: String) {
        published.withLock {
            $0.ready = ready
            $0.reason = reason
        }
    }

    public var readiness: (ready: Bool, reason: String) { published.withLock { ($0.ready, $0.reason) } }

    /// Asks the serving loop for fresh figures and waits up to `patience`
    /// for them; then the latest published (stale if the loop is busy).
    public func scrape(patience: Duration = .milliseconds(500)) -> [MetricFamily] {
        let before = published.withLock { $0.generation }
        wanted.store(true, ordering: .relaxed)
        let deadline = ContinuousClock.now + patience
        while ContinuousClock.now < deadline {
            if let fresh = published.withLock({ $0.generation != before ? $0.families : nil }) { return fresh }
            usleep(1_000)
        }
        return published.withLock { $0.families }
    }
}

/// The resident set size of this process, in bytes (`/proc/self/statm`; 0 where unreadable).
public func residentMemoryBytes() -> Double {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Double(fields[1]) else { return 0 }
    return pages * Double(sysconf(Int32(_SC_PAGESIZE)))
}
