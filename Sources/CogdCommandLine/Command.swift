import Cog
import CogCodec
import CogLog
import CogCluster
import CogProtocol
import CogWire
import Foundation

/// What one `cogd` invocation asks for; made by `Command.parse`, a pure
/// function from the arguments, so parsing is tested with plain arrays.
enum Command: Equatable {
    case help(topic: String?)
    case version
    case tail(TailOptions)
    case logVerify(dataFolder: String)
    case logStats(dataFolder: String, json: Bool)
    case logUpgrade(dataFolder: String)
    /// Removes every turn record but the newest `keep`, with no leader running.
    case logCompact(dataFolder: String, keep: UInt64)
    /// Writes a consistent, compacted copy of the folder's log into `destination`.
    case logBackup(dataFolder: String, destination: String)
    /// Commits synthetic turns in a loop, printing each committed revision
    /// (the crash test's child, and a way to fill a log by hand).
    case logSoak(dataFolder: String, batch: Int, count: Int?)
    case leader(LeaderOptions)
    case worker(WorkerOptions)
    case call(CallOptions)
    /// `watch`: ask again this often, redrawing, until interrupted or `count` reports are shown.
    case status(
        leaderEndpoint: String, json: Bool, timeout: Duration, keys: ClientKeyFiles? = nil, watch: Duration? = nil, count: Int? = nil,
        leaderSource: String = "--leader")
    /// Writes a CURVE key pair, `NAME.key` and `NAME.pub`, in `folder`.
    case keysGenerate(name: String, folder: String)
    /// Prints the public key of a key file (secret or public).
    case keysShow(file: String)
    /// The current value(s) of one durable source, from the data folder or the leader.
    case get(GetOptions)
    /// The ops this program's leader serves, with their arguments' shapes and examples.
    case ops(json: Bool)
    /// A subcommand the program added beside the runtime's
    /// (`ExtraSubcommand`: the lab's `bench`, `drill` and `sim`), with the
    /// arguments after its name.
    case extra(name: String, arguments: [String])
    /// A subcommand that a later release provides.
    case notYetAvailable(String)

    static let defaultRequestsEndpoint = "tcp://127.0.0.1:5701"
    static let defaultTurnsEndpoint = "tcp://127.0.0.1:5702"
    /// How long `call` and `status` wait for the leader unless given `--timeout`.
    static let defaultTimeout: Duration = .seconds(5)
    /// How often `status --watch` asks unless given seconds.
    static let defaultWatchInterval: Duration = .seconds(2)

    struct LeaderOptions: Equatable {
        var dataFolder = Command.defaultDataFolder
        var requestsEndpoint = Command.defaultRequestsEndpoint
        var turnsEndpoint = Command.defaultTurnsEndpoint
        /// Printed in the leader's first line (it serves every rig); nil: the default rig.
        var rig: String?
        /// A worker silent this long is gone (its scope instances retire).
        var heartbeatTimeout: Double = 5
        /// Where the serving thread runs (`--commit-cpu auto|none|LIST`).
        var commitAffinity: CommitAffinity = .automatic
        /// Microseconds the serving thread looks for the next request after a batch (`--spin-wait`).
        var spinWaitMicroseconds = 0
        /// About how many bytes each part of a snapshot sent in parts holds (`--snapshot-part-bytes`).
        var snapshotPartBytes = WireMessage.snapshotPartTarget
        /// The most bytes a turn's record may take (`--max-record-bytes`).
        var maximumRecordBytes = Leader.maximumRecordBytes
        /// Seconds a snapshot may wait for its requester to read before it is
        /// given up with its LMDB read (`--snapshot-deadline`).
        var snapshotDeadline: Double = 30
        /// Also serve the program's trap rig (`--trap-op`, offered only by a
        /// program that has one: the lab's `ledger.trap`, an op whose body
        /// traps on demand).
        var trapOp = false
        /// Start even when data.mdb is behind what the folder remembers (`--accept-data-loss`).
        var acceptDataLoss = false
        /// Bind endpoints off this host although nothing is authenticated (`--insecure`).
        var insecure = false
        /// The leader's secret key file (`--curve-secret`): CURVE on both sockets.
        var curveSecret: String?
        /// Who may connect, and as what (`--peers`; needed with `--curve-secret`).
        var peersFile: String?
        /// This node's standby key (`--standby-key`; with `--ha` and `--curve-secret`): it follows the leader's log with it.
        var standbyKey: String?
        /// How much of the turn log to keep (`--retain-turns`, `--retain-age`, `--retain-bytes`; default everything).
        var retention: Retention = .everything
        /// Where `/metrics`, `/healthz` and `/readyz` are served (`--metrics HOST:PORT`; nil: nowhere).
        var metrics: String?
        /// The operator's log (`--log-format`, `--log-level`).
        var logFormat = OperatorLog.defaultFormat
        var logLevel = OperatorLog.defaultLevel
        /// One node of a cluster whose leader etcd decides (`--ha`, `--cluster`, `--name`, `--lease-ttl`); nil: a lone leader.
        var ha: HighAvailability?
    }

    /// `cogd leader --ha`: where etcd is, which cluster, which node, the lease's TTL.
    struct HighAvailability: Equatable {
        var etcd: String
        var cluster = ""
        var node = ""
        var leaseSeconds: Int64 = 5
        /// `--sync`: ship the log to standbys and release by these rules (ha.md §9); `one` unless given.
        var sync: ShipCore.SyncMode = .one
        /// `--degrade-after`: seconds of held releases after which the leader releases alone.
        var degradeAfter: Double?
    }

    struct WorkerOptions: Equatable {
        var leaderEndpoint = Command.defaultRequestsEndpoint
        var name = "worker-\(getpid())"
        /// The rig whose mechanisms it runs; nil: the default (the first offered).
        var rig: String?
        /// Its key and the leader's (`--key`, `--leader-key`).
        var keys: ClientKeyFiles?
        /// The worker group it joins (`--group`; nil: the one named after its rig).
        var group: String?
        /// Where `/metrics`, `/healthz` and `/readyz` are served (`--metrics HOST:PORT`; nil: nowhere).
        var metrics: String?
        /// The operator's log (`--log-format`, `--log-level`).
        var logFormat = OperatorLog.defaultFormat
        var logLevel = OperatorLog.defaultLevel
        /// The app's settings given as `--set KEY=VALUE` (they win over the file's).
        var settings = CogRig.Settings()
        /// The settings file (`--settings FILE`), read when the worker starts.
        var settingsFile: String?
        /// The leader's `--heartbeat-timeout` in seconds (`--heartbeat-timeout`):
        /// the worker's lease is this less a margin (`cogwire.md` §6b).
        var heartbeatTimeout: Double = 5
    }

    struct CallOptions: Equatable {
        var op: String
        var json: String
        var leaderEndpoint = Command.defaultRequestsEndpoint
        /// Where `leaderEndpoint` came from (`--leader`, or `COGD_LEADER`), as messages name it.
        var leaderSource = "--leader"
        /// How long it waits for the answer (`--timeout`).
        var timeout: Duration = Command.defaultTimeout
        /// A fixed request id (`worker#sequence`), to retry a request.
        var requestID: RequestID?
        /// Its key and the leader's (`--key`, `--leader-key`).
        var keys: ClientKeyFiles?
        /// The name it sends as (`--name`); nil: its key file's name with
        /// keys, else a name of its own per call.
        var name: String?
        /// Prints the answer as one JSON object on stdout (`--json`).
        var printsJSON = false
    }

    /// Where `cogd` keeps its data unless told otherwise: under the working directory.
    static let defaultDataFolder = "cogd-data"

    struct TailOptions: Equatable {
        var dataFolder = Command.defaultDataFolder
        var from: UInt64?
        var last: Int?
        var follow = false
        var json = false
        /// Print the requests answered rejected or refused too, at their revision (`--rejections`).
        var rejections = false
        var namePattern: String?
        /// Follow the leader's live turn stream (its turns endpoint) instead
        /// of the file: one endpoint, or every node's of an HA cluster,
        /// joined by commas.
        var connect: String?
        /// Its key and the leader's, for `--connect` (`--key`, `--leader-key`).
        var keys: ClientKeyFiles?
        /// Stop after this revision (`--to`).
        var to: UInt64?
        /// Stop after printing this many turns (`--count`).
        var count: Int?
        /// Start at the first turn committed at or after this time (`--since`).
        var since: TailSince?
        /// The leader's requests endpoint, which `--connect` asks for the
        /// turns before the live stream (`--from`, `--since`) and for any gap:
        /// `--leader`, else `COGD_LEADER`, else the default; an HA cluster's
        /// nodes joined by commas.
        var leader = Command.defaultRequestsEndpoint
        /// Where `leader` came from (`--leader`, or `COGD_LEADER`), as messages name it.
        var leaderSource = "--leader"
        /// How long `--connect` waits for the stream's connection and for each answer (`--timeout`).
        var timeout: Duration = Command.defaultTimeout
    }

    struct GetOptions: Equatable {
        /// The durable source's name (`ledger.balance`).
        var name: String
        /// One key, as JSON (`"alice"`); nil: every key of a box, or the one value.
        var key: String?
        var json = false
        var dataFolder = Command.defaultDataFolder
        /// Ask this leader (its requests endpoint) for a snapshot instead of reading the folder.
        var leaderEndpoint: String?
        /// How long it waits for each of the leader's answers (`--timeout`).
        var timeout: Duration = Command.defaultTimeout
        /// Its key and the leader's, for `--leader` (`--key`, `--leader-key`).
        var keys: ClientKeyFiles?
    }

    typealias UsageError = CommandUsageError

    /// The subcommands that moved to the lab's executable, `cogd-lab`: a
    /// runtime program names where they went.
    static let labSubcommands = ["bench", "drill", "sim"]

    static let subcommands: [(name: String, summary: String)] = [
        ("leader", "run the leader: it owns the turn log, runs every op as a turn and serves workers and tools: cogd leader [--data DIR] [--requests ENDPOINT] [--turns ENDPOINT] [--curve-secret FILE --peers FILE | --insecure] [OPTION…]"),
        ("worker", "run a worker: cogd worker [--leader ENDPOINT] [--name NAME] [--rig NAME] [--group NAME] [--key FILE --leader-key FILE] [--metrics HOST:PORT] [OPTION…]"),
        ("tail", "print turns from the turn log: cogd tail [--data DIR] [--from REV | --last N | --since TIME] [--to REV] [--count N] [--follow] [--json] [--rejections] [--name PATTERN] | --connect ENDPOINT [--from REV | --since TIME] [--leader ENDPOINT] [--timeout SECONDS] [--key FILE --leader-key FILE]"),
        ("log", "check, summarize, upgrade, fill, compact or back up a turn log: cogd log verify|stats|upgrade|soak [--data DIR] | cogd log stats --json | cogd log compact --keep N [--data DIR] | cogd log backup DEST [--data DIR]"),
        ("call", "submit one op from the shell: cogd call OP JSON [--leader ENDPOINT] [--timeout SECONDS] [--request-id W#N | --name NAME] [--json] [--key FILE --leader-key FILE]"),
        ("status", "show a running cluster: cogd status [--leader ENDPOINT] [--timeout SECONDS] [--watch [SECONDS] [--count N]] [--json] [--key FILE --leader-key FILE]"),
        ("get", "print the current value(s) of a durable source: cogd get NAME [KEY] [--json] [--data DIR | --leader ENDPOINT [--timeout SECONDS] [--key FILE --leader-key FILE]]"),
        ("ops", "list the ops this program's leader serves, each with its argument's shape and an example: cogd ops [--json]"),
        ("keys", "make and show CURVE keys: cogd keys generate NAME [--out DIR] | cogd keys show FILE"),
        ("version", "print cogd's version and the linked LMDB and ZeroMQ versions"),
        ("help", "show help for cogd or one subcommand"),
    ]

    /// The command `arguments` (after the program name) ask for; `--rig`
    /// must name one of `rigNames`; `environment` supplies defaults
    /// (`COGD_LEADER`). `extras` names the subcommands the program added
    /// (parsed by their own `ExtraSubcommand`); `trapOffered`, whether the
    /// leader takes `--trap-op`.
    static func parse(
        _ arguments: [String], rigNames: [String], environment: [String: String] = [:], extras: [String] = [], trapOffered: Bool = false
    ) throws(UsageError) -> Command {
        guard let first = arguments.first else { return .help(topic: nil) }
        let rest = Array(arguments.dropFirst())
        if extras.contains(first) {
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: first) }
            return .extra(name: first, arguments: rest)
        }
        switch first {
        case "-h", "--help":
            return .help(topic: nil)
        case "help":
            if rest == ["-h"] || rest == ["--help"] { return .help(topic: "help") }
            guard rest.count <= 1 else { throw UsageError(message: "help takes at most one subcommand", subcommand: nil) }
            if let topic = rest.first, !subcommands.contains(where: { $0.name == topic }), !extras.contains(topic) {
                throw UsageError(message: "unknown subcommand '\(topic)'", subcommand: nil)
            }
            return .help(topic: rest.first)
        case "version", "--version":
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: "version") }
            if let extra = rest.first { throw UsageError(message: "unexpected argument '\(extra)'", subcommand: "version") }
            return .version
        case "tail":
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: "tail") }
            return .tail(try parseTail(rest, environment: environment))
        case "log":
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: "log") }
            return try parseLog(rest, environment: environment)
        case "leader", "worker", "call", "status":
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: first) }
            return try parseCluster(first, rest, rigNames: rigNames, environment: environment, trapOffered: trapOffered)
        case "keys":
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: first) }
            return try parseKeys(rest)
        case "get":
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: first) }
            return .get(try parseGet(rest, environment: environment))
        case "ops":
            if rest.contains("-h") || rest.contains("--help") { return .help(topic: first) }
            var reader = OptionReader(arguments: rest, subcommand: first)
            var json = false
            while let option = try reader.nextOption() {
                switch option.name {
                case "--json":
                    try reader.noValue(option)
                    json = true
                default: throw UsageError(message: "unknown option '\(option.name)'", subcommand: first)
                }
            }
            if let extra = try reader.positional() { throw UsageError(message: "unexpected argument '\(extra)'", subcommand: first) }
            return .ops(json: json)
        case let name where labSubcommands.contains(name):
            throw UsageError(
                message: "'\(name)' is not part of the runtime: benchmarks, drills and the simulator are in cogd-lab, "
                    + "the lab's own executable (swift build -c release --product cogd-lab; then cogd-lab \(name) --help)",
                subcommand: nil)
        default:
            throw UsageError(message: "unknown subcommand '\(first)'", subcommand: nil)
        }
    }

    private static func parseCluster(
        _ subcommand: String, _ arguments: [String], rigNames: [String], environment: [String: String], trapOffered: Bool
    ) throws(UsageError) -> Command {
        var reader = OptionReader(arguments: arguments, subcommand: subcommand)
        var leader = LeaderOptions()
        var worker = WorkerOptions()
        if subcommand == "leader" {
            // Where the leader keeps its log and listens may come from the environment (an option wins).
            if let folder = environment[dataEnvironmentVariable], !folder.isEmpty { leader.dataFolder = folder }
            if let text = environment[requestsEnvironmentVariable], !text.isEmpty {
                leader.requestsEndpoint = try endpoint(text, from: requestsEnvironmentVariable, subcommand: subcommand)
            }
            if let text = environment[turnsEnvironmentVariable], !text.isEmpty {
                leader.turnsEndpoint = try endpoint(text, from: turnsEnvironmentVariable, subcommand: subcommand)
            }
        }
        // The log's format and level may come from the environment (an option wins).
        if subcommand == "leader" || subcommand == "worker", let text = environment[Command.logFormatEnvironmentVariable], !text.isEmpty {
            let format = try logFormat(text, from: "$" + Command.logFormatEnvironmentVariable, subcommand: subcommand)
            (leader.logFormat, worker.logFormat) = (format, format)
        }
        if subcommand == "leader" || subcommand == "worker", let text = environment[Command.logLevelEnvironmentVariable], !text.isEmpty {
            let level = try logLevel(text, from: "$" + Command.logLevelEnvironmentVariable, subcommand: subcommand)
            (leader.logLevel, worker.logLevel) = (level, level)
        }
        var positionals: [String] = []
        var leaderEndpoint: String?
        var timeout = Command.defaultTimeout
        var json = false
        var requestID: RequestID?
        var keyFile: String?
        var leaderKeyFile: String?
        var callName: String?
        var watch: Duration?
        var watchCount: Int?
        var haEtcd: String?
        var haCluster: String?
        var haNode: String?
        var haLeaseSeconds: Int64?
        var haSync: ShipCore.SyncMode?
        var haDegradeAfter: Double?
        var settingAssignments: [String] = []
        func rig(_ text: String) throws(UsageError) -> String {
            guard rigNames.contains(text) else {
                throw UsageError(message: "unknown rig '\(text)' (one of: \(rigNames.joined(separator: ", ")))", subcommand: subcommand)
            }
            return text
        }
        while true {
            if let positional = try reader.positional() {
                positionals.append(positional)
                continue
            }
            guard let option = try reader.nextOption() else { break }
            switch (subcommand, option.name) {
            case ("leader", "--data"): leader.dataFolder = try reader.value(for: option)
            case ("leader", "--requests"): leader.requestsEndpoint = try endpoint(try reader.value(for: option), from: option.name, subcommand: subcommand)
            case ("leader", "--turns"): leader.turnsEndpoint = try endpoint(try reader.value(for: option), from: option.name, subcommand: subcommand)
            case ("leader", "--rig"): leader.rig = try rig(try reader.value(for: option))
            case ("leader", "--accept-data-loss"):
                try reader.noValue(option)
                leader.acceptDataLoss = true
            case ("leader", "--heartbeat-timeout"), ("worker", "--heartbeat-timeout"):
                let text = try reader.value(for: option)
                guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                    throw UsageError(message: "--heartbeat-timeout takes seconds (more than 0, at most 86400), not '\(text)'", subcommand: subcommand)
                }
                if subcommand == "leader" { leader.heartbeatTimeout = seconds } else { worker.heartbeatTimeout = seconds }
            case ("leader", "--commit-cpu"):
                let text = try reader.value(for: option)
                switch text {
                case "auto": leader.commitAffinity = .automatic
                case "none": leader.commitAffinity = .unpinned
                default:
                    guard let cpus = CPUList.parse(text) else {
                        throw UsageError(message: "--commit-cpu takes auto, none or a CPU list like 1 or 0-3,6, not '\(text)'", subcommand: subcommand)
                    }
                    leader.commitAffinity = .cpus(cpus)
                }
            case ("leader", "--snapshot-part-bytes"):
                let text = try reader.value(for: option)
                guard let bytes = Int(text), (1_024...(64 << 20)).contains(bytes) else {
                    throw UsageError(message: "--snapshot-part-bytes takes bytes from 1024 to 67108864, not '\(text)'", subcommand: subcommand)
                }
                leader.snapshotPartBytes = bytes
            case ("leader", "--max-record-bytes"):
                let text = try reader.value(for: option)
                guard let bytes = Int(text), (4_096...Leader.maximumRecordBytes).contains(bytes) else {
                    throw UsageError(message: "--max-record-bytes takes bytes from 4096 to \(Leader.maximumRecordBytes), not '\(text)'", subcommand: subcommand)
                }
                leader.maximumRecordBytes = bytes
            case ("leader", "--snapshot-deadline"):
                let text = try reader.value(for: option)
                guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                    throw UsageError(message: "--snapshot-deadline takes seconds (more than 0, at most 86400), not '\(text)'", subcommand: subcommand)
                }
                leader.snapshotDeadline = seconds
            case ("leader", "--insecure"):
                try reader.noValue(option)
                leader.insecure = true
            case ("leader", "--ha"):
                let text = try reader.value(for: option)
                do { _ = try EtcdGateway.endpoints(text) } catch { throw UsageError(message: "\(error)", subcommand: subcommand) }
                haEtcd = text
            case ("leader", "--cluster"), ("leader", "--name"):
                let text = try reader.value(for: option)
                guard ArbiterRecords.isValidName(text) else {
                    throw UsageError(message: "\(option.name) takes a name of 1 to 64 letters, digits, '_', '.' or '-', not '\(text)'", subcommand: subcommand)
                }
                if option.name == "--cluster" { haCluster = text } else { haNode = text }
            case ("leader", "--lease-ttl"):
                let text = try reader.value(for: option)
                guard let seconds = Int64(text), ArbiterCore.Configuration.leaseSecondsRange.contains(seconds) else {
                    throw UsageError(message: "--lease-ttl takes whole seconds from 2 to 3600, not '\(text)'", subcommand: subcommand)
                }
                haLeaseSeconds = seconds
            case ("leader", "--sync"):
                let text = try reader.value(for: option)
                guard let mode = ShipCore.SyncMode(text: text) else {
                    throw UsageError(message: "--sync takes one, none or quorum:K (K from 1 to 8), not '\(text)'", subcommand: subcommand)
                }
                haSync = mode
            case ("leader", "--degrade-after"):
                let text = try reader.value(for: option)
                guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= 86_400 else {
                    throw UsageError(message: "--degrade-after takes seconds above 0, at most 86400, not '\(text)'", subcommand: subcommand)
                }
                haDegradeAfter = seconds
            case ("leader", "--retain-turns"), ("leader", "--retain-age"), ("leader", "--retain-bytes"):
                guard leader.retention == .everything else {
                    throw UsageError(
                        message: "give one of --retain-turns, --retain-age and --retain-bytes (\(option.name) after another)", subcommand: subcommand)
                }
                leader.retention = try retention(option.name, try reader.value(for: option), subcommand: subcommand)
            case ("leader", "--standby-key"):
                leader.standbyKey = try filePath(try reader.value(for: option), option: option.name, subcommand: subcommand)
            case ("leader", "--curve-secret"):
                leader.curveSecret = try filePath(try reader.value(for: option), option: option.name, subcommand: subcommand)
            case ("leader", "--peers"):
                leader.peersFile = try filePath(try reader.value(for: option), option: option.name, subcommand: subcommand)
            case ("worker", "--key"), ("call", "--key"), ("status", "--key"):
                keyFile = try filePath(try reader.value(for: option), option: option.name, subcommand: subcommand)
            case ("worker", "--leader-key"), ("call", "--leader-key"), ("status", "--leader-key"):
                leaderKeyFile = try filePath(try reader.value(for: option), option: option.name, subcommand: subcommand)
            case ("leader", "--trap-op") where trapOffered:
                try reader.noValue(option)
                leader.trapOp = true
            case ("leader", "--spin-wait"): leader.spinWaitMicroseconds = try OptionReader.spinWait(try reader.value(for: option), option, subcommand)
            case ("leader", "--metrics"): leader.metrics = try metricsAddress(try reader.value(for: option), subcommand: subcommand)
            case ("worker", "--metrics"): worker.metrics = try metricsAddress(try reader.value(for: option), subcommand: subcommand)
            case ("leader", "--log-format"): leader.logFormat = try logFormat(try reader.value(for: option), from: option.name, subcommand: subcommand)
            case ("worker", "--log-format"): worker.logFormat = try logFormat(try reader.value(for: option), from: option.name, subcommand: subcommand)
            case ("leader", "--log-level"): leader.logLevel = try logLevel(try reader.value(for: option), from: option.name, subcommand: subcommand)
            case ("worker", "--log-level"): worker.logLevel = try logLevel(try reader.value(for: option), from: option.name, subcommand: subcommand)
            case ("worker", "--name"):
                let text = try reader.value(for: option)
                // The leader's rule, checked before any socket is made: a name it refuses would only be refused `malformed`.
                if let problem = LeaderCore.workerNameProblem(text) {
                    throw UsageError(message: "--name takes a worker name the leader accepts, not '\(text)': \(problem)", subcommand: subcommand)
                }
                worker.name = text
            case ("call", "--name"): callName = try reader.value(for: option)
            case ("call", "--json"):
                try reader.noValue(option)
                json = true
            case ("worker", "--rig"): worker.rig = try rig(try reader.value(for: option))
            case ("worker", "--set"): settingAssignments.append(try reader.value(for: option))
            case ("worker", "--settings"):
                guard worker.settingsFile == nil else { throw UsageError(message: "give --settings once (one settings file)", subcommand: subcommand) }
                worker.settingsFile = try filePath(try reader.value(for: option), option: option.name, subcommand: subcommand)
            case ("worker", "--group"):
                let text = try reader.value(for: option)
                guard LeaderCore.groupProblem(text) == nil else {
                    throw UsageError(message: "--group takes a name of 1 to 255 bytes with no control characters, not '\(text)'", subcommand: subcommand)
                }
                worker.group = text
            case ("worker", "--leader"), ("call", "--leader"), ("status", "--leader"):
                leaderEndpoint = try leaderEndpoints(try reader.value(for: option), from: option.name, subcommand: subcommand)
            case ("call", "--timeout"), ("status", "--timeout"):
                timeout = try Command.timeout(try reader.value(for: option), subcommand: subcommand)
            case ("status", "--json"):
                try reader.noValue(option)
                json = true
            case ("status", "--watch"):
                // The interval is optional: `--watch`, `--watch 5` or `--watch=5` (status takes no other argument).
                var text = option.inlineValue
                if text == nil { text = try reader.positional() }
                watch = Command.defaultWatchInterval
                if let text {
                    guard let seconds = Double(text), seconds >= 0.1, seconds <= 86_400 else {
                        throw UsageError(message: "--watch takes seconds between reports (0.1 to 86400), not '\(text)'", subcommand: subcommand)
                    }
                    watch = .milliseconds(Int64((seconds * 1_000).rounded()))
                }
            case ("status", "--count"):
                let text = try reader.value(for: option)
                guard let value = Int(text), value >= 1 else {
                    throw UsageError(message: "--count takes a number of reports (1 or more), not '\(text)'", subcommand: subcommand)
                }
                watchCount = value
            case ("call", "--request-id"):
                let text = try reader.value(for: option)
                let parts = text.split(separator: "#")
                guard parts.count == 2, let sequence = UInt64(parts[1]) else {
                    throw UsageError(message: "--request-id takes WORKER#SEQUENCE, not '\(text)'", subcommand: subcommand)
                }
                requestID = RequestID(worker: String(parts[0]), sequence: sequence)
            default:
                throw UsageError(message: "unknown option '\(option.name)'", subcommand: subcommand)
            }
        }
        if subcommand == "leader" {
            guard positionals.isEmpty else { throw UsageError(message: "unexpected argument '\(positionals[0])'", subcommand: subcommand) }
            switch (leader.curveSecret, leader.peersFile) {
            case (nil, .some):
                throw UsageError(message: "--peers needs --curve-secret too (the leader's secret key file): peers are judged by CURVE keys", subcommand: subcommand)
            case (.some, nil):
                throw UsageError(
                    message: "--curve-secret needs --peers too (the file of keys that may connect): without it any key would be let in",
                    subcommand: subcommand)
            default: break
            }
            guard leader.requestsEndpoint != leader.turnsEndpoint else {
                throw UsageError(
                    message: "--requests and --turns must differ (both are \(TerminalText.escaped(leader.turnsEndpoint))): "
                        + "the leader listens on each, one for requests, one for its turn stream",
                    subcommand: subcommand)
            }
            if leader.standbyKey != nil, haEtcd == nil || leader.curveSecret == nil {
                throw UsageError(
                    message: "--standby-key goes with --ha and --curve-secret: the key a node follows the leader's log with under CURVE",
                    subcommand: subcommand)
            }
            if haEtcd != nil, leader.curveSecret != nil, leader.standbyKey == nil {
                throw UsageError(
                    message: "--ha with --curve-secret needs --standby-key FILE: this node's own secret key, listed in the peers file "
                        + "as `standby NODE`, with which it follows the leader's log while it does not lead",
                    subcommand: subcommand)
            }
            if let haEtcd {
                guard let haCluster, let haNode else {
                    throw UsageError(message: "--ha needs --cluster NAME and --name NODE: which cluster this node is one of, and its own name in it", subcommand: subcommand)
                }
                if haDegradeAfter != nil, haSync == ShipCore.SyncMode.none {
                    throw UsageError(message: "--degrade-after goes with --sync one or quorum:K (with none nothing is held)", subcommand: subcommand)
                }
                leader.ha = HighAvailability(
                    etcd: haEtcd, cluster: haCluster, node: haNode, leaseSeconds: haLeaseSeconds ?? 5, sync: haSync ?? .one, degradeAfter: haDegradeAfter)
            } else if haCluster != nil || haNode != nil || haLeaseSeconds != nil || haSync != nil || haDegradeAfter != nil {
                throw UsageError(
                    message: "--cluster, --name, --lease-ttl, --sync and --degrade-after go with --ha ENDPOINTS (the etcd that decides who leads)",
                    subcommand: subcommand)
            }
            return .leader(leader)
        }
        let keys = try clientKeys(key: keyFile, leaderKey: leaderKeyFile, environment: environment, subcommand: subcommand)
        let leaderEndpointOrDefault: String
        let leaderSource = leaderEndpoint == nil && environment[leaderEnvironmentVariable] != nil ? leaderEnvironmentVariable : "--leader"
        if let leaderEndpoint {
            leaderEndpointOrDefault = leaderEndpoint
        } else {
            leaderEndpointOrDefault = try defaultLeaderEndpoint(environment, subcommand: subcommand)
        }
        switch subcommand {
        case "worker":
            guard positionals.isEmpty else { throw UsageError(message: "unexpected argument '\(positionals[0])'", subcommand: subcommand) }
            worker.leaderEndpoint = leaderEndpointOrDefault
            worker.keys = keys
            do {
                worker.settings = try CogRig.Settings(assignments: settingAssignments)
            } catch {
                throw UsageError(message: "--set: \(error.message)", subcommand: subcommand)
            }
            return .worker(worker)
        case "call":
            guard positionals.count == 2 else {
                throw UsageError(message: "call takes an op name and a JSON argument", subcommand: subcommand)
            }
            if let refusal = CallArgument.refusal(of: positionals[1]) ?? CallArgument.oversizeInteger(in: positionals[1]) {
                throw UsageError(message: refusal, subcommand: subcommand)
            }
            if requestID != nil && callName != nil {
                // --request-id names the request whole (its worker name too); --name only the name of the one call makes.
                throw UsageError(
                    message: "give --request-id or --name, not both: --request-id W#N names the request whole, --name a name for one the call makes",
                    subcommand: subcommand)
            }
            return .call(
                CallOptions(
                    op: positionals[0], json: positionals[1], leaderEndpoint: leaderEndpointOrDefault, leaderSource: leaderSource, timeout: timeout,
                    requestID: requestID, keys: keys, name: callName, printsJSON: json))
        default:
            guard positionals.isEmpty else { throw UsageError(message: "unexpected argument '\(positionals[0])'", subcommand: subcommand) }
            if watchCount != nil && watch == nil {
                throw UsageError(message: "--count goes with --watch (how many reports to show before stopping)", subcommand: subcommand)
            }
            return .status(
                leaderEndpoint: leaderEndpointOrDefault, json: json, timeout: timeout, keys: keys, watch: watch, count: watchCount,
                leaderSource: leaderSource)
        }
    }

    static let logFormatEnvironmentVariable = "COGD_LOG_FORMAT"
    /// The defaults of the leader's `--data` (and every `--data`: tail, get, log), `--requests` and `--turns`.
    static let dataEnvironmentVariable = "COGD_DATA"
    static let requestsEnvironmentVariable = "COGD_REQUESTS"
    static let turnsEnvironmentVariable = "COGD_TURNS"
    static let logLevelEnvironmentVariable = "COGD_LOG_LEVEL"

    /// `--metrics`'s HOST:PORT (`[IPv6]:PORT` too; port 0 picks a free one).
    private static func metricsAddress(_ text: String, subcommand: String) throws(UsageError) -> String {
        guard let colon = text.lastIndex(of: ":"), colon != text.startIndex, UInt16(text[text.index(after: colon)...]) != nil,
            !text.hasPrefix("tcp://"), !text.hasPrefix("http")
        else {
            throw UsageError(message: "--metrics takes HOST:PORT, like 127.0.0.1:9464, not '\(text)'", subcommand: subcommand)
        }
        return text
    }

    private static func logFormat(_ text: String, from source: String, subcommand: String) throws(UsageError) -> OperatorLog.Format {
        guard let format = OperatorLog.Format(rawValue: text) else {
            throw UsageError(message: "\(source) takes text or json, not '\(text)'", subcommand: subcommand)
        }
        return format
    }

    private static func logLevel(_ text: String, from source: String, subcommand: String) throws(UsageError) -> OperatorLog.Level {
        guard let level = OperatorLog.Level(rawValue: text) else {
            throw UsageError(message: "\(source) takes debug, info, warn or error, not '\(text)'", subcommand: subcommand)
        }
        return level
    }

    private static func parseGet(_ arguments: [String], environment: [String: String]) throws(UsageError) -> GetOptions {
        var reader = OptionReader(arguments: arguments, subcommand: "get")
        var positionals: [String] = []
        var dataFolder: String?
        var leaderEndpoint: String?
        var timeout: Duration?
        var json = false
        var keyFile: String?
        var leaderKeyFile: String?
        while true {
            if let positional = try reader.positional() {
                positionals.append(positional)
                continue
            }
            guard let option = try reader.nextOption() else { break }
            switch option.name {
            case "--data": dataFolder = try reader.value(for: option)
            case "--leader": leaderEndpoint = try leaderEndpoints(try reader.value(for: option), from: option.name, subcommand: "get")
            case "--timeout": timeout = try Command.timeout(try reader.value(for: option), subcommand: "get")
            case "--json":
                try reader.noValue(option)
                json = true
            case "--key": keyFile = try filePath(try reader.value(for: option), option: option.name, subcommand: "get")
            case "--leader-key": leaderKeyFile = try filePath(try reader.value(for: option), option: option.name, subcommand: "get")
            default: throw UsageError(message: "unknown option '\(option.name)'", subcommand: "get")
            }
        }
        guard (1...2).contains(positionals.count) else {
            throw UsageError(
                message: positionals.isEmpty
                    ? "get takes the NAME of a durable source (and, for a box, a KEY as JSON)"
                    : "unexpected argument '\(positionals[2])' (get takes NAME and at most one KEY)",
                subcommand: "get")
        }
        guard !positionals[0].isEmpty else { throw UsageError(message: "the NAME of a durable source is empty", subcommand: "get") }
        var options = GetOptions(name: positionals[0], key: positionals.count == 2 ? positionals[1] : nil, json: json)
        if let key = options.key, let problem = CallArgument.problem(in: key) {
            throw UsageError(message: "the key is not JSON (a text key is '\"alice\"'): \(problem)", subcommand: "get")
        }
        if dataFolder != nil && leaderEndpoint != nil {
            throw UsageError(message: "--data and --leader cannot be used together: read the data folder, or ask the leader", subcommand: "get")
        }
        // Neither given: $COGD_LEADER asks that leader; else $COGD_DATA names the folder.
        if dataFolder == nil && leaderEndpoint == nil {
            if let text = environment[leaderEnvironmentVariable], !text.isEmpty {
                leaderEndpoint = try leaderEndpoints(text, from: leaderEnvironmentVariable, subcommand: "get")
            } else if let folder = environment[dataEnvironmentVariable], !folder.isEmpty {
                dataFolder = folder
            }
        }
        if leaderEndpoint == nil && timeout != nil {
            throw UsageError(message: "--timeout goes with --leader (reading the data folder does not wait)", subcommand: "get")
        }
        if let dataFolder { options.dataFolder = dataFolder }
        options.leaderEndpoint = leaderEndpoint
        if let timeout { options.timeout = timeout }
        let keys = try clientKeys(key: keyFile, leaderKey: leaderKeyFile, environment: environment, subcommand: "get")
        if leaderEndpoint == nil && (keyFile != nil || leaderKeyFile != nil) {
            throw UsageError(message: "--key and --leader-key go with --leader (reading the data folder needs no key)", subcommand: "get")
        }
        options.keys = leaderEndpoint == nil ? nil : keys
        return options
    }

    private static func parseKeys(_ arguments: [String]) throws(UsageError) -> Command {
        var reader = OptionReader(arguments: arguments, subcommand: "keys")
        guard let action = try reader.positional() else {
            throw UsageError(message: "missing action (generate or show)", subcommand: "keys")
        }
        var positionals: [String] = []
        var folder: String?
        while true {
            if let positional = try reader.positional() {
                positionals.append(positional)
                continue
            }
            guard let option = try reader.nextOption() else { break }
            switch option.name {
            case "--out" where action == "generate": folder = try reader.value(for: option)
            default: throw UsageError(message: "unknown option '\(option.name)' for keys \(action)", subcommand: "keys")
            }
        }
        switch action {
        case "generate":
            guard positionals.count == 1 else {
                throw UsageError(message: "keys generate takes one NAME (the files are NAME.key and NAME.pub)", subcommand: "keys")
            }
            guard CurveKeyPair.isValidName(positionals[0]) else {
                throw UsageError(
                    message: "'\(positionals[0])' cannot name a key: use 1 to 100 letters, digits, '.', '_', '-' and '@', not starting with '.' or '-'",
                    subcommand: "keys")
            }
            if folder == "" { throw UsageError(message: "--out takes a folder, not an empty string", subcommand: "keys") }
            return .keysGenerate(name: positionals[0], folder: folder ?? ".")
        case "show":
            guard positionals.count == 1 else { throw UsageError(message: "keys show takes one FILE", subcommand: "keys") }
            return .keysShow(file: positionals[0])
        default:
            throw UsageError(message: "unknown keys action '\(action)' (one of: generate, show)", subcommand: "keys")
        }
    }

    private static func parseTail(_ arguments: [String], environment: [String: String]) throws(UsageError) -> TailOptions {
        var reader = OptionReader(arguments: arguments, subcommand: "tail")
        var options = TailOptions()
        if let folder = environment[dataEnvironmentVariable], !folder.isEmpty { options.dataFolder = folder }
        var keyFile: String?
        var leaderKeyFile: String?
        var leaderEndpoint: String?
        var timeout: Duration?
        /// The option's value as a whole number of 1 or more; `what` names it in the error.
        func atLeastOne<Number: FixedWidthInteger>(_ option: OptionReader.Option, _ what: String) throws(UsageError) -> Number {
            let text = try reader.value(for: option)
            guard let value = Number(text), value >= 1 else {
                throw UsageError(message: "\(option.name) takes \(what) (1 or more), not '\(text)'", subcommand: "tail")
            }
            return value
        }
        while let option = try reader.nextOption() {
            switch option.name {
            case "--data": options.dataFolder = try reader.value(for: option)
            case "--from": options.from = try atLeastOne(option, "a revision")
            case "--last": options.last = try atLeastOne(option, "a count")
            case "--to": options.to = try atLeastOne(option, "a revision")
            case "--count": options.count = try atLeastOne(option, "a number of turns")
            case "--follow":
                try reader.noValue(option)
                options.follow = true
            case "--json":
                try reader.noValue(option)
                options.json = true
            case "--rejections":
                try reader.noValue(option)
                options.rejections = true
            case "--name": options.namePattern = try namePattern(try reader.value(for: option))
            case "--connect": options.connect = try leaderEndpoints(try reader.value(for: option), from: option.name, subcommand: "tail")
            case "--since": options.since = try TailSince.parse(try reader.value(for: option))
            case "--leader": leaderEndpoint = try leaderEndpoints(try reader.value(for: option), from: option.name, subcommand: "tail")
            case "--timeout": timeout = try Command.timeout(try reader.value(for: option), subcommand: "tail")
            case "--key": keyFile = try filePath(try reader.value(for: option), option: option.name, subcommand: "tail")
            case "--leader-key": leaderKeyFile = try filePath(try reader.value(for: option), option: option.name, subcommand: "tail")
            default: throw UsageError(message: "unknown option '\(option.name)'", subcommand: "tail")
            }
        }
        if let extra = try reader.positional() {
            throw UsageError(message: "unexpected argument '\(extra)'", subcommand: "tail")
        }
        if options.from != nil && options.last != nil {
            throw UsageError(message: "--from and --last cannot be used together", subcommand: "tail")
        }
        if options.since != nil && (options.from != nil || options.last != nil) {
            throw UsageError(message: "--since cannot be used with --from or --last: each says where to start", subcommand: "tail")
        }
        if options.connect == nil {
            // (Said if the data folder is missing: COGD_LEADER names a leader `--connect` would follow.)
            if environment[leaderEnvironmentVariable] != nil { options.leaderSource = leaderEnvironmentVariable }
            if leaderEndpoint != nil {
                throw UsageError(message: "--leader goes with --connect (it is where --connect catches up from; reading the data folder needs none)", subcommand: "tail")
            }
            if timeout != nil {
                throw UsageError(message: "--timeout goes with --connect (reading the data folder does not wait)", subcommand: "tail")
            }
        } else {
            if options.last != nil {
                throw UsageError(message: "--last reads the data folder; with --connect, start with --from REV or --since TIME", subcommand: "tail")
            }
            if options.follow {
                throw UsageError(message: "--follow reads the data folder; --connect always follows (until --to, --count or Ctrl-C)", subcommand: "tail")
            }
            if options.rejections {
                throw UsageError(message: "--rejections reads the data folder (the turn stream carries turns only); leave out --connect", subcommand: "tail")
            }
            if let leaderEndpoint {
                options.leader = leaderEndpoint
            } else {
                options.leader = try defaultLeaderEndpoint(environment, subcommand: "tail")
                if environment[leaderEnvironmentVariable] != nil { options.leaderSource = leaderEnvironmentVariable }
            }
            if let timeout { options.timeout = timeout }
        }
        if options.count != nil && options.last != nil {
            throw UsageError(message: "--count and --last cannot be used together (--last N prints the newest N)", subcommand: "tail")
        }
        if let from = options.from, let to = options.to, to < from {
            throw UsageError(message: "--to \(to) is before --from \(from)", subcommand: "tail")
        }
        options.keys = try clientKeys(key: keyFile, leaderKey: leaderKeyFile, environment: environment, subcommand: "tail")
        if options.keys != nil && options.connect == nil && (keyFile != nil || leaderKeyFile != nil) {
            throw UsageError(message: "--key and --leader-key go with --connect (reading the data folder needs no key)", subcommand: "tail")
        }
        if options.connect == nil { options.keys = nil }
        return options
    }

    /// The retention a leader option asks for.
    static func retention(_ option: String, _ text: String, subcommand: String) throws(UsageError) -> Retention {
        switch option {
        case "--retain-turns":
            guard let count = UInt64(text), count >= 1 else {
                throw UsageError(message: "--retain-turns takes a number of turns (1 or more), not '\(text)'", subcommand: subcommand)
            }
            return .turns(count)
        case "--retain-age":
            guard let seconds = Retention.parseDuration(text) else {
                throw UsageError(
                    message: "--retain-age takes a duration: a whole number and s, m, h or d (30s, 15m, 12h, 7d), not '\(text)'",
                    subcommand: subcommand)
            }
            return .age(seconds: seconds)
        default:
            guard let bytes = Retention.parseSize(text), bytes >= 1 << 20 else {
                throw UsageError(
                    message: "--retain-bytes takes a size of at least 1MiB: bytes, or a number and KiB, MiB, GiB, TiB (or KB, MB, GB, TB), "
                        + "like 512MiB or 10GiB, not '\(text)'",
                    subcommand: subcommand)
            }
            return .bytes(bytes)
        }
    }

    private static func parseLog(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Command {
        var reader = OptionReader(arguments: arguments, subcommand: "log")
        guard let action = try reader.positional() else {
            throw UsageError(message: "missing action (verify, stats, upgrade, soak, compact or backup)", subcommand: "log")
        }
        var dataFolder = environment[dataEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 } ?? Command.defaultDataFolder
        var json = false
        var batch = 1
        var count: Int?
        var keep: UInt64?
        var destination: String?
        if action == "backup" {
            destination = try reader.positional()
        }
        while let option = try reader.nextOption() {
            switch option.name {
            case "--keep" where action == "compact":
                let text = try reader.value(for: option)
                guard let value = UInt64(text), value >= 1 else {
                    throw UsageError(message: "--keep takes a number of turns (1 or more), not '\(text)'", subcommand: "log")
                }
                keep = value
            case "--data": dataFolder = try reader.value(for: option)
            case "--json" where action == "stats":
                try reader.noValue(option)
                json = true
            case "--batch" where action == "soak":
                let text = try reader.value(for: option)
                guard let value = Int(text), value >= 1, value <= 100_000 else {
                    throw UsageError(message: "--batch takes a whole number from 1 to 100000, not '\(text)'", subcommand: "log")
                }
                batch = value
            case "--count" where action == "soak":
                let text = try reader.value(for: option)
                guard let value = Int(text), value >= 1 else {
                    throw UsageError(message: "--count takes a whole number (1 or more), not '\(text)'", subcommand: "log")
                }
                count = value
            default: throw UsageError(message: "unknown option '\(option.name)' for log \(action)", subcommand: "log")
            }
        }
        if action == "backup", destination == nil, let positional = try reader.positional() {
            destination = positional
            while let option = try reader.nextOption() {
                guard option.name == "--data" else { throw UsageError(message: "unknown option '\(option.name)' for log backup", subcommand: "log") }
                dataFolder = try reader.value(for: option)
            }
        }
        if let extra = try reader.positional() {
            throw UsageError(message: "unexpected argument '\(extra)'", subcommand: "log")
        }
        switch action {
        case "verify": return .logVerify(dataFolder: dataFolder)
        case "stats": return .logStats(dataFolder: dataFolder, json: json)
        case "upgrade": return .logUpgrade(dataFolder: dataFolder)
        case "soak": return .logSoak(dataFolder: dataFolder, batch: batch, count: count)
        case "compact":
            guard let keep else {
                throw UsageError(message: "log compact needs --keep N: how many of the newest turns to keep", subcommand: "log")
            }
            return .logCompact(dataFolder: dataFolder, keep: keep)
        case "backup":
            guard let destination, !destination.isEmpty else {
                throw UsageError(message: "log backup needs DEST: the new or empty folder to write the copy into", subcommand: "log")
            }
            return .logBackup(dataFolder: dataFolder, destination: destination)
        default:
            throw UsageError(message: "unknown log action '\(action)' (one of: verify, stats, upgrade, soak, compact, backup)", subcommand: "log")
        }
    }
}

/// A usage error: printed as `Error: …`, the usage line and a help hint; exit 64.
package struct CommandUsageError: Error, Equatable {
    package let message: String
    package let subcommand: String?

    package init(message: String, subcommand: String?) {
        self.message = message
        self.subcommand = subcommand
    }
}

/// Walks `--opt value`, `--opt=value` and positional arguments in order.
package struct OptionReader {
    /// `--spin-wait`'s value: microseconds from 0 to 1,000,000.
    package static func spinWait(_ text: String, _ option: OptionReader.Option, _ subcommand: String) throws(CommandUsageError) -> Int {
        guard let microseconds = Int(text), (0...1_000_000).contains(microseconds) else {
            throw CommandUsageError(message: "\(option.name) takes microseconds from 0 to 1000000, not '\(text)'", subcommand: subcommand)
        }
        return microseconds
    }

    package struct Option {
        package let name: String
        package let inlineValue: String?
    }

    private var arguments: ArraySlice<String>
    private let subcommand: String
    /// Past `--`: everything left is positional, `-5` included.
    private var onlyPositionals = false

    package init(arguments: [String], subcommand: String) {
        self.arguments = arguments[...]
        self.subcommand = subcommand
    }

    /// The next argument if it is not an option.
    package mutating func positional() throws(CommandUsageError) -> String? {
        guard let next = arguments.first else { return nil }
        if next == "--" && !onlyPositionals {
            arguments.removeFirst()
            onlyPositionals = true
            return arguments.popFirst()
        }
        guard onlyPositionals || !next.hasPrefix("-") else { return nil }
        return arguments.popFirst()
    }

    package mutating func nextOption() throws(CommandUsageError) -> Option? {
        guard !onlyPositionals, let next = arguments.first, next.hasPrefix("-"), next != "--" else { return nil }
        arguments.removeFirst()
        if let equals = next.firstIndex(of: "=") {
            return Option(name: String(next[..<equals]), inlineValue: String(next[next.index(after: equals)...]))
        }
        return Option(name: next, inlineValue: nil)
    }

    package mutating func value(for option: Option) throws(CommandUsageError) -> String {
        if let inline = option.inlineValue { return inline }
        guard let value = arguments.popFirst() else {
            throw CommandUsageError(message: "\(option.name) needs a value", subcommand: subcommand)
        }
        return value
    }

    package func noValue(_ option: Option) throws(CommandUsageError) {
        if option.inlineValue != nil {
            throw CommandUsageError(message: "\(option.name) takes no value", subcommand: subcommand)
        }
    }
}
