import Testing

@testable import CogCluster

@Suite("Commit times for cogd status")
struct CommitTimesTests {
    @Test func `the latest commits' median, 99th percentile and turns per commit`() throws {
        var times = CommitTimes(capacity: 3)
        #expect(times.summary == nil)
        times.record(.microseconds(100), turns: 1)
        times.record(.microseconds(300), turns: 1)
        times.record(.microseconds(200), turns: 4)
        let three = try #require(times.summary)
        #expect(three.count == 3 && three.window == 3)
        #expect(three.p50Micros == 200 && three.p99Micros == 300)
        #expect(three.turnsPerCommit == 2)
        // The oldest (100 µs, 1 turn) leaves the window; the count goes on.
        times.record(.microseconds(1_000), turns: 7)
        let four = try #require(times.summary)
        #expect(four.count == 4 && four.window == 3)
        #expect(four.p50Micros == 300 && four.p99Micros == 1_000)
        #expect(four.turnsPerCommit == 4)
    }
}
