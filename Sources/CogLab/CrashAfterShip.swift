import CogCluster
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A lab leader that dies between shipping a commit and its own commit of
/// it, on cue: `drill --ha`'s `crash-after-ship` fault. With
/// `COGD_LAB_CRASH_AFTER_SHIP=FILE` in its environment, a `cogd-lab leader`
/// that ships a commit to a standby while FILE exists removes FILE, gives
/// ZeroMQ a moment to send what it queued, and exits 70 before its own
/// commit runs — so a standby may hold a commit its leader lacks (ha.md §8).
/// Only the lab reads the variable: `cogd` has no such switch.
enum CrashAfterShip {
    static let environmentVariable = "COGD_LAB_CRASH_AFTER_SHIP"
    /// The status the leader exits with (EX_SOFTWARE): the drill tells this crash from any other exit by it.
    static let exitStatus: Int32 = 70

    /// Arms this process's leader when the environment names a trigger file.
    /// - Important: Call at start, before any thread does (`Leader.afterShipping` is read unguarded).
    static func arm(environment: [String: String]) {
        guard let trigger = environment[environmentVariable], !trigger.isEmpty else { return }
        Leader.afterShipping = { firstRevision in
            // Removing the file is the cue taken: one crash per file the drill creates.
            guard unlink(trigger) == 0 else { return }
            let line = "cogd-lab: \(environmentVariable): the commit from revision \(firstRevision) went to the standbys; exiting \(exitStatus) before this leader's own commit\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
            // ZeroMQ's I/O threads send what the serving thread queued; nothing more is released meanwhile.
            usleep(100_000)
            _exit(exitStatus)
        }
    }
}
