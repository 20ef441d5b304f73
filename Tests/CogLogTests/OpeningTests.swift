import CogCodec
import CogLog
import Foundation
import Testing

/// An opening as the leader keeps it for a registration reply's instance.
private func rootOpening(_ instance: UInt64, _ scope: String = "Journal", worker: String = "worker-1") -> ScopeEvent {
    ScopeEvent(kind: .open, instance: instance, scope: scope, identity: nil, worker: worker, registration: 3)
}

private func tick(_ n: Int) throws -> TurnDraft {
    TurnDraft(name: "tick()", writes: [TurnWrite(name: "clock.ticks", key: nil, value: try CBOREncoder().encode(n))])
}

@Suite("Openings of scope instances no record holds")
struct OpeningTests {
    @Test func `openings committed with a batch read back by instance, from a reader opened before they existed too`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try writer.append([try tick(1)])
        // A reader of this folder before any opening was kept.
        let reader = try TurnStore(directory: folder.path, mode: .reader)
        let root: UInt64 = 1 << 32 | 3
        let member = ScopeEvent(
            kind: .open, instance: 1 << 32 | 4, scope: "TrailScreens.trailScreen", identity: try CBOREncoder().encode(1),
            worker: "worker-2", registration: 1)
        try writer.append([try tick(2)], replies: [], openings: [rootOpening(root), member])
        let found = try reader.openings(of: [root, 1 << 32 | 4, 1 << 32 | 9])
        #expect(found == [root: rootOpening(root), 1 << 32 | 4: member], "an instance never kept is left out")
        #expect(found.mapValues(TurnRecord.scopeLabel) == [root: "Journal (root)", 1 << 32 | 4: "TrailScreens.trailScreen[1]"])
        #expect(try writer.records(from: 1).map(\.revision) == [1, 2], "openings add no record")
    }

    @Test func `a commit of openings alone writes no revision`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let revisions = try writer.append([], replies: [], openings: [rootOpening(1 << 32 | 1)])
        #expect(revisions.isEmpty && writer.lastRevision == 0)
        #expect(try writer.openings(of: [1 << 32 | 1]).count == 1)
    }

    @Test func `retention removes the openings of epochs no kept record is from`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        // Epoch 1: ten turns and a root's opening; epoch 2 (a reopened writer): ten more and another.
        do {
            let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
            try writer.append([try tick(0)], replies: [], openings: [rootOpening(1 << 32 | 1)])
            for n in 1..<10 { try writer.append([try tick(n)]) }
            writer.close()
        }
        let writer = try TurnStore(directory: folder.path, mode: .writer)
        #expect(writer.epoch == 2)
        try writer.append([try tick(10)], replies: [], openings: [rootOpening(2 << 32 | 1)])
        for n in 11..<20 { try writer.append([try tick(n)]) }
        // Keeping 15 keeps five records of epoch 1: its opening stays.
        var report = try writer.prune(.turns(15))
        #expect(report.records == 5 && report.openings == 0)
        #expect(try writer.openings(of: [1 << 32 | 1, 2 << 32 | 1]).count == 2)
        // Keeping 5 keeps only epoch 2's: epoch 1's opening goes, epoch 2's stays.
        report = try writer.prune(.turns(5))
        #expect(report.records == 10 && report.openings == 1)
        #expect(try writer.openings(of: [1 << 32 | 1, 2 << 32 | 1]).keys.sorted() == [2 << 32 | 1])
    }
}
