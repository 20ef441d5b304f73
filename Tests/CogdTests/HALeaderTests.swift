import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd leader --ha` on a real etcd (protocol/ha.md): the node etcd makes
/// leader serves in the epoch etcd minted, another waits as a standby, a
/// leader frozen past its lease steps down without answering what arrived
/// meanwhile, and a start etcd cannot back is refused with what to do.
@Suite("cogd leader --ha on a real etcd", .serialized, .timeLimit(.minutes(10)))
struct HALeaderTests {
    struct Node {
        let name: String
        let folder = TemporaryFolder()
        let requests = freePort()
        let turns = freePort()
        let metrics = freePort()

        func arguments(_ etcd: TestEtcd, leaseTTL: Int = 2) -> [String] {
            [
                "leader", "--ha", etcd.url, "--cluster", "bank", "--name", name, "--lease-ttl", String(leaseTTL), "--data", folder.path,
                "--requests", "tcp://127.0.0.1:\(requests)", "--turns", "tcp://127.0.0.1:\(turns)", "--metrics", "127.0.0.1:\(metrics)",
            ]
        }

        /// The value of `family` for this node on its /metrics (nil when absent).
        func metric(_ family: String) throws -> Double? {
            let body = try MetricsEndpointTests.get(metrics, "/metrics").body
            let prefix = #"\#(family){cluster="bank",node="\#(name)"} "#
            return body.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
        }

        func call(_ account: String, timeout: Int = 10) throws -> (status: Int32, stdout: String, stderr: String) {
            try runCogd([
                "call", "--leader", "tcp://127.0.0.1:\(requests)", "--timeout", String(timeout), "ledger.open",
                #"{"account": "\#(account)", "balance": 5}"#,
            ], timeout: .seconds(Int64(timeout + 20)))
        }
    }

    @Test func `one node serves in etcd's epoch, a frozen leader steps down unanswered, only a named node may lead, and a standby sends tools on`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let n1 = Node(name: "n1")
        let n2 = Node(name: "n2")
        defer {
            n1.folder.cleanUp()
            n2.folder.cleanUp()
        }
        // Alone, n1 holds replies for a standby (--sync one, the default) until it degrades after a second.
        let first = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1"])
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("node n1 leads cluster bank in epoch 1 (minted in etcd)") } != nil, "\(first.lines)")
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        #expect(try n1.call("alice").stdout.hasPrefix("applied revision 1"))
        #expect(waitUntil { (try? n1.metric("cogd_ha_lease_renewals_total")).flatMap { $0 } ?? 0 >= 1 })
        #expect(try n1.metric("cogd_ha_leader") == 1 && n1.metric("cogd_ha_epoch") == 1)
        #expect(try (n1.metric("cogd_ha_lease_seconds_left") ?? 0) > 0)

        // Frozen past its 2 s lease: a request that arrives meanwhile is never answered.
        first.pause()
        usleep(3_500_000)
        let unanswered = Thread.detachNewThreadResult { try? n1.call("bob", timeout: 4) }
        usleep(300_000)
        first.resume()
        #expect(first.waitForLine { $0.contains("ERROR") && $0.contains("node n1 steps down: the lease could not be renewed in time") } != nil,
            "\(first.lines)")
        #expect(waitUntil(timeout: .seconds(15)) { !first.process.isRunning })
        #expect(first.process.terminationStatus == 1)
        #expect(first.waitForLine { $0.contains("stepped down from epoch 1") } != nil, "\(first.lines)")
        let answer = unanswered.wait() ?? nil
        #expect(answer != nil && answer?.status != 0 && answer?.stdout.contains("applied") == false, "\(String(describing: answer))")

        // n2 starts with no copy of the log: the sync key names only n1, and n2 never leads. Asked meanwhile, it says no node leads.
        let second = try CogdProcess(n2.arguments(etcd) + ["--degrade-after", "1"])
        defer { second.stop() }
        #expect(second.waitForLine { $0.contains("only n1 may take the lead (epoch 1's leader and synchronous standbys)") } != nil, "\(second.lines)")
        let nobody = try n2.call("dave", timeout: 2)
        #expect(nobody.status == 4, "\(nobody)")
        #expect(nobody.stderr.contains("the node at tcp://127.0.0.1:\(n2.requests) is a standby, and no node of its cluster leads now"), "\(nobody)")
        #expect(!second.lines.contains { $0.contains("node n2 leads") })

        // n1 again: epoch 2, its log kept; n2 follows it as a standby, copied and named.
        let again = try CogdProcess(n1.arguments(etcd) + ["--degrade-after", "1"])
        defer { again.stop() }
        #expect(again.waitForLine { $0.contains("node n1 leads cluster bank in epoch 2 (minted in etcd)") } != nil, "\(again.lines)")
        // The request that came while n1 was frozen was not served: nothing is committed past the deadline.
        #expect(again.waitForLine { $0.contains("epoch 2, revision 1") } != nil, "\(again.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "2 n1 n2" }, "\(second.lines)")
        #expect(try etcd.get("/cogd/bank/epoch") == "2")
        // What an operator's scrape sees: n1 leads epoch 2; n2 is a standby, not ready.
        #expect(try n2.metric("cogd_ha_leader") == 0 && n2.metric("cogd_ha_epoch") == 2)
        let ready = try MetricsEndpointTests.get(n2.metrics, "/readyz")
        #expect(ready.status == 503 && ready.body.contains("standby: node n1 leads cluster bank in epoch 2"), "\(ready)")

        // Asked first, the standby sends a call and a status on to n1 (not-leader), with the standby listed first or alone.
        let both = "tcp://127.0.0.1:\(n2.requests),tcp://127.0.0.1:\(n1.requests)"
        let carol = try runCogd(["call", "--leader", both, "--timeout", "10", "ledger.open", #"{"account": "carol", "balance": 5}"#], timeout: .seconds(30))
        #expect(carol.stdout.hasPrefix("applied revision 2"), "\(carol)")
        let status = try runCogd(["status", "--leader", "tcp://127.0.0.1:\(n2.requests)"], timeout: .seconds(30))
        #expect(status.stdout.contains("epoch     2\n") && status.stdout.contains("standbys  sync; named n2"), "\(status)")
        let answers = try MetricsEndpointTests.get(n2.metrics, "/metrics").body
        #expect(answers.contains("cogd_ha_not_leader_answers_total "), "\(answers)")
        #expect(!answers.contains("cogd_ha_not_leader_answers_total 0\n"), "the call's and the status's not-leader are counted")

        // Stopped cleanly, n1 revokes its lease: n2, named in the sync key, leads epoch 3 with every turn.
        again.interrupt()
        #expect(waitUntil(timeout: .seconds(15)) { !again.process.isRunning })
        #expect(again.process.terminationStatus == 0)
        #expect(try etcd.get("/cogd/bank/members/n1") == nil)
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("node n2 leads cluster bank in epoch 3 (minted in etcd)") } != nil, "\(second.lines)")
        #expect(second.waitForLine { $0.contains("epoch 3, revision 2") } != nil, "\(second.lines)")
        let erin = try runCogd(["call", "--leader", "tcp://127.0.0.1:\(n1.requests),tcp://127.0.0.1:\(n2.requests)", "--timeout", "10", "ledger.open",
            #"{"account": "erin", "balance": 5}"#], timeout: .seconds(30))
        #expect(erin.stdout.hasPrefix("applied revision 3"), "\(erin)")
    }

    @Test func `a leader killed and started again revokes its dead run's lease at once, and leads again`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let n1 = Node(name: "n1")
        defer { n1.folder.cleanUp() }
        // A 10 s lease: without the revocation the restarted run would wait for its name up to that long (and log so).
        let arguments = n1.arguments(etcd, leaseTTL: 10) + ["--sync", "none"]
        let first = try CogdProcess(arguments)
        defer { first.stop() }
        #expect(first.waitForLine { $0.contains("node n1 leads cluster bank in epoch 1 (minted in etcd)") } != nil, "\(first.lines)")
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let alice = try n1.call("alice")
        #expect(alice.stdout.hasPrefix("applied revision 1"), "\(alice) \(first.lines)")
        // The run's record names its lease and its process, on this machine's boot.
        let record = try String(contentsOfFile: n1.folder.path + "/cogd.ha-run", encoding: .utf8)
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(record.hasPrefix("lease ") && record.contains(" boot \(boot) pidns pid:[") && record.hasSuffix(" pid \(first.process.processIdentifier)\n"),
            "\(record)")
        let lease = record.split(separator: " ")[1]

        // SIGKILL: the leader key and the presence key stay on the dead run's lease until the next run revokes it.
        first.killHard()
        #expect(waitUntil { !first.process.isRunning })
        #expect(try etcd.get("/cogd/bank/leader") != nil)
        let again = try CogdProcess(arguments)
        defer { again.stop() }
        #expect(again.waitForLine { $0.contains("revoked lease \(lease) of this node's previous run, which ended holding it") } != nil, "\(again.lines)")
        #expect(again.waitForLine { $0.contains("node n1 leads cluster bank in epoch 2 (minted in etcd)") } != nil, "\(again.lines)")
        #expect(again.waitForLine { $0.contains("epoch 2, revision 1") } != nil, "\(again.lines)")
        #expect(!again.lines.contains { $0.contains("waiting for the presence key") }, "\(again.lines)")
        let bob = try n1.call("bob")
        #expect(bob.stdout.hasPrefix("applied revision 2"), "\(bob) \(again.lines)")

        // etcd holds the same line at runs/n1, on the lease: killed with its folder destroyed, the node's next run
        // reads it there and revokes the lease all the same (it holds no log now, so it waits for a copy, leading nothing).
        let record2 = try String(contentsOfFile: n1.folder.path + "/cogd.ha-run", encoding: .utf8)
        #expect(try etcd.get("/cogd/bank/runs/n1") == record2.trimmingCharacters(in: .newlines), "\(record2)")
        let lease2 = record2.split(separator: " ")[1]
        again.killHard()
        #expect(waitUntil { !again.process.isRunning })
        try FileManager.default.removeItem(atPath: n1.folder.path)
        #expect(try etcd.get("/cogd/bank/leader") != nil)
        let wiped = try CogdProcess(arguments)
        defer { wiped.stop() }
        #expect(wiped.waitForLine { $0.contains("revoked lease \(lease2) of this node's previous run, which ended holding it") } != nil, "\(wiped.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/leader")) == nil }, "the dead run's leader key is gone with its lease")
        #expect(wiped.waitForLine { $0.contains("this node's folder holds no log") } != nil, "\(wiped.lines)")
        #expect(!wiped.lines.contains { $0.contains("waiting for the presence key") }, "\(wiped.lines)")
    }

    @Test func `a node whose turn stream endpoint is taken is refused at start and never campaigns`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        // A leader of another cluster holds the port the node's --turns names.
        let holder = TemporaryFolder()
        defer { holder.cleanUp() }
        let ports = ClusterPorts()
        let other = try ports.startLeader(data: holder.path)
        defer { other.stop() }
        let node = Node(name: "n1")
        defer { node.folder.cleanUp() }
        var arguments = node.arguments(etcd)
        arguments[arguments.firstIndex(of: "--turns")! + 1] = ports.turns
        let result = try runCogd(arguments, timeout: .seconds(30))
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("cannot listen on \(ports.turns) (--turns): something already listens there"), "\(result.stderr)")
        // Standing by, it holds both endpoints: one that could not serve its turns never leads (nor mints an epoch).
        #expect(try etcd.get("/cogd/bank/leader") == nil && etcd.get("/cogd/bank/epoch") == nil)
    }

    @Test func `a start etcd cannot back is refused with what to do, and --ha's options are checked`() throws {
        let nothing = freePort()
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let unreachable = try runCogd([
            "leader", "--ha", "http://127.0.0.1:\(nothing)", "--cluster", "bank", "--name", "n1", "--data", folder.path,
            "--requests", "tcp://127.0.0.1:\(freePort())", "--turns", "tcp://127.0.0.1:\(freePort())",
        ])
        #expect(unreachable.status == 1)
        #expect(unreachable.stderr.contains(
            "etcd could not be used (unreachable: connect to http://127.0.0.1:\(nothing): Connection refused); "
                + "check that --ha names the cluster's etcd client URLs and that etcd is running"), "\(unreachable.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/data.mdb"))

        let usage: [([String], String)] = [
            (["--ha", "http://127.0.0.1:2379"], "--ha needs --cluster NAME and --name NODE"),
            (["--cluster", "bank"], "--cluster, --name, --lease-ttl, --sync and --degrade-after go with --ha ENDPOINTS"),
            (["--sync", "one"], "--cluster, --name, --lease-ttl, --sync and --degrade-after go with --ha ENDPOINTS"),
            (["--ha", "http://127.0.0.1:2379", "--cluster", "b", "--name", "n", "--sync", "two"], "--sync takes one, none or quorum:K (K from 1 to 8), not 'two'"),
            (["--ha", "http://127.0.0.1:2379", "--cluster", "b", "--name", "n", "--sync", "none", "--degrade-after", "3"],
                "--degrade-after goes with --sync one or quorum:K"),
            (["--ha", "http://127.0.0.1:2379", "--cluster", "b", "--name", "n", "--sync", "one", "--degrade-after", "0"],
                "--degrade-after takes seconds above 0, at most 86400, not '0'"),
            (["--ha", "https://127.0.0.1:2379", "--cluster", "b", "--name", "n"], "etcd over TLS is not supported"),
            (["--ha", "http://127.0.0.1:2379", "--cluster", "a b", "--name", "n"], "--cluster takes a name of 1 to 64 letters"),
            (["--ha", "http://127.0.0.1:2379", "--cluster", "b", "--name", "n", "--lease-ttl", "1"], "--lease-ttl takes whole seconds from 2 to 3600, not '1'"),
        ]
        for (arguments, message) in usage {
            let result = try runCogd(["leader"] + arguments)
            #expect(result.status == 64 && result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }
}

extension Thread {
    /// Runs `body` on a thread of its own; `wait()` returns its result.
    static func detachNewThreadResult<T: Sendable>(_ body: @escaping @Sendable () -> T) -> ThreadResult<T> {
        let result = ThreadResult<T>()
        Thread.detachNewThread { result.set(body()) }
        return result
    }
}

/// A value another thread sets once.
final class ThreadResult<T: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: T?
    private var isSet = false

    func set(_ newValue: T) {
        condition.lock()
        value = newValue
        isSet = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits (at most 60 s) for the value.
    func wait() -> T? {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(60)
        while !isSet, condition.wait(until: deadline) {}
        return value
    }
}
