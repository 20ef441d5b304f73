import Foundation
import Testing

/// The cluster bench runs end to end (real leader child, echo servers, an
/// in-process worker) and prints one JSON object per figure. Speed is not
/// judged here (`cogd bench` on a release build is where it is).
@Suite("cogd bench cluster and groups (smoke)", .serialized, .timeLimit(.minutes(10)))
struct BenchSmokeTests {
    @Test func `the round-trip shape prints its figures beside their baselines`() throws {
        let result = try runCogdLab(["bench", "cluster", "--only", "round-trip", "--runs", "1", "--json", "--ports", "32200-32209"], timeout: .seconds(90))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let figures = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        // The leader's two and the two echo servers' ports, from --ports, said at the start and with each figure.
        let ports = try #require(figures.first?["ports"] as? [Int], "\(result.stdout)")
        #expect(ports.count == 4 && Set(ports).count == 4 && ports.allSatisfy((32_200...32_209).contains), "\(ports)")
        #expect(figures.allSatisfy { $0["ports"] as? [Int] == ports })
        #expect(
            result.stderr.hasPrefix("bench cluster: loopback ports \(ports.map(String.init).joined(separator: ", ")) on 127.0.0.1 (from --ports 32200-32209)\n"),
            "\(result.stderr)")
        let names = figures.compactMap { $0["name"] as? String }
        #expect(names == [
            "cluster.round-trip.p50", "cluster.round-trip.p99", "cluster.worker-round-trip.p50", "cluster.raw-zmq-echo.p50",
            "cluster.raw-lmdb-commit.p50", "cluster.round-trip.p50-vs-echo-with-commit",
        ])
        for figure in figures {
            #expect((figure["value"] as? Double ?? 0) > 0, "\(figure)")
            #expect(figure["unit"] as? String == "us")
        }
        let first = try #require(figures.first)
        #expect((first["baseline"] as? Double ?? 0) > 0)
        #expect(first["ratio"] is Double)
    }

    @Test func `with --curve the round trip is measured again against a CURVE leader, beside the same without`() throws {
        let result = try runCogdLab(["bench", "cluster", "--only", "round-trip", "--runs", "1", "--curve", "--json"], timeout: .seconds(100))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let figures = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let names = figures.compactMap { $0["name"] as? String }
        #expect(names == [
            "cluster.round-trip.p50", "cluster.round-trip.p99", "cluster.worker-round-trip.p50", "cluster.raw-zmq-echo.p50",
            "cluster.raw-lmdb-commit.p50", "cluster.round-trip.p50-vs-echo-with-commit", "cluster.curve.round-trip.p50",
        ])
        let curve = try #require(figures.last)
        #expect((curve["value"] as? Double ?? 0) > 0, "\(curve)")
        #expect((curve["baseline"] as? Double ?? 0) > 0, "\(curve)")
        #expect(curve["ratio"] is Double)
        #expect(curve["unit"] as? String == "us")
        #expect(curve["baselineKind"] as? String == "without-curve")
        // The raw baselines are still there, and say nothing of CURVE.
        #expect(figures.dropLast().allSatisfy { $0["baselineKind"] == nil })
    }

    @Test func `with --curve the text output puts each CURVE figure beside the same without, as a ratio`() throws {
        let result = try runCogdLab(["bench", "cluster", "--only", "round-trip", "--runs", "1", "--curve"], timeout: .seconds(100))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("cluster.round-trip.p50 ") && $0.contains("   raw ") }, "\(result.stdout)")
        let curve = try #require(lines.first { $0.hasPrefix("round trip p50 with CURVE: ") }, "\(result.stdout)")
        #expect(curve.contains(" µs vs ") && curve.contains(" µs without (") && curve.hasSuffix("×)"), "\(curve)")
    }

    @Test func `bench groups with two workers prints the child ops per second beside raw LMDB, and the move beside the heartbeat timeout`() throws {
        let result = try runCogdLab(["bench", "groups", "--only", "workers-2", "--runs", "1", "--json"], timeout: .seconds(110))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let figures = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(figures.compactMap { $0["name"] as? String } == [
            "groups.workers-2.child-ops-per-second", "groups.workers-2.move-reopened.p50", "groups.workers-2.move-live.p50",
            "groups.workers-2.move-live.p99",
        ])
        let rate = try #require(figures.first)
        #expect(rate["unit"] as? String == "ops/s")
        #expect((rate["value"] as? Double ?? 0) > 0 && (rate["baseline"] as? Double ?? 0) > 0, "\(rate)")
        #expect(rate["ratio"] is Double && rate["baselineKind"] == nil, "beside the raw LMDB figure: \(rate)")
        for move in figures.dropFirst() {
            #expect(move["unit"] as? String == "ms")
            #expect((move["value"] as? Double ?? 0) > 0, "\(move)")
            #expect(move["baseline"] as? Double == 2000 && move["baselineKind"] as? String == "heartbeat-timeout", "\(move)")
        }
    }
}
