import Cog
import CogTesting
import Testing

private let _temperatureCog = Cog<Int>.Manual(name: "reactions.temperature") { 20 }
private let _humidityCog = Cog<Int>.Manual(name: "reactions.humidity") { 50 }
private let _useHumidityCog = Cog<Bool>.Manual(name: "reactions.useHumidity") { false }
private let feelsLikeCog = Cog<Int>(name: "reactions.feelsLike") { c in c[_temperatureCog] + 1 }
private let parityCog = Cog<Int>(name: "reactions.parity") { c in c[_temperatureCog] % 2 }
private let _pingCog = Cog<Int>.Manual(name: "reactions.ping") { 0 }
private let _pongCog = Cog<Int>.Manual(name: "reactions.pong") { 0 }
private let _pingLimitCog = Cog<Int>.Manual(name: "reactions.limit") { 0 }

extension CogOps {
    fileprivate func setTemperature(_ value: Int) { turn(_temperatureCog, to: value) }
    fileprivate func setHumidity(_ value: Int) { turn(_humidityCog, to: value) }
    fileprivate func useHumidity(_ value: Bool) { turn(_useHumidityCog, to: value) }
    fileprivate func ping(limit: Int) {
        turn { c in
            c[_pingLimitCog] = limit
            c[_pingCog] += 1
        }
    }
    fileprivate func ping() { turn { c in c[_pingCog] += 1 } }
    fileprivate func pong() { turn { c in c[_pongCog] += 1 } }
}

/// A mechanism whose `operate` is a closure, for tests.
struct Probe: Mechanism {
    let name: String
    let body: @MainActor (MechanismController) -> Void

    init(_ name: String, _ body: @escaping @MainActor (MechanismController) -> Void) {
        self.name = name
        self.body = body
    }

    func operate(_ m: MechanismController) { body(m) }
}

@MainActor
@Suite("Reactions")
struct ReactionTests {
    @Test func `X1 run runs once at registration to learn what it reads`() {
        let runs = Counter()
        _ = Cogs.forTesting(mechanisms: [Probe("Weather") { m in m.run { c in _ = c[_temperatureCog]; runs.bump() } }])
        #expect(runs.count == 1)
    }

    @Test func `X2 X3 a reaction reruns after a change it read, before the op returns, and not otherwise`() {
        let seen = Recorder<Int>()
        let cogs = Cogs.forTesting(mechanisms: [Probe("Weather") { m in m.run { c in seen.append(c[_temperatureCog]) } }])
        cogs.setTemperature(25)
        #expect(seen.values == [20, 25])
        cogs.setHumidity(10)
        #expect(seen.values == [20, 25])
    }

    @Test func `X4 a reaction reads state already settled for the turn that woke it`() {
        let seen = Recorder<Int>()
        let cogs = Cogs.forTesting(mechanisms: [Probe("Weather") { m in m.run { c in seen.append(c[feelsLikeCog]) } }])
        cogs.setTemperature(30)
        #expect(seen.values == [21, 31])
    }

    @Test func `X5 reactions run in registration order, across mechanisms in assembly order`() {
        let order = Recorder<String>()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("A") { m in
                m.watch(_temperatureCog, initial: .skip, name: "one") { _, _ in order.append("A.one") }
                m.watch(_temperatureCog, initial: .skip, name: "two") { _, _ in order.append("A.two") }
            },
            Probe("B") { m in m.watch(_temperatureCog, initial: .skip, name: "three") { _, _ in order.append("B.three") } },
        ])
        cogs.setTemperature(1)
        #expect(order.values == ["A.one", "A.two", "B.three"])
        let effects = cogs.debugHistory.entries.filter { $0.event == .effect && $0.turn == 1 }.map(\.name)
        #expect(effects == ["A.one", "A.two", "B.three"])
    }

    @Test func `X6 a reaction re-tracks what it reads every run`() {
        let runs = Counter()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Weather") { m in
                m.run { c in
                    runs.bump()
                    _ = c[_useHumidityCog] ? c[_humidityCog] : c[_temperatureCog]
                }
            }
        ])
        cogs.useHumidity(true)
        #expect(runs.count == 2)
        cogs.setTemperature(99)
        #expect(runs.count == 2)
        cogs.setHumidity(1)
        #expect(runs.count == 3)
    }

    @Test func `X7 watch skip is silent at registration and run calls with the baseline twice`() {
        let skipped = Recorder<[Int]>()
        let ran = Recorder<[Int]>()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Weather") { m in
                m.watch(_temperatureCog, initial: .skip, name: "skip") { old, new in skipped.append([old, new]) }
                m.watch(_temperatureCog, initial: .run, name: "run") { old, new in ran.append([old, new]) }
            }
        ])
        #expect(skipped.values.isEmpty)
        #expect(ran.values == [[20, 20]])
        cogs.setTemperature(22)
        #expect(skipped.values == [[20, 22]])
        #expect(ran.values == [[20, 20], [20, 22]])
    }

    @Test func `X8 a reaction registered during a flush runs after those already scheduled and before queued turns`() {
        let order = Recorder<String>()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("A") { m in
                var registered = false
                m.watch(_temperatureCog, initial: .skip, name: "first") { _, _ in
                    order.append("first")
                    m.pong()
                    guard !registered else { return }
                    registered = true
                    m.run { c in _ = c[_temperatureCog]; order.append("late-run") }
                }
                m.watch(_temperatureCog, initial: .skip, name: "second") { _, _ in order.append("second") }
                m.watch(_pongCog, initial: .skip, name: "pong") { _, _ in order.append("pong-turn") }
            }
        ])
        cogs.setTemperature(5)
        #expect(order.values == ["first", "second", "late-run", "pong-turn"])
    }

    @Test func `X9 a write from a reaction is a later turn of its own`() {
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Echo") { m in m.watch(_temperatureCog, initial: .skip, name: "echo") { _, _ in m.pong() } }
        ])
        cogs.setTemperature(7)
        #expect(cogs.debugHistory.turnNames == ["setTemperature(_:)", "Echo.pong()"])
        #expect(cogs.peek(_pongCog) == 1)
    }

    @Test func `X10 a chain of more than 64 turns without going idle warns once with its causes`() {
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Loop") { m in
                m.watch(_pingCog, initial: .skip, name: "toPong") { _, ping in
                    if ping < m.peek(_pingLimitCog) { m.pong() }
                }
                m.watch(_pongCog, initial: .skip, name: "toPing") { _, _ in m.ping() }
            }
        ])
        cogs.ping(limit: 32)
        #expect(cogs.turnChainDiagnostic.warningCount == 0)
        cogs.ping(limit: 100)
        let diagnostic = cogs.turnChainDiagnostic
        #expect(diagnostic.warningCount == 1)
        #expect(diagnostic.isIdle)
        let warning = diagnostic.lastWarning
        #expect((warning?.uninterruptedTurnCount ?? 0) > 64)
        #expect(warning?.causalChain.prefix(3) == [.turn("ping(limit:)"), .reaction("Loop.toPong"), .turn("Loop.pong()")])
        #expect(cogs.peek(_pingCog) >= 100)
    }

    @Test func `X10 a chain of exactly 64 turns stays silent`() {
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Loop") { m in
                m.watch(_pingCog, initial: .skip, name: "toPong") { _, ping in
                    let limit = m.peek(_pingLimitCog)
                    if ping < limit { m.pong() } else if ping == limit { m.setHumidity(ping) }
                }
                m.watch(_pongCog, initial: .skip, name: "toPing") { _, _ in m.ping() }
            }
        ])
        // ping(limit:) is turn 1, each round adds pong and ping (2 × 31), and
        // the last ping adds one humidity turn: 64 turns.
        cogs.ping(limit: 32)
        #expect(cogs.debugHistory.entries.filter { $0.event == .turn }.count == 64)
        #expect(cogs.turnChainDiagnostic.warningCount == 0)
    }

    @Test func `X11 an equal recompute wakes no reaction`() {
        let runs = Counter()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Parity") { m in m.watch(parityCog, initial: .skip, name: "parity") { _, _ in runs.bump() } }
        ])
        cogs.setTemperature(22)
        #expect(runs.count == 0)
        cogs.setTemperature(23)
        #expect(runs.count == 1)
    }

    @Test func `M11 a peek in operate is not a dependency and operate never reruns`() {
        let operates = Counter()
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Peeker") { m in
                operates.bump()
                _ = m.peek(_temperatureCog)
            }
        ])
        cogs.setTemperature(1)
        #expect(operates.count == 1)
        #expect(cogs.liveRegistrationCount == 0)
    }
}
