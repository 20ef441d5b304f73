import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Ctrl-C twice: a worker still says goodbye and exits with the status its
/// help documents (0); a leader's second signal says it stops at once.
@Suite("Stopping by signal", .serialized, .timeLimit(.minutes(10)))
struct StopSignalTests {
    @Test func `a second signal to a stopping worker is told the goodbye comes first; the worker says it and exits 0`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1")
        defer { worker.stop() }
        // Both signals pending while it is stopped (two SIGINTs would merge into one), then delivered together.
        worker.pause()
        worker.interrupt()
        kill(worker.process.processIdentifier, SIGTERM)
        worker.resume()
        waitForExit(worker.process)
        #expect(!worker.process.isRunning)
        #expect(worker.process.terminationStatus == 0, "\(worker.lines)")
        // (Its output is read until the pipe closes: waited for, bounded.)
        #expect(
            worker.waitForLine { $0 == "cogd worker w1: already stopping: saying goodbye to the leader first (a third signal stops at once, exit 1)" }
                != nil, "\(worker.lines)")
        #expect(worker.waitForLine { $0.contains("cogd worker w1: stopped at revision") } != nil, "\(worker.lines)")
        #expect(leader.waitForLine { $0.contains("worker w1 left (said goodbye as it stopped)") } != nil, "\(leader.lines)")
    }

    @Test func `a second signal to a draining leader stops it at once with exit 1, and says so`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        leader.pause()
        leader.interrupt()
        kill(leader.process.processIdentifier, SIGTERM)
        leader.resume()
        waitForExit(leader.process)
        #expect(!leader.process.isRunning)
        #expect(leader.process.terminationStatus == 1, "\(leader.lines)")
        #expect(leader.waitForLine { $0 == "cogd leader: stopped at once by another signal, without finishing (exit 1)" } != nil, "\(leader.lines)")
    }
}
