import Cog

/// Loads each open screen's trail and accepts it with the screen's receipt.
/// The load runs in the screen's scope: closing the screen cancels it, and
/// a late acceptance is refused (locally by retirement, at the leader by the
/// retired instance, and in the op by the receipt).
struct TrailScreensMechanism: Mechanism {
    let loader: TrailLoader

    func operate(_ m: MechanismController) {
        m.scope(each: openScreensCog, name: "trailScreen") { screen, s in
            let trailID = s.peek(screenTrailCogs[screen])
            s.task(name: "load") { [weak s, loader] in
                let trail = try await loader.load(trailID)
                await s?.acceptTrail(trail, receipt: screen)
            }
        }
    }
}

/// Ticks the hike timer once a second while the logger is open.
struct HikeTimerMechanism: Mechanism {
    let clock: any Clock<Duration>

    func operate(_ m: MechanismController) {
        m.scope(isLoggingHikeCog, name: "hikeTimer") { s in
            s.task(name: "tick") { [weak s, clock] in
                while true {
                    try await clock.sleep(for: .seconds(1))
                    guard let s else { return }
                    await s.tickHike(seconds: 1)
                }
            }
        }
    }
}

/// Writes a journal line when the current screen changes (a later turn).
struct JournalMechanism: Mechanism {
    func operate(_ m: MechanismController) {
        m.watch(currentScreenCog, initial: .skip, name: "screens") { _, screen in
            m.writeJournal(screen.map { "showing screen \($0)" } ?? "no screen")
        }
    }
}
