import Foundation
import Testing

@testable import CogLab

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd leader --ha` across a real network that the test cuts (issue 29,
/// partitions): etcd, two nodes and a client each in a network namespace of
/// their own, joined by veth pairs to a bridge in a hub namespace; a link is
/// cut by setting its hub-side end down, and restored by setting it up.
/// Every address lives inside the namespaces the test made. Needs root,
/// `ip netns`, etcd and curl (etcd's keys are read through its JSON gateway
/// from the client's namespace); without them each test says why and passes.
@Suite("cogd --ha across network partitions (namespaces and veth pairs)", .serialized, .timeLimit(.minutes(10)))
struct HAPartitionTests {
    @Test func `a leader cut off from etcd and its standby steps down releasing nothing, the standby leads with every released turn, and the old leader rejoins as its standby`() throws {
        guard let lab = PartitionLab.make("a") else { return }
        defer { lab.close() }
        let n1 = lab.node("n1")
        let n2 = lab.node("n2")
        let both = [n1, n2]
        // Both release alone a second after no standby acknowledges: n2 will lead with n1 gone.
        let first = try lab.start(n1, ["--degrade-after", "1"])
        #expect(first.waitForLine { $0.contains("node n1 leads cluster bank in epoch 1 (minted in etcd)") } != nil, "\(first.lines)")
        #expect(first.waitForLine { $0.contains("epoch 1, revision 0") } != nil, "\(first.lines)")
        let second = try lab.start(n2, ["--degrade-after", "1"])
        #expect(second.waitForLine { $0.contains("in step with the leader of epoch 1") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? lab.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        for sequence in 1...2 {
            let output = try lab.call(both, sequence)
            #expect(output.hasPrefix("applied revision \(sequence)"), "\(output)")
        }

        // n1's link is cut: it reaches neither etcd nor n2, and nothing reaches it but a call made in its own namespace.
        try lab.cut("n1")
        let stranded = try lab.startCall(in: "n1", [n1], 3, timeout: 5)
        defer { stranded.stop() }
        // Its release gate shuts at the lease's local deadline: it logs its step-down (once, whether its arbiter,
        // still waiting on etcd, or its serving loop gets there first) and exits 1 saying so.
        #expect(first.waitForLine(timeout: .seconds(30)) { $0.contains("ERROR") && $0.contains("node n1 steps down: the lease could not be renewed in time") }
            != nil, "\(first.lines)")
        #expect(first.waitForLine(timeout: .seconds(30)) {
            $0.contains("stepped down from epoch 1: the lease in etcd was not renewed in time, so nothing more was released")
        } != nil, "\(first.lines)")
        #expect(waitUntil(timeout: .seconds(15)) { !first.process.isRunning })
        #expect(first.process.terminationStatus == 1)
        #expect(first.lines.filter { $0.contains("steps down") }.count == 1, "\(first.lines)")
        // The call n1 took in just before (or that found it gone) was never answered.
        stranded.waitForLine(timeout: .seconds(30)) { _ in false }
        #expect(waitUntil(timeout: .seconds(10)) { !stranded.process.isRunning })
        #expect(stranded.process.terminationStatus != 0 && !stranded.lines.contains { $0.contains("applied") }, "\(stranded.lines)")

        // n2, named in the sync key, leads epoch 2 from its copy once n1's lease is gone.
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("node n2 leads cluster bank in epoch 2 (minted in etcd)") } != nil,
            "\(second.lines)")
        #expect(second.waitForLine { $0.contains("epoch 2, revision 2") } != nil, "\(second.lines)")
        #expect(try lab.get("/cogd/bank/epoch") == "2")
        // The client lists both nodes (n1 first, silent behind the cut): n2 applies the stranded request, which never
        // reached it, at the next revision, and answers the last call made before the cut from its copy's dedup.
        let third = try lab.call(both, 3)
        #expect(third.hasPrefix("applied revision 3"), "\(third)")
        let retry = try lab.call(both, 2)
        #expect(retry.hasPrefix("answered from an earlier request: applied at revision 2 (request teller#2)"), "\(retry)")

        // The link restored, n1 starts again (as a service manager would): it follows n2 and is named again.
        try lab.restore("n1")
        let again = try lab.start(n1, ["--degrade-after", "1"])
        #expect(again.waitForLine { $0.contains("node n2 leads cluster bank in epoch 2") } != nil, "\(again.lines)")
        #expect(waitUntil(timeout: .seconds(30)) { (try? lab.get("/cogd/bank/sync")) == "2 n2 n1" }, "\(again.lines) \(second.lines)")
        #expect(!again.lines.contains { $0.contains("node n1 leads") }, "\(again.lines)")
        let fourth = try lab.call(both, 4)
        #expect(fourth.hasPrefix("applied revision 4"), "\(fourth)")
    }

    @Test func `a standby cut off holds the leader's reply, which is released once the standby is back and has acknowledged`() throws {
        guard let lab = PartitionLab.make("b") else { return }
        defer { lab.close() }
        let n1 = lab.node("n1")
        let n2 = lab.node("n2")
        // Strict --sync one (the default), no --degrade-after: no reply leaves n1 until a named standby holds its commit.
        let first = try lab.start(n1)
        #expect(first.waitForLine { $0.contains("node n1 leads cluster bank in epoch 1 (minted in etcd)") } != nil, "\(first.lines)")
        let second = try lab.start(n2)
        #expect(second.waitForLine { $0.contains("in step with the leader of epoch 1") } != nil, "\(second.lines)")
        #expect(waitUntil { (try? lab.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(second.lines)")
        let one = try lab.call([n1], 1)
        #expect(one.hasPrefix("applied revision 1"), "\(one)")

        // n2's link is cut: a call to n1 (asked alone, so the whole timeout is its) is not answered.
        try lab.cut("n2")
        let held = try lab.startCall(in: "c", [n1], 2, timeout: 60)
        defer { held.stop() }
        #expect(held.waitForLine(timeout: .seconds(3)) { $0.contains("applied") } == nil, "\(held.lines)")
        #expect(held.process.isRunning, "\(held.lines)")
        // Cut from etcd, the standby's presence may have ended: it steps down as well (exit 1), to be started again.
        #expect(second.waitForLine(timeout: .seconds(30)) { $0.contains("node n2 steps down: the lease could not be renewed in time") } != nil,
            "\(second.lines)")
        #expect(waitUntil(timeout: .seconds(15)) { !second.process.isRunning })
        #expect(second.process.terminationStatus == 1)
        #expect(held.process.isRunning, "\(held.lines)")

        // The link restored and n2 started again, n1 sends it the commit it lacks; its acknowledgement releases the reply.
        try lab.restore("n2")
        let again = try lab.start(n2)
        #expect(first.waitForLine(timeout: .seconds(30)) { $0.contains("standby n2 is at revision 1 of this log: sending it the") } != nil,
            "\(first.lines)")
        #expect(held.waitForLine(timeout: .seconds(60)) { $0.contains("applied") }?.hasPrefix("applied revision 2") == true, "\(held.lines)")
        #expect(waitUntil(timeout: .seconds(10)) { !held.process.isRunning })
        #expect(held.process.terminationStatus == 0, "\(held.lines)")
        // n1 led throughout, in epoch 1, and names n2 again.
        #expect(waitUntil { (try? lab.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(again.lines)")
        #expect(try lab.get("/cogd/bank/epoch") == "1")
        #expect(first.process.isRunning && !first.lines.contains { $0.contains("steps down") }, "\(first.lines)")
        let three = try lab.call([n1], 3)
        #expect(three.hasPrefix("applied revision 3"), "\(three)")
    }
}

/// A bridge in a hub namespace, and etcd, nodes n1 and n2 and a client in
/// namespaces of their own, each joined to the bridge by a veth pair; the
/// addresses (10.231.X.0/24) exist only inside them. `close()` stops every
/// process and deletes every namespace (which removes the veth pairs).
final class PartitionLab {
    struct Node {
        let name: String
        let address: String
        let folder = TemporaryFolder()
        var requests: String { "tcp://\(address):7001" }
    }

    let ip: URL
    let curl: URL
    let etcdProgram: URL
    /// Names start with it: `cgpNNNNt` (this process's pid, the test's tag).
    let prefix: String
    let subnet: String
    private var namespaces: [String] = []
    private var processes: [CogdProcess] = []
    private var folders: [TemporaryFolder] = []
    private var etcd: Process?
    private let etcdFolder = TemporaryFolder()
    private var closed = false

    static let roles = ["e": 2, "n1": 11, "n2": 12, "c": 20]

    var hub: String { prefix + "h" }
    func namespace(_ role: String) -> String { prefix + role }
    func address(_ role: String) -> String { "\(subnet).\(Self.roles[role]!)" }
    var etcdURL: String { "http://\(address("e")):2379" }

    /// The lab with etcd running, or nil (said why) when this machine cannot make one.
    static func make(_ tag: String) -> PartitionLab? {
        guard getuid() == 0 else {
            print("HAPartitionTests skipped: not root (network namespaces need it)")
            return nil
        }
        let find = { (name: String, folders: [String]) in
            folders.map { URL(fileURLWithPath: $0 + "/" + name) }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
        }
        guard let ip = find("ip", ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]) else {
            print("HAPartitionTests skipped: no ip command (iproute2)")
            return nil
        }
        guard let etcd = try? EtcdServer.program() else {
            print("HAPartitionTests skipped: \(EtcdServer.missing)")
            return nil
        }
        guard let curl = find("curl", ["/usr/bin", "/bin", "/usr/local/bin"]) else {
            print("HAPartitionTests skipped: no curl (it reads etcd's keys inside the namespaces)")
            return nil
        }
        let lab = PartitionLab(ip: ip, curl: curl, etcdProgram: etcd, tag: tag)
        // Names of an earlier run of this pid that did not end cleanly go first.
        for name in [lab.hub] + roles.keys.map(lab.namespace) { _ = lab.run(["netns", "del", name]) }
        let added = lab.run(["netns", "add", lab.hub])
        guard added.status == 0 else {
            print("HAPartitionTests skipped: ip netns add failed: \(added.output)")
            return nil
        }
        lab.namespaces.append(lab.hub)
        do {
            try lab.build()
            try lab.startEtcd()
            return lab
        } catch {
            Issue.record("\(error)")
            lab.close()
            return nil
        }
    }

    private init(ip: URL, curl: URL, etcdProgram: URL, tag: String) {
        self.ip = ip
        self.curl = curl
        self.etcdProgram = etcdProgram
        let pid = Int(getpid())
        prefix = "cgp\(pid % 10_000)\(tag)"
        subnet = "10.231.\(pid % 250 + 1)"
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// `ip ARGUMENTS`: its exit status and what it said.
    @discardableResult
    func run(_ arguments: [String]) -> (status: Int32, output: String) {
        guard let result = try? runProgram(ip, arguments, timeout: .seconds(10)) else { return (-1, "ip could not be run") }
        return (result.status, (result.stdout + result.stderr).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    private func must(_ arguments: [String]) throws {
        let result = run(arguments)
        guard result.status == 0 else { throw Failure(description: "ip \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.output)") }
    }

    private func build() throws {
        try must(["-n", hub, "link", "add", "br0", "type", "bridge"])
        try must(["-n", hub, "link", "set", "br0", "up"])
        try must(["-n", hub, "link", "set", "lo", "up"])
        for role in Self.roles.keys.sorted() {
            let name = namespace(role)
            try must(["netns", "add", name])
            namespaces.append(name)
            // The pair is made in the hub with its other end in the node's namespace: nothing touches the host's.
            try must(["-n", hub, "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", name])
            try must(["-n", hub, "link", "set", name, "master", "br0", "up"])
            try must(["-n", name, "addr", "add", address(role) + "/24", "dev", "eth0"])
            try must(["-n", name, "link", "set", "eth0", "up"])
            try must(["-n", name, "link", "set", "lo", "up"])
        }
    }

    /// etcd in its namespace, on its address; waits (at most 30 s) until it answers from the client's.
    private func startEtcd() throws {
        try FileManager.default.createDirectory(atPath: etcdFolder.path, withIntermediateDirectories: true)
        let logPath = etcdFolder.path + "/etcd.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        let peer = "http://\(address("e")):2380"
        let process = Process()
        process.executableURL = ip
        process.arguments = [
            "netns", "exec", namespace("e"), etcdProgram.path,
            "--name", "lab", "--data-dir", etcdFolder.path + "/data",
            "--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", "lab=\(peer)", "--unsafe-no-fsync", "--log-level", "error",
        ]
        process.standardOutput = log
        process.standardError = log
        try process.run()
        try? log.close()
        etcd = process
        let ready = waitUntil(timeout: .seconds(30)) {
            guard process.isRunning else { return false }
            do {
                _ = try get("/cogd/bank/epoch")
                return true
            } catch {
                return false
            }
        }
        guard ready else {
            let said = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw Failure(description: "etcd did not answer on \(etcdURL) in namespace \(namespace("e")); it said: \(said.suffix(2_000))")
        }
    }

    /// The value at `key` in etcd, read from `role`'s namespace (the client's unless said; nil when absent); throws
    /// when etcd does not answer.
    func get(_ key: String, from role: String = "c") throws -> String? {
        let body = #"{"key": "\#(Data(key.utf8).base64EncodedString())"}"#
        let result = try runProgram(ip, ["netns", "exec", namespace(role), curl.path, "-s", "-m", "2", "-X", "POST", etcdURL + "/v3/kv/range", "-d", body],
            timeout: .seconds(10))
        guard result.status == 0, let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], json["header"] != nil
        else { throw Failure(description: "etcd did not answer: \(result)") }
        guard let value = ((json["kvs"] as? [[String: Any]])?.first?["value"] as? String).flatMap({ Data(base64Encoded: $0) }) else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    func node(_ name: String) -> Node {
        let node = Node(name: name, address: address(name))
        folders.append(node.folder)
        return node
    }

    /// `cogd leader --ha` for `node` in its namespace, bound on its address (`--insecure`: no CURVE on the
    /// test's own private network), lease TTL 2 s; `options` after.
    func start(_ node: Node, _ options: [String] = []) throws -> CogdProcess {
        let process = try CogdProcess(executable: ip, [
            "netns", "exec", namespace(node.name), cogdExecutable().path,
            "leader", "--ha", etcdURL, "--cluster", "bank", "--name", node.name, "--lease-ttl", "2", "--data", node.folder.path,
            "--requests", node.requests, "--turns", "tcp://\(node.address):7002", "--metrics", "\(node.address):7003",
            "--insecure",
        ] + options)
        processes.append(process)
        return process
    }

    private func callArguments(in role: String, _ nodes: [Node], _ sequence: Int, timeout: Int) -> [String] {
        [
            "netns", "exec", namespace(role), cogdExecutable().path,
            "call", "--leader", nodes.map(\.requests).joined(separator: ","), "--timeout", String(timeout),
            "--request-id", "teller#\(sequence)", "ledger.open", #"{"account": "a\#(sequence)", "balance": 5}"#,
        ]
    }

    /// `cogd call` from the client's namespace: opens account `a<sequence>` as request `teller#<sequence>`; what it printed.
    func call(_ nodes: [Node], _ sequence: Int, timeout: Int = 20) throws -> String {
        let result = try runProgram(ip, callArguments(in: "c", nodes, sequence, timeout: timeout), timeout: .seconds(Int64(timeout + 20)))
        return result.stdout + result.stderr
    }

    /// The same call from namespace `role`, left running (its output read as it comes).
    func startCall(in role: String, _ nodes: [Node], _ sequence: Int, timeout: Int) throws -> CogdProcess {
        let process = try CogdProcess(executable: ip, callArguments(in: role, nodes, sequence, timeout: timeout))
        processes.append(process)
        return process
    }

    /// Cuts `role`'s link: its veth's end in the hub goes down.
    func cut(_ role: String) throws { try must(["-n", hub, "link", "set", namespace(role), "down"]) }

    /// Restores `role`'s link and waits (at most 15 s) until etcd answers from `role`'s namespace: a node started
    /// at once could meet the link still coming up (`No route to host`) and exit, as it should when etcd is unreachable.
    func restore(_ role: String) throws {
        try must(["-n", hub, "link", "set", namespace(role), "up"])
        // Answered, whether or not the key is there (`try?` would read an absent key as no answer).
        let answers = { [self] () -> Bool in
            do {
                _ = try get("/cogd/bank/epoch", from: role)
                return true
            } catch {
                return false
            }
        }
        guard waitUntil(timeout: .seconds(15), answers) else {
            throw Failure(description: "etcd does not answer from \(namespace(role)) 15 s after its link was restored")
        }
    }

    /// Stops every process (nodes and calls, then etcd) and deletes every namespace and folder.
    func close() {
        guard !closed else { return }
        closed = true
        for process in processes.reversed() { process.stop() }
        if let etcd {
            stopProcess(etcd)
        }
        for name in namespaces.reversed() {
            let result = run(["netns", "del", name])
            if result.status != 0 { Issue.record("ip netns del \(name) failed: \(result.output)") }
        }
        for folder in folders { folder.cleanUp() }
        etcdFolder.cleanUp()
    }

    deinit { close() }
}
