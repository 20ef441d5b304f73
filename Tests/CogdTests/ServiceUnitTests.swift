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

@Suite("systemd units and the service manager", .serialized, .timeLimit(.minutes(2)))
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
        #expect(leader.waitForLine { $0.hasPrefix("cogd leader: stopped") } != nil)
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
        #expect(leader.waitForLine { $0.hasPrefix("cogd leader: data") } != nil, "\(leader.lines)")
        let worker = try cogdWithoutWriteExecute(["worker", "--leader", ports.requests, "--name", "mdwe", "--rig", "ledger"])
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 10}"#).contains("applied"))
        #expect(worker.waitForLine { $0.contains("applied 1") } != nil, "\(worker.lines)")
        leader.interrupt()
        #expect(leader.waitForLine { $0.hasPrefix("cogd leader: stopped") } != nil, "\(leader.lines)")
    }
}
