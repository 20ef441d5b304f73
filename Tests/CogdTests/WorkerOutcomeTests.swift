import Cog
import CogCluster
import CogCodec
import CogProtocol
import Foundation
import LedgerRig
import Testing

/// A mechanism that hands its controller to the test.
private struct Teller: Mechanism {
    let name = "Teller"
    let operated: @MainActor (MechanismController) -> Void

    func operate(_ m: MechanismController) { operated(m) }
}

@Suite("Op outcomes on a worker", .serialized, .timeLimit(.minutes(10)))
struct WorkerOutcomeTests {
    @MainActor
    @Test func `a mechanism on a worker sees its overdraft refused insufficient-funds and a good transfer applied at the leader's revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }

        LedgerRig.register()
        var teller: MechanismController?
        let worker = try Worker(
            configuration: Worker.Configuration(name: "teller", leaderEndpoint: ports.requests, rig: LedgerRig.rig.fingerprint),
            mechanisms: [Teller { teller = $0 }])
        defer { worker.close() }

        /// Pumps the worker until `done` holds, for at most 20 s.
        func pump(until done: () -> Bool) throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(20)
            while !done() && ContinuousClock.now < deadline { try worker.pump(waitingUpTo: .milliseconds(20)) }
            return done()
        }
        try #require(try pump { teller != nil }, "the worker synced and operated its mechanism")
        let m = try #require(teller)

        var outcomes: [String: OpOutcome] = [:]
        m.open(account: "alice", with: 30) { outcomes["open alice"] = $0 }
        m.open(account: "bob", with: 0) { outcomes["open bob"] = $0 }
        try #require(try pump { outcomes.count == 2 }, "both openings answered: \(outcomes)")
        m.transfer(from: "alice", to: "bob", amount: 50) { outcomes["overdraft"] = $0 }
        m.transfer(from: "alice", to: "bob", amount: 20) { outcomes["transfer"] = $0 }
        m.open(account: "alice", with: 99) { outcomes["open alice again"] = $0 }
        m.transfer(from: "alice", to: "carol", amount: 1) { outcomes["to nobody"] = $0 }
        try #require(try pump { outcomes.count == 6 }, "every request answered: \(outcomes)")

        #expect(outcomes["overdraft"] == .refused(code: "insufficient-funds", reason: "alice has 30, the transfer needs 50"))
        #expect(outcomes["to nobody"] == .refused(code: "unknown-account", reason: "no open account named carol"))
        #expect(outcomes["open alice again"] == .unchanged)
        guard case .applied(let opened)? = outcomes["open bob"], case .applied(let moved)? = outcomes["transfer"] else {
            Issue.record("the opening and the transfer were not applied: \(outcomes)")
            return
        }
        #expect(moved > opened, "the transfer's revision is the leader's, after the opening's")
        #expect(try pump { worker.appliedRevision >= moved }, "the replica reaches the revision it was told")
        #expect(worker.cogs.peek(balanceCogs["bob"]) == 20)
        #expect(worker.pendingOutcomeCount == 0, "nothing left waiting")
    }

    @MainActor
    @Test func `a worker waits for a bounded number of answers, answering the oldest unavailable past it and the rest when it closes`() throws {
        let leader = try WorkerProtocolTests.ScriptedLeader()
        defer { leader.close() }
        var teller: MechanismController?
        let worker = try leader.replica([Teller { teller = $0 }])
        try #require(try leader.join(worker))
        let deadline = ContinuousClock.now + .seconds(20)
        while teller == nil && ContinuousClock.now < deadline { try worker.pump(waitingUpTo: .milliseconds(20)) }
        let m = try #require(teller, "the worker synced and operated its mechanism")

        var answers: [Int: OpOutcome] = [:]
        for n in 0...Worker.pendingOutcomesLimit {
            m.transfer(from: "alice", to: "bob", amount: 1) { answers[n] = $0 }
            // The scripted leader reads every request and answers none (the socket's queue never fills).
            while try leader.router.receive() != nil {}
        }
        #expect(answers.count == 1, "only the oldest is answered here: \(answers.count)")
        guard case .rejected("unavailable", let detail)? = answers[0] else {
            Issue.record("the oldest is not rejected unavailable: \(String(describing: answers[0]))")
            return
        }
        #expect(detail.hasPrefix("no longer waited for"), "\(detail)")
        #expect(worker.pendingOutcomeCount == Worker.pendingOutcomesLimit)
        worker.close()
        #expect(answers.count == Worker.pendingOutcomesLimit + 1, "closing answers every waiter")
        #expect(answers[Worker.pendingOutcomesLimit] == .rejected(code: "unavailable", detail: "the worker closed before the answer; it may still be applied"))
    }

    @MainActor
    @Test func `an answer from an earlier request reaches the mechanism as the outcome it records, and an unknown reply reaches nobody`() throws {
        let leader = try WorkerProtocolTests.ScriptedLeader()
        defer { leader.close() }
        var teller: MechanismController?
        let worker = try leader.replica([Teller { teller = $0 }])
        defer { worker.close() }
        try #require(try leader.join(worker))
        let deadline = ContinuousClock.now + .seconds(20)
        while teller == nil && ContinuousClock.now < deadline { try worker.pump(waitingUpTo: .milliseconds(20)) }
        let m = try #require(teller, "the worker synced and operated its mechanism")

        var answers: [OpOutcome] = []
        m.transfer(from: "alice", to: "bob", amount: 5) { answers.append($0) }
        guard case .op(let request)? = try leader.next(pumping: worker, matching: { if case .op = $0 { true } else { false } }) else {
            Issue.record("no op request")
            return
        }
        #expect(request.op == "ledger.transfer")
        // A reply to a request nobody waits for (another sequence) changes nothing here.
        try leader.send(.reply(OpReply(request: RequestID(worker: "w1", sequence: request.request.sequence + 100), outcome: .unchanged)))
        try leader.send(.reply(OpReply(request: request.request, outcome: .applied(revision: 6), earlier: true)))
        try leader.send(.reply(OpReply(request: request.request, outcome: .applied(revision: 6), earlier: true)))
        let answered = ContinuousClock.now + .seconds(10)
        while answers.isEmpty && ContinuousClock.now < answered { try worker.pump(waitingUpTo: .milliseconds(20)) }
        // Whatever else is waiting is handled too: a second reply to the same request calls nobody.
        try worker.pump(waitingUpTo: .milliseconds(100))
        #expect(answers == [.applied(revision: 6)])
        #expect(worker.pendingOutcomeCount == 0)
    }
}
