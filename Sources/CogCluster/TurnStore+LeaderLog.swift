import CogLog
import CogProtocol

/// The leader core reads the LMDB turn store through `LeaderLog`.
extension TurnStore: LeaderLog {}

/// The leader's LMDB view of the state table is what its snapshot sender reads.
extension StateSnapshotReader: SnapshotSource {}
