import Cog
import CogTesting
import Testing

private let _levelCog = Cog<Int>.Manual(name: "mechanisms.level") { 0 }
private let _tickCog = Cog<Int>.Manual(name: "mechanisms.ticks") { 0 }

extension CogOps {
    fileprivate func setLevel(_ level: Int) { turn(_levelCog, to: level) }
    fileprivate func tick() { turn { c in c[_tickCog] += 1 } }
}

private struct WeatherMechanism: MechanismProtocol {
    let clock: TestClock
    let taskNames: Recorder<String?>

    func operate(_ m: MechanismController) {
        m.task(name: "hourlyRefresh") { [weak m, clock, taskNames] in
            await MainActor.run { taskNames.append(Task.name) }
            try await clock.sleep(for: .seconds(3_600))
            await m?.tick()
        }
    }
}

private struct Mechanism: MechanismProtocol {
    func operate(_ m: MechanismController) {}
}

private struct LevelWriterMechanism: MechanismProtocol {
    func operate(_ m: MechanismController) { m.setLevel(4) }
}

private struct LevelReaderMechanism: MechanismProtocol {
    let seen: Recorder<Int>
    func operate(_ m: MechanismController) { seen.append(m.peek(_levelCog)) }
}

/// A class mechanism owning a resource whose release is observable.
@MainActor
private final class ResourceMechanism: MechanismProtocol {
    let log: Recorder<String>
    var name: String { "Resource" }

    init(log: Recorder<String>) { self.log = log }

    func operate(_ m: MechanismController) {
        let token = ReleaseToken { [log] in log.append("scope work released") }
        m.watch(_levelCog, initial: .skip, name: "level") { _, _ in _ = token }
    }

    isolated deinit { log.append("mechanism released") }
}

@MainActor
@Suite("Mechanisms", .timeLimit(.minutes(1)))
struct MechanismTests {
    @Test func `M5 the default name drops a trailing Mechanism, and a type named Mechanism keeps it`() {
        #expect(WeatherMechanism(clock: TestClock(), taskNames: Recorder()).name == "Weather")
        #expect(Mechanism().name == "Mechanism")
        #expect(LevelWriterMechanism().name == "LevelWriter")
    }

    @Test func `M1 M2 mechanisms operate in order and earlier operate writes settle first`() {
        let seen = Recorder<Int>()
        let cogs = Cogs.forTesting(mechanisms: [LevelWriterMechanism(), LevelReaderMechanism(seen: seen)])
        #expect(seen.values == [4])
        #expect(cogs.debugHistory.turnNames == ["LevelWriter.setLevel(_:)"])
    }

    @Test func `M6 a task is named by its path and its timed op runs only when the clock advances`() async throws {
        let clock = TestClock()
        let names = Recorder<String?>()
        let cogs = Cogs.forTesting(mechanisms: [WeatherMechanism(clock: clock, taskNames: names)])
        try await clock.waitForScheduledSleep(within: .seconds(30))
        #expect(names.values == ["Weather.hourlyRefresh"])
        var ticks = cogs.values(of: _tickCog).makeAsyncIterator()
        #expect(await ticks.next() == 0)
        clock.advance(by: .seconds(3_600))
        #expect(await ticks.next() == 1)
        #expect(cogs.debugHistory.turnNames == ["Weather.tick()"])
    }

    @Test func `M7 teardown ends every scope's work before releasing the mechanisms`() {
        let log = Recorder<String>()
        var cogs: Cogs? = Cogs.forTesting(mechanisms: [ResourceMechanism(log: log)])
        #expect(log.values.isEmpty)
        _ = cogs
        cogs = nil
        #expect(log.values == ["scope work released", "mechanism released"])
    }

    @Test func `M8 a weak controller from a background callback calls ops until teardown`() async {
        var captured: MechanismController?
        var cogs: Cogs? = Cogs.forTesting(mechanisms: [Probe("Engine") { captured = $0 }])
        weak let weakController = captured
        captured = nil
        await Task.detached { [weakController] in await weakController?.tick() }.value
        #expect(cogs?.peek(_tickCog) == 1)
        #expect(cogs?.debugHistory.turnNames == ["Engine.tick()"])
        cogs = nil
        #expect(weakController == nil)
    }

    @Test func `M4 MECH-04 duplicate mechanism names trap naming the name and the fix`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                _ = Cogs.forTesting(mechanisms: [Probe("X") { _ in }, Probe("X") { _ in }])
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Two mechanisms in one runtime are both named \"X\". Mechanism names attribute debug history, task "
                    + "names and diagnostics, so each mechanism needs its own: give one of them an explicit `name`"),
            "\(text)")
    }

    @Test func `M10 ONE-02 a second assemble traps saying what to do instead`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let first = Cogs.assemble(mechanisms: [])
                _ = first
                _ = Cogs.assemble(mechanisms: [])
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog is already assembled. Cogs.assemble installs the process's one runtime and runs exactly once, "
                    + "at the entry point; a second would leave this process holding two graphs, with its state split "
                    + "between them. Keep the runtime the first call returned and pass it on instead of assembling "
                    + "again; tests take their own isolated runtime from `Cogs.forTesting(seeding:mechanisms:)` "
                    + "(CogTesting)"), "\(text)")
    }
}
