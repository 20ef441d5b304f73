@testable import CogdCommandLine
@testable import CogLab
@testable import cogd

extension Command {
    /// `Command.parse` as `cogd` runs it: `--rig` among the rigs `cogd` offers.
    static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        try parse(arguments, rigNames: Rigs(CogdMain.rigs).names)
    }

    /// `Command.parse` as `cogd-lab` runs it: the lab's subcommands and `--trap-op` offered.
    static func parseLab(_ arguments: [String]) throws(UsageError) -> Command {
        let lab = CogLab.program
        return try parse(arguments, rigNames: lab.names, extras: lab.extras.map(\.name), trapOffered: lab.trap != nil)
    }

    /// `Command.parse` as `cogd` runs it with `environment`.
    static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Command {
        try parse(arguments, rigNames: Rigs(CogdMain.rigs).names, environment: environment)
    }
}
