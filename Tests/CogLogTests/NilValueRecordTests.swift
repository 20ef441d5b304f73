import CogCodec
import Foundation
import Testing

@testable import CogLog

/// A `nil` value (CBOR `null`) is a value, not a release, on every path that
/// reads a record — also the general one records with scope events take
/// (found by `cogd sim`: a trail screen closed in a scope, setting its loaded
/// trail to nil, made a record no worker could read).
@Suite("Records holding a nil value")
struct NilValueRecordTests {
    let record = TurnRecord(
        revision: 9, epoch: 2, time: Date(timeIntervalSince1970: 1_000), name: "trails.closeScreen",
        origin: TurnOrigin(worker: "w1", request: RequestID(worker: "w1", sequence: 4)),
        writes: [
            TurnWrite(name: "trails.openScreens", key: nil, value: [0x80]),
            TurnWrite(name: "trails.loaded", key: [0x03], value: [0xf6]),
            TurnWrite(name: "trails.screenTrail", key: [0x03], value: nil),
        ],
        scopeEvents: [ScopeEvent(kind: .retire, instance: 8_589_934_593, scope: "Sim.screens", identity: [0x03], worker: "w1", registration: 2)])

    @Test func `a record with scope events keeps a nil value apart from a release`() throws {
        let decoded = try TurnRecord.decode(record.encoded())
        #expect(decoded.writes.map(\.value) == [[0x80], [0xf6], nil])
        #expect(decoded.writes.map(\.isRelease) == [false, false, true])
        #expect(decoded == record)
    }

    @Test func `a record without scope events does too (the fast path)`() throws {
        var plain = record
        plain.scopeEvents = []
        let decoded = try TurnRecord.decode(plain.encoded())
        #expect(decoded.writes.map(\.value) == [[0x80], [0xf6], nil])
    }
}
