import Cog
import CogCodec
import LedgerRig
import Testing

/// Arguments and values of two builds of one app, for the type checks of
/// fingerprints (`protocol/cogwire.md` §7, "Rig versions").
private struct Transfer: Codable, Equatable {
    var from: String
    var to: String
    var amount: Int
}

private struct TransferAsText: Codable {
    var from: String
    var to: String
    var amount: String
}

private struct TransferWithMemo: Codable, Equatable {
    var from: String
    var to: String
    var amount: Int
    var memo: String?
}

private struct TransferWithCurrency: Codable {
    var from: String
    var to: String
    var amount: Int
    var currency: String
}

private enum Kind: String, Codable, CaseIterable { case open, closed }
private enum KindLater: String, Codable, CaseIterable { case open, closed, frozen }

@Suite("rig fingerprints cover types")
struct RigShapeTests {
    static func rig(op: OpArgumentShape, source: OpArgumentShape = .integer, key: OpArgumentShape? = .string) -> CogRig.Fingerprint {
        CogRig.Fingerprint(
            name: "ledger", schemaVersion: 1, durableSources: ["ledger.balance"], ops: ["ledger.transfer"],
            shapes: .init(ops: ["ledger.transfer": op], durableSources: ["ledger.balance": .init(value: source, key: key)]))
    }

    static let transfer = OpArgumentShape.of(Transfer.self)

    @Test func `the same shapes are compatible, and a rig's fingerprint carries what cogd ops prints`() {
        #expect(Self.rig(op: Self.transfer).incompatibility(with: Self.rig(op: Self.transfer)) == nil)
        let fingerprint = LedgerRig.rig.fingerprint
        let shapes = fingerprint.shapes
        let transfer = LedgerRig.rig.ops.first { $0.name == "ledger.transfer" }
        #expect(shapes?.ops["ledger.transfer"] == transfer?.argumentShape && transfer?.argumentShape.isComplete == true)
        #expect(shapes?.durableSources["ledger.balance"] == .init(value: .integer, key: .string), "\(String(describing: shapes))")
        #expect(fingerprint.incompatibility(with: fingerprint) == nil)
    }

    @Test func `an op argument's field retyped is refused, naming the op and both shapes`() {
        let worker = Self.rig(op: .of(TransferAsText.self))
        #expect(
            worker.incompatibility(with: Self.rig(op: Self.transfer))
                == "rig ledger differs from the leader's: op `ledger.transfer` takes {\"from\": string, \"to\": string, \"amount\": integer} "
                + "at the leader, {\"from\": string, \"to\": string, \"amount\": string} in this worker's rig "
                + "(a worker may lack what the leader adds, nothing else; run the leader's version of the rig)")
    }

    @Test func `an optional field added on either side is accepted, a required one added or removed is refused`() {
        let memo = OpArgumentShape.of(TransferWithMemo.self)
        // The leader's op reads a memo the older worker never sends (nil); a newer worker's memo an older leader ignores.
        #expect(Self.rig(op: Self.transfer).incompatibility(with: Self.rig(op: memo)) == nil)
        #expect(Self.rig(op: memo).incompatibility(with: Self.rig(op: Self.transfer)) == nil)
        // A required field the worker does not send; a required field the leader would drop.
        let currency = OpArgumentShape.of(TransferWithCurrency.self)
        #expect(Self.rig(op: Self.transfer).incompatibility(with: Self.rig(op: currency))?.contains("op `ledger.transfer` takes") == true)
        #expect(Self.rig(op: currency).incompatibility(with: Self.rig(op: Self.transfer)) != nil)
        // A field the worker may leave out that the leader requires.
        #expect(Self.rig(op: memo).incompatibility(with: Self.rig(op: .of(TransferMemoRequired.self))) != nil)
        #expect(Self.rig(op: .of(TransferMemoRequired.self)).incompatibility(with: Self.rig(op: memo)) == nil)
    }

    @Test func `a stored value is compared the other way: the leader writes, the worker reads`() {
        let leader = Self.rig(op: Self.transfer, source: .of(TransferWithMemo.self))
        // The worker's older type lacks the optional memo: it ignores it.
        #expect(Self.rig(op: Self.transfer, source: Self.transfer).incompatibility(with: leader) == nil)
        // The worker's type requires a field the leader never writes.
        let refusal = Self.rig(op: Self.transfer, source: .of(TransferWithCurrency.self)).incompatibility(with: leader)
        #expect(refusal?.contains("durable source `ledger.balance` holds {\"from\": string, \"to\": string, \"amount\": integer, \"memo\"?: string} at the leader") == true, "\(refusal ?? "")")
        // Enum texts: a reader knows every text the writer writes, not fewer.
        #expect(Self.rig(op: .of(Kind.self)).incompatibility(with: Self.rig(op: .of(KindLater.self))) == nil)
        #expect(Self.rig(op: .of(KindLater.self)).incompatibility(with: Self.rig(op: .of(Kind.self))) != nil)
        #expect(Self.rig(op: Self.transfer, source: .of(Kind.self)).incompatibility(with: Self.rig(op: Self.transfer, source: .of(KindLater.self))) != nil)
        // A box's keys must be the same on both sides.
        let keyed = Self.rig(op: Self.transfer, key: .integer).incompatibility(with: Self.rig(op: Self.transfer))
        #expect(keyed?.contains("durable source `ledger.balance` is keyed by string at the leader, integer in this worker's rig") == true, "\(keyed ?? "")")
    }

    @Test func `what the rule accepts, the codec reads`() throws {
        let encoder = CBOREncoder()
        let decoder = CBORDecoder()
        let plain = Transfer(from: "a", to: "b", amount: 4)
        // An optional field the writer lacks reads as nil; one the reader lacks is ignored.
        #expect(try decoder.decode(TransferWithMemo.self, from: encoder.encode(plain)) == TransferWithMemo(from: "a", to: "b", amount: 4))
        #expect(try decoder.decode(Transfer.self, from: encoder.encode(TransferWithMemo(from: "a", to: "b", amount: 4, memo: "x"))) == plain)
        // What it refuses does not decode.
        #expect(throws: (any Error).self) { try decoder.decode(TransferWithCurrency.self, from: encoder.encode(plain)) }
        #expect(throws: (any Error).self) { try decoder.decode(TransferAsText.self, from: encoder.encode(plain)) }
    }

    @Test func `an older worker without shapes is compared by names only, as before`() {
        let older = CogRig.Fingerprint(name: "ledger", schemaVersion: 1, durableSources: ["ledger.balance"], ops: ["ledger.transfer"])
        #expect(older.incompatibility(with: Self.rig(op: Self.transfer)) == nil)
        #expect(Self.rig(op: Self.transfer).incompatibility(with: older) == nil)
    }

    @Test func `shapes travel in the fingerprint, and a peer's shape past the limits is refused, escaped`() throws {
        let fingerprint = Self.rig(op: .of(TransferWithMemo.self), source: .of(KindLater.self))
        let bytes = try CBOREncoder().encode(fingerprint)
        #expect(try CBORDecoder().decode(CogRig.Fingerprint.self, from: bytes) == fingerprint)
        // A leader built before shapes reads the rest and ignores them.
        struct EarlierFingerprint: Decodable, Equatable {
            var name: String
            var schemaVersion: Int
            var durableSources: [String]
            var ops: [String]
        }
        #expect(
            try CBORDecoder().decode(EarlierFingerprint.self, from: bytes)
                == EarlierFingerprint(name: "ledger", schemaVersion: 1, durableSources: ["ledger.balance"], ops: ["ledger.transfer"]))
        // A form this build does not know reads as unknown.
        let newer = try CBOREncoder().encode(["tuple": ["string"]])
        #expect(try CBORDecoder().decode(OpArgumentShape.self, from: newer) == .unknown)

        var deep = OpArgumentShape.integer
        for _ in 0..<40 { deep = .array(deep) }
        let tooDeep = Self.rig(op: deep).incompatibility(with: Self.rig(op: Self.transfer))
        #expect(tooDeep?.contains("op `ledger.transfer`: this worker's shape is past the limits (32 levels deep, 4096 parts)") == true, "\(tooDeep ?? "")")
        let wide = OpArgumentShape.object((0..<5_000).map { .init(name: "f\($0)", shape: .integer, isOptional: true) })
        #expect(Self.rig(op: wide).incompatibility(with: Self.rig(op: Self.transfer))?.contains("past the limits") == true)

        let hostile = OpArgumentShape.object([.init(name: "a\u{1b}[2Jb", shape: .opaque("X\u{7}"), isOptional: false)])
        let message = try #require(Self.rig(op: hostile).incompatibility(with: Self.rig(op: Self.transfer)))
        #expect(!message.unicodeScalars.contains { TerminalText.isUnsafe($0) }, "\(message)")
        #expect(message.contains(#"{"a\u001b[2Jb": <X\u{7}: not expressible in JSON>}"#), "\(message)")
    }
}

private struct TransferMemoRequired: Codable {
    var from: String
    var to: String
    var amount: Int
    var memo: String
}
