import Testing

@testable import CogProtocol

@Suite("Workers given up for silence")
struct GoneWorkersTests {
    @Test func `the newest names are kept up to the limit, the longest gone forgotten first`() {
        var gone = GoneWorkers(limit: 3)
        for name in ["a", "b", "c"] { gone.insert(name) }
        #expect(["a", "b", "c"].allSatisfy(gone.contains))
        gone.insert("d")
        #expect(!gone.contains("a"))
        #expect(["b", "c", "d"].allSatisfy(gone.contains))
        #expect(gone.count == 3)
    }

    @Test func `a name that rejoined and went again counts from its latest going`() {
        var gone = GoneWorkers(limit: 3)
        gone.insert("a")
        gone.insert("b")
        gone.remove("a")  // said hello again
        #expect(!gone.contains("a") && gone.count == 1)
        gone.insert("c")
        gone.insert("a")  // silent again: now the newest
        gone.insert("d")  // over the limit: "b" went longest ago
        #expect(!gone.contains("b"))
        #expect(["c", "a", "d"].allSatisfy(gone.contains))
        gone.insert("e")
        #expect(!gone.contains("c"))
        #expect(["a", "d", "e"].allSatisfy(gone.contains))
    }

    @Test func `churn under fresh names holds the newest names and a bounded record of them`() {
        var gone = GoneWorkers(limit: 100)
        var removed: Set<Int> = []
        var longestRecord = 0
        for index in 0..<50_000 {
            gone.insert("worker-\(index)")
            if index % 7 == 0, index >= 3 {
                gone.remove("worker-\(index - 3)")  // one came back
                removed.insert(index - 3)
            }
            longestRecord = max(longestRecord, gone.order.count)
        }
        let stillGone = (0..<50_000).filter { !removed.contains($0) }
        #expect(gone.count == 100)
        #expect(stillGone.suffix(100).allSatisfy { gone.contains("worker-\($0)") })
        #expect(!gone.contains("worker-\(stillGone.dropLast(100).last!)"), "the 101st newest is forgotten")
        #expect(longestRecord <= 2 * 100 + 1, "the going order is compacted: \(longestRecord) entries at most")
    }
}
