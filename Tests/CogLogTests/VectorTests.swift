import CogCodec
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

/// The state after revision 41 of the vectors' story (`state-digest`):
/// revisions 42 to 44 (`turn-record-request`, `-nil-value`, `-retirement`)
/// follow from it, and revision 1 (`turn-record-system`) starts from the
/// empty state.
private func stateBefore42() throws -> [(name: String, key: [UInt8]?, value: [UInt8])] {
    let encoder = CBOREncoder()
    return [
        ("ledger.accounts", try encoder.encode("alice"), try encoder.encode(["balance": 10])),
        ("ledger.openCount", nil, try encoder.encode(1)),
        ("trails.filter", try encoder.encode(7), try encoder.encode("ridge")),
        ("trails.loaded", nil, try encoder.encode(5)),
    ]
}

/// The state-digest vector: each entry with its entry hash, and the state's digest.
private func stateDigestVector() throws -> [UInt8] {
    let state = try stateBefore42()
    let entries = state.map { entry in
        var fields: [(key: CBORValue, value: CBORValue)] = [
            (.text("name"), .text(entry.name)), (.text("value"), .bytes(entry.value)),
            (.text("hash"), .bytes(StateDigest(value: StateDigest.entryHash(name: entry.name, key: entry.key, value: entry.value)).bytes)),
        ]
        if let key = entry.key { fields.append((.text("key"), .bytes(key))) }
        return CBORValue.map(fields)
    }
    return CBORWriter.encode(.map([(.text("entries"), .array(entries)), (.text("state"), .bytes(StateDigest(entries: state).bytes))]))
}

private func vectors() throws -> [(name: String, bytes: [UInt8])] {
    let encoder = CBOREncoder()
    func item<T: Encodable>(_ name: String, _ value: T) throws -> (String, [UInt8]) { (name, try encoder.encode(value)) }
    let state = try stateBefore42()
    var digest = StateDigest(entries: state)
    digest.apply(name: "trails.filter", key: state[2].key, old: state[2].value, new: nil)
    let after42 = digest
    digest.apply(name: "trails.loaded", key: nil, old: state[3].value, new: [0xf6])
    let after43 = digest
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
            ],
            stateDigest: StateDigest(entries: state.prefix(2))).encoded()),
        ("turn-record-request", TurnRecord(
            revision: 42, epoch: 3, time: vectorTime, name: "Trails.trailScreen.acceptTrail(_:receipt:)",
            origin: TurnOrigin(
                worker: "w1", instance: 7, request: RequestID(worker: "w1", sequence: 19),
                digest: RequestDigest.of(op: "trails.accept", argument: try encoder.encode(["receipt": 7]))),
            writes: [TurnWrite(name: "trails.filter", key: try encoder.encode(7), value: nil)], stateDigest: after42).encoded()),
        ("turn-record-retirement", TurnRecord(
            revision: 44, epoch: 3, time: vectorTime, name: "cogd.workerGone",
            writes: [],
            scopeEvents: [
                ScopeEvent(
                    kind: .retire, instance: 3 << 32 | 5, scope: "LedgerGreeter.greeter", identity: try encoder.encode("alice"),
                    worker: "w1", registration: 1)
            ],
            stateDigest: after43).encoded()),
        ("turn-record-nil-value", TurnRecord(
            revision: 43, epoch: 3, time: vectorTime, name: "Trails.closeScreen()",
            writes: [TurnWrite(name: "trails.loaded", key: nil, value: try encoder.encode(Int?.none))], stateDigest: after43).encoded()),
        ("state-digest", try stateDigestVector()),
        // An `instances` value (turnlog.md §2c): a mechanism's root opened by a registration reply.
        ("instance-opening", try encoder.encode(
            ScopeEvent(kind: .open, instance: 3 << 32 | 3, scope: "Journal", identity: nil, worker: "w1", registration: 2))),
        // A `rejections` value (turnlog.md §2d): a retried overdraft, refused.
        ("rejection-refused", try RejectionRecord(
            revision: 12, order: 3, time: Date(timeIntervalSince1970: 1_800_000_000.5), request: RequestID(worker: "teller", sequence: 1),
            op: "ledger.transfer", digest: [0xcd, 0x94, 0xc1, 0x43, 0x9e, 0x44, 0xb4, 0x76], kind: .refused, code: "insufficient-funds",
            reason: "alice has 30, the transfer needs 50", earlier: true).encoded()),
        // A shipped commit (ha.md §8): revision 43 of the story, its request's answer, the index made whole,
        // retention by count, a registration's opening and a refusal.
        ("shipped-commit", ShippedCommit(
            epoch: 3, number: 17, logID: Array(0x10..<0x20), firstRevision: 43, time: vectorTime,
            records: EncodedTurnBatch([
                TurnRecord(
                    revision: 43, epoch: 3, time: vectorTime, name: "Trails.closeScreen()",
                    writes: [TurnWrite(name: "trails.loaded", key: nil, value: try encoder.encode(Int?.none))], stateDigest: after43)
            ]),
            replies: [.init(request: RequestID(worker: "w1", sequence: 20), reply: [0xcd, 0x94, 0xc1, 0x43, 0x9e, 0x44, 0xb4, 0x76, 0xa0])],
            index: .indexed, retention: .turns(100_000),
            openings: [ScopeEvent(kind: .open, instance: 3 << 32 | 3, scope: "Journal", identity: nil, worker: "w1", registration: 2)],
            rejections: [
                RejectionRecord(
                    time: vectorTime, request: RequestID(worker: "teller", sequence: 1), op: "ledger.transfer",
                    digest: [0xcd, 0x94, 0xc1, 0x43, 0x9e, 0x44, 0xb4, 0x76], kind: .refused, code: "insufficient-funds",
                    reason: "alice has 30, the transfer needs 50")
            ]).encoded()),
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

    @Test func `the digest of a known small state equals the vector`() throws {
        // Computed independently (Python's hashlib, `check.py`): the entry
        // hashes, the state after revision 41, and after each record.
        let state = try stateBefore42()
        #expect(state.map { StateDigest(value: StateDigest.entryHash(name: $0.name, key: $0.key, value: $0.value)).description } == [
            "25d42a232f99b293bc173c589b0a88d9", "c8bec684313e51c33245c9eac01bb187",
            "fff07942fac1c44985af46103b6158c3", "c2281f03fa01cc14f4d3f23f5c21c7cc",
        ])
        #expect(StateDigest(entries: state).description == "b0ab88ee559b94b568e03e92f2a95aef")
        #expect(StateDigest().bytes == [UInt8](repeating: 0, count: 16), "the empty state")
        func record(_ name: String) throws -> TurnRecord {
            try TurnRecord.decode(Array(try Data(contentsOf: folder.appendingPathComponent("\(name).cbor"))))
        }
        #expect(try record("turn-record-system").stateDigest.description == "ee92f0a760d80456ee5d06435b263a60")
        #expect(try record("turn-record-request").stateDigest.description == "b0bb0fab5ad9d06be330f882b748022c")
        #expect(try record("turn-record-nil-value").stateDigest.description == "83f80d95384562e68236d259320843d7")
        #expect(try record("turn-record-retirement").stateDigest.description == "83f80d95384562e68236d259320843d7", "no writes: unchanged")
        let vector = try CBORValue.parse(Array(try Data(contentsOf: folder.appendingPathComponent("state-digest.cbor"))))
        #expect(vector["state"] == .bytes(StateDigest(entries: state).bytes))
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
