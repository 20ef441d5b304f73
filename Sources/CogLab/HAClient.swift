import Cog
import CogCodec
import CogProtocol
import CogWire
import Foundation

/// What a drill's load feeds: a client that takes requests to send (and retry) and says how many are unanswered.
protocol DrillLoadClient: AnyObject {
    var outstanding: Int { get }
    @discardableResult
    func enqueue(op: String, argument: [String: CBORValue], raw: [UInt8]?) -> RequestID
}

extension DrillClient: DrillLoadClient {}

/// A pipelining client of an HA cluster (`cogd-lab drill --ha`) that follows
/// the leader by itself: it knows every node's requests endpoint (one DEALER
/// each) and sends to one of them. When a request it sent there has no
/// answer within `switchAfter`, or that node answers anything but a reply or
/// `not-leader` (an error, a message it does not know), it turns to the next
/// node and sends every unanswered request again there, with the same
/// request id: exactly-once comes from the leader's dedup answers, which are
/// shipped to its standbys. A `not-leader` sends it to the node named, and
/// one that names no node has it ask the same node again `askAgainAfter`
/// later. A standby names a dead leader until etcd lets its key go: a node
/// the client left for silence in the last `suspectFor` and is sent back to
/// is only probed, left again after `probeAfter` of silence.
final class HAClient: DrillLoadClient {
    /// One answer: what, from which node (its index), when, and whether the leader said it came from its dedup.
    struct Answer {
        var outcome: OpReply.Outcome
        var node: Int
        var earlier: Bool
        var at: ContinuousClock.Instant
    }

    let name: String
    let endpoints: [String]
    let sockets: [ZMQSocket]
    /// The node requests go to now.
    private(set) var current = 0
    private(set) var switches = 0
    private var nextSequence: UInt64 = 1
    /// Each unanswered request's frame, when it was last sent and when first (nil: not yet).
    private var inFlight: [RequestID: (frame: [UInt8], sentAt: ContinuousClock.Instant?, firstSentAt: ContinuousClock.Instant?)] = [:]
    private(set) var answers: [RequestID: Answer] = [:]
    private(set) var sent = 0
    private(set) var retried = 0
    /// Answers that were not replies (errors, unknown messages), and replies to a request already answered.
    private(set) var otherAnswers = 0
    private(set) var repeatedReplies = 0
    private var lastSwitch = ContinuousClock.now
    /// The node left last because it was silent, and when: sent back to it within `suspectFor`, the client only probes it.
    private var leftSilent: (node: Int, at: ContinuousClock.Instant)?
    /// Whether the current node is one left for silence and sent back to (left again after `probeAfter`).
    private var probing = false
    let probeAfter = Duration.milliseconds(150)
    let suspectFor = Duration.seconds(3)
    /// When to send every unanswered request to the current node again (after a `not-leader` naming no live node).
    private var askAgainAt: ContinuousClock.Instant?
    let switchAfter: Duration
    let askAgainAfter = Duration.milliseconds(100)
    var outstanding: Int { inFlight.count }

    init(context: ZMQContext, endpoints: [String], name: String, switchAfter: Duration = .milliseconds(500)) throws {
        self.name = name
        self.endpoints = endpoints
        self.switchAfter = switchAfter
        var sockets: [ZMQSocket] = []
        for endpoint in endpoints {
            let socket = try ZMQSocket(context, .dealer, linger: .zero)
            try socket.setIdentity(name)
            try socket.setReconnect(initial: 20, maximum: 200)
            try socket.connect(endpoint)
            sockets.append(socket)
        }
        self.sockets = sockets
    }

    func close() { for socket in sockets { socket.close() } }

    @discardableResult
    func enqueue(op: String, argument: [String: CBORValue], raw: [UInt8]? = nil) -> RequestID {
        let request = RequestID(worker: name, sequence: nextSequence)
        nextSequence += 1
        guard let bytes = raw ?? (try? CBOREncoder().encode(argument)) else { return request }
        inFlight[request] = (WireMessage.op(OpRequest(request: request, op: op, argument: bytes)).encoded(), nil, nil)
        sent += 1
        return request
    }

    /// Turns to node `to` (the next one by default) and sends everything unanswered there (same ids).
    private func switchNode(to node: Int? = nil, now: ContinuousClock.Instant) throws {
        if node != current { switches += 1 }
        current = node ?? (current + 1) % sockets.count
        lastSwitch = now
        try sendAll(now: now)
    }

    /// Sends every unanswered request to the current node (same ids).
    private func sendAll(now: ContinuousClock.Instant) throws {
        askAgainAt = nil
        for (request, entry) in inFlight {
            if entry.sentAt != nil { retried += 1 }
            _ = try sockets[current].send([entry.frame], wait: false)
            inFlight[request] = (entry.frame, now, entry.firstSentAt ?? now)
        }
    }

    /// Sends the requests never sent to the current node; when one sent has
    /// waited `switchAfter` unanswered, turns to the next node (at most once per `switchAfter`).
    func pump(now: ContinuousClock.Instant) throws {
        let silence = probing ? probeAfter : switchAfter
        if now - lastSwitch >= silence, inFlight.values.contains(where: { $0.sentAt.map { now - $0 >= silence } ?? false }) {
            if !probing { leftSilent = (current, now) }
            probing = false
            try switchNode(now: now)
            return
        }
        if let askAgainAt, now >= askAgainAt {
            try sendAll(now: now)
            return
        }
        for (request, entry) in inFlight where entry.sentAt == nil {
            _ = try sockets[current].send([entry.frame], wait: false)
            inFlight[request] = (entry.frame, now, now)
        }
    }

    /// Takes what node `node` sent; returns the applied answers among it.
    /// Anything but a reply from the current node turns the client to the next one.
    /// `timeline`: records each answer's time and latency (first send → answer, across nodes).
    func receive(from node: Int, timeline: DrillTimeline? = nil) throws -> [Answer] {
        var applied: [Answer] = []
        var other = false
        var named: String?
        while let frames = try sockets[node].receive() {
            let message = frames.last.flatMap { try? WireMessage.decode($0) }
            if case .notLeader(let leader, _)? = message {
                named = leader
                continue
            }
            guard case .reply(let reply)? = message else {
                otherAnswers += 1
                other = true
                continue
            }
            if node == leftSilent?.node { leftSilent = nil }
            if node == current { probing = false }
            guard let entry = inFlight.removeValue(forKey: reply.request) else {
                repeatedReplies += 1
                continue
            }
            let answer = Answer(outcome: reply.outcome, node: node, earlier: reply.earlier == true, at: .now)
            answers[reply.request] = answer
            var isApplied = false
            if case .applied = reply.outcome { isApplied = true }
            if isApplied { applied.append(answer) }
            if let timeline, let first = entry.firstSentAt { timeline.answer(at: answer.at, latency: answer.at - first, applied: isApplied) }
        }
        let now = ContinuousClock.now
        if let named, node == current {
            if let leader = endpoints.firstIndex(of: named), leader != current {
                probing = leftSilent.map { $0.node == leader && now - $0.at < suspectFor } ?? false
                try switchNode(to: leader, now: now)
            } else if askAgainAt == nil {
                askAgainAt = now + askAgainAfter
            }
        } else if other, node == current, now - lastSwitch >= .milliseconds(100) {
            try switchNode(now: now)
        }
        return applied
    }
}
