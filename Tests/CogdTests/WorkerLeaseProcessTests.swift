import CogLog
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A worker's lease with the real binaries (`protocol/cogwire.md` §6b): a
/// worker that hears no welcome for the leader's heartbeat timeout less the
/// margin suspends its placed instances' effects, and starts them again,
/// as after a placement, once the leader answers.
@Suite("worker lease: a worker that hears no leader stops its placed effects", .serialized, .timeLimit(.minutes(10)))
struct WorkerLeaseProcessTests {
    let folder = TemporaryFolder()
    let ports = ClusterPorts()

    /// The value of the unlabelled sample `name` on the worker's `/metrics`.
    static func sample(_ port: Int, _ name: String) throws -> Double? {
        let (status, body) = try MetricsEndpointTests.get(port, "/metrics")
        #expect(status == 200)
        return body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    func greetings(_ account: String) throws -> Int {
        let store = try TurnStore(directory: folder.path, mode: .reader)
        defer { store.close() }
        return try store.greetings(of: account) ?? 0
    }

    @Test func `a worker whose leader is stopped suspends its placed scope children within the lease and opens them again after SIGCONT`() throws {
        defer { folder.cleanUp() }
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 3)
        defer { leader.stop() }
        // A stopped leader is let go on every way out, so it can be stopped.
        defer { leader.resume() }
        let metrics = freePort()
        let worker = try CogdProcess([
            "worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger-greeter", "--heartbeat-timeout", "3",
            "--metrics", "127.0.0.1:\(metrics)",
        ])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "w1 synced: \(worker.lines)")
        _ = try ports.call("ledger.open", #"{"account": "ann", "balance": 5}"#)
        // The greeter child for ann (placed on w1, its group's one member) greets once.
        #expect(try waitUntil(timeout: .seconds(20)) { try greetings("ann") == 1 }, "ann greeted: \(worker.lines)")
        #expect(try Self.sample(metrics, "cogd_worker_lease_suspended") == 0)

        leader.pause()
        let expired = worker.waitForLine(timeout: .seconds(20)) { $0.contains("WARN") && $0.contains("no welcome from the leader for 2.0 s") }
        #expect(expired != nil, "the lease ran out: \(worker.lines)")
        #expect(try Self.sample(metrics, "cogd_worker_lease_suspended") == 1)
        #expect(try Self.sample(metrics, "cogd_worker_lease_expiries_total") == 1)

        leader.resume()
        let renewed = worker.waitForLine(timeout: .seconds(20)) { $0.contains("start their tasks and reactions again") }
        #expect(renewed != nil, "the lease was renewed: \(worker.lines)")
        #expect(try Self.sample(metrics, "cogd_worker_lease_suspended") == 0)
        // The child opened again, as after a placement: a new lifetime greets ann again.
        #expect(try waitUntil(timeout: .seconds(20)) { try greetings("ann") == 2 }, "ann greeted again: \(worker.lines)")
        // The leader was stopped, not the worker silent: it gave nothing up.
        #expect(!worker.lines.contains { $0.contains("the leader gave this worker up") }, "\(worker.lines)")
    }
}
