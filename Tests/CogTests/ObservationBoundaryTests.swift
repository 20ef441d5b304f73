import Cog
import CogTesting
import Observation
import Synchronization
import Testing

// Issue 31 item 3: reads of cogs and of `status` inside
// `withObservationTracking` register exactly what they read, and a notice
// fires once per settled change.

private let _cityCog = Cog<String>.Manual(name: "boundary.city") { "Oslo" }
private let _unitCog = Cog<String>.Manual(name: "boundary.unit") { "C" }
private let _temperatureCog = Cog<Int>.Manual(name: "boundary.temperature") { 10 }
private let _noteCog = Cog<String>.Manual(
    { "" }, lifetime: .whileObserved(resetToInitial: true), name: "boundary.note")
private let _parityCog = Cog<Bool>(name: "boundary.parity") { c in c[_temperatureCog] % 2 == 0 }
private let _labelCog = Cog<String>(name: "boundary.label") { c in "\(c[_cityCog]) \(c[_parityCog])" }

/// Notices counted from `onChange`, which may run on any thread.
private final class Notices: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func bump() { count.withLock { $0 += 1 } }
}

/// Runs `read` inside `withObservationTracking` and counts its change notices.
@MainActor
private func tracked<T>(_ read: () -> T) -> (value: T, notices: Notices) {
    let notices = Notices()
    let value = withObservationTracking(read) { notices.bump() }
    return (value, notices)
}

private struct Outage: Error {}

@MainActor
@Suite("Observation boundary (issue 31)", .timeLimit(.minutes(1)))
struct ObservationBoundaryTests {
    @Test func `ASYNC-28 a tracked first value read records one pending turn, and completion one notice`() async throws {
        let work = ControlledWork<Int?>()
        let forecastCog = Cog<Int?>.Async(default: nil, name: "forecast") { _ in work.makeWork() }
        let cogs = Cogs.forTesting()

        let (initial, notices) = tracked { cogs[forecastCog] }
        #expect(initial == nil)
        #expect(notices.value == 0)
        let pendingTurns = cogs.debugHistory.entries.filter { $0.event == .turn && $0.name == "forecast pending" }
        #expect(pendingTurns.count == 1)

        #expect(await nextStart(work.starts) == 0)
        let completed = completionChecks(cogs, count: 1)
        work.succeed(0, with: 42)
        try await waitAll(completed)
        #expect(notices.value == 1)
        #expect(cogs[forecastCog] == 42)
    }

    @Test func `ASYNC-28 a tracked read of an automatic cog over an async one starts it without re-entering`() async throws {
        let work = ControlledWork<Int?>()
        let forecastCog = Cog<Int?>.Async(default: nil, name: "forecast") { _ in work.makeWork() }
        let runs = Counter()
        let summaryCog = Cog<String>(name: "boundary.summary") { c in
            runs.bump()
            return c[forecastCog].map { "\($0)°" } ?? "…"
        }
        let cogs = Cogs.forTesting()

        let (initial, notices) = tracked { cogs[summaryCog] }
        #expect(initial == "…")
        #expect(runs.count == 1)
        #expect(notices.value == 0)
        let pendingTurns = cogs.debugHistory.entries.filter { $0.event == .turn && $0.name == "forecast pending" }
        #expect(pendingTurns.count == 1)

        #expect(await nextStart(work.starts) == 0)
        let completed = completionChecks(cogs, count: 1)
        work.succeed(0, with: 21)
        try await waitAll(completed)
        #expect(notices.value == 1)
        #expect(runs.count == 2)
        #expect(cogs[summaryCog] == "21°")
    }

    @Test func `ASYNC-32 Observation tracks only the status fields a reader reads`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { _ in work.makeWork() }
        let cogs = Cogs.forTesting()

        // Binding the status observes no field; each tracking reads one.
        let (_, bindingOnly) = tracked { _ = cogs.status[forecastCog] }
        let (kind, kindNotices) = tracked { cogs.status[forecastCog].kind }
        let (value, valueNotices) = tracked { cogs.status[forecastCog].value }
        let (succeeded, successNotices) = tracked { cogs.status[forecastCog].hasSucceeded }
        let (error, errorNotices) = tracked { cogs.status[forecastCog].error }
        let (loading, loadingNotices) = tracked { cogs.status[forecastCog].isLoading }
        #expect(kind == .pending)
        #expect(value == 0)
        #expect(!succeeded)
        #expect(error == nil)
        #expect(loading)

        #expect(await nextStart(work.starts) == 0)
        let completed = completionChecks(cogs, count: 1)
        // An equal success: the value field stays quiet.
        work.succeed(0, with: 0)
        try await waitAll(completed)
        #expect(bindingOnly.value == 0)
        #expect(kindNotices.value == 1)
        #expect(valueNotices.value == 0)
        #expect(successNotices.value == 1)
        #expect(errorNotices.value == 0)
        #expect(loadingNotices.value == 1)
    }

    @Test func `ASYNC-32 a tracked status notices every status turn: reload pending, failure, equal success`() async throws {
        let work = ControlledWork<Int>()
        let forecastCog = Cog<Int>.Async(default: 0, name: "forecast") { c in
            _ = c[_cityCog]
            return work.makeWork()
        }
        let cogs = Cogs.forTesting()
        _ = cogs.status[forecastCog]
        #expect(await nextStart(work.starts) == 0)
        var completed = completionChecks(cogs, count: 1)
        work.succeed(0, with: 7)
        try await waitAll(completed)

        // A dependency change reloads: pending is one notice for a kind reader,
        // none for a value reader.
        var (_, kindNotices) = tracked { cogs.status[forecastCog].kind }
        var (_, valueNotices) = tracked { cogs[forecastCog] }
        cogs.turn(_cityCog, to: "Bergen")
        #expect(await nextStart(work.starts) == 1)
        #expect(kindNotices.value == 1)
        #expect(valueNotices.value == 0)

        // A failure: the error field changes, the value does not.
        var errorNotices: Notices
        (_, errorNotices) = tracked { cogs.status[forecastCog].error }
        (_, valueNotices) = tracked { cogs.status[forecastCog].value }
        completed = completionChecks(cogs, count: 1)
        work.fail(1, with: Outage())
        try await waitAll(completed)
        #expect(errorNotices.value == 1)
        #expect(valueNotices.value == 0)
        #expect(cogs.status[forecastCog].kind == .failure)

        // A retry that succeeds with the value it had: kind changes, value does not.
        (_, kindNotices) = tracked { cogs.status[forecastCog].kind }
        (_, valueNotices) = tracked { cogs[forecastCog] }
        _ = cogs.refresh(forecastCog)
        #expect(await nextStart(work.starts) == 2)
        completed = completionChecks(cogs, count: 1)
        work.succeed(2, with: 7)
        try await waitAll(completed)
        #expect(kindNotices.value == 1)
        #expect(valueNotices.value == 0)
        #expect(cogs.status[forecastCog].kind == .success)
    }

    @Test func `UI-01 UI-02 a tracked read hears a change of what it read, never of another cog`() {
        let cogs = Cogs.forTesting()
        let (city, cityNotices) = tracked { cogs[_cityCog] }
        let (label, labelNotices) = tracked { cogs[_labelCog] }
        _ = cogs[_unitCog]
        #expect(city == "Oslo")
        #expect(label == "Oslo true")

        cogs.turn(_unitCog, to: "F")
        #expect(cityNotices.value == 0)
        #expect(labelNotices.value == 0)

        // The automatic cog is a hot root: its notice comes in the turn's
        // flush, without anyone reading it again.
        cogs.turn(_cityCog, to: "Bergen")
        #expect(cityNotices.value == 1)
        #expect(labelNotices.value == 1)
        #expect(cogs[_labelCog] == "Bergen true")
    }

    @Test func `UI-03 writing one key of a box does not notify a reader of another key`() {
        let weatherCogs = CogBox<String?, String>.Manual(name: "weather") { nil }
        let forecastCogs = CogBox<String, String>(name: "forecast") { c, zip in c[weatherCogs[zip]] ?? "unknown" }
        let cogs = Cogs.forTesting()
        let (initial, weatherNotices) = tracked { cogs[weatherCogs["10001"]] }
        let (_, forecastNotices) = tracked { cogs[forecastCogs["10001"]] }
        let (_, otherNotices) = tracked { cogs[forecastCogs["90210"]] }
        #expect(initial == nil)

        cogs.turn(named: "update weather") { c in c[weatherCogs["90210"]] = "sunny" }
        #expect(weatherNotices.value == 0)
        #expect(forecastNotices.value == 0)
        #expect(otherNotices.value == 1)
        #expect(cogs.peek(weatherCogs["10001"]) == nil)
        #expect(cogs.peek(forecastCogs["90210"]) == "sunny")
    }

    @Test func `UI-04 an equal write and an equal recomputation send no notice`() {
        let cogs = Cogs.forTesting()
        let (_, cityNotices) = tracked { cogs[_cityCog] }
        let (_, labelNotices) = tracked { cogs[_labelCog] }
        let (_, parityNotices) = tracked { cogs[_parityCog] }

        cogs.turn(_cityCog, to: "Oslo")
        // 10 → 12: the parity recomputes to an equal value.
        cogs.turn(_temperatureCog, to: 12)
        #expect(cityNotices.value == 0)
        #expect(parityNotices.value == 0)
        #expect(labelNotices.value == 0)

        cogs.turn(_temperatureCog, to: 13)
        #expect(parityNotices.value == 1)
        #expect(labelNotices.value == 1)
    }

    @Test func `UI-05 UI-09 only states read with cogs[x] get a boundary; a peek registers nothing`() {
        let cogs = Cogs.forTesting()
        #expect(cogs.observationBoundaryCount == 0)
        let (_, peekNotices) = tracked { cogs.peek(_labelCog) }
        #expect(cogs.observationBoundaryCount == 0)

        _ = cogs[_labelCog]
        #expect(cogs.observationBoundaryCount == 1)
        #expect(cogs.hasObservationBoundary(for: _labelCog))
        // What the label reads stays interior.
        #expect(!cogs.hasObservationBoundary(for: _parityCog))
        #expect(!cogs.hasObservationBoundary(for: _cityCog))
        _ = cogs[_labelCog]
        #expect(cogs.observationBoundaryCount == 1)

        cogs.turn(_cityCog, to: "Bergen")
        #expect(peekNotices.value == 0)
    }

    @Test func `UI-13 UI-16 one turn changing two tracked cogs is one notice; a tracking sees only its reads`() {
        let cogs = Cogs.forTesting()
        let (_, bothNotices) = tracked { (cogs[_cityCog], cogs[_unitCog]) }
        cogs.turn(named: "move") { w in
            w[_cityCog] = "Bergen"
            w[_unitCog] = "F"
        }
        #expect(bothNotices.value == 1)

        // The next render reads only the unit: the city no longer reaches it.
        let (_, unitNotices) = tracked { cogs[_unitCog] }
        cogs.turn(_cityCog, to: "Tromsø")
        #expect(unitNotices.value == 0)
        cogs.turn(_unitCog, to: "K")
        #expect(unitNotices.value == 1)
    }

    @Test func `HIST-06 a notice is recorded before the offers and reactions of its flush`() {
        let cogs = Cogs.forTesting(mechanisms: [
            Probe("Log") { m in m.watch(_cityCog, initial: .skip, name: "city") { _, _ in } }
        ])
        let export = cogs.values(of: _cityCog)
        _ = cogs[_cityCog]
        let before = cogs.debugHistory.entries.count
        cogs.turn(_cityCog, to: "Bergen")
        let events = cogs.debugHistory.entries.dropFirst(before)
            .filter { [.notice, .offer, .effect].contains($0.event) }
        #expect(events.map(\.event) == [.notice, .offer, .effect])
        #expect(events.first?.name == "boundary.city")
        _ = export
    }

    @Test func `HIST-06 history names each changed keyed notice, in its turn`() {
        let weatherCogs = CogBox<String?, String>.Manual(name: "weather") { nil }
        let cogs = Cogs.forTesting()
        _ = tracked { cogs[weatherCogs["90210"]] }
        _ = cogs[weatherCogs["10001"]]
        cogs.turn(named: "update weather") { c in c[weatherCogs["90210"]] = "sunny" }
        let notices = cogs.debugHistory.entries.filter { $0.event == .notice }
        #expect(notices.map(\.name) == ["weather[90210]"])
        #expect(notices.first?.turn == 1)
    }

    @Test func `REACT-19 every changed boundary is noticed before any reaction runs`() {
        let (cogs, m) = Cogs.forTestingWithController()
        _ = tracked { (cogs[_cityCog], cogs[_unitCog]) }
        m.run { c in
            _ = c[_cityCog]
            _ = c[_unitCog]
        }
        cogs.turn(named: "change pair") { c in
            c[_cityCog] = "Bergen"
            c[_unitCog] = "F"
        }
        let entries = cogs.debugHistory.entries.filter { $0.turn == 1 }
        let notices = entries.indices.filter { entries[$0].event == .notice }
        let effects = entries.indices.filter { entries[$0].event == .effect }
        #expect(notices.count == 2)
        #expect(effects.count == 1)
        #expect(notices.allSatisfy { $0 < effects[0] })
    }

    @Test func `SEED-07 a seed stays quiet until the next real turn, which notices it`() {
        let cogs = Cogs.forTesting()
        let (initial, notices) = tracked { cogs[_temperatureCog] }
        #expect(initial == 10)
        #expect(cogs.observationBoundaryCount == 1)
        #expect(cogs.hasObservationBoundary(for: _temperatureCog))

        cogs.seed(_temperatureCog, to: 11)
        #expect(cogs.peek(_temperatureCog) == 11)
        #expect(notices.value == 0)
        #expect(cogs.debugHistory.entries.filter { $0.event == .notice }.isEmpty)

        cogs.turn(_unitCog, to: "F")
        #expect(notices.value == 1)
        #expect(cogs.debugHistory.entries.filter { $0.event == .notice }.last?.name == "boundary.temperature")
    }

    @Test func `a boundary does not keep a discarded state alive; its reader hears the reset`() {
        let cogs = Cogs.forTesting()
        cogs.turn(_noteCog, to: "pack water")
        let (note, notices) = tracked { cogs[_noteCog] }
        #expect(note == "pack water")
        #expect(cogs.hasObservationBoundary(for: _noteCog))

        cogs.discard(_noteCog)
        #expect(notices.value == 1)
        #expect(!cogs.hasObservationBoundary(for: _noteCog))
        #expect(cogs.observationBoundaryCount == 0)
        #expect(cogs.peek(_noteCog) == "")
    }

    @Test func `a boundary adds nothing to reactionsRun`() {
        let cogs = Cogs.forTesting()
        _ = cogs[_labelCog]
        let before = cogs.reactionsRun
        cogs.turn(_cityCog, to: "Bergen")
        #expect(cogs.reactionsRun == before)
    }
}
