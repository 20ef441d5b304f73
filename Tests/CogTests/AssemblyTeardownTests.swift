import Cog
import CogTesting
import Synchronization
import Testing

// The installed runtime (ONE-01, ONE-05, ONE-06) and a runtime's teardown
// (MECH-10, MECH-15), with the mechanism scenarios between them (MECH-11,
// MECH-12, MECH-13 are in ScopeTests, TestingSupportTests and here).

// MARK: - One feature's state and ops, another feature's read

private let _chosenCityCog = Cog<String?>.Manual(name: "assembly.chosenCity") { nil }
private let _assemblyCountCog = Cog<Int>.Manual(name: "assembly.count") { 41 }

extension CogOps {
    fileprivate func chooseCity(_ city: String?) { turn(_chosenCityCog, to: city) }
    fileprivate func setAssemblyCount(_ count: Int) { turn(_assemblyCountCog, to: count) }
    fileprivate func bumpAssemblyCount() { turn { c in c[_assemblyCountCog] += 1 } }
}

/// A second feature that only receives the runtime and reads through it.
@MainActor
private enum ForecastFeature {
    static func city(in cogs: Cogs) -> String? { cogs.peek(_chosenCityCog) }
}

/// A transient owner of the app's runtime (a window, a session): it keeps
/// nothing but the runtime it was handed.
@MainActor
private final class WindowOwner {
    let cogs: Cogs
    init(cogs: Cogs) { self.cogs = cogs }
    func choose(_ city: String?) { cogs.chooseCity(city) }
    var city: String? { ForecastFeature.city(in: cogs) }
}

@MainActor
struct AssemblyTests {
    @Test func `ONE-01 an op in one feature and a read in another share the assembled runtime`() {
        Cogs.withAssembledCogs { cogs in
            #expect(Cogs.isBootstrappedApp(cogs))
            #expect(ForecastFeature.city(in: cogs) == nil)
            cogs.chooseCity("Oslo")
            #expect(ForecastFeature.city(in: cogs) == "Oslo")
            #expect(Cogs.isBootstrappedApp(cogs))
        }
    }

    @Test func `ONE-01 the assembled runtime operates its mechanisms before the body runs`() {
        let seen = Recorder<Int>()
        Cogs.withAssembledCogs(mechanisms: [Probe("Counter") { m in m.setAssemblyCount(7) }]) { cogs in
            seen.append(cogs.peek(_assemblyCountCog))
            #expect(cogs.debugHistory.turnNames == ["Counter.setAssemblyCount(_:)"])
        }
        #expect(seen.values == [7])
    }

    @Test func `ONE-05 two test runtimes coexist and a write in one is invisible in the other`() {
        let first = Cogs.forTesting()
        let second = Cogs.forTesting()
        #expect(first !== second)
        first.setAssemblyCount(1)
        #expect(first.peek(_assemblyCountCog) == 1)
        #expect(second.peek(_assemblyCountCog) == 41)
        second.setAssemblyCount(2)
        #expect(first.peek(_assemblyCountCog) == 1)
        #expect(second.peek(_assemblyCountCog) == 2)
    }

    @Test func `ONE-05 each of many runtimes made one after another starts from the initial value`() {
        var kept: [Cogs] = []
        for index in 0..<40 {
            let cogs = Cogs.forTesting()
            #expect(cogs.peek(_assemblyCountCog) == 41)
            cogs.setAssemblyCount(index)
            kept.append(cogs)
        }
        #expect(kept.map { $0.peek(_assemblyCountCog) } == Array(0..<40))
    }

    @Test func `ONE-05 test runtimes never take or disturb the install slot`() {
        #expect(!Cogs.hasBootstrappedApp)
        let before = Cogs.forTesting()
        #expect(!Cogs.hasBootstrappedApp)
        #expect(!Cogs.isBootstrappedApp(before))
        Cogs.withAssembledCogs { app in
            #expect(Cogs.hasBootstrappedApp)
            let during = Cogs.forTesting()
            #expect(Cogs.isBootstrappedApp(app))
            #expect(!Cogs.isBootstrappedApp(before))
            #expect(!Cogs.isBootstrappedApp(during))
            during.bumpAssemblyCount()
            #expect(during.peek(_assemblyCountCog) == 42)
            #expect(app.peek(_assemblyCountCog) == 41)
        }
        #expect(!Cogs.hasBootstrappedApp)
        #expect(!Cogs.isBootstrappedApp(before))
        #expect(Cogs.forTesting().peek(_assemblyCountCog) == 41)
    }

    @Test func `ONE-05 the install slot is freed when the body throws`() {
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try Cogs.withAssembledCogs { _ in throw Stop() }
        }
        #expect(!Cogs.hasBootstrappedApp)
    }

    @Test func `ONE-06 an owner rebuilt over the assembled runtime sees the state the last one left`() {
        Cogs.withAssembledCogs { app in
            weak var firstOwner: WindowOwner?
            do {
                let owner = WindowOwner(cogs: app)
                firstOwner = owner
                #expect(owner.city == nil)
                owner.choose("Lima")
                #expect(owner.city == "Lima")
            }
            #expect(firstOwner == nil)
            let rebuilt = WindowOwner(cogs: app)
            #expect(rebuilt.cogs === app)
            #expect(rebuilt.city == "Lima")
            // Nothing is mirrored in the owner: changes flow both ways.
            app.chooseCity("Quito")
            #expect(rebuilt.city == "Quito")
            rebuilt.choose("Cusco")
            #expect(ForecastFeature.city(in: app) == "Cusco")
            #expect(Cogs.isBootstrappedApp(app))
        }
    }
}

// MARK: - Teardown

/// Milestones recorded from main-actor code, cancellation handlers and
/// `deinit`s alike.
private final class Milestones: Sendable {
    private let recorded = Mutex<[String]>([])
    func record(_ milestone: String) { recorded.withLock { $0.append(milestone) } }
    var values: [String] { recorded.withLock { $0 } }
}

/// Records its own release.
private final class ReleaseProbe: Sendable {
    let milestones: Milestones
    let name: String
    init(_ name: String, _ milestones: Milestones) {
        self.name = name
        self.milestones = milestones
    }
    deinit { milestones.record("\(name) released") }
}

/// Holds a runtime's last reference off the main actor, so its teardown
/// starts from another executor.
private actor LastReference {
    private var cogs: Cogs?
    init(_ cogs: Cogs) { self.cogs = cogs }
    func drop() {
        preconditionIsolated()
        cogs = nil
    }
}

/// A class mechanism that owns a resource and runs one task until cancelled.
private final class ConnectionMechanism: MechanismProtocol {
    let name = "Connection"
    private let resource: ReleaseProbe
    private let milestones: Milestones
    private let started: AsyncStream<Void>.Continuation

    init(milestones: Milestones, started: AsyncStream<Void>.Continuation) {
        self.milestones = milestones
        self.started = started
        resource = ReleaseProbe("resource", milestones)
    }

    func operate(_ m: MechanismController) {
        m.task(name: "listen") { [milestones, started] in
            await withTaskCancellationHandler {
                started.yield()
                let (never, _) = AsyncStream.makeStream(of: Void.self)
                for await _ in never {}
            } onCancel: {
                milestones.record("task cancelled")
            }
        }
    }

    deinit { milestones.record("mechanism released") }
}

/// Runs `check` when released.
@MainActor
private final class DeinitCheck {
    let check: @MainActor () -> Void
    init(_ check: @escaping @MainActor () -> Void) { self.check = check }
    isolated deinit { check() }
}

@MainActor
struct TeardownTests {
    @Test func `MECH-10 a deinit run by the teardown finds every mechanism's controller already retired`() {
        let seen = Recorder<String>()
        var first: MechanismController?
        var cogs: Cogs? = Cogs.forTesting(mechanisms: [
            Probe("First") { first = $0 },
            Probe("Second") { m in
                let check = DeinitCheck { seen.append(first?.ifLive { _ in "live" } ?? "retired") }
                m.run { c in
                    _ = c[_assemblyCountCog]
                    _ = check
                }
            },
        ])
        #expect(first?.ifLive { _ in "live" } == "live")
        _ = cogs
        cogs = nil
        #expect(seen.values == ["retired"])
    }

    @Test func `MECH-10 a runtime released off the main actor retires every scope of its mechanisms`() async throws {
        let milestones = Milestones()
        let cleanup = MainActorCleanupAcknowledgement()
        let gate = Cog<Bool>.Manual { true }
        let (starts, started) = AsyncStream.makeStream(of: String.self)
        weak var released: Cogs?
        let holder: LastReference
        do {
            let reactionCapture = ReleaseProbe("reaction", milestones)
            let cogs = Cogs.forTesting(mechanisms: [
                Probe("Engine") { m in
                    m.run { c in
                        _ = c[_assemblyCountCog]
                        _ = reactionCapture
                    }
                    m.task(name: "poll") {
                        await withTaskCancellationHandler {
                            started.yield("poll")
                            let (never, _) = AsyncStream.makeStream(of: Void.self)
                            for await _ in never {}
                        } onCancel: {
                            milestones.record("poll cancelled")
                        }
                    }
                    m.scope(gate) { child in
                        child.task(name: "session") {
                            await withTaskCancellationHandler {
                                started.yield("session")
                                let (never, _) = AsyncStream.makeStream(of: Void.self)
                                for await _ in never {}
                            } onCancel: {
                                milestones.record("session cancelled")
                            }
                        }
                    }
                }
            ])
            cogs.acknowledgeDeinitCleanup(with: cleanup)
            released = cogs
            #expect(cogs.liveRegistrationCount == 2)
            var iterator = starts.makeAsyncIterator()
            let first = await iterator.next()
            let second = await iterator.next()
            #expect(Set([first, second]) == ["poll", "session"])
            #expect(!cleanup.hasBeenAcknowledged)
            holder = LastReference(cogs)
        }
        let drop = Task.detached { await holder.drop() }
        try await cleanup.wait()
        await drop.value
        #expect(cleanup.hasBeenAcknowledged)
        #expect(released == nil)
        #expect(Set(milestones.values) == ["poll cancelled", "session cancelled", "reaction released"])
    }

    @Test func `MECH-15 the runtime keeps the mechanism it was handed and releases it after its scopes`() async throws {
        let milestones = Milestones()
        let cleanup = MainActorCleanupAcknowledgement()
        let (starts, started) = AsyncStream.makeStream(of: Void.self)
        weak var mechanism: ConnectionMechanism?
        let holder: LastReference
        do {
            let cogs = { () -> Cogs in
                let owned = ConnectionMechanism(milestones: milestones, started: started)
                mechanism = owned
                return Cogs.forTesting(mechanisms: [owned])
            }()
            cogs.acknowledgeDeinitCleanup(with: cleanup)
            // Nothing outside the runtime holds the mechanism, and it is here.
            #expect(mechanism != nil)
            var iterator = starts.makeAsyncIterator()
            _ = await iterator.next()
            #expect(milestones.values.isEmpty)
            holder = LastReference(cogs)
        }
        let drop = Task.detached { await holder.drop() }
        try await cleanup.wait()
        await drop.value
        #expect(mechanism == nil)
        #expect(milestones.values == ["task cancelled", "mechanism released", "resource released"])
    }

    @Test func `MECH-15 a runtime released on the main actor tears down in the same order`() async {
        let milestones = Milestones()
        let cleanup = MainActorCleanupAcknowledgement()
        let (starts, started) = AsyncStream.makeStream(of: Void.self)
        var cogs: Cogs? = Cogs.forTesting(mechanisms: [ConnectionMechanism(milestones: milestones, started: started)])
        cogs?.acknowledgeDeinitCleanup(with: cleanup)
        var iterator = starts.makeAsyncIterator()
        _ = await iterator.next()
        _ = cogs
        cogs = nil
        #expect(cleanup.hasBeenAcknowledged)
        #expect(milestones.values == ["task cancelled", "mechanism released", "resource released"])
    }

    @Test func `MECH-13 one op serves the runtime and a controller, which prefixes its path`() {
        var controller: MechanismController?
        let cogs = Cogs.forTesting(mechanisms: [Probe("Stepper") { controller = $0 }])
        cogs.bumpAssemblyCount()
        controller?.bumpAssemblyCount()
        #expect(cogs.peek(_assemblyCountCog) == 43)
        #expect(cogs.debugHistory.turnNames == ["bumpAssemblyCount()", "Stepper.bumpAssemblyCount()"])
    }
}
