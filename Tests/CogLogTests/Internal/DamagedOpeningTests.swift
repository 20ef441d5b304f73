import CogCodec
import Foundation
import Testing

@testable import CogLog

private func opening(_ instance: UInt64) -> ScopeEvent {
    ScopeEvent(kind: .open, instance: instance, scope: "Journal", identity: nil, worker: "worker-1", registration: 3)
}

@Suite("Kept openings read from a damaged table (internal)")
struct DamagedOpeningTests {
    @Test func `a damaged opening costs only its name`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        // An entry that is not CBOR, and one that claims another instance than its key: neither names anything.
        var claimsAnother = opening(1 << 32 | 7)
        claimsAnother.instance = 1 << 32 | 8
        let tick = TurnDraft(name: "tick()", writes: [TurnWrite(name: "clock.ticks", key: nil, value: [0x01])])
        try writer.append([tick], replies: [], openings: [opening(1 << 32 | 1), opening(1 << 32 | 2)])
        let instances = try #require(writer.instancesDB)
        try writer.environment.write { txn in
            try txn.put(instances, TurnStore.bytes(1 << 32 | 2), Array("not cbor".utf8))
            try txn.put(instances, TurnStore.bytes(1 << 32 | 7), try CBOREncoder().encode(claimsAnother))
        }
        #expect(try writer.openings(of: [1 << 32 | 1, 1 << 32 | 2, 1 << 32 | 7]).keys.sorted() == [1 << 32 | 1])
    }
}
