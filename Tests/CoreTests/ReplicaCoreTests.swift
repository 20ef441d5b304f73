import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

/// A worker's sync rules (`cogwire.md` §5, §6), asserted on `ReplicaCore`:
/// what it sends and applies for each message of its leader, with time as
/// an input.
@Suite("Replica core")
struct ReplicaCoreTests {
    static let endpoint = "tcp://127.0.0.1:5702"
    static let time = Date(timeIntervalSince1970: 1_700_000_000)

    /// A record of `revision` writing `test.n` = revision.
    static func record(_ revision: UInt64, epoch: UInt64 = 1) -> TurnRecord {
        TurnRecord(
            revision: revision, epoch: epoch, time: time, name: "test.count",
            writes: [TurnWrite(name: "test.n", key: nil, value: try? CBOREncoder().encode(revision))])
    }

    static func entry(_ name: String, _ value: Int) -> SnapshotEntry {
        SnapshotEntry(name: name, key: nil, value: (try? CBOREncoder().encode(value)) ?? [])
    }

    static func welcome(epoch: UInt64 = 1, lastRevision: UInt64 = 0, lastSequence: UInt64 = 0) -> ReplicaCore.Input {
        .leader(.welcome(epoch: epoch, lastRevision: lastRevision, turnsEndpoint: endpoint, lastSequence: lastSequence))
    }

    static func snapshot(epoch: UInt64 = 1, revision: UInt64, _ entries: [SnapshotEntry], part: UInt64 = 0, more: Bool = false) -> ReplicaCore.Input {
        .leader(.snapshot(epoch: epoch, revision: revision, entries: entries, part: part, more: more))
    }

    static func refusal(_ code: CogdCode, _ message: String = "refused") -> ReplicaCore.Input {
        .leader(.error(WireError(code, message)))
    }

    static let hello = ReplicaCore.Effect.send(.hello(worker: "w1", lastRevision: 0))
    static let snapshotRequest = ReplicaCore.Effect.send(.snapshotRequest(inParts: true))

    /// A replica started at 0, welcomed at 10 ms and synced at 20 ms at `revision`.
    static func synced(at revision: UInt64 = 2, epoch: UInt64 = 1, settings: ReplicaCore.Settings = .init(name: "w1", checksDigest: false)) -> ReplicaCore {
        var replica = ReplicaCore(settings: settings)
        _ = replica.step(.start, now: .zero)
        _ = replica.step(welcome(epoch: epoch, lastRevision: revision), now: .milliseconds(10))
        let effects = replica.step(snapshot(epoch: epoch, revision: revision, [entry("test.n", Int(revision))]), now: .milliseconds(20))
        #expect(effects == [.applySnapshot(revision: revision, entries: [entry("test.n", Int(revision))]), .firstSync])
        return replica
    }

    // MARK: Joining

    @Test func `start says hello with revision 0, and a welcome subscribes and asks for the snapshot in parts`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        #expect(replica.step(.start, now: .zero) == [Self.hello])
        #expect(replica.step(Self.welcome(lastRevision: 7), now: .milliseconds(10)) == [.subscribe(Self.endpoint), Self.snapshotRequest])
        #expect(replica.epoch == 1 && !replica.isSynced)
        // Another welcome meanwhile (a heartbeat's answer) asks for nothing more.
        #expect(replica.step(Self.welcome(lastRevision: 8), now: .milliseconds(20)) == [])
    }

    @Test func `snapshot parts in order are applied as one, then the records held meanwhile, then the first sync`() throws {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(Self.welcome(), now: .milliseconds(10))
        #expect(replica.step(.published(epoch: 1, records: [Self.record(4), Self.record(3)]), now: .milliseconds(20)) == [], "held")
        #expect(replica.step(.published(epoch: 1, records: [Self.record(2)]), now: .milliseconds(21)) == [], "held")
        let first = [Self.entry("test.a", 1)]
        let second = [Self.entry("test.b", 2), Self.entry("test.n", 2)]
        #expect(replica.step(Self.snapshot(revision: 2, first, part: 0, more: true), now: .milliseconds(30)) == [])
        #expect(
            replica.step(Self.snapshot(revision: 2, second, part: 1), now: .milliseconds(40)) == [
                .applySnapshot(revision: 2, entries: first + second), .apply(Self.record(3)), .apply(Self.record(4)), .firstSync,
            ])
        #expect(replica.appliedRevision == 4 && replica.isSynced)
        #expect(replica.syncedRevision == 2 && replica.syncedParts == 2 && replica.syncedEpoch == 1)
        #expect(replica.encodedValue("test.a", nil) == (try CBOREncoder().encode(1)))
        #expect(replica.encodedValue("test.n", nil) == (try CBOREncoder().encode(UInt64(4))))
        // A snapshot no longer awaited is ignored.
        #expect(replica.step(Self.snapshot(revision: 9, []), now: .milliseconds(50)) == [])
    }

    @Test func `parts out of order are assembled; some parts then silence for 2 s asks again`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(Self.welcome(), now: .milliseconds(10))
        #expect(replica.step(Self.snapshot(revision: 2, [Self.entry("test.c", 3)], part: 2), now: .milliseconds(20)) == [], "the last, first")
        #expect(replica.step(Self.snapshot(revision: 2, [Self.entry("test.a", 1)], part: 0, more: true), now: .milliseconds(21)) == [])
        #expect(!replica.isSynced, "part 1 is missing")
        // Part 1 never comes: 2 s after the last part, the snapshot is asked for again.
        #expect(replica.step(.tick, now: .milliseconds(2_020)) == [.send(.heartbeat(worker: "w1", revision: 0, stateDigest: replica.stateDigest))])
        #expect(replica.step(.tick, now: .milliseconds(2_021)) == [Self.snapshotRequest])
        // The new run comes out of order too, and is whole once every part is there.
        #expect(replica.step(Self.snapshot(revision: 3, [Self.entry("test.b", 2)], part: 1), now: .milliseconds(2_030)) == [])
        #expect(
            replica.step(Self.snapshot(revision: 3, [Self.entry("test.a", 1)], part: 0, more: true), now: .milliseconds(2_031))
                == [.applySnapshot(revision: 3, entries: [Self.entry("test.a", 1), Self.entry("test.b", 2)]), .firstSync])
        #expect(replica.syncedParts == 2)
        #expect(replica.encodedValue("test.c", nil) == nil, "the abandoned run's parts are gone")
    }

    @Test func `a part of a newer revision starts a new run; a part of an older one is left over and ignored`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(Self.welcome(), now: .milliseconds(10))
        #expect(replica.step(Self.snapshot(revision: 2, [Self.entry("test.a", 1)], part: 0, more: true), now: .milliseconds(20)) == [])
        // The leader gave its read up and starts over at a newer revision.
        #expect(replica.step(Self.snapshot(revision: 4, [Self.entry("test.a", 7)], part: 0, more: true), now: .milliseconds(30)) == [])
        #expect(replica.step(Self.snapshot(revision: 2, [Self.entry("test.b", 2)], part: 1), now: .milliseconds(31)) == [], "older: ignored")
        #expect(!replica.isSynced)
        #expect(
            replica.step(Self.snapshot(revision: 4, [Self.entry("test.b", 9)], part: 1), now: .milliseconds(32))
                == [.applySnapshot(revision: 4, entries: [Self.entry("test.a", 7), Self.entry("test.b", 9)]), .firstSync])
    }

    @Test func `a snapshot claiming revision 2^63 or more is refused, never applied`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(Self.welcome(), now: .milliseconds(10))
        for revision in [UInt64(1) << 63, .max] {
            #expect(
                replica.step(Self.snapshot(revision: revision, [Self.entry("test.a", 1)]), now: .milliseconds(20)) == [
                    .refused(WireError(.malformed, "a snapshot claims revision \(revision); revisions are below 2^63"))
                ])
        }
        #expect(replica.step(Self.snapshot(revision: (1 << 63) - 1, [], part: 0, more: true), now: .milliseconds(21)) == [])
        #expect(!replica.isSynced && replica.appliedRevision == 0)
        #expect(replica.step(Self.snapshot(revision: 3, []), now: .milliseconds(30)) == [.applySnapshot(revision: 3, entries: []), .firstSync])
    }

    @Test func `a snapshot with no part at all is asked for again after 30 s, then 60 s, doubling; a part resets it`() {
        // (No lease: minutes pass unanswered here; `WorkerLeaseTests` holds the lease.)
        var replica = ReplicaCore(settings: .init(name: "w1", heartbeatInterval: .seconds(1_000), checksDigest: false, lease: nil))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(Self.welcome(), now: .zero)
        #expect(replica.step(.tick, now: .seconds(30)) == [])
        #expect(replica.step(.tick, now: .seconds(31)) == [Self.snapshotRequest])
        #expect(replica.step(.tick, now: .seconds(91)) == [])
        #expect(replica.step(.tick, now: .seconds(92)) == [Self.snapshotRequest])
        #expect(replica.step(.tick, now: .seconds(212)) == [])
        #expect(replica.step(.tick, now: .seconds(213)) == [Self.snapshotRequest], "120 s")
        // A part is progress: the leader sends. The rest lost, 2 s later it asks again.
        #expect(replica.step(Self.snapshot(revision: 1, [], part: 0, more: true), now: .seconds(220)) == [])
        #expect(replica.step(.tick, now: .seconds(222)) == [Self.snapshotRequest])
        // And with nothing coming now, the wait is back to 30 s.
        #expect(replica.step(.tick, now: .seconds(252)) == [])
        #expect(replica.step(.tick, now: .seconds(253)) == [Self.snapshotRequest])
        #expect(
            replica.step(Self.snapshot(revision: 1, []), now: .seconds(254))
                == [.applySnapshot(revision: 1, entries: []), .send(.heartbeat(worker: "w1", revision: 1, stateDigest: replica.stateDigest)), .firstSync])
        #expect(replica.step(Self.welcome(epoch: 2, lastRevision: 1), now: .seconds(255)) == [.subscribe(Self.endpoint), Self.snapshotRequest])
        #expect(replica.step(.tick, now: .seconds(286)) == [Self.snapshotRequest])
    }

    // MARK: The turn stream

    @Test func `a gap in published records asks for one catch-up, and its reply fills it`() {
        var replica = Self.synced(at: 2)
        #expect(replica.step(.published(epoch: 1, records: [Self.record(4)]), now: .milliseconds(30)) == [.send(.catchUpRequest(from: 3))])
        #expect(replica.step(.published(epoch: 1, records: [Self.record(5)]), now: .milliseconds(31)) == [], "one request at a time")
        #expect(replica.step(Self.welcome(lastRevision: 5), now: .milliseconds(32)) == [], "a welcome while it is outstanding asks nothing")
        #expect(replica.appliedRevision == 2)
        #expect(
            replica.step(.leader(.turns(epoch: 1, records: [Self.record(3)])), now: .milliseconds(40))
                == [.apply(Self.record(3)), .apply(Self.record(4)), .apply(Self.record(5))])
        #expect(replica.step(.published(epoch: 1, records: [Self.record(6)]), now: .milliseconds(50)) == [.apply(Self.record(6))])
        // Records already applied are skipped.
        #expect(replica.step(.published(epoch: 1, records: [Self.record(5), Self.record(6)]), now: .milliseconds(51)) == [])
        #expect(replica.appliedRevision == 6)
    }

    @Test func `a replica behind the revision its leader named asks on as soon as a catch-up reply is applied`() {
        var replica = Self.synced(at: 0)
        #expect(replica.step(Self.welcome(lastRevision: 5), now: .milliseconds(30)) == [.send(.catchUpRequest(from: 1))])
        #expect(
            replica.step(.leader(.turns(epoch: 1, records: [Self.record(1), Self.record(2)])), now: .milliseconds(40))
                == [.apply(Self.record(1)), .apply(Self.record(2)), .send(.catchUpRequest(from: 3))])
        #expect(
            replica.step(.leader(.turns(epoch: 1, records: [Self.record(3), Self.record(4), Self.record(5)])), now: .milliseconds(50))
                == [.apply(Self.record(3)), .apply(Self.record(4)), .apply(Self.record(5))])
        #expect(replica.step(Self.welcome(lastRevision: 5), now: .milliseconds(60)) == [])
    }

    @Test func `records and catch-up replies of another epoch are ignored`() {
        var replica = Self.synced(at: 2)
        #expect(replica.step(.published(epoch: 2, records: [Self.record(3, epoch: 2)]), now: .milliseconds(30)) == [])
        #expect(replica.step(.leader(.turns(epoch: 0, records: [Self.record(3)])), now: .milliseconds(31)) == [])
        #expect(replica.appliedRevision == 2)
    }

    @Test func `applied records report progress soon, and heartbeats go out every interval`() {
        var replica = Self.synced(at: 2)
        #expect(replica.step(.tick, now: .milliseconds(500)) == [])
        #expect(replica.step(.tick, now: .seconds(1)) == [.send(.heartbeat(worker: "w1", revision: 2, stateDigest: replica.stateDigest))])
        #expect(replica.step(.tick, now: .milliseconds(1_999)) == [])
        #expect(replica.step(.tick, now: .seconds(2)) == [.send(.heartbeat(worker: "w1", revision: 2, stateDigest: replica.stateDigest))])
        // A record applied 100 ms or more after the last report sends one at once.
        #expect(replica.step(.published(epoch: 1, records: [Self.record(3)]), now: .milliseconds(2_050)) == [.apply(Self.record(3))])
        #expect(
            replica.step(.published(epoch: 1, records: [Self.record(4)]), now: .milliseconds(2_150))
                == [.apply(Self.record(4)), .send(.heartbeat(worker: "w1", revision: 4, stateDigest: replica.stateDigest))])
        #expect(replica.step(.tick, now: .milliseconds(3_149)) == [])
        #expect(replica.step(.tick, now: .milliseconds(3_150)) == [.send(.heartbeat(worker: "w1", revision: 4, stateDigest: replica.stateDigest))])
        // Another interval.
        var quick = Self.synced(at: 0, settings: .init(name: "w1", heartbeatInterval: .milliseconds(200)))
        #expect(quick.step(.tick, now: .milliseconds(199)) == [])
        #expect(quick.step(.tick, now: .milliseconds(200)) == [.send(.heartbeat(worker: "w1", revision: 0, stateDigest: quick.stateDigest))])
    }

    // MARK: Epochs and rejoining

    @Test func `a welcome of a new epoch subscribes again and re-syncs, then the scopes register anew`() {
        // The restarted leader kept what the replica applied (durable before visible) and more.
        var replica = Self.synced(at: 2)
        #expect(replica.step(Self.welcome(epoch: 2, lastRevision: 4), now: .milliseconds(30)) == [.subscribe(Self.endpoint), Self.snapshotRequest])
        #expect(replica.epoch == 2)
        #expect(replica.step(.published(epoch: 1, records: [Self.record(3)]), now: .milliseconds(31)) == [], "the old epoch's stream")
        #expect(replica.step(.published(epoch: 2, records: [Self.record(5, epoch: 2)]), now: .milliseconds(32)) == [], "held")
        #expect(replica.step(Self.snapshot(epoch: 1, revision: 2, []), now: .milliseconds(33)) == [], "the old epoch's snapshot")
        #expect(
            replica.step(Self.snapshot(epoch: 2, revision: 4, [Self.entry("test.b", 1)]), now: .milliseconds(40))
                == [
                    .applySnapshot(revision: 4, entries: [Self.entry("test.b", 1)], absent: [TurnWrite(name: "test.n", key: nil, value: nil)]),
                    .apply(Self.record(5, epoch: 2)), .registerScopesAnew,
                ], "what the snapshot lacks goes back to its initial value")
        #expect(replica.appliedRevision == 5 && replica.syncedEpoch == 2 && replica.syncedRevision == 4)
        #expect(replica.encodedState.count == 2, "test.b and test.n")
        #expect(replica.encodedValue("test.n", nil) == (try? CBOREncoder().encode(UInt64(5))), "as of the new epoch's record, not the old snapshot")
        #expect(replica.step(Self.welcome(epoch: 2, lastRevision: 5), now: .milliseconds(50)) == [])
    }

    @Test func `gone or hello-first: forget the instances, say hello at each refusal, and register anew on the welcome`() {
        for code in [CogdCode.gone, .helloFirst] {
            var replica = Self.synced(at: 2)
            let error = WireError(code, "refused")
            #expect(replica.step(.leader(.error(error)), now: .milliseconds(30)) == [.refused(error), .forgetInstances, .send(.hello(worker: "w1", lastRevision: 2))])
            #expect(replica.step(.leader(.error(error)), now: .milliseconds(31)) == [.refused(error), .forgetInstances, .send(.hello(worker: "w1", lastRevision: 2))])
            #expect(replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(40)) == [.registerScopesAnew], "\(code)")
            #expect(replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(50)) == [])
        }
    }

    @Test func `gone, then a welcome of a new epoch: re-sync first, then register anew once`() {
        var replica = Self.synced(at: 2)
        _ = replica.step(Self.refusal(.helloFirst), now: .milliseconds(30))
        #expect(replica.step(Self.welcome(epoch: 2, lastRevision: 1), now: .milliseconds(40)) == [.subscribe(Self.endpoint), Self.snapshotRequest])
        #expect(
            replica.step(Self.snapshot(epoch: 2, revision: 1, []), now: .milliseconds(50))
                == [.applySnapshot(revision: 1, entries: [], absent: [TurnWrite(name: "test.n", key: nil, value: nil)]), .registerScopesAnew])
        #expect(replica.step(Self.welcome(epoch: 2, lastRevision: 1), now: .milliseconds(60)) == [])
    }

    @Test func `revision-ahead drops the replica and says hello with revision 0, then re-syncs even in the same epoch`() {
        var replica = Self.synced(at: 4)
        let error = WireError(.revisionAhead, "worker w1 says it holds revision 4, but this leader's log ends at revision 2; sync again from revision 0")
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(30)) == [.refused(error), Self.hello])
        #expect(replica.appliedRevision == 0 && replica.epoch == nil)
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(31)) == [.refused(error)], "an earlier hello's answer")
        #expect(replica.step(.published(epoch: 1, records: [Self.record(1)]), now: .milliseconds(32)) == [])
        #expect(replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(40)) == [.subscribe(Self.endpoint), Self.snapshotRequest])
        #expect(
            replica.step(Self.snapshot(revision: 2, []), now: .milliseconds(50))
                == [.applySnapshot(revision: 2, entries: [], absent: [TurnWrite(name: "test.n", key: nil, value: nil)]), .registerScopesAnew])
        #expect(replica.appliedRevision == 2 && replica.encodedState.isEmpty)
    }

    @Test func `given up while its snapshot was asked for: the rejoin's welcome asks for it again at once`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        #expect(replica.step(Self.welcome(lastRevision: 3), now: .milliseconds(10)) == [.subscribe(Self.endpoint), Self.snapshotRequest])
        // The leader gave it up before the request came: refused hello-first, then gone for a heartbeat.
        let helloFirst = WireError(.helloFirst, "`snapshot-request` needs a connection that said hello as a worker; say hello first")
        #expect(replica.step(.leader(.error(helloFirst)), now: .milliseconds(20)) == [.refused(helloFirst), .forgetInstances, Self.hello])
        #expect(replica.step(Self.welcome(lastRevision: 3), now: .milliseconds(30)) == [Self.snapshotRequest])
        // A welcome answering a heartbeat meanwhile asks for nothing more.
        #expect(replica.step(Self.welcome(lastRevision: 3), now: .milliseconds(40)) == [])
        #expect(replica.step(Self.snapshot(revision: 3, [Self.entry("test.n", 3)]), now: .milliseconds(50)) == [.applySnapshot(revision: 3, entries: [Self.entry("test.n", 3)]), .firstSync])
    }

    @Test func `what a worker logs is kept: the replica discarded at revision-ahead, and each time the leader gave it up`() {
        var replica = Self.synced(at: 4)
        let ahead = WireError(.revisionAhead, "worker w1 says it holds revision 4, but this leader's log ends at revision 2; sync again from revision 0")
        _ = replica.step(.leader(.error(ahead)), now: .milliseconds(30))
        _ = replica.step(.leader(.error(ahead)), now: .milliseconds(31))
        #expect(replica.startOvers == 1, "a second answer to an earlier hello discards nothing more")
        #expect(replica.lastStartOver == ReplicaCore.StartOver(discardedRevision: 4, discardedEpoch: 1, reason: ahead.message))
        _ = replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(40))
        _ = replica.step(Self.snapshot(revision: 2, []), now: .milliseconds(50))
        // Given up: every heartbeat in flight is answered `gone`; one giving-up, one rejoin.
        _ = replica.step(Self.refusal(.gone), now: .milliseconds(60))
        _ = replica.step(Self.refusal(.gone), now: .milliseconds(61))
        #expect(replica.timesGivenUp == 1 && !replica.hasJoined)
        _ = replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(70))
        #expect(replica.hasJoined)
        _ = replica.step(Self.refusal(.gone), now: .milliseconds(80))
        #expect(replica.timesGivenUp == 2)
    }

    @Test func `what the operator is told comes as events, each once, in the order it happened`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        let inUse = WireError(.nameInUse, "worker w1 is held by another connection")
        _ = replica.step(.leader(.error(inUse)), now: .milliseconds(5))
        _ = replica.step(.leader(.error(inUse)), now: .milliseconds(6))
        _ = replica.step(Self.welcome(lastRevision: 4), now: .milliseconds(10))
        _ = replica.step(Self.snapshot(revision: 4, [Self.entry("test.n", 4)]), now: .milliseconds(20))
        #expect(replica.takeEvents() == [
            .nameRefused(inUse), .nameFree,
            .synced(.init(revision: 4, epoch: 1, parts: 1, first: true, newEpoch: false, startedOverFrom: nil, afterCompaction: false)),
        ])
        #expect(replica.takeEvents() == [], "taken once")
        // Given up (twice answered), rejoined; the log went back; a catch-up compacted; a new epoch.
        let gone = WireError(.gone, "worker w1 was silent past the heartbeat timeout")
        _ = replica.step(.leader(.error(gone)), now: .milliseconds(30))
        _ = replica.step(.leader(.error(gone)), now: .milliseconds(31))
        _ = replica.step(Self.welcome(lastRevision: 4), now: .milliseconds(40))
        let ahead = WireError(.revisionAhead, "this leader's log ends at revision 2")
        _ = replica.step(.leader(.error(ahead)), now: .milliseconds(50))
        _ = replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(60))
        _ = replica.step(Self.snapshot(revision: 2, []), now: .milliseconds(70))
        _ = replica.step(.published(epoch: 1, records: [Self.record(5)]), now: .milliseconds(80))
        _ = replica.step(Self.refusal(.compacted, "revision 3 is no longer in the log"), now: .milliseconds(90))
        _ = replica.step(Self.snapshot(revision: 6, []), now: .milliseconds(100))
        _ = replica.step(Self.welcome(epoch: 2, lastRevision: 6), now: .milliseconds(110))
        _ = replica.step(Self.snapshot(epoch: 2, revision: 6, []), now: .milliseconds(120))
        #expect(replica.takeEvents() == [
            .givenUp(gone), .rejoined(revision: 4),
            .startedOver(.init(discardedRevision: 4, discardedEpoch: 1, reason: ahead.message)),
            .synced(.init(revision: 2, epoch: 1, parts: 1, first: false, newEpoch: false, startedOverFrom: 4, afterCompaction: false)),
            .synced(.init(revision: 6, epoch: 1, parts: 1, first: false, newEpoch: false, startedOverFrom: nil, afterCompaction: true)),
            .synced(.init(revision: 6, epoch: 2, parts: 1, first: false, newEpoch: true, startedOverFrom: nil, afterCompaction: false)),
        ])
        #expect(replica.droppedEvents == 0)
    }

    @Test func `a restarted leader whose log went back: hello-first, then revision-ahead, and the replica starts over`() {
        var replica = Self.synced(at: 4)
        let helloFirst = WireError(.helloFirst, "`heartbeat` needs a worker that said hello on this connection (worker w1 has not); say hello first")
        #expect(replica.step(.leader(.error(helloFirst)), now: .milliseconds(30)) == [.refused(helloFirst), .forgetInstances, .send(.hello(worker: "w1", lastRevision: 4))])
        let ahead = WireError(.revisionAhead, "worker w1 says it holds revision 4, but this leader's log ends at revision 2; sync again from revision 0")
        let effects = replica.step(.leader(.error(ahead)), now: .milliseconds(40))
        #expect(effects == [.refused(ahead), Self.hello])
        #expect(replica.appliedRevision == 0)

    }

    @Test func `name-in-use: forget the instances, say hello again 0.5 s doubling to 5 s apart until welcomed, then register anew`() {
        // (No lease: a displaced worker has forgotten its instances; `WorkerLeaseTests` holds the lease.)
        var replica = Self.synced(at: 2, settings: .init(name: "w1", checksDigest: false, lease: nil))
        let error = WireError(.nameInUse, "another process is connected as worker w1 (heard 0.2 s ago); each worker needs its own --name")
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(30)) == [.refused(error), .forgetInstances])
        #expect(replica.displaced == error)
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(31)) == [.refused(error)])
        #expect(replica.step(.tick, now: .milliseconds(499)) == [])
        #expect(replica.step(.tick, now: .milliseconds(500)) == [.send(.hello(worker: "w1", lastRevision: 2))])
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(501)) == [.refused(error)])
        // The next wait is twice as long.
        #expect(replica.step(.tick, now: .milliseconds(1_499)) == [])
        #expect(replica.step(.tick, now: .milliseconds(1_500)) == [.send(.hello(worker: "w1", lastRevision: 2))])
        // It keeps replicating meanwhile, without reporting progress.
        #expect(replica.step(.published(epoch: 1, records: [Self.record(3)]), now: .milliseconds(1_700)) == [.apply(Self.record(3))])
        #expect(replica.step(.tick, now: .milliseconds(3_499)) == [])
        #expect(replica.step(.tick, now: .milliseconds(3_500)) == [.send(.hello(worker: "w1", lastRevision: 3))])
        #expect(replica.step(Self.welcome(lastRevision: 3), now: .milliseconds(3_600)) == [.registerScopesAnew])
        #expect(replica.displaced == nil)
        // Heartbeats again, every second.
        #expect(replica.step(.tick, now: .milliseconds(4_499)) == [])
        #expect(replica.step(.tick, now: .milliseconds(4_500)) == [.send(.heartbeat(worker: "w1", revision: 3, stateDigest: replica.stateDigest))])
    }

    @Test func `a name refused for a minute costs the leader four hellos in the first 10 s, then at most two per 10 s, and a new refusal starts at 0.5 s again`() {
        var replica = Self.synced(at: 2)
        let error = WireError(.nameInUse, "another process is connected as worker w1 (heard 0.2 s ago); each worker needs its own --name")
        _ = replica.step(.leader(.error(error)), now: .milliseconds(30))
        var hellos: [Int] = []
        for millisecond in stride(from: 40, through: 60_000, by: 10) {
            let effects = replica.step(.tick, now: .milliseconds(millisecond))
            if effects.contains(where: { if case .send(.hello) = $0 { true } else { false } }) {
                hellos.append(millisecond)
                _ = replica.step(.leader(.error(error)), now: .milliseconds(millisecond))
            }
        }
        // 0.5, 1, 2, 4, then 5 s apart.
        #expect(hellos == [500, 1_500, 3_500, 7_500, 12_500, 17_500, 22_500, 27_500, 32_500, 37_500, 42_500, 47_500, 52_500, 57_500])
        // Four in its first 10 s, then at most two in any 10 s.
        #expect(hellos.count { $0 < 10_000 } == 4)
        #expect(stride(from: 4_000, through: 50_000, by: 100).allSatisfy { start in hellos.count { (start..<(start + 10_000)).contains($0) } <= 2 })
        // Welcomed, then refused again (replaced while frozen): the first wait is 0.5 s again.
        _ = replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(60_000))
        #expect(replica.step(.tick, now: .milliseconds(60_000)) == [.send(.heartbeat(worker: "w1", revision: 2, stateDigest: replica.stateDigest))])
        _ = replica.step(.leader(.error(error)), now: .milliseconds(60_010))
        #expect(replica.step(.tick, now: .milliseconds(60_499)) == [])
        #expect(replica.step(.tick, now: .milliseconds(60_500)) == [.send(.hello(worker: "w1", lastRevision: 2))])
    }

    @Test func `name-in-use before the first sync: hellos until welcomed, then a plain sync`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        let error = WireError(.nameInUse, "another process is connected as worker w1 (heard 0.0 s ago); each worker needs its own --name")
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(10)) == [.refused(error), .forgetInstances])
        #expect(replica.step(.tick, now: .milliseconds(499)) == [])
        #expect(replica.step(.tick, now: .milliseconds(500)) == [Self.hello])
        #expect(replica.step(Self.welcome(), now: .milliseconds(300)) == [.subscribe(Self.endpoint), Self.snapshotRequest])
        #expect(replica.step(Self.snapshot(revision: 0, []), now: .milliseconds(310)) == [.applySnapshot(revision: 0, entries: []), .firstSync])
    }

    @Test func `refused gone, then name-in-use: once it holds the name again it registers its scopes once`() {
        var replica = Self.synced(at: 2)
        #expect(replica.step(Self.refusal(.gone), now: .milliseconds(30)) == [.refused(WireError(.gone, "refused")), .forgetInstances, .send(.hello(worker: "w1", lastRevision: 2))])
        // Another process said hello in the name first.
        #expect(replica.step(Self.refusal(.nameInUse), now: .milliseconds(40)) == [.refused(WireError(.nameInUse, "refused")), .forgetInstances])
        #expect(replica.step(.tick, now: .milliseconds(530)) == [.send(.hello(worker: "w1", lastRevision: 2))])
        let effects = replica.step(Self.welcome(lastRevision: 2), now: .milliseconds(300))
        #expect(effects == [.registerScopesAnew])

    }

    @Test func `register-again after a failed commit registers the scopes anew`() {
        var replica = Self.synced(at: 2)
        let error = WireError(.registerAgain, "the commit failed: disk full; register the scopes again")
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(30)) == [.refused(error), .registerScopesAnew])
        // Not synced yet: nothing registered, nothing to do.
        var fresh = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = fresh.step(.start, now: .zero)
        #expect(fresh.step(.leader(.error(error)), now: .milliseconds(10)) == [.refused(error)])
    }

    @Test func `a catch-up refused unavailable is asked for again`() {
        var replica = Self.synced(at: 0)
        #expect(replica.step(Self.welcome(lastRevision: 3), now: .milliseconds(30)) == [.send(.catchUpRequest(from: 1))])
        let error = WireError(.unavailable, "cannot read the turn log: simulated")
        #expect(replica.step(.leader(.error(error)), now: .milliseconds(40)) == [.refused(error)])
        // The next heartbeats' welcomes still name revision 3; a record above the gap comes too.
        var effects = replica.step(.published(epoch: 1, records: [Self.record(4)]), now: .milliseconds(60))
        for second in 1...10 {
            effects += replica.step(.tick, now: .seconds(second))
            effects += replica.step(Self.welcome(lastRevision: 4), now: .seconds(second) + .milliseconds(10))
        }
        #expect(effects.contains(.send(.catchUpRequest(from: 1))))

        #expect(replica.appliedRevision == 0)
    }

    // MARK: Requests

    @Test func `a welcome's last sequence raises the next request's sequence, never lowers it`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        #expect(replica.nextSequence() == 1)
        _ = replica.step(Self.welcome(lastSequence: 41), now: .milliseconds(10))
        #expect(replica.nextSequence() == 42)
        _ = replica.step(Self.welcome(lastSequence: 10), now: .milliseconds(20))
        #expect(replica.nextSequence() == 43)
        // The last sequence the leader admits, then none: never an overflow.
        _ = replica.step(Self.welcome(lastSequence: (1 << 63) - 2), now: .milliseconds(30))
        #expect(replica.nextSequence() == LeaderCore.sequenceLimit - 1)
        #expect(replica.nextSequence() == nil)
        _ = replica.step(Self.welcome(lastSequence: .max), now: .milliseconds(40))
        #expect(replica.nextSequence() == nil)
    }

    @Test func `replies and registration replies are handed to the worker`() {
        var replica = Self.synced(at: 2)
        let reply = OpReply(request: RequestID(worker: "w1", sequence: 1), outcome: .applied(revision: 3))
        #expect(replica.step(.leader(.reply(reply)), now: .milliseconds(30)) == [.reply(reply)])
        let members = [ScopeMember(identity: [0x61], instance: 1 << 32 | 1)]
        #expect(
            replica.step(.leader(.scopeRegistered(worker: "w1", registration: 4, revision: 3, instances: members)), now: .milliseconds(31))
                == [.registered(registration: 4, revision: 3, members: members)])
        #expect(replica.step(.leader(.statusRequest), now: .milliseconds(32)) == [])
    }
}

/// The state digest each record carries (`protocol/turnlog.md`), checked by
/// the replica after every record it applies.
@Suite("Replica core: state digest")
struct ReplicaDigestTests {
    static let time = Date(timeIntervalSince1970: 1_700_000_000)

    /// Record `revision` writing `test.n = revision`, carrying the digest of
    /// the state after it (`test.n` is the whole state), or `digest` if given.
    static func record(_ revision: UInt64, digest: StateDigest? = nil) -> TurnRecord {
        let value = (try? CBOREncoder().encode(revision)) ?? []
        return TurnRecord(
            revision: revision, epoch: 1, time: time, name: "test.count", writes: [TurnWrite(name: "test.n", key: nil, value: value)],
            stateDigest: digest ?? StateDigest(entries: [(name: "test.n", key: nil, value: value)]))
    }

    /// A replica synced at revision 2 from a snapshot holding `test.n = 2`.
    static func synced(checksDigest: Bool = true) -> ReplicaCore {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: checksDigest))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(.leader(.welcome(epoch: 1, lastRevision: 2, turnsEndpoint: "tcp://127.0.0.1:5702")), now: .milliseconds(10))
        let value = (try? CBOREncoder().encode(UInt64(2))) ?? []
        let digest = StateDigest(entries: [(name: "test.n", key: nil, value: value)])
        let entries = [SnapshotEntry(name: "test.n", key: nil, value: value)]
        _ = replica.step(.leader(.snapshot(epoch: 1, revision: 2, entries: entries, stateDigest: digest)), now: .milliseconds(20))
        #expect(replica.stateDigest == digest && replica.digestMismatches == 0)
        return replica
    }

    @Test func `records whose digest agrees apply one after another, and heartbeats carry the digest`() {
        var replica = Self.synced()
        #expect(replica.step(.published(epoch: 1, records: [Self.record(3), Self.record(4)]), now: .milliseconds(30)) == [
            .apply(Self.record(3)), .apply(Self.record(4)),
        ])
        #expect(replica.digestMismatches == 0 && replica.appliedRevision == 4)
        #expect(replica.stateDigest == Self.record(4).stateDigest)
        #expect(replica.step(.tick, now: .seconds(2)) == [.send(.heartbeat(worker: "w1", revision: 4, stateDigest: Self.record(4).stateDigest))])
    }

    @Test func `a record whose digest differs is counted, named, and the replica re-syncs; the records after it wait`() {
        var replica = Self.synced()
        let wrong = StateDigest(value: 42)
        #expect(
            replica.step(.published(epoch: 1, records: [Self.record(3, digest: wrong), Self.record(4)]), now: .milliseconds(30)) == [
                .apply(Self.record(3, digest: wrong)), .send(.snapshotRequest(inParts: true)),
            ])
        #expect(replica.digestMismatches == 1 && replica.appliedRevision == 3)
        #expect(
            replica.lastDigestMismatch
                == "state digest mismatch at revision 3: the record says \(wrong), the replica has \(Self.record(3).stateDigest); re-syncing from a snapshot")
        // The snapshot puts it right; the record held above it applies.
        let value = (try? CBOREncoder().encode(UInt64(3))) ?? []
        let effects = replica.step(
            .leader(.snapshot(epoch: 1, revision: 3, entries: [SnapshotEntry(name: "test.n", key: nil, value: value)], stateDigest: Self.record(3).stateDigest)),
            now: .milliseconds(40))
        #expect(effects.contains(.apply(Self.record(4))) && effects.contains(.registerScopesAnew))
        #expect(replica.appliedRevision == 4 && replica.stateDigest == Self.record(4).stateDigest && replica.digestMismatches == 1)
    }

    @Test func `a spoiled replica is caught at the next record, even one that writes something else`() {
        var replica = Self.synced()
        replica.corruptState { _ in 0 }
        let other = TurnRecord(
            revision: 3, epoch: 1, time: Self.time, name: "test.other", writes: [TurnWrite(name: "test.m", key: nil, value: [0x01])],
            stateDigest: StateDigest(entries: [
                (name: "test.n", key: nil, value: (try? CBOREncoder().encode(UInt64(2))) ?? []), (name: "test.m", key: nil, value: [0x01]),
            ]))
        #expect(replica.step(.published(epoch: 1, records: [other]), now: .milliseconds(30)) == [.apply(other), .send(.snapshotRequest(inParts: true))])
        #expect(replica.digestMismatches == 1)
    }

    @Test func `with the check switched off (cogd sim --break digest-check) a wrong digest goes unnoticed`() {
        var replica = Self.synced(checksDigest: false)
        #expect(replica.step(.published(epoch: 1, records: [Self.record(3, digest: StateDigest(value: 42))]), now: .milliseconds(30)) == [
            .apply(Self.record(3, digest: StateDigest(value: 42)))
        ])
        #expect(replica.digestMismatches == 0)
    }

    @Test func `a snapshot whose entries do not add up to its digest is counted, named and taken (the leader would send the same)`() {
        var replica = ReplicaCore(settings: .init(name: "w1"))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(.leader(.welcome(epoch: 1, lastRevision: 2, turnsEndpoint: "tcp://127.0.0.1:5702")), now: .milliseconds(10))
        let claimed = StateDigest(value: 7)
        let effects = replica.step(.leader(.snapshot(epoch: 1, revision: 2, entries: [], stateDigest: claimed)), now: .milliseconds(20))
        #expect(effects == [.applySnapshot(revision: 2, entries: []), .firstSync])
        #expect(replica.digestMismatches == 1 && replica.stateDigest == claimed)
        #expect(replica.lastDigestMismatch?.hasPrefix("state digest mismatch in the snapshot at revision 2: the leader says \(claimed), its entries give \(StateDigest())") == true)
    }
}

@Suite("Replica core: snapshot parts from an untrusted leader")
struct ReplicaSnapshotBoundsTests {
    @Test func `a last part numbered 2^64-1 neither traps nor completes the snapshot`() {
        var replica = ReplicaCore(settings: .init(name: "w1", checksDigest: false))
        _ = replica.step(.start, now: .zero)
        _ = replica.step(.leader(.welcome(epoch: 1, lastRevision: 1, turnsEndpoint: "tcp://127.0.0.1:5702")), now: .milliseconds(10))
        let entry = SnapshotEntry(name: "test.a", key: nil, value: [0x01])
        #expect(replica.step(.leader(.snapshot(epoch: 1, revision: 1, entries: [entry], part: .max)), now: .milliseconds(20)) == [])
        #expect(replica.step(.leader(.snapshot(epoch: 1, revision: 1, entries: [], part: 0, more: true)), now: .milliseconds(21)) == [])
        #expect(!replica.isSynced && replica.appliedRevision == 0)
    }
}

/// Following the leader of an HA cluster (`ha.md` §10): a standby's
/// `not-leader`, a move to another node, and welcomes of a lower epoch.
@Suite("Replica core: following the leader")
struct ReplicaFollowTests {
    @Test func `a not-leader asks the driver to follow the node it names, and a move says hello as to a restarted leader`() {
        var replica = ReplicaCoreTests.synced(at: 2, epoch: 3)
        #expect(
            replica.step(.leader(.notLeader(leader: "tcp://10.0.0.2:5701", epoch: 4)), now: .seconds(1))
                == [.followLeader(endpoint: "tcp://10.0.0.2:5701", epoch: 4)])
        #expect(replica.epoch == 3 && replica.appliedRevision == 2, "nothing changes until another node welcomes it")
        // Moved: hello at the revision it holds; the scopes register anew once welcomed.
        #expect(replica.step(.reconnected, now: .seconds(2)) == [.forgetInstances, .send(.hello(worker: "w1", lastRevision: 2))])
        #expect(!replica.hasJoined)
        // The new leader's epoch: subscribe and sync from its snapshot.
        #expect(
            replica.step(ReplicaCoreTests.welcome(epoch: 4, lastRevision: 2), now: .seconds(3))
                == [.subscribe(ReplicaCoreTests.endpoint), ReplicaCoreTests.snapshotRequest])
        #expect(replica.epoch == 4 && replica.hasJoined && replica.rejoins == 1)
    }

    @Test func `a welcome of a lower epoch is ignored while the followed epoch's leader answers, and followed once it is gone`() {
        var settings = ReplicaCore.Settings(name: "w1", checksDigest: false)
        settings.lease = .seconds(4)
        var replica = ReplicaCoreTests.synced(at: 2, epoch: 5, settings: settings)
        // A deposed leader (epoch 4) answers within the lease of epoch 5's last welcome: nothing changes.
        #expect(replica.step(ReplicaCoreTests.welcome(epoch: 4, lastRevision: 9), now: .seconds(1)) == [])
        #expect(replica.epoch == 5 && replica.lowerEpochWelcomesIgnored == 1)
        #expect(replica.step(.published(epoch: 4, records: [ReplicaCoreTests.record(3, epoch: 4)]), now: .seconds(1)) == [])
        #expect(replica.appliedRevision == 2)
        // A higher epoch is followed at once.
        #expect(
            replica.step(ReplicaCoreTests.welcome(epoch: 6, lastRevision: 2), now: .seconds(2))
                == [.subscribe(ReplicaCoreTests.endpoint), ReplicaCoreTests.snapshotRequest])
        // Past the lease with no welcome of epoch 6, a lower epoch is followed again (a leader restored from a backup).
        let effects = replica.step(ReplicaCoreTests.welcome(epoch: 5, lastRevision: 2), now: .seconds(7))
        #expect(effects.contains(.subscribe(ReplicaCoreTests.endpoint)) && replica.epoch == 5, "\(effects)")
        #expect(replica.lowerEpochWelcomesIgnored == 1)
    }
}
