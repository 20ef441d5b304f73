import Cog
import CogTesting
import Testing

private let _gateCog = Cog<Bool>.Manual(name: "scopes.gate") { false }
private let _innerGateCog = Cog<Bool>.Manual(name: "scopes.innerGate") { true }
private let _sessionCog = Cog<Session?>.Manual(name: "scopes.session") { nil }
private let _screensCog = Cog<[String]>.Manual(name: "scopes.screens") { [] }
private let _xCog = Cog<Int>.Manual(name: "scopes.x") { 0 }
private let _sessionUpstreamCog = Cog<String?>.Manual(name: "scopes.upstream") { nil }
private let sessionNameCog = Cog<String?>(name: "scopes.sessionName") { c in c[_sessionUpstreamCog] }

/// An identity whose equal copies are distinct values.
struct Session: Equatable, CustomStringConvertible {
    let id: String
    var token = 0
    static func == (lhs: Session, rhs: Session) -> Bool { lhs.id == rhs.id }
    var description: String { id }
}

extension CogOps {
    fileprivate func setGate(_ open: Bool) { turn(_gateCog, to: open) }
    fileprivate func setInnerGate(_ open: Bool) { turn(_innerGateCog, to: open) }
    fileprivate func setSession(_ session: Session?) { turn(_sessionCog, to: session) }
    fileprivate func setScreens(_ screens: [String]) { turn(_screensCog, to: screens) }
    fileprivate func setX(_ value: Int) { turn(_xCog, to: value) }
    fileprivate func closeGateAndSetX(_ value: Int) {
        turn { c in
            c[_gateCog] = false
            c[_xCog] = value
        }
    }
    fileprivate func sessionAToBToA() {
        turn { c in
            c[_sessionCog] = Session(id: "B")
            c[_sessionCog] = Session(id: "A", token: 9)
        }
    }
    fileprivate func screensRemoveAndReadd(_ id: String) {
        turn { c in
            let screens = c[_screensCog]
            c[_screensCog] = screens.filter { $0 != id }
            c[_screensCog] = screens
        }
    }
}

/// Records scope openings and closings as "open A#1" / "close A#1", where #n
/// counts the openings of one identity (a new instance gets a new number).
/// The closing is seen synchronously: the child's watch captures a token that
/// the teardown releases.
@MainActor
final class ScopeLog {
    private(set) var events: [String] = []
    private(set) var tasks: [String: Task<Void, any Error>] = [:]
    private var openings: [String: Int] = [:]

    /// Call from a scope body: logs the opening, and the closing when the
    /// child's registrations are released.
    func open(_ identity: String, _ s: MechanismController) {
        openings[identity, default: 0] += 1
        let instance = "\(identity)#\(openings[identity]!)"
        events.append("open \(instance)")
        let token = ReleaseToken { [weak self] in self?.events.append("close \(instance)") }
        s.watch(_xCog, initial: .skip, name: "x") { [weak self] _, x in
            _ = token
            self?.events.append("x \(x) in \(instance)")
        }
        tasks[instance] = s.task(name: "life") {
            try await Task.sleep(for: .seconds(3_600))
        }
    }
}

/// Calls `onRelease` when the last reference to it goes away.
@MainActor
final class ReleaseToken {
    let onRelease: @MainActor () -> Void
    init(_ onRelease: @escaping @MainActor () -> Void) { self.onRelease = onRelease }
    isolated deinit { onRelease() }
}

@MainActor
@Suite("Scopes")
struct ScopeTests {
    // MARK: Bool

    @Test func `Bool false at registration opens nothing`() {
        let log = ScopeLog()
        _ = Cogs.forTesting(mechanisms: [Probe("M") { m in m.scope(_gateCog, name: "gate") { s in log.open("G", s) } }])
        #expect(log.events.isEmpty)
    }

    @Test func `S1 Bool true at registration runs the body once, live when assembly returns`() {
        let log = ScopeLog()
        let cogs = Cogs.forTesting(
            seeding: { $0.seed(_gateCog, to: true) },
            mechanisms: [Probe("M") { m in m.scope(_gateCog, name: "gate") { s in log.open("G", s) } }])
        #expect(log.events == ["open G#1"])
        cogs.setX(3)
        #expect(log.events == ["open G#1", "x 3 in G#1"])
    }

    @Test func `S2 Bool false to true opens a fresh child, true to true keeps it, true to false retires it, and rising again opens a new one`() {
        let log = ScopeLog()
        let cogs = Cogs.forTesting(mechanisms: [Probe("M") { m in m.scope(_gateCog, name: "gate") { s in log.open("G", s) } }])
        cogs.setGate(true)
        cogs.setGate(true)
        #expect(log.events == ["open G#1"])
        cogs.setGate(false)
        #expect(log.tasks["G#1"]?.isCancelled == true)
        cogs.setX(1)
        #expect(log.events == ["open G#1", "close G#1"])
        cogs.setGate(true)
        cogs.setX(2)
        #expect(log.events == ["open G#1", "close G#1", "open G#2", "x 2 in G#2"])
    }

    @Test func `S4 MECH-11 a turn that closes a scope and changes what its reaction reads never runs that reaction`() {
        let log = ScopeLog()
        let cogs = Cogs.forTesting(mechanisms: [Probe("M") { m in m.scope(_gateCog, name: "gate") { s in log.open("G", s) } }])
        cogs.setGate(true)
        cogs.closeGateAndSetX(5)
        #expect(log.events == ["open G#1", "close G#1"])
        #expect(cogs.peek(_xCog) == 5)
    }

    @Test func `S3 nested scopes compose names and closing the outer tears down the inner`() {
        let log = ScopeLog()
        let paths = Recorder<String>()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("M") { m in
                m.scope(_gateCog, name: "outer") { s in
                    paths.append(s.path)
                    s.scope(_innerGateCog, name: "inner") { inner in
                        paths.append(inner.path)
                        log.open("I", inner)
                    }
                }
            }
        ])
        cogs.setGate(true)
        #expect(paths.values == ["M.outer", "M.outer.inner"])
        cogs.setGate(false)
        cogs.setX(8)
        #expect(log.events == ["open I#1", "close I#1"])
    }

    // MARK: Optional identity

    private func identityRuntime(_ log: ScopeLog) -> Cogs {
        Cogs.forTesting(mechanisms: [
            Probe("M") { m in m.scope(_sessionCog, name: "session") { session, s in log.open(session.id, s) } }
        ])
    }

    @Test func `identity nil at registration installs the selector and opens nothing`() {
        let log = ScopeLog()
        let cogs = identityRuntime(log)
        #expect(log.events.isEmpty)
        #expect(cogs.liveRegistrationCount == 1)
    }

    @Test func `identity A at registration opens A once`() {
        let log = ScopeLog()
        let cogs = Cogs.forTesting(
            seeding: { $0.seed(_sessionCog, to: Session(id: "A")) },
            mechanisms: [Probe("M") { m in m.scope(_sessionCog, name: "session") { session, s in log.open(session.id, s) } }])
        withExtendedLifetime(cogs) { #expect(log.events == ["open A#1"]) }
    }

    @Test func `identity nil to A opens A and A to an equal copy keeps it`() {
        let log = ScopeLog()
        let cogs = identityRuntime(log)
        cogs.setSession(Session(id: "A"))
        cogs.setSession(Session(id: "A", token: 2))
        cogs.setX(4)
        #expect(log.events == ["open A#1", "x 4 in A#1"])
    }

    @Test func `identity A to B retires A then opens B`() {
        let log = ScopeLog()
        let cogs = identityRuntime(log)
        cogs.setSession(Session(id: "A"))
        cogs.setSession(Session(id: "B"))
        #expect(log.events == ["open A#1", "close A#1", "open B#1"])
        #expect(log.tasks["A#1"]?.isCancelled == true)
        #expect(log.tasks["B#1"]?.isCancelled == false)
        cogs.setX(1)
        #expect(log.events.last == "x 1 in B#1")
    }

    @Test func `identity A to nil retires A and A again in a later turn is a new instance`() {
        let log = ScopeLog()
        let cogs = identityRuntime(log)
        cogs.setSession(Session(id: "A"))
        cogs.setSession(nil)
        cogs.setSession(Session(id: "A"))
        cogs.setX(6)
        #expect(log.events == ["open A#1", "close A#1", "open A#2", "x 6 in A#2"])
    }

    @Test func `identity A to B to A inside one turn does nothing`() {
        let log = ScopeLog()
        let cogs = identityRuntime(log)
        cogs.setSession(Session(id: "A"))
        cogs.sessionAToBToA()
        cogs.setX(2)
        #expect(log.events == ["open A#1", "x 2 in A#1"])
    }

    @Test func `S6 the selected identity is the only lifetime dependency`() {
        let log = ScopeLog()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("M") { m in
                m.scope(sessionNameCog, name: "named") { name, s in
                    log.open(name, s)
                    _ = s.peek(_xCog)
                }
            }
        ])
        cogs.turn(named: "sign in") { c in c[_sessionUpstreamCog] = "A" }
        cogs.setX(9)
        #expect(log.events == ["open A#1", "x 9 in A#1"])
    }

    @Test func `runtime teardown retires every child and descendant`() {
        let log = ScopeLog()
        var cogs: Cogs? = identityRuntime(log)
        cogs?.setSession(Session(id: "A"))
        cogs = nil
        #expect(log.events == ["open A#1", "close A#1"])
    }

    // MARK: each:

    private func eachRuntime(_ log: ScopeLog) -> Cogs {
        Cogs.forTesting(mechanisms: [
            Probe("M") { m in m.scope(each: _screensCog, name: "screen") { id, s in log.open(id, s) } }
        ])
    }

    @Test func `each empty to A opens A, then adding B keeps A and opens B`() {
        let log = ScopeLog()
        let cogs = eachRuntime(log)
        cogs.setScreens(["A"])
        cogs.setScreens(["A", "B"])
        cogs.setX(1)
        #expect(log.events == ["open A#1", "open B#1", "x 1 in A#1", "x 1 in B#1"])
    }

    @Test func `each reordering restarts nothing`() {
        let log = ScopeLog()
        let cogs = eachRuntime(log)
        cogs.setScreens(["A", "B"])
        cogs.setScreens(["B", "A"])
        #expect(log.events == ["open A#1", "open B#1"])
    }

    @Test func `each removing A retires only A and emptying retires B`() {
        let log = ScopeLog()
        let cogs = eachRuntime(log)
        cogs.setScreens(["A", "B"])
        cogs.setScreens(["B"])
        cogs.setX(3)
        #expect(log.events == ["open A#1", "open B#1", "close A#1", "x 3 in B#1"])
        cogs.setScreens([])
        #expect(log.events.last == "close B#1")
    }

    @Test func `each A removed then re-added in a later turn is a new instance, within one turn it never left`() {
        let log = ScopeLog()
        let cogs = eachRuntime(log)
        cogs.setScreens(["A"])
        cogs.screensRemoveAndReadd("A")
        #expect(log.events == ["open A#1"])
        cogs.setScreens([])
        cogs.setScreens(["A"])
        #expect(log.events == ["open A#1", "close A#1", "open A#2"])
    }

    @Test func `S10 departures retire first in opening order, arrivals open in collection order`() {
        let log = ScopeLog()
        let cogs = eachRuntime(log)
        cogs.setScreens(["P3", "P1", "P2"])
        cogs.setScreens(["P5", "P2", "P4"])
        #expect(
            log.events == [
                "open P3#1", "open P1#1", "open P2#1", "close P3#1", "close P1#1", "open P5#1", "open P4#1",
            ])
    }

    @Test func `S10 a collection scope is one registration however many children come and go`() {
        let (cogs, m) = Cogs.forTestingWithController()
        m.scope(each: _screensCog, name: "screen") { _, s in
            s.watch(_xCog, initial: .skip, name: "x") { _, _ in }
        }
        #expect(cogs.liveRegistrationCount == 1)
        for round in 3...12 {
            cogs.setScreens(["P1", "P2", "P\(round)"])
            cogs.setScreens(["P1", "P2"])
        }
        #expect(cogs.liveRegistrationCount == 1 + 2)
        cogs.setScreens([])
        #expect(cogs.liveRegistrationCount == 1)
    }

    @Test func `S11 a duplicate identity traps naming the scope and the duplicate`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting(mechanisms: [
                    Probe("Trails") { m in m.scope(each: _screensCog, name: "screen") { _, _ in } }
                ])
                cogs.setScreens(["7", "9", "7"])
            }
        }
        #expect(stderrText(result).contains("scope(each:) `Trails.screen` selected `7` twice"))
    }
}
