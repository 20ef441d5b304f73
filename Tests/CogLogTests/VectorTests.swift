import CogLog
import Foundation
import Testing

/// The byte-exact vectors under `protocol/vectors/turnlog/`: each file is the
/// deterministic CBOR of one value below. Set COGD_WRITE_VECTORS=1 to
/// regenerate them (then review the diff: they are normative).
private enum Weather: Codable { case clear, rain(millimetres: Int) }

private struct Reading: Codable {
    var celsius: Int
    var note: String?
}

private let vectorTime = Date(timeIntervalSince1970: 1_800_000_000.5)

private func vectors() throws -> [(name: String, bytes: [UInt8])] {
    let encoder = CBOREncoder()
    func item<T: Encodable>(_ name: String, _ value: T) throws -> (String, [UInt8]) { (name, try encoder.encode(value)) }
    return [
        try item("uint-0", 0),
        try item("uint-24", 24),
        try item("uint64-max", UInt64.max),
        try item("int-minus-500", -500),
        try item("int64-min", Int64.min),
        try item("float-half-1.5", 1.5),
        try item("float-single-100000", 100_000.0),
        try item("float-double-0.1", 0.1),
        try item("true", true),
        try item("null-optional", Int?.none),
        try item("text-unicode", "Grüße, 世界 🥾"),
        try item("bytes-data", Data([0, 1, 2, 255])),
        try item("array-mixed-optionals", [1, nil, 3] as [Int?]),
        try item("map-sorted-keys", ["b": 2, "a": 1, "aa": 3]),
        try item("struct-absent-optional", Reading(celsius: -4, note: nil)),
        try item("struct-present-optional", Reading(celsius: 21, note: "sunny")),
        try item("enum-no-payload", Weather.clear),
        try item("enum-payload", Weather.rain(millimetres: 4)),
        try item("date-tag-1", vectorTime),
        try item("uuid-tag-37", UUID(uuidString: "2F1C7D4A-9B3E-4C61-8A0F-5D2E6B7C8D9E")!),
        ("turn-record-system", TurnRecord(
            revision: 1, epoch: 1, time: vectorTime, name: "open(_:with:)",
            writes: [
                TurnWrite(name: "ledger.accounts", key: try encoder.encode("alice"), value: try encoder.encode(["balance": 10])),
                TurnWrite(name: "ledger.openCount", key: nil, value: try encoder.encode(1)),
            ]).encoded()),
        ("turn-record-request", TurnRecord(
            revision: 42, epoch: 3, time: vectorTime, name: "Trails.trailScreen.acceptTrail(_:receipt:)",
            origin: TurnOrigin(
                worker: "w1", instance: 7, request: RequestID(worker: "w1", sequence: 19),
                digest: RequestDigest.of(op: "trails.accept", argument: try encoder.encode(["receipt": 7]))),
            writes: [TurnWrite(name: "trails.filter", key: try encoder.encode(7), value: nil)]).encoded()),
        ("turn-record-retirement", TurnRecord(
            revision: 44, epoch: 3, time: vectorTime, name: "cogd.workerGone",
            writes: [],
            scopeEvents: [
                ScopeEvent(
                    kind: .retire, instance: 3 << 32 | 5, scope: "LedgerGreeter.greeter", identity: try encoder.encode("alice"),
                    worker: "w1", registration: 1)
            ]).encoded()),
        ("turn-record-nil-value", TurnRecord(
            revision: 43, epoch: 3, time: vectorTime, name: "Trails.closeScreen()",
            writes: [TurnWrite(name: "trails.loaded", key: nil, value: try encoder.encode(Int?.none))]).encoded()),
    ]
}

@Suite("Protocol vectors")
struct VectorTests {
    private var folder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("protocol/vectors/turnlog")
    }

    @Test func `the codec produces every vector byte for byte`() throws {
        let all = try vectors()
        if ProcessInfo.processInfo.environment["COGD_WRITE_VECTORS"] == "1" {
            for vector in all {
                try Data(vector.bytes).write(to: folder.appendingPathComponent("\(vector.name).cbor"))
            }
        }
        for vector in all {
            let stored = try Data(contentsOf: folder.appendingPathComponent("\(vector.name).cbor"))
            #expect(Array(stored) == vector.bytes, "vector \(vector.name)")
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".cbor") }
        #expect(Set(files) == Set(all.map { "\($0.name).cbor" }))
    }

    @Test func `the turn-record vectors decode back to their records`() throws {
        let system = try TurnRecord.decode(Array(try Data(contentsOf: folder.appendingPathComponent("turn-record-system.cbor"))))
        #expect(system.revision == 1)
        #expect(system.writes.map(\.name) == ["ledger.accounts", "ledger.openCount"])
        let request = try TurnRecord.decode(Array(try Data(contentsOf: folder.appendingPathComponent("turn-record-request.cbor"))))
        #expect(request.origin.request == RequestID(worker: "w1", sequence: 19))
        #expect(request.writes.first?.isRelease == true)
        let nilValue = try TurnRecord.decode(Array(try Data(contentsOf: folder.appendingPathComponent("turn-record-nil-value.cbor"))))
        #expect(nilValue.writes == [TurnWrite(name: "trails.loaded", key: nil, value: [0xf6])])
        #expect(nilValue.writes.first?.isRelease == false)
    }

    @Test func `a turn-record vector with any one bit flipped is refused`() throws {
        for name in ["turn-record-system", "turn-record-request", "turn-record-nil-value"] {
            let bytes = Array(try Data(contentsOf: folder.appendingPathComponent("\(name).cbor")))
            var accepted = 0
            for bit in 0..<(bytes.count * 8) {
                var damaged = bytes
                damaged[bit / 8] ^= 1 << UInt8(bit % 8)
                if (try? TurnRecord.decode(damaged)) != nil { accepted += 1 }
            }
            #expect(accepted == 0, "\(name): \(accepted) damaged copies decoded")
        }
    }
}
