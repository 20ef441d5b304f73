import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// What the leader core admits and what it refuses before any body runs
/// (`cogwire.md` §2, §3, §4, §8), asserted on the core: no sockets.
@MainActor
@Suite("Leader core: admission")
struct AdmissionTests {
    @Test func `an op runs whether or not its name said hello, and replies come out only once the batch is committed`() throws {
        let leader = try CoreHarness()
        // A one-off requester (`cogd call`) never says hello.
        var effects = leader.core.step(.message(from: peer("call"), frames: [try Wire.open("alice", 5, worker: "call-1", seq: 1).encoded()]), now: .zero)
        #expect(effects.isEmpty, "nothing goes out before the batch ends")
        effects = leader.core.step(.endBatch, now: .zero)
        guard effects.count == 1, case .commit(let commit) = effects[0] else {
            Issue.record("expected one commit, got \(effects)")
            return
        }
        #expect(commit.drafts.map(\.name) == ["ledger.open"])
        #expect(commit.drafts[0].origin.request == RequestID(worker: "call-1", sequence: 1))
        #expect(commit.index == .unindexedFrom(1), "the first applied reply left out of dedup marks where the rebuild starts")
        let revisions = try leader.log.append(commit, secondsSince1970: CoreHarness.recordTime.timeIntervalSince1970)
        effects = leader.core.step(.committed(revisions), now: .zero)
        guard effects.count == 2, case .publish(let published) = effects[0], case .send(let to, let frame) = effects[1] else {
            Issue.record("expected publish then the reply, got \(effects)")
            return
        }
        #expect(published == 1..<2)
        #expect(to == peer("call"))
        #expect(try WireMessage.decode(frame) == .reply(OpReply(request: RequestID(worker: "call-1", sequence: 1), outcome: .applied(revision: 1))))

        // A worker that said hello on this connection: its ops run too.
        #expect(leader.send("a", Wire.hello("w")) == [.welcome(epoch: 1, lastRevision: 1, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)])
        #expect(leader.outcome("a", try Wire.open("bob", 3, worker: "w", seq: 1)) == .applied(revision: 2))
        #expect(try leader.accounts() == ["alice", "bob"])
        #expect(leader.ports.noted == [RequestID(worker: "call-1", sequence: 1), RequestID(worker: "w", sequence: 1)])
    }

    @Test func `an unknown op is rejected unknown-op, kept in dedup, and writes nothing`() throws {
        let leader = try CoreHarness()
        let rob = Wire.op("bank.rob", [0xa0], worker: "t", seq: 1)
        #expect(leader.outcome("t", rob) == rejected(.unknownOp, "no op named `bank.rob` is registered"))
        #expect(leader.log.lastRevision == 0)
        #expect(leader.log.dedup.keys.map(\.description) == ["t#1"])
        #expect(leader.ports.noted.isEmpty, "a body that never runs is not noted")
        // A retry is answered from dedup.
        #expect(leader.outcome("t", rob) == rejected(.unknownOp, "no op named `bank.rob` is registered"))
        #expect(leader.core.errorCounts == ["unknown-op": 1])
    }

    @Test func `an undecodable argument is rejected bad-argument and writes nothing`() throws {
        let leader = try CoreHarness()
        let argument: [UInt8] = [0xa0]  // an empty map: no account, no balance
        var expected = ""
        do {
            _ = try CBORDecoder().decode(Opening.self, from: argument)
            Issue.record("an empty map decodes as an opening")
        } catch {
            expected = "\(error)"
        }
        #expect(leader.outcome("t", Wire.op("ledger.open", argument, worker: "t", seq: 1)) == rejected(.badArgument, expected))
        let garbage: [UInt8] = [0xff]
        do {
            _ = try CBORDecoder().decode(Opening.self, from: garbage)
        } catch {
            expected = "\(error)"
        }
        #expect(leader.outcome("t", Wire.op("ledger.open", garbage, worker: "t", seq: 2)) == rejected(.badArgument, expected))
        #expect(leader.log.lastRevision == 0)
        #expect(try leader.accounts().isEmpty)
        #expect(leader.core.errorCounts == ["bad-argument": 2])
    }

    @Test func `request sequences 0 and 2^63 and above are bad-request and stored nowhere`() throws {
        let leader = try CoreHarness()
        for sequence in [0, UInt64(1) << 63, .max] {
            #expect(
                leader.outcome("t", try Wire.open("a\(sequence)", 1, worker: "t", seq: sequence))
                    == rejected(.badRequest, "request sequences are 1 to 2^63-1; this one is \(sequence)"))
        }
        #expect(leader.log.dedup.isEmpty && leader.log.lastRevision == 0)
        // Nothing counted as answered: the welcome says 0 and sequence 1 runs.
        #expect(leader.send("t", Wire.hello("t")) == [.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)])
        #expect(leader.outcome("t", try Wire.open("alice", 1, worker: "t", seq: 1)) == .applied(revision: 1))
        // The highest sequence admitted.
        #expect(leader.outcome("t", try Wire.open("bob", 1, worker: "t", seq: (1 << 63) - 1)) == .applied(revision: 2))
        #expect(leader.core.errorCounts == ["bad-request": 3])
    }

    @Test func `worker names over 255 bytes, empty or holding NUL are bad-request for an op and malformed otherwise`() throws {
        let leader = try CoreHarness()
        let long = String(repeating: "w", count: 256)
        #expect(
            leader.outcome("t", try Wire.open("n", 1, worker: long, seq: 1))
                == rejected(.badRequest, "worker names are 1 to 255 bytes of UTF-8; this one has 256"))
        #expect(leader.outcome("t", try Wire.open("n", 1, worker: "", seq: 1)) == rejected(.badRequest, "worker names are 1 to 255 bytes of UTF-8; this one has 0"))
        #expect(leader.outcome("t", try Wire.open("n", 1, worker: "a\u{0}b", seq: 1)) == rejected(.badRequest, "worker names hold no NUL character"))
        // Two-byte characters count as bytes.
        #expect(
            leader.outcome("t", try Wire.open("n", 1, worker: String(repeating: "é", count: 128), seq: 1))
                == rejected(.badRequest, "worker names are 1 to 255 bytes of UTF-8; this one has 256"))
        let malformed: [(WireMessage, String)] = [
            (Wire.hello(long), "worker names are 1 to 255 bytes of UTF-8; this one has 256"),
            (Wire.heartbeat("a\u{0}b"), "worker names hold no NUL character"),
            (Wire.registerAccounts(long), "worker names are 1 to 255 bytes of UTF-8; this one has 256"),
            (Wire.hello(""), "worker names are 1 to 255 bytes of UTF-8; this one has 0"),
        ]
        for (message, text) in malformed {
            #expect(leader.error("t", message) == WireError(.malformed, text), "\(message.typeName)")
        }
        #expect(leader.log.dedup.isEmpty && leader.log.lastRevision == 0, "stored nowhere")
        // 255 bytes is a name.
        let longest = String(repeating: "w", count: 255)
        #expect(leader.send("t", Wire.hello(longest)).first?.typeName == "welcome")
        #expect(leader.outcome("t", try Wire.open("n", 1, worker: longest, seq: 1)) == .applied(revision: 1))
        #expect(leader.core.errorCounts == ["bad-request": 4, "malformed": 4])
    }

    @Test func `malformed frames, two frames, an unknown type and a wrong version get their error codes and serving goes on`() throws {
        let leader = try CoreHarness()
        let hello = Wire.hello("w").encoded()
        let sent = leader.batch(frames: [
            ("p", [[0xff, 0x13, 0x37]]),
            ("p", [hello, hello]),
            ("p", []),
            ("p", [CBORValue.map([(.text("v"), .unsigned(1)), (.text("type"), .text("gossip"))]).encodedBytes]),
            ("p", [CBORValue.map([(.text("v"), .unsigned(9)), (.text("type"), .text("hello"))]).encodedBytes]),
            ("p", [CBORValue.map([(.text("v"), .float(1.0)), (.text("type"), .text("hello"))]).encodedBytes]),
            ("p", [CBORValue.map([(.text("v"), .unsigned(1)), (.text("type"), .text("hello")), (.text("body"), .unsigned(3))]).encodedBytes]),
            ("p", [CBORValue.map([(.text("v"), .unsigned(1)), (.text("body"), .null)]).encodedBytes]),
            ("p", [[UInt8](repeating: 0, count: WireMessage.maximumSize + 1)]),
            ("p", [hello]),
        ])
        let errors = sent.errors("p")
        #expect(errors.map(\.code) == ["malformed", "malformed", "malformed", "unknown-type", "version", "version", "malformed", "malformed", "oversize"])
        #expect(errors[1].message == "expected one frame after the identity, got 2")
        #expect(errors[2].message == "expected one frame after the identity, got 0")
        #expect(errors[3].message == "unknown message type `gossip`")
        #expect(errors[4].message == "protocol version 9 is not supported (this side speaks 1)")
        #expect(errors[5].message == "protocol version 1.0 is not supported (this side speaks 1)")
        #expect(errors[6].message.hasPrefix("hello body: "))
        #expect(errors[7].message == "not a cogwire message: no `v` and `type`")
        #expect(errors[8].message == "message of \(WireMessage.maximumSize + 1) bytes exceeds the \(WireMessage.maximumSize)-byte limit")
        #expect(sent["p"].last == .welcome(epoch: 1, lastRevision: 0, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0), "the hello after them is served")
        #expect(leader.core.errorCounts == ["malformed": 5, "unknown-type": 1, "version": 2, "oversize": 1])
    }

    @Test func `messages the leader does not serve are not-allowed`() throws {
        let leader = try CoreHarness()
        let request = RequestID(worker: "w", sequence: 1)
        let refused: [WireMessage] = [
            .reply(OpReply(request: request, outcome: .applied(revision: 1))),
            .welcome(epoch: 1, lastRevision: 0, turnsEndpoint: "x"),
            .turns(epoch: 1, records: []),
            .error(WireError(.busy, "no")),
            .snapshot(epoch: 1, revision: 0, entries: []),
        ]
        for message in refused {
            #expect(
                leader.error("p", message) == WireError(.notAllowed, "`\(message.typeName)` is not a request the leader serves"),
                "\(message.typeName)")
        }
        #expect(leader.core.errorCounts == ["not-allowed": 5])
        // A status request is served by the driver.
        let sent = leader.batch([("p", .statusRequest)])
        #expect(sent.statusRequests == [peer("p")] && sent.messages.isEmpty)
    }

    @Test func `a request that cannot be noted as running is refused unavailable, runs nothing, and its retry runs`() throws {
        let leader = try CoreHarness()
        leader.ports.failingNotes = 1
        #expect(
            leader.outcome("t", try Wire.open("alice", 5, worker: "t", seq: 1))
                == rejected(.unavailable, "cannot note the running request: simulated: the note could not be written"))
        #expect(leader.log.lastRevision == 0 && leader.log.dedup.isEmpty)
        #expect(leader.outcome("t", try Wire.open("alice", 5, worker: "t", seq: 1)) == .applied(revision: 1))
        #expect(try leader.balance("alice") == 5)
    }

    @Test func `a turn whose record would be too large is undone, rejected too-large and kept in dedup`() throws {
        // A limit below what any record takes (the bound counts names, keys, values and 1 KiB).
        let leader = try CoreHarness(maximumRecordBytes: 1_000)
        let open = try Wire.open("alice", 5, worker: "t", seq: 1)
        // "ledger.open" 11 + 1,024; ledger.accounts 15 + ["alice"] 7 + 32; ledger.balance 14 + "alice" 6 + 5 1 + 32.
        let tooLarge = rejected(.tooLarge, "the turn's record would take about 1142 bytes; a record holds at most 1000")
        #expect(leader.outcome("t", open) == tooLarge)
        #expect(leader.log.lastRevision == 0)
        #expect(leader.log.dedup.keys.map(\.description) == ["t#1"])
        #expect(leader.core.cogs.peek(accountsCog).isEmpty, "the turn is undone on the leader's graph")
        #expect(leader.outcome("t", open) == tooLarge, "a retry is answered from dedup")
        #expect(leader.core.errorCounts == ["too-large": 1])
    }
}
