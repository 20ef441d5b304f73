import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd status`: the leader's `status` reply as lines or one JSON object,
/// once or, with `--watch`, again and again.
enum StatusCommand {
    /// The heartbeat timeout a leader that does not report its own is taken to have (the default).
    static let assumedHeartbeatTimeout = 5.0

    /// Whether a worker not heard from for `seconds` counts as silent: more
    /// than half the leader's heartbeat timeout and more than 2 s (workers
    /// send a heartbeat every second, so at least two are missing). The
    /// leader gives it up at the whole timeout.
    static func isSilent(_ seconds: Double, heartbeatTimeout: Double?) -> Bool {
        seconds > max((heartbeatTimeout ?? assumedHeartbeatTimeout) / 2, 2)
    }

    /// One report, or with `watch` one every `watch` until interrupted or
    /// `count` are shown; the exit status is the last report's.
    static func run(
        leader endpoint: String, json: Bool, timeout: Duration, keys: Command.ClientKeyFiles?, watch: Duration?, count: Int?,
        source: String = "--leader"
    ) -> Int32 {
        guard let watch else {
            var history = WatchHistory()
            return report(leader: endpoint, json: json, timeout: timeout, keys: keys, watching: nil, source: source, history: &history).status
        }
        let redraws = isatty(STDOUT_FILENO) == 1 && !json
        var shown = 0
        var status: Int32 = 0
        var history = WatchHistory()
        history.drawsSparklines = !json && supportsSparklines(isTerminal: redraws, environment: ProcessInfo.processInfo.environment)
        while count.map({ shown < $0 }) ?? true {
            let started = ContinuousClock.now
            if redraws {
                print("\u{1B}[H\u{1B}[2J", terminator: "")
            } else if shown > 0 && !json {
                print("")
            }
            let outcome = report(leader: endpoint, json: json, timeout: timeout, keys: keys, watching: watch, source: source, history: &history)
            status = outcome.status
            shown += 1
            fflush(nil)
            // A refused key, the turn stream given for the requests endpoint or
            // another failure will not mend by asking again: said once.
            if outcome.final { return status }
            guard count.map({ shown < $0 }) ?? true else { break }
            let rest = watch - (ContinuousClock.now - started)
            if rest > .zero {
                let parts = rest.components
                Thread.sleep(forTimeInterval: Double(parts.seconds) + Double(parts.attoseconds) / 1e18)
            }
        }
        return status
    }

    /// What `--watch` remembers between reports: the last epoch and
    /// revision, and the remarks on a log that went back (shown in every
    /// later report, as a redraw clears the screen).
    struct WatchHistory {
        var last: (epoch: UInt64, revision: UInt64)?
        var remarks: [String] = []
        /// Whether each worker's line ends with its lag over the last reports
        /// (a terminal that shows block characters: `supportsSparklines`).
        var drawsSparklines = false
        /// Each worker's lag in the latest reports, oldest first (at most
        /// `sparklineLength` of them, for at most `sparklineWorkers` workers).
        var lags: [String: [UInt64]] = [:]

        static let sparklineLength = 24
        static let sparklineWorkers = 256

        /// Notes each worker's lag in `status` (a worker no longer listed is forgotten).
        mutating func noteLags(_ status: LeaderStatus) {
            let listed = status.workers.filter { $0.tool != true }.prefix(Self.sparklineWorkers)
            var next: [String: [UInt64]] = [:]
            for worker in listed {
                next[worker.name] = Array(((lags[worker.name] ?? []) + [worker.lag]).suffix(Self.sparklineLength))
            }
            lags = next
        }

        /// The sparklines to draw after each worker's line (none unless drawing).
        var sparklines: [String: String] {
            guard drawsSparklines else { return [:] }
            return lags.mapValues { "lag " + StatusCommand.sparkline($0) }
        }

        /// Takes `status` in; a remark when its revision or epoch is lower
        /// than the last report's (another log, or a restored backup: a
        /// leader's own log only grows), nil otherwise.
        mutating func take(_ status: LeaderStatus) -> String? {
            defer { last = (status.epoch, status.revision) }
            guard let last, status.revision < last.revision || status.epoch < last.epoch else { return nil }
            let remark =
                "the leader's log went back from revision \(last.revision) (epoch \(last.epoch)) to \(status.revision) "
                + "(epoch \(status.epoch)) at \(CBORText.iso8601(Date().timeIntervalSince1970)): another log, or a restored backup"
            // The latest few: a leader that goes back and forth does not grow the report without end.
            remarks = Array((remarks + [remark]).suffix(3))
            return remark
        }
    }

    /// Asks once and prints what the leader said (or why nothing); `final`
    /// when asking again would get the same failure (`--watch` stops).
    private static func report(
        leader endpoint: String, json: Bool, timeout: Duration, keys: Command.ClientKeyFiles?, watching: Duration?, source: String,
        history: inout WatchHistory
    ) -> (status: Int32, final: Bool) {
        do {
            let answer = try ClusterCommands.request(.statusRequest, leader: endpoint, timeout: timeout, keys: keys)
            if case .error(let error)? = answer {
                printError("Error: the leader refused the request: \(escaped: error)")
                return (ClusterCommands.CallExit.failed, true)
            }
            guard case .status(let status)? = answer else {
                if watching != nil && !json { print("\(escaped: endpoint) at \(CBORText.iso8601(Date().timeIntervalSince1970)): no answer") }
                printError(ClusterCommands.noAnswer(from: endpoint, within: timeout))
                return (ClusterCommands.CallExit.noAnswer, false)
            }
            let wentBack = history.take(status)
            history.noteLags(status)
            if json {
                print(jsonText(status))
                // The JSON lines keep their fields: the remark goes to stderr.
                if let wentBack { printError("\(CogdCommandLine.programName) status: \(wentBack)") }
            } else {
                if let watching {
                    print(
                        "\(escaped: endpoint) at \(CBORText.iso8601(Date().timeIntervalSince1970)), every \(Command.secondsText(watching)) s "
                            + "(Ctrl-C stops)")
                }
                for line in lines(status, sparklines: history.sparklines) { print(line) }
                for remark in history.remarks { print("note      \(remark)") }
            }
            return (0, false)
        } catch let wrong as EndpointHandshake.WrongEndpoint {
            printError("Error: \(escaped: wrong.from(source))")
            return (ClusterCommands.CallExit.noAnswer, true)
        } catch let none as EndpointHandshake.NotALeader {
            printError("Error: \(none)")
            return (ClusterCommands.CallExit.noAnswer, true)
        } catch {
            printError("Error: \(escaped: error)")
            return (ClusterCommands.CallExit.failed, true)
        }
    }

    /// `seconds` as people read an uptime: `42 s`, `3 min 5 s`, `2 h 7 min`, `3 d 4 h`.
    static func uptimeText(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.down))
        let (days, hours, minutes, rest) = (whole / 86_400, whole / 3_600 % 24, whole / 60 % 60, whole % 60)
        if days > 0 { return "\(days) d \(hours) h" }
        if hours > 0 { return "\(hours) h \(minutes) min" }
        if minutes > 0 { return "\(minutes) min \(rest) s" }
        return "\(rest) s"
    }

    /// The eight block heights a sparkline is drawn with, lowest first.
    static let sparkBlocks: [Character] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]

    /// `values` as a line of block characters scaled to the largest (all
    /// lowest when every value is 0): `[0, 2, 8]` is `▁▃█`.
    static func sparkline(_ values: [UInt64]) -> String {
        let highest = values.max() ?? 0
        guard highest > 0 else { return String(repeating: sparkBlocks[0], count: values.count) }
        return String(values.map { value in
            sparkBlocks[Int((Double(value) / Double(highest) * Double(sparkBlocks.count - 1)).rounded())]
        })
    }

    /// Whether `status --watch` draws sparklines: on a terminal (it redraws
    /// there) whose locale says UTF-8 (`LC_ALL`, else `LC_CTYPE`, else
    /// `LANG`), and not a dumb one.
    static func supportsSparklines(isTerminal: Bool, environment: [String: String]) -> Bool {
        guard isTerminal, environment["TERM"] != "dumb" else { return false }
        let locale = [environment["LC_ALL"], environment["LC_CTYPE"], environment["LANG"]].compactMap { $0 }.first { !$0.isEmpty } ?? ""
        return locale.uppercased().replacingOccurrences(of: "-", with: "").contains("UTF8")
    }

    /// The report as lines (names and text from the leader escaped); a
    /// worker named in `sparklines` has its sparkline at the end of its line.
    static func lines(_ status: LeaderStatus, sparklines: [String: String] = [:]) -> [String] {
        var lines: [String] = []
        // cogd's own version is a number (`cogd 0.1.0`); an app's names itself (`todo 1.2.0 (cogd 0.1.0)`).
        let version = status.version.map { ($0.first?.isNumber == true ? "cogd " : "") + TerminalText.escaped($0) } ?? "version not reported (an older leader)"
        lines.append("leader    \(version)" + (status.uptimeSeconds.map { ", up \(uptimeText($0))" } ?? ""))
        lines.append("epoch     \(status.epoch)")
        lines.append("revision  \(status.revision)")
        let timeout = status.heartbeatTimeoutSeconds
        // Tools (`cogd get`, `cogd tail --connect`) read the state and close: listed apart, never lagging or silent.
        let workers = status.workers.filter { $0.tool != true }
        let tools = status.workers.filter { $0.tool == true }
        let silent = workers.filter { isSilent($0.secondsSinceHeard, heartbeatTimeout: timeout) }.count
        lines.append("workers   \(workers.count)" + (silent > 0 ? " (\(silent) silent)" : ""))
        for worker in workers {
            let heard = String(format: "%.1f", worker.secondsSinceHeard)
            let silence =
                isSilent(worker.secondsSinceHeard, heartbeatTimeout: timeout)
                ? " — SILENT: no heartbeat for \(heard) s (given up at \(Command.secondsText(.milliseconds(Int64(((timeout ?? assumedHeartbeatTimeout) * 1_000).rounded())))) s)"
                : ""
            lines.append(
                "  \(TerminalText.escaped(worker.name)): applied \(worker.appliedRevision), lag \(worker.lag), heard \(heard)s ago"
                    + (worker.digest.map { ", digest \(TerminalText.escaped($0))" } ?? "")
                    + (worker.instances.map { $0 > 0 ? ", owns \($0) instance\($0 == 1 ? "" : "s")" : "" } ?? "") + silence
                    + (sparklines[worker.name].map { "  \($0)" } ?? ""))
            // The keys of its app settings (`worker --set`, `--settings`), never their values.
            if let settings = worker.settings, !settings.isEmpty {
                lines.append("    settings: " + settings.map { TerminalText.escaped($0) }.joined(separator: ", "))
            }
        }
        if !tools.isEmpty {
            lines.append("tools     \(tools.count) (cogd get / tail --connect / call --name: listed until their goodbye, or killed, the heartbeat timeout)")
            for tool in tools {
                lines.append("  \(TerminalText.escaped(tool.name)): tool, heard \(String(format: "%.1f", tool.secondsSinceHeard))s ago")
            }
        }
        // hello-first is a worker re-introducing itself (as after a leader
        // restart), not a fault: counted apart from the errors.
        let helloFirst = status.errorCounts[CogdCode.helloFirst.text]
        let errors = status.errorCounts.filter { $0.key != CogdCode.helloFirst.text }.sorted { $0.key < $1.key }
            .map { "\(TerminalText.escaped($0.key)) \($0.value)" }
        lines.append("errors    \(errors.isEmpty ? "none" : errors.joined(separator: ", "))")
        if let refusals = status.refusals, !refusals.isEmpty {
            // Ops whose body said no (an app's own codes): answers, not faults.
            lines.append(
                "refusals  " + refusals.map { "\(TerminalText.escaped($0.op)) \(TerminalText.escaped($0.code)) \($0.count)" }.joined(separator: ", "))
        }
        if let helloFirst {
            lines.append("rejoins   hello-first \(helloFirst) (workers re-introducing themselves, as after a leader restart; not errors)")
        }
        let open = status.openScopeInstances.count
        lines.append("scopes    \(open) open instance\(open == 1 ? "" : "s")")
        let groups = Dictionary(grouping: status.workers.filter { $0.group != nil }, by: { $0.group ?? "" })
        for (group, members) in groups.sorted(by: { $0.key < $1.key }) {
            let owned = members.map { "\(TerminalText.escaped($0.name)) \($0.instances ?? 0)" }.joined(separator: ", ")
            lines.append("group     \(TerminalText.escaped(group)): \(members.count) member\(members.count == 1 ? "" : "s") (instances owned: \(owned))")
            // Where each mechanism's root is placed: its top-level reactions and tasks run there (§6a).
            let roots = members.flatMap { member in (member.roots ?? []).map { (mechanism: $0, worker: member.name) } }
                .sorted { ($0.mechanism, $0.worker) < ($1.mechanism, $1.worker) }
            if !roots.isEmpty {
                lines.append(
                    "          roots: " + roots.map { "\(TerminalText.escaped($0.mechanism)) on \(TerminalText.escaped($0.worker))" }.joined(separator: ", "))
            }
        }
        if let commits = status.commits {
            lines.append(
                "commits   \(commits.count) (latest \(commits.window): p50 \(Int(commits.p50Micros.rounded())) µs, "
                    + "p99 \(Int(commits.p99Micros.rounded())) µs, \(String(format: "%.1f", commits.turnsPerCommit)) turns each"
                    // A commit may hold no turn: only the stored answers of ops that changed nothing or were rejected.
                    + (commits.turnsPerCommit < 1 ? "; some hold no turn, only answers of ops that changed nothing)" : ")"))
        }
        if let replication = status.replication {
            let named = replication.named.isEmpty ? "no standby named" : "named " + replication.named.map(TerminalText.escaped).joined(separator: ", ")
            let standbys = replication.standbys.map { "\(TerminalText.escaped($0.node)) \($0.lag) behind" }
            let state = replication.state == "held" ? "held (no standby: replies wait)" : TerminalText.escaped(replication.state)
            lines.append(
                "standbys  \(state); \(named); \(replication.released) of \(replication.shipped) commits released"
                    + (standbys.isEmpty ? "; none connected" : "; connected: " + standbys.joined(separator: ", ")))
        }
        if let placement = status.placement { lines.append("placement \(TerminalText.escaped(placement))") }
        return lines
    }

    /// A number as JSON: at most three decimals.
    private static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        let rounded = (value * 1_000).rounded() / 1_000
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int64(rounded)) : String(rounded)
    }

    /// The report as one JSON object; its fields are listed in `cogd status --help` and the README, and stay.
    static func jsonText(_ status: LeaderStatus) -> String {
        let timeout = status.heartbeatTimeoutSeconds
        let workers = status.workers.map {
            "{\"name\": \(CBORText.quoted($0.name)), \"appliedRevision\": \($0.appliedRevision), \"lag\": \($0.lag), "
                + "\"secondsSinceHeard\": \(number($0.secondsSinceHeard)), "
                + "\"silent\": \(isSilent($0.secondsSinceHeard, heartbeatTimeout: timeout))"
                + ($0.digest.map { ", \"digest\": \(CBORText.quoted($0))" } ?? "")
                + ($0.group.map { ", \"group\": \(CBORText.quoted($0))" } ?? "")
                + ($0.instances.map { ", \"instances\": \($0)" } ?? "")
                + ($0.roots.map { ", \"roots\": [\($0.map(CBORText.quoted).joined(separator: ", "))]" } ?? "")
                + ($0.tool == true ? ", \"tool\": true" : "")
                + ($0.settings.map { ", \"settings\": [\($0.map(CBORText.quoted).joined(separator: ", "))]" } ?? "") + "}"
        }
        return "{\"version\": \(status.version.map(CBORText.quoted) ?? "null"), "
            + "\"uptimeSeconds\": \(status.uptimeSeconds.map(number) ?? "null"), "
            + "\"heartbeatTimeoutSeconds\": \(number(timeout ?? assumedHeartbeatTimeout)), "
            + "\"epoch\": \(status.epoch), \"revision\": \(status.revision), \"workers\": [\(workers.joined(separator: ", "))], "
            + "\"errors\": {\(status.errorCounts.sorted { $0.key < $1.key }.map { "\(CBORText.quoted($0.key)): \($0.value)" }.joined(separator: ", "))}, "
            + "\"openScopeInstances\": \(status.openScopeInstances)"
            + (status.refusals.map {
                ", \"refusals\": [" + $0.map { "{\"op\": \(CBORText.quoted($0.op)), \"code\": \(CBORText.quoted($0.code)), \"count\": \($0.count)}" }
                    .joined(separator: ", ") + "]"
            } ?? "")
            + (status.replication.map {
                ", \"replication\": {\"state\": \(CBORText.quoted($0.state)), \"named\": [\($0.named.map(CBORText.quoted).joined(separator: ", "))], "
                    + "\"shipped\": \($0.shipped), \"released\": \($0.released), \"standbys\": ["
                    + $0.standbys.map { "{\"node\": \(CBORText.quoted($0.node)), \"lag\": \($0.lag)}" }.joined(separator: ", ") + "]}"
            } ?? "")
            + (status.placement.map { ", \"placement\": \(CBORText.quoted($0))" } ?? "")
            + (status.commits.map {
                ", \"commits\": {\"count\": \($0.count), \"window\": \($0.window), \"p50Micros\": \(Int($0.p50Micros.rounded())), "
                    + "\"p99Micros\": \(Int($0.p99Micros.rounded())), \"turnsPerCommit\": \(($0.turnsPerCommit * 100).rounded() / 100)}"
            } ?? "") + "}"
    }
}
