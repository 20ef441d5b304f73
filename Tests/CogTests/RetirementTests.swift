import Cog
import CogTesting
import Testing

private let _openCog = Cog<Bool>.Manual(name: "retire.open") { false }
private let _countCog = Cog<Int>.Manual(name: "retire.count") { 0 }
private let _sessionCog = Cog<String?>.Manual(name: "retire.session") { nil }
private let _notesCog = Cog<[String]>.Manual(name: "retire.notes") { [] }
private let _draftCogs = CogBox<String, Int>.Manual(
    { "" }, lifetime: .whileObserved(resetToInitial: true), name: "retire.draft")
private let statusCog = Cog<Int>.Async(default: 0, name: "retire.async") { _ in .run { 1 } }

extension CogOps {
    fileprivate func setOpen(_ open: Bool) { turn(_openCog, to: open) }
    fileprivate func bump() { turn { c in c[_countCog] += 1 } }
    fileprivate func setSession(_ session: String?) { turn(_sessionCog, to: session) }
    fileprivate func note(_ text: String) { turn { c in c[_notesCog].append(text) } }
    fileprivate func typeDraft(_ id: Int, _ text: String) { turn(_draftCogs[id], to: text) }
    fileprivate func dropDraft(_ id: Int) { discard(_draftCogs[id]) }
}

/// Keeps the controller of a Bool scope over `_openCog`, opened once.
@MainActor
private func retiredScope() -> (cogs: Cogs, scope: MechanismController) {
    var captured: MechanismController?
    let cogs = Cogs.forTesting(mechanisms: [Probe("M") { m in m.scope(_openCog, name: "panel") { captured = $0 } }])
    cogs.setOpen(true)
    cogs.setOpen(false)
    guard let captured else { fatalError("the scope did not open") }
    return (cogs, captured)
}

@MainActor
@Suite("Retirement")
struct RetirementTests {
    @Test func `RT2 a turn and every op through a retired controller are inert before the body runs`() {
        let (cogs, s) = retiredScope()
        let turnsBefore = cogs.debugHistory.turnNames
        var bodyRan = false
        s.turn(named: "direct") { _ in bodyRan = true }
        s.bump()
        #expect(!bodyRan)
        #expect(cogs.peek(_countCog) == 0)
        #expect(cogs.debugHistory.turnNames == turnsBefore)
    }

    @Test func `RT2 run, watch and status watch through a retired controller register nothing`() {
        let (cogs, s) = retiredScope()
        var calls = 0
        s.run { _ in calls += 1 }
        s.watch(_countCog, initial: .run, name: "w") { _, _ in calls += 1 }
        s.status.watch(statusCog, initial: .run, name: "s") { _, _ in calls += 1 }
        cogs.bump()
        #expect(calls == 0)
        #expect(cogs.liveRegistrationCount == 1)
    }

    @Test func `RT2 scopes through a retired controller read no selector and run no body`() {
        let (cogs, s) = retiredScope()
        var bodies = 0
        cogs.setOpen(true)
        s.scope(_openCog, name: "inner") { _ in bodies += 1 }
        s.scope(_sessionCog, name: "id") { _, _ in bodies += 1 }
        s.scope(each: _notesCog, name: "each") { _, _ in bodies += 1 }
        cogs.setSession("A")
        cogs.note("n")
        #expect(bodies == 0)
    }

    @Test func `RT2 task through a retired controller is already cancelled and never starts`() async {
        let (_, s) = retiredScope()
        var started = false
        let task = s.task(name: "late") { @MainActor in started = true }
        #expect(task.isCancelled)
        _ = await task.result
        #expect(!started)
    }

    @Test func `RT2 discard through a retired controller is inert while the runtime's works`() {
        let (cogs, s) = retiredScope()
        cogs.typeDraft(1, "half")
        s.dropDraft(1)
        #expect(cogs.peek(_draftCogs[1]) == "half")
        cogs.dropDraft(1)
        #expect(cogs.peek(_draftCogs[1]) == "")
    }

    @Test func `RT4 ifLive returns the body's result while live and nil once retired`() {
        var captured: MechanismController?
        let cogs = Cogs.forTesting(mechanisms: [Probe("M") { m in m.scope(_openCog, name: "panel") { captured = $0 } }])
        cogs.setOpen(true)
        cogs.bump()
        #expect(captured?.ifLive { $0.peek(_countCog) } == 1)
        cogs.setOpen(false)
        #expect(captured?.ifLive { $0.peek(_countCog) } == nil)
    }

    @Test func `RT1 a deinit during teardown that reaches a sibling finds it already inert`() {
        var sibling: MechanismController?
        var siblingLive: Bool?
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("M") { m in
                m.scope(_openCog, name: "panel") { s in
                    s.scope(_openCog, name: "a") { a in
                        let token = ReleaseToken {
                            siblingLive = sibling?.ifLive { _ in true } ?? false
                            sibling?.bump()
                        }
                        a.run { _ in _ = token }
                    }
                    s.scope(_openCog, name: "b") { b in sibling = b }
                }
            }
        ])
        cogs.setOpen(true)
        cogs.setOpen(false)
        #expect(siblingLive == false)
        #expect(cogs.peek(_countCog) == 0)
    }

    @Test func `RT3 peek through a retired controller traps naming the scope and ifLive`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let (_, s) = retiredScope()
                _ = s.peek(_countCog)
            }
        }
        let text = stderrText(result)
        #expect(text.contains("peek through the retired scope `M.panel`"))
        #expect(text.contains("ifLive"))
    }

    @Test func `RT3 status peek through a retired controller traps`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let (_, s) = retiredScope()
                _ = s.status.peek(statusCog)
            }
        }
        #expect(stderrText(result).contains("status.peek through the retired scope `M.panel`"))
    }

    @Test func `RT3 refresh through a retired controller traps`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let (_, s) = retiredScope()
                s.refresh(statusCog)
            }
        }
        #expect(stderrText(result).contains("refresh through the retired scope `M.panel`"))
    }

    @Test func `RT3 a torn-down runtime gives its own message`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                var root: MechanismController?
                var cogs: Cogs? = Cogs.forTesting(mechanisms: [Probe("Root") { root = $0 }])
                _ = cogs
                cogs = nil
                _ = root?.peek(_countCog)
            }
        }
        #expect(stderrText(result).contains("peek through `Root` after its runtime was torn down"))
    }

    // MARK: FIFO admission

    @Test func `F1 a retired scope's queued write is dropped before its body runs`() {
        let sessions = Recorder<String>()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Sessions") { m in
                m.watch(_countCog, initial: .skip, name: "replace") { _, _ in m.setSession("B") }
                m.scope(_sessionCog, name: "session") { id, s in
                    sessions.append(id)
                    s.watch(_countCog, initial: .skip, name: "write") { _, _ in s.note("from \(id)") }
                }
            }
        ])
        cogs.setSession("A")
        cogs.bump()
        #expect(sessions.values == ["A", "B"])
        #expect(cogs.peek(_notesCog) == [])
        #expect(cogs.debugHistory.turnNames == ["setSession(_:)", "bump()", "Sessions.setSession(_:)"])
    }

    @Test func `F2 admission checks the instance, so A to B to A keeps the first A's work out`() {
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Sessions") { m in
                m.watch(_countCog, initial: .skip, name: "replace") { _, _ in
                    m.setSession("B")
                    m.setSession("A")
                }
                m.scope(_sessionCog, name: "session") { id, s in
                    s.watch(_countCog, initial: .skip, name: "write") { _, count in s.note("\(id) saw \(count)") }
                }
            }
        ])
        cogs.setSession("A")
        cogs.bump()
        #expect(cogs.peek(_notesCog) == [])
        #expect(cogs.peek(_sessionCog) == "A")
        cogs.bump()
        #expect(cogs.peek(_notesCog) == [])
    }

    @Test func `F3 admission never reorders: a write queued before the replacement stands`() {
        let cogs = Cogs.forTesting(
            seeding: { $0.seed(_sessionCog, to: "A") },
            mechanisms: [
                Probe("Sessions") { m in
                    m.scope(_sessionCog, name: "session") { id, s in
                        s.watch(_countCog, initial: .skip, name: "write") { _, _ in s.note("from \(id)") }
                    }
                    m.watch(_countCog, initial: .skip, name: "replace") { _, _ in m.setSession("B") }
                }
            ])
        cogs.bump()
        #expect(cogs.peek(_notesCog) == ["from A"])
        #expect(cogs.peek(_sessionCog) == "B")
        #expect(cogs.debugHistory.turnNames == ["bump()", "Sessions.session.note(_:)", "Sessions.setSession(_:)"])
    }

    @Test func `F4 turns opened on the runtime carry no owner and are always admitted`() {
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Sessions") { m in
                m.watch(_countCog, initial: .skip, name: "replace") { _, _ in m.setSession(nil) }
            }
        ])
        cogs.setSession("A")
        cogs.bump()
        cogs.note("runtime")
        #expect(cogs.peek(_notesCog) == ["runtime"])
    }
}
