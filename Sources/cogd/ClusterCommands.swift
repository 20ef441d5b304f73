import Cog
import CogCluster
import CogLog
import CogWire
import Dispatch
import Foundation
import LedgerRig
import TrailsRig

#if canImport(Glibc)
    import Glibc
#endif

/// The rigs `cogd` can run (`--rig`).
enum Rigs {
    static let names = ["trails", "ledger", "ledger-greeter", "ledger-peers", "ledger-concierge", "replica"]

    /// Registers every rig's declarations (a leader serves them all: it
    /// hosts no mechanisms, and their durable names do not overlap).
    @MainActor
    static func registerAll() {
        TrailsRig.register()
        LedgerRig.register()
    }

    /// Registers every rig's declarations (a replica applies every turn the
    /// leader logs) and returns the worker mechanisms of the chosen one.
    @MainActor
    static func prepare(_ name: String) -> [any Mechanism] {
        registerAll()
        switch name {
        case "trails":
            return TrailsRig.mechanisms()
        case "replica":
            return []
        case "ledger", "ledger-greeter", "ledger-peers", "ledger-concierge":
            return LedgerRig.mechanisms(
                greeter: name == "ledger-greeter", peers: name == "ledger-peers", concierge: name == "ledger-concierge"
            ) { total in
                print("ledger total \(total)")
            }
        default:
            fatalError("internal inconsistency: rig \(name) passed parsing")
        }
    }
}

/// Turns SIGINT/SIGTERM into a stop request: the first drains gracefully,
/// a second exits at once with status 1.
final class SignalStopper {
    let flag = StopFlag()
    private let sources: [any DispatchSourceSignal]

    init() {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            sources.append(source)
        }
        self.sources = sources
        for source in sources {
            source.setEventHandler { [flag] in
                if flag.isStopped { exit(1) }
                flag.stop()
            }
            source.resume()
        }
    }
}

enum ClusterCommands {
    @MainActor
    static func leader(_ options: Command.LeaderOptions) -> Int32 {
        let stopper = SignalStopper()
        Rigs.registerAll()
        if options.trapOp { LedgerRig.registerTrapOp() }
        let leader: Leader
        do {
            var configuration = Leader.Configuration(
                dataFolder: options.dataFolder, requestsEndpoint: options.requestsEndpoint,
                turnsEndpoint: options.turnsEndpoint, heartbeatTimeout: .milliseconds(Int64(options.heartbeatTimeout * 1_000)),
                commitAffinity: options.commitAffinity, spinWait: .microseconds(options.spinWaitMicroseconds),
                snapshotPartBytes: options.snapshotPartBytes
            ).acceptingDataLoss(options.acceptDataLoss)
            configuration.maximumRecordBytes = options.maximumRecordBytes
            configuration.snapshotDeadline = .milliseconds(Int64(options.snapshotDeadline * 1_000))
            leader = try Leader(configuration: configuration)
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
        print(
            "cogd leader: data \(options.dataFolder), requests \(leader.boundRequestsEndpoint), turns \(leader.boundTurnsEndpoint), "
                + "rig \(options.rig), epoch \(leader.epoch), revision \(leader.lastRevision)")
        print("cogd leader: \(leader.placement.description)\(leader.spinDescription)")
        if options.trapOp { print("cogd leader: serving ledger.trap, an op whose body traps on demand (--trap-op)") }
        if let crashed = leader.quarantined {
            printError(
                "cogd leader: quarantined request \(TerminalText.quoted(crashed.request.description)) (op \(TerminalText.quoted(crashed.op))): "
                    + "the previous leader process stopped while running it; its retries are answered rejected(crashed-leader)")
        }
        fflush(nil)
        do {
            try leader.run(until: stopper.flag)
        } catch {
            printError("Error: \(escaped: error)")
            leader.close()
            return 1
        }
        print("cogd leader: stopped at revision \(leader.lastRevision)")
        leader.close()
        return 0
    }

    @MainActor
    static func worker(_ options: Command.WorkerOptions) async -> Int32 {
        let stopper = SignalStopper()
        let mechanisms = Rigs.prepare(options.rig)
        let worker: Worker
        do {
            // A name declared twice is refused here too (the replica applies by name).
            _ = try OpRegistry.declared()
            worker = try Worker(
                configuration: .init(name: options.name, leaderEndpoint: options.leaderEndpoint), mechanisms: mechanisms)
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
        // The name is the operator's, but it is also what the leader and `status` show: print it as they do.
        let name = TerminalText.escaped(options.name)
        print("cogd worker \(name): leader \(options.leaderEndpoint), rig \(options.rig)")
        fflush(nil)
        var reportedEpoch: UInt64?
        var reportedRevision: UInt64 = 0
        var reportedDisplaced = false
        var reportedSilence = false
        var reportedMismatches = 0
        do {
            try await worker.run(until: stopper.flag) {
                // A leader that is down, or not at that endpoint, says nothing: say so.
                let silence = ContinuousClock.now - worker.lastHeardFromLeader
                if silence >= .seconds(3) && !reportedSilence {
                    reportedSilence = true
                    printError(
                        "cogd worker \(name): no answer from the leader at \(options.leaderEndpoint) for \(silence.components.seconds) s; "
                            + "still trying (is `cogd leader` running there?)")
                } else if silence < .seconds(3) && reportedSilence {
                    reportedSilence = false
                    print("cogd worker \(name): the leader answers again")
                }
                if (worker.displaced != nil) != reportedDisplaced {
                    reportedDisplaced = worker.displaced != nil
                    if let refusal = worker.displaced {
                        printError("cogd worker \(name): the leader refuses this name: \(escaped: refusal.message); retrying until it is free")
                    } else {
                        print("cogd worker \(name): the name is free; this process holds it now")
                    }
                }
                if worker.isSynced && worker.syncedEpoch != reportedEpoch {
                    // The snapshot's revision: turns applied after it in the same pass are reported next.
                    reportedEpoch = worker.syncedEpoch
                    reportedRevision = worker.syncedRevision
                    print(
                        "cogd worker \(name): synced at revision \(worker.syncedRevision), epoch \(worker.syncedEpoch ?? 0)"
                            + (worker.syncedParts > 1 ? " (snapshot in \(worker.syncedParts) parts)" : ""))
                }
                if worker.digestMismatches != reportedMismatches {
                    reportedMismatches = worker.digestMismatches
                    printError("cogd worker \(name): \(escaped: worker.lastDigestMismatch ?? "state digest mismatch") (\(reportedMismatches) so far)")
                }
                if worker.appliedRevision != reportedRevision && reportedEpoch != nil {
                    reportedRevision = worker.appliedRevision
                    print("cogd worker \(name): applied \(reportedRevision)")
                }
                fflush(nil)
            }
        } catch {
            printError("Error: \(escaped: error)")
            worker.close()
            return 1
        }
        print("cogd worker \(name): stopped at revision \(worker.appliedRevision)")
        worker.close()
        return 0
    }

    /// Sends one request to the leader and waits (bounded) for the answer.
    static func request(_ message: WireMessage, leader endpoint: String, timeout: Duration) throws -> WireMessage? {
        let context = try ZMQContext()
        defer { context.close() }
        let socket = try ZMQSocket(context, .dealer, linger: .zero)
        defer { socket.close() }
        try socket.setIdentity("cogd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try socket.connect(endpoint)
        try socket.send([message.encoded()])
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let remaining = deadline - ContinuousClock.now
            if try ZMQSocket.poll([socket], timeout: min(remaining, .milliseconds(100)))[0],
                let frames = try socket.receive(), let frame = frames.last
            {
                return try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
            }
        }
        return nil
    }

    static func call(_ options: Command.CallOptions) -> Int32 {
        let argument: [UInt8]
        do {
            // CBORValue decodes from any decoder, JSON included.
            argument = try JSONDecoder().decode(CBORValue.self, from: Data(options.json.utf8)).encodedBytes
        } catch {
            printError("Error: the argument is not JSON: \(escaped: error)")
            return 1
        }
        // A name of its own per call: a process id comes back after a while,
        // and a reused (name, 1) would be answered from the dedup table with
        // an earlier call's reply instead of being run.
        let requestID = options.requestID ?? RequestID(worker: "call-\(UUID().uuidString.lowercased())", sequence: 1)
        do {
            guard
                let answer = try request(
                    .op(OpRequest(request: requestID, op: options.op, argument: argument)), leader: options.leaderEndpoint,
                    timeout: options.timeout)
            else {
                printError("Error: no reply from \(options.leaderEndpoint) within \(options.timeout)")
                return 1
            }
            switch answer {
            case .reply(let reply):
                switch reply.outcome {
                case .applied(let revision):
                    print("applied revision \(revision) (request \(escaped: reply.request))")
                    return 0
                case .unchanged:
                    print("unchanged (request \(escaped: reply.request))")
                    return 0
                case .rejected(let reason):
                    print("rejected: \(escaped: reason) (request \(escaped: reply.request))")
                    return 1
                }
            case .error(let error):
                printError("Error: the leader refused the request: \(escaped: error)")
                return 1
            default:
                printError("Error: unexpected answer `\(answer.typeName)`")
                return 1
            }
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    static func status(leader endpoint: String, json: Bool) -> Int32 {
        do {
            guard case .status(let status)? = try request(.statusRequest, leader: endpoint, timeout: .seconds(5)) else {
                printError("Error: no status from \(endpoint) within 5s")
                return 1
            }
            if json {
                let workers = status.workers.map {
                    "{\"name\": \(CBORText.quoted($0.name)), \"appliedRevision\": \($0.appliedRevision), \"lag\": \($0.lag)"
                        + ($0.digest.map { ", \"digest\": \(CBORText.quoted($0))" } ?? "") + "}"
                }
                print(
                    "{\"epoch\": \(status.epoch), \"revision\": \(status.revision), \"workers\": [\(workers.joined(separator: ", "))], "
                        + "\"errors\": {\(status.errorCounts.sorted { $0.key < $1.key }.map { "\(CBORText.quoted($0.key)): \($0.value)" }.joined(separator: ", "))}, "
                        + "\"openScopeInstances\": \(status.openScopeInstances)"
                        + (status.placement.map { ", \"placement\": \(CBORText.quoted($0))" } ?? "")
                        + (status.commits.map {
                            ", \"commits\": {\"count\": \($0.count), \"window\": \($0.window), \"p50Micros\": \(Int($0.p50Micros.rounded())), "
                                + "\"p99Micros\": \(Int($0.p99Micros.rounded())), \"turnsPerCommit\": \(($0.turnsPerCommit * 100).rounded() / 100)}"
                        } ?? "") + "}")
            } else {
                print("epoch     \(status.epoch)")
                print("revision  \(status.revision)")
                print("workers   \(status.workers.count)")
                for worker in status.workers {
                    print(
                        "  \(escaped: worker.name): applied \(worker.appliedRevision), lag \(worker.lag), heard \(String(format: "%.1f", worker.secondsSinceHeard))s ago"
                            + (worker.digest.map { ", digest \(escaped: $0)" } ?? ""))
                }
                let errors = status.errorCounts.sorted { $0.key < $1.key }.map { "\(escaped: $0.key) \($0.value)" }
                print("errors    \(errors.isEmpty ? "none" : errors.joined(separator: ", "))")
                print("scopes    \(status.openScopeInstances.count) open instances")
                if let commits = status.commits {
                    print(
                        "commits   \(commits.count) (latest \(commits.window): p50 \(Int(commits.p50Micros.rounded())) µs, "
                            + "p99 \(Int(commits.p99Micros.rounded())) µs, \(String(format: "%.1f", commits.turnsPerCommit)) turns each)")
                }
                if let placement = status.placement { print("placement \(escaped: placement)") }
            }
            return 0
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
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
