import Cog
import CogCluster
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// Snapshot admission and catch-ups (`cogwire.md` §2, §5, §8): both need a
/// hello first; at most 64 snapshots go out at once (a peer asking again
/// replaces its own); one catch-up per peer per batch.
@MainActor
@Suite("Leader core: snapshots and catch-ups")
struct SnapshotCatchUpTests {
    static func helloFirst(_ type: String) -> WireError {
        WireError(.helloFirst, "`\(type)` needs a worker that said hello on this connection; say hello first")
    }

    @Test func `a connection that said no hello gets no snapshot and no catch-up`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        for inParts in [true, false] {
            let sent = leader.batch([("s", .snapshotRequest(inParts: inParts))])
            #expect(sent.snapshots.isEmpty)
            #expect(sent.errors("s") == [Self.helloFirst("snapshot-request")])
        }
        #expect(leader.send("s", .catchUpRequest(from: 1)) == [.error(Self.helloFirst("catch-up-request"))])
        // An op in a name does not hold the name: still no snapshot.
        #expect(leader.batch([("c", .snapshotRequest(inParts: true))]).snapshots.isEmpty)
        #expect(leader.core.errorCounts == ["hello-first": 4])
    }

    @Test func `a snapshot starts at once, of what is committed before the batch`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.send("s", Wire.hello("w")).first?.typeName == "welcome")
        // The request's effect comes out of the message's own step, before the batch's turns commit.
        #expect(leader.core.step(.message(from: peer("c"), frames: [try Wire.open("bob", 7, worker: "c", seq: 2).encoded()]), now: .zero).isEmpty)
        let effects = leader.core.step(.message(from: peer("s"), frames: [WireMessage.snapshotRequest(inParts: true).encoded()]), now: .zero)
        #expect(effects.count == 1)
        if case .startSnapshot(let to, let whole)? = effects.first {
            #expect(to == peer("s") && whole == false)
        } else {
            Issue.record("no snapshot started: \(effects)")
        }
        let whole = leader.core.step(.message(from: peer("s"), frames: [WireMessage.snapshotRequest(inParts: false).encoded()]), now: .zero)
        if case .startSnapshot(_, let isWhole)? = whole.first { #expect(isWhole) } else { Issue.record("no whole snapshot started") }
        let sent = leader.endBatch()
        #expect(sent.outcomes("c") == [.applied(revision: 2)])
        #expect(sent["s"].isEmpty)
    }

    @Test func `at most 64 snapshots go out at once; the 65th is unavailable until one ends`() throws {
        let leader = try CoreHarness()
        var hellos: [(String, WireMessage)] = []
        for n in 1...65 { hellos.append(("p\(n)", Wire.hello("w\(n)"))) }
        _ = leader.batch(hellos)
        var requests: [(String, WireMessage)] = []
        for n in 1...64 { requests.append(("p\(n)", .snapshotRequest(inParts: true))) }
        let started = leader.batch(requests)
        #expect(started.snapshots.count == 64 && started.messages.isEmpty)
        let refusal = WireError(.unavailable, "64 snapshots are being sent, the most at once; ask again later")
        let refused = leader.batch([("p65", .snapshotRequest(inParts: true))])
        #expect(refused.snapshots.isEmpty && refused.errors("p65") == [refusal])
        // A peer already sent one may ask again: it replaces its own.
        #expect(leader.batch([("p7", .snapshotRequest(inParts: false))]).snapshots.map(\.peer) == [peer("p7")])
        #expect(leader.batch([("p65", .snapshotRequest(inParts: true))]).errors("p65") == [refusal])
        // One ends: a slot is free.
        leader.snapshotEnded("p3")
        #expect(leader.batch([("p65", .snapshotRequest(inParts: true))]).snapshots.map(\.peer) == [peer("p65")])
        #expect(leader.batch([("p3", .snapshotRequest(inParts: true))]).errors("p3") == [refusal])
        #expect(leader.core.errorCounts == ["unavailable": 3])
    }

    @Test func `a catch-up sends the committed records from a revision`() throws {
        let leader = try CoreHarness()
        for n in 1...4 as ClosedRange<UInt64> {
            #expect(leader.outcome("c", try Wire.open("a\(n)", Int(n), worker: "c", seq: n)) == .applied(revision: n))
        }
        #expect(leader.send("w", Wire.hello("w", 1)).first?.typeName == "welcome")
        #expect(leader.send("w", .catchUpRequest(from: 2)) == [.turns(epoch: 1, records: Array(leader.log.records[1...]))])
        #expect(leader.send("w", .catchUpRequest(from: 4)) == [.turns(epoch: 1, records: [leader.log.records[3]])])
        #expect(leader.send("w", .catchUpRequest(from: 5)) == [.turns(epoch: 1, records: [])])
        // Records of the batch it arrives in are not committed yet: not in it.
        let sent = leader.batch([("c", try Wire.open("a5", 5, worker: "c", seq: 5)), ("w", .catchUpRequest(from: 4))])
        #expect(sent["w"] == [.turns(epoch: 1, records: [leader.log.records[3]])])
        #expect(sent.published == [5..<6])
    }

    @Test func `a second catch-up from one peer in one batch is busy; the next batch serves it`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        _ = leader.batch([("w", Wire.hello("w")), ("v", Wire.hello("v"))])
        let sent = leader.batch([("w", .catchUpRequest(from: 1)), ("w", .catchUpRequest(from: 1)), ("v", .catchUpRequest(from: 1))])
        #expect(
            sent["w"] == [
                .turns(epoch: 1, records: leader.log.records),
                .error(WireError(.busy, "one catch-up per batch; ask again once the answer to the first arrives")),
            ])
        #expect(sent["v"] == [.turns(epoch: 1, records: leader.log.records)], "another peer is not limited by it")
        #expect(leader.send("w", .catchUpRequest(from: 1)) == [.turns(epoch: 1, records: leader.log.records)])
        #expect(leader.core.errorCounts == ["busy": 1])
    }

    @Test func `a catch-up reply holds at most about 64 KiB of records past its first`() throws {
        let leader = try CoreHarness()
        // Accounts with long names: records of about 3 KiB each, growing.
        var opens: [(String, WireMessage)] = []
        for n in 1...40 as ClosedRange<UInt64> {
            opens.append(("c", try Wire.open(String(repeating: "x", count: 1_500) + "\(n)", 1, worker: "c", seq: n)))
        }
        _ = leader.batch(opens)
        #expect(leader.log.lastRevision == 40)
        #expect(leader.send("w", Wire.hello("w")).first?.typeName == "welcome")
        guard case .turns(_, let records)? = leader.send("w", .catchUpRequest(from: 1)).first else {
            Issue.record("no catch-up reply")
            return
        }
        let expected = try leader.log.records(from: 1, limit: 10_000, maximumBytes: LeaderCore.catchUpReplyBytes)
        #expect(records == expected)
        #expect(records.count > 1 && records.count < 40, "cut by bytes: \(records.count)")
    }

    @Test func `a status request is handed to the driver`() throws {
        let leader = try CoreHarness()
        let sent = leader.batch([("t", .statusRequest), ("t", .statusRequest)])
        #expect(sent.statusRequests == [peer("t"), peer("t")])
        #expect(sent.messages.isEmpty)
    }
}
