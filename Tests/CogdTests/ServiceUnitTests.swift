import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The repository's root (this file is Tests/CogdTests/…).
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// `systemd-analyze`, where this host has it.
private let systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// Runs a program to completion (bounded); its status and both outputs.
private func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    try runProgram(URL(fileURLWithPath: executable), arguments)
}

/// Copies of deploy/systemd's units in `folder`, `ExecStart` pointing at the
/// `cogd` built beside the tests (verify checks the binary exists), the
/// worker template also instantiated as `cogd-worker@w1.service`.
private func unitCopies(in folder: String) throws -> [String] {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    var paths: [String] = []
    for (source, names) in [("cogd-leader.service", ["cogd-leader.service"]), ("cogd-worker@.service", ["cogd-worker@.service", "cogd-worker@w1.service"])] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("deploy/systemd/\(source)"), encoding: .utf8)
        for name in names {
            let path = folder + "/" + name
            try text.replacingOccurrences(of: "/usr/local/bin/cogd", with: cogdExecutable().path).write(toFile: path, atomically: true, encoding: .utf8)
            paths.append(path)
        }
    }
    return paths
}

/// A unix datagram socket bound in the test, as a service manager's
/// `NOTIFY_SOCKET`; `address` is what goes into the variable (`@…` abstract).
private final class NotifySocket {
    let descriptor: Int32
    let address: String
    private let path: String?

    init(abstract: Bool, folder: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #expect(descriptor >= 0)
        var name: [UInt8]
        if abstract {
            address = "@cogd-test-notify-\(UUID().uuidString)"
            path = nil
            name = Array(address.utf8)
            name[0] = 0
        } else {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            address = folder + "/notify"
            path = address
            name = Array(address.utf8) + [0]
        }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout.offset(of: \sockaddr_un.sun_path)! + name.count)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        #expect(bound == 0, "bind \(address): \(String(cString: strerror(errno)))")
    }

    deinit {
        close(descriptor)
        if let path { unlink(path) }
    }

    /// The next datagram's lines, nil after `timeout`.
    func next(timeout: Duration = .seconds(20)) -> [String]? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout.components.seconds * 1_000)
        guard poll(&poller, 1, milliseconds) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count), as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

/// Whether this kernel has `PR_SET_MDWE` (Linux 6.3), the prctl that makes a
/// process what systemd's `MemoryDenyWriteExecute=` does with seccomp.
private let kernelHasMemoryDenyWriteExecute: Bool = {
    guard let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first(where: { FileManager.default.isExecutableFile(atPath: $0) })
    else { return false }
    let probe = try? run(python, ["-c", "import ctypes; import sys; sys.exit(0 if ctypes.CDLL(None).prctl(66, 0, 0, 0, 0) >= 0 else 1)"])
    return probe?.status == 0
}()

/// Runs `cogd arguments` with write-and-execute memory denied (`PR_SET_MDWE`, kept across exec).
private func cogdWithoutWriteExecute(_ arguments: [String]) throws -> CogdProcess {
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }!
    let script = """
        import ctypes, os, sys
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(65, 1, 0, 0, 0) != 0 or libc.prctl(66, 0, 0, 0, 0) != 1:
            sys.exit("PR_SET_MDWE failed: errno %d" % ctypes.get_errno())
        os.execv(sys.argv[1], sys.argv[1:])
        """
    return try CogdProcess(executable: URL(fileURLWithPath: python), ["-c", script, cogdExecutable().path] + arguments)
}

/// Linux's numbers for the address families the units name.
private let addressFamilyNumbers = ["AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17]

/// The address families a unit's `RestrictAddressFamilies=` allows.
private func allowedAddressFamilies(_ unit: UnitFile) -> [String] {
    unit.values("RestrictAddressFamilies").flatMap { $0.split(separator: " ").map(String.init) }
}

/// Whether this host can refuse `socket()` for some address families the
/// way `RestrictAddressFamilies=` does: a seccomp filter set from python3,
/// written for x86_64's system call numbers.
private let canRestrictAddressFamilies: Bool = {
    var name = utsname()
    uname(&name)
    let machine = withUnsafeBytes(of: &name.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    return machine == "x86_64" && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
}()

/// A program and arguments that run the rest of a command with `socket()`
/// refused (EAFNOSUPPORT) for every address family but `families`, as
/// systemd's `RestrictAddressFamilies=` refuses it (`ServiceHost.start(_:through:)`).
private func restrictingAddressFamilies(to families: [String]) -> [String] {
    let numbers = families.map { family in
        guard let number = addressFamilyNumbers[family] else {
            Issue.record("address family \(family) has no number here")
            return 0
        }
        return number
    }
    // A classic BPF program over seccomp_data: not x86_64, or not socket(2): allow;
    // socket(2) with an allowed family (its first argument): allow; else EAFNOSUPPORT.
    let script = """
        import ctypes, os, struct, sys
        families = [int(f) for f in sys.argv[1].split(",")]
        code = []
        def op(c, k, jt=0, jf=0): code.append(struct.pack("HBBI", c, jt, jf, k))
        last = 6 + len(families)
        op(0x20, 4); op(0x15, 0xC000003E, 0, last - 2)
        op(0x20, 0); op(0x15, 41, 0, last - 4)
        op(0x20, 16)
        for i, f in enumerate(families): op(0x15, f, last - (5 + i) - 1, 0)
        op(0x06, 0x00050000 | 97); op(0x06, 0x7FFF0000)
        program = ctypes.create_string_buffer(b"".join(code))
        class Program(ctypes.Structure): _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        fprog = Program(len(code), ctypes.addressof(program))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
            sys.exit("seccomp failed: errno %d" % ctypes.get_errno())
        os.execv(sys.argv[2], sys.argv[2:])
        """
    return ["/usr/bin/python3", "-c", script, numbers.map(String.init).joined(separator: ",")]
}

/// The ExecStart shell script of a unit (`/bin/sh -c SCRIPT`), its `$$` read as `$`.
private func execStartScript(_ unit: UnitFile) -> String {
    let line = unit.values("ExecStart").first ?? ""
    #expect(line.hasPrefix("/bin/sh -c '") && line.hasSuffix("'"), "\(line.prefix(80))")
    return String(line.dropFirst("/bin/sh -c '".count).dropLast()).replacingOccurrences(of: "$$", with: "$")
}

@Suite("systemd units and the service manager", .serialized, .timeLimit(.minutes(10)))
struct ServiceUnitTests {
    @Test(.enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed on this host"))
    func `both units pass systemd-analyze verify without a warning`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let units = try unitCopies(in: folder.path)
        let verified = try run(systemdAnalyze!, ["verify", "--man=no"] + units)
        #expect(verified.status == 0, "\(verified)")
        #expect(verified.stderr.isEmpty && verified.stdout.isEmpty, "\(verified.stdout)\(verified.stderr)")
    }

    @Test(.enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed on this host"))
    func `both units are hardened to an exposure of 2.5 or less`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        // --offline: reads the unit files, no running systemd needed (systemd 252 and later).
        for unit in try unitCopies(in: folder.path) where !unit.hasSuffix("@w1.service") {
            let analyzed = try run(systemdAnalyze!, ["security", "--offline=yes", "--threshold=25", "--no-pager", unit])
            #expect(analyzed.status == 0, "\(unit): exposure above 2.5\n\(analyzed.stdout)\(analyzed.stderr)")
            let overall = analyzed.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") }
            let score = overall.flatMap { line in line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) } }
            #expect(score != nil && score! <= 2.5, "\(unit): \(String(describing: overall))")
        }
    }

    @Test func `the units get their keys as credentials and pass them to cogd, and reload sends the leader SIGHUP`() throws {
        func unit(_ name: String) throws -> UnitFile {
            UnitFile(try String(contentsOf: ServiceHost.deployFolder.appendingPathComponent(name), encoding: .utf8))
        }
        let leader = try unit("cogd-leader.service")
        #expect(leader.values("Type") == ["notify"] && leader.values("NotifyAccess") == ["main"])
        // The leader key, and a node's standby key (with COGD_HA: it follows the leader's log with it).
        #expect(leader.values("LoadCredential") == ["leader.key:/etc/cogd/keys/leader.key", "standby.key:/etc/cogd/keys/standby.key"])
        // A missing key file leaves the word `missing` in its place, so COGD_CURVE=off needs no keys.
        #expect(leader.values("SetCredential") == ["leader.key:missing", "standby.key:missing"])
        // The peers file is read where it is, never copied as a credential: a reload must see an edit.
        #expect(!leader.values("LoadCredential").contains { $0.contains("peers") })
        #expect(leader.values("ExecReload") == ["/bin/kill -HUP $MAINPID"])
        let leaderScript = execStartScript(leader)
        #expect(leaderScript.contains(#"key="$CREDENTIALS_DIRECTORY/leader.key""#))
        #expect(leaderScript.contains(#"set -- --curve-secret "$key" --peers /etc/cogd/peers ;;"#))
        #expect(leaderScript.contains(#"exec /usr/local/bin/cogd leader --data "$COGD_DATA""#) && leaderScript.hasSuffix(#" "$@""#))

        let worker = try unit("cogd-worker@.service")
        #expect(worker.values("Type") == ["notify"] && worker.values("NotifyAccess") == ["main"])
        #expect(worker.values("LoadCredential") == ["%i.key:/etc/cogd/keys/%i.key", "leader.pub:/etc/cogd/keys/leader.pub"])
        #expect(worker.values("SetCredential") == ["%i.key:missing", "leader.pub:missing"])
        let workerScript = execStartScript(worker)
        #expect(workerScript.contains(#"set -- --key "$CREDENTIALS_DIRECTORY/%i.key" --leader-key "$CREDENTIALS_DIRECTORY/leader.pub" ;;"#))
        #expect(workerScript.contains(#"worker --leader "$COGD_REQUESTS" --name %i --rig "$COGD_RIG" "$@""#))

        // What install.sh installs as /etc/cogd/cogd.env turns CURVE on; the units' default (an older file) is off.
        let settings = try String(contentsOf: ServiceHost.deployFolder.appendingPathComponent("cogd.env"), encoding: .utf8)
        #expect(settings.split(separator: "\n").contains("COGD_CURVE=on"))
        #expect(leader.values("Environment").contains("COGD_CURVE=off") && worker.values("Environment").contains("COGD_CURVE=off"))
    }

    @Test func `with COGD_CURVE=on the leader and workers authenticate with their credentials, and reload reads the edited peers file`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let host = try ServiceHost(
            root: folder.path,
            settings: [
                "COGD_CURVE": "on", "COGD_DATA": folder.path + "/data", "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns,
                "COGD_RIG": "ledger", "COGD_COMMIT_CPU": "none",
            ])
        try host.generateKeys(["leader", "w1", "w2"])
        try host.writePeers(try host.peerLine("w1", "worker"))
        let leader = try host.start("cogd-leader.service")
        defer { leader.stop() }
        let first = leader.waitForLine { $0.contains("cogd leader: data") }
        #expect(first?.contains("CURVE: authenticates every connection against \(host.etc)/peers") == true, "\(leader.lines)")
        let w1 = try host.start("cogd-worker@w1.service")
        defer { w1.stop() }
        #expect(w1.waitForLine { $0.contains("synced at revision") } != nil, "\(w1.lines)")
        // w2's key is not in the peers file yet: refused at the handshake.
        let refused = try host.start("cogd-worker@w2.service")
        #expect(refused.waitForLine { $0.contains("the leader refused this key") } != nil, "\(refused.lines)")
        refused.stop()
        // Listed, and `systemctl reload cogd-leader`: the leader reads the file where it is.
        try host.writePeers(try host.peerLine("w1", "worker") + host.peerLine("w2", "worker"))
        let reload = try host.reload("cogd-leader.service", mainPID: leader.process.processIdentifier)
        #expect(reload.status == 0, "\(reload)")
        #expect(leader.waitForLine { $0.contains("cogd leader: peers file") }?.hasSuffix(" cogd leader: peers file reloaded: 2 peers (1 added, 0 changed, 0 removed)") == true)
        let w2 = try host.start("cogd-worker@w2.service")
        defer { w2.stop() }
        #expect(w2.waitForLine { $0.contains("synced at revision") } != nil, "\(w2.lines)")
    }

    @Test func `with COGD_CURVE=off and no key files the units serve loopback without authentication`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let metricsPort = freePort()
        let host = try ServiceHost(
            root: folder.path,
            settings: [
                "COGD_CURVE": "off", "COGD_DATA": folder.path + "/data", "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns,
                "COGD_RIG": "ledger", "COGD_COMMIT_CPU": "none", "COGD_RETAIN": "--retain-turns 5000",
                "COGD_LEADER_METRICS": "127.0.0.1:\(metricsPort)", "COGD_LOG_FORMAT": "json",
            ])
        let leader = try host.start("cogd-leader.service")
        defer { leader.stop() }
        // COGD_LOG_FORMAT=json: even the first lines are events.
        let first = leader.waitForLine { logEvent($0)?["event"] as? String == "serving" }.flatMap(logEvent)
        #expect((first?["message"] as? String)?.hasSuffix("no authentication: loopback only") == true, "\(leader.lines)")
        let retention = leader.waitForLine { logEvent($0)?["event"] as? String == "retention" }.flatMap(logEvent)
        #expect((retention?["message"] as? String)?.contains("5000") == true, "COGD_RETAIN reaches the leader: \(leader.lines)")
        let worker = try host.start("cogd-worker@w1.service")
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 10}"#).contains("applied"))
        // COGD_LEADER_METRICS and COGD_LOG_FORMAT reach the leader.
        let metrics = leader.waitForLine { logEvent($0)?["event"] as? String == "metrics" }.flatMap(logEvent)
        #expect(metrics?["address"] as? String == "127.0.0.1:\(metricsPort)", "\(leader.lines)")
        #expect(try MetricsEndpointTests.get(metricsPort, "/readyz").status == 200)
        #expect(leader.waitForLine { $0.hasPrefix("{") && $0.contains(#""event":"worker-joined""#) } != nil, "\(leader.lines)")
    }

    @Test func `with COGD_CURVE=on a missing key file stops the unit with an error naming it, and COGD_CURVE is on or off`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var settings = [
            "COGD_CURVE": "on", "COGD_DATA": folder.path + "/data", "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns,
        ]
        var host = try ServiceHost(root: folder.path, settings: settings)
        for (unit, file) in [("cogd-leader.service", "leader.key"), ("cogd-worker@w1.service", "w1.key")] {
            let stopped = try host.start(unit)
            #expect(stopped.waitForLine(timeout: .seconds(10)) { _ in false } == nil)
            waitForExit(stopped.process, timeout: .seconds(5))
            #expect(stopped.process.terminationStatus == 1, "\(unit)")
            #expect(
                stopped.lines == [
                    "Error: COGD_CURVE=on but \(host.keys)/\(file) is missing or empty: make it with cogd keys generate "
                        + "\(file == "leader.key" ? "leader" : "NAME") --out \(host.keys) (deploy/systemd/install.sh does), "
                        + "or set COGD_CURVE=off in \(host.etc)/cogd.env"
                ], "\(unit)")
        }
        // The worker needs the leader's public key too.
        try host.generateKeys(["w1"])
        let withoutLeaderKey = try host.start("cogd-worker@w1.service")
        #expect(withoutLeaderKey.waitForLine(timeout: .seconds(10)) { _ in false } == nil)
        #expect(withoutLeaderKey.lines.first?.contains("\(host.keys)/leader.pub is missing or empty") == true, "\(withoutLeaderKey.lines)")
        settings["COGD_CURVE"] = "yes"
        host = try ServiceHost(root: folder.path, settings: settings)
        let unknown = try host.start("cogd-leader.service")
        #expect(unknown.waitForLine(timeout: .seconds(10)) { _ in false } == nil)
        waitForExit(unknown.process, timeout: .seconds(5))
        #expect(unknown.process.terminationStatus == 1)
        #expect(unknown.lines == ["Error: COGD_CURVE in \(host.etc)/cogd.env is on or off, not yes"])
    }

    @Test(.enabled(if: canRestrictAddressFamilies, "needs python3 on x86_64 to stand in for RestrictAddressFamilies="))
    func `the leader binds and a worker connects with only the address families their units allow`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let host = try ServiceHost(
            root: folder.path,
            settings: [
                "COGD_CURVE": "on", "COGD_DATA": folder.path + "/data", "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns,
                "COGD_RIG": "ledger", "COGD_COMMIT_CPU": "none",
            ])
        try host.generateKeys(["leader", "w1"])
        try host.writePeers(try host.peerLine("w1", "worker"))
        let leaderFamilies = allowedAddressFamilies(try host.unit("cogd-leader.service"))
        // ZeroMQ lists the interfaces (a netlink socket) when it binds tcp://: refused that, the leader never serves.
        let withoutNetlink = try host.start(
            "cogd-leader.service", through: restrictingAddressFamilies(to: leaderFamilies.filter { $0 != "AF_NETLINK" }))
        #expect(withoutNetlink.waitForLine(timeout: .seconds(15)) { $0.contains("cogd leader: data") } == nil)
        withoutNetlink.stop()
        #expect(withoutNetlink.process.terminationStatus != 0)

        let leader = try host.start("cogd-leader.service", through: restrictingAddressFamilies(to: leaderFamilies))
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("cogd leader: data") } != nil, "\(leader.lines)")
        let worker = try host.start(
            "cogd-worker@w1.service", through: restrictingAddressFamilies(to: allowedAddressFamilies(try host.unit("cogd-worker@.service"))))
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(worker.lines)")
    }

    @Test func `the leader sends READY=1 to NOTIFY_SOCKET once its store is open and its sockets are bound`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let notify = try NotifySocket(abstract: false, folder: folder.path + "/run")
        let ports = ClusterPorts()
        let leader = try CogdProcess(
            executable: cogdExecutable(),
            ["leader", "--data", folder.path + "/data", "--requests", ports.requests, "--turns", ports.turns],
            environment: ["NOTIFY_SOCKET": notify.address])
        defer { leader.stop() }
        let message = notify.next()
        #expect(message?.first == "READY=1", "\(String(describing: message))")
        #expect(message?.contains("MAINPID=\(leader.process.processIdentifier)") == true)
        #expect(message?.contains { $0.hasPrefix("STATUS=serving at revision 0, epoch ") } == true)
        // Ready means serving: a request is answered at once.
        let status = try runCogd(["status", "--leader", ports.requests], timeout: .seconds(10))
        #expect(status.status == 0, "\(status)")
        leader.interrupt()
        #expect(notify.next() == ["STOPPING=1"])
        #expect(leader.waitForLine { $0.contains("cogd leader: stopped") } != nil)
    }

    @Test func `with COGD_HA the unit's node leads through etcd, and a standby extends its start timeout naming who leads`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let host = try ServiceHost(
            root: folder.path,
            settings: [
                "COGD_CURVE": "off", "COGD_DATA": folder.path + "/data", "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns,
                "COGD_RIG": "ledger", "COGD_COMMIT_CPU": "none", "COGD_HA": etcd.url, "COGD_CLUSTER": "bank", "COGD_NODE": "n1",
                "COGD_LEASE_TTL": "2", "COGD_SYNC": "one", "COGD_DEGRADE_AFTER": "1",
            ])
        let leader = try host.start("cogd-leader.service")
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("node n1 leads cluster bank in epoch 1 (minted in etcd)") } != nil, "\(leader.lines)")
        // COGD_SYNC=one with no standby yet: COGD_DEGRADE_AFTER=1 lets the leader answer alone after a second.
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 10}"#).contains("applied"))

        // A second node, started as systemd would with Type=notify: it is not ready; it says who leads and asks for more time.
        let notify = try NotifySocket(abstract: false, folder: folder.path + "/run")
        let other = ClusterPorts()
        let standby = try CogdProcess(
            executable: cogdExecutable(),
            ["leader", "--data", folder.path + "/n2", "--requests", other.requests, "--turns", other.turns, "--ha", etcd.url,
             "--cluster", "bank", "--name", "n2", "--lease-ttl", "2", "--sync", "one"],
            environment: ["NOTIFY_SOCKET": notify.address])
        defer { standby.stop() }
        var messages: [[String]] = []
        for _ in 0..<4 {
            guard let message = notify.next(timeout: .seconds(15)) else { break }
            messages.append(message)
            if message.contains("STATUS=standby: node n1 leads cluster bank in epoch 1") { break }
        }
        #expect(messages.last == ["EXTEND_TIMEOUT_USEC=15000000", "STATUS=standby: node n1 leads cluster bank in epoch 1"], "\(messages)")
        #expect(!messages.contains { $0.contains("READY=1") })
        // The unit's leader ships: the standby, behind, is sent a copy and named in the sync key.
        #expect(standby.waitForLine { $0.contains("the leader's copy is in place at revision 1") } != nil, "\(standby.lines)")
        #expect(waitUntil { (try? etcd.get("/cogd/bank/sync")) == "1 n1 n2" }, "\(leader.lines)")
    }

    @Test func `a worker sends READY=1 to an abstract NOTIFY_SOCKET once it has synced`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let notify = try NotifySocket(abstract: true, folder: folder.path)
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try CogdProcess(
            executable: cogdExecutable(), ["worker", "--leader", ports.requests, "--name", "w1", "--rig", "ledger"],
            environment: ["NOTIFY_SOCKET": notify.address])
        defer { worker.stop() }
        #expect(notify.next() == ["STATUS=saying hello to the leader at \(ports.requests)"])
        let ready = notify.next()
        #expect(ready?.first == "READY=1" && ready?.contains("MAINPID=\(worker.process.processIdentifier)") == true, "\(String(describing: ready))")
        #expect(ready?.contains { $0.hasPrefix("STATUS=synced at revision 0, epoch ") } == true)
        #expect(worker.lines.contains { $0.contains("synced at revision 0") } || worker.waitForLine { $0.contains("synced at revision") } != nil)
    }

    @Test(.enabled(if: kernelHasMemoryDenyWriteExecute, "this kernel has no PR_SET_MDWE (Linux 6.3) to stand in for MemoryDenyWriteExecute="))
    func `the leader and a worker run with write-and-execute memory denied, as MemoryDenyWriteExecute= makes them`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try cogdWithoutWriteExecute([
            "leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns, "--heartbeat-timeout", "5",
        ])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("cogd leader: data") } != nil, "\(leader.lines)")
        let worker = try cogdWithoutWriteExecute(["worker", "--leader", ports.requests, "--name", "mdwe", "--rig", "ledger"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 10}"#).contains("applied"))
        #expect(worker.waitForLine { $0.contains("applied 1") } != nil, "\(worker.lines)")
        leader.interrupt()
        #expect(leader.waitForLine { $0.contains("cogd leader: stopped") } != nil, "\(leader.lines)")
    }
}
