import CogdCommandLine

/// The options of `cogd-lab bench` (parsed by `LabParse.parseBench`).
struct BenchOptions: Equatable {
    enum Suite: String, CaseIterable { case graph, log, cluster, groups, retention, quick }
    var suite: Suite
    var json = false
    /// Timed runs per shape; the median is reported (`retention`: whole runs, default 1).
    var runs = 7
    /// Shapes to run; empty means all.
    var only: [String] = []
    /// The cluster bench's leader: its `--spin-wait` (microseconds).
    var leaderSpinWaitMicroseconds = 0
    /// The cluster bench also measures with CURVE on (`--curve`), beside the same without.
    var curve = false
    /// The cluster bench measures a leader with a synchronous standby instead (`--standby`): on a lab etcd, `--sync one`.
    var standby = false
    /// `--standby`: how many times the leader is killed and the failover timed (`--failovers N`).
    var failovers = 3
    /// The retention bench's leader: its `--retain-turns`.
    var retainTurns = RetentionBench.defaultRetainTurns
    /// The retention bench's transfers (`--total-turns`; default 4× the retention).
    var totalTurns = 4 * RetentionBench.defaultRetainTurns
    /// The retention bench reads the data file after each this many transfers (`--sample-every`; default half the retention).
    var sampleEvery = RetentionBench.defaultRetainTurns / 2
    /// Write an HTML page of the figures into this folder (`--report DIR`): the suite then runs as a child.
    var report: String?
    /// `cluster`, `groups`, `retention`: the loopback ports are picked free from this range (`--ports A-B`).
    var ports = PortRange.standard

    /// The suites that start a leader on loopback ports (and take `--ports`).
    static let suitesWithPorts: [Suite] = [.cluster, .groups, .retention, .quick]

    /// How many loopback ports the run takes at its start, and what for.
    var portsNeeded: (count: Int, what: String) {
        switch suite {
        case .graph, .log: return (0, "")
        case .quick: return (0, "")  // each part's child takes its own from the range
        case .cluster where standby:
            let shapes = only.isEmpty ? ClusterBench.standbyShapeNames : only
            let echo = shapes.contains("round-trip") ? 1 : 0
            return (6 + echo, "bench cluster --standby (etcd's client and peer, two nodes\(echo > 0 ? ", a raw echo server" : ""))")
        case .cluster:
            let shapes = only.isEmpty ? ClusterBench.shapeNames : only
            let echo = shapes.contains("round-trip") ? 2 : 0
            return (2 + echo + (curve ? 2 : 0), "bench cluster (a leader\(echo > 0 ? ", two raw echo servers" : "")\(curve ? ", a CURVE leader" : ""))")
        case .groups:
            let shapes = only.isEmpty ? GroupBench.shapeNames : only
            return (2 * shapes.count, "bench groups (a leader per shape, \(shapes.count) shape\(shapes.count == 1 ? "" : "s"))")
        case .retention:
            return (2 * runs, "bench retention (a leader per run, \(runs) run\(runs == 1 ? "" : "s"))")
        }
    }
}

/// Parses the lab's subcommands' options: pure functions from the
/// arguments after the subcommand's name, tested with plain arrays.
enum LabParse {
    typealias UsageError = CommandUsageError

    static func parseDrill(_ arguments: [String]) throws(UsageError) -> Drill.Options {
        var reader = OptionReader(arguments: arguments, subcommand: "drill")
        var options = Drill.Options()
        var given = Set<String>()
        func number(_ option: OptionReader.Option, _ text: String) throws(UsageError) -> Double {
            guard let value = Double(text), value > 0 else {
                throw UsageError(message: "\(option.name) takes a positive number, not '\(text)'", subcommand: "drill")
            }
            return value
        }
        while let option = try reader.nextOption() {
            switch option.name {
            case "--workers":
                let text = try reader.value(for: option)
                guard let value = Int(text), value >= 0, value <= 16 else {
                    throw UsageError(message: "--workers takes a whole number from 0 to 16, not '\(text)'", subcommand: "drill")
                }
                options.workers = value
            case "--seconds": options.seconds = Int(try number(option, try reader.value(for: option)))
            case "--kill-leader-every": options.killLeaderEvery = try number(option, try reader.value(for: option))
            case "--kill-worker-every": options.killWorkerEvery = try number(option, try reader.value(for: option))
            case "--trap-every":
                let text = try reader.value(for: option)
                guard let value = Double(text), value >= 0, value.isFinite else {
                    throw UsageError(message: "--trap-every takes a number of seconds, 0 for none, not '\(text)'", subcommand: "drill")
                }
                options.trapEvery = value
            case "--seed":
                let text = try reader.value(for: option)
                guard let value = UInt64(text) else {
                    throw UsageError(message: "--seed takes a whole number, not '\(text)'", subcommand: "drill")
                }
                options.seed = value
            case "--json":
                try reader.noValue(option)
                options.json = true
            case "--curve":
                try reader.noValue(option)
                options.curve = true
            case "--data": options.dataFolder = try reader.value(for: option)
            case "--group-workers":
                let text = try reader.value(for: option)
                guard let value = Int(text), value >= 1, value <= 16 else {
                    throw UsageError(message: "--group-workers takes a whole number from 1 to 16, not '\(text)'", subcommand: "drill")
                }
                options.groupWorkers = value
            case "--heartbeat-timeout": options.heartbeatTimeout = try number(option, try reader.value(for: option))
            case "--freeze-worker-every":
                let text = try reader.value(for: option)
                guard let value = Double(text), value >= 0, value.isFinite else {
                    throw UsageError(message: "--freeze-worker-every takes a number of seconds, 0 for none, not '\(text)'", subcommand: "drill")
                }
                options.freezeWorkerEvery = value
            case "--cut-worker-every":
                let text = try reader.value(for: option)
                guard let value = Double(text), value >= 0, value.isFinite else {
                    throw UsageError(message: "--cut-worker-every takes a number of seconds, 0 for none, not '\(text)'", subcommand: "drill")
                }
                options.cutWorkerEvery = value
            case "--ports": options.ports = try PortRange.parse(try reader.value(for: option), subcommand: "drill")
            case "--report": options.reportFolder = try reader.value(for: option)
            case "--ha":
                try reader.noValue(option)
                options.ha = true
            case "--lease-ttl":
                let text = try reader.value(for: option)
                guard let value = Int(text), (2...3600).contains(value) else {
                    throw UsageError(message: "--lease-ttl takes a whole number of seconds from 2 to 3600, not '\(text)'", subcommand: "drill")
                }
                options.leaseTTL = value
            case "--nodes":
                let text = try reader.value(for: option)
                guard let value = Int(text), HADrill.nodeCounts.contains(value) else {
                    throw UsageError(message: "--nodes takes 2 or 3, not '\(text)'", subcommand: "drill")
                }
                options.nodes = value
            case "--fault-every": options.faultEvery = try number(option, try reader.value(for: option))
            case "--faults":
                let text = try reader.value(for: option)
                var faults: [HADrill.Fault] = []
                for name in text.split(separator: ",", omittingEmptySubsequences: false) {
                    guard let fault = HADrill.Fault(rawValue: String(name)) else {
                        throw UsageError(
                            message: "--faults takes names from \(HADrill.Fault.allCases.map(\.rawValue).joined(separator: ", ")), not '\(name)'", subcommand: "drill")
                    }
                    if !faults.contains(fault) { faults.append(fault) }
                }
                options.faults = HADrill.Fault.allCases.filter(faults.contains)
            default: throw UsageError(message: "unknown option '\(option.name)'", subcommand: "drill")
            }
            given.insert(option.name)
        }
        if options.ha {
            // The HA drill: etcd, two or three nodes and clients; its own faults.
            let others = ["--workers", "--kill-leader-every", "--kill-worker-every", "--trap-every", "--curve", "--data", "--group-workers",
                "--heartbeat-timeout", "--freeze-worker-every", "--cut-worker-every"]
            if let other = others.first(where: given.contains) {
                throw UsageError(message: "\(other) does not apply to an HA drill (--ha)", subcommand: "drill")
            }
            if let extra = try reader.positional() { throw UsageError(message: "unexpected argument '\(extra)'", subcommand: "drill") }
            try options.ports.check(
                needed: HADrill.portsNeeded(nodes: options.nodes),
                what: "an HA drill of \(options.nodes) nodes (etcd's two, and each node's requests and turns)", subcommand: "drill")
            return options
        } else if let haOnly = ["--lease-ttl", "--fault-every", "--faults", "--nodes"].first(where: given.contains) {
            throw UsageError(message: "\(haOnly) applies to an HA drill (with --ha)", subcommand: "drill")
        }
        if options.groupWorkers > 0 {
            // A group drill kills workers only, without CURVE.
            if let other = ["--workers", "--kill-leader-every", "--trap-every", "--curve"].first(where: given.contains) {
                throw UsageError(message: "\(other) does not apply to a group drill (--group-workers)", subcommand: "drill")
            }
            if !given.contains("--kill-worker-every") { options.killWorkerEvery = Drill.Options.groupKillWorkerEvery }
        } else if let groupOnly = ["--heartbeat-timeout", "--freeze-worker-every", "--cut-worker-every"].first(where: given.contains) {
            throw UsageError(message: "\(groupOnly) applies to a group drill (with --group-workers)", subcommand: "drill")
        }
        if let extra = try reader.positional() { throw UsageError(message: "unexpected argument '\(extra)'", subcommand: "drill") }
        if options.cutWorkerEvery > 0 {
            try options.ports.check(
                needed: Drill.Options.portsNeeded + options.groupWorkers,
                what: "a group drill that cuts links (the leader's requests and turns, and a relay per worker)", subcommand: "drill")
        } else {
            try options.ports.check(needed: Drill.Options.portsNeeded, what: "a drill (the leader's requests and turns)", subcommand: "drill")
        }
        return options
    }

    /// A number of turns for `bench retention`: 1 to 1,000,000,000.
    static func turnCount(_ text: String, _ option: OptionReader.Option) throws(UsageError) -> Int {
        guard let count = Int(text), (1...1_000_000_000).contains(count) else {
            throw UsageError(message: "\(option.name) takes a number of turns from 1 to 1000000000, not '\(text)'", subcommand: "bench")
        }
        return count
    }

    /// `bench cluster`'s shapes are those of its mode (with or without
    /// `--standby`), and `--standby`'s options go with it.
    private static func checkStandby(_ options: BenchOptions, given: Set<String>) throws(UsageError) {
        let known = options.standby ? ClusterBench.standbyShapeNames : ClusterBench.shapeNames
        if let unknown = options.only.first(where: { !known.contains($0) }) {
            throw UsageError(
                message: "unknown shape '\(unknown)'\(options.standby ? " with --standby" : "") (one of: \(known.joined(separator: ", ")))",
                subcommand: "bench")
        }
        if options.standby, options.curve {
            throw UsageError(message: "--curve does not go with --standby", subcommand: "bench")
        }
        if !options.standby, given.contains("--failovers") {
            throw UsageError(message: "--failovers goes with --standby", subcommand: "bench")
        }
    }

    static func parseBench(_ arguments: [String]) throws(UsageError) -> BenchOptions {
        var options = OptionReader(arguments: arguments, subcommand: "bench")
        guard let suiteName = try options.positional() else {
            throw UsageError(message: "missing suite (one of: \(BenchOptions.Suite.allCases.map(\.rawValue).joined(separator: ", ")))", subcommand: "bench")
        }
        guard let suite = BenchOptions.Suite(rawValue: suiteName) else {
            throw UsageError(message: "unknown bench suite '\(suiteName)' (one of: \(BenchOptions.Suite.allCases.map(\.rawValue).joined(separator: ", ")))", subcommand: "bench")
        }
        var result = BenchOptions(suite: suite)
        var given = Set<String>()
        if suite == .retention { result.runs = 1 }
        if suite == .quick { result.runs = QuickBench.defaultRuns }
        while let option = try options.nextOption() {
            given.insert(option.name)
            switch option.name {
            case "--json":
                try options.noValue(option)
                result.json = true
            case "--runs":
                let text = try options.value(for: option)
                guard let runs = Int(text), runs >= 1, runs <= 1000 else {
                    throw UsageError(message: "--runs takes a whole number from 1 to 1000, not '\(text)'", subcommand: "bench")
                }
                result.runs = runs
            case "--only" where suite == .retention:
                throw UsageError(message: "bench retention has no shapes to choose: --only does not apply", subcommand: "bench")
            case "--only":
                let text = try options.value(for: option)
                let shapes = text.split(separator: ",").map(String.init)
                let known = switch suite {
                case .graph: GraphBench.shapeNames
                case .log: LogBench.shapeNames
                // Checked against --standby's own after every option is read.
                case .cluster: ClusterBench.shapeNames + ClusterBench.standbyShapeNames
                case .groups: GroupBench.shapeNames
                case .retention: [String]()
                case .quick: QuickBench.partNames
                }
                if let unknown = shapes.first(where: { !known.contains($0) }) {
                    throw UsageError(
                        message: "unknown \(suite == .quick ? "part" : "shape") '\(unknown)' (one of: \(known.joined(separator: ", ")))",
                        subcommand: "bench")
                }
                result.only = shapes
            case "--leader-spin-wait" where suite == .cluster:
                result.leaderSpinWaitMicroseconds = try OptionReader.spinWait(try options.value(for: option), option, "bench")
            case "--curve" where suite == .cluster:
                try options.noValue(option)
                result.curve = true
            case "--standby" where suite == .cluster:
                try options.noValue(option)
                result.standby = true
            case "--failovers" where suite == .cluster:
                let text = try options.value(for: option)
                guard let count = Int(text), (1...20).contains(count) else {
                    throw UsageError(message: "--failovers takes a whole number from 1 to 20, not '\(text)'", subcommand: "bench")
                }
                result.failovers = count
            case "--retain-turns" where suite == .retention:
                result.retainTurns = try turnCount(try options.value(for: option), option)
            case "--total-turns" where suite == .retention:
                result.totalTurns = try turnCount(try options.value(for: option), option)
            case "--sample-every" where suite == .retention:
                result.sampleEvery = try turnCount(try options.value(for: option), option)
            case "--report":
                let folder = try options.value(for: option)
                guard !folder.isEmpty else { throw UsageError(message: "--report takes a folder, not ''", subcommand: "bench") }
                result.report = folder
            case "--ports" where BenchOptions.suitesWithPorts.contains(suite):
                result.ports = try PortRange.parse(try options.value(for: option), subcommand: "bench")
            default:
                throw UsageError(message: "unknown option '\(option.name)'", subcommand: "bench")
            }
        }
        if let extra = try options.positional() {
            throw UsageError(message: "unexpected argument '\(extra)'", subcommand: "bench")
        }
        if suite == .retention {
            if !given.contains("--total-turns") { result.totalTurns = 4 * result.retainTurns }
            if !given.contains("--sample-every") { result.sampleEvery = max(1, result.retainTurns / 2) }
            if let problem = RetentionBench.problem(with: result) { throw UsageError(message: problem, subcommand: "bench") }
        }
        if suite == .cluster {
            try checkStandby(result, given: given)
        }
        let needed = result.portsNeeded
        try result.ports.check(needed: needed.count, what: needed.what, subcommand: "bench")
        if result.curve && !result.only.isEmpty && !result.only.contains(where: ClusterBench.curveShapeNames.contains) {
            throw UsageError(
                message: "--curve compares the \(ClusterBench.curveShapeNames.joined(separator: " and ")) shapes; add one of them to --only",
                subcommand: "bench")
        }
        return result
    }
}
