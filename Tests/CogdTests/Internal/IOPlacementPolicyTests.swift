import Testing

@testable import CogCluster

@Suite("ZeroMQ I/O thread placement policy")
struct IOPlacementPolicyTests {
    @Test func `ZeroMQ's I/O thread spreads under load and comes back when requests come one at a time`() {
        var policy = IOPlacementPolicy()
        var changes: [Bool] = []
        for _ in 0..<1_000 { if let change = policy.observe(batch: 1) { changes.append(change) } }
        #expect(changes.isEmpty && !policy.spread, "one message per batch never spreads it")
        for _ in 0..<20 { if let change = policy.observe(batch: 30) { changes.append(change) } }
        #expect(changes == [true] && policy.spread)
        // Busy and quiet batches in turn (2 on average) keep it where it is.
        for index in 0..<200 { if let change = policy.observe(batch: index % 2 == 0 ? 3 : 1) { changes.append(change) } }
        #expect(changes == [true])
        for _ in 0..<100 { if let change = policy.observe(batch: 1) { changes.append(change) } }
        #expect(changes == [true, false] && !policy.spread)
    }
}
