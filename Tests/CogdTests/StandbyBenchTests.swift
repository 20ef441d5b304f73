@testable import CogLab
import CogdCommandLine
import Foundation
import Testing

/// `cogd-lab bench cluster --standby` runs end to end on a real etcd (a lab
/// etcd, two `leader --ha --sync one` nodes, the raw echo server) in a quick
/// form, and prints what a user reads: its figures, the round trip's ratio
/// to echo + two commits, a failover measured; and leaves nothing running.
/// Speed is not judged here.
@Suite("cogd-lab bench cluster --standby", .serialized, .timeLimit(.minutes(10)))
struct StandbyBenchTests {
    /// The ports the run said it took on stderr (`bench cluster: loopback ports A, B, … on 127.0.0.1 …`).
    static func ports(_ stderr: String) -> [Int] {
        guard let line = stderr.split(separator: "\n").first(where: { $0.hasPrefix("bench cluster: loopback ports ") }),
            let list = line.dropFirst("bench cluster: loopback ports ".count).components(separatedBy: " on ").first
        else { return [] }
        return list.components(separatedBy: ", ").compactMap { Int($0) }
    }

    @Test func `the standby bench prints its figures, the ratio to echo and two commits, a failover, and stops everything`() throws {
        guard (try? EtcdServer.program()) != nil else {
            Issue.record(Comment(rawValue: EtcdServer.missing))
            return
        }
        let result = try runCogdLab(
            ["bench", "cluster", "--standby", "--runs", "1", "--failovers", "1", "--ports", "32400-32429"], timeout: .seconds(150))
        #expect(result.status == 0, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("n1 leads cluster bench on etcd http://127.0.0.1:") == true, "\(result.stdout)")
        for name in [
            "cluster.standby.round-trip.p50", "cluster.standby.round-trip.p99", "cluster.raw-zmq-echo.p50", "cluster.raw-lmdb-commit.p50",
            "cluster.raw-echo-plus-two-commits.p50", "cluster.standby.turns-per-second.clients-16", "cluster.standby.failover.p50",
            "cluster.standby.failover-leads.p50",
        ] {
            #expect(lines.contains { $0.hasPrefix(name + " ") }, "\(name) missing: \(result.stdout)")
        }
        // The round trip beside echo + two commits, as a figure and in words, with the bar.
        #expect(lines.contains { $0.hasPrefix("cluster.standby.round-trip.p50 ") && $0.contains("   echo-plus-two-commits ") && $0.contains("   ratio ") })
        let ratio = try #require(lines.first { $0.hasPrefix("round trip p50 with --sync one: ") }, "\(result.stdout)")
        #expect(ratio.contains("× echo + two commits (") && ratio.contains("the bar is ≤ 1.5×: "), "\(ratio)")
        // One failover measured, beside the lease TTL.
        let failover = try #require(lines.first { $0.hasPrefix("failover: SIGKILL of the leader to its standby's first applied op, 1 time: ") })
        #expect(failover.contains(" ms; to etcd naming it leader: ") && failover.contains(" ms (lease TTL 2 s"), "\(failover)")
        #expect(lines.contains { $0.hasPrefix("cluster.standby.failover.p50 ") && $0.contains(" ms   lease-ttl 2000 ms   ratio ") })

        // Everything it started is gone: no port of the run answers, etcd's folder is removed.
        let ports = Self.ports(result.stderr)
        #expect(ports.count == 7 && ports.allSatisfy((32_400...32_429).contains), "\(result.stderr)")
        #expect(!ports.contains(where: LoopbackPorts.answers), "a port of the run still answers: \(ports)")
        let temporary = try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
        #expect(!temporary.contains { $0.hasPrefix("cogd-lab-etcd-") && $0.hasSuffix("-\(ports.first ?? 0)") })
    }

    @Test func `with --json each figure is one object, and the failover is beside the lease TTL`() throws {
        guard (try? EtcdServer.program()) != nil else {
            Issue.record(Comment(rawValue: EtcdServer.missing))
            return
        }
        let result = try runCogdLab(
            ["bench", "cluster", "--standby", "--only", "round-trip,failover", "--runs", "1", "--failovers", "2", "--json", "--ports", "32430-32459"],
            timeout: .seconds(150))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let figures = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(figures.compactMap { $0["name"] as? String } == [
            "cluster.standby.round-trip.p50", "cluster.standby.round-trip.p99", "cluster.raw-zmq-echo.p50", "cluster.raw-lmdb-commit.p50",
            "cluster.raw-echo-plus-two-commits.p50", "cluster.standby.failover.p50", "cluster.standby.failover-leads.p50",
        ])
        let roundTrip = try #require(figures.first)
        #expect(roundTrip["baselineKind"] as? String == "echo-plus-two-commits" && roundTrip["ratio"] is Double, "\(roundTrip)")
        let failover = try #require(figures.dropLast().last)
        #expect(failover["unit"] as? String == "ms" && failover["baseline"] as? Double == 2000, "\(failover)")
        #expect(failover["baselineKind"] as? String == "lease-ttl" && (failover["value"] as? Double ?? 0) > 0, "\(failover)")
        let leads = try #require(figures.last)
        #expect(leads["baselineKind"] as? String == "lease-ttl" && (leads["value"] as? Double ?? 0) > 0, "\(leads)")
        // The words go to stderr beside JSON: the bar, and both failovers.
        #expect(result.stderr.contains("× echo + two commits ("), "\(result.stderr)")
        #expect(result.stderr.contains("first applied op, 2 times: "), "\(result.stderr)")
        let ports = Self.ports(result.stderr)
        #expect(ports.count == 7 && !ports.contains(where: LoopbackPorts.answers), "\(ports)")
    }

    @Test func `interrupted, the standby bench stops etcd and the nodes it started and removes their folders`() throws {
        guard (try? EtcdServer.program()) != nil else {
            Issue.record(Comment(rawValue: EtcdServer.missing))
            return
        }
        let bench = try CogdProcess(
            executable: cogdLabExecutable(), ["bench", "cluster", "--standby", "--only", "failover", "--failovers", "20", "--ports", "32470-32499"])
        defer { bench.stop() }
        #expect(bench.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("n1 leads cluster bench on etcd ") } != nil, "\(bench.lines)")
        bench.interrupt()
        #expect(waitUntil(timeout: .seconds(20)) { !bench.process.isRunning })
        #expect(bench.process.terminationStatus == 130)
        #expect(bench.waitForLine { $0.hasPrefix("bench cluster --standby: interrupted (signal 2); stopped the ") } != nil, "\(bench.lines)")
        let ports = Self.ports(bench.lines.joined(separator: "\n"))
        #expect(ports.count == 6 && !ports.contains(where: LoopbackPorts.answers), "\(ports)")
        let temporary = try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
        let pid = bench.process.processIdentifier
        #expect(!temporary.contains { $0.hasPrefix("cogd-lab-etcd-\(pid)-") || $0 == "cogd-bench-standby-\(pid)" }, "\(temporary)")
    }

    @Test func `--standby's options are checked`() throws {
        let usage: [([String], String)] = [
            (["--failovers", "2"], "--failovers goes with --standby"),
            (["--standby", "--curve"], "--curve does not go with --standby"),
            (["--standby", "--only", "lag"], "unknown shape 'lag' with --standby (one of: round-trip, throughput-16, failover)"),
            (["--only", "failover"], "unknown shape 'failover' (one of: round-trip, throughput-1, throughput-4, throughput-16, lag)"),
            (["--standby", "--failovers", "0"], "--failovers takes a whole number from 1 to 20, not '0'"),
            (["--standby", "--ports", "32460-32465"], "--ports 32460-32465 holds 6 ports; bench cluster --standby"),
        ]
        for (arguments, message) in usage {
            #expect(throws: CommandUsageError.self, "\(arguments)") { try LabParse.parseBench(["cluster"] + arguments) }
            do {
                _ = try LabParse.parseBench(["cluster"] + arguments)
            } catch {
                #expect(error.message.contains(message), "\(arguments): \(error.message)")
            }
        }
        let options = try LabParse.parseBench(["cluster", "--standby", "--failovers", "5", "--only", "failover"])
        #expect(options.standby && options.failovers == 5 && options.only == ["failover"])
        #expect(options.portsNeeded.count == 6)
    }
}
