import CogdCommandLine
import CogLog
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd-lab bench retention`: a real `cogd leader --retain-turns N` child on
/// loopback, fed `ledger.transfer` ops pipelined `window` deep (as `bench
/// cluster`'s clients do) for `--total-turns`, its `data.mdb` read after
/// every `--sample-every` transfers (file size, free pages, first retained
/// revision, record bytes: `log stats`' figures, read while it serves).
///
/// The verdict: the file's growth from the first sample at or after both the
/// retention window filling and half the run, to the end, beside what
/// keeping those turns would take (their revisions × the mean record bytes
/// the log holds then: the records alone, no page or index overhead). It
/// has plateaued when the growth is under `plateauFraction` of that;
/// otherwise the run fails. Turns/s beside the raw LMDB append rate
/// (records of the log's mean size, `window` per durable commit) measured
/// in the same run after the leader stopped.
struct RetentionBench {
    let options: BenchOptions
    /// The loopback ports taken at the start (`--ports`): two per run's leader.
    let ports: LoopbackPorts

    /// `--retain-turns`' default: the issue's bar.
    static let defaultRetainTurns = 100_000
    /// Transfers kept in flight by the one client.
    static let window = 400
    /// The growth over the measured stretch must stay under this fraction of what keeping its turns would take.
    static let plateauFraction = 0.05
    /// Below this many bytes of records kept over the second half, one step
    /// of the file's growth can decide the verdict: it says so.
    static let smallRunKeptBytes = 8.0 * 1_048_576
    /// Most samples one run takes (each a line).
    static let maximumSamples = 10_000

    /// What the parser refuses in these options (nil: nothing).
    static func problem(with options: BenchOptions) -> String? {
        let (retain, total, every) = (options.retainTurns, options.totalTurns, options.sampleEvery)
        if total <= retain {
            return "--total-turns (\(total)) must exceed --retain-turns (\(retain)): the file can only stop growing once the retention window is full"
        }
        if every > total { return "--sample-every (\(every)) must not exceed --total-turns (\(total))" }
        if total / every > maximumSamples {
            return "--sample-every \(every) would take more than \(maximumSamples) samples of \(total) turns; sample less often"
        }
        let from = measuredFrom(options)
        if from >= total {
            return "no sample falls after turn \(max(retain, (total + 1) / 2)) (the retention window full and half the run done) "
                + "and before the end (\(total)): sample more often (--sample-every) or run longer (--total-turns)"
        }
        return nil
    }

    /// The sample the growth is measured from: the first scheduled at or
    /// after both the retention window filling and half the run.
    static func measuredFrom(_ options: BenchOptions) -> Int {
        let from = max(options.retainTurns, (options.totalTurns + 1) / 2)
        return (from + options.sampleEvery - 1) / options.sampleEvery * options.sampleEvery
    }

    /// One read of the leader's data file.
    struct Sample {
        /// Transfers applied when it was read (scheduled: a multiple of `--sample-every`, or the total).
        let scheduled: Int
        let turns: Int
        let statistics: StoreStatistics

        /// What keeping every turn up to this revision would take: the revisions × the mean record bytes the log holds.
        var keptBytes: Double { Double(statistics.lastRevision) * meanRecordBytes }
        var meanRecordBytes: Double { statistics.turns == 0 ? 0 : Double(statistics.recordBytes) / Double(statistics.turns) }
    }

    /// One run's outcome.
    struct Outcome {
        let growth: Double
        let kept: Double
        let turnsPerSecond: Double
        let rawPerSecond: Double
        let end: Sample
        var plateaued: Bool { growth < RetentionBench.plateauFraction * kept }
    }

    /// Runs `--runs` times (each with a fresh leader); false when a run's data file kept growing.
    func run() throws -> Bool {
        if !options.json {
            print(
                "a leader with --retain-turns \(options.retainTurns), 100 accounts opened, then \(options.totalTurns) transfers (one revision each), "
                    + "\(Self.window) in flight; data.mdb read every \(options.sampleEvery) transfers; growth measured from transfer "
                    + "\(Self.measuredFrom(options)) to the end")
            fflush(nil)
        }
        var outcomes: [Outcome] = []
        for run in 1...options.runs {
            if options.runs > 1 && !options.json { print("run \(run) of \(options.runs)") }
            let outcome = try measure(run: run)
            outcomes.append(outcome)
            if options.runs > 1 && !options.json {
                print(
                    "run \(run): grew \(Self.size(outcome.growth)) over the second half beside \(Self.size(outcome.kept)) kept; "
                        + "turns/s \(BenchFigure.format(outcome.turnsPerSecond)), raw LMDB appends/s \(BenchFigure.format(outcome.rawPerSecond))")
            }
        }
        let growth = BenchFigure.median(outcomes.map(\.growth))
        let kept = BenchFigure.median(outcomes.map(\.kept))
        // With several runs, each figure is the median of the runs'.
        let figures = [
            BenchFigure(
                name: "retention.second-half-growth", value: growth, unit: "bytes", baseline: kept, baselineKind: "kept-record-bytes"),
            BenchFigure(name: "retention.file-bytes.end", value: BenchFigure.median(outcomes.map { Double($0.end.statistics.fileBytes) }), unit: "bytes", baseline: nil),
            BenchFigure(
                name: "retention.first-retained-revision.end", value: BenchFigure.median(outcomes.map { Double($0.end.statistics.firstRevision) }),
                unit: "revision", baseline: nil),
            BenchFigure(
                name: "retention.turns-per-second", value: BenchFigure.median(outcomes.map(\.turnsPerSecond)), unit: "turns/s",
                baseline: BenchFigure.median(outcomes.map(\.rawPerSecond))),
        ]
        if options.json {
            for figure in figures { figure.report(json: true, nameWidth: 0, ports: ports) }
        } else {
            print(
                "growth from transfer \(Self.measuredFrom(options)) to \(options.totalTurns): \(Self.size(growth)) (\(Int(growth)) bytes); keeping those turns would take "
                    + "\(Self.size(kept)) of records (ratio \(BenchFigure.format(kept > 0 ? growth / kept : 0)))")
            print("data.mdb at the end: \(Self.size(figures[1].value)), first retained revision \(Int(figures[2].value))")
            print(
                "turns/s \(BenchFigure.format(figures[3].value))   raw LMDB appends/s \(BenchFigure.format(figures[3].baseline ?? 0))   "
                    + "ratio \(BenchFigure.format(figures[3].value / max(1, figures[3].baseline ?? 1)))")
        }
        let failed = outcomes.enumerated().filter { !$0.element.plateaued }
        let limit = "\(Int(Self.plateauFraction * 100))%"
        let verdict: String
        if failed.isEmpty {
            verdict =
                "plateaued: over the second half data.mdb grew \(Self.percent(growth, of: kept)) of what keeping its turns would take "
                + "(under \(limit))"
        } else {
            verdict = failed.map { index, outcome in
                "not plateaued\(options.runs > 1 ? " (run \(index + 1))" : ""): over the second half data.mdb grew \(Self.size(outcome.growth)), "
                    + "\(Self.percent(outcome.growth, of: outcome.kept)) of what keeping its turns would take (\(Self.size(outcome.kept))); "
                    + "the limit is \(limit)"
                    + (outcome.kept < RetentionBench.smallRunKeptBytes
                        ? " (a run this small can be decided by one step of LMDB's file growth: the defaults, --retain-turns 100000, "
                            + "measure the plateau)"
                        : "")
            }.joined(separator: "\n")
        }
        if options.json {
            FileHandle.standardError.write((verdict + "\n").data(using: .utf8)!)
        } else {
            print(verdict)
        }
        fflush(nil)
        return failed.isEmpty
    }

    private func measure(run: Int) throws -> Outcome {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-bench-retention-\(getpid())-\(run)").path
        try? FileManager.default.removeItem(atPath: root)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let data = root + "/leader"
        let requests = ports.nextEndpoint()
        let leader = try ClusterBench.startLeader(
            data: data, requests: requests, turns: ports.nextEndpoint(),
            options: ["--retain-turns", String(options.retainTurns)])
        var stopped = false
        defer { if !stopped { ClusterBench.stop(leader) } }
        let context = try ZMQContext()
        defer { context.close() }
        try ClusterBench.setUpAccounts(context: context, requests: requests, name: "retention-setup", keys: nil)
        let client = try ClusterBench.Client(context: context, endpoint: requests, name: "retention-\(run)")
        defer { client.socket.close() }

        var samples = [try sample(data, scheduled: 0, turns: 0, run: run)]
        var next = options.sampleEvery
        var sent = 0
        let total = options.totalTurns
        let load = try ClusterBench.drive([client], window: Self.window, sent: &sent, limit: total) { applied in
            if applied >= next && next < total {
                samples.append(try sample(data, scheduled: next, turns: applied, run: run))
                next += options.sampleEvery
            }
            return true
        }
        guard load.applied == total else {
            throw ClusterBench.BenchError(message: "the leader applied \(load.applied) of \(total) transfers (the rest were rejected or unanswered)")
        }
        let end = try sample(data, scheduled: total, turns: load.applied, run: run)
        samples.append(end)
        ClusterBench.stop(leader)
        leader.waitUntilExit()
        stopped = true

        let from = Self.measuredFrom(options)
        guard let start = samples.first(where: { $0.scheduled >= from }), start.scheduled < total else {
            throw ClusterBench.BenchError(message: "internal inconsistency: no sample at turn \(from) or after before the end")
        }
        let growth = Double(end.statistics.fileBytes - start.statistics.fileBytes)
        let kept = Double(end.statistics.lastRevision - start.statistics.lastRevision) * end.meanRecordBytes
        let rawFolder = root + "/raw"
        let rawCount = Self.window * 50
        let rawSeconds = try RawAppendBaseline(directory: rawFolder).run(
            count: rawCount, recordSize: max(1, Int(end.meanRecordBytes.rounded())), batch: Self.window)
        return Outcome(
            growth: growth, kept: kept, turnsPerSecond: Double(load.applied) / load.seconds, rawPerSecond: Double(rawCount) / rawSeconds,
            end: end)
    }

    /// Reads the data file's figures (a reader of its own, closed again) and prints them.
    private func sample(_ data: String, scheduled: Int, turns: Int, run: Int) throws -> Sample {
        let store = try TurnStore(directory: data, mode: .reader)
        defer { store.close() }
        let sample = Sample(scheduled: scheduled, turns: turns, statistics: try store.statistics())
        let statistics = sample.statistics
        if options.json {
            BenchFigure(
                name: "retention.\(options.runs > 1 ? "run-\(run)." : "")file-bytes.turns-\(scheduled)", value: Double(statistics.fileBytes),
                unit: "bytes", baseline: sample.keptBytes, baselineKind: "kept-record-bytes"
            ).report(json: true, nameWidth: 0, ports: ports)
        } else {
            print(
                "after \(scheduled) transfers: data.mdb \(Self.size(Double(statistics.fileBytes))) (\(statistics.fileBytes) bytes), "
                    + "\(statistics.freePages) free pages, retained revisions \(statistics.firstRevision)…\(statistics.lastRevision) "
                    + "(\(statistics.turns) turns, \(Self.size(Double(statistics.recordBytes))) of records)")
            fflush(nil)
        }
        return sample
    }

    private static func size(_ bytes: Double) -> String {
        abs(bytes) < 1_048_576 ? "\(BenchFigure.format(bytes / 1_024)) KiB" : String(format: "%.1f MiB", bytes / 1_048_576)
    }

    private static func percent(_ part: Double, of whole: Double) -> String {
        whole > 0 ? String(format: "%.1f%%", part / whole * 100) : "all"
    }
}
