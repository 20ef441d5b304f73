/// Writes deterministic CBOR: `CBORValue`s with RFC 8949 §4.2.1 core deterministic encoding:
/// shortest integer and length heads, definite lengths only, map keys sorted
/// by the bytewise order of their encodings, and floats in the shortest of
/// half, single or double precision that keeps the value exactly.
public struct CBORWriter {
    /// Appends a head (major type and argument) in its shortest form; the
    /// caller keeps map keys in deterministic order.
    public mutating func appendHead(major: UInt8, _ argument: UInt64) { writeHead(major: major, argument) }

    /// Appends raw bytes (an already-encoded item).
    public mutating func appendRaw<Bytes: Sequence<UInt8>>(_ raw: Bytes) { bytes.append(contentsOf: raw) }

    /// Appends raw bytes from an array (one copy; callers in other modules
    /// get this rather than the unspecialized generic).
    public mutating func appendRaw(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }

    /// Appends raw bytes from part of an array (one copy, as above).
    public mutating func appendRaw(_ raw: ArraySlice<UInt8>) { bytes.append(contentsOf: raw) }

    /// Appends a text string.
    public mutating func appendText(_ text: String) {
        let utf8 = text.utf8
        writeHead(major: 3, UInt64(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    /// What was written so far.
    public private(set) var bytes: [UInt8] = []

    public init(reservingCapacity capacity: Int = 64) {
        bytes.reserveCapacity(capacity)
    }

    package static func encode(_ value: CBORValue) -> [UInt8] {
        var writer = CBORWriter()
        writer.write(value)
        return writer.bytes
    }

    mutating func write(_ value: CBORValue) {
        switch value {
        case .unsigned(let n):
            writeHead(major: 0, n)
        case .negative(let n):
            writeHead(major: 1, n)
        case .bytes(let data):
            writeHead(major: 2, UInt64(data.count))
            bytes.append(contentsOf: data)
        case .text(let string):
            let utf8 = Array(string.utf8)
            writeHead(major: 3, UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        case .array(let items):
            writeHead(major: 4, UInt64(items.count))
            for item in items { write(item) }
        case .map(let entries):
            writeHead(major: 5, UInt64(entries.count))
            if let textKeys = CBORWriter.textKeys(entries) {
                // Text keys sort by their encodings exactly when they sort by
                // (UTF-8 length, bytes): the head grows with the length.
                let order = textKeys.indices.sorted { left, right in
                    let (a, b) = (textKeys[left].utf8, textKeys[right].utf8)
                    return a.count != b.count ? a.count < b.count : a.lexicographicallyPrecedes(b)
                }
                for index in order {
                    appendText(textKeys[index])
                    write(entries[index].value)
                }
            } else {
                let encoded = entries.map { (key: CBORWriter.encode($0.key), value: $0.value) }
                for entry in encoded.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
                    bytes.append(contentsOf: entry.key)
                    write(entry.value)
                }
            }
        case .tag(let tag, let item):
            writeHead(major: 6, tag)
            write(item)
        case .bool(let flag):
            bytes.append(flag ? 0xf5 : 0xf4)
        case .null:
            bytes.append(0xf6)
        case .float(let double):
            writeFloat(double)
        case .encoded(let item):
            bytes.append(contentsOf: item)
        }
    }

    /// The keys of a map whose keys are all text (the common case), in entry order.
    private static func textKeys(_ entries: [(key: CBORValue, value: CBORValue)]) -> [String]? {
        var keys: [String] = []
        keys.reserveCapacity(entries.count)
        for entry in entries {
            guard case .text(let key) = entry.key else { return nil }
            keys.append(key)
        }
        return keys
    }

    private mutating func writeHead(major: UInt8, _ argument: UInt64) {
        let type = major << 5
        switch argument {
        case 0..<24:
            bytes.append(type | UInt8(argument))
        case 24...0xff:
            bytes.append(type | 24)
            bytes.append(UInt8(argument))
        case 0x100...0xffff:
            bytes.append(type | 25)
            appendBigEndian(UInt16(argument))
        case 0x1_0000...0xffff_ffff:
            bytes.append(type | 26)
            appendBigEndian(UInt32(argument))
        default:
            bytes.append(type | 27)
            appendBigEndian(argument)
        }
    }

    /// Appends a float in its shortest exact form.
    mutating func appendFloat(_ value: Double) { writeFloat(value) }

    private mutating func writeFloat(_ value: Double) {
        let encoded = CBORFloat(value)
        bytes.append(encoded.initial)
        switch encoded.size {
        case 3: appendBigEndian(UInt16(truncatingIfNeeded: encoded.bits))
        case 5: appendBigEndian(UInt32(truncatingIfNeeded: encoded.bits))
        default: appendBigEndian(encoded.bits)
        }
    }

    private mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        var big = value.bigEndian
        withUnsafeBytes(of: &big) { bytes.append(contentsOf: $0) }
    }
}
