import Cog
import CogTesting
import Testing

private let _letterCog = Cog<String>.Manual(name: "exports.letter") { "A" }
private let _numberCog = Cog<Int>.Manual(name: "exports.number") { 1 }
private let parityCog = Cog<Int>(name: "exports.parity") { c in c[_numberCog] % 2 }

extension CogOps {
    fileprivate func setLetter(_ letter: String) { turn(_letterCog, to: letter) }
    fileprivate func setNumber(_ number: Int) { turn(_numberCog, to: number) }
}

@MainActor
@Suite("Exports", .timeLimit(.minutes(1)))
struct ExportTests {
    @Test func `E1 E2 values start with the settled value and offer each changed value`() async {
        let cogs = Cogs.forTesting()
        var parities = cogs.values(of: parityCog, buffering: .unbounded).makeAsyncIterator()
        cogs.setNumber(3)
        cogs.setNumber(4)
        cogs.setNumber(6)
        cogs.setNumber(7)
        #expect(await parities.next() == 1)
        #expect(await parities.next() == 0)
        #expect(await parities.next() == 1)
    }

    @Test func `E3 newest(1) keeps the latest value for a slow reader`() async {
        let cogs = Cogs.forTesting()
        var letters = cogs.values(of: _letterCog).makeAsyncIterator()
        cogs.setLetter("B")
        cogs.setLetter("C")
        #expect(await letters.next() == "C")
    }

    @Test func `E3 oldest(2) keeps the first two and unbounded keeps all`() async {
        let cogs = Cogs.forTesting()
        var oldest = cogs.values(of: _letterCog, buffering: .oldest(2)).makeAsyncIterator()
        var all = cogs.values(of: _letterCog, buffering: .unbounded).makeAsyncIterator()
        cogs.setLetter("B")
        cogs.setLetter("C")
        #expect(await oldest.next() == "A")
        #expect(await oldest.next() == "B")
        var seen: [String] = []
        for _ in 0..<3 { seen.append(await all.next() ?? "") }
        #expect(seen == ["A", "B", "C"])
    }

    @Test func `E6 offers come before the reactions of the same flush`() {
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Log") { m in m.watch(_letterCog, initial: .skip, name: "letter") { _, _ in } }
        ])
        let export = cogs.values(of: _letterCog)
        cogs.setLetter("Z")
        let events = cogs.debugHistory.entries.filter { $0.turn == 1 && ($0.event == .offer || $0.event == .effect) }
        #expect(events.map(\.event) == [.offer, .effect])
        _ = export
    }

    @Test func `E5 teardown finishes the sequence`() async {
        var cogs: Cogs? = Cogs.forTesting()
        var letters = cogs!.values(of: _letterCog).makeAsyncIterator()
        #expect(await letters.next() == "A")
        cogs = nil
        #expect(await letters.next() == nil)
    }

    @Test func `E4 each subscriber has its own buffer and ending one leaves the other`() async {
        let cogs = Cogs.forTesting()
        let first = Task { @MainActor in
            var seen: [String] = []
            for await letter in cogs.values(of: _letterCog, buffering: .unbounded) {
                seen.append(letter)
                if letter == "B" { break }
            }
            return seen
        }
        var second = cogs.values(of: _letterCog, buffering: .unbounded).makeAsyncIterator()
        #expect(await second.next() == "A")
        cogs.setLetter("B")
        #expect(await first.value.last == "B")
        cogs.setLetter("C")
        #expect(await second.next() == "B")
        #expect(await second.next() == "C")
    }
}
