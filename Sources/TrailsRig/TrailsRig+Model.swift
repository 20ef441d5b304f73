import Cog

/// The default rig: trail screens that load their trail and accept it with a
/// receipt, a hike logger whose timer ticks while it is open, and a journal
/// of what was shown — written with the Cog API, run across processes.
public enum TrailsRig {
    /// Touches every declaration so its durable sources and remote ops are
    /// registered in this process: the same as building `rig`, which is what
    /// a leader or worker uses (kept for code that only needs the
    /// declarations registered).
    public static func register() {
        _ = rig
    }

    /// How many lines `trails.journal` keeps: the newest, the oldest dropped
    /// first. A journal that grew forever would make every turn that writes
    /// it larger than the last, until no reader accepts the record.
    public static let journalLineLimit = 100

    /// The most UTF-8 bytes one journal line keeps (a peer sends the line):
    /// a longer one is cut at a character boundary and ends with `…`.
    public static let journalLineByteLimit = 200

    /// `line` as the journal keeps it: whole when it fits in
    /// `journalLineByteLimit` bytes, else its longest prefix of whole
    /// Unicode scalars that fits with a closing `…`.
    static func journalLine(_ line: String) -> String {
        guard line.utf8.count > journalLineByteLimit else { return line }
        let ellipsis: Unicode.Scalar = "…"
        let budget = journalLineByteLimit - UTF8.width(ellipsis)
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in line.unicodeScalars {
            bytes += UTF8.width(scalar)
            if bytes > budget { break }
            kept.append(scalar)
        }
        kept.append(ellipsis)
        return String(kept)
    }

    /// The mechanisms a worker runs for this rig.
    public static func mechanisms(
        loader: TrailLoader = .live(delay: .seconds(1)), clock: any Clock<Duration> = ContinuousClock()
    ) -> [any Mechanism] {
        [TrailScreensMechanism(loader: loader), HikeTimerMechanism(clock: clock), JournalMechanism()]
    }
}

/// One opening of a trail screen; two openings of one trail get two IDs.
public typealias TrailScreenID = Int

/// A trail as the catalogue describes it.
public struct Trail: Codable, Equatable, Sendable {
    public var id: String
    public var name: String
    public var lengthKm: Double

    public init(id: String, name: String, lengthKm: Double) {
        self.id = id
        self.name = name
        self.lengthKm = lengthKm
    }
}

/// Opening a screen for a trail.
public struct ScreenOpening: Codable, Equatable, Sendable {
    public var screen: TrailScreenID
    public var trail: String

    public init(screen: TrailScreenID, trail: String) {
        self.screen = screen
        self.trail = trail
    }
}

/// A loaded trail, with the receipt of the screen that asked for it.
public struct TrailAcceptance: Codable, Equatable, Sendable {
    public var trail: Trail
    public var receipt: TrailScreenID

    public init(trail: Trail, receipt: TrailScreenID) {
        self.trail = trail
        self.receipt = receipt
    }
}

/// Loads trails (a capability: tests and the live rig pass their own).
public struct TrailLoader: Sendable {
    public var load: @Sendable (String) async throws -> Trail

    public init(load: @escaping @Sendable (String) async throws -> Trail) {
        self.load = load
    }

    /// A built-in catalogue, answering after `delay` like a slow service.
    public static func live(delay: Duration) -> TrailLoader {
        TrailLoader { id in
            try await Task.sleep(for: delay)
            let catalogue = ["ridge": ("Ridge Loop", 12.5), "lake": ("Lake Shore", 6.0), "summit": ("Summit Trail", 18.2)]
            let entry = catalogue[id] ?? ("Trail \(id)", 5.0)
            return Trail(id: id, name: entry.0, lengthKm: entry.1)
        }
    }
}
