import CogCluster
import CogCodec
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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
///
/// Given every node of an HA cluster (`--leader A,B`), it asks the node that
/// answered last first, and goes on as `cogd call` does (`ha.md` §10): a
/// standby's `not-leader` sends it to the node named, silence to the next
/// one, within `--timeout`. On another node it has a connection of its own
/// there and says hello again; the node left is told goodbye.
final class CatchUpClient {
    /// No node said anything within the timeout.
    struct NoAnswer: Error {
        /// The requests endpoint asked, or every one listed, joined by commas.
        let endpoint: String
    }

    enum Answer {
        /// The records from the revision asked for on (none: it is past the end).
        case records([TurnRecord])
        /// Retention removed that revision: the leader's words, which revisions it keeps.
        case removed(String)
    }

    private let context: ZMQContext
    private let curve: CurveClientKeys?
    /// Every node's requests endpoint, joined by commas (`--leader`).
    private let list: String
    private let timeout: Duration
    private var connection: WatchedConnection
    private let tool = "tail-\(UUID().uuidString.lowercased())"
    private let saysHello: Bool
    private var greeted = false
    /// Why `keepAlive` says hello again until welcomed (nil: it does not).
    private var rejoining: Rejoining?
    /// `keepAlive` said hello and no answer has come yet.
    private var helloInFlight = false
    /// The welcome of the last hello said again (the leader restarted, or
    /// gave the name up), until `takeRejoin` reads it.
    private var rejoin: (epoch: UInt64, lastRevision: UInt64)?
    /// The last revision a heartbeat's answer named, until `takeWelcomedRevision` reads it.
    private var welcomedRevision: UInt64?
    /// When the last hello or heartbeat went out.
    private var lastSaid = ContinuousClock.now
    /// The epoch of the leader's last status (nil: none asked yet).
    private(set) var epoch: UInt64?

    private enum Rejoining {
        /// A heartbeat was refused (the leader restarted, or gave the name
        /// up): the welcome tells where that leader's log ends (`takeRejoin`).
        case refused
        /// It asks another node now (a new leader), which lists it once welcomed.
        case moved
    }

    /// How often a following client heartbeats (a worker's default interval).
    static let heartbeatInterval: Duration = .seconds(1)

    /// Connects to the first node `list` names (one requests endpoint, or
    /// an HA cluster's, joined by commas).
    init(context: ZMQContext, endpoints list: String, curve: CurveClientKeys?, timeout: Duration) throws {
        self.context = context
        self.curve = curve
        self.list = list
        self.timeout = timeout
        saysHello = curve == nil
        let first = Worker.endpoints(list).first ?? list
        connection = try WatchedConnection(
            context: context, endpoint: first, expected: .requests, curve: curve, timeout: timeout,
            identity: "\(tool)/\(UInt32.random(in: 0...UInt32.max))")
    }

    /// The requests endpoint of the node asked last.
    var endpoint: String { connection.endpoint }

    /// Says goodbye when it said hello (the leader drops the tool at once),
    /// then closes the socket (before its context closes).
    func close() {
        leave()
    }

    /// Says goodbye to the node asked last when it holds the name there (a
    /// hello still unanswered may be welcomed: the goodbye after it drops the
    /// name all the same), and closes that connection.
    private func leave() {
        try? takeAnswers()
        if greeted || helloInFlight { connection.socket.sayGoodbye(as: tool) }
        connection.close()
        greeted = false
        rejoining = nil
        helloInFlight = false
    }

    /// Asks `endpoint` from now on: a connection of its own there; the same
    /// node keeps its connection.
    private func use(_ endpoint: String) throws {
        guard endpoint != connection.endpoint else { return }
        let held = greeted || rejoining != nil
        leave()
        connection = try WatchedConnection(
            context: context, endpoint: endpoint, expected: .requests, curve: curve, timeout: timeout,
            identity: "\(tool)/\(UInt32.random(in: 0...UInt32.max))")
        // Following, it is listed there too: `keepAlive` says hello (turns asked for say it first).
        rejoining = held ? .moved : nil
    }

    /// `attempt` on the node asked last, then, when it is silent or a
    /// standby, on the others as `ClusterCommands.following` goes; throws
    /// `NoAnswer` when no node answers within the timeout.
    private func onLeader<T>(_ attempt: (_ budget: Duration) throws -> T?) throws -> T {
        let order = [connection.endpoint] + Worker.endpoints(list).filter { $0 != connection.endpoint }
        let answer = try ClusterCommands.following(order.joined(separator: ","), timeout: timeout) { endpoint, budget in
            try use(endpoint)
            return try attempt(budget)
        }
        guard let answer else { throw NoAnswer(endpoint: list) }
        return answer
    }

    /// Sends one frame within `budget`; false when it cannot.
    private func send(_ frame: [UInt8], within budget: Duration) throws -> Bool {
        try connection.handshakes.send(frame, on: connection.socket, within: budget)
    }

    /// The node's next message; nil after `budget` of silence. A
    /// `not-leader` is thrown (`StandbyAnswered`): the node is a standby.
    private func next(within budget: Duration) throws -> WireMessage? {
        let deadline = ContinuousClock.now + budget
        while ContinuousClock.now < deadline {
            let remaining = deadline - ContinuousClock.now
            if try ZMQSocket.poll([connection.socket], timeout: min(remaining, .milliseconds(20)))[0],
                let frames = try connection.socket.receive(), let frame = frames.last,
                let message = try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
            {
                if case .notLeader(let leader, let epoch) = message {
                    throw ClusterCommands.StandbyAnswered(endpoint: connection.endpoint, leader: leader, epoch: epoch)
                }
                return message
            }
            try connection.handshakes.check()
        }
        try connection.handshakes.checkSilence()
        return nil
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
        guard greeted || rejoining != nil, ContinuousClock.now - lastSaid >= CatchUpClient.heartbeatInterval else { return }
        let message = greeted ? WireMessage.heartbeat(worker: tool, revision: 0) : WireMessage.hello(worker: tool, lastRevision: 0, tool: true)
        // One that cannot be queued now (no connection) is skipped: the next one tries again.
        if try connection.socket.send([message.encoded()], wait: false) {
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

    /// The leader's last revision as the latest answer to a heartbeat named
    /// it since the last call (nil: none came): one the stream has not
    /// brought was published before a subscription took.
    func takeWelcomedRevision() -> UInt64? {
        defer { welcomedRevision = nil }
        return welcomedRevision
    }

    /// Reads the answers to heartbeats and hellos `keepAlive` sent, without waiting.
    private func takeAnswers() throws {
        while let frames = try connection.socket.receive(), let frame = frames.last {
            switch try? WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize) {
            case .welcome(let epoch, let lastRevision, _, _, _)? where rejoining != nil:
                greeted = true
                helloInFlight = false
                // Another node's welcome is no news of the log: the turns printed since it was sent may be past it.
                if rejoining == .refused { rejoin = (epoch, lastRevision) } else { welcomedRevision = lastRevision }
                rejoining = nil
            case .welcome(_, let lastRevision, _, _, _)?:
                welcomedRevision = lastRevision
            case .error(let error)? where error.code == .helloFirst || error.code == .gone:
                greeted = false
                rejoining = .refused
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
        let position = try onLeader { budget -> (epoch: UInt64, lastRevision: UInt64)? in
            guard try send(WireMessage.statusRequest.encoded(), within: budget) else { return nil }
            while true {
                switch try next(within: budget) {
                case nil: return nil
                case .status(let status)?: return (status.epoch, status.revision)
                case .error(let error)? where error.code == .helloFirst || error.code == .gone:
                    // A heartbeat's answer, not the status's: the name was given up (as `takeAnswers` reads it).
                    if greeted {
                        greeted = false
                        rejoining = .refused
                    }
                case .error(let error)?: throw LeaderSnapshot.Refused(error: error)
                default: continue
                }
            }
        }
        epoch = position.epoch
        return position
    }

    /// The leader's records from `revision` on (a catch-up reply: up to 10,000, about 64 KiB).
    func records(from revision: UInt64) throws -> Answer {
        try onLeader { budget in try records(from: revision, within: budget) }
    }

    /// `records(from:)` asked of the node connected to; nil when it is silent for `budget`.
    private func records(from revision: UInt64, within budget: Duration) throws -> Answer? {
        var helloRetried = false
        while true {
            if saysHello && !greeted {
                guard try send(WireMessage.hello(worker: tool, lastRevision: 0, tool: true).encoded(), within: budget) else { return nil }
                while true {
                    guard let answer = try next(within: budget) else { return nil }
                    if case .welcome = answer { break }
                }
                greeted = true
                rejoining = nil
                helloInFlight = false
                lastSaid = .now
            }
            guard try send(WireMessage.catchUpRequest(from: revision).encoded(), within: budget),
                let answer = try answer(within: budget)
            else { return nil }
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

    /// The answer to a catch-up request; nil after `budget` of silence.
    private func answer(within budget: Duration) throws -> Reply? {
        while true {
            switch try next(within: budget) {
            case nil: return nil
            case .turns(_, let records)?: return .records(records)
            case .error(let error)?:
                switch error.code {
                case .compacted:
                    // The leader's advice is a worker's (a snapshot); what a reader needs is which revisions remain.
                    let words = error.message.components(separatedBy: "; sync from a snapshot").first ?? error.message
                    return .removed("\(words) (the leader at \(connection.endpoint); --from a kept revision)")
                case .helloFirst: return .helloFirst(error)
                case .busy: return .busy
                default: throw LeaderSnapshot.Refused(error: error)
                }
            default: continue
            }
        }
    }
}
