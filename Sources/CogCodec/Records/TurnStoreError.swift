/// Why the turn store could not do what was asked.
///
/// Defined beside the records (not in `CogLog`) because the leader core's
/// `LeaderLog` throws it; what turns an LMDB failure into one lives in
/// `CogLog` (`TurnStoreError+LMDB.swift`).
public struct TurnStoreError: Error, Equatable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        /// The data folder does not exist.
        public static let missingFolder = Code(name: "missing-folder")
        /// The data folder cannot be written.
        public static let notWritable = Code(name: "not-writable")
        /// Another writer holds the data folder.
        public static let locked = Code(name: "locked")
        /// The folder was written by a newer cogd.
        public static let newerSchema = Code(name: "newer-schema")
        /// The folder was written by an older cogd and must be upgraded
        /// first (`cogd log upgrade`).
        public static let olderSchema = Code(name: "older-schema")
        /// `data.mdb` is missing, empty, of another log or behind what the
        /// folder's `cogd.identity` says was committed (a writer refuses to
        /// restart history unless told the loss is accepted).
        public static let dataLoss = Code(name: "data-loss")
        /// An appended turn does not continue the log.
        public static let outOfOrder = Code(name: "out-of-order")
        /// A stored record does not decode.
        public static let corrupt = Code(name: "corrupt")
        /// The log's epoch is past the last a leader can serve (2^32 − 1:
        /// scope instance numbers hold the epoch in their high 32 bits).
        public static let epochTooHigh = Code(name: "epoch-too-high")
        /// A shipped commit belongs to another log than the standby's copy (`protocol/ha.md` §8).
        public static let otherLog = Code(name: "other-log")
        /// A shipped commit's epoch is below the highest the standby's copy
        /// has applied: a deposed leader's ship, refused (the fencing token).
        public static let fenced = Code(name: "fenced")
        /// After a shipped record the standby's state digest is not the
        /// leader's: the copy has drifted and must sync again.
        public static let diverged = Code(name: "diverged")
        /// LMDB itself failed.
        public static let lmdb = Code(name: "lmdb")
        /// A state snapshot being read was given up (the map grew under it,
        /// or the store closed): read a new one.
        public static let snapshotEnded = Code(name: "snapshot-ended")
        public var description: String { name }
    }

    public let code: Code
    public let message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
