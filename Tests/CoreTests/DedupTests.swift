import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// A request id names one request for good (`cogwire.md` §3, §4): a retry
/// is answered with the first reply and never runs again — in the same
/// batch, in a later one, and after a restart whether its reply was indexed
/// in `dedup` or is kept only by its record.
@MainActor
@Suite("Leader core: dedup")
struct DedupTests {
    static func mismatch(_ request: String) -> OpReply.Outcome {
        rejected(.requestMismatch, "request \(request) was answered for another op or argument; a new request needs a new sequence")
    }

    @Test func `a retry in the same batch is answered with the first reply and runs once`() throws {
        let leader = try CoreHarness()
        let open = try Wire.open("alice", 5, worker: "c", seq: 1)
        let transfer = try Wire.transfer("alice", "alice", 1, worker: "c", seq: 2)  // changes nothing
        let sent = leader.batch([("c", open), ("c", open), ("c", transfer), ("c", transfer), ("c", open)])
        #expect(sent.outcomes("c") == [.applied(revision: 1), .applied(revision: 1), .unchanged, .unchanged, .applied(revision: 1)])
        #expect(leader.log.lastRevision == 1)
        #expect(leader.ports.noted.count == 2, "each body ran once")
        #expect(try leader.balance("alice") == 5)
    }

    @Test func `a retry in a later batch is answered with the first reply and runs once`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 10, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.outcome("c", try Wire.open("bob", 0, worker: "c", seq: 2)) == .applied(revision: 2))
        let transfer = try Wire.transfer("alice", "bob", 3, worker: "c", seq: 3)
        #expect(leader.outcome("c", transfer) == .applied(revision: 3))
        #expect(leader.outcome("c", transfer) == .applied(revision: 3))
        #expect(leader.outcome("c", transfer) == .applied(revision: 3))
        #expect(try leader.balance("alice") == 7 && leader.balance("bob") == 3)
        #expect(leader.log.lastRevision == 3)
        // Not in dedup yet: the records keep those replies.
        #expect(leader.log.dedup.isEmpty)
        #expect(leader.log.unindexedFrom == 1)
        // An unchanged one is kept in dedup at once.
        let again = try Wire.open("alice", 10, worker: "c", seq: 4)
        #expect(leader.outcome("c", again) == .unchanged)
        #expect(leader.log.dedup.keys.map(\.description) == ["c#4"])
        #expect(leader.outcome("c", again) == .unchanged)
        #expect(leader.ports.noted.count == 4)
    }

    @Test func `a retry after a restart is answered from the records when its reply was never indexed`() throws {
        let leader = try CoreHarness()
        let open = try Wire.open("alice", 10, worker: "c", seq: 1)
        let transfer = try Wire.transfer("alice", "bob", 4, worker: "c", seq: 3)
        #expect(leader.outcome("c", open) == .applied(revision: 1))
        #expect(leader.outcome("c", try Wire.open("bob", 0, worker: "c", seq: 2)) == .applied(revision: 2))
        #expect(leader.outcome("c", transfer) == .applied(revision: 3))
        #expect(leader.log.unindexedFrom == 1 && leader.log.dedup.isEmpty)

        // The restarted core rebuilds those replies from the records; its
        // first batch answers the retries from them (nothing indexed yet).
        try leader.restart(indexing: false)
        #expect(leader.core.hasWork, "the rebuilt replies are to be indexed")
        #expect(leader.core.unindexedReplies.map(\.0.description) == ["c#1", "c#2", "c#3"])
        let sent = leader.batch([("c", transfer), ("c", open), ("c", try Wire.transfer("alice", "bob", 5, worker: "c", seq: 3))])
        #expect(sent.outcomes("c") == [.applied(revision: 3), .applied(revision: 1), Self.mismatch("c#3")])
        // That batch indexed them.
        #expect(leader.log.unindexedFrom == nil)
        #expect(leader.log.dedup.keys.map(\.description).sorted() == ["c#1", "c#2", "c#3"])
        #expect(try leader.balance("alice") == 6 && leader.balance("bob") == 4)
        #expect(leader.log.lastRevision == 3)

        // Once more, now from dedup; and the welcome counts on from them.
        try leader.restart()
        #expect(leader.outcome("c", transfer) == .applied(revision: 3))
        #expect(leader.send("c", Wire.hello("c", 3)).first == .welcome(epoch: 3, lastRevision: 3, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 3))
        #expect(leader.log.lastRevision == 3)
        #expect(leader.ports.noted.count == 3, "each body ran once, across both restarts")
    }

    @Test func `the unindexed replies are indexed by the first commit after a restart`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 10, worker: "c", seq: 1)) == .applied(revision: 1))
        try leader.restart()
        let commit = try #require(leader.commits.last)
        #expect(commit.drafts.isEmpty)
        #expect(commit.index == .indexed)
        #expect(commit.replies.map(\.0) == [RequestID(worker: "c", sequence: 1)])
        #expect(leader.log.unindexedFrom == nil && leader.log.dedup.count == 1)
        #expect(leader.core.hasWork == false)
        #expect(leader.outcome("c", try Wire.open("alice", 10, worker: "c", seq: 1)) == .applied(revision: 1))
    }

    @Test func `applied replies are indexed in bulk every 1,024, and retries after a restart are answered from dedup`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 10, worker: "c", seq: 1)) == .applied(revision: 1))
        // 1,022 more applied requests: not yet indexed.
        var greetings: [(String, WireMessage)] = []
        for sequence in 1...1_022 as ClosedRange<UInt64> { greetings.append(("g", try Wire.greet("alice", worker: "g", seq: sequence))) }
        #expect(leader.batch(greetings).outcomes("g").count == 1_022)
        #expect(leader.log.dedup.isEmpty && leader.log.unindexedFrom == 1)
        // The 1,024th is indexed with the rest, in the same commit.
        #expect(leader.outcome("g", try Wire.greet("alice", worker: "g", seq: 1_023)) == .applied(revision: 1_024))
        #expect(leader.commits.last?.index == .indexed)
        #expect(leader.log.dedup.count == 1_024 && leader.log.unindexedFrom == nil)
        // The next applied one starts a new unindexed stretch.
        #expect(leader.outcome("g", try Wire.greet("alice", worker: "g", seq: 1_024)) == .applied(revision: 1_025))
        #expect(leader.log.unindexedFrom == 1_025 && leader.log.dedup.count == 1_024)

        try leader.restart()
        let sent = leader.batch([
            ("g", try Wire.greet("alice", worker: "g", seq: 7)),
            ("g", try Wire.greet("alice", worker: "g", seq: 1_024)),
            ("c", try Wire.open("alice", 10, worker: "c", seq: 1)),
            ("g", try Wire.greet("bob", worker: "g", seq: 7)),
        ])
        #expect(sent.outcomes("g") == [.applied(revision: 8), .applied(revision: 1_025), Self.mismatch("g#7")])
        #expect(sent.outcomes("c") == [.applied(revision: 1)])
        #expect(leader.log.lastRevision == 1_025)
        #expect(try leader.greetings("alice") == 1_024)
    }

    @Test func `the same id with another op or argument is refused request-mismatch and kept nowhere`() throws {
        let leader = try CoreHarness()
        let open = try Wire.open("alice", 5, worker: "c", seq: 1)
        let sent = leader.batch([
            ("c", open),
            ("c", try Wire.open("alice", 6, worker: "c", seq: 1)),  // another argument, same batch
        ])
        #expect(sent.outcomes("c") == [.applied(revision: 1), Self.mismatch("c#1")])
        #expect(leader.outcome("c", try Wire.close("alice", worker: "c", seq: 1)) == Self.mismatch("c#1"))  // another op
        #expect(leader.outcome("c", open) == .applied(revision: 1), "a true retry is still answered")
        // A stored refusal is matched the same way.
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 2)) == .unchanged)
        #expect(leader.outcome("c", try Wire.close("alice", worker: "c", seq: 2)) == Self.mismatch("c#2"))
        #expect(leader.log.lastRevision == 1)
        #expect(leader.log.dedup.keys.map(\.description) == ["c#2"])
        #expect(leader.log.dedup[RequestID(worker: "c", sequence: 2)].map { Array($0.prefix(8)) } == RequestDigest.of(op: "ledger.open", argument: try CBOREncoder().encode(Opening(account: "alice", balance: 5))))
        #expect(leader.core.errorCounts == ["request-mismatch": 3])
    }

    @Test func `a failed commit answers unavailable, writes nothing, undoes the graph, and a retry then runs once`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        leader.log.failingCommits = 1
        let openBob = try Wire.open("bob", 7, worker: "c", seq: 2)
        let unchanged = try Wire.open("alice", 5, worker: "c", seq: 3)
        let sent = leader.batch([("c", openBob), ("c", unchanged), ("c", openBob)])
        let failed = rejected(.unavailable, "the commit failed: disk full (0 bytes free in /data); nothing of this request was kept")
        #expect(sent.outcomes("c") == [failed, failed, failed])
        #expect(sent.failedCommits == 1 && sent.published.isEmpty)
        #expect(leader.log.lastRevision == 1 && leader.log.dedup.isEmpty)
        #expect(leader.core.cogs.peek(accountsCog) == ["alice"], "the failed turn is undone on the leader's graph")
        #expect(leader.core.errorCounts["commit-failed"] == 1)

        // Retried: each runs now, once.
        let retried = leader.batch([("c", openBob), ("c", unchanged), ("c", openBob)])
        #expect(retried.outcomes("c") == [.applied(revision: 2), .unchanged, .applied(revision: 2)])
        #expect(leader.outcome("c", openBob) == .applied(revision: 2))
        #expect(try leader.accounts() == ["alice", "bob"] && leader.balance("bob") == 7)
        #expect(leader.log.lastRevision == 2)
        // The welcome counts from what was committed.
        #expect(leader.send("c", Wire.hello("c", 2)).first == .welcome(epoch: 1, lastRevision: 2, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 3))
    }

    @Test func `a failed commit of the first applied batch leaves no unindexed mark, and the next one sets it`() throws {
        let leader = try CoreHarness()
        leader.log.failingCommits = 1
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1))?.rejection?.code == .unavailable)
        #expect(leader.log.unindexedFrom == nil)
        #expect(leader.core.unindexedReplies.isEmpty, "the given-up reply is not kept for indexing")
        #expect(leader.outcome("c", try Wire.open("alice", 5, worker: "c", seq: 1)) == .applied(revision: 1))
        #expect(leader.log.unindexedFrom == 1)
        try leader.restart()
        #expect(leader.log.dedup.keys.map(\.description) == ["c#1"])
    }

    /// The ledger's ops and `test.openAndGreet`: one request whose body
    /// settles two turns (an opening, then a greeting), so two records.
    static func registryWithTwoTurnOp() throws -> OpRegistry {
        let ledger = CoreHarness.ledgerRegistry()
        var runners: [String: OpRegistry.Runner] = [:]
        for name in ledger.names { runners[name] = ledger.runner(named: name) }
        let open = try #require(ledger.runner(named: "ledger.open"))
        let greet = try #require(ledger.runner(named: "ledger.greet"))
        runners["test.openAndGreet"] = { cogs, argument, codec, name in
            let opening = try codec.decode(Opening.self, from: argument)
            return try open(cogs, argument, codec, name) + greet(cogs, try codec.encode(opening.account), codec, name)
        }
        return OpRegistry(runners: runners)
    }

    @Test func `a request whose body settles two turns is answered with its first revision, also after a restart`() throws {
        let leader = try CoreHarness(registry: Self.registryWithTwoTurnOp())
        let request = Wire.op("test.openAndGreet", try CBOREncoder().encode(Opening(account: "alice", balance: 5)), worker: "c", seq: 1)
        #expect(leader.outcome("c", request) == .applied(revision: 1))
        #expect(leader.log.records.map(\.origin.request) == [RequestID(worker: "c", sequence: 1), RequestID(worker: "c", sequence: 1)])
        #expect(leader.outcome("c", request) == .applied(revision: 1), "a retry before the restart")
        try leader.restart()
        #expect(leader.outcome("c", request) == .applied(revision: 1), "a retry after the restart")

        #expect(leader.log.lastRevision == 2, "it ran once all the same")
        #expect(try leader.greetings("alice") == 1)
    }
}
