import CogdCommandLine
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Ends a lab run's children and removes its folders when the run itself is
/// interrupted (SIGINT, SIGTERM). Foundation starts each child in a process
/// group of its own, so a Ctrl-C reaches the run alone and its children
/// (etcd, leaders) would outlive it, serving on their ports. While a guard is
/// in place, those signals end each child added (SIGTERM, SIGKILL after 5 s;
/// the last added first), remove each folder added, and exit 128 + the
/// signal. `end()` (on every other path) puts the signals back as they were.
final class LabInterruptGuard: @unchecked Sendable {
    private let lock = NSLock()
    private var children: [pid_t] = []
    private var folders: [String] = []
    private var sources: [DispatchSourceSignal] = []
    /// Set once a signal came: children added from then on are killed as they are added.
    private var stopping = false
    /// What the run is called in the line said on stderr when interrupted.
    private let what: String

    init(what: String) {
        self.what = what
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.interrupted(by: number) }
            source.resume()
            sources.append(source)
        }
    }

    /// A child started: ended if the run is interrupted. One started while
    /// the guard is already ending the others (the run restarting a leader
    /// the guard just stopped) is killed at once.
    func add(_ process: Process) { add(pid: process.processIdentifier) }
    func add(pid: pid_t) {
        let late = lock.withLock {
            if !stopping { children.append(pid) }
            return stopping
        }
        if late { kill(pid, SIGKILL) }
    }

    /// A child the run has ended (or waited for) itself.
    func remove(_ process: Process) { remove(pid: process.processIdentifier) }
    func remove(pid: pid_t) { lock.withLock { children.removeAll { $0 == pid } } }

    /// A folder removed if the run is interrupted.
    func add(folder: String) { lock.withLock { folders.append(folder) } }

    /// The run is over: SIGINT and SIGTERM act as before.
    func end() {
        for source in sources { source.cancel() }
        sources = []
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }

    private func interrupted(by number: Int32) {
        let (pids, paths) = lock.withLock {
            stopping = true
            return (Array(children.reversed()), folders)
        }
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline, pids.contains(where: Self.isRunning) { usleep(10_000) }
        for pid in pids where Self.isRunning(pid) { kill(pid, SIGKILL) }
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
        printError("\(what): interrupted (signal \(number)); stopped the \(pids.count) process\(pids.count == 1 ? "" : "es") it had started")
        exit(128 + number)
    }

    /// Whether `pid` runs (a zombie, ended but not yet reaped, does not).
    private static func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first != "Z"
    }
}
