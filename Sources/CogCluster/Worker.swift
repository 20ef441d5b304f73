import Cog
import CogLog
import CogWire
import Foundation

/// A worker: keeps a replica of the leader's graph from the durable turn
/// stream, hosts mechanisms, and sends ops to the leader (DESIGN §6).
///
/// Sync follows the Clone pattern: hello, then subscribe to the turn stream,
/// then fetch a snapshot; turns published meanwhile are buffered and applied
/// above the snapshot's revision; a gap asks for the missing records.
///
/// - Important: runs on the main actor (its replica's reactions and tasks
///   live there); `run` polls its sockets and yields between polls.
@MainActor
public final class Worker: CogRemoteLink {
    public struct Configuration: Sendable {
        public var name: String
        public var leaderEndpoint: String
        public var heartbeatInterval: Duration

        public init(name: String, leaderEndpoint: String = "tcp://127.0.0.1:5701", heartbeatInterval: Duration = .seconds(1)) {
            self.name = name
            self.leaderEndpoint = leaderEndpoint
            self.heartbeatInterval = heartbeatInterval
        }
    }

    public let configuration: Configuration
    /// The replica: changed only by applied turns.
    public let cogs: Cogs
    private let context: ZMQContext
    private let dealer: ZMQSocket
    private var subscriber: ZMQSocket?
    private let mechanisms: [any Mechanism]
    private let codec = ReplicaCodec()

    /// The newest revision applied to the replica.
    public private(set) var appliedRevision: UInt64 = 0
    /// The leader epoch the replica follows.
    public private(set) var epoch: UInt64?
    /// Whether the first snapshot has been applied (mechanisms operate then).
    public private(set) var isSynced = false
    /// The epoch of the last snapshot applied.
    public private(set) var syncedEpoch: UInt64?
    /// Replies received, by request (newest last in `replyOrder`).
    public private(set) var replies: [RequestID: OpReply] = [:]
    /// Error messages the leader sent this worker.
    public private(set) var errors: [WireError] = []
    private var buffered: [UInt64: TurnRecord] = [:]
    private var awaitingSnapshot = false
    private var catchUpFrom: UInt64?
    private var sequence: UInt64 = 0
    private var lastHeartbeat = ContinuousClock.now

    public init(configuration: Configuration, mechanisms: [any Mechanism]) throws {
        self.configuration = configuration
        self.mechanisms = mechanisms
        cogs = Cogs.replica()
        context = try ZMQContext()
        dealer = try ZMQSocket(context, .dealer)
        try dealer.setIdentity(configuration.name)
        try dealer.setReconnect(initial: 100, maximum: 2_000)
        try dealer.connect(configuration.leaderEndpoint)
        cogs.remoteLink = self
        try send(.hello(worker: configuration.name, lastRevision: 0))
    }

    public func close() {
        dealer.close()
        subscriber?.close()
        context.close()
    }

    /// Serves until `stop` is set.
    public func run(until stop: StopFlag) async throws {
        while !stop.isStopped {
            let worked = try pump()
            if !worked { try await Task.sleep(for: .milliseconds(1)) }
        }
    }

    /// Handles everything waiting now; returns whether anything was.
    @discardableResult
    public func pump() throws -> Bool {
        var worked = false
        while let frames = try dealer.receive() {
            worked = true
            guard let frame = frames.last, let message = try? WireMessage.decode(frame) else { continue }
            try handle(message)
        }
        if let subscriber {
            while let frames = try subscriber.receive() {
                worked = true
                guard let frame = frames.last, case .turns(let epoch, let records)? = try? WireMessage.decode(frame) else { continue }
                if epoch != self.epoch { continue }
                try receive(records)
            }
        }
        if ContinuousClock.now - lastHeartbeat >= configuration.heartbeatInterval {
            lastHeartbeat = .now
            try send(.heartbeat(worker: configuration.name, revision: appliedRevision))
        }
        return worked
    }

    private func handle(_ message: WireMessage) throws {
        switch message {
        case .welcome(let epoch, let lastRevision, let turnsEndpoint):
            if self.epoch != epoch {
                // First contact or a new leader epoch: (re)subscribe, then fetch the state.
                self.epoch = epoch
                subscriber?.close()
                let socket = try ZMQSocket(context, .subscriber)
                try socket.subscribeToAll()
                try socket.setHighWaterMarks(send: 1_000, receive: 100_000)
                try socket.connect(turnsEndpoint)
                subscriber = socket
                buffered = [:]
                catchUpFrom = nil
                awaitingSnapshot = true
                try send(.snapshotRequest)
            } else if !awaitingSnapshot, lastRevision > appliedRevision, catchUpFrom == nil {
                catchUpFrom = appliedRevision + 1
                try send(.catchUpRequest(from: appliedRevision + 1))
            }
        case .snapshot(let epoch, let revision, let entries):
            guard epoch == self.epoch else { return }
            awaitingSnapshot = false
            try cogs.applyReplicatedTurn(
                named: "sync", writes: entries.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                codec: codec)
            appliedRevision = revision
            syncedEpoch = epoch
            let held = buffered.values.sorted { $0.revision < $1.revision }
            buffered = [:]
            try receive(held)
            if !isSynced {
                isSynced = true
                cogs.operateReplicaMechanisms(mechanisms)
            }
        case .turns(let epoch, let records):
            guard epoch == self.epoch else { return }
            catchUpFrom = nil
            try receive(records)
        case .reply(let reply):
            replies[reply.request] = reply
        case .error(let error):
            errors.append(error)
        default:
            break
        }
    }

    /// Applies records in revision order; holds back those above a gap and
    /// asks for what is missing.
    private func receive(_ records: [TurnRecord]) throws {
        for record in records where record.revision > appliedRevision {
            buffered[record.revision] = record
        }
        guard !awaitingSnapshot else { return }
        while let next = buffered.removeValue(forKey: appliedRevision + 1) {
            try cogs.applyReplicatedTurn(
                named: next.name, writes: next.writes.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                codec: codec)
            appliedRevision = next.revision
        }
        if !buffered.isEmpty, catchUpFrom == nil {
            catchUpFrom = appliedRevision + 1
            try send(.catchUpRequest(from: appliedRevision + 1))
        }
    }

    // MARK: CogRemoteLink

    public func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?) {
        sequence += 1
        let request = RequestID(worker: configuration.name, sequence: sequence)
        guard let bytes = try? CBOREncoder().encode(argument) else {
            replies[request] = OpReply(request: request, outcome: .rejected(reason: "argument does not encode"))
            return
        }
        let turnName = owner.map { "\($0.path).\(name)" } ?? name
        try? send(.op(OpRequest(request: request, op: name, argument: bytes, instance: nil, name: turnName)))
    }

    /// The id the next request will carry.
    public var nextRequestID: RequestID { RequestID(worker: configuration.name, sequence: sequence + 1) }

    private func send(_ message: WireMessage) throws {
        try dealer.send([message.encoded()], wait: false)
    }
}

/// Decodes replicated values with the log's codec.
@MainActor
final class ReplicaCodec: CogDurableStore {
    private let encoder = CBOREncoder()
    private let decoder = CBORDecoder()

    func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try encoder.encode(value) }
    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T { try decoder.decode(type, from: bytes) }
    func storedValue(name: String, key: [UInt8]?) throws -> [UInt8]? { nil }
    func commit(_ turn: CogDurableTurn) throws {}
}
