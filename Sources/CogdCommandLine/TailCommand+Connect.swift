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

extension TailCommand {
    /// How long `--connect` waits in silence before it says that nothing
    /// arrives (once per quiet stretch; it keeps waiting).
    static let quietNotice: Duration = .seconds(10)

    /// Follows the leader's turn stream (`--connect`): waits (bounded by
    /// `--timeout`) for the stream's connection, catches up through the
    /// leader's requests endpoint from `--from` or `--since` when given,
    /// then prints each turn as it is published, filling any gap the same way.
    ///
    /// `list` may name every node of an HA cluster (`ha.md` §10): each
    /// node's stream is subscribed to at once, and a standby publishes
    /// nothing, so what comes is the leader's — after a failover the new
    /// leader's, in a higher epoch, said once on stderr. A revision already
    /// printed is not printed again (the new leader's stream may repeat
    /// one), turns of an epoch below the one followed are a deposed
    /// leader's and are ignored, and a gap is asked of whichever `--leader`
    /// node leads.
    func followStream(_ list: String) -> Int32 {
        let endpoints = Worker.endpoints(list)
        let several = endpoints.count > 1
        // As messages name the streams: the one given, or every node's.
        let named = endpoints.map { TerminalText.escaped($0) }.joined(separator: ", ")
        var catchUp: CatchUpClient?
        do {
            let curve = try options.keys?.load()
            let context = try ZMQContext()
            defer { context.close() }
            // A socket per node, so each node's handshake is watched apart.
            var streams: [WatchedConnection] = []
            defer { for stream in streams { stream.close() } }
            defer { catchUp?.close() }
            for endpoint in endpoints {
                streams.append(try WatchedConnection(context: context, endpoint: endpoint, expected: .turns, curve: curve, timeout: options.timeout))
            }
            /// Whether a handshake failed (said, in the same words before and after the stream started).
            func handshakeRefused() throws -> Bool {
                do {
                    for stream in streams { try stream.handshakes.check() }
                    return false
                } catch let refused as ClusterCommands.HandshakeRefused {
                    printError("Error: \(refused.described(as: endpoints.contains(refused.endpoint) ? "turn stream" : "leader"))")
                    return true
                }
            }
            let connectDeadline = ContinuousClock.now + options.timeout
            while true {
                if try handshakeRefused() { return 1 }
                if streams.contains(where: { $0.handshakes.succeeded }) { break }
                guard ContinuousClock.now < connectDeadline else {
                    for stream in streams { try stream.handshakes.checkSilence() }
                    printError(
                        "Error: nothing answers at \(several ? "any of " : "")\(named) within \(Command.secondsText(options.timeout)) s: is "
                            + "`\(CogdCommandLine.programName) leader` serving its turn stream \(several ? "at one of them" : "there") (its --turns, default "
                            + "\(Command.defaultTurnsEndpoint))? (a slow network: --timeout SECONDS)")
                    return ClusterCommands.CallExit.noAnswer
                }
                usleep(10_000)
            }
            if options.from == nil && options.since == nil {
                // Stdout carries turn lines only; without a catch-up nothing else would show it is connected.
                printError("\(CogdCommandLine.programName) tail: following \(named) (Ctrl-C stops)")
            }
            // 0: print whatever the stream brings; else the next revision to print.
            var next: UInt64 = 0
            // With several nodes, the epoch of the leader followed (nil: none heard of yet).
            var followedEpoch: UInt64?
            /// With several nodes: whether `epoch` is above the one followed — a new
            /// leader, said once on stderr naming its node's stream — and follows it.
            func follows(_ epoch: UInt64, from node: String) -> Bool {
                guard several else { return false }
                defer { followedEpoch = max(followedEpoch ?? 0, epoch) }
                guard let known = followedEpoch ?? progress.lastRecord?.epoch, epoch > known else { return false }
                printError("\(CogdCommandLine.programName) tail: following the leader of epoch \(epoch) (node \(escaped: node))")
                return true
            }
            // A catch-up client said hello as a tool: Ctrl-C (or SIGTERM) ends the loop so it says goodbye as it closes.
            var stopper: SignalStopper?
            if options.from != nil || options.since != nil {
                stopper = SignalStopper()
                let client = try CatchUpClient(context: context, endpoints: options.leader, curve: curve, timeout: options.timeout)
                catchUp = client
                guard let start = try startRevision(client) else { return 1 }
                next = start
                followedEpoch = client.epoch
                guard let caughtUp = try self.catchUp(from: next, client) else { return 1 }
                next = caughtUp
                if progress.done { return 0 }
                sayNothingMatchesYet()
            }
            var lastHeard = ContinuousClock.now
            var quietReported = false
            var connections = streams.map(\.handshakes.successes)
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
                        "\(CogdCommandLine.programName) tail: no turns from \(named) for \(quiet.components.seconds) s; "
                            + "still waiting (Ctrl-C stops)")
                }
                // Still following: the leader keeps listing the catch-up client until its goodbye.
                try catchUp?.keepAlive()
                // Welcomed again after a leader restart, or a stream connected again (a leader restarted, or
                // a new one leads; under CURVE no hello is said: the leader's status tells): a log that ends
                // before the last turn printed, or an older epoch, is another log (or a restored backup):
                // followed from its end, said once.
                var position = catchUp?.takeRejoin()
                let welcomed = catchUp?.takeWelcomedRevision()
                let successes = streams.map(\.handshakes.successes)
                if successes != connections {
                    let connected = streams.indices.first { successes[$0] != connections[$0] }
                    if let client = catchUp {
                        do {
                            let asked = try client.leaderPosition()
                            position = asked
                            connections = successes
                            if let connected { _ = follows(asked.epoch, from: streams[connected].endpoint) }
                        } catch is CatchUpClient.NoAnswer {
                            // The stream is back before its leader answers (still starting, or a slow machine):
                            // asked again at the next pass, the stream read meanwhile.
                        }
                    } else {
                        connections = successes
                    }
                }
                if let position, let last = progress.lastRecord, position.lastRevision < last.revision || position.epoch < last.epoch,
                    !(toldPosition.map { $0.epoch == position.epoch && position.lastRevision <= $0.lastRevision } ?? false)
                {
                    sayWentBack(from: last, to: position.lastRevision, epoch: position.epoch)
                    next = TailCommand.revision(after: position.lastRevision)
                    toldPosition = (position.lastRevision, position.epoch)
                } else if let client = catchUp {
                    // The leader's log is past what the stream brought (turns published before a subscription
                    // took: a new leader's first ones), as its status says, or a heartbeat's answer while the
                    // stream is quiet: asked for, in order.
                    let quietFor = ContinuousClock.now - lastHeard >= CatchUpClient.heartbeatInterval
                    if let ahead = position?.lastRevision ?? (quietFor ? welcomed : nil), ahead >= next {
                        guard let caughtUp = try self.catchUp(from: next, client) else { return 1 }
                        next = caughtUp
                        if progress.done { return 0 }
                    }
                }
                let ready = try ZMQSocket.poll(streams.map(\.socket), timeout: .milliseconds(200))
                for (stream, isReady) in zip(streams, ready) where isReady {
                    while let frames = try stream.socket.receive() {
                        guard case .turns(let epoch, var records)? = try? WireMessage.decode(frames[frames.count - 1], limit: WireMessage.maximumLeaderMessageSize)
                        else { continue }
                        // Among several nodes, a deposed leader's late turns do not pull the tail back.
                        if several, let followed = followedEpoch, epoch < followed { continue }
                        // A new leader's stream continues the log: what it repeats is skipped, not another log.
                        let risen = follows(epoch, from: stream.endpoint)
                        lastHeard = ContinuousClock.now
                        quietReported = false
                        guard let client = catchUp else {
                            // Only the stream: in order, so a turn at or below the last one read is another log's.
                            if let last = progress.lastRecord, risen {
                                records.removeAll { $0.revision <= last.revision }
                            } else if let last = progress.lastRecord, let first = records.first, first.revision <= last.revision || first.epoch < last.epoch {
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
            }
        } catch let refused as LeaderSnapshot.Refused {
            let hint =
                [.roleForbids, .helloFirst].contains(refused.error.code)
                ? "; under CURVE, --from and --since catch up with an observer key (protocol/cogwire.md §9)" : ""
            printError("Error: the leader at \(escaped: catchUp?.endpoint ?? options.leader) refused to send turns: \(escaped: refused.error)\(hint)")
            return 1
        } catch let wrong as EndpointHandshake.WrongEndpoint {
            printError("Error: \(escaped: wrong.from(options.leaderSource))")
            return ClusterCommands.CallExit.noAnswer
        } catch let noAnswer as CatchUpClient.NoAnswer {
            printError(ClusterCommands.noAnswer(from: noAnswer.endpoint, within: options.timeout) + " (--leader: the requests endpoint --connect catches up from)")
            return ClusterCommands.CallExit.noAnswer
        } catch let none
            where none is EndpointHandshake.NotALeader || none is ClusterCommands.StandbyAnswered || none is ClusterCommands.NoNodeLeads
        {
            // Not a leader there: something else, or (with --leader) only standbys answered.
            printError("Error: \(none)")
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
