/// Parses one CBOR data item, rejecting what the codec never writes
/// (indefinite lengths, undefined, simple values) and input that is
/// truncated, too deep or has bytes left over.
struct CBORReader {
    /// Why bytes are not a CBOR item the codec accepts.
    struct Failure: Error, Equatable, CustomStringConvertible {
        let offset: Int
        let reason: String
        var description: String { "malformed CBOR at byte \(offset): \(reason)" }
    }

    static let maximumDepth = 256

    private let bytes: [UInt8]
    private var offset = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    static func decode<Bytes: Collection<UInt8>>(_ input: Bytes) throws(Failure) -> CBORValue {
        try decode(Array(input))
    }

    static func decode(_ input: [UInt8]) throws(Failure) -> CBORValue {
        var reader = CBORReader(input)
        let value = try reader.readItem(depth: 0)
        guard reader.offset == reader.bytes.count else {
            throw Failure(offset: reader.offset, reason: "\(reader.bytes.count - reader.offset) bytes after the item")
        }
        return value
    }

    /// Whether `bytes` are one item `decode` accepts (the same rules, no
    /// tree built): what `StreamDecoder` may read in place.
    static func isWellFormed(_ bytes: [UInt8]) -> Bool {
        var reader = CBORReader(bytes)
        guard (try? reader.skipItem(depth: 0)) != nil else { return false }
        return reader.offset == bytes.count
    }

    /// Reads past one item, checking it as `readItem` does.
    private mutating func skipItem(depth: Int) throws(Failure) {
        guard depth < CBORReader.maximumDepth else {
            throw Failure(offset: offset, reason: "nesting deeper than \(CBORReader.maximumDepth)")
        }
        let start = offset
        let initial = try readByte()
        let info = initial & 0x1f
        switch initial >> 5 {
        case 0, 1:
            _ = try readArgument(info)
        case 2:
            offset += try readLength(info)
        case 3:
            let length = try readLength(info)
            guard UTF8Text.isValid(bytes, offset..<(offset + length)) else {
                throw Failure(offset: start, reason: "text string is not valid UTF-8")
            }
            offset += length
        case 4:
            for _ in 0..<(try readLength(info)) { try skipItem(depth: depth + 1) }
        case 5:
            for _ in 0..<(try readLength(info)) {
                try skipItem(depth: depth + 1)
                try skipItem(depth: depth + 1)
            }
        case 6:
            _ = try readArgument(info)
            try skipItem(depth: depth + 1)
        default:
            switch info {
            case 20, 21, 22: break
            case 25: _ = try readBigEndian(2)
            case 26: _ = try readBigEndian(4)
            case 27: _ = try readBigEndian(8)
            default: throw Failure(offset: start, reason: "simple value \(info) is not accepted")
            }
        }
    }

    private mutating func readByte() throws(Failure) -> UInt8 {
        guard offset < bytes.count else { throw Failure(offset: offset, reason: "input ends inside an item") }
        defer { offset += 1 }
        return bytes[offset]
    }

    private mutating func readBigEndian(_ count: Int) throws(Failure) -> UInt64 {
        guard bytes.count - offset >= count else { throw Failure(offset: offset, reason: "input ends inside an item") }
        var value: UInt64 = 0
        for index in offset..<(offset + count) { value = value << 8 | UInt64(bytes[index]) }
        offset += count
        return value
    }

    private mutating func readArgument(_ info: UInt8) throws(Failure) -> UInt64 {
        switch info {
        case 0..<24: return UInt64(info)
        case 24: return try readBigEndian(1)
        case 25: return try readBigEndian(2)
        case 26: return try readBigEndian(4)
        case 27: return try readBigEndian(8)
        case 31: throw Failure(offset: offset - 1, reason: "indefinite lengths are not accepted")
        default: throw Failure(offset: offset - 1, reason: "reserved additional information \(info)")
        }
    }

    private mutating func readLength(_ info: UInt8) throws(Failure) -> Int {
        let start = offset
        let length = try readArgument(info)
        guard length <= UInt64(bytes.count - offset) else {
            throw Failure(offset: start, reason: "length \(length) runs past the end of the input")
        }
        return Int(length)
    }

    private mutating func readItem(depth: Int) throws(Failure) -> CBORValue {
        guard depth < CBORReader.maximumDepth else {
            throw Failure(offset: offset, reason: "nesting deeper than \(CBORReader.maximumDepth)")
        }
        let start = offset
        let initial = try readByte()
        let major = initial >> 5
        let info = initial & 0x1f
        switch major {
        case 0:
            return .unsigned(try readArgument(info))
        case 1:
            return .negative(try readArgument(info))
        case 2:
            let length = try readLength(info)
            defer { offset += length }
            return .bytes(Array(bytes[offset..<(offset + length)]))
        case 3:
            let length = try readLength(info)
            guard let text = UTF8Text.validated(bytes, offset..<(offset + length)) else {
                throw Failure(offset: start, reason: "text string is not valid UTF-8")
            }
            offset += length
            return .text(text)
        case 4:
            let count = try readLength(info)
            var items: [CBORValue] = []
            items.reserveCapacity(count)
            for _ in 0..<count { items.append(try readItem(depth: depth + 1)) }
            return .array(items)
        case 5:
            let count = try readLength(info)
            var entries: [(key: CBORValue, value: CBORValue)] = []
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let key = try readItem(depth: depth + 1)
                let value = try readItem(depth: depth + 1)
                entries.append((key, value))
            }
            return .map(entries)
        case 6:
            let tag = try readArgument(info)
            return .tag(tag, try readItem(depth: depth + 1))
        default:
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 25: return .float(Double(Float16Bits.float(UInt16(try readBigEndian(2)))))
            case 26: return .float(Double(Float(bitPattern: UInt32(try readBigEndian(4)))))
            case 27: return .float(Double(bitPattern: try readBigEndian(8)))
            default: throw Failure(offset: start, reason: "simple value \(info) is not accepted")
            }
        }
    }
}
