import Cog
import CogTesting
import Testing

// A box office in miniature, as the guide's example: a seat hold that a
// mechanism releases when the host's clock passes the hold's expiry, the
// hold's length from the `hold-seconds` setting.

let _heldSeatsCog = Cog<[String]>.Manual(name: "boxOfficeTest.heldSeats") { [] }

/// A helper that writes, taking the turn's writer: `Writer` is main-actor
/// isolated, so a free function that uses it says `@MainActor` (ops and
/// mechanisms already run there; a helper outside any type does not).
@MainActor
func hold(_ seat: String, in c: Writer) {
    guard !c[_heldSeatsCog].contains(seat) else { return }
    c[_heldSeatsCog].append(seat)
}

let holdSeatOp = RemoteOp<String>(name: "boxOfficeTest.hold", summary: "holds a seat", example: "A1") { c, seat in
    hold(seat, in: c)
}

/// The same kind of helper as a method of `Writer`: an extension of a
/// main-actor type is main-actor code, so it needs no annotation.
extension Writer {
    func release(_ seat: String) {
        self[_heldSeatsCog].removeAll { $0 == seat }
    }
}

let releaseSeatOp = RemoteOp<String>(name: "boxOfficeTest.release", summary: "releases a held seat", example: "A1") { c, seat in
    c.release(seat)
}

/// One scope per held seat, whose task releases the seat when the hold expires.
struct SeatHoldMechanism: Mechanism {
    let clock: any Clock<Duration>
    let holdFor: Duration

    func operate(_ m: MechanismController) {
        m.scope(each: _heldSeatsCog, name: "hold") { seat, s in
            s.task(name: "expiry") { [weak s, clock, holdFor] in
                try await clock.sleep(for: holdFor)
                await s?.perform(releaseSeatOp, seat)
            }
        }
    }
}

enum BoxOfficeTest {
    static let rig = CogRig(
        name: "boxOfficeTest", summary: "seat holds that expire", durableSources: [_heldSeatsCog], ops: [holdSeatOp, releaseSeatOp],
        mechanisms: { host in
            let holdFor = try host.settings.duration("hold-seconds") ?? .seconds(600)
            return [SeatHoldMechanism(clock: host.clock, holdFor: holdFor)]
        })
}

@MainActor
@Suite("A rig's mechanisms wait on the host's clock and read its settings", .timeLimit(.minutes(1)))
struct BoxOfficeHostTests {
    @Test func `a seat hold is released when the host's test clock passes the hold-seconds setting`() async throws {
        let clock = TestClock()
        let host = CogRig.Host(workerName: "w", clock: clock, settings: try CogRig.Settings(["hold-seconds": "5"])) { _ in }
        let cogs = Cogs.forTesting(mechanisms: try BoxOfficeTest.rig.mechanisms(host))
        var held = cogs.values(of: _heldSeatsCog.readOnly, buffering: .unbounded).makeAsyncIterator()
        #expect(await held.next() == [])
        cogs.perform(holdSeatOp, "A1")
        #expect(await held.next() == ["A1"])
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(4))
        #expect(cogs.peek(_heldSeatsCog) == ["A1"])
        clock.advance(by: .seconds(1))
        #expect(await held.next() == [])
        #expect(clock.activeSleeperCount == 0)
        clock.finish()
    }

    @Test func `without the setting a hold lasts the rig's default, 600 seconds`() async throws {
        let clock = TestClock()
        let host = CogRig.Host(workerName: "w", clock: clock) { _ in }
        let cogs = Cogs.forTesting(mechanisms: try BoxOfficeTest.rig.mechanisms(host))
        var held = cogs.values(of: _heldSeatsCog.readOnly, buffering: .unbounded).makeAsyncIterator()
        #expect(await held.next() == [])
        cogs.perform(holdSeatOp, "B2")
        #expect(await held.next() == ["B2"])
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(599))
        #expect(cogs.peek(_heldSeatsCog) == ["B2"])
        clock.advance(by: .seconds(1))
        #expect(await held.next() == [])
        clock.finish()
    }

    @Test func `a hold-seconds that is not a duration stops the rig's assembly with a message naming the key`() throws {
        let host = CogRig.Host(workerName: "w", settings: try CogRig.Settings(["hold-seconds": "soon"])) { _ in }
        #expect(
            throws: CogRig.Settings.Problem(
                .badValue, key: "hold-seconds",
                "setting 'hold-seconds' is 'soon', not a duration (seconds, or a number with ms, s, m, h or d, like 600 or 10m; at most 366 days)")
        ) { try BoxOfficeTest.rig.mechanisms(host) }
    }
}
