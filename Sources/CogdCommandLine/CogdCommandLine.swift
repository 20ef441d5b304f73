import CogCluster
import Cog
import Foundation
import Synchronization
internal import CLMDB
internal import CZMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The `cogd` command line as a library: one call gives an executable every
/// runtime subcommand `cogd` has — `leader`, `worker`, `call`, `status`,
/// `get`, `ops`, `tail`, `log`, `keys`, `version` — running the rigs it is
/// given. (Benchmarks, drills and the simulator are the lab's: the separate
/// `cogd-lab` executable.)
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
/// state (a rig of that name is added unless one is given).
public enum CogdCommandLine {
    /// Runs the subcommand the process's arguments name and exits with its
    /// status (0 done, 1 a runtime failure, 64 a usage error).
    ///
    /// - Important: call it once, from the executable's entry point (it
    ///   installs signal handling). Two rigs with one name, or none at all,
    ///   trap, naming the fix.
    ///
    /// - Parameter version: the program's own version: `PROGRAM version`
    ///   prints it first, and its leader reports `PROGRAM VERSION (cogd
    ///   0.1.0)` in `status`.
    public static func main(rigs: [CogRig], version: String? = nil) async -> Never {
        programVersion.withLock { $0 = version.map { TerminalText.escaped($0) } }
        await main(rigs: Rigs(rigs))
    }

    /// The version the program was given (`main(rigs:version:)`).
    static let programVersion = Mutex<String?>(nil)

    /// What a leader run by this program reports as its version: cogd's
    /// (`0.1.0`) for `cogd` itself, else the program's name and version
    /// with cogd's (`todo 1.2.0 (cogd 0.1.0)`).
    static var versionIdentity: String {
        let version = programVersion.withLock { $0 }
        guard programName != "cogd" || version != nil else { return CogdVersion.current }
        return "\(TerminalText.escaped(programName))\(version.map { " \($0)" } ?? "") (cogd \(CogdVersion.current))"
    }

    /// Runs with a program's additions: the lab's subcommands and trap rig.
    package static func main(rigs: Rigs) async -> Never {
        prepareSignals()
        exit(await run(Array(CommandLine.arguments.dropFirst()), rigs: rigs))
    }

    /// For an unknown option, the subcommand's own option (from its help page)
    /// nearest to it, when at most two edits away (`--leadr`: `--leader`).
    static func suggestion(for error: Command.UsageError, rigs: Rigs) -> String? {
        guard let subcommand = error.subcommand, error.message.hasPrefix("unknown option '"),
            let typed = error.message.dropFirst("unknown option '".count).split(separator: "'").first.map(String.init),
            typed.hasPrefix("--"), typed.count <= 64
        else { return nil }
        let page = helpPage(for: subcommand, rigs: rigs)
        var options = Set<String>()
        var scanner = page[...]
        while let start = scanner.range(of: "--") {
            let name = scanner[start.lowerBound...].prefix { $0 == "-" || $0.isLetter || $0.isNumber }
            if name.count > 2 { options.insert(String(name)) }
            scanner = scanner[start.upperBound...]
        }
        // One the page names as it was typed belongs to another action (`bench cluster --curve`): no guess.
        guard !options.contains(typed) else { return nil }
        let ranked = options.map { ($0, editDistance(typed, $0)) }.filter { $0.1 <= 2 }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        return ranked.first?.0
    }

    /// Levenshtein distance between two short strings.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }

    /// Runs one invocation (the arguments after the program name) and
    /// returns its exit status.
    static func run(_ arguments: [String], rigs: Rigs) async -> Int32 {
        /// Says a usage error the one way every subcommand does: exit 64.
        func usageFailure(_ error: Command.UsageError) -> Int32 {
            printError("Error: \(escaped: error.message)" + (suggestion(for: error, rigs: rigs).map { " (did you mean \($0)?)" } ?? ""))
            printError(usageLine(for: error.subcommand, rigs: rigs))
            printError("See '\(programName) \(error.subcommand.map { "\($0) " } ?? "")--help'")
            return 64
        }
        let command: Command
        let environment = ProcessInfo.processInfo.environment
        do {
            command = try Command.parse(
                arguments, rigNames: rigs.names, environment: environment, extras: rigs.extras.map(\.name), trapOffered: rigs.trap != nil)
        } catch {
            return usageFailure(error)
        }
        // A COGD_* variable this subcommand does not read is said once (a leader and a worker log it);
        // a help page or the version reads none and runs nothing, so it says nothing of them.
        let unread = arguments.first.map { Command.unreadVariables(subcommand: $0, environment: environment) } ?? []
        switch command {
        case .leader, .worker, .help, .version: break
        default: unread.forEach { printError("note: \($0)") }
        }
        // Said here, and not passed on: a process this one starts (sim's restart with
        // deterministic hashing, bench's parts, a drill's leaders) neither says it again
        // nor takes it for its own.
        if let subcommand = arguments.first {
            for name in Command.unreadVariableNames(subcommand: subcommand, environment: environment) { unsetenv(name) }
        }
        switch command {
        case .help(let topic):
            print(helpText(for: topic, rigs: rigs))
        case .version:
            print(versionText())
        case .extra(let name, let arguments):
            guard let extra = rigs.extras.first(where: { $0.name == name }) else { return 64 }
            let work: ExtraSubcommand.Run
            do {
                work = try extra.parse(arguments)
            } catch {
                return usageFailure(error)
            }
            return await work()
        case .tail(let options):
            return TailCommand(options: options).run()
        case .logVerify(let dataFolder):
            return await MainActor.run { LogCommands.verify(dataFolder: dataFolder) }
        case .logStats(let dataFolder, let json):
            return LogCommands.stats(dataFolder: dataFolder, json: json)
        case .logUpgrade(let dataFolder):
            return LogCommands.upgrade(dataFolder: dataFolder)
        case .logCompact(let dataFolder, let keep):
            return LogCommands.compact(dataFolder: dataFolder, keep: keep)
        case .logBackup(let dataFolder, let destination):
            return LogCommands.backup(dataFolder: dataFolder, destination: destination)
        case .logSoak(let dataFolder, let batch, let count):
            return LogCommands.soak(dataFolder: dataFolder, batch: batch, count: count)
        case .leader(let options):
            return await MainActor.run { ClusterCommands.leader(options, rigs: rigs, notes: unread) }
        case .worker(var options):
            // The settings file is read here, before anything starts: a bad one is a usage error (exit 64).
            do {
                options.settings = try Command.workerSettings(options)
            } catch {
                return usageFailure(error)
            }
            return await ClusterCommands.worker(options, rigs: rigs, notes: unread)
        case .call(let options):
            return ClusterCommands.call(options, rigs: rigs)
        case .status(let endpoint, let json, let timeout, let keys, let watch, let count, let source):
            return ClusterCommands.status(leader: endpoint, json: json, timeout: timeout, keys: keys, watch: watch, count: count, source: source)
        case .keysGenerate(let name, let folder):
            return KeysCommand.generate(name: name, folder: folder)
        case .keysShow(let file):
            return KeysCommand.show(file: file)
        case .get(let options):
            return await MainActor.run { GetCommand(options: options, rigs: rigs).run() }
        case .ops(let json):
            return await MainActor.run { OpsCommand(json: json, rigs: rigs).run() }
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

    static func usageLine(for subcommand: String?, rigs: Rigs) -> String {
        let cogd = programName
        if let extra = rigs.extras.first(where: { $0.name == subcommand }) { return extra.usage(cogd) }
        return switch subcommand {
        case "leader":
            "Usage: \(cogd) leader [--data DIR] [--requests ENDPOINT] [--turns ENDPOINT] [--rig NAME] [--heartbeat-timeout S]\n"
                + "         [--commit-cpu auto|none|LIST] [--spin-wait MICROSECONDS] [--snapshot-part-bytes N] [--snapshot-deadline S]\n"
                + "         [--max-record-bytes N] [--retain-turns N | --retain-age DURATION | --retain-bytes SIZE]\(rigs.trap == nil ? "" : " [--trap-op]")\n"
                + "         [--accept-data-loss] [--curve-secret FILE --peers FILE | --insecure] [--metrics HOST:PORT]\n"
                + "         [--log-format text|json] [--log-level debug|info|warn|error]\n"
                + "         [--ha URLS --cluster NAME --name NODE [--lease-ttl S]\n"
                + "          [--sync one|none|quorum:K [--degrade-after S]]]"
        case "tail":
            "Usage: \(cogd) tail [--data DIR] [--from REV | --last N | --since TIME] [--to REV] [--count N] [--follow] [--json] [--rejections] [--name PATTERN]\n"
                + "       \(cogd) tail --connect TURNS-ENDPOINT [--from REV | --since TIME] [--leader ENDPOINT] [--timeout SECONDS] [--to REV]\n"
                + "         [--count N] [--json] [--name PATTERN] [--key FILE --leader-key FILE]"
        case "call": "Usage: \(cogd) call OP JSON [--leader ENDPOINT] [--timeout SECONDS] [--request-id W#N | --name NAME] [--json] [--key FILE --leader-key FILE]"
        case "status": "Usage: \(cogd) status [--leader ENDPOINT] [--timeout SECONDS] [--watch [SECONDS] [--count N]] [--json] [--key FILE --leader-key FILE]"
        case "get":
            "Usage: \(cogd) get NAME [KEY] [--json] [--data DIR]\n"
                + "       \(cogd) get NAME [KEY] [--json] --leader ENDPOINT [--timeout SECONDS] [--key FILE --leader-key FILE]"
        case "ops": "Usage: \(cogd) ops [--json]"
        case "worker":
            "Usage: \(cogd) worker [--leader ENDPOINT] [--name NAME] [--rig NAME] [--group NAME] [--key FILE --leader-key FILE]\n"
                + "         [--heartbeat-timeout S] [--set KEY=VALUE]... [--settings FILE] [--metrics HOST:PORT] [--log-format text|json]\n"
                + "         [--log-level debug|info|warn|error]"
        case "version": "Usage: \(cogd) version"
        case "help": "Usage: \(cogd) help [SUBCOMMAND]"
        case "log":
            "Usage: \(cogd) log verify|upgrade [--data DIR]\n       \(cogd) log stats [--data DIR] [--json]\n       \(cogd) log soak [--data DIR] [--batch N] [--count N]\n"
                + "       \(cogd) log compact --keep N [--data DIR]\n       \(cogd) log backup DEST [--data DIR]"
        case "keys": "Usage: \(cogd) keys generate NAME [--out DIR]\n       \(cogd) keys show FILE"
        case let name?: "Usage: \(cogd) \(name) [options]"
        case nil: "Usage: \(cogd) <subcommand> [options] [--] [args]"
        }
    }

    static func helpText(for topic: String?, rigs: Rigs) -> String {
        // The program's own additions go before `version` and `help`.
        let extras = rigs.extras.filter { !$0.hidden }.map { (name: $0.name, summary: $0.summary) }
        let all = Command.subcommands.dropLast(2) + extras + Command.subcommands.suffix(2)
        let subcommands = all.map { entry in (name: entry.name, summary: programSummary(entry.summary)) }
        if let topic, let entry = all.first(where: { $0.name == topic }) ?? rigs.extras.first(where: { $0.name == topic }).map({ ($0.name, $0.summary) }) {
            // Under the usage line, what it does (the summary without the usage it repeats).
            let summary = programSummary(entry.summary)
            let description = summary.range(of: ": \(programName) ").map { String(summary[..<$0.lowerBound]) } ?? summary
            return "\(usageLine(for: topic, rigs: rigs))\n\n\(description)\n\(helpPage(for: topic, rigs: rigs))\n"
        }
        var text = "\(programName) — Cog-style state on Linux, made multi-process\n\n\(usageLine(for: nil, rigs: rigs))\n\nSubcommands:\n"
        for entry in subcommands {
            text += "  \(padded(entry.name, to: 9)) \(entry.summary)\n"
        }
        text += "\nEvery subcommand takes -h or --help for its page: each option with its default, and an example."
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
        var lmdbMajor: Int32 = 0
        var lmdbMinor: Int32 = 0
        var lmdbPatch: Int32 = 0
        // LMDB's own string reads `LMDB 0.9.24: (July 24, 2019)`: the numbers say the same, plainly.
        _ = mdb_version(&lmdbMajor, &lmdbMinor, &lmdbPatch)
        let own = programName == "cogd" && programVersion.withLock({ $0 }) == nil
            ? "" : "\(TerminalText.escaped(programName))\(programVersion.withLock { $0 }.map { " \($0)" } ?? "")\n"
        return own + "cogd \(CogdVersion.current)\nLMDB \(lmdbMajor).\(lmdbMinor).\(lmdbPatch)\nZeroMQ \(major).\(minor).\(patch)"
    }
}

/// Writes one line to standard error.
package func printError(_ text: String) {
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
package func padded(_ text: String, to width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}
