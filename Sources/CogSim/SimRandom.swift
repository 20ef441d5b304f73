/// The simulator's only source of chance: SplitMix64 from a seed, so one
/// seed makes one run, bit for bit.
public struct SimRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool {
        guard p > 0 else { return false }
        return Double(next() >> 11) / Double(1 << 53) < p
    }

    /// A whole number in `range`.
    public mutating func int(_ range: ClosedRange<Int>) -> Int {
        Int.random(in: range, using: &self)
    }

    /// A duration between `low` and `high` milliseconds.
    public mutating func milliseconds(_ low: Int, _ high: Int) -> Duration {
        .milliseconds(int(low...high))
    }

    /// One element of a non-empty collection.
    public mutating func pick<C: RandomAccessCollection>(_ items: C) -> C.Element {
        items[items.index(items.startIndex, offsetBy: int(0...(items.count - 1)))]
    }
}
