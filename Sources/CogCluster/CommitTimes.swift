import CogProtocol
import CogWire

/// The leader's latest commits — how long each took and how many turns it
/// held — for `cogd status`: what durability costs the leader now, beside
/// what the disk allows (`cogd bench log`).
struct CommitTimes {
    /// How many of the latest commits are kept.
    let capacity: Int
    private(set) var count: UInt64 = 0
    private var micros: [Double] = []
    private var turns: [Int] = []
    private var next = 0

    init(capacity: Int = 1_024) {
        precondition(capacity > 0, "internal inconsistency: a commit window holds at least one commit")
        self.capacity = capacity
    }

    mutating func record(_ duration: Duration, turns held: Int) {
        let value = Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
        count += 1
        if micros.count < capacity {
            micros.append(value)
            turns.append(held)
        } else {
            micros[next] = value
            turns[next] = held
        }
        next = (next + 1) % capacity
    }

    /// The figures over the kept commits; nil before the first.
    var summary: LeaderStatus.Commits? {
        guard !micros.isEmpty else { return nil }
        let sorted = micros.sorted()
        func percentile(_ fraction: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] }
        return LeaderStatus.Commits(
            count: count, window: UInt64(sorted.count), p50Micros: percentile(0.5), p99Micros: percentile(0.99),
            turnsPerCommit: Double(turns.reduce(0, +)) / Double(turns.count))
    }
}
