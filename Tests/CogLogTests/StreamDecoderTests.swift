@testable import CogCodec
import CogSim
import Foundation
import Testing

// The in-place decoder against the tree decoder it stands in front of: the
// same value from every input the tree reads, a miss (so the tree answers)
// on every input it refuses.

private struct Account: Codable, Equatable {
    var owner: String
    var balance: Int
    var limit: Int64?
    var flags: [Bool]
    var history: [[String: Int]]
    var opened: Date
    var id: UUID
    var scan: Data
    var raw: [UInt8]
    var extra: CBORValue?
    var rate: Double
    var small: Float
}

private struct Pair: Codable, Equatable {
    var a: Int
    var b: String
}

private enum Shape: Codable, Equatable {
    case dot
    case circle(radius: Double)
    case label(String, Int8)
}

/// A value that keeps the coding path its decoder reported, as key texts.
private struct PathProbe: Codable, Equatable {
    var path: [String] = []

    init() {}

    init(from decoder: any Decoder) throws {
        path = decoder.codingPath.map(\.stringValue)
        _ = try decoder.singleValueContainer().decode(Int.self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(0)
    }
}

private struct Nest: Codable, Equatable {
    var top: PathProbe
    var rows: [[String: PathProbe]]
}

/// What the tree decoder makes of `bytes`: the value, or nil when it refuses.
private func tree<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
    guard let value = try? CBORReader.decode(bytes) else { return nil }
    return try? CBORDecoder().decode(T.self, fromTree: value)
}

/// What the in-place decoder makes of `bytes` when it is given them (only
/// well-formed input is): the value, or nil on a miss.
private func stream<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
    guard CBORReader.isWellFormed(bytes) else { return nil }
    return try? StreamDecoder(bytes: bytes, offset: 0, parentPath: [], place: .none).decodeValue(T.self)
}

private func sample(_ seed: Int) -> Account {
    Account(
        owner: seed % 3 == 0 ? "Zoë 🥾" : "owner-\(seed)", balance: seed * 7 - 50, limit: seed % 2 == 0 ? nil : Int64(-seed),
        flags: [true, false, seed % 5 == 0], history: [["in": seed, "out": -seed], [:]],
        opened: Date(timeIntervalSince1970: 1_700_000_000.5 + Double(seed)),
        id: UUID(uuid: (UInt8(seed & 0xff), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)), scan: Data([1, 2, UInt8(seed & 0xff)]),
        raw: Array(repeating: 0xab, count: seed % 4), extra: seed % 2 == 0 ? .text("x") : .array([.unsigned(1), .null]),
        rate: Double(seed) / 3, small: 0.5)
}

private func probe(_ path: [String]) -> PathProbe {
    var probe = PathProbe()
    probe.path = path
    return probe
}

@Suite("CBOR in-place decoder")
struct StreamDecoderTests {
    @Test func `it reads every value the tree reads, the same`() throws {
        for seed in 0..<40 {
            let bytes = try CBOREncoder().encode(sample(seed))
            #expect(stream(Account.self, bytes) == sample(seed))
            #expect(try CBORDecoder().decode(Account.self, from: bytes) == sample(seed))
            // Any collection of bytes decodes as the array of them does.
            #expect(try CBORDecoder().decode(Account.self, from: ([0xff] + bytes).dropFirst()) == sample(seed))
        }
        let shapes: [Shape] = [.dot, .circle(radius: 2.5), .label("a", -3)]
        let shapeBytes = try CBOREncoder().encode(shapes)
        #expect(stream([Shape].self, shapeBytes) == shapes)
        // A map of more than 16 keys is indexed once; an Int-keyed dictionary is an array of pairs.
        let wide = Dictionary(uniqueKeysWithValues: (0..<40).map { ("key-\($0)", $0 * $0) })
        #expect(stream([String: Int].self, try CBOREncoder().encode(wide)) == wide)
        let numbered = [3: "three", -1: "minus one"]
        #expect(stream([Int: String].self, try CBOREncoder().encode(numbered)) == numbered)
        #expect(stream(String.self, try CBOREncoder().encode("alice")) == "alice")
        #expect(stream(Int.self, try CBOREncoder().encode(-9)) == -9)
    }

    @Test func `a nested value is told the same coding path by both decoders`() throws {
        let bytes = try CBOREncoder().encode(Nest(top: PathProbe(), rows: [[:], ["cell": PathProbe()]]))
        let expected = Nest(top: probe(["top"]), rows: [[:], ["cell": probe(["rows", "1", "cell"])]])
        #expect(stream(Nest.self, bytes) == expected)
        #expect(tree(Nest.self, bytes) == expected)
    }

    @Test func `a repeated key reads as its last entry, in small and indexed maps`() {
        // {"a": 1, "b": "x", "a": 2}
        let small: [UInt8] = [0xa3, 0x61, 0x61, 0x01, 0x61, 0x62, 0x61, 0x78, 0x61, 0x61, 0x02]
        #expect(tree(Pair.self, small) == Pair(a: 2, b: "x"))
        #expect(stream(Pair.self, small) == Pair(a: 2, b: "x"))
        // 17 entries: "a" twice among 15 fillers and "b".
        var wide: [UInt8] = [0xb1, 0x61, 0x61, 0x01]
        for index in 0..<14 { wide += [0x62, 0x66, 0x61 + UInt8(index), 0x00] }
        wide += [0x61, 0x62, 0x61, 0x78, 0x61, 0x61, 0x18, 0x2a]
        #expect(tree(Pair.self, wide) == Pair(a: 42, b: "x"))
        #expect(stream(Pair.self, wide) == Pair(a: 42, b: "x"))
    }

    @Test func `a date over an integer, a half float, and null as an absent optional read as the tree reads them`() {
        struct Stamped: Codable, Equatable {
            var at: Date
            var weight: Double
            var note: String?
        }
        // {"at": 1(1700000000), "weight": half 1.5, "note": null}
        let bytes: [UInt8] =
            [0xa3, 0x62, 0x61, 0x74, 0xc1, 0x1a, 0x65, 0x53, 0xf1, 0x00, 0x66] + Array("weight".utf8)
            + [0xf9, 0x3e, 0x00, 0x64] + Array("note".utf8) + [0xf6]
        let expected = Stamped(at: Date(timeIntervalSince1970: 1_700_000_000), weight: 1.5, note: nil)
        #expect(tree(Stamped.self, bytes) == expected)
        #expect(stream(Stamped.self, bytes) == expected)
    }

    @Test func `what the tree refuses the in-place decoder misses, and the error is the tree's`() throws {
        let good = try CBOREncoder().encode(Pair(a: 1, b: "x"))
        let cases: [(bytes: [UInt8], fragment: String)] = [
            (Array(good.dropLast()), "runs past the end of the input"),
            (good + [0x00], "1 bytes after the item"),
            ([0xa1, 0x61, 0x61, 0x01], "required field `b` is missing"),
            ([0xa2, 0x61, 0x61, 0x61, 0x78, 0x61, 0x62, 0x61, 0x78], "expected integer, found text"),
            ([0xa2, 0x01, 0x01, 0x61, 0x62, 0x61, 0x78], "map key is a integer, not text"),
            ([0xa2, 0x61, 0x61, 0x01, 0x61, 0x62, 0x61, 0xff], "text string is not valid UTF-8"),
            ([0xbf, 0x61, 0x61, 0x01, 0xff], "indefinite lengths are not accepted"),
        ]
        for (bytes, fragment) in cases {
            #expect(stream(Pair.self, bytes) == nil, "\(bytes)")
            #expect(tree(Pair.self, bytes) == nil, "\(bytes)")
            do {
                _ = try CBORDecoder().decode(Pair.self, from: bytes)
                Issue.record("\(bytes) decoded")
            } catch {
                #expect(error.description.contains(fragment), "\(error.description)")
            }
        }
        // 256 fits an Int but not an Int8: read by one type, a miss (then the tree's message) by the other.
        struct Tiny: Codable { var a: Int8 }
        let big: [UInt8] = [0xa1, 0x61, 0x61, 0x19, 0x01, 0x00]
        #expect(stream([String: Int].self, big) == ["a": 256])
        #expect(stream(Tiny.self, big) == nil)
        #expect(throws: CodecError.self) { try CBORDecoder().decode(Tiny.self, from: big) }
    }

    @Test func `on mutated inputs the two agree on every outcome`() throws {
        var generator = SimRandom(seed: 27)
        var agreed = 0
        for seed in 0..<300 {
            let original = try CBOREncoder().encode(sample(seed))
            for _ in 0..<20 {
                var bytes = original
                for _ in 0..<(1 + Int(generator.next() % 3)) {
                    let position = Int(generator.next() % UInt64(bytes.count))
                    switch generator.next() % 3 {
                    case 0: bytes[position] = UInt8(truncatingIfNeeded: generator.next())
                    case 1: bytes.remove(at: position)
                    default: bytes.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                    }
                }
                let wellFormed = (try? CBORReader.decode(bytes)) != nil
                #expect(CBORReader.isWellFormed(bytes) == wellFormed, "\(bytes)")
                #expect(stream(Account.self, bytes) == tree(Account.self, bytes), "\(bytes)")
                if tree(Account.self, bytes) != nil { agreed += 1 }
            }
        }
        // Some mutations still decode (a changed digit, a changed letter): both read them alike.
        #expect(agreed > 0)
    }
}
