import CogWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The repository's root (this file is Tests/CogdTests/…).
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// SIGKILLs every process whose command line mentions one of `texts`: what a
/// test started through a script is found by its data folder or endpoint.
private func killProcesses(mentioning texts: [String]) {
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = pid_t(entry), pid != getpid(),
            let bytes = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
        else { continue }
        let commandLine = String(decoding: bytes, as: UTF8.self)
        if texts.contains(where: { commandLine.contains($0) }) { kill(pid, SIGKILL) }
    }
}

/// Runs `body` (which starts a child) with no signal blocked on this thread:
/// a child inherits the spawning thread's mask, and the test runner's threads
/// block every signal, so a shell started from one could never take its
/// SIGINT trap. A terminal's shell starts programs with nothing blocked.
private func withSignalsUnblocked<T>(_ body: () throws -> T) rethrows -> T {
    var none = sigset_t()
    var previous = sigset_t()
    sigemptyset(&none)
    pthread_sigmask(SIG_SETMASK, &none, &previous)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    return try body()
}

@Suite("deploy/local-cluster.sh in a terminal", .serialized, .timeLimit(.minutes(10)))
struct LocalClusterScriptTests {
    @Test func `a terminal's Ctrl-C stops the leader and both workers once each, and each prints its stop line`() throws {
        let folder = TemporaryFolder()
        let ports = ClusterPorts()
        // `script` runs the cluster script on a pseudo-terminal: a ^C written
        // to it is the terminal's Ctrl-C, SIGINT to its foreground process group.
        let keyboard = Pipe()
        let terminal = try withSignalsUnblocked {
            try CogdProcess(
                executable: URL(fileURLWithPath: "/usr/bin/script"),
                ["--quiet", "--return", "--command", "bash deploy/local-cluster.sh", "/dev/null"],
                environment: [
                    "COGD": cogdExecutable().path, "COGD_DATA": folder.path, "COGD_REQUESTS": ports.requests,
                    "COGD_TURNS": ports.turns, "SHELL": "/bin/bash",
                ],
                input: keyboard, directory: repositoryRoot)
        }
        defer {
            // Whatever happened, nothing the script started outlives the test
            // (they hold the pipe by which `Process` sees the script exit).
            killProcesses(mentioning: [folder.path, ports.requests])
            terminal.stop()
            folder.cleanUp()
        }
        let revisionLine = terminal.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("revision  ") }
        #expect(terminal.waitForLine(timeout: .seconds(30)) { $0.contains("running; Ctrl-C stops") } != nil, "\(terminal.lines)")
        let revision = revisionLine.map { $0.dropFirst("revision  ".count).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"

        try keyboard.fileHandleForWriting.write(contentsOf: [0x03])  // Ctrl-C
        let stopped = terminal.waitForLine(timeout: .seconds(30)) { $0.contains("stopped leader and workers") }
        #expect(stopped != nil, "\(terminal.lines)")
        if stopped == nil { killProcesses(mentioning: [folder.path, ports.requests]) }
        waitForExit(terminal.process, timeout: .seconds(10))
        #expect(terminal.process.terminationStatus == 130, "the script ends as interrupted")

        let lines = terminal.lines.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        for (name, stopLine) in [
            ("worker-1", "cogd worker worker-1: stopped at revision \(revision)"),
            ("worker-2", "cogd worker worker-2: stopped at revision \(revision)"),
        ] {
            // (The terminal may echo ^C before the first; the stop line names the process once.)
            #expect(lines.contains { $0.hasSuffix("\(stopLine) (exit 0)") && !$0.contains("\(name): cogd") }, "\(name) drained once and exited 0: \(lines)")
        }
        // The workers stop first and say goodbye: the leader retires what they held in records of its own, after them.
        let leaderStop = lines.firstIndex { $0.range(of: #"(^|[^:] )cogd leader: stopped at revision \d+ \(exit 0\)$"#, options: .regularExpression) != nil }
        let stoppedAt = leaderStop.flatMap { UInt64(lines[$0].split(separator: " ").dropLast(2).last ?? "") }
        #expect(stoppedAt != nil && stoppedAt! >= UInt64(revision) ?? .max, "the leader drained once and exited 0: \(lines)")
        #expect(leaderStop.map { index in lines[..<index].filter { $0.contains(": stopped at revision") }.count == 2 } == true, "\(lines)")
        if let logs = lines.last(where: { $0.contains("(logs in ") })?.split(separator: "(logs in ").last?.dropLast() {
            try? FileManager.default.removeItem(atPath: String(logs))
        }
    }

    /// `deploy/local-cluster.sh --demo` on `ports`, its data in `folder`.
    private func startDemo(_ folder: TemporaryFolder, _ ports: ClusterPorts) throws -> CogdProcess {
        try CogdProcess(
            executable: URL(fileURLWithPath: "/bin/bash"), ["deploy/local-cluster.sh", "--demo"],
            environment: ["COGD": cogdExecutable().path, "COGD_DATA": folder.path, "COGD_REQUESTS": ports.requests, "COGD_TURNS": ports.turns],
            directory: repositoryRoot)
    }

    @Test func `the demo stops at once, saying why, when its leader cannot start: nothing reaches whatever holds the port`() throws {
        let folder = TemporaryFolder()
        let ports = ClusterPorts()
        // Something else listens on the requests port (another leader, say).
        let context = try ZMQContext()
        let squatter = try ZMQSocket(context, .router, linger: .zero)
        try squatter.bind(ports.requests)
        defer {
            squatter.close()
            context.close()
        }
        let demo = try startDemo(folder, ports)
        defer {
            killProcesses(mentioning: [folder.path, ports.requests])
            demo.stop()
            folder.cleanUp()
        }
        #expect(demo.waitForLine(timeout: .seconds(60)) { $0.contains("stopped leader and workers") } != nil, "\(demo.lines)")
        waitForExit(demo.process, timeout: .seconds(10))
        #expect(demo.process.terminationStatus == 1, "\(demo.lines)")
        let output = demo.lines.joined(separator: "\n")
        #expect(output.contains("the leader did not start:\nError: cannot listen on \(ports.requests)"), "\(output)")
        #expect(!output.contains("worker-1") && !output.contains("== a little activity =="), "no worker started, no call made: \(output)")
        // Nothing was sent to the squatter.
        #expect(try squatter.receive() == nil)
        if let logs = demo.lines.last(where: { $0.contains("(logs in ") })?.split(separator: "(logs in ").last?.dropLast() {
            try? FileManager.default.removeItem(atPath: String(logs))
        }
    }

    @Test func `the demo names who calls and which scope each turn comes from, not UUIDs and instance numbers`() throws {
        let folder = TemporaryFolder()
        let ports = ClusterPorts()
        let demo = try startDemo(folder, ports)
        defer {
            killProcesses(mentioning: [folder.path, ports.requests])
            demo.stop()
            folder.cleanUp()
        }
        #expect(demo.waitForLine(timeout: .seconds(90)) { $0.contains("stopped leader and workers") } != nil, "\(demo.lines)")
        let output = demo.lines.joined(separator: "\n")
        func matches(_ pattern: String) -> Bool { output.range(of: pattern, options: .regularExpression) != nil }
        // (The first revisions may be the roots spread as the second worker joins.)
        #expect(matches(#"\napplied revision [0-9]+ \(request ranger#"#), "\(output)")
        #expect(output.contains("  trails.openScreen  (worker ranger, request ranger#"), "\(output)")
        // Each call is shown, with what it does, before its reply.
        #expect(matches(#"\nranger opens screen 1 on the ridge trail [^\n]*: cogd call trails\.openScreen '\{"screen": 1, "trail": "ridge"\}' --name ranger\napplied revision [0-9]+ \(request ranger#1\)\n"#), "\(output)")
        #expect(output.contains("  trails.startHike  (worker hiker, request hiker#"), "\(output)")
        // The two workers form one group (the rig's): which of them a child or a
        // mechanism's root lands on depends on which registered first.
        #expect(matches(#"\n    opens  TrailScreens\.trailScreen\[1\] #1\.[0-9]+ on worker-[12]\n"#), "\(output)")
        #expect(
            matches(#"  TrailScreens\.trailScreen\.trails\.accept  \(worker worker-[12], scope TrailScreens\.trailScreen\[1\] #1\.[0-9]+, request worker-[12]#"#),
            "\(output)")
        #expect(matches(#"\(worker worker-[12], scope HikeTimer\.hikeTimer #1\.[0-9]+, request worker-[12]#"#), "\(output)")
        // The journal's turns come from a mechanism's root, which a registration reply opened: named all the same.
        #expect(matches(#"  Journal\.trails\.journal  \(worker worker-[12], scope Journal \(root\) #1\.[0-9]+, request worker-[12]#"#), "\(output)")
        #expect(!output.contains("scope #"), "every scope instance is named: \(output)")
        #expect(matches(#"\n          roots: HikeTimer on worker-[12], Journal on worker-[12], TrailScreens on worker-[12]\n"#), "\(output)")
        let roots = output.split(separator: "\n").first { $0.hasPrefix("          roots: ") } ?? ""
        #expect(roots.contains("on worker-1") && roots.contains("on worker-2"), "the three roots spread over both: \(roots)")
        #expect(!output.contains("call-"), "no call's random name: \(output)")
        #expect(output.range(of: #" #[0-9]{6,}"#, options: .regularExpression) == nil, "no raw instance number: \(output)")
        if let logs = demo.lines.last(where: { $0.contains("(logs in ") })?.split(separator: "(logs in ").last?.dropLast() {
            try? FileManager.default.removeItem(atPath: String(logs))
        }
    }
}
