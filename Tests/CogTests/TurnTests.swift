import Cog
import CogTesting
import Testing

private let _countCog = Cog<Int>.Manual(name: "turns.count") { 0 }
private let _labelCog = Cog<String>.Manual(name: "turns.label") { "" }
private let _itemsCogs = CogBox<Int, String>.Manual(name: "turns.items") { 0 }
@MainActor private let echoRuns = Counter()
private let countEchoCog = Cog<Int>(name: "turns.echo") { c in
    echoRuns.bump()
    return c[_countCog]
}
@MainActor private let pairSeen = Recorder<String>()
private let pairCog = Cog<String>(name: "turns.pair") { c in
    let pair = "\(c[_countCog])/\(c[_labelCog])"
    pairSeen.append(pair)
    return pair
}

@MainActor private var stashedWriter: Writer?

extension CogOps {
    fileprivate func incrementTwice() {
        turn { c in
            c[_countCog] += 1
            c[_countCog] += 1
        }
    }

    fileprivate func writeOneThenTwo() {
        turn { c in
            c[_countCog] = 1
            c[_countCog] = 2
        }
    }

    fileprivate func bumpKey(_ key: String) {
        turn { c in c[_itemsCogs[key]] += 10 }
    }

    fileprivate func readKeyThroughWriter(_ key: String, into recorder: Recorder<Int>) {
        turn { c in recorder.append(c[_itemsCogs[key]]) }
    }

    fileprivate func setCount(_ count: Int) { turn(_countCog, to: count) }
    fileprivate func setLabel(_ label: String) { turn(_labelCog, to: label) }

    fileprivate func setBoth(_ count: Int, _ label: String) {
        turn { c in
            c[_countCog] = count
            self.setLabel(label)
        }
    }

    fileprivate func changeAndChangeBack() {
        turn { c in
            let old = c[_countCog]
            c[_countCog] = old + 9
            c[_countCog] = old
        }
    }

    fileprivate func stashWriter() { turn { c in stashedWriter = c } }

    fileprivate func renamedTurn() { turn(named: "custom.name") { c in c[_countCog] += 1 } }
}

@MainActor
@Suite("Turns")
struct TurnTests {
    @Test func `T1 the writer reads back what it staged earlier in the same turn`() {
        let cogs = Cogs.forTesting()
        cogs.incrementTwice()
        #expect(cogs.peek(_countCog) == 2)
        cogs.bumpKey("a")
        cogs.bumpKey("a")
        #expect(cogs.peek(_itemsCogs["a"]) == 20)
        #expect(cogs.peek(_itemsCogs["b"]) == 0)
    }

    @Test func `T2 the last of several writes wins and downstream sees one change`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[countEchoCog] == 0)
        let before = echoRuns.count
        cogs.writeOneThenTwo()
        #expect(cogs[countEchoCog] == 2)
        #expect(echoRuns.count == before + 1)
        #expect(cogs.debugHistory.entries.filter { $0.event == .write }.map(\.name) == ["turns.count"])
    }

    @Test func `T3 reading an unwritten source through the writer gives the committed value`() {
        let cogs = Cogs.forTesting()
        cogs.bumpKey("x")
        let seen = Recorder<Int>()
        cogs.readKeyThroughWriter("x", into: seen)
        cogs.readKeyThroughWriter("y", into: seen)
        #expect(seen.values == [10, 0])
    }

    @Test func `T4 a nested turn joins the outer one: one flush, one history name`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[pairCog] == "0/")
        let seenBefore = pairSeen.values.count
        cogs.setBoth(3, "three")
        #expect(cogs[pairCog] == "3/three")
        #expect(pairSeen.values.count == seenBefore + 1)
        #expect(cogs.debugHistory.turnNames == ["setBoth(_:_:)"])
    }

    @Test func `R2 after a turn every read sees all of its writes together`() {
        let cogs = Cogs.forTesting()
        _ = cogs[pairCog]
        let seenBefore = pairSeen.values.count
        cogs.setBoth(1, "one")
        _ = cogs[pairCog]
        cogs.setBoth(2, "two")
        _ = cogs[pairCog]
        #expect(Array(pairSeen.values.dropFirst(seenBefore)) == ["1/one", "2/two"])
    }

    @Test func `R6 plain reads during a turn body see the values from before the turn`() {
        let cogs = Cogs.forTesting()
        cogs.setCount(1)
        var observed: [Int] = []
        cogs.turn(named: "probe") { c in
            c[_countCog] = 2
            observed.append(cogs.peek(_countCog))
            observed.append(c[_countCog])
        }
        #expect(observed == [1, 2])
        #expect(cogs.peek(_countCog) == 2)
    }

    @Test func `T6 writing an equal value is no change: no recompute and no write entry`() {
        let cogs = Cogs.forTesting()
        cogs.setCount(5)
        #expect(cogs[countEchoCog] == 5)
        let before = echoRuns.count
        cogs.setCount(5)
        #expect(cogs[countEchoCog] == 5)
        #expect(echoRuns.count == before)
        let last = cogs.debugHistory.entries.last
        #expect(last?.event == .turn)
        #expect(last?.name == "setCount(_:)")
    }

    @Test func `T7 changing a value and changing it back in one turn is no change`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[countEchoCog] == 0)
        let before = echoRuns.count
        cogs.changeAndChangeBack()
        #expect(cogs[countEchoCog] == 0)
        #expect(echoRuns.count == before)
        #expect(!cogs.debugHistory.entries.contains { $0.event == .write })
    }

    @Test func `T8 two back-to-back turns are two named turns`() {
        let cogs = Cogs.forTesting()
        cogs.setCount(1)
        cogs.setLabel("b")
        let turns = cogs.debugHistory.entries.filter { $0.event == .turn }
        #expect(turns.map(\.name) == ["setCount(_:)", "setLabel(_:)"])
        #expect(turns.map(\.turn) == [1, 2])
    }

    @Test func `T10 a turn is named after its op unless given a name`() {
        let cogs = Cogs.forTesting()
        cogs.incrementTwice()
        cogs.renamedTurn()
        #expect(cogs.debugHistory.turnNames == ["incrementTwice()", "custom.name"])
    }

    @Test func `T13 the debug history is a bounded ring of the latest events`() {
        let cogs = Cogs.forTesting()
        for value in 1...300 { cogs.setCount(value) }
        let history = cogs.debugHistory
        #expect(history.capacity == 256)
        #expect(history.count == 256)
        #expect(history.entries.last?.turn == 300)
        #expect(history.entries.last?.name == "turns.count")
    }

    @Test func `T5 TURN-07 a writer written through after its turn traps, naming the cog and the write`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                cogs.stashWriter()
                stashedWriter?[_countCog] = 1
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains(
                "This writer outlived the turn that created it, so writing to `turns.count` through it is not part "
                    + "of any turn. A writer is valid only while its turn's body runs, so never store it or capture "
                    + "it in an escaping closure or a Task; to write now, call an op (a new turn) and use the writer "
                    + "it passes to the body"), "\(text)")
    }

    @Test func `TURN-07 a writer read through after its turn traps, naming the cog and the read`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                cogs.stashWriter()
                _ = stashedWriter?[_countCog]
            }
        }
        let text = stderrText(result)
        #expect(
            text.contains("This writer outlived the turn that created it, so reading `turns.count` through it is not"),
            "\(text)")
    }
}
