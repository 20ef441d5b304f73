import Foundation
import Testing

@Suite("The rigs' extreme values against a real leader (loopback)", .serialized, .timeLimit(.minutes(10)))
struct RigArithmeticTests {
    @Test func `an overflowing open or tick is unchanged, an extreme transfer unchanged or refused, and the leader keeps serving`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let max = String(Int.max)
        let min = String(Int.min)
        // The issue's crash: Int.max in one account, then money into it.
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": \#(max)}"#).hasPrefix("applied revision 1"))
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 100}"#).hasPrefix("unchanged"))
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 0}"#).hasPrefix("applied revision 2"))
        // Money is conserved, so a balance could only overflow by an overdraft: refused.
        #expect(
            try ports.call("ledger.transfer", #"{"from": "bob", "to": "alice", "amount": \#(max)}"#)
                .hasPrefix("refused insufficient-funds: bob has 0, the transfer needs \(max)"))
        #expect(try ports.call("ledger.transfer", #"{"from": "alice", "to": "bob", "amount": \#(min)}"#).hasPrefix("unchanged"))
        #expect(
            try ports.call(
                "ledger.tellerTransfer", #"{"transfer": {"from": "bob", "to": "alice", "amount": \#(max)}, "receipt": "alice"}"#
            ).hasPrefix("refused insufficient-funds: bob has 0"))
        // As the README says: a tick while the hike logger is not running, and one
        // that is not positive, write nothing (`unchanged`, exit 0 — not a rejection).
        #expect(try ports.call("trails.tickHike", "5").hasPrefix("unchanged"))
        #expect(try ports.call("trails.startHike", "true").hasPrefix("applied revision 3"))
        let zero = try runCogd(["call", "--leader", ports.requests, "trails.tickHike", "0"])
        #expect(zero.status == 0 && zero.stdout.hasPrefix("unchanged"), "\(zero.stdout)\(zero.stderr)")
        #expect(try ports.call("trails.tickHike", max).hasPrefix("applied revision 4"))
        #expect(try ports.call("trails.tickHike", "1").hasPrefix("unchanged"))
        // A negative argument follows `--`, or it would read as an option.
        #expect(try runCogd(["call", "--leader", ports.requests, "--", "trails.tickHike", min]).stdout.hasPrefix("unchanged"))
        // A ledger worker sums the balances without trapping.
        let worker = try ports.startWorker("w1")
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.hasSuffix(": ledger total \(max)") } != nil, "\(worker.lines)")
        #expect(try ports.call("ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 5}"#).hasPrefix("applied revision 5"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied 5") } != nil)
        #expect(leader.process.isRunning)
    }
}
