import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The `cogd` executable built beside the test bundle.
func cogdExecutable() -> URL {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var folder = testBinary.deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = folder.appendingPathComponent("cogd")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        folder = folder.deletingLastPathComponent()
    }
    return testBinary.deletingLastPathComponent().appendingPathComponent("cogd")
}

/// The lab's executable, `cogd-lab`, built beside `cogd`.
func cogdLabExecutable() -> URL {
    cogdExecutable().deletingLastPathComponent().appendingPathComponent("cogd-lab")
}

/// Runs `cogd-lab` (benchmarks, drills, the simulator) as `runCogd` runs `cogd`.
func runCogdLab(
    _ arguments: [String], timeout: Duration = .seconds(60), environment: [String: String] = [:]
) throws -> (status: Int32, stdout: String, stderr: String) {
    try runProgram(cogdLabExecutable(), arguments, environment: environment, timeout: timeout)
}

/// A fresh folder under the system temp directory.
struct TemporaryFolder {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-test-\(UUID().uuidString)").path
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `cogd` with `arguments` to completion (bounded by `timeout`); returns
/// the exit status and both outputs. `environment` is added to this process's.
func runCogd(
    _ arguments: [String], timeout: Duration = .seconds(60), environment: [String: String] = [:]
) throws -> (status: Int32, stdout: String, stderr: String) {
    try runProgram(cogdExecutable(), arguments, environment: environment, timeout: timeout)
}

/// Runs any program as `runCogd` runs `cogd`.
func runProgram(
    _ executable: URL, _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(60)
) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    // Both outputs are read on their own threads while the deadline runs
    // here: a child that hangs is killed at the deadline instead of
    // blocking the read (and the test) for good.
    let outData = PipeReader(out)
    let errData = PipeReader(err)
    waitForExit(process, timeout: timeout)
    return (process.terminationStatus, outData.text(), errData.text())
}

/// Reads a pipe to its end on a thread of its own.
final class PipeReader: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        DispatchQueue.global().async {
            let read = handle.readDataToEndOfFile()
            // Closed here, at its end: left to the handle's deinit, the
            // descriptor outlived the call (Foundation keeps the pipe), and
            // a run of the suite held over a thousand. Foundation's
            // `Process.run` reads /proc/self/fd past its buffer when there
            // are that many (swift-corelibs-foundation PR 5472) and crashed
            // the test process.
            try? handle.close()
            self.lock.lock()
            self.data = read
            self.lock.unlock()
            self.done.signal()
        }
    }

    /// What was read, once the pipe ended (waiting at most 10 s more: a
    /// grandchild may still hold the pipe open).
    func text() -> String {
        _ = done.wait(timeout: .now() + 10)
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Waits (polling, bounded) for a child to exit; kills it with SIGKILL when
/// the deadline passes, so no test leaves a process behind.
func waitForExit(_ process: Process, timeout: Duration = .seconds(30)) {
    let deadline = ContinuousClock.now + timeout
    while process.isRunning && ContinuousClock.now < deadline { usleep(2_000) }
    if process.isRunning {
        kill(process.processIdentifier, SIGKILL)
        while process.isRunning { usleep(2_000) }
    }
}

/// Stops a child: SIGTERM, then SIGKILL if it is still running after a while.
func stopProcess(_ process: Process) {
    guard process.isRunning else { return }
    process.terminate()
    waitForExit(process, timeout: .seconds(5))
}
