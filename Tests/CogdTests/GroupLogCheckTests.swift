import CogCodec
import CogLog
import Foundation
import Testing

@testable import CogLab
@testable import CogdCommandLine

/// The group drill's judge over hand-made logs: what it must find, and what it must not.
@Suite("the group drill's log check")
struct GroupLogCheckTests {
    let start = Date(timeIntervalSince1970: 1_000_000)
    let epoch: UInt64 = 1

    func instance(_ n: UInt64) -> UInt64 { epoch << 32 | n }

    func cbor(_ value: some Encodable) -> [UInt8] { try! CBOREncoder().encode(value) }

    func event(_ kind: ScopeEvent.Kind, _ n: UInt64, _ account: String, on worker: String) -> ScopeEvent {
        ScopeEvent(kind: kind, instance: instance(n), scope: "LedgerGreeter.greeter", identity: cbor(account), worker: worker, registration: 1)
    }

    /// Records 1…: each `at` seconds after `start`.
    func record(_ revision: UInt64, at seconds: Double, _ name: String, worker: String? = nil, instance n: UInt64? = nil,
                writes: [TurnWrite] = [], events: [ScopeEvent] = []) -> TurnRecord {
        TurnRecord(
            revision: revision, epoch: epoch, time: start.addingTimeInterval(seconds), name: name,
            origin: TurnOrigin(worker: worker, instance: n.map(instance)), writes: writes, scopeEvents: events)
    }

    func opened(_ accounts: [String]) -> TurnWrite { TurnWrite(name: "ledger.accounts", key: nil, value: cbor(accounts)) }

    func greeting(_ revision: UInt64, at seconds: Double, _ account: String, from worker: String, instance n: UInt64) -> TurnRecord {
        record(
            revision, at: seconds, "LedgerGreeter.greeter[\(account)].ledger.greet", worker: worker, instance: n,
            writes: [TurnWrite(name: "ledger.greeted", key: cbor(account), value: cbor(1))])
    }

    /// Two accounts on two workers, greeted; w1 is killed at 10 s.
    func opening() -> [TurnRecord] {
        [
            record(1, at: 0, "ledger.open", writes: [opened(["a"])], events: [event(.open, 1, "a", on: "w1")]),
            record(2, at: 0.1, "ledger.open", writes: [opened(["a", "b"])], events: [event(.open, 2, "b", on: "w2")]),
            greeting(3, at: 0.2, "a", from: "w1", instance: 1),
            greeting(4, at: 0.3, "b", from: "w2", instance: 2),
        ]
    }

    func checked(_ records: [TurnRecord]) -> GroupLogCheck {
        var check = GroupLogCheck(kills: [GroupLogCheck.Kill(worker: "w1", at: start.addingTimeInterval(10))], window: 3)
        for record in records { check.read(record) }
        check.finish(lastRevision: records.last?.revision ?? 0)
        return check
    }

    @Test func `a kill whose account reopens and greets on the survivor: nothing found, the move timed`() {
        let check = checked(opening() + [
            record(5, at: 10.5, "ledger.transfer"),
            record(6, at: 12, "cogd.workerGone", events: [event(.retire, 1, "a", on: "w1"), event(.open, 3, "a", on: "w2")]),
            greeting(7, at: 12.25, "a", from: "w2", instance: 3),
            record(8, at: 20, "ledger.transfer"),
        ])
        #expect(check.doubleOwnership.count == 0 && check.uncovered.count == 0)
        #expect(check.duplicatedEffects.count == 0 && check.foreignEffects.count == 0)
        #expect(check.coveredFrom == 1)
        #expect(check.scopeEffects == 3 && check.instancesSeen.count == 3)
        #expect(check.moves.count == 1)
        #expect(check.moves.first?.members == ["a"])
        #expect(check.moves.first?.reopenMilliseconds == 2_000)
        #expect(check.moves.first?.liveMilliseconds == 2_250)
    }

    @Test func `an account left on the dead worker past the window is found, and at the end`() {
        let check = checked(opening() + [record(5, at: 12.9, "ledger.transfer"), record(6, at: 13.5, "ledger.transfer")])
        #expect(check.uncovered.first == ["revision 6: a still owned by w1, killed, 3500 ms after its kill", "revision 6: a still owned by w1, killed, at the end"])
        #expect(check.moves.first?.liveMilliseconds == nil)
    }

    @Test func `a second live instance, a second greeting and a greeting from a retired or another's instance are found`() {
        let double = checked(opening() + [record(5, at: 1, "cogd.scopesMoved", events: [event(.open, 3, "a", on: "w2")])])
        #expect(double.doubleOwnership.first == ["revision 5: a has 2 live instances (\(instance(1)) on w1, \(instance(3)) on w2)"])
        let twice = checked(opening() + [greeting(5, at: 1, "b", from: "w2", instance: 2)])
        #expect(twice.duplicatedEffects.count == 1)
        #expect(twice.duplicatedEffects.first.first?.hasPrefix("instance \(instance(2)) applied LedgerGreeter.greeter[b].ledger.greet twice") == true)
        let foreign = checked(opening() + [greeting(5, at: 1, "b", from: "w1", instance: 2)])
        #expect(foreign.foreignEffects.first.first?.contains("from w1, instance \(instance(2)) is w2's") == true)
        let misattributed = checked(opening() + [greeting(5, at: 1, "a", from: "w2", instance: 2)])
        #expect(misattributed.foreignEffects.first == ["revision 5 (LedgerGreeter.greeter[a].ledger.greet) greets a with instance \(instance(2)), which is b's"])
        let retired = checked(opening() + [
            record(5, at: 1, "ledger.close", writes: [opened(["a"])], events: [event(.retire, 2, "b", on: "w2")]),
            record(6, at: 1.1, "LedgerGreeter.greeter[b].ledger.tellerTransfer", worker: "w2", instance: 2),
        ])
        #expect(retired.foreignEffects.first == ["revision 6 (LedgerGreeter.greeter[b].ledger.tellerTransfer) from instance \(instance(2)), not live"])
        #expect(retired.duplicatedEffects.count == 0 && retired.uncovered.count == 0)
    }
}
