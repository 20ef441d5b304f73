import Cog
import CogTesting
import Testing

@MainActor private let initialRuns = Counter()

private final class Basket {
    var items: [String] = []
}

private let _sevenCog = Cog<Int>.Manual { 7 }
private let _basketCog = Cog<Basket>.Manual {
    MainActor.assumeIsolated { initialRuns.bump() }
    return Basket()
}
private let _lengthCogs = CogBox<Int, String>.Manual { key in key.count }
private let _flagCogs = CogBox<Bool, Int>.Manual { false }
private let _scoreCog = Cog<Int>.Manual(name: "declarations.score") { 1 }
let scoreCog = _scoreCog.readOnly
@MainActor private let doubledRuns = Counter()
private let doubledScoreCog = Cog<Int>(name: "declarations.doubled") { c in
    doubledRuns.bump()
    return c[scoreCog] * 2
}
private let multipliedCogs = CogBox<Int, Int>(name: "declarations.multiplied") { c, factor in
    c[_scoreCog] * factor
}

private struct Reading: Equatable {
    var celsius: Int
    var note: String
}

private let _readingCog = Cog<Reading>.Manual(
    { Reading(celsius: 20, note: "") },
    equals: { $0.celsius == $1.celsius }, name: "declarations.reading")
@MainActor private let celsiusRuns = Counter()
private let celsiusCog = Cog<Int> { c in
    celsiusRuns.bump()
    return c[_readingCog].celsius
}

/// A value without `Equatable`.
private struct Opaque {
    var tag: Int
}

private let _opaqueCog = Cog<Opaque>.Manual { Opaque(tag: 0) }
@MainActor private let opaqueRuns = Counter()
private let opaqueTagCog = Cog<Int> { c in
    opaqueRuns.bump()
    return c[_opaqueCog].tag
}

extension CogOps {
    fileprivate func setScore(_ score: Int) { turn(_scoreCog, to: score) }
    fileprivate func setLength(_ key: String, to value: Int) { turn(_lengthCogs[key], to: value) }
    fileprivate func setFlag(_ key: Int) { turn { c in c[_flagCogs[key]] = true } }
    fileprivate func annotateReading(_ note: String) { turn { c in c[_readingCog].note = note } }
    fileprivate func setCelsius(_ celsius: Int) { turn { c in c[_readingCog].celsius = celsius } }
    fileprivate func rewriteOpaque() { turn { c in c[_opaqueCog] = Opaque(tag: 0) } }
}

@MainActor
@Suite("Declarations")
struct DeclarationTests {
    @Test func `D1 a manual source reads as its initial value until written`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(_sevenCog) == 7)
    }

    @Test func `D2 the initial closure runs once per state per runtime and runtimes never share its object`() {
        let first = Cogs.forTesting()
        let second = Cogs.forTesting()
        let before = initialRuns.count
        first.peek(_basketCog).items.append("apple")
        _ = first.peek(_basketCog)
        #expect(initialRuns.count == before + 1)
        #expect(second.peek(_basketCog).items.isEmpty)
        #expect(initialRuns.count == before + 2)
        #expect(first.peek(_basketCog).items == ["apple"])
    }

    @Test func `D3 a manual box keeps one independent value per key, initial from the key or not`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.peek(_lengthCogs["abc"]) == 3)
        cogs.setLength("a", to: 40)
        #expect(cogs.peek(_lengthCogs["a"]) == 40)
        #expect(cogs.peek(_lengthCogs["bb"]) == 2)
        cogs.setFlag(1)
        #expect(cogs.peek(_flagCogs[1]) == true)
        #expect(cogs.peek(_flagCogs[2]) == false)
    }

    @Test func `D4 box[key] is a value equal for equal keys and names one state`() {
        let cogs = Cogs.forTesting()
        #expect(_flagCogs[5] == _flagCogs[5])
        #expect(_flagCogs[5] != _flagCogs[6])
        #expect(multipliedCogs[2] == multipliedCogs[2])
        cogs.setFlag(5)
        let rebuilt = _flagCogs[5]
        #expect(cogs.peek(rebuilt) == true)
        #expect(cogs.peek(_flagCogs[6]) == false)
    }

    @Test func `D5 a readOnly projection reads the same state as its source`() {
        let cogs = Cogs.forTesting()
        cogs.setScore(3)
        #expect(cogs.peek(scoreCog) == 3)
        #expect(cogs[scoreCog] == 3)
        #expect(_scoreCog.readOnly == scoreCog)
    }

    @Test func `D6 declaring an automatic cog runs nothing and the first read computes it`() {
        let cogs = Cogs.forTesting()
        let before = doubledRuns.count
        cogs.setScore(4)
        #expect(doubledRuns.count == before)
        #expect(cogs.peek(doubledScoreCog) == 8)
        #expect(doubledRuns.count == before + 1)
        #expect(cogs.peek(doubledScoreCog) == 8)
        #expect(doubledRuns.count == before + 1)
    }

    @Test func `D7 an automatic box passes each key to its selector`() {
        let cogs = Cogs.forTesting()
        cogs.setScore(5)
        #expect(cogs.peek(multipliedCogs[2]) == 10)
        #expect(cogs.peek(multipliedCogs[3]) == 15)
    }

    @Test func `D8 name labels a cog in history, with its key for box members, else fileID and line`() {
        let cogs = Cogs.forTesting()
        cogs.setScore(9)
        _ = cogs.peek(multipliedCogs[7])
        let names = cogs.debugHistory.entries.map(\.name)
        #expect(names.contains("declarations.score"))
        #expect(names.contains("declarations.multiplied[7]"))
        #expect(_sevenCog.label.hasPrefix("CogTests/DeclarationTests.swift:"))
        #expect(multipliedCogs[7].label == "declarations.multiplied[7]")
    }

    @Test func `D10 equals decides what counts as a change`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[celsiusCog] == 20)
        let before = celsiusRuns.count
        cogs.annotateReading("humid")
        #expect(cogs[celsiusCog] == 20)
        #expect(celsiusRuns.count == before)
        #expect(cogs.peek(_readingCog).note == "")
        cogs.setCelsius(25)
        #expect(cogs[celsiusCog] == 25)
        #expect(celsiusRuns.count == before + 1)
    }

    @Test func `D10 a value without Equatable counts every write as a change`() {
        let cogs = Cogs.forTesting()
        #expect(cogs[opaqueTagCog] == 0)
        let before = opaqueRuns.count
        cogs.rewriteOpaque()
        #expect(cogs[opaqueTagCog] == 0)
        #expect(opaqueRuns.count == before + 1)
    }
}
