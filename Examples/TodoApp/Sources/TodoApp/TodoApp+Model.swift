import Cog

/// The todo list on cogd: todos added, completed and removed by ops, each
/// open todo estimated by a worker in a scope of its own and accepted with
/// a receipt, and a report of what is left — written with the Cog API
/// (cogd's `docs/api-guide.md`), run across processes (`TodoApp+Rig.swift`
/// lists it all).
public enum TodoApp {}

/// One todo's identity, chosen by whoever adds it (`"milk"`): the key of
/// each row's boxes and the receipt of its estimate. Encodes as its raw
/// string, so `todo call todos.complete '"milk"'` names it.
public struct TodoID: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }
}

/// Adding a todo: its identity and its title.
public struct TodoAddition: Codable, Equatable, Sendable {
    public var id: TodoID
    public var title: String

    public init(id: TodoID, title: String) {
        self.id = id
        self.title = title
    }
}

/// An estimate, in minutes, with the receipt of the todo it is for.
public struct EstimateAcceptance: Codable, Equatable, Sendable {
    public var minutes: Int
    public var receipt: TodoID

    public init(minutes: Int, receipt: TodoID) {
        self.minutes = minutes
        self.receipt = receipt
    }
}

/// Estimates how long a todo takes (a capability: a test or another
/// deployment passes its own, the worker passes `.live`).
public struct TodoEstimator: Sendable {
    public var estimate: @Sendable (_ title: String) async throws -> Int

    public init(estimate: @escaping @Sendable (_ title: String) async throws -> Int) {
        self.estimate = estimate
    }

    /// Five minutes a word, answering after `delay` on `clock` like a slow
    /// service (the worker passes its host's clock: `CogRig.Host.clock`).
    public static func live(delay: Duration, clock: any Clock<Duration> = ContinuousClock()) -> TodoEstimator {
        TodoEstimator { title in
            try await clock.sleep(for: delay)
            return 5 * max(1, title.split(separator: " ").count)
        }
    }
}

extension TodoApp {
    /// The longest identity `todos.add` accepts, in UTF-8 bytes.
    public static let idByteLimit = 64

    /// The longest title `todos.add` accepts, in UTF-8 bytes (a peer sends
    /// it: every value from outside has a limit).
    public static let titleByteLimit = 200

    /// The largest estimate `todos.acceptEstimate` accepts: one day.
    public static let estimateMinuteLimit = 24 * 60
}
