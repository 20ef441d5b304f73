import Cog
import CogTesting
import Testing

private let _zipCog = Cog<String>.Manual(name: "testing.zip") { "" }
private let _skyCog = Cog<String>.Manual(name: "testing.sky") { "clear" }
@MainActor private let alertRuns = Counter()
private let alertCog = Cog<String>(name: "testing.alert") { c in
    alertRuns.bump()
    return c[_skyCog] == "clear" ? "nice in \(c[_zipCog])" : "stay in"
}

extension CogOps {
    fileprivate func setSky(_ sky: String) { turn(_skyCog, to: sky) }
    fileprivate func setZip(_ zip: String) { turn(_zipCog, to: zip) }
}

/// A mechanism that records what it sees when it operates.
private struct PeekingMechanism: Mechanism {
    let seen: Recorder<String>
    func operate(_ m: MechanismController) {
        seen.append(m.peek(_zipCog))
        m.setSky("cloudy")
    }
}

private struct SecondMechanism: Mechanism {
    let seen: Recorder<String>
    func operate(_ m: MechanismController) {
        seen.append(m.peek(_skyCog))
    }
}

@MainActor
@Suite("Testing support", .timeLimit(.minutes(1)))
struct TestingSupportTests {
    @Test func `M10 test runtimes are isolated from each other`() {
        let first = Cogs.forTesting()
        let second = Cogs.forTesting()
        first.setZip("02139")
        #expect(first.peek(_zipCog) == "02139")
        #expect(second.peek(_zipCog) == "")
    }

    @Test func `Q1 MECH-12 seeding runs before any mechanism operates and operate writes settle in order`() {
        let seen = Recorder<String>()
        let cogs = Cogs.forTesting(
            seeding: { $0.seed(_zipCog, to: "94110") },
            mechanisms: [PeekingMechanism(seen: seen), SecondMechanism(seen: seen)])
        #expect(seen.values == ["94110", "cloudy"])
        #expect(cogs.debugHistory.turnNames == ["Peeking.setSky(_:)"])
    }

    @Test func `Q2 seed is quiet: no turn and no history`() {
        let cogs = Cogs.forTesting()
        cogs.seed(_zipCog, to: "10001")
        #expect(cogs.peek(_zipCog) == "10001")
        #expect(cogs.debugHistory.count == 0)
    }

    @Test func `Q3 seed still flags dependents, which re-check on the next read`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[alertCog] == "nice in ")
        let before = alertRuns.count
        cogs.seed(_zipCog, to: "60601")
        cogs.seed(_skyCog, to: "cloudy")
        #expect(cogs[alertCog] == "stay in")
        #expect(alertRuns.count == before + 1)
        cogs.seed(_skyCog, to: "cloudy")
        #expect(cogs[alertCog] == "stay in")
        #expect(alertRuns.count == before + 1)
        cogs.setSky("clear")
        #expect(cogs[alertCog] == "nice in 60601")
    }

    @Test func `Q5 TestClock wakes sleepers in deadline order only when advanced`() async throws {
        let clock = TestClock()
        let woke = WakeLog()
        let late = Task {
            try await clock.sleep(for: .seconds(2))
            await woke.append("late")
        }
        try await clock.waitForScheduledSleep(within: .seconds(30))
        let early = Task {
            try await clock.sleep(for: .seconds(1))
            await woke.append("early")
        }
        try await clock.waitForScheduledSleep(count: 2, within: .seconds(30))
        #expect(await woke.names.isEmpty)
        clock.advance(by: .seconds(1))
        try await early.value
        #expect(await woke.names == ["early"])
        clock.advance(by: .seconds(1))
        try await late.value
        #expect(await woke.names == ["early", "late"])
        #expect(clock.now.offset == .seconds(2))
    }

    @Test func `Q5 TestClock finish cancels every sleeper`() async throws {
        let clock = TestClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.finish()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.activeSleeperCount == 0)
    }

    @Test func `Q5 waitForScheduledSleep gives up after its real-time limit`() async {
        let clock = TestClock()
        await #expect(throws: TestClock.WaitTimeout.self) {
            try await clock.waitForScheduledSleep(within: .milliseconds(20))
        }
    }

    @Test func `Q8 an acknowledgement wakes every waiter, and a cancelled waiter stops with CancellationError`() async throws {
        let acknowledgement = MainActorCleanupAcknowledgement()
        let waiters = (0..<3).map { _ in Task { try await acknowledgement.wait() } }
        acknowledgement.acknowledge()
        for waiter in waiters { try await waiter.value }
        #expect(acknowledgement.hasBeenAcknowledged)
        try await acknowledgement.wait()

        let never = MainActorCleanupAcknowledgement()
        let cancelled = Task { try await never.wait() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(!never.hasBeenAcknowledged)
    }
}

/// Collects wake-ups from tasks in order.
private actor WakeLog {
    private(set) var names: [String] = []
    func append(_ name: String) { names.append(name) }
}
