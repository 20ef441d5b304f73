import CCogdSupport
internal import CLMDB
internal import CZMQ

#if canImport(Glibc)
    import Glibc
#endif

@main
struct CogdMain {
    static func main() async {
        prepareSignals()
        let arguments = Array(CommandLine.arguments.dropFirst())
        let command: Command
        do {
            command = try Command.parse(arguments)
        } catch {
            printError("Error: \(escaped: error.message)")
            printError(usageLine(for: error.subcommand))
            printError("See 'cogd \(error.subcommand.map { "\($0) " } ?? "")--help'")
            exit(64)
        }
        switch command {
        case .help(let topic):
            print(helpText(for: topic))
        case .version:
            print(versionText())
        case .bench(let options):
            switch options.suite {
            case .graph:
                await MainActor.run { GraphBench(options: options).run() }
            case .log, .cluster:
                do {
                    if options.suite == .log {
                        try LogBench(options: options).run()
                    } else {
                        // On the main actor: one shape drives an in-process `Worker`.
                        try await MainActor.run { try ClusterBench(options: options).run() }
                    }
                } catch {
                    printError("Error: \(escaped: error)")
                    exit(1)
                }
            }
        case .tail(let options):
            exit(TailCommand(options: options).run())
        case .logVerify(let dataFolder):
            exit(LogCommands.verify(dataFolder: dataFolder))
        case .logStats(let dataFolder, let json):
            exit(LogCommands.stats(dataFolder: dataFolder, json: json))
        case .logUpgrade(let dataFolder):
            exit(LogCommands.upgrade(dataFolder: dataFolder))
        case .logSoak(let dataFolder, let batch, let count):
            exit(LogCommands.soak(dataFolder: dataFolder, batch: batch, count: count))
        case .leader(let options):
            exit(await MainActor.run { ClusterCommands.leader(options) })
        case .worker(let options):
            exit(await ClusterCommands.worker(options))
        case .call(let options):
            exit(ClusterCommands.call(options))
        case .status(let endpoint, let json):
            exit(ClusterCommands.status(leader: endpoint, json: json))
        case .echoServer(let endpoint, let commitFolder):
            exit(ClusterBench.serveEcho(endpoint: endpoint, commitFolder: commitFolder))
        case .drill(let options):
            var drill = Drill(options: options)
            do {
                exit(try drill.run())
            } catch {
                printError("Error: \(escaped: error)")
                exit(1)
            }
        case .sim(let options):
            exit(await MainActor.run { SimCommand.run(options) })
        case .notYetAvailable(let name):
            printError("Error: 'cogd \(name)' is not yet available in this build; see README.md for what works today")
            exit(1)
        }
    }

    /// Ignores SIGPIPE (a closed pipe is an error to handle, not a death) and
    /// unblocks SIGINT and SIGTERM, which a parent may have left blocked in
    /// the mask every child inherits.
    static func prepareSignals() {
        signal(SIGPIPE, SIG_IGN)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        sigaddset(&unblocked, SIGINT)
        sigaddset(&unblocked, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
    }

    static func usageLine(for subcommand: String?) -> String {
        switch subcommand {
        case "bench": "Usage: cogd bench graph|log|cluster [--json] [--runs N] [--only SHAPE[,SHAPE…]] [--leader-spin-wait US]"
        case "tail": "Usage: cogd tail [--data DIR] [--from REV | --last N] [--follow] [--json] [--name PATTERN]\n       cogd tail --connect TURNS-ENDPOINT [--json] [--name PATTERN]"
        case "log": "Usage: cogd log verify|stats|upgrade [--data DIR] [--json]"
        case let name?: "Usage: cogd \(name) [options]"
        case nil: "Usage: cogd <subcommand> [options] [--] [args]"
        }
    }

    static func helpText(for topic: String?) -> String {
        if let topic, let entry = Command.subcommands.first(where: { $0.name == topic }) {
            var text = "\(usageLine(for: topic))\n\n\(entry.summary)\n"
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

                    Build in release mode first: swift build -c release
                    """
            }
            if topic == "tail" {
                text += """

                    Prints the last 10 turns (or --last N, or every turn from --from REV),
                    oldest first: revision, time, turn name, origin, then one line per write,
                    `name[key] = value` (`released` for a discard); control characters in
                    names and text print escaped (`\\n`, `\\u{1B}`). Safe beside a running
                    writer. --follow keeps printing turns as they commit; --json prints one
                    object per line (fields in protocol/turnlog.md); --name keeps turns whose
                    name matches a shell pattern (`deposit*`). Default folder: ./\(Command.defaultDataFolder)
                    --connect follows a running leader's live turn stream instead (its
                    turns endpoint, default tcp://127.0.0.1:5702) until Ctrl-C.
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
        var text = "cogd — Cog-style state on Linux, made multi-process\n\n\(usageLine(for: nil))\n\nSubcommands:\n"
        for entry in Command.subcommands {
            text += "  \(padded(entry.name, to: 9)) \(entry.summary)\n"
        }
        text += "\nSee 'cogd help <subcommand>' for one subcommand."
        return text
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
