import Cog
import Foundation
import Testing

private struct Payment: Codable, Sendable {
    var from: String
    var to: String
    var amount: Int
    var note: String?
    var tags: [String]
    var rate: Double
    var urgent: Bool
}

private enum Kind: String, Codable, CaseIterable {
    case open, closed
}

private struct Nested: Codable {
    var kind: Kind
    var limits: [String: Int]
    var payments: [Payment]
    var maybe: Int??
}

/// Decodes itself through a single value: a wrapper with its own `init(from:)`.
private struct AccountID: Codable {
    let raw: Int
    init(from decoder: any Decoder) throws { raw = try decoder.singleValueContainer().decode(Int.self) }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(raw)
    }
}

private struct Stamped: Codable {
    var at: Date
    var id: UUID
}

private indirect enum Tree: Codable {
    case leaf(Int)
    case node([Tree])
}

private struct Chain: Codable {
    var next: [Chain]
}

private let shapeTestsOp = RemoteOp<Payment>(
    name: "shapeTests.pay", summary: "pays", example: Payment(from: "a", to: "b", amount: 1, note: nil, tags: [], rate: 1, urgent: false)
) { _, _ in }
private let shapeTestsPlainOp = RemoteOp<Int>(name: "shapeTests.plain") { _, _ in }

@Suite("Op argument shapes")
struct OpArgumentShapeTests {
    @Test func `a struct's shape lists its fields in declaration order, optional ones marked`() {
        let shape = OpArgumentShape.of(Payment.self)
        #expect(
            shape.description
                == #"{"from": string, "to": string, "amount": integer, "note"?: string, "tags": [string], "rate": number, "urgent": boolean}"#)
        #expect(shape.isComplete)
    }

    @Test func `plain values, enums of text cases, dictionaries, nested arrays and double optionals have shapes`() {
        #expect(OpArgumentShape.of(Int.self) == .integer)
        #expect(OpArgumentShape.of(String.self) == .string)
        #expect(OpArgumentShape.of(Bool.self) == .boolean)
        #expect(OpArgumentShape.of([UInt8].self) == .array(.integer))
        #expect(OpArgumentShape.of(Int?.self).description == "integer | null")
        #expect(OpArgumentShape.of(AccountID.self) == .integer)
        let nested = OpArgumentShape.of(Nested.self).description
        #expect(nested.hasPrefix(#"{"kind": "open" | "closed", "limits": {string: integer}, "payments": [{"from": string"#), "\(nested)")
        #expect(nested.hasSuffix(#""maybe"?: integer | null}"#), "\(nested)")
    }

    @Test func `what JSON cannot carry or the probe cannot see is said, not guessed`() {
        #expect(OpArgumentShape.of(Stamped.self).description == #"{"at": <Date: not expressible in JSON>, "id": <UUID: not expressible in JSON>}"#)
        #expect(!OpArgumentShape.of(Stamped.self).isComplete)
        // An enum with associated values decodes by the keys it finds: the probe has none to show.
        #expect(OpArgumentShape.of(Tree.self) == .unknown)
        #expect(OpArgumentShape.of([Int: String].self) == .unknown)
        // A type that contains itself ends at the depth limit instead of looping.
        #expect(!OpArgumentShape.of(Chain.self).isComplete)
    }

    @Test func `a RemoteOp gives its summary, its shape and its example; older declarations give none`() {
        let op: any RemoteOpDeclaration = shapeTestsOp
        #expect(op.summary == "pays")
        #expect(op.argumentShape == OpArgumentShape.of(Payment.self))
        let plain: any RemoteOpDeclaration = shapeTestsPlainOp
        #expect(plain.summary == "" && plain.argumentShape == .integer)
    }
}
