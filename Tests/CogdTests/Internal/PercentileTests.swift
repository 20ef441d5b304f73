import Testing

@testable import CogLab
@testable import CogdCommandLine

@Suite("Percentiles in benchmarks and drills")
struct PercentileTests {
    @Test func `nearest rank: p99 of a few samples is the largest, p50 the lower middle`() {
        #expect(ClusterBench.percentile([], 0.5) == 0)
        #expect(ClusterBench.percentile([7], 0.99) == 7)
        #expect(ClusterBench.percentile([2, 1], 0.5) == 1)
        #expect(ClusterBench.percentile([2, 1], 0.99) == 2)
        let ten = (1...10).map(Double.init).shuffled()
        #expect(ClusterBench.percentile(ten, 0) == 1)
        #expect(ClusterBench.percentile(ten, 0.5) == 5)
        #expect(ClusterBench.percentile(ten, 0.9) == 9)
        #expect(ClusterBench.percentile(ten, 0.99) == 10)
        #expect(ClusterBench.percentile(ten, 1) == 10)
        let thousand = (1...1_000).map(Double.init)
        #expect(ClusterBench.percentile(thousand, 0.99) == 990)
    }
}
