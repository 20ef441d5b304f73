import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension TailCommand {
    /// How long `--connect` waits in silence before it says that nothing
    /// arrives (once per quiet stretch; it keeps waiting).
    static let quietNotice: Duration = .seconds(10)

    /// Follows the leader's turn stream (`--connect`): waits (bounded by
    /// `--timeout`) for the stream's connection, catches up through the
    /// leader's requests endpoint from `--from` or `--since` when given,
    /// then prints each turn as it is published, filling any gap the same way.
    func followStream(_ endpoint: String) -> Int32 {
        var catchUp: CatchUpClient?
        do {
            let curve = try options.keys?.load()
            let context = try ZMQContext()
            defer { context.close() }
            let subscriber = try ZMQSocket(context, .subscriber, linger: .zero)
            defer { subscriber.close() }
            try subscriber.subscribeToAll()
            try subscriber.useCurve(curve)
            // A leader that refuses this key says so in the handshake: said here, not waited on in silence.
            var handshakes = try EndpointHandshake(subscriber, context: context, endpoint: endpoint, expected: .turns, curve: curve, timeout: options.timeout)
            defer { handshakes.close() }
            defer { catchUp?.close() }
            try subscriber.connect(endpoint)
            /// Whether a handshake failed (said, in the same words before and after the stream started).
            func handshakeRefused() throws -> Bool {
                do {
                    try handshakes.check()
                    return false
                } catch let refused as ClusterCommands.HandshakeRefused {
                    printError("Error: \(refused.described(as: refused.endpoint == endpoint ? "turn stream" : "leader"))")
                    return true
                }
            }
            let connectDeadline = ContinuousClock.now + options.timeout
            while true {
                if try handshakeRefused() { return 1 }
                if handshakes.succeeded { break }
                guard ContinuousClock.now < connectDeadline else {
                    try handshakes.checkSilence()
                    printError(
                        "Error: nothing answers at \(escaped: endpoint) within \(Command.secondsText(options.timeout)) s: is "
                            + "`\(CogdCommandLine.programName) leader` serving its turn stream there (its --turns, default "
                            + "\(Command.defaultTurnsEndpoint))? (a slow network: --timeout SECONDS)")
                    return ClusterCommands.CallExit.noAnswer
                }
                usleep(10_000)
            }
            if options.from == nil && options.since == nil {
                // Stdout carries turn lines only; without a catch-up nothing else would show it is connected.
                printError("\(CogdCommandLine.programName) tail: following \(escaped: endpoint) (Ctrl-C stops)")
            }
            // 0: print whatever the stream brings; else the next revision to print.
            var next: UInt64 = 0
            // A catch-up client said hello as a tool: Ctrl-C (or SIGTERM) ends the loop so it says goodbye as it closes.
            var stopper: SignalStopper?
            if options.from != nil || options.since != nil {
                stopper = SignalStopper()
                let client = try CatchUpClient(context: context, endpoint: options.leader, curve: curve, timeout: options.timeout)
                catchUp = client
                guard let start = try startRevision(client) else { return 1 }
                next = start
                guard let caughtUp = try self.catchUp(from: next, client) else { return 1 }
                next = caughtUp
                if progress.done { return 0 }
                sayNothingMatchesYet()
            }
            var lastHeard = ContinuousClock.now
            var quietReported = false
            var connections = handshakes.successes
            // The leader's position a went-back note was last given for: one restart
            // may tell it twice (its welcome and its status), the second read after
            // turns of the new log were printed; the same position again is no news.
            var toldPosition: (lastRevision: UInt64, epoch: UInt64)?
            while true {
                // Stopped: the `defer` above closes the catch-up client (its goodbye); exit as an interrupted program does.
                if stopper?.flag.isStopped == true { return 130 }
                // A reconnection refused (the leader restarted with other keys, or with CURVE): as at the start.
                if try handshakeRefused() { return 1 }
                let quiet = ContinuousClock.now - lastHeard
                if quiet >= TailCommand.quietNotice && !quietReported {
                    quietReported = true
                    printError(
                        "\(CogdCommandLine.programName) tail: no turns from \(escaped: endpoint) for \(quiet.components.seconds) s; "
                            + "still waiting (Ctrl-C stops)")
                }
                // Still following: the leader keeps listing the catch-up client until its goodbye.
                try catchUp?.keepAlive()
                // Welcomed again after a leader restart, or the stream connected again (under CURVE no hello
                // is said: the leader's status tells): a log that ends before the last turn printed, or an
                // older epoch, is another log (or a restored backup): followed from its end, said once.
                var position = catchUp?.takeRejoin()
                if handshakes.successes != connections {
                    connections = handshakes.successes
                    if let client = catchUp, progress.lastRecord != nil { position = try client.leaderPosition() }
                }
                if let position, let last = progress.lastRecord, position.lastRevision < last.revision || position.epoch < last.epoch,
                    !(toldPosition.map { $0.epoch == position.epoch && position.lastRevision <= $0.lastRevision } ?? false)
                {
                    sayWentBack(from: last, to: position.lastRevision, epoch: position.epoch)
                    next = TailCommand.revision(after: position.lastRevision)
                    toldPosition = (position.lastRevision, position.epoch)
                }
                guard try ZMQSocket.poll([subscriber], timeout: .milliseconds(200))[0] else { continue }
                while let frames = try subscriber.receive() {
                    guard case .turns(_, var records)? = try? WireMessage.decode(frames[frames.count - 1], limit: WireMessage.maximumLeaderMessageSize)
                    else { continue }
                    lastHeard = ContinuousClock.now
                    quietReported = false
                    guard let client = catchUp else {
                        // Only the stream: in order, so a turn at or below the last one read is another log's.
                        if let last = progress.lastRecord, let first = records.first, first.revision <= last.revision || first.epoch < last.epoch {
                            sayWentBack(from: last, to: first.revision == 0 ? 0 : first.revision - 1, epoch: first.epoch)  // a revision 0 from a broken leader must not trap
                        }
                        _ = try printRecords(records, after: 0)
                        if progress.done { return 0 }
                        continue
                    }
                    // Caught up, earlier turns may come late from the stream; an epoch older than the last
                    // printed one never does within one log.
                    if let last = progress.lastRecord, let newer = records.first(where: { $0.revision >= next }), newer.epoch < last.epoch {
                        let end = try client.lastRevision()
                        sayWentBack(from: last, to: end, epoch: newer.epoch)
                        next = TailCommand.revision(after: end)
                    }
                    records.removeAll { $0.revision < next }
                    if let first = records.first, first.revision > next {
                        // Published before this subscription took, or dropped: asked for, in order.
                        guard let caughtUp = try self.catchUp(from: next, client) else { return 1 }
                        next = caughtUp
                        if progress.done { return 0 }
                        records.removeAll { $0.revision < next }
                    }
                    next = try printRecords(records, after: next)
                    if progress.done { return 0 }
                }
            }
        } catch let refused as LeaderSnapshot.Refused {
            let hint =
                [.roleForbids, .helloFirst].contains(refused.error.code)
                ? "; under CURVE, --from and --since catch up with an observer key (protocol/cogwire.md §9)" : ""
            printError("Error: the leader at \(escaped: options.leader) refused to send turns: \(escaped: refused.error)\(hint)")
            return 1
        } catch let wrong as EndpointHandshake.WrongEndpoint {
            printError("Error: \(escaped: wrong.from(options.leaderSource))")
            return ClusterCommands.CallExit.noAnswer
        } catch let none as EndpointHandshake.NotALeader {
            printError("Error: \(none)")
            return ClusterCommands.CallExit.noAnswer
        } catch let noAnswer as CatchUpClient.NoAnswer {
            printError(ClusterCommands.noAnswer(from: noAnswer.endpoint, within: options.timeout) + " (--leader: the requests endpoint --connect catches up from)")
            return ClusterCommands.CallExit.noAnswer
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    /// Says on stderr that the log followed went back from `last` (the last
    /// turn read) to `revision` in `epoch`: another log, or a restored
    /// backup; it is followed from the revision after, and what is read
    /// next is held against it, not against `last`.
    func sayWentBack(from last: TurnRecord, to revision: UInt64, epoch: UInt64) {
        printError(
            "\(CogdCommandLine.programName) tail: the leader's log went back from revision \(last.revision) (epoch \(last.epoch)) "
                + "to \(revision) (epoch \(epoch)): another log, or a restored backup; following it from \(TailCommand.revision(after: revision))")
        progress.lastRecord = nil
    }

    /// The revision `--from` or `--since` names on the leader, saying when
    /// it is past the end (then it waits for it); nil after an error is printed.
    private func startRevision(_ client: CatchUpClient) throws -> UInt64? {
        let last = try client.lastRevision()
        if let from = options.from {
            if from > last {
                let ends = last == 0 ? "the leader's log has no turns yet" : "the leader's log ends at revision \(last)"
                printError("\(CogdCommandLine.programName) tail: \(ends); waiting for revision \(from)")
            }
            return from
        }
        guard let since = options.since else { return TailCommand.revision(after: last) }
        let moment = since.date()
        var newest: TurnRecord?
        let found = try TailSince.firstRevision(atOrAfter: moment, first: 1, last: last) { revision in
            guard case .records(let records) = try client.records(from: revision), let record = records.first else { return nil }
            if record.revision == last { newest = record }
            return record.revision == revision ? record.time : .distantFuture
        }
        if let found { return found }
        let ends =
            newest.map { "the newest turn, revision \($0.revision), is from \(CBORText.iso8601($0.time.timeIntervalSince1970))" }
            ?? (last == 0 ? "the leader's log has no turns yet" : "the leader's log ends at revision \(last)")
        printError("\(CogdCommandLine.programName) tail: no turn since \(since) yet: \(ends); waiting for newer ones")
        return TailCommand.revision(after: last)
    }

    /// Prints the leader's turns from `from` to its end, asking in steps;
    /// returns the revision after the last one printed, nil after an error is printed.
    private func catchUp(from: UInt64, _ client: CatchUpClient) throws -> UInt64? {
        var next = from
        while !progress.done {
            switch try client.records(from: next) {
            case .removed(let message):
                printError("Error: \(escaped: message)")
                return nil
            case .records(let records):
                guard !records.isEmpty else { return next }
                next = try printRecords(records, after: next)
            }
        }
        return next
    }
}

/// Asks the leader's requests endpoint for turns (`catch-up-request`,
/// `protocol/cogwire.md` §3) and its last revision (`status-request`), as
/// `cogd get --leader` asks for a snapshot: without keys it must say hello
/// first (`hello-first`), so it says hello as a tool under a name of its
/// own, `tail-` and a UUID, with no rig — it holds no one else's name,
/// registers nothing and writes nothing, and `cogd status` lists it until it
/// closes (it says goodbye). While it follows it heartbeats every second
/// (`keepAlive`), as a worker does, so the leader does not give it up at its
/// heartbeat timeout; if the leader gave it up all the same (it was paused,
/// or the leader restarted) it says hello again. With
/// keys it needs an observer key, which asks without a hello (a worker key
/// would have to say hello in its worker's name, displacing it).
final class CatchUpClient {
    /// The leader said nothing for the whole timeout.
    struct NoAnswer: Error {
        let endpoint: String
    }

    enum Answer {
        /// The records from the revision asked for on (none: it is past the end).
        case records([TurnRecord])
        /// Retention removed that revision: the leader's words, which revisions it keeps.
        case removed(String)
    }

    private let socket: ZMQSocket
    private var handshakes: EndpointHandshake
    private let endpoint: String
    private let timeout: Duration
    private let tool = "tail-\(UUID().uuidString.lowercased())"
    private let saysHello: Bool
    private var greeted = false
    /// A heartbeat was refused: `keepAlive` says hello again until welcomed.
    private var rejoining = false
    /// `keepAlive` said hello and no answer has come yet.
    private var helloInFlight = false
    /// The welcome of the last hello said again (the leader restarted, or
    /// gave the name up), until `takeRejoin` reads it.
    private var rejoin: (epoch: UInt64, lastRevision: UInt64)?
    /// When the last hello or heartbeat went out.
    private var lastSaid = ContinuousClock.now

    /// How often a following client heartbeats (a worker's default interval).
    static let heartbeatInterval: Duration = .seconds(1)

    init(context: ZMQContext, endpoint: String, curve: CurveClientKeys?, timeout: Duration) throws {
        self.endpoint = endpoint
        self.timeout = timeout
        saysHello = curve == nil
        socket = try ZMQSocket(context, .dealer, linger: .zero)
        try socket.setIdentity("\(tool)/\(UInt32.random(in: 0...UInt32.max))")
        try socket.useCurve(curve)
        handshakes = try EndpointHandshake(socket, context: context, endpoint: endpoint, expected: .requests, curve: curve, timeout: timeout)
        try socket.connect(endpoint)
    }

    /// Says goodbye when it said hello (the leader drops the tool at once),
    /// then closes the socket (before its context closes).
    func close() {
        try? takeAnswers()
        // A hello still unanswered may be welcomed: the goodbye after it drops the name all the same.
        if greeted || helloInFlight { socket.sayGoodbye(as: tool) }
        handshakes.close()
        socket.close()
    }

    /// Sends one frame (bounded by `timeout`); throws `NoAnswer` when it cannot.
    private func send(_ frame: [UInt8]) throws {
        guard try handshakes.send(frame, on: socket, within: timeout) else { throw NoAnswer(endpoint: endpoint) }
    }

    /// The leader's next message; throws `NoAnswer` after `timeout` of silence.
    private func next() throws -> WireMessage {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let remaining = deadline - ContinuousClock.now
            if try ZMQSocket.poll([socket], timeout: min(remaining, .milliseconds(20)))[0],
                let frames = try socket.receive(), let frame = frames.last,
                let message = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
            {
                return message
            }
            try handshakes.check()
        }
        try handshakes.checkSilence()
        throw NoAnswer(endpoint: endpoint)
    }

    /// Heartbeats once a second while it holds its tool name, without
    /// waiting: the answers (a welcome each) are read here as they come. A
    /// heartbeat refused (`hello-first`: the leader restarted, or gave the
    /// name up) means it holds no name: no goodbye is owed, and it says
    /// hello again, once a second until welcomed, so `status` lists it
    /// again. Nothing is fatal here — a leader that is gone shows when
    /// turns are next asked for.
    func keepAlive() throws {
        try takeAnswers()
        guard greeted || rejoining, ContinuousClock.now - lastSaid >= CatchUpClient.heartbeatInterval else { return }
        let message = greeted ? WireMessage.heartbeat(worker: tool, revision: 0) : WireMessage.hello(worker: tool, lastRevision: 0, tool: true)
        // One that cannot be queued now (no connection) is skipped: the next one tries again.
        if try socket.send([message.encoded()], wait: false) {
            lastSaid = .now
            if !greeted { helloInFlight = true }
        }
    }

    /// The epoch and last revision of the leader that welcomed the client
    /// again since the last call (nil: none did): a log that ends before
    /// the last turn printed, or an older epoch, is another log.
    func takeRejoin() -> (epoch: UInt64, lastRevision: UInt64)? {
        defer { rejoin = nil }
        return rejoin
    }

    /// Reads the answers to heartbeats and hellos `keepAlive` sent, without waiting.
    private func takeAnswers() throws {
        while let frames = try socket.receive(), let frame = frames.last {
            switch try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize) {
            case .welcome(let epoch, let lastRevision, _, _, _)? where rejoining:
                greeted = true
                rejoining = false
                helloInFlight = false
                rejoin = (epoch, lastRevision)
            case .error(let error)? where error.code == .helloFirst || error.code == .gone:
                greeted = false
                rejoining = true
            case .error? where helloInFlight:
                helloInFlight = false
            default:
                break
            }
        }
    }

    /// The revision the leader's log ends at now.
    func lastRevision() throws -> UInt64 { try leaderPosition().lastRevision }

    /// The leader's epoch and the revision its log ends at now (its `status`).
    func leaderPosition() throws -> (epoch: UInt64, lastRevision: UInt64) {
        try send(WireMessage.statusRequest.encoded())
        while true {
            switch try next() {
            case .status(let status): return (status.epoch, status.revision)
            case .error(let error) where error.code == .helloFirst || error.code == .gone:
                // A heartbeat's answer, not the status's: the name was given up (as `takeAnswers` reads it).
                if greeted {
                    greeted = false
                    rejoining = true
                }
            case .error(let error): throw LeaderSnapshot.Refused(error: error)
            default: continue
            }
        }
    }

    /// The leader's records from `revision` on (a catch-up reply: up to 10,000, about 64 KiB).
    func records(from revision: UInt64) throws -> Answer {
        var helloRetried = false
        while true {
            if saysHello && !greeted {
                try send(WireMessage.hello(worker: tool, lastRevision: 0, tool: true).encoded())
                while true {
                    if case .welcome = try next() { break }
                }
                greeted = true
                rejoining = false
                helloInFlight = false
                lastSaid = .now
            }
            try send(WireMessage.catchUpRequest(from: revision).encoded())
            let answer = try answer()
            switch answer {
            case .records(let records): return .records(records)
            case .removed(let message): return .removed(message)
            case .helloFirst(let error):
                // Given up after the heartbeat timeout: say hello again, once.
                guard saysHello && !helloRetried else { throw LeaderSnapshot.Refused(error: error) }
                helloRetried = true
                greeted = false
            case .busy:
                usleep(20_000)
            }
        }
    }

    private enum Reply {
        case records([TurnRecord])
        case removed(String)
        case helloFirst(WireError)
        case busy
    }

    private func answer() throws -> Reply {
        while true {
            switch try next() {
            case .turns(_, let records): return .records(records)
            case .error(let error):
                switch error.code {
                case .compacted:
                    // The leader's advice is a worker's (a snapshot); what a reader needs is which revisions remain.
                    let words = error.message.components(separatedBy: "; sync from a snapshot").first ?? error.message
                    return .removed("\(words) (the leader at \(endpoint); --from a kept revision)")
                case .helloFirst: return .helloFirst(error)
                case .busy: return .busy
                default: throw LeaderSnapshot.Refused(error: error)
                }
            default: continue
            }
        }
    }
}
