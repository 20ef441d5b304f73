import Cog

/// The open trail screens, in opening order.
let _openScreensCog = Cog<[TrailScreenID]>.Manual(name: "trails.openScreens") { [] }
public let openScreensCog = _openScreensCog.readOnly

/// Which trail each screen shows.
let _screenTrailCogs = CogBox<String, TrailScreenID>.Manual(name: "trails.screenTrail") { "" }
public let screenTrailCogs = _screenTrailCogs.readOnly

/// The trail each screen loaded, once accepted.
let _loadedTrailCogs = CogBox<Trail?, TrailScreenID>.Manual(
    { nil }, lifetime: .whileObserved(resetToInitial: true), name: "trails.loaded")
public let loadedTrailCogs = _loadedTrailCogs.readOnly

/// Whether the hike logger is open.
let _isLoggingHikeCog = Cog<Bool>.Manual(name: "trails.isLoggingHike") { false }
public let isLoggingHikeCog = _isLoggingHikeCog.readOnly

/// Seconds on the hike timer.
let _hikeSecondsCog = Cog<Int>.Manual(name: "trails.hikeSeconds") { 0 }
public let hikeSecondsCog = _hikeSecondsCog.readOnly

/// What the journal recorded, newest last: at most
/// `TrailsRig.journalLineLimit` lines (the oldest go first), each at most
/// `TrailsRig.journalLineByteLimit` bytes, so the journal — and every turn
/// record that carries it — stays small however long the rig runs.
let _journalCog = Cog<[String]>.Manual(name: "trails.journal") { [] }
public let journalCog = _journalCog.readOnly

/// The screen on top, if any.
public let currentScreenCog = Cog<TrailScreenID?>(name: "trails.currentScreen") { c in
    let openScreens = c[openScreensCog]
    return openScreens.last
}

let openScreenOp = RemoteOp<ScreenOpening>(
    name: "trails.openScreen", summary: "opens screen N showing a trail (a worker then loads it); an open screen stays as it is",
    example: ScreenOpening(screen: 1, trail: "ridge")
) { c, opening in
    guard !c[_openScreensCog].contains(opening.screen) else { return }
    c[_screenTrailCogs[opening.screen]] = opening.trail
    c[_openScreensCog].append(opening.screen)
}

let closeScreenOp = RemoteOp<TrailScreenID>(
    name: "trails.closeScreen", summary: "closes a screen and drops its loaded trail (the argument: the screen)", example: 1
) { c, screen in
    c[_openScreensCog].removeAll { $0 == screen }
    c[_loadedTrailCogs[screen]] = nil
}

/// Publishes a loaded trail only for a screen that is still open (the receipt check).
let acceptTrailOp = RemoteOp<TrailAcceptance>(
    name: "trails.accept", summary: "publishes a loaded trail for the screen named by the receipt, if it is still open",
    example: TrailAcceptance(trail: Trail(id: "ridge", name: "Ridge Loop", lengthKm: 12.5), receipt: 1)
) { c, acceptance in
    guard c[_openScreensCog].contains(acceptance.receipt) else { return }
    c[_loadedTrailCogs[acceptance.receipt]] = acceptance.trail
}

let startHikeOp = RemoteOp<Bool>(name: "trails.startHike", summary: "opens the hike logger (the argument is ignored)", example: true) { c, _ in
    c[_isLoggingHikeCog] = true
}

let stopHikeOp = RemoteOp<Bool>(name: "trails.stopHike", summary: "closes the hike logger (the argument is ignored)", example: false) { c, _ in
    c[_isLoggingHikeCog] = false
}

/// Adds a positive number of seconds while the logger is open; refuses
/// (writes nothing) a tick that is zero or negative (the timer only moves
/// forward) or that would overflow the timer.
let tickHikeOp = RemoteOp<Int>(
    name: "trails.tickHike", summary: "adds seconds (1 or more) to the hike timer while the logger is open", example: 5
) { c, seconds in
    guard c[_isLoggingHikeCog], seconds > 0 else { return }
    let (total, overflow) = c[_hikeSecondsCog].addingReportingOverflow(seconds)
    guard !overflow else { return }
    c[_hikeSecondsCog] = total
}

/// Appends a line (cut to `TrailsRig.journalLineByteLimit` bytes) and drops
/// the oldest lines beyond `TrailsRig.journalLineLimit`.
let writeJournalOp = RemoteOp<String>(
    name: "trails.journal", summary: "appends a line to the journal (cut to 200 bytes; the newest 100 lines kept)",
    example: "reached the ridge"
) { c, line in
    var journal = c[_journalCog]
    journal.append(TrailsRig.journalLine(line))
    if journal.count > TrailsRig.journalLineLimit { journal.removeFirst(journal.count - TrailsRig.journalLineLimit) }
    c[_journalCog] = journal
}

extension CogOps {
    /// Opens a screen showing a trail.
    public func openScreen(_ screen: TrailScreenID, trail: String) {
        perform(openScreenOp, ScreenOpening(screen: screen, trail: trail))
    }

    /// Closes a screen (its load, if still out, will be refused by its receipt or its retired scope).
    public func closeScreen(_ screen: TrailScreenID) { perform(closeScreenOp, screen) }

    /// Publishes a loaded trail for the screen that asked for it.
    public func acceptTrail(_ trail: Trail, receipt: TrailScreenID) {
        perform(acceptTrailOp, TrailAcceptance(trail: trail, receipt: receipt))
    }

    /// Opens the hike logger.
    public func startHike() { perform(startHikeOp, true) }

    /// Closes the hike logger.
    public func stopHike() { perform(stopHikeOp, false) }

    /// Adds seconds to the hike timer while the logger is open (a tick that
    /// is not positive, or would overflow the timer, changes nothing).
    public func tickHike(seconds: Int) { perform(tickHikeOp, seconds) }

    /// Appends a journal line, keeping the newest `TrailsRig.journalLineLimit`
    /// lines; a line longer than `TrailsRig.journalLineByteLimit` bytes is cut.
    public func writeJournal(_ line: String) { perform(writeJournalOp, line) }
}
