import CogdCommandLine
import CCogdSupport
import CogCodec
import CogLog
import Foundation

/// `cogd-lab bench log`: durable turns per second at 1, 10, 100 and 1,000 turns
/// per transaction, each beside a raw LMDB append loop with the same record
/// and batch sizes measured in the same run; and the time to open a store of
/// 1,000,000 turns and 100,000 keys.
struct LogBench {
    let options: BenchOptions

    static let shapeNames = ["batch-1", "batch-10", "batch-100", "batch-1000", "encode", "digest", "open"]

    func run() throws {
        let shapes = options.only.isEmpty ? LogBench.shapeNames : options.only
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-bench-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        #if DEBUG
            if !options.json { print("warning: this is a debug build; measure with `swift build -c release`") }
        #endif
        for shape in shapes {
            if shape == "encode" {
                report(try measureEncoding())
            } else if shape == "digest" {
                report(try measureEntryHash())
            } else if shape == "open" {
                report(try measureOpen(root: root + "/open"))
            } else {
                let batch = Int(shape.dropFirst("batch-".count))!
                for figure in try measureThroughput(batch: batch, root: root) { report(figure) }
            }
        }
    }

    private func turns(for batch: Int) -> Int {
        switch batch {
        case 1: 300
        case 10: 3_000
        case 100: 30_000
        default: 100_000
        }
    }

    /// Drafts like a small app's turns: one keyed write of a small struct.
    private func drafts(_ count: Int, offset: Int) throws -> [TurnDraft] {
        let encoder = CBOREncoder()
        return try (0..<count).map { index in
            let id = offset + index
            return TurnDraft(
                name: "transfer(from:to:amount:)",
                writes: [
                    TurnWrite(
                        name: "ledger.accounts", key: try encoder.encode("account-\(id % 1_000)"),
                        value: try encoder.encode(["balance": id, "version": id / 1_000]))
                ])
        }
    }

    /// Durable and raw transactions alternate (one of each in turn), so a
    /// drift in this shared machine's speed moves the figures alike. Beside
    /// the raw append loop, a second raw loop also makes the store's `state`
    /// puts (ready-made bytes) in each transaction: what LMDB itself reaches
    /// keeping the state table, the ceiling for the durable figure's ratio.
    private func measureThroughput(batch: Int, root: String) throws -> [BenchFigure] {
        let total = turns(for: batch)
        var durable: [Double] = []
        var raw: [Double] = []
        var rawWithState: [Double] = []
        for run in 0..<max(1, min(options.runs, 5)) {
            let folder = "\(root)/durable-\(batch)-\(run)"
            let rawFolder = "\(root)/raw-\(batch)-\(run)"
            let stateFolder = "\(root)/raw-state-\(batch)-\(run)"
            defer {
                for path in [folder, rawFolder, stateFolder] { try? FileManager.default.removeItem(atPath: path) }
            }
            let store = try TurnStore(directory: folder, mode: .writer, createIfMissing: true)
            defer { store.close() }
            // Each transaction's drafts are made before the clock starts, as
            // the raw loop's record is.
            let batches = try stride(from: 0, to: total, by: batch).map { try drafts(min(batch, total - $0), offset: $0) }
            try store.append(batches[0])
            let record = [UInt8](store.lastAppended.record(0))
            let appender = try RawAppendBaseline.Appender(directory: rawFolder)
            try appender.commit(record, count: batches[0].count)
            let statePuts = batches.map { RawAppendBaseline.StatePuts(drafts: $0) }
            let stateAppender = try RawAppendBaseline.Appender(directory: stateFolder)
            try stateAppender.commit(record, count: batches[0].count, state: statePuts[0])
            var durableTime = Duration.zero
            var rawTime = Duration.zero
            var stateTime = Duration.zero
            for (index, drafts) in batches.enumerated().dropFirst() {
                let start = ContinuousClock.now
                try store.append(drafts)
                let middle = ContinuousClock.now
                try appender.commit(record, count: drafts.count)
                let end = ContinuousClock.now
                try stateAppender.commit(record, count: drafts.count, state: statePuts[index])
                stateTime += ContinuousClock.now - end
                rawTime += end - middle
                durableTime += middle - start
            }
            let measured = Double(total - batches[0].count)
            durable.append(measured / seconds(durableTime))
            raw.append(measured / seconds(rawTime))
            rawWithState.append(measured / seconds(stateTime))
        }
        return [
            BenchFigure(name: "log.turns-per-second.batch-\(batch)", value: median(durable), unit: "turns/s", baseline: median(raw)),
            BenchFigure(name: "log.raw-with-state.batch-\(batch)", value: median(rawWithState), unit: "turns/s", baseline: median(raw)),
        ]
    }

    /// Record encoding alone (not a default shape: `--only encode`): ns per
    /// turn to encode a 1,000-draft group commit.
    private func measureEncoding() throws -> BenchFigure {
        let batch = try drafts(1_000, offset: 0)
        var samples: [Double] = []
        var sink = 0
        for _ in 0..<max(3, options.runs) {
            let start = ContinuousClock.now
            for _ in 0..<200 { sink &+= EncodedTurnBatch(drafts: batch, epoch: 1, firstRevision: 1).bytes.count }
            samples.append(seconds(ContinuousClock.now - start) / 200_000 * 1e9)
        }
        if sink == 0 { print("") }
        return BenchFigure(name: "log.encode-ns-per-turn", value: median(samples), unit: "ns", baseline: nil)
    }

    /// The state digest's entry hash alone (`--only digest`): ns per entry
    /// of the drafts' kind (a commit hashes each write's new entry, and its
    /// old one when that is not among the entries it keeps).
    private func measureEntryHash() throws -> BenchFigure {
        let writes = try drafts(1_000, offset: 0).flatMap(\.writes)
        var samples: [Double] = []
        var sink = UInt128(0)
        for _ in 0..<max(3, options.runs) {
            let start = ContinuousClock.now
            for _ in 0..<200 {
                for write in writes { sink &+= StateDigest.entryHash(name: write.name, key: write.key, value: write.value ?? []) }
            }
            samples.append(seconds(ContinuousClock.now - start) / Double(200 * writes.count) * 1e9)
        }
        if sink == 0 { print("") }
        return BenchFigure(name: "log.digest-ns-per-entry", value: median(samples), unit: "ns", baseline: nil)
    }

    private func measureOpen(root: String) throws -> BenchFigure {
        let turnCount = 1_000_000
        let keys = 100_000
        let encoder = CBOREncoder()
        if !options.json { print("building a store of \(turnCount) turns and \(keys) keys…") }
        do {
            let store = try TurnStore(directory: root, mode: .writer, createIfMissing: true)
            var written = 0
            while written < turnCount {
                let batch = try (0..<10_000).map { index in
                    let id = written + index
                    return TurnDraft(
                        name: "set(_:)",
                        writes: [TurnWrite(name: "bench.value", key: try encoder.encode(id % keys), value: try encoder.encode(id))])
                }
                try store.append(batch)
                written += batch.count
            }
            store.close()
        }
        var samples: [Double] = []
        for _ in 0..<3 {
            let start = ContinuousClock.now
            let store = try TurnStore(directory: root, mode: .writer)
            try store.append([TurnDraft(name: "ready()", writes: [])])
            samples.append(seconds(ContinuousClock.now - start) * 1_000)
            store.close()
        }
        return BenchFigure(name: "log.open-1m-turns-100k-keys", value: median(samples), unit: "ms", baseline: nil)
    }

    private func report(_ figure: BenchFigure) { figure.report(json: options.json, nameWidth: 34) }

    private func seconds(_ duration: Duration) -> Double { BenchFigure.seconds(duration) }

    private func median(_ values: [Double]) -> Double { BenchFigure.median(values) }
}
