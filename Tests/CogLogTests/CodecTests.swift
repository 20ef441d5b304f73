import CogCodec
import CogLog
import Foundation
import Testing

private struct Trail: Codable, Equatable {
    var name: String
    var lengthKm: Double
    var tags: [String]
    var rating: Int8?
    var waypoints: [Waypoint]
}

private struct Waypoint: Codable, Equatable {
    var label: String
    var elevation: Int
}

private enum Weather: Codable, Equatable {
    case clear
    case rain(millimetres: Int)
    case mixed(String, Double)
}

private struct Everything: Codable, Equatable {
    var date: Date
    var id: UUID
    var blob: Data
    var counts: [String: Int]
    var byNumber: [Int: String]
    var weather: [Weather]
    var nothing: Int?
    var nested: [[Int?]]
    var text: String
}

private func roundTrip<T: Codable & Equatable>(_ value: T) throws -> T {
    try CBORDecoder().decode(T.self, from: CBOREncoder().encode(value))
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

@Suite("CBOR codec")
struct CodecTests {
    @Test func `nested structs, optionals and arrays round-trip`() throws {
        let trail = Trail(
            name: "Ridge", lengthKm: 12.5, tags: ["steep", "views"], rating: nil,
            waypoints: [Waypoint(label: "start", elevation: -20), Waypoint(label: "top", elevation: 1_234)])
        #expect(try roundTrip(trail) == trail)
        var rated = trail
        rated.rating = -3
        #expect(try roundTrip(rated) == rated)
    }

    @Test func `enums with and without payloads, dates, UUIDs, data and dictionaries round-trip`() throws {
        let value = Everything(
            date: Date(timeIntervalSince1970: 1_700_000_000.25), id: UUID(uuidString: "2F1C7D4A-9B3E-4C61-8A0F-5D2E6B7C8D9E")!,
            blob: Data([0, 1, 2, 255]), counts: ["b": 2, "a": 1, "ccc": 3], byNumber: [10: "ten", -1: "minus one"],
            weather: [.clear, .rain(millimetres: 4), .mixed("sleet", 0.5)], nothing: nil, nested: [[1, nil], []],
            text: "Grüße, 世界 🥾")
        #expect(try roundTrip(value) == value)
    }

    @Test func `integers at their bounds round-trip`() throws {
        #expect(try roundTrip([Int64.min, -1, 0, 23, 24, 255, 256, 65_535, 65_536, Int64.max]) == [Int64.min, -1, 0, 23, 24, 255, 256, 65_535, 65_536, Int64.max])
        #expect(try roundTrip([UInt64.max, 0]) == [UInt64.max, 0])
        #expect(try roundTrip([Int8.min, Int8.max]) == [Int8.min, Int8.max])
        #expect(try roundTrip([UInt32.max]) == [UInt32.max])
    }

    @Test func `floats round-trip exactly, including infinities and signed zero`() throws {
        let values: [Double] = [0, -0.0, 1.5, 0.1, 65_504, 1e300, -.infinity, .infinity, 5.960464477539063e-8]
        let decoded = try roundTrip(values)
        #expect(decoded.map(\.bitPattern) == values.map(\.bitPattern))
        #expect(try roundTrip([Float(3.25), Float(0.1)]) == [Float(3.25), Float(0.1)])
        #expect(try roundTrip(Double.nan).isNaN)
    }

    @Test func `encoding is deterministic: shortest heads, sorted map keys, shortest floats`() throws {
        let encoder = CBOREncoder()
        #expect(hex(try encoder.encode(["b": 2, "a": 1, "aa": 3])) == "a3616101616202626161" + "03")
        #expect(hex(try encoder.encode(500)) == "1901f4")
        #expect(hex(try encoder.encode(-500)) == "3901f3")
        #expect(hex(try encoder.encode(1.5)) == "f93e00")
        #expect(hex(try encoder.encode(0.1)) == "fb3fb999999999999a")
        #expect(hex(try encoder.encode(Float(100_000))) == "fa47c35000")
        #expect(try encoder.encode(["x": 1, "y": 2]) == (try encoder.encode(["y": 2, "x": 1])))
    }

    @Test func `byte arrays are byte strings and an empty array of another type stays an array`() throws {
        #expect(hex(try CBOREncoder().encode([UInt8]([1, 2]))) == "420102")
        #expect(hex(try CBOREncoder().encode([Int?]())) == "80")
        #expect(hex(try CBOREncoder().encode([UInt8]())) == "40")
        #expect(try roundTrip([[UInt8]([9]), []]) == [[9], []])
    }

    @Test func `garbage fails with a clear error, never a crash`() {
        #expect(throws: CodecError.self) { try CBORDecoder().decode(Trail.self, from: [0xff, 0x00, 0x13]) }
        do {
            _ = try CBORDecoder().decode(Trail.self, from: [0x1c])
            Issue.record("reserved additional information decoded")
        } catch {
            #expect(error.code == .malformed)
            #expect(error.description.contains("reserved additional information 28"))
        }
    }

    @Test func `truncated input fails naming where it ended`() throws {
        let bytes = try CBOREncoder().encode(Waypoint(label: "summit", elevation: 3_000))
        for cut in 1..<bytes.count {
            do {
                _ = try CBORDecoder().decode(Waypoint.self, from: bytes.prefix(cut))
                Issue.record("a prefix of \(cut) bytes decoded")
            } catch {
                #expect(error.code == .malformed)
            }
        }
        #expect(throws: CodecError.self) { try CBORDecoder().decode(Waypoint.self, from: bytes + [0x00]) }
    }

    @Test func `a wrong type fails naming the path`() throws {
        let bytes = try CBOREncoder().encode(["name": "Ridge", "lengthKm": "far"])
        do {
            _ = try CBORDecoder().decode(Trail.self, from: bytes)
            Issue.record("a text length decoded")
        } catch {
            #expect(error.code == .typeMismatch)
            #expect(error.pathText == "lengthKm")
            #expect(error.message == "expected float, found text string")
        }
        let nested = try CBOREncoder().encode(
            ["name": CBORValue.text("R"), "lengthKm": .float(1), "tags": .array([]),
             "waypoints": .array([.map([(.text("label"), .text("a")), (.text("elevation"), .text("high"))])])])
        do {
            _ = try CBORDecoder().decode(Trail.self, from: nested)
            Issue.record("a text elevation decoded")
        } catch {
            #expect(error.pathText == "waypoints.0.elevation")
        }
    }

    @Test func `a missing field and an out-of-range integer name their path`() throws {
        do {
            _ = try CBORDecoder().decode(Waypoint.self, from: try CBOREncoder().encode(["label": "a"]))
            Issue.record("a missing field decoded")
        } catch {
            #expect(error.code == .missingField)
            #expect(error.pathText == "elevation")
        }
        do {
            _ = try CBORDecoder().decode([Int8].self, from: try CBOREncoder().encode([1, 300]))
            Issue.record("300 decoded as Int8")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.pathText == "1")
            #expect(error.message == "integer 300 does not fit Int8")
        }
    }

    @Test func `large string-keyed dictionaries round-trip and a repeated key reads as its last entry`() throws {
        let large = Dictionary(uniqueKeysWithValues: (0..<40).map { ("key-\($0)", $0) })
        #expect(try roundTrip(large) == large)
        // {"label": "a", "elevation": 1, "elevation": 2}, written by hand: not
        // deterministic CBOR, but it must still decode, and always the same way.
        var writer = CBORWriter()
        writer.appendHead(major: 5, 3)
        writer.appendText("label")
        writer.appendText("a")
        for elevation: UInt64 in [1, 2] {
            writer.appendText("elevation")
            writer.appendHead(major: 0, elevation)
        }
        #expect(try CBORDecoder().decode(Waypoint.self, from: writer.bytes).elevation == 2)
    }

    @Test func `an encoding failure names its path, and a key encoded twice keeps its last value`() throws {
        struct Refuses: Encodable {
            func encode(to encoder: any Encoder) throws {
                throw EncodingError.invalidValue(
                    self, .init(codingPath: encoder.codingPath, debugDescription: "refused"))
            }
        }
        struct Holder: Encodable {
            enum CodingKeys: String, CodingKey { case items, twice }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(1, forKey: .twice)
                try container.encode(2, forKey: .twice)
                var items = container.nestedUnkeyedContainer(forKey: .items)
                try items.encode(0)
                try items.encode(Refuses())
            }
        }
        do {
            _ = try CBOREncoder().encode(Holder())
            Issue.record("a refusing value encoded")
        } catch {
            #expect(error.code == .encodingFailed)
            #expect(error.pathText == "items.1")
        }
        struct Twice: Encodable {
            enum CodingKeys: String, CodingKey { case twice }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(1, forKey: .twice)
                try container.encode(2, forKey: .twice)
            }
        }
        #expect(try CBORValue.parse(try CBOREncoder().encode(Twice())) == .map([(.text("twice"), .unsigned(2))]))
    }

    @Test func `times print as ISO 8601 UTC to the millisecond, as Foundation's formatter prints them`() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var seconds: [Double] = [0, 0.0006, 0.9996, 1.9999, -0.5, -1.0001, -86_400.25, 951_782_400.123, 1_800_000_000.5, 253_402_300_799.999]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 { seconds.append(Double(Int64.random(in: -2_000_000_000_000...4_000_000_000_000, using: &generator)) / 1_000 + 0.0001) }
        for value in seconds {
            #expect(CBORText.iso8601(value) == formatter.string(from: Date(timeIntervalSince1970: value)), "at \(value)")
        }
    }
}
