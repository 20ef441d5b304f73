import Foundation
import CogProtocol
import Testing

@testable import CogdCommandLine

/// `status --watch` in a terminal that shows block characters: each
/// worker's lag over the latest reports, drawn after its line (issue 30).
@Suite("status --watch draws each worker's lag as a sparkline")
struct StatusSparklineTests {
    static func status(_ lags: [(String, UInt64)]) -> LeaderStatus {
        LeaderStatus(
            epoch: 1, revision: 100,
            workers: lags.map { LeaderStatus.Worker(name: $0.0, appliedRevision: 100 - $0.1, lag: $0.1, secondsSinceHeard: 0.2) },
            errorCounts: [:], openScopeInstances: [])
    }

    @Test func `a sparkline scales to the largest value, and all lowest when every value is 0`() {
        #expect(StatusCommand.sparkline([0, 2, 8]) == "▁▃█")
        #expect(StatusCommand.sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█")
        #expect(StatusCommand.sparkline([0, 0, 0]) == "▁▁▁")
        #expect(StatusCommand.sparkline([UInt64.max, 0]) == "█▁")
        #expect(StatusCommand.sparkline([]) == "")
    }

    @Test func `sparklines are drawn on a UTF-8 terminal only`() {
        #expect(StatusCommand.supportsSparklines(isTerminal: true, environment: ["LANG": "en_US.UTF-8", "TERM": "xterm-256color"]))
        #expect(StatusCommand.supportsSparklines(isTerminal: true, environment: ["LC_ALL": "C.utf8"]))
        #expect(!StatusCommand.supportsSparklines(isTerminal: false, environment: ["LANG": "en_US.UTF-8"]), "a pipe: no")
        #expect(!StatusCommand.supportsSparklines(isTerminal: true, environment: ["LANG": "C"]))
        #expect(!StatusCommand.supportsSparklines(isTerminal: true, environment: ["LC_ALL": "C", "LANG": "en_US.UTF-8"]), "LC_ALL wins")
        #expect(!StatusCommand.supportsSparklines(isTerminal: true, environment: ["LANG": "en_US.UTF-8", "TERM": "dumb"]))
    }

    @Test func `each worker's line ends with its lag over the latest reports, at most 24, and a worker that left is forgotten`() {
        var history = StatusCommand.WatchHistory()
        history.drawsSparklines = true
        for lag in [0, 4, 8, 2] as [UInt64] { history.noteLags(Self.status([("w1", lag), ("w2", 0)])) }
        let lines = StatusCommand.lines(Self.status([("w1", 2), ("w2", 0)]), sparklines: history.sparklines)
        #expect(lines.contains { $0.hasPrefix("  w1: applied 98, lag 2, ") && $0.hasSuffix("  lag ▁▅█▃") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("  w2: applied 100, lag 0, ") && $0.hasSuffix("  lag ▁▁▁▁") }, "\(lines)")
        for lag in 0..<30 as Range<UInt64> { history.noteLags(Self.status([("w1", lag)])) }
        #expect(history.lags["w1"]?.count == 24 && history.lags["w1"]?.last == 29)
        #expect(history.lags["w2"] == nil, "w2 is no longer listed")

        var plain = StatusCommand.WatchHistory()
        plain.noteLags(Self.status([("w1", 3)]))
        #expect(plain.sparklines.isEmpty, "not drawn unless the terminal shows them")
        #expect(!StatusCommand.lines(Self.status([("w1", 3)]), sparklines: plain.sparklines).contains { $0.contains("▁") })
    }
}

/// The same, end to end: a real `cogd status --watch` against a leader and a
/// worker, in a terminal (`script` gives it one) and through a pipe.
@Suite("status --watch in a terminal", .serialized, .timeLimit(.minutes(10)))
struct StatusWatchTerminalTests {
    @Test func `in a UTF-8 terminal each worker's line ends with its lag sparkline; through a pipe it does not`() throws {
        let script = URL(fileURLWithPath: "/usr/bin/script")
        try #require(FileManager.default.isExecutableFile(atPath: script.path), "script (util-linux's bsdutils) gives the command a terminal")
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let worker = try ports.startWorker("w1")
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("cogd worker w1: synced at revision") } != nil, "\(worker.lines)")

        let watch = "\(cogdExecutable().path) status --leader \(ports.requests) --watch 0.2 --count 3"
        let inTerminal = try runProgram(
            script, ["-qec", watch, "/dev/null"], environment: ["LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm"], timeout: .seconds(30))
        #expect(inTerminal.status == 0, "\(inTerminal)")
        // (A terminal ends its lines with \r\n, one Character to Swift.)
        let lines = inTerminal.stdout.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespacesAndNewlines.union(.controlCharacters)) }
        let workerLines = lines.filter { $0.hasPrefix("w1: applied ") }
        #expect(workerLines.count == 3, "a line per report: \(inTerminal.stdout)")
        let blocks = Set("▁▂▃▄▅▆▇█")
        let last = try #require(workerLines.last)
        let spark = try #require(last.range(of: "  lag ", options: .backwards).map { last[$0.upperBound...] }, "\(last)")
        #expect(spark.count == 3 && spark.allSatisfy { blocks.contains($0) }, "the lag over the three reports: \(last)")

        let piped = try runCogd(["status", "--leader", ports.requests, "--watch", "0.2", "--count", "2"], environment: ["LANG": "C.UTF-8"])
        #expect(piped.status == 0, "\(piped)")
        #expect(piped.stdout.contains("w1: applied ") && !piped.stdout.contains { blocks.contains($0) }, "\(piped.stdout)")
    }
}
