import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

@Suite("cogd call against a scripted leader", .serialized, .timeLimit(.minutes(10)))
struct CallScriptedLeaderTests {
    @Test func `a welcome claiming the last sequence makes call --name send 2^63, which a leader refuses, never trap`() throws {
        let leader = try ScriptedLeader()
        let call = try CogdProcess(["call", "ledger.open", #"{"account": "a", "balance": 1}"#, "--name", "n", "--leader", leader.endpoint, "--timeout", "3"])
        defer { call.stop() }
        let hello = try #require(try leader.next())
        guard case .hello(let worker, _, _, _, let tool, _)? = hello.message else {
            Issue.record("expected a hello, got \(String(describing: hello.message))")
            return
        }
        #expect(worker == "n" && tool)
        try leader.send(.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: "tcp://127.0.0.1:1", lastSequence: .max), to: hello.identity)
        // What follows the welcome: the op, numbered one past the last sequence a leader admits.
        var op: OpRequest?
        for _ in 0..<4 where op == nil {
            if case .op(let request)? = try leader.next()?.message { op = request }
        }
        #expect(op?.request == RequestID(worker: "n", sequence: LeaderCore.sequenceLimit))
        waitForExit(call.process, timeout: .seconds(15))
        #expect(call.process.terminationReason == .exit && call.process.terminationStatus == 4, "no answer, no trap: \(call.lines)")
    }
}
