import Cog

extension TrailsRig {
    /// The Trails rig (`--rig trails`, `cogd`'s default): trail screens
    /// loaded and accepted with receipts, the hike timer, the journal. A
    /// worker running it loads trails from the built-in catalogue (one
    /// second each) and ticks the timer on the host's clock (`CogRig.Host.clock`:
    /// the wall clock in `cogd worker`).
    public static let rig = CogRig(
        name: "trails",
        summary: "trail screens loaded with receipts, a hike timer, a journal",
        schemaVersion: 1,
        durableSources: [_openScreensCog, _screenTrailCogs, _loadedTrailCogs, _isLoggingHikeCog, _hikeSecondsCog, _journalCog],
        ops: [openScreenOp, closeScreenOp, acceptTrailOp, startHikeOp, stopHikeOp, tickHikeOp, writeJournalOp],
        mechanisms: { host in mechanisms(clock: host.clock) })
}
