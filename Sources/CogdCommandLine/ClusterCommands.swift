import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The rigs one executable offers (`--rig`): those given to
/// `CogdCommandLine.main(rigs:)`, in order (the first is the default), then
/// `replica` — every rig's declarations, no mechanisms — unless a given rig
/// has that name. A program built on the runtime's package (the lab,
/// `cogd-lab`) may add a rig its leader serves only with `--trap-op`, and
/// subcommands of its own.
package struct Rigs {
    let all: [CogRig]
    /// Served by the leader only with `--trap-op` (nil: the option is not offered).
    let trap: CogRig?
    /// The program's own subcommands, beside the runtime's.
    let extras: [ExtraSubcommand]

    package init(_ given: [CogRig], trap: CogRig? = nil, extras: [ExtraSubcommand] = []) {
        guard !given.isEmpty else {
            fatalError("CogdCommandLine.main(rigs:) was given no rig; pass at least one (`[MyApp.rig]`)")
        }
        var seen = Set<String>()
        for rig in given where !seen.insert(rig.name).inserted {
            fatalError("two rigs given to CogdCommandLine.main(rigs:) are named `\(rig.name)`; give one of them another name")
        }
        all = given + (seen.contains("replica") ? [] : [CogRig.replica(of: given)])
        self.trap = trap
        self.extras = extras
    }

    var names: [String] { all.map(\.name) }

    /// What `--rig` means when not given.
    var defaultName: String { all[0].name }

    func rig(named name: String) -> CogRig? { all.first { $0.name == name } }
}

/// Turns SIGHUP into a request to read the peers file again.
final class SignalReloader {
    let flag = ReloadFlag()
    private let source: any DispatchSourceSignal

    init() {
        signal(SIGHUP, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { [flag] in flag.request() }
        source.resume()
    }
}

/// Turns SIGINT/SIGTERM into a stop request: the first drains gracefully.
/// A second exits at once with status 1, saying so on stderr as `source`
/// — unless the process says goodbye as it stops (`sayingGoodbye`, a
/// worker): then the second is told the goodbye comes first (it takes at
/// most half a second), and only a third exits at once.
final class SignalStopper {
    let flag = StopFlag()
    private let sources: [any DispatchSourceSignal]

    init(source: String = "\(CogdCommandLine.programName)", sayingGoodbye: Bool = false) {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            sources.append(source)
        }
        self.sources = sources
        let signals = Atomic<Int>(0)
        for signalSource in sources {
            signalSource.setEventHandler { [flag, signalSource] in
                // Signals that came while the handler was busy arrive as one event: counted each.
                let count = signals.add(max(1, Int(clamping: signalSource.data)), ordering: .relaxed).newValue
                if count == 1 {
                    flag.stop()
                } else if count == 2 && sayingGoodbye {
                    printError("\(source): already stopping: saying goodbye to the leader first (a third signal stops at once, exit 1)")
                } else {
                    printError("\(source): stopped at once by another signal, without finishing (exit 1)")
                    exit(1)
                }
            }
            signalSource.resume()
        }
    }
}

enum ClusterCommands {
    @MainActor
    static func leader(_ options: Command.LeaderOptions, rigs: Rigs, notes: [String] = []) -> Int32 {
        let stopper = SignalStopper(source: "\(CogdCommandLine.programName) leader")
        let rigName = options.rig ?? rigs.defaultName
        // Every line it prints is an event of this log (`--log-format json`: only JSON lines).
        let log = OperatorLog(source: "\(CogdCommandLine.programName) leader", format: options.logFormat, minimum: options.logLevel)
        for note in notes { log.log(.info, "environment", note) }
        func fail(_ message: String) -> Int32 {
            log.failure(message)
            return 1
        }
        LeaderHeap.keepBatchBuffers()
        // Without CURVE nothing is authenticated: off this host, anyone who can connect could run ops and read state.
        let exposed = [options.requestsEndpoint, options.turnsEndpoint].filter { !WireEndpoint.isLocal($0) }
        if !exposed.isEmpty && !options.insecure && options.curveSecret == nil {
            return fail(insecureBindRefusal(exposed))
        }
        let notifier = ServiceNotifier()
        // The metrics port first: one in use stops the start before the data folder is touched.
        let metrics: Metrics?
        do {
            metrics = try startMetrics(options.metrics)
        } catch {
            return fail("\(escaped: error)")
        }
        defer { metrics?.server.stop() }
        // With --ha, etcd decides when this node serves, and in which epoch.
        var arbiter: Arbiter?
        var inherited: KeptCommits?
        let stepDown = StepDownNotice()
        if let ha = options.ha {
            switch awaitLead(ha, options: options, log: log, stop: stopper.flag, metrics: metrics?.board, notifier: notifier, stepDown: stepDown) {
            case .lead(_, let leading, let kept):
                arbiter = leading
                inherited = kept
            case .exit(let status): return status
            }
        }
        defer {
            if let arbiter {
                arbiter.resign()
                waitFinished(arbiter)
            }
        }
        let leader: Leader
        // A folder this start makes is removed again when the leader cannot bind (nothing was served from it).
        let folderExisted = FileManager.default.fileExists(atPath: options.dataFolder)
        do {
            // Every rig's ops (a leader hosts no mechanisms); `--trap-op` adds the program's trap rig.
            let trap = options.trapOp ? rigs.trap.map { [$0] } ?? [] : []
            let registry = try OpRegistry(rigs: rigs.all + trap)
            var configuration = Leader.Configuration(
                dataFolder: options.dataFolder, requestsEndpoint: options.requestsEndpoint,
                turnsEndpoint: options.turnsEndpoint, heartbeatTimeout: .milliseconds(Int64(options.heartbeatTimeout * 1_000)),
                commitAffinity: options.commitAffinity, spinWait: .microseconds(options.spinWaitMicroseconds),
                snapshotPartBytes: options.snapshotPartBytes
            ).acceptingDataLoss(options.acceptDataLoss)
            configuration.maximumRecordBytes = options.maximumRecordBytes
            configuration.retention = options.retention
            configuration.snapshotDeadline = .milliseconds(Int64(options.snapshotDeadline * 1_000))
            configuration.operatorLog = log
            configuration.metricsBoard = metrics?.board
            configuration.version = CogdCommandLine.versionIdentity
            if let arbiter {
                configuration.epoch = arbiter.leadingEpoch
                configuration.releaseGate = { arbiter.mayRelease() }
                configuration.extraMetrics = { arbiter.metricFamilies() }
                if let sync = options.ha?.sync {
                    configuration.shipping = Leader.Shipping(
                        rules: ShipCore.Configuration(
                            sync: sync, degradeAfter: options.ha?.degradeAfter, standbyTimeout: options.heartbeatTimeout),
                        syncKey: arbiter, inherited: inherited)
                }
            }
            // A worker whose hello names another rig, or an incompatible version of one, is refused.
            configuration.rigs = rigs.all.map(\.fingerprint)
            if let secret = options.curveSecret, let peers = options.peersFile {
                configuration.authentication = Leader.Authentication(keyPair: try CurveKeyPair.load(secretKeyFile: secret), peersFile: peers)
            }
            leader = try Leader(configuration: configuration, registry: registry)
        } catch let error as TurnStoreError where error.code == .locked {
            return fail("\(escaped: error.message): a leader serves from this folder; stop it first, or use another --data")
        } catch let error as ZMQError where error.operation.hasPrefix("zmq_bind(") {
            let removed = !folderExisted && (try? FileManager.default.removeItem(atPath: options.dataFolder)) != nil
            return fail("\(escaped: bindFailure(error, options, removedFolder: removed))")
        } catch {
            return fail("\(escaped: error)")
        }
        let revisionNumber = OperatorLog.Value.number(Double(leader.lastRevision))
        log.log(
            .info, "serving",
            "data \(escaped: options.dataFolder), requests \(leader.boundRequestsEndpoint), turns \(leader.boundTurnsEndpoint), "
                + "rig \(rigName), epoch \(leader.epoch), revision \(leader.lastRevision), "
                + authenticationDescription(options, leader: leader),
            ["data": .text(options.dataFolder), "requests": .text(leader.boundRequestsEndpoint), "turns": .text(leader.boundTurnsEndpoint),
             "rig": .text(rigName), "epoch": .number(Double(leader.epoch)), "revision": revisionNumber,
             "authentication": .text(leader.configuration.authentication == nil ? (options.insecure ? "insecure" : "loopback") : "curve")])
        if options.heartbeatTimeout < 2 {
            // Workers beat once a second: a timeout that close gives healthy ones up whenever a beat is late.
            log.log(
                .warn, "short-heartbeat-timeout",
                "--heartbeat-timeout \(options.heartbeatTimeout) s leaves no room for a late heartbeat (workers send one a second): "
                    + "healthy workers will be given up now and then; 2 s or more keeps them",
                ["heartbeatTimeoutSeconds": .number(options.heartbeatTimeout)])
        }
        if !folderExisted {
            // A mistyped --data path would otherwise serve an empty log without a word.
            log.log(
                .info, "new-folder", "created data folder \(escaped: options.dataFolder): a new, empty log (--data names an existing log's folder to serve it)",
                ["data": .text(options.dataFolder)])
        }
        log.log(.info, "placement", "\(leader.placement.description)\(leader.spinDescription)")
        log.log(
            .info, "retention",
            "retention \(options.retention)"
                + (options.retention == .everything
                    ? " (--retain-turns N, --retain-age DURATION or --retain-bytes SIZE to remove old ones)"
                    : " (and, whatever the limit, the newest record and those whose applied requests' replies are not indexed yet: "
                        + "up to the last 1,024 applied requests')"
                        + (leader.lastRevision == 0 ? "" : "; revisions kept now: \(leader.firstRevision)…\(leader.lastRevision)")),
            ["firstRevision": .number(Double(leader.firstRevision)), "revision": revisionNumber])
        if options.trapOp, let trap = rigs.trap {
            let names = trap.opNames.joined(separator: ", ")
            log.log(.warn, "trap-op", "serving \(names), an op whose body traps on demand (--trap-op)")
        }
        if let metrics { logMetricsAddress(metrics.server, log) }
        if let crashed = leader.quarantined {
            let why =
                crashed.signalName.map { "the previous leader process died of \($0) while running it" }
                ?? "leader processes were killed from outside twice while running it"
            log.log(
                .warn, "quarantined",
                "quarantined request \(TerminalText.quoted(crashed.request.description)) (op \(TerminalText.quoted(crashed.op))): "
                    + "\(why); its retries are answered rejected(crashed-leader)",
                ["request": .text(crashed.request.description), "op": .text(crashed.op), "signal": .text(crashed.signalName ?? "none")])
        }
        if let spared = leader.spared {
            log.log(
                .warn, "spared",
                "request \(TerminalText.quoted(spared.request.description)) (op \(TerminalText.quoted(spared.op))) was running when the previous "
                    + "leader process was killed from outside (no crash marked it): a retry may run it once more; "
                    + "if the leader dies again while it runs, it is quarantined",
                ["request": .text(spared.request.description), "op": .text(spared.op)])
        }
        // The store is open and both sockets are bound: a service manager may start what depends on the leader.
        if let failure = notifier.notify([
            "READY=1", "STATUS=serving at revision \(leader.lastRevision), epoch \(leader.epoch)", "MAINPID=\(getpid())",
        ]) {
            log.log(.warn, "notify-failed", "could not tell the service manager it is ready: \(escaped: failure)", ["reason": .text("\(failure)")])
        }
        // SIGHUP reads the peers file again.
        let reloader = SignalReloader()
        do {
            try leader.run(until: stopper.flag, reload: reloader.flag) { result in
                switch result {
                case .success(let reload):
                    log.log(
                        .info, "peers-reloaded",
                        "peers file reloaded: \(reload.peers) peer\(reload.peers == 1 ? "" : "s") "
                            + "(\(reload.added) added, \(reload.changed) changed, \(reload.removed) removed)",
                        ["peers": .number(Double(reload.peers)), "added": .number(Double(reload.added)),
                         "changed": .number(Double(reload.changed)), "removed": .number(Double(reload.removed))])
                case .failure(let error):
                    log.log(
                        .error, "peers-reload-failed", "the peers file was not reloaded; the one read before still holds: \(escaped: error)",
                        ["reason": .text("\(error)")])
                }
            }
        } catch {
            if let steppedDown = error as? LeaderSteppedDown, let ha = options.ha {
                stepDown.log(
                    node: ha.node, cluster: ha.cluster,
                    reason: "the lease could not be renewed in time: epoch \(steppedDown.epoch) ended at the local deadline, before etcd can give the leader key to another node",
                    to: log)
                logLastCommit(leader.closeSteppingDown(), to: log)
            } else {
                leader.close()
            }
            return fail("\(escaped: error)")
        }
        notifier.notify(["STOPPING=1"])
        log.log(.info, "stopped", "stopped at revision \(leader.lastRevision)", ["revision": .number(Double(leader.lastRevision))])
        leader.close()
        return 0
    }

    /// What a leader that stepped down did with a last commit that released nothing.
    static func logLastCommit(_ outcome: Leader.LastCommitOnStepDown, to log: OperatorLog) {
        func described(_ commit: ShippedTransaction) -> String {
            commit.lastRevision > commit.revisionBefore
                ? "revision\(commit.lastRevision > commit.revisionBefore + 1 ? "s \(commit.revisionBefore + 1)…" : " ")\(commit.lastRevision)"
                : "answers without a record after revision \(commit.revisionBefore)"
        }
        switch outcome {
        case .released:
            return
        case .takenBack(let commit, let heldBefore):
            let after =
                heldBefore == 0
                ? "where the next leader's log continues it: this node catches up instead of receiving a whole copy"
                : "but the \(heldBefore) commit\(heldBefore == 1 ? "" : "s") before it released nothing either: "
                    + "if the next leader's log lacks them, it sends this node a whole copy"
            log.log(
                .info, "taken-back",
                "took back its last commit (\(described(commit))), which released nothing (no standby's acknowledgement of it had come). The log ends at revision "
                    + "\(commit.revisionBefore) again, \(after)",
                ["revision": .number(Double(commit.revisionBefore)), "takenBack": .number(Double(commit.lastRevision - commit.revisionBefore))])
        case .kept(let commit, let reason):
            log.log(
                .warn, "not-taken-back",
                "kept its last commit (\(described(commit))), which released nothing, so the next leader may send this node a whole copy: "
                    + "\(escaped: reason)",
                ["revision": .number(Double(commit.lastRevision)), "reason": .text(reason)])
        case .acknowledged(let commit):
            log.log(
                .info, "kept-acknowledged",
                "kept its last commit (\(described(commit))): it released nothing, but every standby that may take the lead acknowledged it "
                    + "as this node stepped down, so it is in their logs too",
                ["revision": .number(Double(commit.lastRevision))])
        case .notLast:
            let reason = "the folder's last transaction is not a commit this process shipped"
            log.log(
                .warn, "not-taken-back",
                "kept its last commit, though what it shipped last released nothing, so the next leader may send this node a whole copy: \(reason)",
                ["reason": .text(reason)])
        }
    }

    /// Why `cogd leader` refuses to bind `endpoints` (not on this host) without CURVE or `--insecure`.
    static func insecureBindRefusal(_ endpoints: [String]) -> String {
        "\(CogdCommandLine.programName) leader serves without authentication; binding "
            + endpoints.map { TerminalText.escaped($0) }.joined(separator: " and ")
            + " would let anyone on the network run ops and read state — authenticate with CURVE "
            + "(`cogd keys generate leader`, then --curve-secret leader.key --peers FILE), keep it on loopback, "
            + "or pass --insecure to accept that"
    }

    /// What the leader's first line says about authentication.
    @MainActor
    static func authenticationDescription(_ options: Command.LeaderOptions, leader: Leader) -> String {
        guard let authentication = leader.configuration.authentication else {
            return options.insecure ? "no authentication (--insecure)" : "no authentication: loopback only"
        }
        return "CURVE: authenticates every connection against \(TerminalText.escaped(authentication.peersFile)), "
            + "leader key \(authentication.keyPair.publicKey)"
    }

    @MainActor
    static func worker(_ options: Command.WorkerOptions, rigs: Rigs, notes: [String] = []) async -> Int32 {
        let stopper = SignalStopper(source: "\(CogdCommandLine.programName) worker \(TerminalText.escaped(options.name))", sayingGoodbye: true)
        let rigName = options.rig ?? rigs.defaultName
        guard let rig = rigs.rig(named: rigName) else { fatalError("internal inconsistency: rig \(rigName) passed parsing") }
        let worker: Worker
        let log = OperatorLog(source: "\(CogdCommandLine.programName) worker \(TerminalText.escaped(options.name))", format: options.logFormat, minimum: options.logLevel)
        for note in notes { log.log(.info, "environment", note) }
        // The metrics port first: one in use stops the start before the worker says hello.
        let metrics: Metrics?
        do {
            metrics = try startMetrics(options.metrics)
        } catch {
            log.failure("\(escaped: error)")
            return 1
        }
        defer { metrics?.server.stop() }
        do {
            // A name declared twice is refused here too (the replica applies
            // by name); every rig's declarations are registered (a replica
            // applies every turn the leader logs).
            _ = try OpRegistry(rigs: rigs.all)
            // What the rig reports (`ledger total 100`) is an event of the worker's log too.
            // The real clock; the settings of --settings and --set (checked when they were parsed).
            let host = CogRig.Host(workerName: options.name, clock: ContinuousClock(), settings: options.settings) { line in
                log.log(.info, "rig", TerminalText.escaped(line), ["line": .text(line)])
            }
            var configuration = Worker.Configuration(name: options.name, leaderEndpoint: options.leaderEndpoint, rig: rig.fingerprint)
            configuration.keys = try options.keys?.load()
            // No --group: the rig's name, so the workers of one rig share its work (`cogwire.md` §6a).
            configuration.group = options.group ?? rigName
            // The lease: the leader's heartbeat timeout less its margin (`cogwire.md` §6b).
            configuration.leaderHeartbeatTimeout = .milliseconds(Int64(options.heartbeatTimeout * 1_000))
            // The keys (never the values) go to the leader in the hello: `cogd status` shows them.
            if !options.settings.isEmpty { configuration.settingKeys = options.settings.keys }
            worker = try Worker(configuration: configuration, mechanisms: rig.mechanisms(host))
        } catch {
            log.failure("\(escaped: error)")
            return 1
        }
        // The settings' keys, never their values (a value may be a secret); none: nothing said.
        // One gauge per setting, its key a label and 1 its value (never the value: it may be a secret).
        let settingFamilies = [
            MetricFamily.labelled(
                "cogd_worker_setting_info", .gauge, help: "1 for each app setting this worker was given (--set, --settings); the key only.",
                label: "key", options.settings.keys.map { ($0, 1) })
        ]
        log.log(
            .info, "started",
            "leader \(options.leaderEndpoint), rig \(rigName), group \(TerminalText.escaped(options.group ?? rigName))"
                + (options.settings.isEmpty ? "" : ", settings \(options.settings.keys.joined(separator: ", "))"),
            [
                "leader": .text(options.leaderEndpoint), "rig": .text(rigName), "group": .text(options.group ?? rigName),
                "settings": .text(options.settings.keys.joined(separator: ",")),
            ])
        if let metrics {
            worker.publish(to: metrics.board, adding: settingFamilies)  // ready or not, and why, from the first request on
            logMetricsAddress(metrics.server, log)
        }
        // READY=1 once the worker has said hello and synced the first time (deploy/systemd/cogd-worker@.service).
        let notifier = ServiceNotifier()
        func notify(_ fields: [String]) {
            if let failure = notifier.notify(fields) {
                log.log(.warn, "notify-failed", "could not tell the service manager: \(escaped: failure)", ["reason": .text("\(failure)")])
            }
        }
        notify(["STATUS=saying hello to the leader at \(options.leaderEndpoint)"])
        // What the driver itself observes (the core's events say the rest, `ReplicaCore.Event`).
        var reportedRevision: UInt64?
        var reportedHandshake: HandshakeWatch.Problem?
        var reportedSilence = false
        var reportedSwitches: UInt64 = 0
        var reportedDroppedEvents: UInt64 = 0
        var reportedMalformed: UInt64 = 0
        var lastMalformedLine: ContinuousClock.Instant?
        // Whether --leader was probed for the turn stream (once, before the first sync), and found to be it.
        var probedKind = false
        var wrongEndpoint: EndpointHandshake.WrongEndpoint?
        do {
            try await worker.run(until: stopper.flag) {
                if let metrics { worker.publish(to: metrics.board, adding: settingFamilies) }
                // A leader that is down, or not at that endpoint, says nothing: say so (counted from this
                // process's own return when it was itself stopped: then the leader is not to blame).
                let silence = worker.leaderSilence
                // Nothing heard yet: --leader may be the turn stream, which drops a worker's connection in the
                // handshake (read as silence, or as a handshake failure). Said as `call` and `status` say it; exit 4.
                if !probedKind && !worker.hasHeardFromLeader && (silence >= .seconds(1) || worker.handshakeProblem() != nil) {
                    probedKind = true
                    if let context = try? ZMQContext() {
                        defer { context.close() }
                        let keys = worker.configuration.keys
                        if (try? EndpointHandshake.answersAsOtherKind(options.leaderEndpoint, expected: .requests, curve: keys, context: context)) == true {
                            wrongEndpoint = EndpointHandshake.WrongEndpoint(endpoint: options.leaderEndpoint, expected: .requests)
                            stopper.flag.stop()
                            return
                        }
                    }
                }
                // A refused worker hears little on purpose (a refusal every 5 s): its refusal is what it reports.
                let refused = worker.accessRefused != nil || worker.rigRefused != nil || worker.displaced != nil || reportedHandshake != nil
                if silence >= .seconds(3) && !reportedSilence && !refused {
                    reportedSilence = true
                    log.log(
                        .warn, "leader-silent",
                        "no answer from the leader at \(options.leaderEndpoint) for \(silence.components.seconds) s; "
                            + "still trying (is `cogd leader` running there?)",
                        ["leader": .text(options.leaderEndpoint), "silentSeconds": .number(Double(silence.components.seconds))])
                    notify(["STATUS=no answer from the leader at \(options.leaderEndpoint); still trying"])
                } else if silence < .seconds(3) && reportedSilence {
                    reportedSilence = false
                    log.log(.info, "leader-answers", "the leader answers again", ["leader": .text(options.leaderEndpoint)])
                }
                if worker.leaderSwitches != reportedSwitches {
                    reportedSwitches = worker.leaderSwitches
                    let said = worker.lastNotLeader.map { answer in
                        answer.leader.isEmpty
                            ? " (a standby said no node leads now)"
                            : " (a standby said the node at \(TerminalText.escaped(answer.leader)) leads epoch \(answer.epoch))"
                    } ?? ""
                    let probe = worker.probing ? "; it was silent when last asked, so it is given \(Worker.probeSilence.components.seconds) s to answer" : ""
                    log.log(
                        .info, "leader-switch", "asking the node at \(TerminalText.escaped(worker.currentLeaderEndpoint))\(said)\(probe)",
                        ["leader": .text(worker.currentLeaderEndpoint), "switches": .number(Double(worker.leaderSwitches))])
                }
                let handshake = worker.handshakeProblem()
                if handshake != reportedHandshake {
                    reportedHandshake = handshake
                    if let handshake {
                        log.log(.warn, "handshake-failed", "\(handshake); still trying", ["reason": .text("\(handshake)")])
                        notify(["STATUS=\(handshake)"])
                    } else {
                        log.log(.info, "handshake-accepted", "the leader accepts this key")
                    }
                }
                for event in worker.takeEvents() {
                    // The snapshot's revision is told by its sync: turns applied after it are told next.
                    if case .synced(let sync) = event { reportedRevision = sync.revision }
                    logReplicaEvent(event, worker, log, notify: notify)
                }
                if worker.droppedEvents != reportedDroppedEvents {
                    log.log(
                        .warn, "events-dropped",
                        "\(worker.droppedEvents - reportedDroppedEvents) of the replica's events were not logged (over \(ReplicaCore.maximumEvents) in one pass)",
                        ["count": .number(Double(worker.droppedEvents - reportedDroppedEvents))])
                    reportedDroppedEvents = worker.droppedEvents
                }
                // Every rejection of this worker's own requests, at WARN (`protocol/metrics.md` §5).
                let (rejections, unlogged) = worker.takeRejections()
                for rejection in rejections { logRejection(rejection, log) }
                if unlogged > 0 {
                    log.log(
                        .warn, "requests-rejected",
                        "\(unlogged) more of this worker's requests were rejected since the last pass, not logged one by one "
                            + "(over \(WorkerRejections.reportsKept)); cogd_worker_rejections_total counts every one",
                        ["count": .number(Double(unlogged))])
                }
                if worker.malformedRefusals != reportedMalformed, let refusal = worker.lastMalformedRefusal,
                    lastMalformedLine.map({ ContinuousClock.now - $0 >= .seconds(10) }) ?? true
                {
                    // The leader cannot take what this worker sends: said at once, then at most every 10 s, with the count.
                    let count = worker.malformedRefusals - reportedMalformed
                    reportedMalformed = worker.malformedRefusals
                    lastMalformedLine = .now
                    log.log(
                        .warn, "malformed",
                        "the leader refuses this worker's messages as malformed: \(escaped: refusal.message) "
                            + "(\(count) since the last such line, \(reportedMalformed) in all); "
                            + "what it refused is not done (does the leader run another cogd version?)",
                        ["reason": .text(refusal.message), "count": .number(Double(count)), "total": .number(Double(reportedMalformed))])
                }
                if worker.isSynced && worker.appliedRevision != reportedRevision {
                    reportedRevision = worker.appliedRevision
                    log.log(.debug, "applied", "applied \(worker.appliedRevision)", ["revision": .number(Double(worker.appliedRevision))])
                }
                fflush(nil)
            }
        } catch {
            log.failure("\(escaped: error)")
            worker.close()
            return 1
        }
        if let wrongEndpoint {
            log.failure("\(escaped: wrongEndpoint)")
            worker.close()
            return CallExit.noAnswer
        }
        notify(["STOPPING=1"])
        // A clean stop: the leader drops the name at once (its instances retire now, not at the heartbeat timeout).
        worker.sayGoodbye()
        log.log(.info, "stopped", "stopped at revision \(worker.appliedRevision)", ["revision": .number(Double(worker.appliedRevision))])
        worker.close()
        return 0
    }

    /// What a leader says when it cannot bind one of its endpoints: which
    /// option names it and, when the address is taken, what likely holds it.
    static func bindFailure(_ error: ZMQError, _ options: Command.LeaderOptions, removedFolder: Bool) -> String {
        let endpoint = String(error.operation.dropFirst("zmq_bind(".count).dropLast())
        let option = endpoint == options.turnsEndpoint && endpoint != options.requestsEndpoint ? "--turns" : "--requests"
        let removed = removedFolder ? " (the data folder \(options.dataFolder) this start had made was removed)" : ""
        guard error.code == EADDRINUSE else {
            return "cannot listen on \(endpoint) (\(option)): \(error.message)\(removed)"
        }
        // Only the requests endpoint answers `status`.
        let ask = option == "--requests" ? " (`\(CogdCommandLine.programName) status --leader \(endpoint)` asks it)" : ""
        return "cannot listen on \(endpoint) (\(option)): something already listens there, likely another leader\(ask); "
            + "stop it, or give \(option) another endpoint\(removed)"
    }

    /// Sends one request to the leader and waits (bounded) for the answer;
    /// a refused security handshake is thrown at once (`HandshakeRefused`),
    /// an endpoint that is a turn stream as `EndpointHandshake.WrongEndpoint`.
    static func request(
        _ message: WireMessage, leader endpoint: String, timeout: Duration, keys: Command.ClientKeyFiles? = nil
    ) throws -> WireMessage? {
        try request(leader: endpoint, timeout: timeout, keys: keys, introducing: nil) { _ in message }
    }

    /// `request`, the message built from what the leader knows of `name`
    /// when given: the connection first says hello as a tool under it (the
    /// message is built from the welcome's `lastSequence`, the highest
    /// request sequence the leader answered in that name) and says goodbye as
    /// it closes. A hello refused `name-in-use` is said again until the
    /// timeout only while the leader's status lists the name as a tool's
    /// (another call under the name holds it for a moment); a live worker's
    /// name, and any other refusal, is the answer at once.
    ///
    /// `list` may name several nodes of an HA cluster (`ha.md` §10): a
    /// standby's `not-leader` sends the request to the node it names, and
    /// silence to the next one, until the timeout. The message is built
    /// once: a retry elsewhere carries the same request id.
    static func request(
        leader list: String, timeout: Duration, keys: Command.ClientKeyFiles?, introducing name: String?,
        _ build: (_ lastSequence: UInt64) -> WireMessage
    ) throws -> WireMessage? {
        var built: WireMessage?
        return try following(list, timeout: timeout) { endpoint, budget in
            let answer = try requestOne(leader: endpoint, timeout: budget, keys: keys, introducing: name) { lastSequence in
                if let built { return built }
                let message = build(lastSequence)
                built = message
                return message
            }
            if case .notLeader(let leader, let epoch)? = answer { throw StandbyAnswered(endpoint: endpoint, leader: leader, epoch: epoch) }
            return answer
        }
    }

    /// A node answered `not-leader` (`ha.md` §10): it is a standby.
    struct StandbyAnswered: Error, CustomStringConvertible {
        let endpoint: String
        /// The leader's requests endpoint as etcd holds it (empty: no node leads), and its epoch.
        let leader: String
        let epoch: UInt64

        var description: String {
            let node = "the node at \(TerminalText.escaped(endpoint)) is a standby"
            guard !leader.isEmpty else { return "\(node), and no node of its cluster leads now (a failover under way?): try again shortly" }
            return "\(node): the node at \(TerminalText.escaped(leader)) leads epoch \(epoch); ask it, or list every node in --leader (A,B)"
        }
    }

    /// No node that `asked` names led within the timeout: the last standby's answer says why.
    struct NoNodeLeads: Error, CustomStringConvertible {
        let asked: [String]
        let last: StandbyAnswered

        var description: String {
            "no node leads: asked \(asked.map { TerminalText.escaped($0) }.joined(separator: ", ")); the last answer: \(last)"
        }
    }

    /// Runs `attempt` against the nodes `list` names until one answers
    /// (non-nil) or the timeout passes. A `not-leader` goes to the node it
    /// names next (added to the nodes tried, at most `maximumLeaderEndpoints`);
    /// silence, or a node that completes no handshake, to the next one. One
    /// node and no standby on the way: a single attempt, as without HA.
    static func following<T>(
        _ list: String, timeout: Duration, _ attempt: (_ endpoint: String, _ budget: Duration) throws -> T?
    ) throws -> T? {
        var endpoints = Worker.endpoints(list)
        if endpoints.isEmpty { endpoints = [list] }
        let deadline = ContinuousClock.now + timeout
        var index = 0
        var lastStandby: StandbyAnswered?
        var attempts = 0
        // Bounded: every attempt takes time or sleeps, and all end by the deadline.
        while ContinuousClock.now < deadline {
            let remaining = deadline - ContinuousClock.now
            // Alone, a node gets the whole wait (the first time exactly the timeout, as it is named); among several, a share (at least a second).
            let budget =
                endpoints.count == 1
                ? (attempts == 0 ? timeout : remaining) : min(remaining, max(.seconds(1), timeout / (2 * endpoints.count)))
            attempts += 1
            let endpoint = endpoints[index]
            do {
                if let answer = try attempt(endpoint, budget) { return answer }
                guard endpoints.count > 1 else { return nil }
                index = (index + 1) % endpoints.count
            } catch let standby as StandbyAnswered {
                lastStandby = standby
                if !standby.leader.isEmpty, !standby.leader.contains("*"), !endpoints.contains(standby.leader),
                    endpoints.count < Command.maximumLeaderEndpoints,
                    (try? Command.endpoint(standby.leader, from: "not-leader", subcommand: nil)) != nil
                {
                    endpoints.append(standby.leader)
                }
                if let named = endpoints.firstIndex(of: standby.leader), named != index {
                    index = named
                } else {
                    // No leader yet (or only this node named): wait a little before asking round again.
                    index = (index + 1) % endpoints.count
                    usleep(200_000)
                }
            } catch is EndpointHandshake.NotALeader where endpoints.count > 1 {
                index = (index + 1) % endpoints.count
            }
        }
        if let lastStandby {
            if endpoints.count == 1 { throw lastStandby }
            throw NoNodeLeads(asked: endpoints, last: lastStandby)
        }
        return nil
    }

    static func requestOne(
        leader endpoint: String, timeout: Duration, keys: Command.ClientKeyFiles?, introducing name: String?,
        _ build: (_ lastSequence: UInt64) -> WireMessage
    ) throws -> WireMessage? {
        let curve = try keys?.load()
        let context = try ZMQContext()
        defer { context.close() }
        let socket = try ZMQSocket(context, .dealer, linger: .zero)
        defer { socket.close() }
        try socket.setIdentity("cogd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try socket.useCurve(curve)
        var handshakes = try EndpointHandshake(socket, context: context, endpoint: endpoint, expected: .requests, curve: curve, timeout: timeout)
        defer { handshakes.close() }
        try socket.connect(endpoint)
        let deadline = ContinuousClock.now + timeout
        /// The leader's next message (past welcomes, when `skippingWelcomes`); nil at the deadline.
        func next(skippingWelcomes: Bool) throws -> WireMessage? {
            while ContinuousClock.now < deadline {
                let remaining = deadline - ContinuousClock.now
                if try ZMQSocket.poll([socket], timeout: min(remaining, .milliseconds(20)))[0],
                    let frames = try socket.receive(), let frame = frames.last
                {
                    let message = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
                    // A welcome probes whether the name's holder is still there (`cogwire.md` §6).
                    if skippingWelcomes, case .welcome? = message { continue }
                    return message
                }
                try handshakes.check()
            }
            try handshakes.checkSilence()
            return nil
        }
        /// Whether the leader's status lists `name` as a tool's (or no longer
        /// lists it: the holder just left); false when a worker holds it or
        /// the status does not come.
        func heldByTool(_ name: String) throws -> Bool {
            guard try handshakes.send(WireMessage.statusRequest.encoded(), on: socket, within: deadline - ContinuousClock.now) else { return false }
            while let message = try next(skippingWelcomes: true) {
                guard case .status(let status) = message else { continue }
                return status.workers.first { $0.name == name }.map { $0.tool == true } ?? true
            }
            return false
        }
        var lastSequence: UInt64 = 0
        if let name {
            let hello = WireMessage.hello(worker: name, lastRevision: 0, tool: true).encoded()
            while true {
                guard try handshakes.send(hello, on: socket, within: deadline - ContinuousClock.now),
                    let answer = try next(skippingWelcomes: false)
                else { return nil }
                if case .welcome(_, _, _, let last, _) = answer {
                    lastSequence = last
                    break
                }
                guard case .error(let error) = answer, error.code == .nameInUse,
                    ContinuousClock.now + .milliseconds(100) < deadline
                else { return answer }
                // A live worker keeps its name: refused at once. Only another tool (a call in flight) lets it go soon.
                guard try heldByTool(name) else { return answer }
                usleep(100_000)
            }
        }
        defer { if let name { socket.sayGoodbye(as: name) } }
        guard try handshakes.send(build(lastSequence).encoded(), on: socket, within: deadline - ContinuousClock.now) else { return nil }
        return try next(skippingWelcomes: name != nil)
    }

    /// The leader at `endpoint` refused the connection's security handshake.
    struct HandshakeRefused: Error, CustomStringConvertible {
        let endpoint: String
        let problem: HandshakeWatch.Problem
        /// Whether this side gave no keys: then no key given is to blame.
        var withoutKeys = false
        /// What the endpoint's ZeroMQ greeting showed, when it was read (a connection closed in the handshake).
        var peer: GreetingProbe.Peer?

        /// Why, naming the endpoint as `what` (the leader, its turn stream).
        func described(as what: String) -> String {
            let keys = "(--key and --leader-key, or COGD_KEY and COGD_LEADER_KEY)"
            switch problem {
            case .noDetail where peer == .zeroMQ(mechanism: "CURVE") && !withoutKeys:
                return "the \(what) at \(TerminalText.escaped(endpoint)) authenticates with CURVE and closed the handshake: "
                    + "its key is not the one given (--leader-key, or COGD_LEADER_KEY)"
            case .noDetail where peer == .zeroMQ(mechanism: "NULL") && withoutKeys:
                return "something at \(TerminalText.escaped(endpoint)) speaks ZeroMQ without CURVE and closed the connection in the handshake: "
                    + "it is not a cogd leader's \(what == "leader" ? "requests endpoint" : what)"
            case .noDetail:
                // Anything that accepts a connection and closes it looks the same from here: both are named.
                return "something at \(TerminalText.escaped(endpoint)) closed the connection during the ZeroMQ handshake: it is not a cogd leader, "
                    + (withoutKeys
                        ? "or it is one that authenticates with CURVE and this side has no key \(keys)"
                        : "or it is one whose key is not the one given (--leader-key, or COGD_LEADER_KEY)")
            case .mechanismMismatch where withoutKeys:
                return "the \(what) at \(TerminalText.escaped(endpoint)) authenticates with CURVE and this side has no key \(keys)"
            case .mechanismMismatch:
                return "the \(what) at \(TerminalText.escaped(endpoint)) does not use CURVE: leave out the keys \(keys)"
            default:
                return "\(problem) (\(what) at \(TerminalText.escaped(endpoint)))"
            }
        }

        var description: String { described(as: "leader") }
    }

    /// `cogd call`'s exit statuses (documented in its help and the README).
    enum CallExit {
        static let applied: Int32 = 0
        static let unchanged: Int32 = 0
        /// The leader refused the request itself (an `error` answer), or another runtime failure.
        static let failed: Int32 = 1
        static let rejected: Int32 = 3
        static let noAnswer: Int32 = 4
    }

    /// What `call` and `status` say when nothing answers within `timeout`.
    static func noAnswer(from endpoint: String, within timeout: Duration) -> String {
        "Error: no answer from the leader at \(TerminalText.escaped(endpoint)) within \(Command.secondsText(timeout)) s: "
            + "is `\(CogdCommandLine.programName) leader` running there? (a slow leader: --timeout SECONDS)"
    }

    /// The name a call without `--request-id` sends in: `--name`, or with
    /// keys the key file's name (as a peers file lists it); nil: a name of
    /// its own, once (`call-` and a UUID, sequence 1). Under a name the
    /// request is numbered one above the highest sequence the leader
    /// answered in it (`request(introducing:)`): `ranger#1`, `ranger#2`, …
    /// across runs and leader restarts (the `dedup` table keeps it).
    static func callName(_ options: Command.CallOptions) -> String? {
        options.name ?? options.keys.map { keyFileName($0.key) }
    }

    /// `NAME` of a key file `…/NAME.key` (the name `cogd keys generate NAME` gave it).
    static func keyFileName(_ path: String) -> String {
        let file = path.split(separator: "/").last.map(String.init) ?? path
        return file.hasSuffix(".key") && file.count > 4 ? String(file.dropLast(4)) : file
    }

    /// A metrics board and its HTTP server.
    typealias Metrics = (board: MetricsBoard, server: MetricsServer)

    /// The board and its server on `address` (nil without one), bound before
    /// anything else starts, so a port in use stops the start first.
    static func startMetrics(_ address: String?) throws -> Metrics? {
        guard let address else { return nil }
        let board = MetricsBoard()
        return (board, try MetricsServer(address: address, board: board))
    }

    /// The line (or lines) for one of the replica core's events
    /// (`protocol/metrics.md` §5, the worker's lines), and what the service
    /// manager is told with it (`READY=1` at the first sync).
    @MainActor
    static func logReplicaEvent(_ event: ReplicaCore.Event, _ worker: Worker, _ log: OperatorLog, notify: ([String]) -> Void) {
        switch event {
        case .nameRefused(let refusal):
            log.log(
                .warn, "name-refused", "the leader refuses this name: \(escaped: refusal.message); saying hello again after 0.5 s, 1 s, 2 s, 4 s, "
                    + "then every 5 s until it is free",
                ["reason": .text(refusal.message)])
        case .nameFree:
            log.log(.info, "name-free", "the name is free; this process holds it now")
        case .keyRefused(let refusal):
            log.log(
                .warn, "key-refused",
                "the leader refuses this key: \(escaped: refusal.message); "
                    + "saying hello every \(ReplicaCore.rigRetryInterval.components.seconds) s until its peers file allows it",
                ["reason": .text(refusal.message)])
        case .keyAccepted:
            log.log(.info, "key-accepted", "the leader accepts this key and name")
        case .rigRefused(let refusal):
            log.log(
                .warn, "rig-refused",
                "the leader refuses this worker's rig: \(escaped: refusal.message); "
                    + "saying hello every \(ReplicaCore.rigRetryInterval.components.seconds) s until it serves a compatible one",
                ["reason": .text(refusal.message)])
        case .rigAccepted:
            log.log(.info, "rig-accepted", "the leader accepts this worker's rig")
        case .startedOver(let startOver):
            // revision-ahead: the leader's log holds less than the replica (its folder went back or was replaced).
            log.log(
                .warn, "revision-ahead",
                "the leader's log is behind this replica (its data folder went back, or is another one): "
                    + "discarded the replica at revision \(startOver.discardedRevision)"
                    + (startOver.discardedEpoch.map { ", epoch \($0)" } ?? "")
                    + "; syncing again from the leader's state (the leader says: \(escaped: startOver.reason))",
                ["discardedRevision": .number(Double(startOver.discardedRevision)),
                 "discardedEpoch": .number(Double(startOver.discardedEpoch ?? 0)), "reason": .text(startOver.reason)])
        case .synced(let sync):
            let revision = OperatorLog.Value.number(Double(sync.revision))
            guard sync.first || sync.newEpoch || sync.startedOverFrom != nil else {
                if sync.afterCompaction {
                    // A catch-up the leader could not serve (its retention removed those turns), then a snapshot.
                    log.log(
                        .info, "resynced",
                        "the turns it lacked are no longer in the leader's log (retention); re-synced from a snapshot at revision \(sync.revision)",
                        ["revision": revision])
                }
                return
            }
            let event = sync.first ? "synced" : "resynced"
            let synced = "synced at revision \(sync.revision), epoch \(sync.epoch)" + (sync.parts > 1 ? " (snapshot in \(sync.parts) parts)" : "")
            let epoch = OperatorLog.Value.number(Double(sync.epoch))
            let parts = OperatorLog.Value.number(Double(sync.parts))
            if let startedOver = sync.startedOverFrom {
                log.log(
                    .info, event, synced + "; started over: revision \(startedOver) was discarded",
                    ["revision": revision, "epoch": epoch, "parts": parts, "discardedRevision": .number(Double(startedOver))])
            } else {
                log.log(.info, event, synced, ["revision": revision, "epoch": epoch, "parts": parts])
            }
            notify((sync.first ? ["READY=1", "MAINPID=\(getpid())"] : []) + ["STATUS=synced at revision \(sync.revision), epoch \(sync.epoch)"])
        case .givenUp(let refusal):
            // `gone`: the leader heard nothing from this worker past its heartbeat timeout and retired its instances.
            let stall = worker.lastStall.flatMap { ContinuousClock.now - $0.endedAt < .seconds(10) ? $0.duration : nil }
                .map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
            var cause = "it heard no heartbeat from this worker past its heartbeat timeout (the network, or the leader, held them up)"
            if let stall {
                cause =
                    "this process itself was paused for \(String(format: "%.1f", stall)) s (stopped, suspended or starved: its own "
                    + "clock jumped), so it sent no heartbeat past the leader's heartbeat timeout"
            }
            let reason = OperatorLog.Value.text(refusal.message)
            let message: String =
                "the leader gave this worker up: \(cause); it retired this worker's scope instances. Rejoining: saying hello, "
                + "then registering the scopes anew (their children's requests wait for new instances)"
            if let stall {
                log.log(.warn, "given-up", message, ["reason": reason, "pausedSeconds": .number(stall)])
            } else {
                log.log(.warn, "given-up", message, ["reason": reason])
            }
        case .rejoined(let revision):
            log.log(.info, "rejoined", "rejoined the leader at revision \(revision); the scopes register anew")
        case .leaseExpired(let expiries):
            let lease = worker.lease.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 } ?? 0
            log.log(
                .warn, "lease-expired",
                "no welcome from the leader for \(String(format: "%.1f", lease)) s (its heartbeat timeout less the margin): the instances placed here "
                    + "stop their tasks and reactions until the leader answers again, before it may move them to another worker",
                ["leaseSeconds": .number(lease), "expiries": .number(Double(expiries))])
        case .leaseRenewed(let renewals):
            log.log(
                .info, "lease-renewed",
                "the leader answers again: the instances still placed here start their tasks and reactions again",
                ["renewals": .number(Double(renewals))])
        case .digestMismatch(let detail, let count):
            log.log(.error, "digest-mismatch", "\(escaped: detail) (\(count) so far)", ["detail": .text(detail), "count": .number(Double(count))])
        }
    }

    /// One line for a rejection of the worker's own request: the op, the
    /// scope instance that sent it, the code and the detail (the leader's
    /// text, escaped), and the request id.
    static func logRejection(_ rejection: WorkerRejections.Rejection, _ log: OperatorLog) {
        guard log.enabled(.warn) else { return }
        let op = rejection.op.isEmpty ? "an op no longer remembered" : "op `\(TerminalText.escaped(rejection.op))`"
        var from: [String] = []
        if let turn = rejection.turnName, turn != rejection.op { from.append("turn \(TerminalText.escaped(turn))") }
        if let instance = rejection.instance { from.append("scope instance \(instance)") }
        let source = from.isEmpty ? "" : " (\(from.joined(separator: ", ")))"
        let earlier = rejection.earlier ? " (answered from an earlier request)" : ""
        let message =
            "\(op)\(source) was \(rejection.refused ? "refused" : "rejected") \(TerminalText.escaped(rejection.code)): \(TerminalText.escaped(rejection.detail))\(earlier); "
            + "request \(TerminalText.escaped(rejection.request.description))"
        let request = OperatorLog.Value.text(rejection.request.description)
        let turn = OperatorLog.Value.text(rejection.turnName ?? rejection.op)
        if let instance = rejection.instance {
            log.log(
                .warn, rejection.refused ? "request-refused" : "request-rejected", message,
                ["request": request, "op": .text(rejection.op), "turn": turn, "instance": .text(String(instance)), "code": .text(rejection.code),
                 "detail": .text(rejection.detail)])
        } else {
            log.log(
                .warn, rejection.refused ? "request-refused" : "request-rejected", message,
                ["request": request, "op": .text(rejection.op), "turn": turn, "code": .text(rejection.code), "detail": .text(rejection.detail)])
        }
    }

    static func logMetricsAddress(_ server: MetricsServer, _ log: OperatorLog) {
        log.log(
            .info, "metrics", "metrics at http://\(server.boundAddress)/metrics (and /healthz, /readyz)",
            ["address": .text(server.boundAddress)])
    }

    static func call(_ options: Command.CallOptions, rigs: Rigs) -> Int32 {
        let argument: [UInt8]
        do {
            // CBORValue decodes from any decoder, JSON included.
            argument = try JSONDecoder().decode(CBORValue.self, from: Data(options.json.utf8)).encodedBytes
        } catch {
            printError("Error: \(escaped: CallArgument.refusal(of: options.json) ?? "the argument is not JSON: \(error)")")
            return 64
        }
        // Without a name, one of its own per call: a process id comes back
        // after a while, and a reused (name, 1) would be answered from the
        // dedup table with an earlier call's reply instead of being run.
        let name = options.requestID == nil ? callName(options) : nil
        var sent: RequestID?
        /// Sent and unanswered, it may yet be applied: its id learns the outcome without running it twice.
        func retryHint(_ sent: RequestID?) -> String {
            sent.map {
                " — the request \(TerminalText.escaped($0.description)) was sent: the same call with --request-id "
                    + "\(TerminalText.escaped($0.description)) learns what became of it and runs it at most once"
            } ?? ""
        }
        do {
            guard
                let answer = try request(leader: options.leaderEndpoint, timeout: options.timeout, keys: options.keys, introducing: name, {
                    lastSequence in
                    let id =
                        // (Capped: a welcome claiming the last sequence or beyond gets 2^63, which the leader refuses by name, never a trap here.)
                        options.requestID ?? name.map { RequestID(worker: $0, sequence: min(lastSequence, LeaderCore.sequenceLimit - 1) + 1) }
                        ?? RequestID(worker: "call-\(UUID().uuidString.lowercased())", sequence: 1)
                    if name != nil { sent = id }  // the leader welcomed the name: it is there
                    return .op(OpRequest(request: id, op: options.op, argument: argument))
                })
            else {
                let retry = retryHint(sent)
                printError(noAnswer(from: options.leaderEndpoint, within: options.timeout) + retry)
                return CallExit.noAnswer
            }
            switch answer {
            case .reply(let reply) where options.printsJSON:
                print(CallAnswer(reply).json)
                switch reply.outcome {
                case .applied: return CallExit.applied
                case .unchanged: return CallExit.unchanged
                case .rejected, .refused: return CallExit.rejected
                }
            case .reply(let reply):
                // A retry answered from dedup says so: nothing ran now (cogwire §4).
                let earlier = reply.earlier == true ? "answered from an earlier request: " : ""
                switch reply.outcome {
                case .applied(let revision):
                    print(
                        earlier.isEmpty
                            ? "applied revision \(revision) (request \(escaped: reply.request))"
                            : "\(earlier)applied at revision \(revision) (request \(escaped: reply.request))")
                    return CallExit.applied
                case .unchanged:
                    print("\(earlier)unchanged: the op wrote nothing, so no new revision (request \(escaped: reply.request))")
                    return CallExit.unchanged
                case .rejected(let code, let detail):
                    printError(
                        "\(earlier)rejected: \(escaped: reply.outcome.reason ?? detail) (request \(escaped: reply.request))\(unknownOpHint(code, op: options.op, rigs: rigs))")
                    return CallExit.rejected
                case .refused(let code, let reason):
                    // The op's body said no: a code its app chose, a reason for a person; nothing was kept.
                    printError("\(earlier)refused \(escaped: code): \(escaped: reason) (request \(escaped: reply.request))")
                    return CallExit.rejected
                }
            case .error(let error):
                // Refused at once: a worker's name is not the call's to wait for.
                let hint =
                    error.code == .nameInUse && name != nil
                    ? " (a running worker holds that name: give the call a name of its own, or leave out --name)" : ""
                printError("Error: the leader refused the request: \(escaped: error)\(hint)")
                return CallExit.failed
            default:
                printError("Error: unexpected answer `\(answer.typeName)`")
                return CallExit.failed
            }
        } catch let wrong as EndpointHandshake.WrongEndpoint {
            printError("Error: \(escaped: wrong.from(options.leaderSource))")
            return CallExit.noAnswer
        } catch let none as EndpointHandshake.NotALeader {
            printError("Error: \(none)")
            return CallExit.noAnswer
        } catch let standby as StandbyAnswered {
            printError("Error: \(standby)")
            return CallExit.noAnswer
        } catch let none as NoNodeLeads {
            let retry = retryHint(sent)
            printError("Error: \(none)\(retry)")
            return CallExit.noAnswer
        } catch {
            printError("Error: \(escaped: error)")
            return CallExit.failed
        }
    }

    /// The next step after an `unknown-op` rejection: where ops are listed
    /// (empty for any other code).
    static func unknownOpHint(_ code: CogdCode, op: String, rigs: Rigs) -> String {
        guard code == .unknownOp else { return "" }
        let program = CogdCommandLine.programName
        if rigs.trap?.opNames.contains(op) == true {
            return " (`\(program) ops` lists \(op) as served only by a leader started with `\(program) leader --trap-op`)"
        }
        return " (`\(program) ops` lists the ops this \(program) serves)"
    }

    static func status(
        leader endpoint: String, json: Bool, timeout: Duration, keys: Command.ClientKeyFiles? = nil, watch: Duration? = nil, count: Int? = nil,
        source: String = "--leader"
    ) -> Int32 {
        StatusCommand.run(leader: endpoint, json: json, timeout: timeout, keys: keys, watch: watch, count: count, source: source)
    }
}

extension Leader.Configuration {
    /// The configuration with `acceptDataLoss` set.
    func acceptingDataLoss(_ accept: Bool) -> Leader.Configuration {
        var configuration = self
        configuration.acceptDataLoss = accept
        return configuration
    }
}

/// `cogd call --json`: the answer as one JSON object (keys sorted).
struct CallAnswer: Encodable {
    var request: String
    var outcome: String
    var revision: UInt64?
    var code: String?
    var detail: String?
    /// A refusal's reason (its code is `code`).
    var reason: String?
    /// True when the leader answered from an earlier request with this id (nothing ran now).
    var earlier: Bool

    init(_ reply: OpReply) {
        request = reply.request.description
        earlier = reply.earlier == true
        switch reply.outcome {
        case .applied(let revision):
            outcome = "applied"
            self.revision = revision
        case .unchanged:
            outcome = "unchanged"
        case .rejected(let code, let detail):
            outcome = "rejected"
            self.code = code.text
            self.detail = detail
        case .refused(let code, let reason):
            outcome = "refused"
            self.code = code
            self.reason = reason
        }
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and numbers only: encoding cannot fail.
        guard let data = try? encoder.encode(self), let text = String(data: data, encoding: .utf8) else {
            fatalError("internal inconsistency: a call's answer did not encode as JSON")
        }
        return text
    }
}
