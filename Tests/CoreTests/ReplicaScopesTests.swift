import CogCodec
import CogProtocol
import Foundation
import Testing

/// The worker's book of scope instances (`ReplicaScopes`, cogwire §6):
/// replies adopted at their revision, events newer than a reply, retire
/// events of instances no longer paired, resets.
@Suite("Replica scopes")
struct ReplicaScopesTests {
    static let alice: [UInt8] = [0x65] + Array("alice".utf8)
    static let bob: [UInt8] = [0x63] + Array("bob".utf8)

    static func record(_ revision: UInt64, _ events: [ScopeEvent]) -> TurnRecord {
        TurnRecord(revision: revision, epoch: 1, time: Date(timeIntervalSince1970: 0), name: "t", writes: [], scopeEvents: events)
    }

    static func event(_ kind: ScopeEvent.Kind, _ identity: [UInt8], _ instance: UInt64, registration: UInt64 = 1, worker: String = "w1") -> ScopeEvent {
        ScopeEvent(kind: kind, instance: instance, scope: "S.child", identity: identity, worker: worker, registration: registration)
    }

    @Test func `a reply above the applied revision waits for the record that reaches it`() {
        var book = ReplicaScopes()
        book.registering(1, applied: 0)
        #expect(book.replied(registration: 1, revision: 5, members: [ScopeMember(identity: Self.alice, instance: 7)], applied: 4) == [])
        #expect(book.instance(registration: 1, identity: Self.alice) == nil && book.waitingReplies == 1)
        #expect(book.applied(Self.record(5, []), worker: "w1") + book.reached(5) == [
            .adopted(registration: 1, identity: Self.alice, instance: 7), .replyAdopted(registration: 1),
        ])
        #expect(book.instance(registration: 1, identity: Self.alice) == 7 && book.waitingReplies == 0)
        // A reply the replica has passed is adopted at once; one with no member still says it was adopted.
        book.registering(2, applied: 0)
        #expect(book.replied(registration: 2, revision: 3, members: [], applied: 5) == [.replyAdopted(registration: 2)])
    }

    @Test func `an event since the registration was sent is newer than its reply; other members take the reply`() {
        var book = ReplicaScopes()
        book.registering(1, applied: 0)
        _ = book.replied(registration: 1, revision: 6, members: [ScopeMember(identity: Self.alice, instance: 7), ScopeMember(identity: Self.bob, instance: 8)], applied: 4)
        // Revision 5 (before the reply's) opens 9 for alice: newer than the reply's 7.
        #expect(book.applied(Self.record(5, [Self.event(.open, Self.alice, 9)]), worker: "w1") == [.opened(registration: 1, identity: Self.alice, instance: 9)])
        #expect(book.applied(Self.record(6, []), worker: "w1") + book.reached(6) == [.adopted(registration: 1, identity: Self.bob, instance: 8), .replyAdopted(registration: 1)])
        #expect(book.instances(registration: 1) == [Self.alice: 9, Self.bob: 8])
    }

    @Test func `a retire event of an instance no longer paired changes nothing, unless the slot still holds it`() {
        var book = ReplicaScopes()
        book.registering(1, applied: 0)
        _ = book.replied(registration: 1, revision: 1, members: [ScopeMember(identity: Self.alice, instance: 7)], applied: 1)
        book.registering(1, applied: 1)  // sent again: instance 7 is no longer paired
        #expect(book.applied(Self.record(2, [Self.event(.retire, Self.alice, 7)]), worker: "w1") == [])
        // The driver's slot still holds 7: its retirement is told (the slot is done with).
        #expect(book.applied(Self.record(3, [Self.event(.retire, Self.alice, 7)]), worker: "w1") { _, _ in 7 } == [
            .retired(registration: 1, identity: Self.alice, instance: 7),
        ])
        // Another worker's events, and unknown registrations, are not this book's.
        #expect(book.applied(Self.record(4, [Self.event(.open, Self.bob, 11, worker: "w2"), Self.event(.open, Self.bob, 12, registration: 9)]), worker: "w1") == [])
    }

    @Test func `a reply to an earlier sending, older than what was applied when the registration was sent again, is not adopted`() {
        var book = ReplicaScopes()
        book.registering(1, applied: 3)
        // Given up meanwhile: revision 6 retired instance 7 (the book did not pair it yet), then the registration is sent again at 6.
        _ = book.applied(Self.record(6, [Self.event(.retire, Self.alice, 7)]), worker: "w1")
        book.registering(1, applied: 6)
        // The first sending's answer (as of revision 5, listing 7) arrives now: older news.
        #expect(book.replied(registration: 1, revision: 5, members: [ScopeMember(identity: Self.alice, instance: 7)], applied: 6) == [])
        #expect(book.instance(registration: 1, identity: Self.alice) == nil)
        // The second sending's answer (as of 8, after the leader placed alice elsewhere) is adopted.
        #expect(book.replied(registration: 1, revision: 8, members: [ScopeMember(identity: Self.bob, instance: 12)], applied: 8) == [
            .adopted(registration: 1, identity: Self.bob, instance: 12), .replyAdopted(registration: 1),
        ])
    }

    @Test func `forgetting, a snapshot and a dropped registration clear what they should, and waiting replies are bounded`() {
        var book = ReplicaScopes()
        book.registering(1, applied: 0)
        _ = book.applied(Self.record(1, [Self.event(.open, Self.alice, 7)]), worker: "w1")
        book.forgetInstances()
        #expect(book.instance(registration: 1, identity: Self.alice) == nil)
        _ = book.replied(registration: 1, revision: 9, members: [ScopeMember(identity: Self.bob, instance: 8)], applied: 1)
        book.snapshotApplied()
        #expect(book.waitingReplies == 0)
        _ = book.replied(registration: 1, revision: 9, members: [], applied: 1)
        book.drop(1)
        #expect(book.waitingReplies == 0)
        #expect(book.applied(Self.record(9, [Self.event(.open, Self.alice, 7)]), worker: "w1") == [], "a dropped registration hears nothing")
        for revision in 0..<UInt64(ReplicaScopes.maximumWaitingReplies + 10) {
            _ = book.replied(registration: 2, revision: 100 + revision, members: [], applied: 0)
        }
        #expect(book.waitingReplies == ReplicaScopes.maximumWaitingReplies)
    }

    @Test func `a nested registration goes under its parent's instance of the followed epoch, waits for one, or is dropped with its parent`() {
        let spec = ScopeRegistration(worker: "w1", registration: 4, path: "S.child.inner", source: "ledger.accounts", key: nil, form: .each)
        var under = spec
        under.parent = (2 << 32) | 5
        #expect(ReplicaScopes.sending(spec, parent: nil, epoch: 2) == .send(spec), "a top-level one goes as it is")
        #expect(ReplicaScopes.sending(spec, parent: ((2 << 32) | 5, false), epoch: 2) == .send(under))
        #expect(ReplicaScopes.sending(spec, parent: ((1 << 32) | 5, false), epoch: 2) == .waitForParent, "an earlier epoch's instance is dead")
        #expect(ReplicaScopes.sending(spec, parent: (nil, false), epoch: 2) == .waitForParent)
        #expect(ReplicaScopes.sending(spec, parent: ((2 << 32) | 5, true), epoch: 2) == .drop)
    }

    @Test func `registrations the socket did not take are sent again in order, one per number, and dropped when no longer wanted`() {
        var book = ReplicaScopes()
        func registration(_ number: UInt64, _ path: String = "S.child") -> ScopeRegistration {
            ScopeRegistration(worker: "w1", registration: number, path: path, source: "ledger.accounts", key: nil, form: .each)
        }
        book.notSent(registration(1))
        book.notSent(registration(2))
        book.notSent(registration(1, "S.again"))
        #expect(book.unsent.map(\.registration) == [2, 1], "a newer sending of 1 replaces the older, at the back")
        #expect(book.nextUnsent { $0.registration != 2 }?.path == "S.again", "2 is no longer wanted: dropped")
        book.sentAgain()
        #expect(book.unsent.isEmpty && book.nextUnsent { _ in true } == nil)
        book.notSent(registration(3))
        book.drop(3)
        #expect(book.unsent.isEmpty)
        book.notSent(registration(5))
        book.dropUnsent()
        #expect(book.unsent.isEmpty)
    }
}
