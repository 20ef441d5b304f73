import Cog

// Sources, projections and ops of the example rig.

private let _isLoggingHikeCog = Cog<Bool>.Manual(name: "trails.isLoggingHike") { false }
let isLoggingHikeCog = _isLoggingHikeCog.readOnly

private let _hikeSecondsCog = Cog<Int>.Manual(name: "trails.hikeSeconds") { 0 }
let hikeSecondsCog = _hikeSecondsCog.readOnly

private let _openTrailScreensCog = Cog<[TrailScreenID]>.Manual(name: "trails.openScreens") { [] }
let openTrailScreensCog = _openTrailScreensCog.readOnly

private let _screenTrailIDCogs = CogBox<TrailID?, TrailScreenID>.Manual(name: "trails.screenTrail") { nil }
let screenTrailIDCogs = _screenTrailIDCogs.readOnly

private let _trailFilterCogs = CogBox<String, TrailScreenID>.Manual(
    { "" }, lifetime: .whileObserved(resetToInitial: true), name: "trails.filter")
let trailFilterCogs = _trailFilterCogs.readOnly

private let _loadedTrailCogs = CogBox<Trail?, TrailScreenID>.Manual(
    { nil }, lifetime: .whileObserved(resetToInitial: true), name: "trails.loaded")
let loadedTrailCogs = _loadedTrailCogs.readOnly

private let _savedTrailIDsCog = Cog<[TrailID]>.Manual(name: "trails.saved") { [] }

/// The persisted snapshot, derived from the sources it covers.
let trailsSnapshotCog = Cog<TrailsSnapshot>(name: "trails.snapshot") { c in
    let savedTrailIDs = c[_savedTrailIDsCog]
    return TrailsSnapshot(savedTrailIDs: savedTrailIDs)
}

extension CogOps {
    /// Opens the hike logger.
    func startLoggingHike() { turn(_isLoggingHikeCog, to: true) }

    /// Closes the hike logger.
    func stopLoggingHike() { turn(_isLoggingHikeCog, to: false) }

    /// Starts the hike timer from zero.
    func resetHikeTimer() { turn(_hikeSecondsCog, to: 0) }

    /// Adds one second to the hike timer.
    func tickHikeTimer() { turn { c in c[_hikeSecondsCog] += 1 } }

    /// Opens a screen for a trail.
    func openTrailScreen(_ screenID: TrailScreenID, trail trailID: TrailID) {
        turn { c in
            c[_screenTrailIDCogs[screenID]] = trailID
            c[_openTrailScreensCog] = c[_openTrailScreensCog] + [screenID]
        }
    }

    /// Closes a screen, then releases what belonged to it.
    func closeTrailScreen(_ screenID: TrailScreenID) {
        turn { c in c[_openTrailScreensCog].removeAll { $0 == screenID } }
        discard(_trailFilterCogs[screenID])
        discard(_loadedTrailCogs[screenID])
    }

    /// Types into one screen's filter.
    func typeTrailFilter(_ text: String, on screenID: TrailScreenID) {
        turn(_trailFilterCogs[screenID], to: text)
    }

    /// Publishes a loaded trail, only for a screen that is still open.
    func acceptTrail(_ trail: Trail, receipt: TrailScreenID) {
        turn { c in
            guard c[_openTrailScreensCog].contains(receipt) else { return }
            c[_loadedTrailCogs[receipt]] = trail
        }
    }

    /// Restores persisted state at assembly.
    func installTrails(_ snapshot: TrailsSnapshot) {
        turn(_savedTrailIDsCog, to: snapshot.savedTrailIDs)
    }

    /// Bookmarks a trail.
    func saveTrail(_ trailID: TrailID) {
        turn { c in
            guard !c[_savedTrailIDsCog].contains(trailID) else { return }
            c[_savedTrailIDsCog].append(trailID)
        }
    }
}
