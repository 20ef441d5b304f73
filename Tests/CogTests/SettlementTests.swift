import Cog
import CogTesting
import Testing

private let _sourceCog = Cog<Int>.Manual(name: "settle.source") { 1 }
@MainActor private let runs = RunLog()

/// Run counts per label, shared by the selectors in this file.
@MainActor
final class RunLog {
    private var counts: [String: Int] = [:]
    func bump(_ label: String) { counts[label, default: 0] += 1 }
    func count(_ label: String) -> Int { counts[label, default: 0] }
}

// Chain A → B → C.
private let chainACog = Cog<Int>(name: "chain.a") { c in runs.bump("chain.a"); return c[_sourceCog] + 1 }
private let chainBCog = Cog<Int>(name: "chain.b") { c in runs.bump("chain.b"); return c[chainACog] + 1 }
private let chainCCog = Cog<Int>(name: "chain.c") { c in runs.bump("chain.c"); return c[chainBCog] + 1 }

// Diamond: source → five arms → join; the join records every input set it saw.
private let armCogs = CogBox<Int, Int>(name: "diamond.arm") { c, arm in
    runs.bump("diamond.arm")
    return c[_sourceCog] + arm
}
@MainActor private let joinInputs = Recorder<[Int]>()
private let joinCog = Cog<Int>(name: "diamond.join") { c in
    runs.bump("diamond.join")
    let inputs = (0..<5).map { c[armCogs[$0]] }
    joinInputs.append(inputs)
    return inputs.reduce(0, +)
}

// Shortcut diamond: the join reads the source directly and through an arm.
private let shortcutArmCog = Cog<Int>(name: "shortcut.arm") { c in c[_sourceCog] * 10 }
@MainActor private let shortcutInputs = Recorder<[Int]>()
private let shortcutJoinCog = Cog<Int>(name: "shortcut.join") { c in
    let direct = c[_sourceCog]
    let viaArm = c[shortcutArmCog]
    shortcutInputs.append([direct, viaArm])
    return direct + viaArm
}

// Laziness.
private let lazyCog = Cog<Int>(name: "lazy") { c in runs.bump("lazy"); return c[_sourceCog] * 3 }

// Equality cut-off.
private let parityCog = Cog<Int>(name: "parity") { c in runs.bump("parity"); return c[_sourceCog] % 2 }
private let parityChildCog = Cog<String>(name: "parity.child") { c in
    runs.bump("parity.child")
    return c[parityCog] == 0 ? "even" : "odd"
}

// Dynamic dependencies.
private let _useLeftCog = Cog<Bool>.Manual(name: "branch.useLeft") { true }
private let _leftCog = Cog<Int>.Manual(name: "branch.left") { 10 }
private let _rightCog = Cog<Int>.Manual(name: "branch.right") { 20 }
private let branchCog = Cog<Int>(name: "branch") { c in
    runs.bump("branch")
    return c[_useLeftCog] ? c[_leftCog] : c[_rightCog]
}
private let earlyReturnCog = Cog<Int>(name: "early") { c in
    runs.bump("early")
    guard c[_useLeftCog] else { return -1 }
    return c[_leftCog]
}
private let _idsCog = Cog<[Int]>.Manual(name: "list.ids") { [1, 2] }
private let _amountCogs = CogBox<Int, Int>.Manual(name: "list.amount") { id in id * 100 }
private let totalCog = Cog<Int>(name: "list.total") { c in
    runs.bump("list.total")
    return c[_idsCog].reduce(0) { $0 + c[_amountCogs[$1]] }
}
private let _currentZipCog = Cog<Int>.Manual(name: "zip.current") { 1 }
private let _temperatureCogs = CogBox<Int, Int>.Manual(name: "zip.temperature") { zip in zip * 5 }
private let currentTemperatureCog = Cog<Int>(name: "zip.currentTemperature") { c in
    runs.bump("zip.currentTemperature")
    return c[_temperatureCogs[c[_currentZipCog]]]
}
private let _selectRightCog = Cog<Bool>.Manual(name: "select.right") { false }
private let selectedCog = Cog<Int>(name: "select") { c in
    runs.bump("select")
    let chosen = c[_selectRightCog] ? chainBCog : chainACog
    return c[chosen]
}

// Deep warm chain.
private let deepCogs: CogBox<Int, Int> = CogBox(name: "deep") { c, depth in
    depth == 0 ? c[_sourceCog] : c[deepCogs[depth - 1]] + 1
}

// Cycles.
private let _cycleSwitchCog = Cog<Bool>.Manual(name: "cycle.switch") { false }
private let cycleACog: Cog<Int> = Cog(name: "cycle.a") { c in c[_cycleSwitchCog] ? c[cycleBCog] : 0 }
private let cycleBCog: Cog<Int> = Cog(name: "cycle.b") { c in c[cycleACog] + 1 }
private let selfCog: Cog<Int> = Cog(name: "cycle.self") { c in c[selfCog] }
private let keyedCycleCogs: CogBox<Int, Int> = CogBox(name: "cycle.keyed") { c, key in
    c[keyedCycleCogs[(key + 1) % 3]]
}
@MainActor private let diagnostics = Recorder<CogCycleDiagnostic?>()
private let probeACog: Cog<Int> = Cog(name: "probe.a") { c in
    c[probeBCog]
}
private let probeBCog: Cog<Int> = Cog(name: "probe.b") { c in
    diagnostics.append(c.cycleDiagnostic(ifReading: probeACog))
    return 1
}
private let coldCogs: CogBox<Int, Int> = CogBox(name: "cold") { c, depth in
    depth == 0 ? c[_sourceCog] : c[coldCogs[depth - 1]] + 1
}

extension CogOps {
    fileprivate func setSource(_ value: Int) { turn(_sourceCog, to: value) }
    fileprivate func useLeft(_ useLeft: Bool) { turn(_useLeftCog, to: useLeft) }
    fileprivate func setLeft(_ value: Int) { turn(_leftCog, to: value) }
    fileprivate func setRight(_ value: Int) { turn(_rightCog, to: value) }
    fileprivate func setIDs(_ ids: [Int]) { turn(_idsCog, to: ids) }
    fileprivate func setAmount(_ id: Int, _ amount: Int) { turn(_amountCogs[id], to: amount) }
    fileprivate func setZip(_ zip: Int) { turn(_currentZipCog, to: zip) }
    fileprivate func setTemperature(_ zip: Int, _ value: Int) { turn(_temperatureCogs[zip], to: value) }
    fileprivate func selectRight(_ right: Bool) { turn(_selectRightCog, to: right) }
    fileprivate func closeCycle() { turn(_cycleSwitchCog, to: true) }
}

@MainActor
@Suite("Settlement")
struct SettlementTests {
    @Test func `G1 each link of a chain recomputes once per changed turn`() {
        let cogs = Cogs.forTesting()
        let before = (runs.count("chain.a"), runs.count("chain.b"), runs.count("chain.c"))
        #expect(cogs[chainCCog] == 4)
        for value in 2...6 {
            cogs.setSource(value)
            #expect(cogs[chainCCog] == value + 3)
        }
        #expect(runs.count("chain.a") == before.0 + 6)
        #expect(runs.count("chain.b") == before.1 + 6)
        #expect(runs.count("chain.c") == before.2 + 6)
    }

    @Test func `G2 a diamond's join runs once per turn and never sees old and new arms together`() {
        let cogs = Cogs.forTesting()
        let joinBefore = runs.count("diamond.join")
        let armsBefore = runs.count("diamond.arm")
        let seenBefore = joinInputs.values.count
        _ = cogs[joinCog]
        for value in 2...501 {
            cogs.setSource(value)
            _ = cogs[joinCog]
        }
        #expect(runs.count("diamond.join") == joinBefore + 501)
        #expect(runs.count("diamond.arm") == armsBefore + 5 * 501)
        let seen = joinInputs.values.dropFirst(seenBefore)
        #expect(seen.allSatisfy { inputs in inputs == (0..<5).map { inputs[0] + $0 } })
        #expect(cogs.peek(joinCog) == 5 * 501 + 10)
    }

    @Test func `G2 a shortcut diamond is glitch-free too`() {
        let cogs = Cogs.forTesting()
        let seenBefore = shortcutInputs.values.count
        _ = cogs[shortcutJoinCog]
        cogs.setSource(2)
        _ = cogs[shortcutJoinCog]
        cogs.setSource(3)
        #expect(cogs[shortcutJoinCog] == 33)
        #expect(Array(shortcutInputs.values.dropFirst(seenBefore)) == [[1, 10], [2, 20], [3, 30]])
    }

    @Test func `G5 an unread automatic cog never runs and a cold one computes once from the newest values`() {
        let cogs = Cogs.forTesting()
        let before = runs.count("lazy")
        for value in 1...10 { cogs.setSource(value) }
        #expect(runs.count("lazy") == before)
        #expect(cogs.peek(lazyCog) == 30)
        #expect(runs.count("lazy") == before + 1)
        for value in 11...20 { cogs.setSource(value) }
        #expect(runs.count("lazy") == before + 1)
        #expect(cogs.peek(lazyCog) == 60)
        #expect(runs.count("lazy") == before + 2)
    }

    @Test func `G7 an equal recompute wakes nothing below it`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[parityChildCog] == "odd")
        let parityBefore = runs.count("parity")
        let childBefore = runs.count("parity.child")
        cogs.setSource(3)
        #expect(cogs[parityChildCog] == "odd")
        #expect(runs.count("parity") == parityBefore + 1)
        #expect(runs.count("parity.child") == childBefore)
        cogs.setSource(4)
        #expect(cogs[parityChildCog] == "even")
        #expect(runs.count("parity.child") == childBefore + 1)
    }

    @Test func `G6 dependencies follow the branch the last run took`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[branchCog] == 10)
        var before = runs.count("branch")
        cogs.setRight(21)
        #expect(cogs[branchCog] == 10)
        #expect(runs.count("branch") == before)
        cogs.useLeft(false)
        #expect(cogs[branchCog] == 21)
        before = runs.count("branch")
        cogs.setLeft(11)
        #expect(cogs[branchCog] == 21)
        #expect(runs.count("branch") == before)
        cogs.setRight(22)
        #expect(cogs[branchCog] == 22)
        #expect(runs.count("branch") == before + 1)
    }

    @Test func `G6 an early return drops the reads after it`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[earlyReturnCog] == 10)
        cogs.useLeft(false)
        #expect(cogs[earlyReturnCog] == -1)
        let before = runs.count("early")
        cogs.setLeft(99)
        #expect(cogs[earlyReturnCog] == -1)
        #expect(runs.count("early") == before)
    }

    @Test func `G6 a keyed read that follows a list drops the item that left it`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[totalCog] == 300)
        cogs.setIDs([2, 3])
        #expect(cogs[totalCog] == 500)
        let before = runs.count("list.total")
        cogs.setAmount(1, 1_000)
        #expect(cogs[totalCog] == 500)
        #expect(runs.count("list.total") == before)
        cogs.setAmount(3, 1)
        #expect(cogs[totalCog] == 201)
        #expect(runs.count("list.total") == before + 1)
    }

    @Test func `G6 a keyed read follows the key another cog selects`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[currentTemperatureCog] == 5)
        cogs.setZip(2)
        #expect(cogs[currentTemperatureCog] == 10)
        let before = runs.count("zip.currentTemperature")
        cogs.setTemperature(1, 100)
        #expect(cogs[currentTemperatureCog] == 10)
        #expect(runs.count("zip.currentTemperature") == before)
        cogs.setTemperature(2, 7)
        #expect(cogs[currentTemperatureCog] == 7)
    }

    @Test func `G6 a cog that selects which cog to read tracks only the selected one`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[selectedCog] == 2)
        cogs.selectRight(true)
        #expect(cogs[selectedCog] == 3)
        cogs.setSource(10)
        #expect(cogs[selectedCog] == 12)
    }

    @Test func `G4 a warm chain of 100,000 links settles on an explicit stack`() {
        let cogs = Cogs.forTesting()
        let links = 100_000
        for depth in 0..<links { _ = cogs.peek(deepCogs[depth]) }
        cogs.setSource(5)
        #expect(cogs.peek(deepCogs[links - 1]) == 5 + links - 1)
        cogs.setSource(6)
        #expect(cogs.peek(deepCogs[links - 1]) == 6 + links - 1)
    }

    @Test func `G4 a cold first read nesting 128 computations works`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(coldCogs[127]) == 1 + 127)
    }

    @Test func `G4 GRAPH-14 a cold first read nesting past 128 computations fails naming the links and the fix`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                _ = cogs.peek(coldCogs[128])
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Reading a cog needed 129 nested computations, past the limit of 128: a first read computes each "
                    + "never-computed link inside the next. The innermost links were: … -> cold[4] -> cold[3] -> "
                    + "cold[2] -> cold[1] -> cold[0]. Read the chain from its source end first, so each link is "
                    + "already computed when the next one reads it, or make the chain shorter"), "\(text)")
    }

    @Test func `G8 CYCLE-02 a cycle fails naming the whole closed path`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                #expect(cogs.peek(cycleACog) == 0)
                cogs.closeCycle()
                _ = cogs.peek(cycleACog)
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "Cog dependency cycle: cycle.a -> cycle.b -> cycle.a. An automatic cog may not read itself, directly "
                    + "or through others; break the loop (keep what one of them needs in a manual source that an op "
                    + "or a reaction writes)"), "\(text)")
    }

    @Test func `G8 CYCLE-01 a self-read is the one-node cycle and names the cog`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run { _ = Cogs.forTesting().peek(selfCog) }
        }
        let text = stderrText(result)
        #expect(text.contains("Cog dependency cycle: cycle.self -> cycle.self. An automatic cog may not read itself"), "\(text)")
    }

    @Test func `G8 CYCLE-07 a keyed cycle's trap walks the path with each key`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run { _ = Cogs.forTesting().peek(keyedCycleCogs[0]) }
        }
        let text = stderrText(result)
        #expect(
            text.contains("Cog dependency cycle: cycle.keyed[0] -> cycle.keyed[1] -> cycle.keyed[2] -> cycle.keyed[0]."),
            "\(text)")
    }

    @Test func `G8 the cycle diagnostic seam reports the path without trapping`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(probeACog) == 1)
        let diagnostic = diagnostics.values.last ?? nil
        #expect(diagnostic?.path == ["probe.a", "probe.b", "probe.a"])
        #expect(diagnostic?.message == "Cog dependency cycle: probe.a -> probe.b -> probe.a.")
    }
}
