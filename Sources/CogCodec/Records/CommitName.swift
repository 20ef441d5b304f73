/// A shipped commit's name: the epoch of the leader that made it and its
/// place among that leader's commits in the epoch (1, 2, …). Each epoch
/// has one leader, which numbers each commit once, so two folders that
/// name the same last commit hold the same commits — even where no record
/// tells them apart (dedup answers, refusals and openings commit without
/// one). A folder keeps its last commit's name in `meta.last-commit`, and
/// a standby names it in its `standby-hello` (`protocol/ha.md` §9).
public struct CommitName: Hashable, Sendable, CustomStringConvertible {
    public var epoch: UInt64
    public var number: UInt64

    public init(epoch: UInt64, number: UInt64) {
        self.epoch = epoch
        self.number = number
    }

    /// `meta.last-commit`'s 16 bytes: the epoch, then the number, each big-endian.
    public var bytes: [UInt8] {
        (0..<16).map { UInt8(truncatingIfNeeded: ($0 < 8 ? epoch : number) >> UInt64(8 * (7 - $0 % 8))) }
    }

    /// Reads `meta.last-commit`; nil unless it is 16 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        epoch = bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        number = bytes[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// "epoch E, commit N", as log lines name it.
    public var description: String { "epoch \(epoch), commit \(number)" }
}
