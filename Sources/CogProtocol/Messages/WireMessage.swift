import Cog
import CogCodec

/// Every message of the cogd wire protocol (normative: `protocol/cogwire.md`).
/// One message is one ZeroMQ frame of deterministic CBOR: a map
/// `{"v": 1, "type": …, "body": …}`.
public enum WireMessage: Equatable, Sendable {
    /// Worker → leader: who it is, the last revision it holds, and the
    /// fingerprint of the rig it runs (absent from workers before it was
    /// sent, and from tools: then nothing is compared).
    /// `group`: the worker group it joins (`cogwire.md` §6a; absent: none).
    /// `tool`: a short-lived tool (`cogd get`, `cogd tail --connect`) that
    /// reads the state and closes, not a worker (`cogwire.md` §3; sent only
    /// when true, absent reads as false, older leaders ignore it).
    case hello(worker: String, lastRevision: UInt64, rig: CogRig.Fingerprint? = nil, group: String? = nil, tool: Bool = false, settings: [String]? = nil)
    /// Leader → worker: the epoch, the newest revision, where turns are
    /// published, and the highest request sequence answered for this worker
    /// name (its next requests are numbered above it).
    /// `group`: the group whose scope instances the leader places this
    /// worker's in (absent: none — each registration is the worker's own).
    case welcome(epoch: UInt64, lastRevision: UInt64, turnsEndpoint: String, lastSequence: UInt64 = 0, group: String? = nil)
    /// Worker → leader: asks for the whole state, in one message or (when
    /// the worker reads parts) in `snapshot` parts of about
    /// `snapshotPartTarget` bytes each.
    case snapshotRequest(inParts: Bool)
    /// Leader → worker: every durable entry as of `revision` — or part
    /// `part` (from 0) of them, `more` on every part but the last. All parts
    /// of one snapshot carry the same epoch, revision and state digest (the
    /// digest of the whole state at `revision`, which the entries of all the
    /// parts add up to; absent from leaders before it was sent).
    case snapshot(
        epoch: UInt64, revision: UInt64, entries: [SnapshotEntry], part: UInt64 = 0, more: Bool = false,
        stateDigest: StateDigest? = nil)
    /// Worker → leader: asks for the records from `from` on.
    case catchUpRequest(from: UInt64)
    /// Leader → worker (reply) or the turn stream (publication): committed records, in order.
    case turns(epoch: UInt64, records: [TurnRecord])
    /// Worker (or `cogd call`) → leader: run a registered op.
    case op(OpRequest)
    /// Leader → requester: what happened to the op.
    case reply(OpReply)
    /// Worker → leader: alive, holding `revision`, whose state digest its
    /// replica has (absent from workers before it was sent); the leader
    /// answers `welcome` and reports whether the digest agrees (`status`).
    case heartbeat(worker: String, revision: UInt64, stateDigest: StateDigest? = nil)
    /// Worker or tool → leader: the connection that holds `worker` gives the
    /// name up as it closes; the leader drops it at once, as at the heartbeat
    /// timeout (a worker's scope instances retire in a `cogd.workerGone`
    /// record). No answer; from any other connection it is refused
    /// (`cogwire.md` §3).
    case goodbye(worker: String)
    /// Leader → peer: a message was refused; serving goes on.
    case error(WireError)
    /// Worker → leader: a scope selector to track (`protocol/cogwire.md` §6).
    case scopeRegister(ScopeRegistration)
    /// Leader → worker: the instances the registration opened now, in collection order.
    case scopeRegistered(worker: String, registration: UInt64, revision: UInt64, instances: [ScopeMember])
    /// Any peer → leader: report epoch, revision, workers.
    case statusRequest
    /// Leader → peer: the status report (`cogd status`).
    case status(LeaderStatus)
    /// Standby → leader (`ha.md` §9): node `node` holds a copy of log
    /// `logID` (nil: no log yet) up to `revision`, whose state digest
    /// there is `stateDigest` (nil at revision 0), having applied epochs up to `epoch`.
    case standbyHello(node: String, logID: [UInt8]?, epoch: UInt64, revision: UInt64, stateDigest: StateDigest?, lastCommit: CommitName?)
    /// Leader → standby: the copy is in step; the commits after `sequence` follow.
    case shipWelcome(epoch: UInt64, sequence: UInt64)
    /// Leader → standby: the copy is not the leader's log as of
    /// `revision` (its last): a copy of the leader's follows in `shipCopy` parts.
    case shipResync(epoch: UInt64, revision: UInt64)
    /// Leader → standby: part of a copy of the leader's `data.mdb`, taken
    /// after shipped commit `sequence`: `data` goes at `offset`; `more` on
    /// every part but the last.
    case shipCopy(epoch: UInt64, sequence: UInt64, offset: UInt64, data: [UInt8], more: Bool)
    /// Standby → leader: the copy is in place; send the commits after `sequence`.
    case standbyCopied(node: String, sequence: UInt64)
    /// Leader → standby: shipped commit `sequence` (an encoded `ShippedCommit`).
    case ship(epoch: UInt64, sequence: UInt64, commit: [UInt8])
    /// Standby → leader: every commit through `sequence` is applied, each in its own durable commit.
    case shipAck(node: String, sequence: UInt64)
    /// Leader → standby, sent as the leader dies of a crash (`ha.md` §9):
    /// the body of `request` (op `op`, request digest `digest`) was running
    /// when fatal signal `signal` stopped the leader of `epoch`; a standby
    /// that takes the lead quarantines it instead of running it again.
    case shipCrashed(epoch: UInt64, request: RequestID, op: String, digest: [UInt8], signal: UInt64)
    /// Standby → worker or tool (`ha.md` §10): this node does not lead; the
    /// node etcd names leads `epoch` and serves requests at `leader` (empty,
    /// epoch 0: no node leads now). Ask there, or the next node you know.
    case notLeader(leader: String, epoch: UInt64)

    /// The longest `op` a `ship-crashed` names, in bytes (longer is malformed;
    /// the leader cuts what it notes at this length).
    public static let maximumCrashedOpBytes = 1_024
    /// The longest `leader` endpoint a `not-leader` names, in bytes (longer is malformed).
    public static let maximumEndpointLength = 1_024

    public static let version: UInt64 = 1
    /// The largest message the leader accepts; larger ones get `oversize`.
    public static let maximumSize = 1 << 20
    /// The largest message a worker or tool accepts from its leader: a
    /// snapshot carries the whole state table, and one record can be larger
    /// than a request may be.
    public static let maximumLeaderMessageSize = 1 << 28
    /// The size the leader aims at for a `turns` message (published or a
    /// catch-up reply): records are split across messages past it (a single
    /// larger record goes alone).
    public static let turnsMessageTarget = 1 << 20
    /// The size the leader aims at for each part of a snapshot sent in
    /// parts (a single larger entry goes alone): the state table is then
    /// bounded by memory, not by `maximumLeaderMessageSize`. Small, so
    /// the messages ZeroMQ may hold for a peer that reads nothing stay small
    /// (`cogwire.md` §8).
    public static let snapshotPartTarget = 1 << 16

    public var typeName: String {
        switch self {
        case .hello: "hello"
        case .welcome: "welcome"
        case .snapshotRequest: "snapshot-request"
        case .snapshot: "snapshot"
        case .catchUpRequest: "catch-up-request"
        case .turns: "turns"
        case .op: "op"
        case .reply: "reply"
        case .heartbeat: "heartbeat"
        case .goodbye: "goodbye"
        case .error: "error"
        case .statusRequest: "status-request"
        case .status: "status"
        case .scopeRegister: "scope-register"
        case .scopeRegistered: "scope-registered"
        case .standbyHello: "standby-hello"
        case .shipWelcome: "ship-welcome"
        case .shipResync: "ship-resync"
        case .shipCopy: "ship-copy"
        case .standbyCopied: "standby-copied"
        case .ship: "ship"
        case .shipAck: "ship-ack"
        case .shipCrashed: "ship-crashed"
        case .notLeader: "not-leader"
        }
    }
}

public struct SnapshotEntry: Codable, Equatable, Sendable {
    public var name: String
    public var key: [UInt8]?
    public var value: [UInt8]

    public init(name: String, key: [UInt8]?, value: [UInt8]) {
        self.name = name
        self.key = key
        self.value = value
    }
}

public struct OpRequest: Codable, Equatable, Sendable {
    public var request: RequestID
    /// The registered op name.
    public var op: String
    /// The argument as deterministic CBOR.
    public var argument: [UInt8]
    /// The scope instance that asked (nil: the worker itself).
    public var instance: UInt64?
    /// The turn name (composed on the worker, e.g. `Trails.trailScreen.accept`).
    public var name: String?

    public init(request: RequestID, op: String, argument: [UInt8], instance: UInt64? = nil, name: String? = nil) {
        self.request = request
        self.op = op
        self.argument = argument
        self.instance = instance
        self.name = name
    }
}

/// A scope selector a worker registers: the durable source (and key) it
/// selects over, and the form that turns the source's value into members.
public struct ScopeRegistration: Codable, Equatable, Sendable {
    public enum Form: String, Codable, Sendable {
        /// `true` is one member (identity empty), `false` none.
        case bool
        /// `null` is none, anything else one member (its encoding).
        case optional
        /// An array: each element is a member.
        case each
    }

    public var worker: String
    /// The worker's own number for this registration.
    public var registration: UInt64
    /// The composed scope path (`Bank.desk`).
    public var path: String
    /// The selected durable source's stable name, and its encoded key for a box member.
    public var source: String
    public var key: [UInt8]?
    public var form: Form
    /// The instance of the enclosing scope child this selector was declared
    /// in (nil for a mechanism's own scope): its instances end with that one.
    public var parent: UInt64?

    /// The `source` of a mechanism's root registration (`cogwire.md` §6a):
    /// a worker of a group registers each mechanism's app-lifetime root as a
    /// `bool` selector over it, which the leader holds `true` (one member,
    /// the root), so the root is placed on one member like a scope child.
    /// Its `path` is the mechanism's name.
    public static let rootSource = "cogd.root"

    /// Whether this is a mechanism's root registration.
    public var isRoot: Bool { source == ScopeRegistration.rootSource && parent == nil }

    public init(
        worker: String, registration: UInt64, path: String, source: String, key: [UInt8]?, form: Form, parent: UInt64? = nil
    ) {
        self.worker = worker
        self.registration = registration
        self.path = path
        self.source = source
        self.key = key
        self.form = form
        self.parent = parent
    }
}

/// One member a registration selects and the instance the leader minted for it.
public struct ScopeMember: Codable, Equatable, Sendable {
    /// The member's deterministic encoding (empty for a Bool scope).
    public var identity: [UInt8]
    public var instance: UInt64

    public init(identity: [UInt8], instance: UInt64) {
        self.identity = identity
        self.instance = instance
    }
}

public struct OpReply: Codable, Equatable, Sendable {
    /// What the leader did with a request (`protocol/cogwire.md` §4).
    public enum Outcome: Codable, Equatable, Sendable {
        case applied(revision: UInt64)
        case unchanged
        /// Refused before or instead of a turn: `code` is what a program
        /// switches on, `detail` what a person reads. On the wire they are
        /// separate fields, beside the `reason` text `"code: detail"` that
        /// readers of earlier builds read.
        case rejected(code: CogdCode, detail: String)
        /// The op's body refused (`Cog.Refusal`): `code` is the app's own
        /// (`insufficient-funds`), `reason` what a person reads. Nothing of
        /// the turn was kept. On the wire it is a `rejected` outcome with
        /// the code `refused` (what readers of earlier builds read) and the
        /// two as the separate fields of its `refusal` (`protocol/cogwire.md` §4).
        case refused(code: String, reason: String)
    }

    public var request: RequestID
    public var outcome: Outcome
    /// True when the leader answered from `dedup`: the outcome is the one
    /// an earlier request with this id got, and nothing ran now
    /// (`protocol/cogwire.md` §4). Absent (nil) on a first answer, and from
    /// leaders before it was said.
    public var earlier: Bool?

    public init(request: RequestID, outcome: Outcome, earlier: Bool? = nil) {
        self.request = request
        self.outcome = outcome
        self.earlier = earlier
    }

    /// The same reply, marked as answered from an earlier request.
    public var answeredEarlier: OpReply { OpReply(request: request, outcome: outcome, earlier: true) }
}

public struct WireError: Codable, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong (cogwire §2): `malformed`, `version`, `oversize`, `unknown-type`, `not-allowed`, …
    public var code: CogdCode
    public var message: String
    /// The request the error answers, when it could be read.
    public var request: RequestID?

    public init(code: CogdCode, message: String, request: RequestID? = nil) {
        self.code = code
        self.message = message
        self.request = request
    }

    public var description: String { "\(code.text): \(message)" }
}

public struct LeaderStatus: Codable, Equatable, Sendable {
    public struct Worker: Codable, Equatable, Sendable {
        public var name: String
        public var appliedRevision: UInt64
        public var lag: UInt64
        public var secondsSinceHeard: Double
        /// Whether the state digest of the worker's replica, as its last
        /// heartbeat reported it, is the leader's at that revision:
        /// `agrees`, `differs`, or `unknown` (the worker sent none, or the
        /// leader cannot tell); absent from leaders before it was reported.
        public var digest: String?
        /// The worker group it is placed in (`cogwire.md` §6a; absent: none).
        public var group: String?
        /// How many open scope instances it owns (absent from leaders before it was reported).
        public var instances: UInt64?
        /// The mechanisms whose root is placed on it (`cogwire.md` §6a), by
        /// name, sorted; absent when none (and from leaders before it was reported).
        public var roots: [String]?
        /// True when it said hello as a tool (`cogd get`, `cogd tail
        /// --connect`: it reads the state and closes); absent for a worker
        /// (and from leaders before it was reported).
        public var tool: Bool?
        /// The keys of the app settings its hello named (`cogd worker --set`,
        /// `--settings`; never their values), sorted; absent when none (and
        /// from leaders and workers before they were reported).
        public var settings: [String]?

        public init(
            name: String, appliedRevision: UInt64, lag: UInt64, secondsSinceHeard: Double, digest: String? = nil, group: String? = nil,
            instances: UInt64? = nil, roots: [String]? = nil, tool: Bool? = nil, settings: [String]? = nil
        ) {
            self.tool = tool
            self.settings = settings
            self.group = group
            self.instances = instances
            self.roots = roots
            self.name = name
            self.appliedRevision = appliedRevision
            self.lag = lag
            self.secondsSinceHeard = secondsSinceHeard
            self.digest = digest
        }
    }

    public var epoch: UInt64
    public var revision: UInt64
    public var workers: [Worker]
    /// Error replies, rejections and the leader's events, by code: on the
    /// wire a map keyed by each code's text (`count(_:)` reads it by code).
    public var errorCounts: [String: UInt64]
    public var openScopeInstances: [UInt64]
    /// Where the leader's serving thread and ZeroMQ's I/O thread run, in
    /// words (absent from leaders before it was reported).
    public var placement: String?
    /// The leader's durable commits (absent from leaders before they were reported).
    public var commits: Commits?
    /// The cogd version the leader runs (`cogd version`; absent from leaders before it was reported).
    public var version: String?
    /// Seconds since the leader started serving (absent from leaders before it was reported).
    public var uptimeSeconds: Double?
    /// The leader's `--heartbeat-timeout`: a worker silent this long is
    /// given up (absent from leaders before it was reported; `cogd status`
    /// then assumes the default, 5 s).
    public var heartbeatTimeoutSeconds: Double?
    /// Op requests whose body refused since the leader started, by op and
    /// code, sorted (absent when none, and from leaders before refusals).
    public var refusals: [RefusalCount]?
    /// How the leader ships its log to standbys (`--sync`, `ha.md` §9;
    /// absent without it, and from leaders before it was reported).
    public var replication: Replication?
    /// The heap allocations the leader's serving thread has made since it
    /// started: only from a leader that counts them (the lab's, which its
    /// benchmarks start), absent otherwise.
    public var servingAllocations: UInt64?

    /// The leader's shipping to standbys, as `cogd status` shows it.
    public struct Replication: Codable, Equatable, Sendable {
        /// `sync`, `degraded`, `held` or `async` (`protocol/metrics.md` §3b).
        public var state: String
        /// The standbys etcd's sync key names.
        public var named: [String]
        /// Commits shipped in this epoch, and those whose replies may leave.
        public var shipped: UInt64
        public var released: UInt64
        /// The connected standbys and the commits each has not acknowledged, by name.
        public var standbys: [Standby]

        public struct Standby: Codable, Equatable, Sendable {
            public var node: String
            public var lag: UInt64

            public init(node: String, lag: UInt64) {
                self.node = node
                self.lag = lag
            }
        }

        public init(state: String, named: [String], shipped: UInt64, released: UInt64, standbys: [Standby]) {
            self.state = state
            self.named = named
            self.shipped = shipped
            self.released = released
            self.standbys = standbys
        }
    }

    /// How many requests of one op were refused with one code (`_other`
    /// for both: the pairs past the leader's limit, `protocol/metrics.md`).
    public struct RefusalCount: Codable, Equatable, Sendable {
        public var op: String
        public var code: String
        public var count: UInt64

        public init(op: String, code: String, count: UInt64) {
            self.op = op
            self.code = code
            self.count = count
        }
    }

    /// How long the leader's LMDB commits take: what durability costs it now.
    public struct Commits: Codable, Equatable, Sendable {
        /// Commits since the leader started.
        public var count: UInt64
        /// How many of the latest commits the figures below cover.
        public var window: UInt64
        /// The commit time's median and 99th percentile over the window, in µs.
        public var p50Micros: Double
        public var p99Micros: Double
        /// Turns per commit over the window (group commit: more under load).
        public var turnsPerCommit: Double

        public init(count: UInt64, window: UInt64, p50Micros: Double, p99Micros: Double, turnsPerCommit: Double) {
            self.count = count
            self.window = window
            self.p50Micros = p50Micros
            self.p99Micros = p99Micros
            self.turnsPerCommit = turnsPerCommit
        }
    }

    public init(
        epoch: UInt64, revision: UInt64, workers: [Worker], errorCounts: [CogdCode: UInt64], openScopeInstances: [UInt64],
        placement: String? = nil, commits: Commits? = nil
    ) {
        self.epoch = epoch
        self.revision = revision
        self.workers = workers
        self.errorCounts = LeaderStatus.byText(errorCounts)
        self.openScopeInstances = openScopeInstances
        self.placement = placement
        self.commits = commits
    }

    /// How many times the leader counted `code`.
    public func count(_ code: CogdCode) -> UInt64 { errorCounts[code.text] ?? 0 }

    /// Counts by code as the wire carries them, keyed by each code's text.
    public static func byText(_ counts: [CogdCode: UInt64]) -> [String: UInt64] {
        Dictionary(counts.map { ($0.key.text, $0.value) }, uniquingKeysWith: &+)
    }
}

/// Why bytes are not a message this side accepts.
public struct WireDecodeError: Error, Equatable, Sendable {
    public let code: CogdCode
    public let message: String

    public init(code: CogdCode, message: String) {
        self.code = code
        self.message = message
    }

    /// The `error` message that answers the bytes.
    public var wireError: WireError { WireError(code, message) }
}

extension WireMessage {
    private struct Envelope: Codable {
        var v: UInt64
        var type: String
        var body: CBORValue?
    }

    private struct Empty: Codable {}

    /// The message's one frame.
    public func encoded() -> [UInt8] {
        switch self {
        case .reply(let reply): reply.frame()
        case .op(let request): request.frame()
        case .ship(let epoch, let sequence, let commit): WireMessage.shipFrame(epoch: epoch, sequence: sequence, commit: commit)
        case .shipAck(let node, let sequence): WireMessage.shipAckFrame(node: node, sequence: sequence)
        default: encodedGenerically()
        }
    }

    /// The message's frame through the general encoder (what the direct writers must equal).
    package func encodedGenerically() -> [UInt8] {
        let encoder = CBOREncoder()
        // Every body is made of this module's own types (texts, numbers,
        // arrays, maps with text keys): one that does not encode is a bug
        // here, never a peer's doing, and sending `null` or no frame in its
        // place would lose a reply without a word.
        func tree<T: Encodable>(_ value: T) -> CBORValue {
            do { return try encoder.encodeTree(value) } catch {
                preconditionFailure("internal inconsistency: a \(typeName) message's body does not encode: \(error)")
            }
        }
        let body: CBORValue?
        switch self {
        case .hello(let worker, let lastRevision, let rig, let group, let tool, let settings):
            var fields: [(key: CBORValue, value: CBORValue)] = [(.text("worker"), .text(worker)), (.text("lastRevision"), .unsigned(lastRevision))]
            if let rig { fields.append((.text("rig"), tree(rig))) }
            if let group { fields.append((.text("group"), .text(group))) }
            if tool { fields.append((.text("tool"), .bool(true))) }
            if let settings, !settings.isEmpty { fields.append((.text("settings"), .array(settings.map { .text($0) }))) }
            body = .map(fields)
        case .welcome(let epoch, let lastRevision, let turnsEndpoint, let lastSequence, let group):
            var fields: [String: CBORValue] = [
                "epoch": CBORValue.unsigned(epoch), "lastRevision": .unsigned(lastRevision), "turns": .text(turnsEndpoint),
                "lastSequence": .unsigned(lastSequence),
            ]
            if let group { fields["group"] = .text(group) }
            body = tree(fields)
        case .snapshotRequest(let inParts):
            // A whole-snapshot request has no body, as before parts existed.
            body = inParts ? .map([(.text("parts"), .bool(true))]) : nil
        case .statusRequest:
            body = nil
        case .snapshot(let epoch, let revision, let entries, let part, let more, let stateDigest):
            var fields: [(key: CBORValue, value: CBORValue)] = [
                (.text("epoch"), .unsigned(epoch)), (.text("revision"), .unsigned(revision)),
                (.text("entries"), tree(entries)),
            ]
            // A whole snapshot is written as before parts existed.
            if part > 0 || more { fields += [(.text("part"), .unsigned(part)), (.text("more"), .bool(more))] }
            if let stateDigest { fields.append((.text("stateDigest"), .bytes(stateDigest.bytes))) }
            body = .map(fields)
        case .catchUpRequest(let from):
            body = tree(["from": from])
        case .turns(let epoch, let records):
            body = .map([
                (.text("epoch"), .unsigned(epoch)),
                (.text("records"), .array(records.map { .encoded($0.encoded()) })),
            ])
        case .op(let request):
            body = tree(request)
        case .reply(let reply):
            body = tree(reply)
        case .heartbeat(let worker, let revision, let stateDigest):
            var fields: [(key: CBORValue, value: CBORValue)] = [(.text("worker"), .text(worker)), (.text("revision"), .unsigned(revision))]
            if let stateDigest { fields.append((.text("stateDigest"), .bytes(stateDigest.bytes))) }
            body = .map(fields)
        case .goodbye(let worker):
            body = .map([(.text("worker"), .text(worker))])
        case .error(let error):
            body = tree(error)
        case .status(let status):
            body = tree(status)
        case .scopeRegister(let registration):
            body = tree(registration)
        case .scopeRegistered(let worker, let registration, let revision, let instances):
            body = .map([
                (.text("worker"), .text(worker)), (.text("registration"), .unsigned(registration)),
                (.text("revision"), .unsigned(revision)), (.text("instances"), tree(instances)),
            ])
        case .standbyHello(let node, let logID, let epoch, let revision, let stateDigest, let lastCommit):
            var fields: [(key: CBORValue, value: CBORValue)] = [
                (.text("node"), .text(node)), (.text("epoch"), .unsigned(epoch)), (.text("revision"), .unsigned(revision)),
            ]
            if let logID { fields.append((.text("log"), .bytes(logID))) }
            if let stateDigest { fields.append((.text("stateDigest"), .bytes(stateDigest.bytes))) }
            if let lastCommit {
                fields.append((.text("commit"), .map([(.text("epoch"), .unsigned(lastCommit.epoch)), (.text("number"), .unsigned(lastCommit.number))])))
            }
            body = .map(fields)
        case .shipWelcome(let epoch, let sequence):
            body = .map([(.text("epoch"), .unsigned(epoch)), (.text("sequence"), .unsigned(sequence))])
        case .shipResync(let epoch, let revision):
            body = .map([(.text("epoch"), .unsigned(epoch)), (.text("revision"), .unsigned(revision))])
        case .ship(let epoch, let sequence, let commit):
            body = .map([(.text("epoch"), .unsigned(epoch)), (.text("sequence"), .unsigned(sequence)), (.text("commit"), .bytes(commit))])
        case .shipAck(let node, let sequence):
            body = .map([(.text("node"), .text(node)), (.text("sequence"), .unsigned(sequence))])
        case .shipCrashed(let epoch, let request, let op, let digest, let signal):
            body = .map([
                (.text("epoch"), .unsigned(epoch)), (.text("worker"), .text(request.worker)), (.text("seq"), .unsigned(request.sequence)),
                (.text("op"), .text(op)), (.text("digest"), .bytes(digest)), (.text("signal"), .unsigned(signal)),
            ])
        case .shipCopy(let epoch, let sequence, let offset, let data, let more):
            body = .map([
                (.text("epoch"), .unsigned(epoch)), (.text("sequence"), .unsigned(sequence)), (.text("offset"), .unsigned(offset)),
                (.text("data"), .bytes(data)), (.text("more"), .bool(more)),
            ])
        case .standbyCopied(let node, let sequence):
            body = .map([(.text("node"), .text(node)), (.text("sequence"), .unsigned(sequence))])
        case .notLeader(let leader, let epoch):
            body = .map([(.text("leader"), .text(leader)), (.text("epoch"), .unsigned(epoch))])
        }
        do { return try encoder.encode(Envelope(v: WireMessage.version, type: typeName, body: body)) } catch {
            preconditionFailure("internal inconsistency: a \(typeName) message does not encode: \(error)")
        }
    }

    /// The worker a request, hello, heartbeat or registration names.
    public var workerName: String? {
        switch self {
        case .hello(let worker, _, _, _, _, _), .heartbeat(let worker, _, _), .goodbye(let worker): worker
        case .op(let request): request.request.worker
        case .scopeRegister(let spec): spec.worker
        default: nil
        }
    }

    /// Decodes one frame; a frame this side cannot accept throws a
    /// `WireDecodeError` whose code is the error reply to send.
    /// `limit`: the leader reads requests up to `maximumSize`; a worker or
    /// tool reads what its leader sends (snapshots, turns) up to
    /// `maximumLeaderMessageSize`.
    public static func decode(_ frame: [UInt8], limit: Int = maximumSize) throws(WireDecodeError) -> WireMessage {
        guard frame.count <= limit else {
            throw WireDecodeError(code: .oversize, message: "message of \(frame.count) bytes exceeds the \(limit)-byte limit")
        }
        if let request = OpRequest(scanning: frame) { return .op(request) }
        if let reply = OpReply(scanning: frame) { return .reply(reply) }
        if let shipping = try scanShipping(frame) { return shipping }
        if let turns = WireMessage.scanTurns(frame) { return turns }
        let decoder = CBORDecoder()
        let tree: CBORValue
        do {
            tree = try CBORValue.parse(frame)
        } catch {
            throw WireDecodeError(code: .malformed, message: "not a cogwire message: \(error)")
        }
        guard let versionItem = tree["v"], let typeItem = tree["type"] else {
            throw WireDecodeError(code: .malformed, message: "not a cogwire message: no `v` and `type`")
        }
        // Any `v` but the integer 1 (a negative number, 1.0, text…) is a
        // version this side does not speak.
        guard let versionNumber = versionItem.unsignedValue, versionNumber == version else {
            let shown = CBORText.display(versionItem)
            throw WireDecodeError(
                code: .version,
                message: "protocol version \(shown.count > 40 ? String(shown.prefix(40)) + "…" : shown) is not supported (this side speaks \(version))")
        }
        guard let type = typeItem.textValue else {
            throw WireDecodeError(code: .malformed, message: "not a cogwire message: `type` must be text")
        }
        let envelope = Envelope(v: versionNumber, type: type, body: tree["body"])
        func body<T: Decodable>(_ type: T.Type) throws(WireDecodeError) -> T {
            do {
                return try decoder.decode(T.self, fromTree: envelope.body ?? .null)
            } catch {
                throw WireDecodeError(code: .malformed, message: "\(envelope.type) body: \(error)")
            }
        }
        switch envelope.type {
        case "hello":
            struct Hello: Decodable {
                var worker: String; var lastRevision: UInt64; var rig: CogRig.Fingerprint?; var group: String?; var tool: Bool?
                var settings: [String]?
            }
            let hello = try body(Hello.self)
            return .hello(worker: hello.worker, lastRevision: hello.lastRevision, rig: hello.rig, group: hello.group, tool: hello.tool ?? false,
                settings: hello.settings)
        case "welcome":
            struct Welcome: Decodable {
                var epoch: UInt64
                var lastRevision: UInt64
                var turns: String
                var lastSequence: UInt64?
                var group: String?
            }
            let welcome = try body(Welcome.self)
            return .welcome(
                epoch: welcome.epoch, lastRevision: welcome.lastRevision, turnsEndpoint: welcome.turns,
                lastSequence: welcome.lastSequence ?? 0, group: welcome.group)
        case "snapshot-request":
            struct Request: Decodable { var parts: Bool? }
            return .snapshotRequest(inParts: envelope.body == nil ? false : (try body(Request.self).parts ?? false))
        case "status-request": return .statusRequest
        case "snapshot":
            struct Snapshot: Decodable {
                var epoch: UInt64
                var revision: UInt64
                var entries: [SnapshotEntry]
                var part: UInt64?
                var more: Bool?
                var stateDigest: [UInt8]?
            }
            let snapshot = try body(Snapshot.self)
            return .snapshot(
                epoch: snapshot.epoch, revision: snapshot.revision, entries: snapshot.entries, part: snapshot.part ?? 0,
                more: snapshot.more ?? false, stateDigest: try WireMessage.stateDigest(snapshot.stateDigest, in: "snapshot"))
        case "catch-up-request":
            struct CatchUp: Decodable { var from: UInt64 }
            return .catchUpRequest(from: try body(CatchUp.self).from)
        case "turns":
            // Each record is decoded from its own bytes, so its checksum is checked.
            struct Turns: Decodable { var epoch: UInt64; var records: [CBORValue] }
            let turns = try body(Turns.self)
            var records: [TurnRecord] = []
            for (index, item) in turns.records.enumerated() {
                do {
                    records.append(try TurnRecord.decode(CBORWriter.encode(item)))
                } catch {
                    throw WireDecodeError(code: .malformed, message: "turns body: record \(index): \(error)")
                }
            }
            return .turns(epoch: turns.epoch, records: records)
        case "op": return .op(try body(OpRequest.self))
        case "reply": return .reply(try body(OpReply.self))
        case "heartbeat":
            struct Heartbeat: Decodable { var worker: String; var revision: UInt64; var stateDigest: [UInt8]? }
            let heartbeat = try body(Heartbeat.self)
            return .heartbeat(
                worker: heartbeat.worker, revision: heartbeat.revision,
                stateDigest: try WireMessage.stateDigest(heartbeat.stateDigest, in: "heartbeat"))
        case "goodbye":
            struct Goodbye: Decodable { var worker: String }
            return .goodbye(worker: try body(Goodbye.self).worker)
        case "error": return .error(try body(WireError.self))
        case "status": return .status(try body(LeaderStatus.self))
        case "scope-register": return .scopeRegister(try body(ScopeRegistration.self))
        case "scope-registered":
            struct Registered: Decodable { var worker: String; var registration: UInt64; var revision: UInt64; var instances: [ScopeMember] }
            let registered = try body(Registered.self)
            return .scopeRegistered(
                worker: registered.worker, registration: registered.registration, revision: registered.revision,
                instances: registered.instances)
        case "standby-hello":
            struct Commit: Decodable { var epoch: UInt64; var number: UInt64 }
            struct Hello: Decodable {
                var node: String; var log: [UInt8]?; var epoch: UInt64; var revision: UInt64; var stateDigest: [UInt8]?; var commit: Commit?
            }
            let hello = try body(Hello.self)
            try WireMessage.checkNode(hello.node, in: "standby-hello")
            guard hello.log.map({ $0.count == 16 }) ?? true else {
                throw WireDecodeError(code: .malformed, message: "standby-hello body: `log` must be 16 bytes")
            }
            guard hello.commit.map({ $0.number > 0 }) ?? true else {
                throw WireDecodeError(code: .malformed, message: "standby-hello body: `commit.number` must be 1 or more")
            }
            return .standbyHello(
                node: hello.node, logID: hello.log, epoch: hello.epoch, revision: hello.revision,
                stateDigest: try WireMessage.stateDigest(hello.stateDigest, in: "standby-hello"),
                lastCommit: hello.commit.map { CommitName(epoch: $0.epoch, number: $0.number) })
        case "ship-welcome":
            struct Welcome: Decodable { var epoch: UInt64; var sequence: UInt64 }
            let welcome = try body(Welcome.self)
            return .shipWelcome(epoch: welcome.epoch, sequence: welcome.sequence)
        case "ship-resync":
            struct Resync: Decodable { var epoch: UInt64; var revision: UInt64 }
            let resync = try body(Resync.self)
            return .shipResync(epoch: resync.epoch, revision: resync.revision)
        case "ship":
            struct Ship: Decodable { var epoch: UInt64; var sequence: UInt64; var commit: [UInt8] }
            let ship = try body(Ship.self)
            return .ship(epoch: ship.epoch, sequence: ship.sequence, commit: ship.commit)
        case "ship-copy":
            struct Copy: Decodable { var epoch: UInt64; var sequence: UInt64; var offset: UInt64; var data: [UInt8]; var more: Bool }
            let copy = try body(Copy.self)
            return .shipCopy(epoch: copy.epoch, sequence: copy.sequence, offset: copy.offset, data: copy.data, more: copy.more)
        case "standby-copied":
            struct Copied: Decodable { var node: String; var sequence: UInt64 }
            let copied = try body(Copied.self)
            try WireMessage.checkNode(copied.node, in: "standby-copied")
            return .standbyCopied(node: copied.node, sequence: copied.sequence)
        case "ship-ack":
            struct Ack: Decodable { var node: String; var sequence: UInt64 }
            let ack = try body(Ack.self)
            try WireMessage.checkNode(ack.node, in: "ship-ack")
            return .shipAck(node: ack.node, sequence: ack.sequence)
        case "ship-crashed":
            struct Crashed: Decodable { var epoch: UInt64; var worker: String; var seq: UInt64; var op: String; var digest: [UInt8]; var signal: UInt64 }
            let crashed = try body(Crashed.self)
            guard (1...255).contains(crashed.worker.utf8.count) else {
                throw WireDecodeError(code: .malformed, message: "ship-crashed body: `worker` must be 1 to 255 bytes")
            }
            guard crashed.op.utf8.count <= WireMessage.maximumCrashedOpBytes else {
                throw WireDecodeError(code: .malformed, message: "ship-crashed body: `op` is longer than \(WireMessage.maximumCrashedOpBytes) bytes")
            }
            guard crashed.digest.count == RequestDigest.size else {
                throw WireDecodeError(code: .malformed, message: "ship-crashed body: `digest` must be \(RequestDigest.size) bytes")
            }
            guard (1...255).contains(crashed.signal) else {
                throw WireDecodeError(code: .malformed, message: "ship-crashed body: `signal` must be 1 to 255")
            }
            return .shipCrashed(
                epoch: crashed.epoch, request: RequestID(worker: crashed.worker, sequence: crashed.seq), op: crashed.op, digest: crashed.digest,
                signal: crashed.signal)
        case "not-leader":
            struct NotLeader: Decodable { var leader: String; var epoch: UInt64 }
            let answer = try body(NotLeader.self)
            guard answer.leader.utf8.count <= maximumEndpointLength else {
                throw WireDecodeError(code: .malformed, message: "not-leader body: `leader` is longer than \(maximumEndpointLength) bytes")
            }
            return .notLeader(leader: answer.leader, epoch: answer.epoch)
        default:
            throw WireDecodeError(code: .unknownType, message: "unknown message type `\(envelope.type)`")
        }
    }
}

extension WireMessage {
    /// A `stateDigest` field: absent, or exactly 16 bytes (anything else is malformed).
    static func stateDigest(_ bytes: [UInt8]?, in type: String) throws(WireDecodeError) -> StateDigest? {
        guard let bytes else { return nil }
        guard let digest = StateDigest(bytes: bytes) else {
            throw WireDecodeError(
                code: .malformed, message: "\(type) body: a stateDigest is \(StateDigest.size) bytes, not \(bytes.count)")
        }
        return digest
    }
}

extension OpRequest {
    /// Reads an `op` frame laid out as `frame()` writes it (the leader's hot
    /// path), without building a tree; nil for anything else.
    package init?(scanning frame: [UInt8]) {
        var scanner = CBORScanner(frame)
        guard scanner.mapCount() == 3, scanner.skip(text: "v"), scanner.unsigned() == WireMessage.version,
            scanner.skip(text: "body"), let fields = scanner.mapCount(), scanner.skip(text: "op"), let op = scanner.text()
        else { return nil }
        var name: String?
        if scanner.skip(text: "name") {
            guard let text = scanner.text() else { return nil }
            name = text
        }
        guard scanner.skip(text: "request"), scanner.mapCount() == 2, scanner.skip(text: "seq"), let sequence = scanner.unsigned(),
            scanner.skip(text: "worker"), let worker = scanner.text(), scanner.skip(text: "argument"),
            let argument = scanner.byteString()
        else { return nil }
        var instance: UInt64?
        if scanner.skip(text: "instance") {
            guard let value = scanner.unsigned() else { return nil }
            instance = value
        }
        guard fields == 3 + (name == nil ? 0 : 1) + (instance == nil ? 0 : 1), scanner.skip(text: "type"),
            scanner.skip(text: "op"), scanner.isAtEnd
        else { return nil }
        self.init(request: RequestID(worker: worker, sequence: sequence), op: op, argument: argument, instance: instance, name: name)
    }

    /// The request's message frame, written directly in deterministic key
    /// order (byte-equal to the generic encoding; the op vector checks it).
    public func frame() -> [UInt8] {
        var writer = CBORWriter(reservingCapacity: 80 + op.utf8.count + argument.count + (name?.utf8.count ?? 0))
        writer.appendHead(major: 5, 3)  // v, body, type
        writer.appendText("v")
        writer.appendHead(major: 0, WireMessage.version)
        writer.appendText("body")
        // op, name, request, argument, instance (shorter keys first, then bytewise).
        writer.appendHead(major: 5, 3 + (name == nil ? 0 : 1) + (instance == nil ? 0 : 1))
        writer.appendText("op")
        writer.appendText(op)
        if let name {
            writer.appendText("name")
            writer.appendText(name)
        }
        writer.appendText("request")
        writer.appendHead(major: 5, 2)  // seq, worker
        writer.appendText("seq")
        writer.appendHead(major: 0, request.sequence)
        writer.appendText("worker")
        writer.appendText(request.worker)
        writer.appendText("argument")
        writer.appendHead(major: 2, UInt64(argument.count))
        writer.appendRaw(argument)
        if let instance {
            writer.appendText("instance")
            writer.appendHead(major: 0, instance)
        }
        writer.appendText("type")
        writer.appendText("op")
        return writer.bytes
    }
}

extension OpReply {
    /// Reads a `reply` frame laid out as `frame()` writes it (a worker's hot
    /// path), without building a tree; nil for anything else.
    package init?(scanning frame: [UInt8]) {
        var scanner = CBORScanner(frame)
        guard scanner.mapCount() == 3, scanner.skip(text: "v"), scanner.unsigned() == WireMessage.version,
            scanner.skip(text: "body"), let fields = scanner.mapCount()
        else { return nil }
        var earlier: Bool?
        switch fields {
        case 2: break
        case 3:
            guard scanner.skip(text: "earlier"), scanner.skipTrue() else { return nil }
            earlier = true
        default: return nil
        }
        guard scanner.skip(text: "outcome"), scanner.mapCount() == 1 else { return nil }
        let outcome: Outcome
        if scanner.skip(text: "applied") {
            guard scanner.mapCount() == 1, scanner.skip(text: "revision"), let revision = scanner.unsigned() else { return nil }
            outcome = .applied(revision: revision)
        } else if scanner.skip(text: "unchanged") {
            guard scanner.mapCount() == 0 else { return nil }
            outcome = .unchanged
        } else if scanner.skip(text: "rejected") {
            switch scanner.mapCount() {
            case 4:
                // A refusal: the fields earlier readers read, then its own.
                guard scanner.skip(text: "code"), scanner.text() != nil, scanner.skip(text: "detail"), scanner.text() != nil,
                    scanner.skip(text: "reason"), scanner.text() != nil, scanner.skip(text: "refusal"), scanner.mapCount() == 2,
                    scanner.skip(text: "code"), let code = scanner.text(), scanner.skip(text: "reason"), let reason = scanner.text()
                else { return nil }
                outcome = .refused(code: code, reason: reason)
            case 3:
                guard scanner.skip(text: "code"), let code = scanner.text(), scanner.skip(text: "detail"), let detail = scanner.text(),
                    scanner.skip(text: "reason"), scanner.text() != nil
                else { return nil }
                outcome = .rejected(code: CogdCode(code), detail: detail)
            case 1:
                // A leader before code and detail were fields (or a dedup answer it stored).
                guard scanner.skip(text: "reason"), let reason = scanner.text() else { return nil }
                outcome = OpReply.Outcome(legacyReason: reason)
            default:
                return nil
            }
        } else {
            return nil
        }
        guard scanner.skip(text: "request"), scanner.mapCount() == 2, scanner.skip(text: "seq"), let sequence = scanner.unsigned(),
            scanner.skip(text: "worker"), let worker = scanner.text(), scanner.skip(text: "type"), scanner.skip(text: "reply"),
            scanner.isAtEnd
        else { return nil }
        self.init(request: RequestID(worker: worker, sequence: sequence), outcome: outcome, earlier: earlier)
    }
}

extension OpReply {
    /// The reply's message frame, written directly in deterministic key
    /// order (byte-equal to the generic encoding; the reply vectors check it).
    public func frame() -> [UInt8] {
        // The frame's keys and numbers take about 110 bytes; a rejection or refusal adds its texts twice (detail and reason).
        var writer = CBORWriter(reservingCapacity: 128 + request.worker.utf8.count + outcome.textBytes)
        if case .applied(let revision) = outcome, earlier != true {
            // The common reply (one per op the leader applies): its fixed parts are written as ready-made bytes.
            writer.appendRaw(OpReply.appliedHead)
            writer.appendHead(major: 0, revision)
            writer.appendRaw(OpReply.requestHead)
            writer.appendHead(major: 0, request.sequence)
            writer.appendRaw(OpReply.workerKey)
            writer.appendText(request.worker)
            writer.appendRaw(OpReply.replyTail)
            return writer.bytes
        }
        writer.appendHead(major: 5, 3)  // v, body, type
        writer.appendText("v")
        writer.appendHead(major: 0, WireMessage.version)
        writer.appendText("body")
        if earlier == true {
            writer.appendHead(major: 5, 3)  // earlier, outcome, request
            writer.appendText("earlier")
            writer.appendRaw([0xf5])  // true
        } else {
            writer.appendHead(major: 5, 2)  // outcome, request
        }
        writer.appendText("outcome")
        writer.appendHead(major: 5, 1)
        switch outcome {
        case .applied(let revision):
            writer.appendText("applied")
            writer.appendHead(major: 5, 1)
            writer.appendText("revision")
            writer.appendHead(major: 0, revision)
        case .unchanged:
            writer.appendText("unchanged")
            writer.appendHead(major: 5, 0)
        case .rejected(let code, let detail):
            writer.appendText("rejected")
            writer.appendHead(major: 5, 3)  // code, detail, reason
            writer.appendText("code")
            writer.appendText(code.text)
            writer.appendText("detail")
            writer.appendText(detail)
            writer.appendText("reason")
            writer.appendText(outcome.reason ?? "")
        case .refused(let code, let reason):
            writer.appendText("rejected")
            writer.appendHead(major: 5, 4)  // code, detail, reason, refusal
            writer.appendText("code")
            writer.appendText(OpReply.Outcome.refusedCode.text)
            writer.appendText("detail")
            writer.appendText(OpReply.Outcome.refusedDetail(code: code, reason: reason))
            writer.appendText("reason")
            writer.appendText(outcome.reason ?? "")
            writer.appendText("refusal")
            writer.appendHead(major: 5, 2)  // code, reason
            writer.appendText("code")
            writer.appendText(code)
            writer.appendText("reason")
            writer.appendText(reason)
        }
        writer.appendText("request")
        writer.appendHead(major: 5, 2)  // seq, worker
        writer.appendText("seq")
        writer.appendHead(major: 0, request.sequence)
        writer.appendText("worker")
        writer.appendText(request.worker)
        writer.appendText("type")
        writer.appendText("reply")
        return writer.bytes
    }
}

extension OpReply {
    /// The fixed parts of an `applied` reply frame, in `frame()`'s order: up
    /// to the revision's head, from there to the sequence's, the worker's
    /// key, and the end.
    static let appliedHead: [UInt8] = {
        var writer = CBORWriter()
        writer.appendHead(major: 5, 3)  // v, body, type
        writer.appendText("v")
        writer.appendHead(major: 0, WireMessage.version)
        writer.appendText("body")
        writer.appendHead(major: 5, 2)  // outcome, request
        writer.appendText("outcome")
        writer.appendHead(major: 5, 1)
        writer.appendText("applied")
        writer.appendHead(major: 5, 1)
        writer.appendText("revision")
        return writer.bytes
    }()
    static let requestHead: [UInt8] = {
        var writer = CBORWriter()
        writer.appendText("request")
        writer.appendHead(major: 5, 2)  // seq, worker
        writer.appendText("seq")
        return writer.bytes
    }()
    static let workerKey: [UInt8] = {
        var writer = CBORWriter()
        writer.appendText("worker")
        return writer.bytes
    }()
    static let replyTail: [UInt8] = {
        var writer = CBORWriter()
        writer.appendText("type")
        writer.appendText("reply")
        return writer.bytes
    }()
}

extension WireMessage {
    /// Reads a `turns` frame laid out as `turnsFrame` writes it (what every
    /// replica reads most), records included, without a tree; nil for
    /// anything else (records with scope events among them).
    static func scanTurns(_ frame: [UInt8]) -> WireMessage? {
        guard var scanner = scannedToBody(frame),
            scanner.mapCount() == 2, scanner.skip(text: "epoch"), let epoch = scanner.unsigned(), scanner.skip(text: "records"),
            let count = scanner.arrayCount(), count <= UInt64(frame.count)
        else { return nil }
        var records: [TurnRecord] = []
        records.reserveCapacity(Int(min(count, 1_024)))  // the count is untrusted until the records are read
        for _ in 0..<count {
            guard let record = TurnRecord(scanning: &scanner) else { return nil }
            records.append(record)
        }
        guard scanner.skip(text: "type"), scanner.skip(text: "turns"), scanner.isAtEnd else { return nil }
        return .turns(epoch: epoch, records: records)
    }

    /// A `turns` frame built from records already encoded by the store:
    /// byte-equal to `.turns(epoch:records:).encoded()` without re-encoding.
    public static func turnsFrame(epoch: UInt64, batch: EncodedTurnBatch) -> [UInt8] {
        turnsFrame(epoch: epoch, batch: batch, records: 0..<batch.count)
    }

    /// What one entry adds to a `snapshot` part, for splitting: its bytes
    /// and its map's keys and heads.
    public static func snapshotEntrySize(name: String, key: [UInt8]?, value: [UInt8]) -> Int {
        name.utf8.count + (key?.count ?? 0) + value.count + 32
    }

    /// A snapshot of `entries` in parts of about `target` bytes each (a
    /// single larger entry goes alone; no entries: one empty part).
    public static func snapshotParts(
        epoch: UInt64, revision: UInt64, entries: [SnapshotEntry], target: Int = snapshotPartTarget, stateDigest: StateDigest? = nil
    ) -> [WireMessage] {
        var groups: [[SnapshotEntry]] = [[]]
        var size = 0
        for entry in entries {
            let entrySize = snapshotEntrySize(name: entry.name, key: entry.key, value: entry.value)
            if size > 0, size + entrySize > target {
                groups.append([])
                size = 0
            }
            groups[groups.count - 1].append(entry)
            size += entrySize
        }
        return groups.enumerated().map { index, group in
            .snapshot(
                epoch: epoch, revision: revision, entries: group, part: UInt64(index), more: index < groups.count - 1,
                stateDigest: stateDigest)
        }
    }

    /// The batch as `turns` frames of about `target` bytes each, in order
    /// (a record larger than `target` goes alone).
    public static func turnsFrames(epoch: UInt64, batch: EncodedTurnBatch, target: Int = turnsMessageTarget) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var first = 0
        while first < batch.count {
            let start = first == 0 ? 0 : batch.ends[first - 1]
            var end = first + 1
            while end < batch.count, batch.ends[end] - start <= target { end += 1 }
            frames.append(turnsFrame(epoch: epoch, batch: batch, records: first..<end))
            first = end
        }
        return frames
    }

    private static func turnsFrame(epoch: UInt64, batch: EncodedTurnBatch, records: Range<Int>) -> [UInt8] {
        let start = records.lowerBound == 0 ? 0 : batch.ends[records.lowerBound - 1]
        let end = records.isEmpty ? start : batch.ends[records.upperBound - 1]
        return frame(type: "turns", capacity: end - start + 48) { writer in
            writer.appendHead(major: 5, 2)  // epoch, records
            writer.appendText("epoch")
            writer.appendHead(major: 0, epoch)
            writer.appendText("records")
            writer.appendHead(major: 4, UInt64(records.count))
            writer.appendRaw(batch.bytes[start..<end])
        }
    }

    /// A frame written directly: the envelope's keys in their order (`v`,
    /// `body`, `type`) around the body `body` writes, its map head included.
    static func frame(type: String, capacity: Int, body: (inout CBORWriter) -> Void) -> [UInt8] {
        var writer = CBORWriter(reservingCapacity: capacity)
        writer.appendHead(major: 5, 3)  // v, body, type
        writer.appendText("v")
        writer.appendHead(major: 0, version)
        writer.appendText("body")
        body(&writer)
        writer.appendText("type")
        writer.appendText(type)
        return writer.bytes
    }

    /// A scanner past a frame's `v` (this version) and `body` keys, at the
    /// body's map head; nil for a frame laid out otherwise.
    static func scannedToBody(_ frame: [UInt8]) -> CBORScanner? {
        var scanner = CBORScanner(frame)
        guard scanner.mapCount() == 3, scanner.skip(text: "v"), scanner.unsigned() == version, scanner.skip(text: "body") else { return nil }
        return scanner
    }
}

extension WireMessage {
    /// A standby's node name is a cluster node's (`ha.md` §1): anything else is `malformed`
    /// (it would be written into etcd's space-separated sync key).
    static func checkNode(_ node: String, in type: String) throws(WireDecodeError) {
        guard ArbiterRecords.isValidName(node) else {
            throw WireDecodeError(code: .malformed, message: "\(type) body: `node` must be 1 to 64 letters, digits, '_', '.' or '-'")
        }
    }
}

extension OpReply.Outcome {
    /// Room for the outcome's texts in a frame (each said twice: as its field and in `reason`).
    var textBytes: Int {
        switch self {
        case .applied, .unchanged: 0
        case .rejected(let code, let detail): 2 * (code.text.utf8.count + detail.utf8.count) + 16
        case .refused(let code, let reason): 3 * (code.utf8.count + reason.utf8.count) + 32
        }
    }
}
