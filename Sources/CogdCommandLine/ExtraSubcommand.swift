import CogProtocol

/// A subcommand a program adds beside the runtime's: how the lab's
/// executable, `cogd-lab` (module `CogLab`), puts `bench`, `drill` and `sim`
/// beside `leader`, `worker` and the tools without the runtime — the library
/// a user's app links — depending on any of them.
///
/// The runtime lists it in help (unless `hidden`), shows its page for
/// `help NAME` and `NAME --help`, and hands it the arguments after its name;
/// a usage error it throws is printed the runtime's way (exit 64).
package struct ExtraSubcommand: Sendable {
    /// What the subcommand's parser returns: the work, run once.
    package typealias Run = @Sendable () async -> Int32

    package let name: String
    /// The line help lists, `what it does: cogd NAME [OPTION…]` (`cogd` is
    /// replaced by the program's name).
    package let summary: String
    /// Its usage line(s), given the program's name.
    package let usage: @Sendable (_ program: String) -> String
    /// What help prints under the usage line and the summary, given the
    /// program's name.
    package let page: @Sendable (_ program: String) -> String
    /// Parses the arguments after the name, or throws a usage error.
    package let parse: @Sendable (_ arguments: [String]) throws(CommandUsageError) -> Run
    /// Not listed in help (a child process's own subcommand).
    package let hidden: Bool

    package init(
        name: String, summary: String, hidden: Bool = false, usage: @escaping @Sendable (_ program: String) -> String,
        page: @escaping @Sendable (_ program: String) -> String,
        parse: @escaping @Sendable (_ arguments: [String]) throws(CommandUsageError) -> Run
    ) {
        self.name = name
        self.summary = summary
        self.hidden = hidden
        self.usage = usage
        self.page = page
        self.parse = parse
    }
}

extension CogdCommandLine {
    /// Sends one request to the leader at `endpoint` and waits, at most
    /// `timeout`, for its answer (nil: none came): what `call` and `status`
    /// do, for a program's own subcommands (the lab's drills ask the status).
    package static func request(
        _ message: WireMessage, leader endpoint: String, timeout: Duration, keys: CommandClientKeyFiles? = nil
    ) throws -> WireMessage? {
        try ClusterCommands.request(message, leader: endpoint, timeout: timeout, keys: keys)
    }
}
