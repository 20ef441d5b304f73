import Foundation
import Testing

@testable import CogLab
@testable import CogdCommandLine

/// `cogd bench retention` run small (a real leader child with
/// `--retain-turns 2000`, 16,000 transfers): what a user sees of it, the
/// samples in order, the verdict, the figures. Speed is not judged here.
@Suite("cogd bench retention", .serialized, .timeLimit(.minutes(10)))
struct RetentionBenchTests {
    static let small = ["bench", "retention", "--retain-turns", "2000", "--total-turns", "16000", "--sample-every", "2000"]

    /// One sample line's figures: `turns N: data.mdb … (B bytes), F free pages, retained revisions A…Z (T turns, …)`.
    struct SampleLine {
        let turns: Int
        let fileBytes: Int
        let firstRevision: Int
        let lastRevision: Int
        let retained: Int

        init?(_ line: String) {
            let pattern = try! NSRegularExpression(
                pattern: #"^after (\d+) transfers: data\.mdb .* \((\d+) bytes\), \d+ free pages, retained revisions (\d+)…(\d+) \((\d+) turns, .* of records\)$"#)
            guard let match = pattern.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) else { return nil }
            let numbers = (1...5).map { Int(line[Range(match.range(at: $0), in: line)!])! }
            (turns, fileBytes, firstRevision, lastRevision, retained) = (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
        }
    }

    /// The second-half growth over what keeping those turns would take, from
    /// the `growth from turn …` line.
    static func growthRatio(_ lines: [String]) -> Double? {
        guard let line = lines.first(where: { $0.hasPrefix("growth from transfer ") }), let open = line.range(of: "(ratio ", options: .backwards)
        else { return nil }
        return Double(line[open.upperBound...].dropLast())
    }

    // A run this small plateaus within LMDB's lumps (a few dozen pages here or
    // there, against 2 MiB the kept turns would take): the verdict and the exit
    // status agree, and the growth is far below keeping, whichever side of 5%
    // it falls. The release runs at the defaults are the measure (README).
    @Test func `a small run prints a line per sample in order, the figures and a verdict its exit status agrees with`() throws {
        let result = try runCogdLab(Self.small, timeout: .seconds(150))
        #expect(result.status == 0 || result.status == 1, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("a leader with --retain-turns 2000, 100 accounts opened, then 16000 transfers (one revision each), 400 in flight;") == true, "\(result.stdout)")
        let samples = lines.compactMap(SampleLine.init)
        #expect(samples.map(\.turns) == Array(stride(from: 0, through: 16000, by: 2000)), "\(result.stdout)")
        // The 100 accounts opened before the load, then one revision per transfer.
        #expect(samples.first?.lastRevision == 100)
        #expect(samples.last?.lastRevision == 16100, "\(result.stdout)")
        // Revisions only go up, and the file never shrinks.
        #expect(zip(samples, samples.dropFirst()).allSatisfy { $0.lastRevision < $1.lastRevision && $0.fileBytes <= $1.fileBytes })
        // Retention removed the oldest: the end keeps no more than the window and what a batch or two adds.
        let end = try #require(samples.last)
        #expect(end.firstRevision > 12000 && end.retained < 4000 && end.retained == end.lastRevision - end.firstRevision + 1, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("growth from transfer 8000 to 16000: ") && $0.contains(" of records (ratio ") }, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("data.mdb at the end: ") && $0.hasSuffix("first retained revision \(end.firstRevision)") })
        #expect(lines.contains { $0.hasPrefix("turns/s ") && $0.contains("raw LMDB appends/s") && $0.contains("ratio") }, "\(result.stdout)")
        let ratio = try #require(Self.growthRatio(lines), "\(result.stdout)")
        #expect(ratio < 0.5, "retention keeps the file far below what keeping every turn takes: \(result.stdout)")
        if result.status == 0 {
            #expect(lines.last?.hasPrefix("plateaued: over the second half data.mdb grew ") == true, "\(result.stdout)")
            #expect(lines.last?.hasSuffix("of what keeping its turns would take (under 5%)") == true, "\(result.stdout)")
        } else {
            #expect(lines.last?.hasPrefix("not plateaued: over the second half data.mdb grew ") == true, "\(result.stdout)")
            #expect(lines.last?.contains("; the limit is 5%") == true, "\(result.stdout)")
        }
    }

    @Test func `with --json each sample and each figure is one object with numeric fields, the verdict on stderr`() throws {
        let result = try runCogdLab(Self.small + ["--json"], timeout: .seconds(150))
        #expect(result.status == 0 || result.status == 1, "stdout: \(result.stdout)\nstderr: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        let figures = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(figures.count == lines.count, "every line is JSON: \(result.stdout)")
        #expect(
            figures.compactMap { $0["name"] as? String }
                == stride(from: 0, through: 16000, by: 2000).map { "retention.file-bytes.turns-\($0)" } + [
                    "retention.second-half-growth", "retention.file-bytes.end", "retention.first-retained-revision.end",
                    "retention.turns-per-second",
                ])
        for figure in figures {
            #expect(figure["value"] is Double, "\(figure)")
            #expect(figure["unit"] is String, "\(figure)")
        }
        let byName = Dictionary(uniqueKeysWithValues: figures.map { ($0["name"] as! String, $0) })
        for name in ["retention.file-bytes.turns-16000", "retention.second-half-growth", "retention.turns-per-second"] {
            let figure = try #require(byName[name])
            #expect((figure["baseline"] as? Double ?? 0) > 0 && figure["ratio"] is Double, "\(figure)")
        }
        #expect(byName["retention.second-half-growth"]?["baselineKind"] as? String == "kept-record-bytes")
        #expect(byName["retention.turns-per-second"]?["baselineKind"] == nil, "beside the raw LMDB figure")
        #expect((byName["retention.turns-per-second"]?["value"] as? Double ?? 0) > 0)
        #expect((byName["retention.first-retained-revision.end"]?["value"] as? Double ?? 0) > 12000)
        #expect(byName["retention.file-bytes.end"]?["value"] as? Double == byName["retention.file-bytes.turns-16000"]?["value"] as? Double)
        // First the ports the run took (each figure carries them), then the verdict.
        let ports = try #require(figures.first?["ports"] as? [Int], "\(result.stdout)")
        #expect(ports.count == 2 && figures.allSatisfy { $0["ports"] as? [Int] == ports })
        let errors = result.stderr.split(separator: "\n", maxSplits: 1).map(String.init)
        #expect(errors.first == "bench retention: loopback ports \(ports[0]), \(ports[1]) on 127.0.0.1 (from --ports 20000-31999)", "\(result.stderr)")
        #expect(errors.last?.hasPrefix(result.status == 0 ? "plateaued: " : "not plateaued: ") == true, "\(result.stderr)")
        #expect((byName["retention.second-half-growth"]?["ratio"] as? Double ?? 1) < 0.5, "\(result.stdout)")
    }

    @Test func `its options default from --retain-turns and are checked`() throws {
        let defaults = try LabParse.parseBench(["retention"])
        #expect((defaults.retainTurns, defaults.totalTurns, defaults.sampleEvery, defaults.runs) == (100_000, 400_000, 50_000, 1))
        let scaled = try LabParse.parseBench(["retention", "--retain-turns", "800"])
        #expect((scaled.totalTurns, scaled.sampleEvery) == (3_200, 400))
        let refused: [([String], String)] = [
            (["--retain-turns", "500", "--total-turns", "500"], "--total-turns (500) must exceed --retain-turns (500)"),
            (["--retain-turns", "0"], "--retain-turns takes a number of turns from 1 to 1000000000, not '0'"),
            (["--sample-every", "x"], "--sample-every takes a number of turns from 1 to 1000000000, not 'x'"),
            (["--retain-turns", "500", "--total-turns", "600", "--sample-every", "700"], "--sample-every (700) must not exceed --total-turns (600)"),
            (["--retain-turns", "900", "--total-turns", "1000", "--sample-every", "600"], "no sample falls after turn 900"),
            (["--total-turns", "1000000000", "--sample-every", "1"], "--sample-every 1 would take more than 10000 samples of 1000000000 turns"),
            (["--only", "x"], "bench retention has no shapes to choose: --only does not apply"),
            (["--curve"], "unknown option '--curve'"),
        ]
        for (arguments, message) in refused {
            #expect {
                _ = try LabParse.parseBench(["retention"] + arguments)
            } throws: { error in
                (error as? Command.UsageError)?.message.hasPrefix(message) == true
            }
        }
        let usage = try runCogdLab(["bench", "retention", "--retain-turns", "500", "--total-turns", "400"])
        #expect(usage.status == 64 && usage.stdout.isEmpty, "\(usage)")
        #expect(usage.stderr.contains("Error: --total-turns (400) must exceed --retain-turns (500)"), "\(usage.stderr)")
    }
}
