@testable import CogdCommandLine
@testable import cogd

extension Command {
    /// `Command.parse` as `cogd` runs it: `--rig` among the rigs `cogd` offers.
    static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        try parse(arguments, rigNames: Rigs(CogdMain.rigs).names)
    }

    /// `Command.parse` as `cogd` runs it with `environment`.
    static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Command {
        try parse(arguments, rigNames: Rigs(CogdMain.rigs).names, environment: environment)
    }
}
