import CogdCommandLine
import Cog
import Foundation

extension BenchRig {
    // grace: 1,000 scope children, each watching one key of an automatic box
    // over a `.whileObserved` manual box, released after grace and made again.
    fileprivate static let _graceIDsCog = Cog<[Int]>.Manual(name: "bench.grace.ids") { [] }
    fileprivate static let _graceNoteCogs = CogBox<Int, Int>.Manual(
        { key in key }, lifetime: .whileObserved(resetToInitial: true), name: "bench.grace.note")
    fileprivate static let graceDoubleCogs = CogBox<Int, Int>(name: "bench.grace.double") { c, key in
        c[_graceNoteCogs[key]] * 2
    }
}

extension CogOps {
    fileprivate func setGraceIDs(_ ids: [Int]) { turn(BenchRig._graceIDsCog, to: ids) }
}

/// The mechanism of the grace shape: a child per id, each watching its key.
private struct GraceBenchMechanism: Mechanism {
    let sink: BenchSink
    var name: String { "GraceBench" }

    func operate(_ m: MechanismController) {
        m.scope(each: BenchRig._graceIDsCog, name: "child") { id, s in
            s.watch(BenchRig.graceDoubleCogs[id], initial: .run, name: "double") { _, new in sink.value &+= new }
        }
    }
}

extension GraphBench {
    /// The grace shape: `children` scope children open (each makes one
    /// automatic and one `.whileObserved` state), retire, and their states
    /// are released after a 1 ms grace; then the next cycle makes them again.
    /// Beside it, the scopes shape's open-and-retire (the same children with
    /// nothing released); and the leak check: live registrations, live
    /// states and resident memory after the cycles against before them.
    func measureGrace() async -> [Figure] {
        let children = 1_000
        let cycles = 20
        let ids = Array(0..<children)
        let cogs = Cogs(clock: ContinuousClock(), whileObservedGrace: .milliseconds(1))
        cogs.operate([GraceBenchMechanism(sink: sink)])
        let scopes = Cogs()
        scopes.operate([BenchMechanism(shape: .scopes, sink: sink)])

        func cycle() async -> Double {
            let start = ContinuousClock.now
            cogs.setGraceIDs(ids)
            cogs.setGraceIDs([])
            await cogs.waitUntilGraceEmpties()
            return nanoseconds(ContinuousClock.now - start) / 1_000 / Double(children)
        }
        // Warm up: grow the tables and buffers once.
        _ = await cycle()
        let registrationsBefore = cogs.liveRegistrationCount
        let statesBefore = cogs.liveStateCount
        let rssBefore = currentResidentBytes()
        var samples: [Double] = []
        var baselines: [Double] = []
        for _ in 0..<cycles {
            samples.append(await cycle())
            let start = ContinuousClock.now
            scopes.setChildIDs(ids)
            scopes.setChildIDs([])
            baselines.append(nanoseconds(ContinuousClock.now - start) / 1_000 / Double(children))
        }
        let registrationsAfter = cogs.liveRegistrationCount
        let statesAfter = cogs.liveStateCount
        let rssAfter = currentResidentBytes()
        // A one-shot read of a clean state nobody observes renews its grace;
        // beside it the same read of a pinned state, which renews nothing.
        let reads = 100_000
        let renewing = BenchRig.graceDoubleCogs[-1]
        let pinned = BenchRig.graceDoubleCogs[-2]
        _ = cogs.peek(renewing)
        _ = cogs[pinned]
        var renewSamples: [Double] = []
        var pinnedSamples: [Double] = []
        for _ in 0..<cycles {
            var start = ContinuousClock.now
            for _ in 0..<reads { sink.value &+= cogs.peek(renewing) }
            renewSamples.append(nanoseconds(ContinuousClock.now - start) / Double(reads))
            start = ContinuousClock.now
            for _ in 0..<reads { sink.value &+= cogs.peek(pinned) }
            pinnedSamples.append(nanoseconds(ContinuousClock.now - start) / Double(reads))
        }
        return [
            Figure(
                name: "graph.grace.release-and-recreate", value: median(samples), unit: "us/child",
                baseline: median(baselines), baselineName: "scopes open-and-retire"),
            Figure(
                name: "graph.grace.peek-renewing", value: median(renewSamples), unit: "ns/read",
                baseline: median(pinnedSamples), baselineName: "pinned peek"),
            Figure(
                name: "graph.grace.live-registrations", value: Double(registrationsAfter), unit: "",
                baseline: Double(registrationsBefore), baselineName: "before"),
            Figure(
                name: "graph.grace.live-states", value: Double(statesAfter), unit: "",
                baseline: Double(statesBefore), baselineName: "before"),
            Figure(
                name: "graph.grace.rss", value: Double(rssAfter) / 1_048_576, unit: "MiB",
                baseline: Double(rssBefore) / 1_048_576, baselineName: "before \(cycles) cycles"),
        ]
    }

    /// Resident memory now (`/proc/self/statm`), 0 where it cannot be read.
    private func currentResidentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

extension Cogs {
    /// Waits until no state waits for its grace (the bench's 1 ms grace).
    fileprivate func waitUntilGraceEmpties() async {
        while statesInGrace > 0 {
            let check = MainActorCleanupAcknowledgement()
            registerGraceReleaseCheck(check)
            do { try await check.wait() } catch { return }
        }
    }
}
