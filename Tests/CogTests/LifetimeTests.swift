import Cog
import CogTesting
import Testing

@MainActor private let draftStarts = Counter()

private final class Draft {
    var text = ""
}

private let _draftCogs = CogBox<Draft, Int>.Manual(
    { MainActor.assumeIsolated { draftStarts.bump() }; return Draft() },
    lifetime: .whileObserved(resetToInitial: true), name: "lifetime.draft")
private let _filterCogs = CogBox<String, Int>.Manual(
    { "" }, lifetime: .whileObserved(resetToInitial: true), name: "lifetime.filter")
private let _appCountCog = Cog<Int>.Manual(name: "lifetime.appCount") { 0 }
@MainActor private let shoutRuns = Counter()
private let shoutedFilterCogs = CogBox<String, Int>(name: "lifetime.shouted") { c, id in
    shoutRuns.bump()
    return c[_filterCogs[id]].uppercased()
}

extension CogOps {
    fileprivate func typeFilter(_ id: Int, _ text: String) { turn(_filterCogs[id], to: text) }
    fileprivate func releaseFilter(_ id: Int) { discard(_filterCogs[id]) }
    fileprivate func releaseDraft(_ id: Int) { discard(_draftCogs[id]) }
    fileprivate func releaseShouted(_ id: Int) { discard(shoutedFilterCogs[id]) }
    fileprivate func releaseAppCount() { discard(_appCountCog) }
    fileprivate func setAppCount(_ value: Int) { turn(_appCountCog, to: value) }

    fileprivate func closeScreen(_ id: Int) {
        turn { c in c[_appCountCog] -= 1 }
        discard(_filterCogs[id])
    }
}

@MainActor
@Suite("Lifetimes and discard")
struct LifetimeTests {
    @Test func `L1 manual state is app-lifetime by default and survives anything but its runtime`() {
        let cogs = Cogs.forTesting()
        cogs.setAppCount(4)
        for id in 0..<50 { cogs.typeFilter(id, "x") }
        #expect(cogs.peek(_appCountCog) == 4)
    }

    @Test func `L8 discard releases whileObserved state so the next read starts from the initial closure`() {
        let cogs = Cogs.forTesting()
        cogs.typeFilter(1, "easy")
        cogs.typeFilter(2, "nearby")
        #expect(cogs[_filterCogs[1]] == "easy")
        cogs.releaseFilter(1)
        #expect(cogs.peek(_filterCogs[1]) == "")
        #expect(cogs.peek(_filterCogs[2]) == "nearby")
    }

    @Test func `L6 a released reference-type value comes back as a fresh object`() {
        let cogs = Cogs.forTesting()
        let before = draftStarts.count
        cogs.peek(_draftCogs[1]).text = "half a thought"
        cogs.releaseDraft(1)
        #expect(cogs.peek(_draftCogs[1]).text == "")
        #expect(draftStarts.count == before + 2)
    }

    @Test func `L12 discard runs as its own named turn after the closing turn`() {
        let cogs = Cogs.forTesting()
        cogs.setAppCount(1)
        cogs.typeFilter(7, "steep")
        cogs.closeScreen(7)
        #expect(
            cogs.debugHistory.turnNames == [
                "setAppCount(_:)", "typeFilter(_:_:)", "closeScreen(_:)", "discard(lifetime.filter[7])",
            ])
        #expect(cogs.peek(_filterCogs[7]) == "")
        #expect(cogs.peek(_appCountCog) == 0)
    }

    @Test func `L12 discarding a value never created does nothing`() {
        let cogs = Cogs.forTesting()
        cogs.releaseFilter(99)
        #expect(cogs.debugHistory.count == 0)
    }

    @Test func `L9 discard leaves a state alone while another cog still depends on it`() {
        let cogs = Cogs.forTesting()
        cogs.typeFilter(3, "loop")
        #expect(cogs[shoutedFilterCogs[3]] == "LOOP")
        cogs.releaseFilter(3)
        #expect(cogs.peek(_filterCogs[3]) == "loop")
        #expect(cogs[shoutedFilterCogs[3]] == "LOOP")
    }

    @Test func `L8 discarding an automatic cog makes it recompute on its next read`() {
        let cogs = Cogs.forTesting()
        cogs.typeFilter(4, "flat")
        #expect(cogs[shoutedFilterCogs[4]] == "FLAT")
        let before = shoutRuns.count
        cogs.releaseShouted(4)
        #expect(cogs.peek(shoutedFilterCogs[4]) == "FLAT")
        #expect(shoutRuns.count == before + 1)
        cogs.releaseShouted(4)
        cogs.releaseFilter(4)
        #expect(cogs.peek(_filterCogs[4]) == "")
    }

    @Test func `L10 discarding app-lifetime state is a runtime error naming the fix`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                cogs.setAppCount(1)
                cogs.releaseAppCount()
            }
        }
        let text = stderrText(result)
        #expect(text.contains("discard(lifetime.appCount) releases state declared with the default .app lifetime"))
        #expect(text.contains("lifetime: .whileObserved(resetToInitial: true)"))
    }

    @Test func `L6 asking for whileObserved without resetToInitial fails when declared`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = Cog<Int>.Manual(lifetime: .whileObserved(resetToInitial: false)) { 0 }
        }
        #expect(stderrText(result).contains("write .whileObserved(resetToInitial: true) or keep the default .app"))
    }
}
