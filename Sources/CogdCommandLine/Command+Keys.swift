import CogWire

extension Command {
    /// The environment variables that give `--key` and `--leader-key` when
    /// they are not on the command line.
    static let keyEnvironmentVariable = "COGD_KEY"
    static let leaderKeyEnvironmentVariable = "COGD_LEADER_KEY"

    typealias ClientKeyFiles = CommandClientKeyFiles

    /// The client keys the options or, failing them, `COGD_KEY` and
    /// `COGD_LEADER_KEY` name; nil when neither does. One without the other
    /// is a usage error: CURVE needs both.
    static func clientKeys(
        key: String?, leaderKey: String?, environment: [String: String], subcommand: String
    ) throws(UsageError) -> ClientKeyFiles? {
        let key = key ?? environment[keyEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 }
        let leaderKey = leaderKey ?? environment[leaderKeyEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 }
        switch (key, leaderKey) {
        case (nil, nil): return nil
        case (let key?, let leaderKey?): return ClientKeyFiles(key: key, leaderKey: leaderKey)
        case (nil, _):
            throw UsageError(
                message: "--leader-key needs --key too (this side's secret key file, or \(keyEnvironmentVariable)): CURVE takes both",
                subcommand: subcommand)
        case (_, nil):
            throw UsageError(
                message: "--key needs --leader-key too (the leader's public key file, or \(leaderKeyEnvironmentVariable)): CURVE takes both",
                subcommand: subcommand)
        }
    }

    /// Reads the option's value as a file path (not empty).
    static func filePath(_ text: String, option: String, subcommand: String) throws(UsageError) -> String {
        guard !text.isEmpty else { throw UsageError(message: "\(option) takes a file, not an empty string", subcommand: subcommand) }
        return text
    }
}

/// Where a client's CURVE keys are (`--key FILE --leader-key FILE`):
/// its secret key file and the leader's public (or secret) key file.
package struct CommandClientKeyFiles: Equatable {
    package var key: String
    package var leaderKey: String

    package init(key: String, leaderKey: String) {
        self.key = key
        self.leaderKey = leaderKey
    }

    /// Reads both files (a secret key file its group or others may read is refused).
    func load() throws(CurveKeyError) -> CurveClientKeys {
        try CurveClientKeys.load(keyFile: key, leaderKeyFile: leaderKey)
    }
}
