import Testing

@testable import CogLab
@testable import CogdCommandLine

/// `cogd-lab bench quick`, the guard CI runs: which figures it reads from a
/// part's `--json` lines, and how it holds them to their floors.
@Suite("bench quick")
struct QuickBenchTests {
    /// Lines as `bench cluster --json` prints them, with a ports field and a
    /// line that is not a figure.
    let clusterLines = """
        {"name": "cluster.round-trip.p50", "value": 452, "unit": "us", "baseline": 315, "ratio": 1.43, "ports": [1, 2]}
        {"name": "cluster.round-trip.p99", "value": 900, "unit": "us", "baseline": null, "ratio": null}
        cluster.leader-cpu-per-op.clients-16: the leader's cogd-serving thread was not found in /proc
        {"name": "cluster.turns-per-second.clients-16", "value": 56000, "unit": "turns/s", "baseline": 1340000, "ratio": 0.04}
        """

    @Test func `a part's figures are read from its JSON lines`() {
        #expect(
            QuickBench.figures(inJSONLines: clusterLines) == [
                .init(name: "cluster.round-trip.p50", value: 452, ratio: 1.43),
                .init(name: "cluster.round-trip.p99", value: 900, ratio: nil),
                .init(name: "cluster.turns-per-second.clients-16", value: 56000, ratio: 0.04),
            ])
    }

    @Test func `figures within their floors hold; one past, or missing, does not`() {
        let floors = QuickBench.floors(of: QuickBench.parts[1])
        #expect(floors.map(\.figure) == ["cluster.round-trip.p50", "cluster.turns-per-second.clients-16", "cluster.leader-cpu-per-op.clients-16"])
        let verdicts = QuickBench.judge(QuickBench.figures(inJSONLines: clusterLines), floors: floors)
        // The leader's CPU figure is missing from these lines: it fails, named.
        #expect(verdicts.map(\.holds) == [true, true, false])
        #expect(verdicts.map(\.line) == [
            "cluster.round-trip.p50                 ratio 1.43   floor ratio ≤ 1.8   ok",
            "cluster.turns-per-second.clients-16    ratio 0.04   floor ratio ≥ 0.01   ok",
            "cluster.leader-cpu-per-op.clients-16   ratio missing   floor ratio ≤ 16   PAST",
        ])
        // A planted regression: the round trip at twice echo + commit.
        let slow = QuickBench.figures(inJSONLines: clusterLines.replacingOccurrences(of: "\"ratio\": 1.43", with: "\"ratio\": 2.1"))
        #expect(QuickBench.judge(slow, floors: floors)[0].line == "cluster.round-trip.p50                 ratio 2.1   floor ratio ≤ 1.8   PAST")
    }

    @Test func `a figure past its floor is measured again, up to three times, and fails only when past in every measurement`() {
        let floors = QuickBench.floors(of: QuickBench.parts[1])
        func lines(roundTrip: Double) -> [QuickBench.Verdict] {
            let text = clusterLines.replacingOccurrences(of: "\"ratio\": 1.43", with: "\"ratio\": \(roundTrip)")
                + "\n{\"name\": \"cluster.leader-cpu-per-op.clients-16\", \"value\": 20, \"unit\": \"us\", \"baseline\": 2.5, \"ratio\": 8}"
            return QuickBench.judge(QuickBench.figures(inJSONLines: text), floors: floors)
        }
        // Noisy twice, then within: held, after three measurements.
        var roundTrips = [2.1, 1.9, 1.5]
        var said: [String] = []
        let held = QuickBench.measureUntilHeld(name: "cluster", say: { said.append($0) }) { lines(roundTrip: roundTrips.removeFirst()) }
        #expect(held.map(\.holds) == [true, true, true])
        #expect(held[0].measured == 1.5)
        #expect(roundTrips.isEmpty)
        #expect(said == [
            "cluster: cluster.round-trip.p50 past the floor; measuring cluster again (2 of 3)",
            "cluster: cluster.round-trip.p50 past the floor; measuring cluster again (3 of 3)",
        ])
        // A regression is past every time: three measurements, the last number reported.
        roundTrips = [2.1, 2.2, 2.3, 1.0]
        let past = QuickBench.measureUntilHeld(name: "cluster", say: { _ in }) { lines(roundTrip: roundTrips.removeFirst()) }
        #expect(past.map(\.holds) == [false, true, true])
        #expect(past[0].line == "cluster.round-trip.p50                 ratio 2.3   floor ratio ≤ 1.8   PAST")
        #expect(roundTrips == [1.0])
        // Within on the first measurement: measured once.
        roundTrips = [1.2, 2.5]
        _ = QuickBench.measureUntilHeld(name: "cluster", say: { _ in }) { lines(roundTrip: roundTrips.removeFirst()) }
        #expect(roundTrips == [2.5])
    }

    @Test func `the steady turn's allocations are a count: one allocation is past`() {
        let floors = QuickBench.floors(of: QuickBench.parts[2])
        let none = QuickBench.figures(inJSONLines: #"{"name": "graph.steady.allocations", "value": 0, "unit": "allocs/turn"}"#)
        let one = QuickBench.figures(inJSONLines: #"{"name": "graph.steady.allocations", "value": 1, "unit": "allocs/turn"}"#)
        #expect(QuickBench.judge(none, floors: floors).map(\.holds) == [true])
        #expect(QuickBench.judge(one, floors: floors).map(\.line) == ["graph.steady.allocations               value 1   floor value ≤ 0   PAST"])
    }

    @Test func `bench quick takes parts, not shapes, and runs 3 by default`() throws {
        var expected = BenchOptions(suite: .quick, runs: 3)
        #expect(try LabParse.parseBench(["quick"]) == expected)
        expected.only = ["log", "graph"]
        #expect(try LabParse.parseBench(["quick", "--only", "log,graph"]) == expected)
        #expect(throws: Command.UsageError(message: "unknown part 'batch-1' (one of: log, cluster, graph)", subcommand: "bench")) {
            try LabParse.parseBench(["quick", "--only", "batch-1"])
        }
        #expect(throws: Command.UsageError(message: "unknown option '--curve'", subcommand: "bench")) {
            try LabParse.parseBench(["quick", "--curve"])
        }
    }
}
