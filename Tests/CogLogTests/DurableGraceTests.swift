import Cog
import CogCodec
import CogLog
import CogTesting
import Foundation
import Testing

@MainActor private let noteStarts = Counter()

private let _noteCogs = CogBox<String, Int>.Manual(
    { _ in MainActor.assumeIsolated { noteStarts.bump() }; return "" },
    lifetime: .whileObserved(resetToInitial: true), name: "durableGrace.note")
@MainActor private let lengthRuns = Counter()
private let noteLengthCogs = CogBox<Int, Int>(name: "durableGrace.length") { c, id in
    lengthRuns.bump()
    return c[_noteCogs[id]].count
}

extension CogOps {
    fileprivate func writeNote(_ id: Int, _ text: String) { turn(_noteCogs[id], to: text) }
    fileprivate func dropNote(_ id: Int) { discard(_noteCogs[id]) }
}

/// Counts how often a closure ran.
@MainActor
final class Counter {
    private(set) var count = 0
    func bump() { count += 1 }
}

/// Acknowledgements for the next `count` releases by grace.
@MainActor
private func releases(_ cogs: Cogs, count: Int) -> [MainActorCleanupAcknowledgement] {
    (0..<count).map { _ in
        let acknowledgement = MainActorCleanupAcknowledgement()
        cogs.acknowledgeNextDerivedRelease(with: acknowledgement)
        return acknowledgement
    }
}

@MainActor
@Suite("Grace in a durable runtime and on a replica", .serialized, .timeLimit(.minutes(1)))
struct DurableGraceTests {
    @Test func `L2 grace releases a durable source's node, never its stored value; the next read loads it`() async throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try DurableTurnStore(directory: folder.path)
        let clock = TestClock()
        let cogs = Cogs.forTesting(store: store, clock: clock, whileObservedGrace: .seconds(1))
        let startsBefore = noteStarts.count
        cogs.writeNote(1, "half a thought")
        #expect(noteStarts.count == startsBefore + 1)
        #expect(cogs.peek(noteLengthCogs[1]) == 14)
        let released = releases(cogs, count: 2)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released[0].wait()
        try await released[1].wait()
        let records = try store.store.records(from: 1)
        #expect(records.map(\.name) == ["writeNote(_:_:)"], "grace logs no release")
        let storedKey = try CBOREncoder().encode(1)
        #expect(try store.store.value(name: "durableGrace.note", key: storedKey) != nil)
        #expect(cogs.peek(_noteCogs[1]) == "half a thought")
        #expect(noteStarts.count == startsBefore + 1, "the node was loaded from the store, not started afresh")
        let runsBefore = lengthRuns.count
        #expect(cogs.peek(noteLengthCogs[1]) == 14)
        #expect(lengthRuns.count == runsBefore + 1, "the automatic cog was released too and recomputes")
    }

    @Test func `L2 on a replica grace releases the node and the next read gets the replicated value back`() async throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try DurableTurnStore(directory: folder.path)
        let leader = Cogs.forTesting(store: store)
        let clock = TestClock()
        let replica = Cogs.replica(clock: clock, whileObservedGrace: .seconds(1))
        let codec = TestCodec()
        var applied: UInt64 = 0
        func catchUp() throws {
            for record in try store.store.records(from: applied + 1) {
                try replica.applyReplicatedTurn(
                    named: record.name,
                    writes: record.writes.map { CogDurableWrite(name: $0.name, key: $0.key, value: $0.value) },
                    codec: codec)
                applied += 1
            }
        }
        leader.writeNote(2, "replicated")
        try catchUp()
        let startsBefore = noteStarts.count
        let runsBefore = lengthRuns.count
        #expect(replica.peek(noteLengthCogs[2]) == 10)
        let released = releases(replica, count: 2)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await released[0].wait()
        try await released[1].wait()
        #expect(replica.peek(_noteCogs[2]) == "replicated")
        #expect(replica.peek(noteLengthCogs[2]) == 10)
        #expect(lengthRuns.count == runsBefore + 2, "the automatic cog recomputed after its release")
        #expect(noteStarts.count == startsBefore, "the replicated value came back, not the starting closure")

        let again = releases(replica, count: 2)
        try await clock.waitForScheduledSleep(within: .seconds(30))
        clock.advance(by: .seconds(1))
        try await again[0].wait()
        try await again[1].wait()
        leader.writeNote(2, "rewritten")
        try catchUp()
        #expect(replica.peek(_noteCogs[2]) == "rewritten", "a write to a released node lands")
        leader.dropNote(2)
        try catchUp()
        #expect(replica.peek(_noteCogs[2]) == "", "the leader's release reaches the replica")
    }
}
