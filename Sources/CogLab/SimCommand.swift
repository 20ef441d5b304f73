import CogProtocol
import CogSim
import CogdCommandLine
import Foundation

/// `cogd-lab sim`: runs the cluster's cores on a simulated network, disk and
/// clock, one seed after another, and stops at the first broken invariant.
enum SimCommand {
    struct Options: Equatable {
        var seeds: ClosedRange<UInt64> = 1...1
        var steps = 20_000
        var workers = 3
        var json = false
        var broken: [String] = []
        /// The workers form one group: the leader places each scope member on one of them (`--groups`).
        var groups = false
        /// The nodes' arbiters against a model of etcd instead of the cluster (`--arbiter`).
        var arbiter = false
        /// A leader's shipping rules against standbys and etcd's sync key instead of the cluster (`--shipping`).
        var shipping = false
        /// With `--shipping`: `one` or `quorum:2` for every seed (nil: each seed draws one).
        var sync: ShipCore.SyncMode?
        /// With `--shipping`: sync key writes the leader gave up on may be applied by etcd later (`--late-sync-writes`).
        var lateSyncWrites = false
        /// Whether `--workers` was given (it means nothing with `--shipping`).
        var workersGiven = false
    }

    static func parse(_ arguments: [String]) throws(CommandUsageError) -> Options {
        var reader = OptionReader(arguments: arguments, subcommand: "sim")
        var options = Options()
        func whole(_ option: OptionReader.Option, _ text: String, in range: ClosedRange<UInt64>) throws(CommandUsageError) -> UInt64 {
            guard let value = UInt64(text), range.contains(value) else {
                throw CommandUsageError(
                    message: "\(option.name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'",
                    subcommand: "sim")
            }
            return value
        }
        while let option = try reader.nextOption() {
            switch option.name {
            case "--seed":
                let seed = try whole(option, try reader.value(for: option), in: 0...UInt64.max)
                options.seeds = seed...seed
            case "--seeds":
                let text = try reader.value(for: option)
                let parts = text.split(separator: "-", omittingEmptySubsequences: false)
                guard parts.count == 2, let low = UInt64(parts[0]), let high = UInt64(parts[1]), low <= high else {
                    throw CommandUsageError(message: "--seeds takes a range A-B of whole numbers, A ≤ B, not '\(text)'", subcommand: "sim")
                }
                options.seeds = low...high
            case "--steps": options.steps = Int(try whole(option, try reader.value(for: option), in: 1...100_000_000))
            case "--workers":
                options.workers = Int(try whole(option, try reader.value(for: option), in: 1...16))
                options.workersGiven = true
            case "--json":
                try reader.noValue(option)
                options.json = true
            case "--groups":
                try reader.noValue(option)
                options.groups = true
            case "--arbiter":
                try reader.noValue(option)
                options.arbiter = true
            case "--shipping":
                try reader.noValue(option)
                options.shipping = true
            case "--late-sync-writes":
                try reader.noValue(option)
                options.lateSyncWrites = true
            case "--sync":
                let text = try reader.value(for: option)
                guard let sync = ShipCore.SyncMode(text: text), sync == .one || sync == .quorum(2) else {
                    throw CommandUsageError(
                        message: "--sync takes one or quorum:2 (the simulated leader has 2 or 3 standbys), not '\(text)'", subcommand: "sim")
                }
                options.sync = sync
            case "--break":
                let text = try reader.value(for: option)
                guard SimRule(rawValue: text) != nil || text == arbiterRule || shippingRules.contains(text) else {
                    throw CommandUsageError(
                        message: "--break takes one of \((SimRule.allCases.map(\.rawValue) + [arbiterRule] + shippingRules).joined(separator: ", ")), not '\(text)'",
                        subcommand: "sim")
                }
                options.broken.append(text)
            default: throw CommandUsageError(message: "unknown option '\(option.name)'", subcommand: "sim")
            }
        }
        if let extra = try reader.positional() { throw CommandUsageError(message: "unexpected argument '\(extra)'", subcommand: "sim") }
        if options.shipping {
            if options.arbiter || options.groups {
                throw CommandUsageError(message: "--shipping is a mode of its own: give it without --\(options.arbiter ? "arbiter" : "groups")", subcommand: "sim")
            }
            if options.workersGiven {
                throw CommandUsageError(message: "--workers does not apply to --shipping: each seed draws 2 or 3 standbys", subcommand: "sim")
            }
            if let other = options.broken.first(where: { !shippingRules.contains($0) }) {
                throw CommandUsageError(
                    message: "--break \(other) is not a rule of shipping; with --shipping, --break takes \(shippingRules.joined(separator: " or "))", subcommand: "sim")
            }
            if options.broken.contains(uncomparedRule), !options.lateSyncWrites {
                throw CommandUsageError(
                    message: "--break \(uncomparedRule) needs --late-sync-writes (only a write that lands late can land after a later one)", subcommand: "sim")
            }
        } else {
            if options.sync != nil || options.lateSyncWrites {
                throw CommandUsageError(
                    message: "\(options.sync != nil ? "--sync" : "--late-sync-writes") is an option of --shipping: give --shipping too", subcommand: "sim")
            }
            if let rule = options.broken.first(where: { shippingRules.contains($0) }) {
                throw CommandUsageError(message: "--break \(rule) is a rule of shipping: give --shipping too", subcommand: "sim")
            }
        }
        if options.arbiter, let other = options.broken.first(where: { $0 != arbiterRule }) {
            throw CommandUsageError(message: "--break \(other) is a rule of the cluster's cores; with --arbiter, --break takes \(arbiterRule)", subcommand: "sim")
        }
        if !options.arbiter, !options.shipping, options.broken.contains(arbiterRule) {
            throw CommandUsageError(message: "--break \(arbiterRule) is the arbiter's rule: give --arbiter too", subcommand: "sim")
        }
        if options.broken.contains(SimRule.exclusivePlacement.rawValue) && !options.groups {
            throw CommandUsageError(message: "--break exclusive-placement needs --groups (placement is a rule of groups)", subcommand: "sim")
        }
        if options.broken.contains(SimRule.workerLease.rawValue) && !options.groups {
            throw CommandUsageError(message: "--break worker-lease needs --groups (the lease guards instances placed in a group)", subcommand: "sim")
        }
        return options
    }

    /// Runs every seed; exits 1 at the first violation (printing the seed,
    /// the step and the trace), 0 when all pass.
    @MainActor
    static func run(_ options: Options) -> Int32 {
        // Swift seeds its hashing per process: dictionaries would iterate in
        // another order each run. The simulator needs one seed, one run.
        if ProcessInfo.processInfo.environment["SWIFT_DETERMINISTIC_HASHING"] == nil {
            setenv("SWIFT_DETERMINISTIC_HASHING", "1", 1)
            let arguments = CommandLine.arguments
            var argv = arguments.map { strdup($0) } + [nil]
            execv("/proc/self/exe", &argv)
            printError("Error: cannot restart cogd with deterministic hashing: \(String(cString: strerror(errno)))")
            return 1
        }
        if options.arbiter { return runArbiter(options) }
        if options.shipping { return runShipping(options) }
        let broken = Set(options.broken.compactMap(SimRule.init(rawValue:)))
        let started = ContinuousClock.now
        var totalSteps = 0
        var seedsRun = 0
        for seed in options.seeds {
            var configuration = SimConfiguration(seed: seed, steps: options.steps, workers: options.workers, broken: broken)
            configuration.groups = options.groups
            let simulation = Simulation(configuration: configuration)
            let result = simulation.run()
            totalSteps += result.steps
            seedsRun += 1
            if options.json {
                print(json(result))
            }
            if let violation = result.violation {
                if !options.json {
                    print("seed \(seed): FAIL at step \(violation.step) (t=\(String(format: "%.3f", seconds(violation.time))) s): \(violation.invariant): \(escaped: violation.message)")
                    print("trace (the last events, oldest first):")
                    for line in violation.trace { print("  \(escaped: line)") }
                    print(
                        "reproduce: cogd-lab sim --seed \(seed) --steps \(options.steps) --workers \(options.workers)"
                            + (options.groups ? " --groups" : "") + options.broken.map { " --break \($0)" }.joined())
                }
                return 1
            }
            if !options.json, options.seeds.count <= 20 || seed == options.seeds.upperBound || seedsRun % 20 == 0 {
                print(
                    "seed \(seed): pass — \(result.steps) steps, \(result.revisions) revisions, fingerprint \(String(result.fingerprint, radix: 16)); "
                        + result.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            }
        }
        let elapsed = seconds(ContinuousClock.now - started)
        let rate = elapsed > 0 ? Double(totalSteps) / elapsed : 0
        if !options.json {
            print("\(seedsRun) seed\(seedsRun == 1 ? "" : "s") passed: \(totalSteps) steps in \(String(format: "%.1f", elapsed)) s (\(Int(rate)) steps/s)")
        }
        return 0
    }

    /// The arbiter's broken rule (`--arbiter --break arbiter-deadline`).
    static let arbiterRule = "arbiter-deadline"

    /// `--arbiter`: each seed's nodes (`--workers` of them, at least 2) and a model of etcd.
    static func runArbiter(_ options: Options) -> Int32 {
        let started = ContinuousClock.now
        var totalSteps = 0
        var totals = (leads: 0, stepDowns: 0, seconds: 0.0)
        for seed in options.seeds {
            let result = ArbiterSimulation.run(.init(
                seed: seed, steps: options.steps, nodes: max(2, options.workers), brokenDeadline: options.broken.contains(arbiterRule)))
            totalSteps += result.steps
            totals = (totals.leads + result.leads, totals.stepDowns + result.stepDowns, totals.seconds + result.simulatedSeconds)
            if options.json {
                print(json(result))
                if result.violation != nil { return 1 }
                continue
            }
            if let violation = result.violation {
                print("seed \(seed): FAIL at step \(violation.step) (t=\(String(format: "%.3f", seconds(violation.time))) s): \(violation.invariant): \(escaped: violation.message)")
                print("trace (the last events, oldest first):")
                for line in violation.trace { print("  \(escaped: line)") }
                print("reproduce: cogd-lab sim --arbiter --seed \(seed) --steps \(options.steps) --workers \(options.workers)"
                    + options.broken.map { " --break \($0)" }.joined())
                return 1
            }
            if options.seeds.count <= 20 || seed == options.seeds.upperBound {
                print("seed \(seed): pass — \(result.steps) steps, \(String(format: "%.0f", result.simulatedSeconds)) s simulated, "
                    + "\(result.leads) leads, \(result.stepDowns) step-downs, epoch \(result.highestEpoch)")
            }
        }
        guard !options.json else { return 0 }
        let elapsed = seconds(ContinuousClock.now - started)
        print("\(options.seeds.count) seed\(options.seeds.count == 1 ? "" : "s") passed: \(totalSteps) steps, \(Int(totals.seconds)) s simulated, "
            + "\(totals.leads) leads, \(totals.stepDowns) step-downs, in \(String(format: "%.1f", elapsed)) s; "
            + "no node released without holding etcd's leader key")
        return 0
    }

    /// The shipping rules' broken rules: the sync key names every standby
    /// in step (`--shipping --break ship-sync-key`), or its writes compare
    /// only the leader key (`--break sync-key-compare`).
    static let shippingRule = "ship-sync-key"
    static let uncomparedRule = "sync-key-compare"
    /// A leader stepping down keeps its last commit once the standbys the
    /// sync key names for certain hold it (`--break step-down-keep`).
    static let stepDownRule = "step-down-keep"
    /// When the leader crashes, any standby with a copy may take the lead,
    /// not only one the sync key names (`--break failover-any`).
    static let failoverRule = "failover-any"
    static let shippingRules = [shippingRule, uncomparedRule, stepDownRule, failoverRule]

    /// `--shipping`: each seed's leader, its standbys and etcd's sync key.
    static func runShipping(_ options: Options) -> Int32 {
        let started = ContinuousClock.now
        var totals = (steps: 0, seconds: 0.0, shipped: UInt64(0), released: UInt64(0), takenBack: UInt64(0))
        var counts: [String: Int] = [:]
        for seed in options.seeds {
            let result = ShipSimulation.run(.init(
                seed: seed, steps: options.steps, sync: options.sync, brokenSyncKey: options.broken.contains(shippingRule),
                lateSyncWrites: options.lateSyncWrites, uncomparedSyncWrites: options.broken.contains(uncomparedRule),
                stepDownNamedOnly: options.broken.contains(stepDownRule), anyStandbyLeads: options.broken.contains(failoverRule)))
            totals = (
                totals.steps + result.steps, totals.seconds + result.simulatedSeconds, totals.shipped + result.shipped, totals.released + result.released,
                totals.takenBack + result.takenBack
            )
            counts.merge(result.counts, uniquingKeysWith: +)
            if options.json { print(json(result)) }
            if let violation = result.violation {
                guard !options.json else { return 1 }
                print("seed \(seed): FAIL at step \(violation.step) (t=\(String(format: "%.3f", seconds(violation.time))) s): \(violation.invariant): \(escaped: violation.message)")
                print("trace (the last events, oldest first):")
                for line in violation.trace { print("  \(escaped: line)") }
                print("reproduce: cogd-lab sim --shipping --seed \(seed) --steps \(options.steps)"
                    + (options.sync.map { " --sync \($0)" } ?? "") + (options.lateSyncWrites ? " --late-sync-writes" : "")
                    + options.broken.map { " --break \($0)" }.joined())
                return 1
            }
            if !options.json, options.seeds.count <= 20 || seed == options.seeds.upperBound {
                print("seed \(seed): pass — \(result.steps) steps, \(String(format: "%.0f", result.simulatedSeconds)) s simulated, --sync \(result.sync) "
                    + (result.degradeAfter.map { "degrading after \(CogLab.formatted($0)) s" } ?? "strict") + ", \(result.standbys) standbys; "
                    + "\(result.released) of \(result.shipped) commits released in \(result.counts["releases", default: 0]) releases, "
                    + "\(result.counts["copies", default: 0]) copies, \(result.counts["drops", default: 0]) drops, "
                    + "\(result.counts["failovers", default: 0]) failovers (\(result.takenBack) commits taken back, none released)")
            }
        }
        let elapsed = seconds(ContinuousClock.now - started)
        if !options.json {
            print("\(options.seeds.count) seed\(options.seeds.count == 1 ? "" : "s") passed: \(totals.steps) steps, \(Int(totals.seconds)) s simulated, "
                + "\(totals.released) of \(totals.shipped) commits released in \(counts["releases", default: 0]) releases, "
                + "\(counts["copies", default: 0]) copies, \(counts["drops", default: 0]) drops, "
                + "\(counts["failovers", default: 0]) failovers (\(totals.takenBack) commits taken back, none released), "
                + "0 violations, in \(String(format: "%.1f", elapsed)) s; "
                + "every standby etcd's sync key named held every commit released, each new leader held every commit released before it, and each of the "
                + "\(counts["step-down-keeps", default: 0]) times a leader stepping down would have kept its last commit, it was in every log etcd named or might name")
        }
        return 0
    }

    static func json(_ result: ShipSimulation.Result) -> String {
        var object: [String: Any] = [
            "seed": result.seed, "steps": result.steps, "sync": result.sync.description, "standbys": result.standbys,
            "shipped": result.shipped, "released": result.released, "takenBack": result.takenBack, "counts": result.counts,
            "simulatedSeconds": result.simulatedSeconds,
            "pass": result.violation == nil,
        ]
        if let degradeAfter = result.degradeAfter { object["degradeAfter"] = degradeAfter }
        if let violation = result.violation { object["violation"] = json(violation) }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    static func json(_ result: ArbiterSimulation.Result) -> String {
        var object: [String: Any] = [
            "seed": result.seed, "steps": result.steps, "leads": result.leads, "stepDowns": result.stepDowns,
            "highestEpoch": result.highestEpoch, "simulatedSeconds": result.simulatedSeconds, "pass": result.violation == nil,
        ]
        if let violation = result.violation { object["violation"] = json(violation) }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    static func json(_ violation: SimViolation) -> [String: Any] {
        [
            "invariant": violation.invariant, "message": violation.message, "step": violation.step,
            "time": seconds(violation.time), "trace": violation.trace,
        ]
    }

    static func json(_ result: SimResult) -> String {
        var object: [String: Any] = [
            "seed": result.seed, "steps": result.steps, "revisions": result.revisions,
            "fingerprint": String(result.fingerprint, radix: 16), "counts": result.counts, "pass": result.violation == nil,
        ]
        if let violation = result.violation {
            object["violation"] = [
                "invariant": violation.invariant, "message": violation.message, "step": violation.step,
                "time": seconds(violation.time), "trace": violation.trace,
            ]
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
