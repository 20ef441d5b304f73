import Cog

/// Ticks the hike timer once a second while the logger is open.
struct HikeTimerMechanism: Mechanism {
    var clock: any Clock<Duration>

    func operate(_ m: MechanismController) {
        m.scope(isLoggingHikeCog, name: "hikeTimer") { s in
            s.resetHikeTimer()
            s.task(name: "tick") { [weak s, clock] in
                while true {
                    try await clock.sleep(for: .seconds(1))
                    guard let s else { return }
                    await s.tickHikeTimer()
                }
            }
        }
    }
}

/// Loads each open screen's trail and accepts it with the screen's receipt.
struct TrailLoadingMechanism: Mechanism {
    let loader: TrailLoader
    /// Each load task, in start order (so tests can wait for late completions).
    let loads: LoadLog

    func operate(_ m: MechanismController) {
        m.scope(each: openTrailScreensCog, name: "trailScreen") { screenID, s in
            guard let trailID = s.peek(screenTrailIDCogs[screenID]) else { return }
            let load = s.task(name: "load") { [loader, s] in
                let trail = await loader.load(trailID)
                await s.acceptTrail(trail, receipt: screenID)
            }
            loads.tasks.append(load)
        }
    }
}

/// The tasks a loading mechanism started.
@MainActor
final class LoadLog {
    var tasks: [Task<Void, any Error>] = []
}

/// Install-then-watch persistence: read the store once, then save every
/// changed snapshot.
struct TrailsPersistenceMechanism: Mechanism {
    let store: TrailStore

    func operate(_ m: MechanismController) {
        let snapshot = store.load() ?? .empty
        m.installTrails(snapshot)
        m.watch(trailsSnapshotCog, initial: .skip, name: "persistence") { _, snapshot in
            store.save(snapshot)
        }
    }
}
