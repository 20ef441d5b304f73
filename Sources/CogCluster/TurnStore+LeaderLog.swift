import CogLog
import CogProtocol

/// The leader core reads the LMDB turn store through `LeaderLog`.
extension TurnStore: LeaderLog {}
