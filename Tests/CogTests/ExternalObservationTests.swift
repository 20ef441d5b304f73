import Cog
import CogTesting
import Observation
import Testing

// Issue 31 item 3: outside `@Observable` models linked into selectors with
// `c.track`, on the continuous (`Observations`) and the legacy re-arm path.

@Observable
@MainActor
private final class Thermostat {
    var target = 20
    var mode = "heat"
}

@Observable
@MainActor
private final class Profile {
    var given = "Ada"
    var family = "Lovelace"
    var nickname = "Countess"
}

private let _useNicknameCog = Cog<Bool>.Manual(name: "external.useNickname") { false }

extension ExternalObservationTrackingForTesting: CustomTestStringConvertible {
    public var testDescription: String { self == .legacy ? "legacy" : "automatic" }
}

@MainActor
@Suite("Outside Observation (issue 31)", .timeLimit(.minutes(1)))
struct ExternalObservationTests {
    @Test(arguments: [ExternalObservationTrackingForTesting.automatic, .legacy])
    func `EXPORT-08 a tracked property reaches its dependent cog with the newest value after each change`(
        mode: ExternalObservationTrackingForTesting
    ) async {
        let thermostat = Thermostat()
        let doubledCog = Cog<Int>(name: "external.doubled") { c in c.track(thermostat, \.target) * 2 }
        let cogs = Cogs.forTesting(externalObservationTracking: mode)
        var values = cogs.values(of: doubledCog).makeAsyncIterator()
        #expect(await values.next() == 40)

        thermostat.target = 21
        #expect(await values.next() == 42)
        thermostat.target = 25
        #expect(await values.next() == 50)
        #expect(cogs[doubledCog] == 50)
        let published = cogs.debugHistory.entries.filter { $0.event == .turn && $0.name.hasPrefix("c.track(") }
        #expect(published.count == 2)
    }

    @Test(arguments: [ExternalObservationTrackingForTesting.automatic, .legacy])
    func `EXPORT-10 changing another property of the tracked object recomputes nothing`(
        mode: ExternalObservationTrackingForTesting
    ) async {
        let thermostat = Thermostat()
        let runs = Counter()
        let doubledCog = Cog<Int>(name: "external.doubled") { c in
            runs.bump()
            return c.track(thermostat, \.target) * 2
        }
        let cogs = Cogs.forTesting(externalObservationTracking: mode)
        var values = cogs.values(of: doubledCog).makeAsyncIterator()
        #expect(await values.next() == 40)
        #expect(runs.count == 1)

        thermostat.mode = "cool"
        await Task.yield()
        thermostat.target = 22
        #expect(await values.next() == 44)
        #expect(runs.count == 2)
    }

    @Test func `EXPORT-11 on the legacy path a mutation after the re-arm acknowledgement propagates its newest value`()
        async throws
    {
        let thermostat = Thermostat()
        let doubledCog = Cog<Int>(name: "external.doubled") { c in c.track(thermostat, \.target) * 2 }
        let cogs = Cogs.forTesting(externalObservationTracking: .legacy)
        #expect(cogs[doubledCog] == 40)

        for target in [21, 30, 31] {
            let rearmed = MainActorCleanupAcknowledgement()
            cogs.acknowledgeNextExternalObservationRearm(with: rearmed)
            thermostat.target = target
            try await rearmed.wait()
            #expect(cogs[doubledCog] == target * 2)
        }
    }

    @Test(arguments: [ExternalObservationTrackingForTesting.automatic, .legacy])
    func `EXPORT-13 the closure form follows what its latest closure read`(
        mode: ExternalObservationTrackingForTesting
    ) async {
        let profile = Profile()
        let runs = Counter()
        let nameCog = Cog<String>(name: "external.name") { c in
            runs.bump()
            let useNickname = c[_useNicknameCog]
            return c.track(profile) { profile in
                useNickname ? profile.nickname : "\(profile.given) \(profile.family)"
            }
        }
        let cogs = Cogs.forTesting(externalObservationTracking: mode)
        var values = cogs.values(of: nameCog).makeAsyncIterator()
        #expect(await values.next() == "Ada Lovelace")

        profile.family = "King"
        #expect(await values.next() == "Ada King")

        // The rerun's closure reads only the nickname: the family name no
        // longer reaches the cog.
        cogs.turn(_useNicknameCog, to: true)
        #expect(await values.next() == "Countess")
        let runsAfterSwitch = runs.count
        profile.family = "Byron"
        await Task.yield()
        profile.nickname = "Enchantress"
        #expect(await values.next() == "Enchantress")
        #expect(runs.count == runsAfterSwitch + 1)
    }

    @Test func `a closure bridge goes with its state's release; the state made again has its own`() async throws {
        let profile = Profile()
        let clock = TestClock()
        let nameCog = Cog<String>(name: "external.name") { c in c.track(profile) { $0.given } }
        let cogs = Cogs.forTesting(
            clock: clock, whileObservedGrace: .seconds(1), externalObservationTracking: .legacy)
        #expect(cogs.peek(nameCog) == "Ada")
        let released = releases(cogs)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await waitAll(released)

        // The released state's bridge is stopped: this change publishes nothing.
        profile.given = "Augusta"
        #expect(cogs[nameCog] == "Augusta")
        let rearmed = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextExternalObservationRearm(with: rearmed)
        profile.given = "Ada"
        try await rearmed.wait()
        #expect(cogs[nameCog] == "Ada")
        let published = cogs.debugHistory.entries.filter { $0.event == .turn && $0.name.hasPrefix("c.track") }
        #expect(published.count == 1)
    }

    @Test func `outside publications are local turns named after the property`() async throws {
        let thermostat = Thermostat()
        let doubledCog = Cog<Int>(name: "external.doubled") { c in c.track(thermostat, \.target) * 2 }
        let cogs = Cogs.forTesting(externalObservationTracking: .legacy)
        _ = cogs[doubledCog]
        let rearmed = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextExternalObservationRearm(with: rearmed)
        thermostat.target = 22
        try await rearmed.wait()
        let names = cogs.debugHistory.entries.filter { $0.event == .turn }.map(\.name)
        #expect(names.last == "c.track(Thermostat)" || names.last == "c.track(\\Thermostat.target)")
    }
}
