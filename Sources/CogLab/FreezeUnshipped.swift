import CogCluster
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A lab leader that freezes holding commits no standby received, on cue:
/// as one whose ZeroMQ I/O thread stopped before it sent what the serving
/// thread shipped and then committed. With `COGD_LAB_FREEZE_UNSHIPPED=FILE`
/// in its environment, a `cogd-lab leader` about to ship a commit while FILE
/// exists reads N from FILE (a count; empty: 1) and removes it, keeps that
/// commit and the N − 1 after it from the standbys, commits them, and stops
/// itself (SIGSTOP) after the last until it is sent SIGCONT — past its lease
/// TTL, it then steps down with a last commit that released nothing (ha.md
/// §5), and with N above 1 a deposed tail before it. FILE holding `shipped`
/// instead ships the next commit as usual and, once it is committed, waits
/// 0.3 s (the ship goes out, the standby's acknowledgement comes back and
/// waits unread) before it freezes. Only the lab
/// reads the variable: `cogd` has no such switch.
enum FreezeUnshipped {
    static let environmentVariable = "COGD_LAB_FREEZE_UNSHIPPED"

    private final class Cue: Sendable {
        /// Commits still to keep from the standbys.
        let withholding = Atomic<Int>(0)
        let taken = Atomic<Bool>(false)
        /// The commit was shipped as usual (`shipped`).
        let shipped = Atomic<Bool>(false)
    }

    /// Arms this process's leader when the environment names a trigger file.
    /// - Important: Call at start, before any thread does (the leader's hooks are read unguarded).
    static func arm(environment: [String: String]) {
        guard let trigger = environment[environmentVariable], !trigger.isEmpty else { return }
        let cue = Cue()
        Leader.withholdShip = { firstRevision in
            if cue.withholding.load(ordering: .sequentiallyConsistent) == 0 {
                // Removing the file is the cue taken: one freeze per file.
                let text = ((try? String(contentsOfFile: trigger, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
                guard unlink(trigger) == 0 else { return false }
                if text == "shipped" {
                    cue.shipped.store(true, ordering: .sequentiallyConsistent)
                    cue.taken.store(true, ordering: .sequentiallyConsistent)
                    say("the commit from revision \(firstRevision) is shipped; freezing once it is committed")
                    return false
                }
                cue.withholding.store(min(max(Int(text) ?? 1, 1), 1_000), ordering: .sequentiallyConsistent)
            }
            let left = cue.withholding.subtract(1, ordering: .sequentiallyConsistent).newValue
            if left == 0 { cue.taken.store(true, ordering: .sequentiallyConsistent) }
            say("the commit from revision \(firstRevision) is kept from the standbys")
            return true
        }
        Leader.afterCommit = { revisions in
            guard cue.taken.exchange(false, ordering: .sequentiallyConsistent) else { return }
            let shipped = cue.shipped.load(ordering: .sequentiallyConsistent)
            // The serving thread waits here, reading nothing, while ZeroMQ's I/O thread sends the ship and takes the acknowledgement in.
            if shipped { usleep(300_000) }
            let received = shipped ? "shipped as usual" : "which no standby received"
            say("committed the commit from revision \(revisions.lowerBound), \(received); stopping (SIGSTOP) until SIGCONT")
            kill(getpid(), SIGSTOP)
        }
    }

    private static func say(_ text: String) {
        let line = "cogd-lab: \(environmentVariable): \(text)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }
}
