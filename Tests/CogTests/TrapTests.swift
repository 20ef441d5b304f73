import Cog
import CogTesting
import Testing

// The traps Cog's scenarios list, each asserting the text a user sees on
// standard error: the cog (`label`, `label[key]`), the attempt or the path,
// and what to do instead (issue 31, item 4). CYCLE-01/02/07 and GRAPH-14 are
// in SettlementTests (G8, G4), MECH-04 and ONE-02 in MechanismTests (M4,
// M10), the written and read TURN-07 cases in TurnTests (T5).

private let _trapSourceCog = Cog<Int>.Manual(name: "trap.source") { 0 }

@MainActor private var trapRuntime: Cogs?
@MainActor private var lateWrite: Task<Void, Never>?

extension CogOps {
    fileprivate func bumpTrapSource() { turn { c in c[_trapSourceCog] += 1 } }
    fileprivate func illegalSelectorTurn() { turn { _ in fatalError("SELECTOR TURN BODY RAN") } }
    fileprivate func illegalEqualityTurn() { turn { _ in fatalError("EQUALITY TURN BODY RAN") } }
    fileprivate func seedInsideTurn() { turn { _ in trapRuntime?.seed(_trapSourceCog, to: 7) } }
    fileprivate func writeFromATaskLater() {
        turn { c in lateWrite = Task { @MainActor in c[_trapSourceCog] = 1 } }
    }
}

private let writingCog = Cog<Int>(name: "trap.writer") { c in
    MainActor.assumeIsolated { trapRuntime?.bumpTrapSource() }
    return c[_trapSourceCog]
}

private let illegalSelectorCogs = CogBox<Int, String>(name: "weather") { _, _ in
    MainActor.assumeIsolated { trapRuntime?.illegalSelectorTurn() }
    return 0
}

private let illegalEqualityCogs = CogBox<Int, String>(
    { c, _ in c[_trapSourceCog] },
    equals: { _, _ in
        MainActor.assumeIsolated { trapRuntime?.illegalEqualityTurn() }
        return false
    },
    name: "weather.equality")

private let refreshTargetCog = Cog<Int>.Async(default: 0, name: "target") { _ in
    fatalError("REFRESH TARGET SELECTOR RAN")
}

private let refreshingCog = Cog<Int>.Async(default: 0, name: "refreshing") { _ in
    _ = MainActor.assumeIsolated { trapRuntime?.refresh(refreshTargetCog) }
    fatalError("REFRESHING SELECTOR CONTINUED")
}

private let discardingCog = Cog<Int>(name: "trap.discarding") { c in
    MainActor.assumeIsolated { trapRuntime?.discard(writingCog) }
    return c[_trapSourceCog]
}

private let seedingCog = Cog<Int>(name: "trap.seeding") { c in
    MainActor.assumeIsolated { trapRuntime?.seed(_trapSourceCog, to: 7) }
    return c[_trapSourceCog]
}

@MainActor private let cycleDiagnostics = Recorder<CogCycleDiagnostic?>()

private let keyedCycleProbeCogs: CogBox<Int, String> = CogBox(name: "weather.cycle") { c, key in
    let next = keyedCycleProbeCogs[key == "home" ? "work" : "home"]
    if let cycle = c.cycleDiagnostic(ifReading: next) {
        cycleDiagnostics.append(cycle)
        return 0
    }
    return c[next]
}

private let adviceCog: Cog<Int> = Cog(name: "advice") { c in
    if let cycle = c.cycleDiagnostic(ifReading: adviceCog) {
        cycleDiagnostics.append(cycle)
        return 0
    }
    return c[adviceCog]
}

private let hostileLabelCog: Cog<Int> = Cog(name: "odd\u{1B}[2J\nlabel") { c in
    if let cycle = c.cycleDiagnostic(ifReading: hostileLabelCog) {
        cycleDiagnostics.append(cycle)
        return 0
    }
    return c[hostileLabelCog]
}

/// The sentence every turn-during-computation trap ends with.
private func readOnlyAdvice(_ instead: String) -> String {
    "a turn during automatic computation would write from code that may only read Cog state. Call \(instead) "
        + "outside the computation, from event handling, an op or a reaction"
}

@MainActor
@Suite("Traps")
struct TrapTests {
    @Test func `T11 a turn attempted inside an automatic computation fails naming the cog and the turn`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                _ = cogs.peek(writingCog)
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog cannot run turn \"bumpTrapSource()\" while the automatic cog `trap.writer` is computing: "
                    + readOnlyAdvice("this op")), "\(text)")
    }

    @Test func `T11 a discard attempted inside an automatic computation fails naming the cog and the discard`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                _ = cogs.peek(discardingCog)
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog cannot run turn \"discard(trap.writer)\" while the automatic cog `trap.discarding` is "
                    + "computing: " + readOnlyAdvice("discard")), "\(text)")
    }

    @Test func `CYCLE-06 a keyed selector cannot run a turn, and the trap names the cog, the key and the turn`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                _ = cogs.peek(illegalSelectorCogs["home"])
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog cannot run turn \"illegalSelectorTurn()\" while the automatic cog `weather[home]` is "
                    + "computing: " + readOnlyAdvice("this op")), "\(text)")
        #expect(!text.contains("SELECTOR TURN BODY RAN"), "\(text)")
    }

    @Test func `CYCLE-06 a custom equality rule cannot run a turn before its cog publishes`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                _ = cogs.peek(illegalEqualityCogs["home"])
                cogs.bumpTrapSource()
                _ = cogs.peek(illegalEqualityCogs["home"])
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog cannot run turn \"illegalEqualityTurn()\" while the automatic cog `weather.equality[home]` "
                    + "is computing: " + readOnlyAdvice("this op")), "\(text)")
        #expect(!text.contains("EQUALITY TURN BODY RAN"), "\(text)")
    }

    @Test func `ASYNC-27 refresh cannot run during an async selector`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                _ = cogs.peek(refreshingCog)
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog cannot run turn \"refresh(target)\" while the async cog `refreshing` is computing: "
                    + readOnlyAdvice("refresh")), "\(text)")
        #expect(!text.contains("REFRESH TARGET SELECTOR RAN"), "\(text)")
        #expect(!text.contains("REFRESHING SELECTOR CONTINUED"), "\(text)")
    }

    @Test func `CYCLE-03 a keyed cycle diagnostic includes every key`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(keyedCycleProbeCogs["home"]) == 0)
        let diagnostic = cycleDiagnostics.values.last ?? nil
        #expect(diagnostic?.path == ["weather.cycle[home]", "weather.cycle[work]", "weather.cycle[home]"])
        #expect(
            diagnostic?.message == "Cog dependency cycle: weather.cycle[home] -> weather.cycle[work] -> weather.cycle[home].")
    }

    @Test func `DECL-10 a named cog carries its name into the cycle diagnostic its trap starts with`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(adviceCog) == 0)
        let diagnostic = cycleDiagnostics.values.last ?? nil
        #expect(diagnostic?.path == ["advice", "advice"])
        #expect(diagnostic?.message == "Cog dependency cycle: advice -> advice.")
    }

    @Test func `a label's control characters are escaped in a cycle message, its path keeps them`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(hostileLabelCog) == 0)
        let diagnostic = cycleDiagnostics.values.last ?? nil
        #expect(diagnostic?.path == ["odd\u{1B}[2J\nlabel", "odd\u{1B}[2J\nlabel"])
        #expect(
            diagnostic?.message
                == #"Cog dependency cycle: odd\u{1B}[2J\nlabel -> odd\u{1B}[2J\nlabel."#)
    }

    @Test func `SEED-08 seeding inside a turn body traps saying seed is for idle test setup`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                cogs.seedInsideTurn()
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog seed can run only during idle test setup, outside a turn, selector or reaction: "
                    + "seed(trap.source) was called in the body of turn \"seedInsideTurn()\". Seed before the code "
                    + "under test runs; to change state from there, call an op"), "\(text)")
    }

    @Test func `SEED-08 seeding from a selector traps naming the computing cog`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                _ = cogs.peek(seedingCog)
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog seed can run only during idle test setup, outside a turn, selector or reaction: "
                    + "seed(trap.source) was called while the automatic cog `trap.seeding` was computing."),
            "\(text)")
    }

    @Test func `SEED-08 seeding from a reaction traps naming the reaction`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting(mechanisms: [
                    Probe("Seeder") { m in
                        m.watch(_trapSourceCog, initial: .skip, name: "onSource") { _, _ in
                            trapRuntime?.seed(_trapSourceCog, to: 7)
                        }
                    }
                ])
                trapRuntime = cogs
                cogs.bumpTrapSource()
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog seed can run only during idle test setup, outside a turn, selector or reaction: "
                    + "seed(trap.source) was called while the reaction `Seeder.onSource` was running."),
            "\(text)")
    }

    @Test func `TURN-07 a writer captured into a Task traps on its late write, naming the cog`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let task = await MainActor.run { () -> Task<Void, Never>? in
                let cogs = Cogs.forTesting()
                cogs.writeFromATaskLater()
                return lateWrite
            }
            await task?.value
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "This writer outlived the turn that created it, so writing to `trap.source` through it is not "
                    + "part of any turn."), "\(text)")
    }
}
