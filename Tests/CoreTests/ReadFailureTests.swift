import Cog
import CogCluster
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// A log the leader cannot read (`cogwire.md` §2, §4): what depends on the
/// read is refused `unavailable` and kept nowhere — never guessed, so a
/// request is never run twice — and serving goes on.
@MainActor
@Suite("Leader core: reads that fail")
struct ReadFailureTests {
    static let dedupUnreadable = "cannot read the dedup table: simulated: cannot read the dedup table"

    @Test func `a dedup lookup that fails refuses the retry unavailable; the next retry is answered as stored`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        let again = try Wire.open("alice", 5, worker: "c", seq: 2)
        #expect(leader.outcome("c", again) == .unchanged)
        leader.reads.failingDedupReads = 1
        #expect(leader.outcome("c", again) == rejected(.unavailable, Self.dedupUnreadable))
        #expect(leader.outcome("c", again) == .unchanged)
        #expect(leader.ports.noted.count == 2, "no body ran for the retries")
        #expect(leader.core.errorCounts == ["unavailable": 1])
    }

    @Test func `a name whose last sequence cannot be read has its request refused unavailable, stored nowhere; the retry runs once`() throws {
        let leader = try CoreHarness()
        leader.reads.failingDedupReads = 1
        let open = try Wire.open("alice", 5, worker: "fresh", seq: 1)
        #expect(leader.outcome("c", open) == rejected(.unavailable, Self.dedupUnreadable))
        #expect(leader.log.lastRevision == 0 && leader.log.dedup.isEmpty)
        #expect(leader.outcome("c", open) == .applied(revision: 1))
        #expect(leader.outcome("c", open) == .applied(revision: 1))
        #expect(leader.log.lastRevision == 1)
    }

    @Test func `a hello whose name's last sequence cannot be read is answered unavailable; the next heartbeat is welcomed`() throws {
        let leader = try CoreHarness()
        leader.reads.failingDedupReads = 1
        #expect(leader.send("w", Wire.hello("w")) == [.error(WireError(.unavailable, Self.dedupUnreadable))])
        #expect(leader.send("w", Wire.heartbeat("w")) == [.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)])
        // Counted as an error reply, not as a request rejected (metrics §3), beside an op rejected unavailable.
        leader.reads.failingDedupReads = 1
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "fresh", seq: 1)) == rejected(.unavailable, Self.dedupUnreadable))
        #expect(leader.core.errorCounts == ["unavailable": 2])
        let (rejections, errors) = leader.core.countsByKind()
        #expect(rejections == ["unavailable": 1])
        #expect(errors == ["unavailable": 1])
    }

    @Test func `a catch-up the turn log cannot be read for is answered unavailable`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.send("w", Wire.hello("w")).first?.typeName == "welcome")
        leader.reads.failingRecordReads = 1
        #expect(leader.send("w", .catchUpRequest(from: 1)) == [.error(WireError(.unavailable, "cannot read the turn log: simulated: cannot read the turn log"))])
        #expect(leader.send("w", .catchUpRequest(from: 1)) == [.turns(epoch: 1, records: leader.log.records)])
    }

    @Test func `a registration whose source cannot be read is not answered as selecting nothing`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.send("w", Wire.hello("w", 1)).first?.typeName == "welcome")
        leader.reads.failingValueReads = 1
        let answer = leader.send("w", Wire.registerAccounts("w"))
        #expect(answer == [.error(WireError(.registerAgain, "cannot read the state table: simulated: cannot read the state table; register the scopes again"))])
        #expect(leader.core.errorCounts == ["register-again": 1])

        // Read again, the source selects alice.
        guard case .scopeRegistered(_, _, _, let members)? = leader.send("w", Wire.registerAccounts("w", number: 2)).first else {
            Issue.record("no registration reply")
            return
        }
        #expect(members.map(\.identity) == [try Wire.identity("alice")])
    }
}
