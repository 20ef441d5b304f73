import Cog
import Foundation

extension Command {
    /// The worker's settings: its `--settings FILE` (read now, at most
    /// `CogRig.Settings.maximumFileBytes`), with its `--set KEY=VALUE`s
    /// replacing the file's value of a key both give. A file that is missing,
    /// unreadable, too large or not `KEY=VALUE` lines is a usage error naming
    /// the file (and the line).
    static func workerSettings(_ options: WorkerOptions) throws(UsageError) -> CogRig.Settings {
        guard let path = options.settingsFile else { return options.settings }
        let name = "--settings \(TerminalText.escaped(path))"
        let bytes: [UInt8]
        switch readBounded(path, limit: CogRig.Settings.maximumFileBytes) {
        case .success(let read): bytes = read
        case .failure(let reason): throw UsageError(message: "\(name): cannot read the file: \(reason)", subcommand: "worker")
        }
        do {
            return try CogRig.Settings(fileBytes: bytes).merging(options.settings)
        } catch {
            throw UsageError(message: "\(name): \(error.message)", subcommand: "worker")
        }
    }

    struct ReadFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// The file's bytes, at most `limit` + 1 of them (one more says it is too large).
    private static func readBounded(_ path: String, limit: Int) -> Result<[UInt8], ReadFailure> {
        guard let file = fopen(path, "rb") else { return .failure(ReadFailure(description: String(cString: strerror(errno)))) }
        defer { fclose(file) }
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        let count = bytes.withUnsafeMutableBytes { fread($0.baseAddress, 1, limit + 1, file) }
        if ferror(file) != 0 { return .failure(ReadFailure(description: String(cString: strerror(errno)))) }
        return .success(Array(bytes.prefix(count)))
    }
}
