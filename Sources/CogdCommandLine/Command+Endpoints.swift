import Cog
import Foundation

extension Command {
    /// The environment variable that sets the default `--leader` endpoint
    /// of `worker`, `call` and `status`.
    static let leaderEnvironmentVariable = "COGD_LEADER"

    /// The transports an endpoint may name.
    static let endpointSchemes = ["tcp://", "ipc://", "inproc://"]

    /// `text` as a ZeroMQ endpoint: `tcp://HOST:PORT`, `ipc://PATH` or
    /// `inproc://NAME` as given, and `HOST:PORT` without a scheme as
    /// `tcp://HOST:PORT`. Anything else is a usage error naming `source`
    /// (the option or environment variable it came from), so ZeroMQ never
    /// sees an endpoint it would refuse with a bare "Invalid argument".
    ///
    /// ```swift
    /// try Command.endpoint("127.0.0.1:5701", from: "--leader", subcommand: "call")   // "tcp://127.0.0.1:5701"
    /// ```
    static func endpoint(_ text: String, from source: String, subcommand: String?) throws(UsageError) -> String {
        // The turn stream's options show the turns port, the others the requests port.
        let port = ["--connect", "--turns"].contains(source) ? "5702" : "5701"
        func refuse(_ why: String) -> UsageError {
            UsageError(
                message: "\(source) takes an endpoint like tcp://127.0.0.1:\(port) or 127.0.0.1:\(port), not '\(text)': "
                    + why.replacingOccurrences(of: "5701", with: port),
                subcommand: subcommand)
        }
        guard !text.isEmpty else { throw refuse("it is empty") }
        guard !text.contains(where: { $0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } == true }) else {
            throw refuse("it contains a control character")
        }
        if let range = text.range(of: "://") {
            let scheme = String(text[..<range.lowerBound]) + "://"
            let rest = String(text[range.upperBound...])
            guard Command.endpointSchemes.contains(scheme) else {
                throw refuse("unknown transport '\(scheme)' (one of: \(Command.endpointSchemes.joined(separator: ", ")))")
            }
            guard scheme == "tcp://" else {
                guard !rest.isEmpty else { throw refuse("nothing follows \(scheme)") }
                return text
            }
            try checkHostAndPort(rest, refuse)
            return text
        }
        try checkHostAndPort(text, refuse)
        return "tcp://" + text
    }

    /// Checks `HOST:PORT`: a host (a name, an address, `[IPv6]`, or `*` to
    /// bind every interface) and a port from 1 to 65535 (or `*`, any free one).
    private static func checkHostAndPort(_ address: String, _ refuse: (String) -> UsageError) throws(UsageError) {
        guard !address.contains(where: \.isWhitespace) else { throw refuse("it contains a space") }
        guard let colon = address.lastIndex(of: ":") else { throw refuse("no port (HOST:PORT)") }
        let host = address[..<colon]
        let port = address[address.index(after: colon)...]
        guard !host.isEmpty else { throw refuse("no host before the port") }
        if host.hasPrefix("[") != host.hasSuffix("]") { throw refuse("an unclosed '[' around an IPv6 address") }
        if !host.hasPrefix("[") && host.contains(":") { throw refuse("an IPv6 address goes in brackets: [::1]:5701") }
        guard port == "*" || (UInt16(port).map { $0 >= 1 } ?? false) else {
            throw refuse("the port must be a number from 1 to 65535")
        }
    }

    /// The most endpoints one `--leader` lists.
    static let maximumLeaderEndpoints = 16

    /// A `--leader` (or `tail --connect`) value: one endpoint, or the nodes
    /// of an HA cluster separated by commas
    /// (`tcp://10.0.0.1:5701,tcp://10.0.0.2:5701`), each checked as
    /// `endpoint` does; given back joined by commas.
    static func leaderEndpoints(_ text: String, from source: String, subcommand: String?) throws(UsageError) -> String {
        guard text.contains(",") else { return try endpoint(text, from: source, subcommand: subcommand) }
        let pieces = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard pieces.count <= maximumLeaderEndpoints else {
            throw UsageError(
                message: "\(source) lists \(pieces.count) endpoints; at most \(maximumLeaderEndpoints) (the nodes of one cluster)",
                subcommand: subcommand)
        }
        var checked: [String] = []
        for piece in pieces {
            let one = try endpoint(piece, from: source, subcommand: subcommand)
            if !checked.contains(one) { checked.append(one) }
        }
        return checked.joined(separator: ",")
    }

    /// The default `--leader` endpoint: `COGD_LEADER` when set (checked like
    /// `--leader`, a list of an HA cluster's nodes too), else the leader's
    /// default requests endpoint.
    static func defaultLeaderEndpoint(_ environment: [String: String], subcommand: String) throws(UsageError) -> String {
        guard let text = environment[leaderEnvironmentVariable] else { return defaultRequestsEndpoint }
        return try leaderEndpoints(text, from: leaderEnvironmentVariable, subcommand: subcommand)
    }

    /// Seconds a command waits (`--timeout`): more than 0, at most a day.
    static func timeout(_ text: String, subcommand: String) throws(UsageError) -> Duration {
        guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
            throw UsageError(message: "--timeout takes seconds (more than 0, at most 86400), not '\(text)'", subcommand: subcommand)
        }
        return .milliseconds(Int64((seconds * 1_000).rounded(.up)))
    }

    /// `duration` in seconds as help and messages print it: `5`, `0.5`.
    static func secondsText(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1_000 == 0 ? "\(milliseconds / 1_000)" : "\(Double(milliseconds) / 1_000)"
    }

    /// Checks a `tail --name` shell pattern (`fnmatch(3)`): not empty, every
    /// `[` closed, no `\` left at the end.
    static func namePattern(_ text: String) throws(UsageError) -> String {
        func refuse(_ why: String) -> UsageError {
            UsageError(message: "--name takes a shell pattern like 'ledger.*' or '*deposit*', not '\(text)': \(why)", subcommand: "tail")
        }
        guard !text.isEmpty else { throw refuse("it is empty") }
        var characters = Array(text)[...]
        while let character = characters.popFirst() {
            switch character {
            case "\\":
                guard characters.popFirst() != nil else { throw refuse("it ends in a lone '\\'") }
            case "[":
                // A bracket expression: `]` right after `[` or `[!` is a member, not its end.
                if characters.first == "!" || characters.first == "^" { characters.removeFirst() }
                if characters.first == "]" { characters.removeFirst() }
                guard let close = characters.firstIndex(of: "]") else { throw refuse("a '[' is never closed by ']'") }
                characters = characters[characters.index(after: close)...]
            default:
                break
            }
        }
        return text
    }
}

extension Command {
    /// The environment variables each subcommand reads (its options' defaults).
    static let variablesRead: [String: Set<String>] = {
        let client: Set = [leaderEnvironmentVariable, keyEnvironmentVariable, leaderKeyEnvironmentVariable]
        let logging: Set = [logFormatEnvironmentVariable, logLevelEnvironmentVariable]
        return [
            "leader": Set([dataEnvironmentVariable, requestsEnvironmentVariable, turnsEnvironmentVariable]).union(logging),
            "worker": client.union(logging),
            "call": client,
            "status": client,
            "get": client.union([dataEnvironmentVariable]),
            "tail": client.union([dataEnvironmentVariable]),
            "log": [dataEnvironmentVariable],
        ]
    }()

    /// What to say of the variables set in `environment` that name where
    /// things are (`COGD_DATA`, `COGD_REQUESTS`, `COGD_TURNS`,
    /// `COGD_LEADER`) and that another subcommand reads but `subcommand`
    /// does not (so one meant for another command is said once, not
    /// silently ignored): one sentence each, naming which subcommands read
    /// it. Other `COGD_*` names (the systemd units' and
    /// `deploy/local-cluster.sh`'s own) are not cogd's to judge.
    static func unreadVariables(subcommand: String, environment: [String: String]) -> [String] {
        unreadVariableNames(subcommand: subcommand, environment: environment).map { name in
            let readers = variablesRead.filter { $0.value.contains(name) }.keys.sorted()
            return "\(name) is set, but \(subcommand) does not read it (read by: \(readers.joined(separator: ", ")))"
        }
    }

    /// The names `unreadVariables` speaks of, sorted.
    static func unreadVariableNames(subcommand: String, environment: [String: String]) -> [String] {
        let read = variablesRead[subcommand] ?? []
        // Where things are, not how to log or which keys to use: those are
        // preferences a shell sets once for every command.
        let located: Set = [dataEnvironmentVariable, requestsEnvironmentVariable, turnsEnvironmentVariable, leaderEnvironmentVariable]
        return environment.keys.filter { located.contains($0) && !read.contains($0) }.sorted()
    }
}

