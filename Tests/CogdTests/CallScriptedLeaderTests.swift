import CogCluster
import CogLog
import CogWire
import Foundation
import Testing

@Suite("cogd call against a scripted leader", .serialized, .timeLimit(.minutes(3)))
struct CallScriptedLeaderTests {
    @Test func `a welcome claiming the last sequence makes call --name send 2^63, which a leader refuses, never trap`() throws {
        let endpoint = "tcp://127.0.0.1:\(freePort())"
        let context = try ZMQContext()
        let router = try ZMQSocket(context, .router, linger: .zero)
        try router.bind(endpoint)
        defer {
            router.close()
            context.close()
        }
        let call = try CogdProcess(["call", "ledger.open", #"{"account": "a", "balance": 1}"#, "--name", "n", "--leader", endpoint, "--timeout", "3"])
        defer { call.stop() }
        /// The next message the call sends, with its connection's identity.
        func next() throws -> (identity: [UInt8], message: WireMessage)? {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if try ZMQSocket.poll([router], timeout: .milliseconds(100))[0], let frames = try router.receive(), frames.count >= 2 {
                    return (frames[0], try WireMessage.decode(frames[frames.count - 1]))
                }
            }
            return nil
        }
        let hello = try #require(try next())
        guard case .hello(let worker, _, _, _, let tool) = hello.message else {
            Issue.record("expected a hello, got \(hello.message)")
            return
        }
        #expect(worker == "n" && tool)
        _ = try router.send([hello.identity, WireMessage.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: "tcp://127.0.0.1:1", lastSequence: .max).encoded()])
        // What follows the welcome: the op, numbered one past the last sequence a leader admits.
        var op: OpRequest?
        for _ in 0..<4 where op == nil {
            if case .op(let request)? = try next()?.message { op = request }
        }
        #expect(op?.request == RequestID(worker: "n", sequence: LeaderCore.sequenceLimit))
        waitForExit(call.process, timeout: .seconds(15))
        #expect(call.process.terminationReason == .exit && call.process.terminationStatus == 4, "no answer, no trap: \(call.lines)")
    }
}
