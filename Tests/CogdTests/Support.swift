import Foundation

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

/// A fresh folder under the system temp directory.
struct TemporaryFolder {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-test-\(UUID().uuidString)").path
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `cogd` with `arguments` to completion (bounded by `timeout`); returns
/// the exit status and both outputs.
func runCogd(_ arguments: [String], timeout: Duration = .seconds(60)) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = cogdExecutable()
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let deadline = ContinuousClock.now + timeout
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    while process.isRunning && ContinuousClock.now < deadline { usleep(1_000) }
    if process.isRunning {
        process.terminate()
        process.waitUntilExit()
    }
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
}
