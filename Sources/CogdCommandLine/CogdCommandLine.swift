import CCogdSupport
import Cog
import Foundation
internal import CLMDB
internal import CZMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The `cogd` command line as a library: one call gives an executable every
/// subcommand `cogd` has — `leader`, `worker`, `call`, `status`, `tail`,
/// `log`, `version`, and `drill`, `sim` and `bench` where they apply —
/// running the rigs it is given.
///
/// ```swift
/// // Sources/todo-server/main.swift
/// import CogdCommandLine
/// import Todos
///
/// await CogdCommandLine.main(rigs: [Todos.rig])
/// ```
///
/// `todo-server leader` then serves every given rig's ops; `todo-server
/// worker --rig NAME` runs one rig's mechanisms (the first rig when `--rig`
/// is not given); `--rig replica` runs none and replicates every rig's
/// state (a rig of that name is added unless one is given). `drill`, `sim`
/// and `bench cluster` exercise the Ledger rig (`LedgerRig.rigs`) and say so
/// when it is not among the rigs.
public enum CogdCommandLine {
    /// Runs the subcommand the process's arguments name and exits with its
    /// status (0 done, 1 a runtime failure, 64 a usage error).
    ///
    /// - Important: call it once, from the executable's entry point (it
    ///   installs signal handling). Two rigs with one name, or none at all,
    ///   trap, naming the fix.
    public static func main(rigs: [CogRig]) async -> Never {
        prepareSignals()
        exit(await run(Array(CommandLine.arguments.dropFirst()), rigs: Rigs(rigs)))
    }

    /// Runs one invocation (the arguments after the program name) and
    /// returns its exit status.
    static func run(_ arguments: [String], rigs: Rigs) async -> Int32 {
        let command: Command
        do {
            command = try Command.parse(arguments, rigNames: rigs.names, environment: ProcessInfo.processInfo.environment)
        } catch {
            printError("Error: \(escaped: error.message)")
            printError(usageLine(for: error.subcommand))
            printError("See '\(programName) \(error.subcommand.map { "\($0) " } ?? "")--help'")
            return 64
        }
        switch command {
        case .help(let topic):
            print(helpText(for: topic, rigs: rigs))
        case .version:
            print(versionText())
        case .bench(let options):
            switch options.suite {
            case .graph:
                await MainActor.run { GraphBench(options: options).run() }
            case .log, .cluster:
                if options.suite == .cluster, let missing = rigs.ledgerMissing(for: "bench cluster") { return missing }
                do {
                    if options.suite == .log {
                        try LogBench(options: options).run()
                    } else {
                        // On the main actor: one shape drives an in-process `Worker`.
                        try await MainActor.run { try ClusterBench(options: options).run() }
                    }
                } catch {
                    printError("Error: \(escaped: error)")
                    return 1
                }
            }
        case .tail(let options):
            return TailCommand(options: options).run()
        case .logVerify(let dataFolder):
            return await MainActor.run { LogCommands.verify(dataFolder: dataFolder) }
        case .logStats(let dataFolder, let json):
            return LogCommands.stats(dataFolder: dataFolder, json: json)
        case .logUpgrade(let dataFolder):
            return LogCommands.upgrade(dataFolder: dataFolder)
        case .logSoak(let dataFolder, let batch, let count):
            return LogCommands.soak(dataFolder: dataFolder, batch: batch, count: count)
        case .leader(let options):
            return await MainActor.run { ClusterCommands.leader(options, rigs: rigs) }
        case .worker(let options):
            return await ClusterCommands.worker(options, rigs: rigs)
        case .call(let options):
            return ClusterCommands.call(options)
        case .status(let endpoint, let json, let timeout, let keys):
            return ClusterCommands.status(leader: endpoint, json: json, timeout: timeout, keys: keys)
        case .echoServer(let endpoint, let commitFolder):
            return ClusterBench.serveEcho(endpoint: endpoint, commitFolder: commitFolder)
        case .drill(let options):
            if let missing = rigs.ledgerMissing(for: "drill") { return missing }
            var drill = Drill(options: options)
            do {
                return try drill.run()
            } catch {
                printError("Error: \(escaped: error)")
                return 1
            }
        case .sim(let options):
            if let missing = rigs.ledgerMissing(for: "sim") { return missing }
            return await MainActor.run { SimCommand.run(options) }
        case .keysGenerate(let name, let folder):
            return KeysCommand.generate(name: name, folder: folder)
        case .keysShow(let file):
            return KeysCommand.show(file: file)
        case .notYetAvailable(let name):
            printError("Error: '\(programName) \(name)' is not yet available in this build; see README.md for what works today")
            return 1
        }
        return 0
    }

    /// What usage lines and help call this program: the executable's file
    /// name (`cogd`, or a user's own).
    static let programName: String = {
        let name = CommandLine.arguments.first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? ""
        return name.isEmpty ? "cogd" : name
    }()

    /// Ignores SIGPIPE (a closed pipe is an error to handle, not a death) and
    /// unblocks SIGINT, SIGTERM and SIGHUP, which a parent may have left blocked in
    /// the mask every child inherits.
    static func prepareSignals() {
        signal(SIGPIPE, SIG_IGN)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        sigaddset(&unblocked, SIGINT)
        sigaddset(&unblocked, SIGTERM)
        sigaddset(&unblocked, SIGHUP)
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
    }

    static func usageLine(for subcommand: String?) -> String {
        let cogd = programName
        return switch subcommand {
        case "bench": "Usage: \(cogd) bench graph|log|cluster [--json] [--runs N] [--only SHAPE[,SHAPE…]] [--leader-spin-wait US] [--curve]"
        case "tail": "Usage: \(cogd) tail [--data DIR] [--from REV | --last N] [--follow] [--json] [--name PATTERN]\n       \(cogd) tail --connect TURNS-ENDPOINT [--json] [--name PATTERN] [--key FILE --leader-key FILE]"
        case "call": "Usage: \(cogd) call OP JSON [--leader ENDPOINT] [--timeout SECONDS] [--request-id W#N | --name NAME] [--key FILE --leader-key FILE]"
        case "status": "Usage: \(cogd) status [--leader ENDPOINT] [--timeout SECONDS] [--json] [--key FILE --leader-key FILE]"
        case "worker": "Usage: \(cogd) worker [--leader ENDPOINT] [--name NAME] [--rig NAME] [--key FILE --leader-key FILE]"
        case "version": "Usage: \(cogd) version"
        case "help": "Usage: \(cogd) help [SUBCOMMAND]"
        case "log": "Usage: \(cogd) log verify|stats|upgrade [--data DIR] [--json]"
        case "keys": "Usage: \(cogd) keys generate NAME [--out DIR]\n       \(cogd) keys show FILE"
        case let name?: "Usage: \(cogd) \(name) [options]"
        case nil: "Usage: \(cogd) <subcommand> [options] [--] [args]"
        }
    }

    static func helpText(for topic: String?, rigs: Rigs) -> String {
        let subcommands = Command.subcommands.map { entry in
            (name: entry.name, summary: programSummary(entry.summary) + rigs.ledgerNote(for: entry.name))
        }
        if let topic, let entry = subcommands.first(where: { $0.name == topic }) {
            var text = "\(usageLine(for: topic))\n\n\(entry.summary)\n"
            if let options = optionsHelp(for: topic) { text += options + "\n" }
            if topic == "leader" || topic == "worker" {
                text += "\n" + (topic == "leader" ? "Serves the ops of every rig; --rig only names one in its first line.\n" : "")
                text += "Rigs (--rig NAME, default \(rigs.defaultName)):\n"
                for rig in rigs.all {
                    text += "  \(padded(rig.name, to: 17)) \(rig.summary)\n"
                }
            }
            if topic == "bench" {
                text += """

                    Graph shapes: \(GraphBench.shapeNames.joined(separator: ", "))
                    Log shapes:   \(LogBench.shapeNames.joined(separator: ", "))
                    Cluster shapes: \(ClusterBench.shapeNames.joined(separator: ", "))
                    Options:
                      --json          one JSON object per figure: {"name", "value", "unit"}
                                      (log figures add "baseline" and "ratio": the raw LMDB figure)
                      --runs N        timed runs per shape (median reported; default 7)
                      --only S1,S2    run only these shapes
                      --leader-spin-wait US
                                      cluster: start the leader with --spin-wait US
                      --curve         cluster: then measure the round trip p50 and the 16-client
                                      turns/s again against a second leader serving with CURVE,
                                      beside the same without (interleaved runs; "baselineKind":
                                      "without-curve" in JSON)

                    Build in release mode first: swift build -c release
                    """
            }
            if topic == "tail" {
                text += """

                    Prints the last 10 turns (or --last N, or every turn from --from REV),
                    oldest first: revision, time, turn name, origin, then one line per write,
                    `name[key] = value` (`released` for a discard); control characters in
                    names and text print escaped (`\\n`, `\\u{1B}`). Safe beside a running
                    writer. JSON fields: protocol/turnlog.md.

                    Options:
                      --data DIR          the leader's data folder (default ./\(Command.defaultDataFolder))
                      --from REV          every turn from revision REV (default: the last 10); past the
                                          end it says where the log ends and exits 1 (unless --follow)
                      --last N            the last N turns (default 10)
                      --follow            keep printing turns as they commit (default: stop at the end)
                      --json              one JSON object per turn (default: lines)
                      --name PATTERN      only turns whose name matches a shell pattern (default: all);
                                          a malformed pattern (an unclosed `[`) is an error
                      --connect ENDPOINT  follow a running leader's live turn stream instead, its turns
                                          endpoint (HOST:PORT means tcp://HOST:PORT; the leader's default
                                          is \(Command.defaultTurnsEndpoint)), until Ctrl-C

                    Example:
                      \(programName) tail --data cogd-data --from 100 --name 'ledger.*' --json
                    """
            }
            if topic == "keys" {
                text += """

                    generate  writes a new CURVE key pair in DIR (default: the working directory,
                              made mode 0700 when missing): NAME.key, the secret key (mode 0600,
                              created so; never overwritten), and NAME.pub, the public key.
                              Prints the public key.
                    show      prints the public key of a key file: a .pub file's, or the one
                              derived from a secret key file (refused when its group or others
                              may read it: chmod 600 FILE).
                    Format: protocol/cogwire.md, "Security". The leader does not yet
                    authenticate with them (CURVE and its peers file: issue 15).
                    """
            }
            if topic == "log" {
                text += """

                    verify  checks that revisions are contiguous from 1, every record decodes,
                            and the state table equals the replay of the log; exits 1 naming
                            the first problem
                    stats   counts, sizes and the revision range (--json for one object)
                    upgrade rewrites a folder of an older log schema as this cogd's (schema 3:
                            every record gets its checksum; a schema 2 `null` write, read as a
                            release then, is recorded as one); stop the leader first
                    """
            }
            return text
        }
        var text = "\(programName) — Cog-style state on Linux, made multi-process\n\n\(usageLine(for: nil))\n\nSubcommands:\n"
        for entry in subcommands {
            text += "  \(padded(entry.name, to: 9)) \(entry.summary)\n"
        }
        text += "\nSee '\(programName) help <subcommand>' for one subcommand."
        return text
    }

    /// A subcommand's summary with this program's name where it says `cogd`.
    static func programSummary(_ summary: String) -> String {
        programName == "cogd" ? summary : summary.replacingOccurrences(of: "cogd ", with: "\(programName) ")
    }

    static func versionText() -> String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        let lmdb = String(cString: mdb_version(nil, nil, nil))
        return "cogd 0.1.0\n\(lmdb)\nZeroMQ \(major).\(minor).\(patch)"
    }
}

/// Writes one line to standard error.
func printError(_ text: String) {
    fflush(nil)
    var line = text + "\n"
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { break }
            offset += written
        }
    }
}

/// `text` followed by spaces up to `width` characters.
func padded(_ text: String, to width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}
