import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

/// Byte-exact wire messages under `protocol/vectors/cogwire/`; set
/// COGD_WRITE_VECTORS=1 to regenerate them.
@Suite("Wire vectors")
struct WireVectorTests {
    private var folder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("protocol/vectors/cogwire")
    }

    private func vectors() throws -> [(String, WireMessage)] {
        let encoder = CBOREncoder()
        let request = RequestID(worker: "w1", sequence: 19)
        // The state digest after revision 42 in the turn-record vectors' story (`protocol/vectors/README.md`).
        let after42 = try #require(StateDigest(bytes: [
            0xb0, 0xbb, 0x0f, 0xab, 0x5a, 0xd9, 0xd0, 0x6b, 0xe3, 0x30, 0xf8, 0x82, 0xb7, 0x48, 0x02, 0x2c,
        ]))
        let balance = (name: "ledger.balance", key: try encoder.encode("a"), value: try encoder.encode(6))
        return [
            ("hello", .hello(worker: "w1", lastRevision: 0)),
            ("hello-rig", .hello(
                worker: "w1", lastRevision: 42,
                rig: CogRig.Fingerprint(
                    name: "ledger", schemaVersion: 1, durableSources: ["ledger.accounts", "ledger.balance"], ops: ["ledger.open", "ledger.transfer"]))),
            ("hello-rig-shapes", .hello(
                worker: "w1", lastRevision: 42,
                rig: CogRig.Fingerprint(
                    name: "ledger", schemaVersion: 1, durableSources: ["ledger.accounts", "ledger.balance"], ops: ["ledger.open", "ledger.transfer"],
                    shapes: .init(
                        ops: [
                            "ledger.open": .object([.init(name: "account", shape: .string, isOptional: false), .init(name: "balance", shape: .integer, isOptional: false)]),
                            "ledger.transfer": .object([
                                .init(name: "from", shape: .string, isOptional: false), .init(name: "to", shape: .string, isOptional: false),
                                .init(name: "amount", shape: .integer, isOptional: false), .init(name: "memo", shape: .string, isOptional: true),
                            ]),
                        ],
                        durableSources: [
                            "ledger.accounts": .init(value: .array(.string)), "ledger.balance": .init(value: .integer, key: .string),
                        ])))),
            ("welcome", .welcome(epoch: 3, lastRevision: 42, turnsEndpoint: "tcp://127.0.0.1:5702", lastSequence: 18)),
            ("hello-group", .hello(worker: "w1", lastRevision: 0, group: "greeters")),
            ("hello-tool", .hello(worker: "get-0c4f3c9e-5b1a-4d2e-9f6a-2b7d8e1c3a50", lastRevision: 0, tool: true)),
            ("hello-settings", .hello(worker: "w1", lastRevision: 0, group: "boxOffice", settings: ["hold-seconds", "mail.from"])),
            ("goodbye", .goodbye(worker: "get-0c4f3c9e-5b1a-4d2e-9f6a-2b7d8e1c3a50")),
            ("error-goodbye-not-holder", .error(WireError(
                code: "name-in-use",
                message: "another connection holds worker w1; only the connection that said hello as a name may say goodbye for it"))),
            ("welcome-group", .welcome(epoch: 3, lastRevision: 42, turnsEndpoint: "tcp://127.0.0.1:5702", lastSequence: 0, group: "greeters")),
            ("heartbeat", .heartbeat(worker: "w1", revision: 42, stateDigest: after42)),
            ("snapshot-request", .snapshotRequest(inParts: false)),
            ("snapshot-request-parts", .snapshotRequest(inParts: true)),
            ("snapshot-part", .snapshot(
                epoch: 3, revision: 42,
                entries: [SnapshotEntry(name: "ledger.balance", key: try encoder.encode("a"), value: try encoder.encode(6))],
                part: 1, more: true, stateDigest: after42)),
            ("catch-up-request", .catchUpRequest(from: 43)),
            // Shipping to a standby (ha.md §9); the log id is the `shipped-commit` vector's.
            ("standby-hello", .standbyHello(node: "n2", logID: Array(0x10..<0x20), epoch: 3, revision: 42, stateDigest: after42, lastCommit: CommitName(epoch: 3, number: 17))),
            ("standby-hello-empty", .standbyHello(node: "n2", logID: nil, epoch: 0, revision: 0, stateDigest: nil, lastCommit: nil)),
            ("ship-welcome", .shipWelcome(epoch: 3, sequence: 7)),
            ("ship-resync", .shipResync(epoch: 3, revision: 42)),
            ("ship", .ship(epoch: 3, sequence: 8, commit: ShippedCommit(
                epoch: 3, logID: Array(0x10..<0x20), firstRevision: 43, time: Date(timeIntervalSince1970: 1_800_000_000.5),
                retention: .turns(100_000), pruneLimit: 1_024).encoded())),
            ("ship-ack", .shipAck(node: "n2", sequence: 8)),
            ("status-replication", .status({
                var status = LeaderStatus(epoch: 3, revision: 42, workers: [], errorCounts: [:], openScopeInstances: [])
                status.replication = LeaderStatus.Replication(
                    state: "sync", named: ["n2"], shipped: 42, released: 41, standbys: [.init(node: "n2", lag: 1)])
                return status
            }())),
            ("ship-copy", .shipCopy(epoch: 3, sequence: 7, offset: 1 << 20, data: [0xde, 0xad, 0xbe, 0xef], more: false)),
            ("standby-copied", .standbyCopied(node: "n2", sequence: 7)),
            ("ship-crashed", .shipCrashed(epoch: 3, request: request, op: "ledger.transfer", digest: Array(1...8), signal: 4)),
            // A standby's answer to workers and tools (ha.md §10).
            ("not-leader", .notLeader(leader: "tcp://10.0.0.1:5701", epoch: 3)),
            ("not-leader-none", .notLeader(leader: "", epoch: 0)),
            ("op", .op(OpRequest(
                request: request, op: "ledger.transfer",
                argument: try encoder.encode(["from": CBORValue.text("a"), "to": .text("b"), "amount": .unsigned(4)]),
                instance: 7, name: "Bank.teller.transfer"))),
            ("reply-applied", .reply(OpReply(request: request, outcome: .applied(revision: 43)))),
            ("reply-unchanged", .reply(OpReply(request: request, outcome: .unchanged))),
("reply-earlier", .reply(OpReply(request: request, outcome: .applied(revision: 6), earlier: true))),
            ("reply-refused", .reply(OpReply(
                request: request, outcome: .refused(code: "insufficient-funds", reason: "alice has 30, the transfer needs 50")))),
                        ("reply-rejected", .reply(OpReply(request: request, outcome: .rejected(code: "unknown-op", detail: "no op named `x` is registered")))),
            ("error-version", .error(WireError(code: "version", message: "protocol version 9 is not supported (this side speaks 1)"))),
            ("error-hello-first", .error(WireError(
                code: "hello-first", message: "`heartbeat` needs a worker that said hello on this connection (worker w1 has not); say hello first"))),
            ("error-compacted", .error(WireError(
                code: "compacted",
                message: "revision 3 is no longer in the log: it keeps revisions 40 to 42; sync from a snapshot (snapshot-request)"))),
            ("error-not-your-name", .error(WireError(
                code: "not-your-name",
                message: "key Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID (worker w1, line 2 of the peers file) may act only as w1, not as w2"))),
            ("reply-role-forbids", .reply(OpReply(
                request: RequestID(worker: "dashboard", sequence: 1),
                outcome: .rejected(code: "role-forbids", detail: "key JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6 (observer dashboard, line 4 of the peers file) may not run ops: an observer only reads")))),
            ("reply-request-mismatch", .reply(OpReply(
                request: request,
                outcome: .rejected(code: "request-mismatch", detail: "request w1#19 was answered for another op or argument; a new request needs a new sequence")))),
            ("scope-register", .scopeRegister(ScopeRegistration(
                worker: "w1", registration: 2, path: "Bank.desk.peer", source: "ledger.accounts", key: nil, form: .each, parent: 1 << 32 | 3))),
            ("scope-registered", .scopeRegistered(
                worker: "w1", registration: 2, revision: 42, instances: [ScopeMember(identity: try encoder.encode("a"), instance: 1 << 32 | 4)])),
            ("status-request", .statusRequest),
            ("status", .status(LeaderStatus(
                epoch: 3, revision: 42,
                workers: [
                    LeaderStatus.Worker(name: "w1", appliedRevision: 41, lag: 1, secondsSinceHeard: 0.5, digest: "agrees"),
                    LeaderStatus.Worker(
                        name: "w2", appliedRevision: 42, lag: 0, secondsSinceHeard: 0.25, digest: "agrees", group: "bank", instances: 2,
                        roots: ["Bank"]),
                ],
                errorCounts: ["hello-first": 1], openScopeInstances: [1 << 32 | 4]))),
            ("status-tool", .status(LeaderStatus(
                epoch: 3, revision: 42,
                workers: [
                    LeaderStatus.Worker(
                        name: "tail-7d2b", appliedRevision: 0, lag: 42, secondsSinceHeard: 1.5, digest: "unknown", instances: 0, tool: true),
                    LeaderStatus.Worker(name: "w1", appliedRevision: 42, lag: 0, secondsSinceHeard: 0.5, digest: "agrees", instances: 0),
                ],
                errorCounts: [:], openScopeInstances: []))),
            ("status-settings", .status(LeaderStatus(
                epoch: 3, revision: 42,
                workers: [
                    LeaderStatus.Worker(
                        name: "w1", appliedRevision: 42, lag: 0, secondsSinceHeard: 0.5, digest: "agrees", instances: 0,
                        settings: ["hold-seconds", "mail.from"]),
                    LeaderStatus.Worker(name: "w2", appliedRevision: 42, lag: 0, secondsSinceHeard: 0.25, digest: "agrees", instances: 0),
                ],
                errorCounts: [:], openScopeInstances: []))),
            ("status-uptime", .status({
                var status = LeaderStatus(
                    epoch: 3, revision: 42,
                    workers: [
                        LeaderStatus.Worker(name: "w1", appliedRevision: 41, lag: 1, secondsSinceHeard: 0.5, digest: "agrees"),
                        LeaderStatus.Worker(name: "w2", appliedRevision: 38, lag: 4, secondsSinceHeard: 3.25, digest: "agrees"),
                    ],
                    errorCounts: ["hello-first": 1], openScopeInstances: [1 << 32 | 4])
                status.version = "0.1.0"
                status.uptimeSeconds = 3_723.5
                status.heartbeatTimeoutSeconds = 5
                return status
            }())),
            ("turns", .turns(epoch: 3, records: [
                TurnRecord(
                    revision: 43, epoch: 3, time: Date(timeIntervalSince1970: 1_800_000_000.5), name: "ledger.transfer",
                    origin: TurnOrigin(
                        worker: "w1", instance: 7, request: request,
                        digest: RequestDigest.of(
                            op: "ledger.transfer",
                            argument: try encoder.encode(["from": CBORValue.text("a"), "to": .text("b"), "amount": .unsigned(4)]))),
                    writes: [TurnWrite(name: "ledger.balance", key: try encoder.encode("a"), value: try encoder.encode(6))],
                    // As if the state held only what this record wrote.
                    stateDigest: StateDigest(entries: [balance]))
            ])),
        ]
    }

    @Test func `a batch is published in turns messages of about the target size, big records alone`() throws {
        let encoder = CBOREncoder()
        let sizes = [10, 400, 10, 10, 2_000, 10]
        let records = try sizes.enumerated().map { index, size in
            TurnRecord(
                revision: UInt64(index + 1), epoch: 2, time: Date(timeIntervalSince1970: 1_800_000_000), name: "t",
                writes: [TurnWrite(name: "v", key: nil, value: try encoder.encode(String(repeating: "x", count: size)))])
        }
        let batch = EncodedTurnBatch(records)
        let frames = WireMessage.turnsFrames(epoch: 2, batch: batch, target: 900)
        var revisions: [[UInt64]] = []
        for frame in frames {
            guard case .turns(2, let decoded) = try WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize) else {
                Issue.record("not a turns message")
                return
            }
            revisions.append(decoded.map(\.revision))
            #expect(decoded == decoded.map { record in records[Int(record.revision) - 1] })
        }
        #expect(revisions == [[1, 2, 3, 4], [5], [6]])
        #expect(WireMessage.turnsFrames(epoch: 2, batch: batch).count == 1, "under the default target, one message")
        #expect(WireMessage.turnsFrames(epoch: 2, batch: batch)[0] == WireMessage.turnsFrame(epoch: 2, batch: batch))
        // A request larger than the request limit is refused; the same bytes from the leader are read.
        let large = WireMessage.turnsFrame(epoch: 2, batch: EncodedTurnBatch([TurnRecord(
            revision: 1, epoch: 2, time: Date(timeIntervalSince1970: 1_800_000_000), name: "t",
            writes: [TurnWrite(name: "v", key: nil, value: try encoder.encode(String(repeating: "y", count: 1_100_000)))])]))
        #expect(throws: WireDecodeError.self) { try WireMessage.decode(large) }
        #expect(throws: Never.self) { try WireMessage.decode(large, limit: WireMessage.maximumLeaderMessageSize) }
    }

    @Test func `a snapshot in parts splits at about the target size, a large entry alone, and a small one stays one message`() throws {
        let entries = [10, 400, 10, 10, 2_000, 10].enumerated().map { index, size in
            SnapshotEntry(name: "v", key: [UInt8(index)], value: [UInt8](repeating: 7, count: size))
        }
        let parts = WireMessage.snapshotParts(epoch: 2, revision: 9, entries: entries, target: 800)
        var gathered: [SnapshotEntry] = []
        var shape: [(part: UInt64, count: Int, more: Bool)] = []
        for part in parts {
            guard case .snapshot(2, 9, let chunk, let number, let more, _) = try WireMessage.decode(part.encoded(), limit: WireMessage.maximumLeaderMessageSize) else {
                Issue.record("not a snapshot part")
                return
            }
            gathered += chunk
            shape.append((number, chunk.count, more))
        }
        #expect(gathered == entries)
        #expect(shape.map(\.part) == [0, 1, 2] && shape.map(\.count) == [4, 1, 1] && shape.map(\.more) == [true, true, false])
        // Under the target (or empty): one message, written exactly as a whole snapshot.
        for few in [entries, []] {
            let one = WireMessage.snapshotParts(epoch: 2, revision: 9, entries: few)
            #expect(one.count == 1)
            #expect(one.first?.encoded() == WireMessage.snapshot(epoch: 2, revision: 9, entries: few).encoded())
        }
    }

    @Test func `op and reply frames written by hand are deterministic and decode back`() throws {
        let request = RequestID(worker: "wörker-2", sequence: 70_000)
        let ops = [
            OpRequest(request: request, op: "ledger.open", argument: [0xa0]),
            OpRequest(request: request, op: "ledger.open", argument: [UInt8](repeating: 0x41, count: 300), instance: 1 << 40),
            OpRequest(request: request, op: "x", argument: [0xf6], name: "Bank.desk.open"),
        ]
        for op in ops {
            let frame = WireMessage.op(op).encoded()
            #expect(try CBORValue.parse(frame).encodedBytes == frame)
            #expect(try WireMessage.decode(frame) == .op(op))
            #expect(OpRequest(scanning: frame) == op, "the leader's scanner reads what frame() writes")
        }
        // Another writer's key order is still an op (through the general decoder), just not the scanner's.
        var other = CBORWriter()
        other.appendHead(major: 5, 3)
        other.appendText("type")
        other.appendText("op")
        other.appendText("v")
        other.appendHead(major: 0, WireMessage.version)
        other.appendText("body")
        other.appendRaw(try CBOREncoder().encode(ops[0]))
        #expect(OpRequest(scanning: other.bytes) == nil)
        #expect(try WireMessage.decode(other.bytes) == .op(ops[0]))
        for outcome in [
            OpReply.Outcome.applied(revision: 1 << 33), .unchanged, .rejected(code: "retired-scope", detail: ""), .refused(code: "sold-out", reason: ""),
            .refused(code: "bad-refusal", reason: "a reason\nwith a newline"),
        ] {
            for reply in [OpReply(request: request, outcome: outcome), OpReply(request: request, outcome: outcome, earlier: true)] {
                let frame = WireMessage.reply(reply).encoded()
                #expect(frame == reply.frame(), "frame() writes the generic encoding byte for byte")
                #expect(try CBORValue.parse(frame).encodedBytes == frame)
                #expect(try WireMessage.decode(frame) == .reply(reply))
                #expect(OpReply(scanning: frame) == reply, "a worker's scanner reads what frame() writes")
            }
        }
    }

    @Test func `a rejection carries its code and detail as separate fields beside the reason earlier readers read`() throws {
        let request = RequestID(worker: "w1", sequence: 19)
        let frame = OpReply(request: request, outcome: .rejected(Rejection(.retiredScope, "scope instance 7 is retired"))).frame()
        func field(_ value: CBORValue?, _ key: String) -> CBORValue? {
            guard case .map(let entries)? = value else { return nil }
            return entries.first { $0.key == .text(key) }?.value
        }
        let rejected = field(field(field(try CBORValue.parse(frame), "body"), "outcome"), "rejected")
        #expect(field(rejected, "code") == .text("retired-scope"))
        #expect(field(rejected, "detail") == .text("scope instance 7 is retired"))
        #expect(field(rejected, "reason") == .text("retired-scope: scope instance 7 is retired"))
        #expect(OpReply(scanning: frame)?.outcome.rejection == Rejection(.retiredScope, "scope instance 7 is retired"))
    }

    @Test func `a reply of a leader before code and detail were fields reads its code from the reason`() throws {
        let request = RequestID(worker: "w1", sequence: 19)
        for (reason, expected) in [
            ("unknown-op: no op named `x` is registered", OpReply.Outcome.rejected(code: "unknown-op", detail: "no op named `x` is registered")),
            ("something new: a code this build does not know", .rejected(code: "", detail: "something new: a code this build does not know")),
        ] {
            var writer = CBORWriter(reservingCapacity: 128)
            writer.appendHead(major: 5, 3)
            writer.appendText("v")
            writer.appendHead(major: 0, WireMessage.version)
            writer.appendText("body")
            writer.appendHead(major: 5, 2)
            writer.appendText("outcome")
            writer.appendHead(major: 5, 1)
            writer.appendText("rejected")
            writer.appendHead(major: 5, 1)
            writer.appendText("reason")
            writer.appendText(reason)
            writer.appendText("request")
            writer.appendHead(major: 5, 2)
            writer.appendText("seq")
            writer.appendHead(major: 0, request.sequence)
            writer.appendText("worker")
            writer.appendText(request.worker)
            writer.appendText("type")
            writer.appendText("reply")
            #expect(OpReply(scanning: writer.bytes) == OpReply(request: request, outcome: expected))
            #expect(try WireMessage.decode(writer.bytes) == .reply(OpReply(request: request, outcome: expected)))
            #expect(expected.reason == reason)
        }
    }

    @Test func `damaged frames and records never crash the scanners or the decoders`() throws {
        let request = RequestID(worker: "w1", sequence: 19)
        let record = TurnRecord(
            revision: 43, epoch: 3, time: Date(timeIntervalSince1970: 1_800_000_000.5), name: "ledger.transfer",
            origin: TurnOrigin(worker: "w1", instance: 7, request: request),
            writes: [TurnWrite(name: "ledger.balance", key: try CBOREncoder().encode("a"), value: try CBOREncoder().encode([1, 2]))])
        let commit = ShippedCommit(
            epoch: 3, logID: Array(0x10..<0x20), firstRevision: 43, time: record.time, records: EncodedTurnBatch([record]),
            replies: [.init(request: request, reply: [0xa0])], index: .unindexedFrom(43), retention: .age(seconds: 60)
        ).encoded()
        let samples: [[UInt8]] = [
            WireMessage.op(OpRequest(request: request, op: "ledger.open", argument: [0xa0], instance: 9, name: "Bank.open")).encoded(),
            WireMessage.reply(OpReply(request: request, outcome: .rejected(code: "retired-scope", detail: ""))).encoded(),
            WireMessage.turnsFrame(epoch: 3, batch: EncodedTurnBatch([record, record])),
            record.encoded(),
            // A standby reads these directly (ha.md §9).
            WireMessage.ship(epoch: 3, sequence: 8, commit: commit).encoded(),
            WireMessage.shipAck(node: "n2", sequence: 8).encoded(),
            commit,
        ]
        var generator = SeededGenerator(seed: 7)
        var decoded = 0
        for sample in samples {
            for round in 0..<1_500 {
                var damaged = sample
                if round % 3 == 0 {
                    damaged.removeLast(Int.random(in: 1...damaged.count, using: &generator))
                } else {
                    for _ in 0..<Int.random(in: 1...3, using: &generator) {
                        damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                    }
                }
                if (try? WireMessage.decode(damaged)) != nil { decoded += 1 }
                if (try? TurnRecord.decode(damaged)) != nil { decoded += 1 }
                if (try? ShippedCommit.decode(damaged)) != nil { decoded += 1 }
            }
        }
        // Reaching here is the point (no trap); some damage still decodes (a changed digit).
        #expect(decoded > 0)
    }

    @Test func `a refusal reads as a rejection coded refused to a reader of an earlier build, and as refused to this one`() throws {
        let reply = OpReply(
            request: RequestID(worker: "w1", sequence: 19), outcome: .refused(code: "insufficient-funds", reason: "alice has 30, the transfer needs 50"))
        let frame = reply.frame()
        // What an earlier build reads: the outcome's only key it knows, `rejected`, and its code, detail and reason.
        let rejected = try #require(try CBORValue.parse(frame)["body"]?["outcome"]?["rejected"])
        #expect(rejected["code"]?.textValue == "refused")
        #expect(rejected["detail"]?.textValue == "insufficient-funds: alice has 30, the transfer needs 50")
        #expect(rejected["reason"]?.textValue == "refused: insufficient-funds: alice has 30, the transfer needs 50")
        #expect(CogdCode.refused.uses == .rejection, "a code of its own: an earlier build shows it as sent, neither stored nor transient")
        // This build: the refusal's own fields.
        #expect(rejected["refusal"]?["code"]?.textValue == "insufficient-funds")
        #expect(OpReply(scanning: frame) == reply)
        #expect(try WireMessage.decode(frame) == .reply(reply))
        #expect(OpReply(scanning: frame)?.answeredEarlier.frame() == OpReply(request: reply.request, outcome: reply.outcome, earlier: true).frame())
    }

    @Test func `every wire vector is produced byte for byte and decodes back`() throws {
        let all = try vectors()
        if ProcessInfo.processInfo.environment["COGD_WRITE_VECTORS"] == "1" {
            for (name, message) in all {
                try Data(message.encoded()).write(to: folder.appendingPathComponent("\(name).cbor"))
            }
        }
        for (name, message) in all {
            let stored = Array(try Data(contentsOf: folder.appendingPathComponent("\(name).cbor")))
            #expect(stored == message.encoded(), "vector \(name)")
            #expect(try WireMessage.decode(stored) == message, "vector \(name) decodes")
            if case .turns(let epoch, let records) = message {
                #expect(WireMessage.turnsFrame(epoch: epoch, batch: EncodedTurnBatch(records)) == stored)
            }
        }
    }
}

/// A small deterministic generator (xorshift), so a damaged-input test is reproducible.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed == 0 ? 0x9e37_79b9_7f4a_7c15 : seed }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
