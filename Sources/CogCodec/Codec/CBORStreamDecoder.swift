import Foundation

/// Decodes a `Decodable` straight from well-formed CBOR bytes, with no tree:
/// a value is its offset in the input, a struct's field is found by reading
/// the map's keys in place. `CBORDecoder` runs it first on input
/// `CBORReader.isWellFormed` accepts; any failure falls back to the tree
/// decoder, whose error (with its path) is the one reported, so the two
/// agree on every outcome and this one only makes success cheaper (an op's
/// argument on the leader's hot path: `docs/benchmarks.md`).
///
/// It reads what the tree decoder reads: the same scalars, `Date`, `UUID`,
/// `Data` and byte strings, a repeated map key as its last entry. Every
/// read is bounds-checked; a surprise throws `StreamMiss`.
struct StreamDecoder: Decoder {
    let bytes: [UInt8]
    /// The path of the container holding this value (empty at the top).
    private let parentPath: [any CodingKey]
    /// Where this value's item starts. The input is shorter than
    /// `Int32.max` bytes (`maximumInput`), so every offset fits.
    private let start: Int32
    /// This value's place in its container, read only by `codingPath`: the
    /// offset of its map key's text item (0 or more), an array index as
    /// `-2 - index`, or -1 for none. Three words in all: the decoder fits
    /// in an `any Decoder` without a box of its own on the heap.
    private let place: Int32
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// The longest input the stream decoder reads (the tree decoder reads longer).
    static let maximumInput = Int(Int32.max) - 1

    /// Where a value sits in its container.
    enum Place {
        case none
        /// A map's value: its key's text item is at this offset.
        case key(at: Int)
        case index(Int)
    }

    init(bytes: [UInt8], offset: Int, parentPath: [any CodingKey], place: Place) {
        self.bytes = bytes
        self.parentPath = parentPath
        // Offsets and indexes are within the input, which `maximumInput` bounds.
        start = Int32(truncatingIfNeeded: offset)
        switch place {
        case .none: self.place = -1
        case .key(let at): self.place = Int32(truncatingIfNeeded: at)
        case .index(let index): self.place = -2 - Int32(truncatingIfNeeded: index)
        }
    }

    /// Where this value's item starts.
    var offset: Int { Int(start) }

    var codingPath: [any CodingKey] {
        switch place {
        case -1:
            return parentPath
        case ..<(-1):
            return parentPath + [IndexKey(Int(-2 - place))]
        default:
            guard let range = try? StreamItem.string(bytes, at: Int(place), major: 3) else { return parentPath }
            let text = bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
            return parentPath + [TextKey(text)]
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let head = try StreamItem.head(bytes, at: offset)
        guard head.major == 5, let count = Int(exactly: head.argument) else { throw StreamMiss() }
        return KeyedDecodingContainer(
            try StreamKeyedDecoder<Key>(bytes: bytes, entries: offset + head.length, count: count, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let head = try StreamItem.head(bytes, at: offset)
        guard head.major == 4, let count = Int(exactly: head.argument) else { throw StreamMiss() }
        return StreamUnkeyedDecoder(bytes: bytes, first: offset + head.length, count: count, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    /// Decodes one value, reading `Date`, `UUID` and `Data` in the codec's own form.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if type == String.self { return try decode(String.self) as! T }
        if type == Int.self { return try decodeInteger(Int.self) as! T }
        if type == Date.self {
            let head = try StreamItem.head(bytes, at: offset)
            guard head.major == 6, head.argument == CBORTag.epochDate else { throw StreamMiss() }
            let inner = StreamDecoder(bytes: bytes, offset: offset + head.length, parentPath: [], place: .none)
            let innerHead = try StreamItem.head(bytes, at: inner.offset)
            let seconds: Double
            switch innerHead.major {
            case 0, 1: seconds = innerHead.major == 0 ? Double(innerHead.argument) : -1 - Double(innerHead.argument)
            default: seconds = try inner.decode(Double.self)
            }
            return Date(timeIntervalSince1970: seconds) as! T
        }
        if type == UUID.self {
            let head = try StreamItem.head(bytes, at: offset)
            guard head.major == 6, head.argument == CBORTag.uuid else { throw StreamMiss() }
            let range = try StreamItem.byteString(bytes, at: offset + head.length)
            guard range.count == 16 else { throw StreamMiss() }
            let uuid = bytes.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[range]).loadUnaligned(as: uuid_t.self) }
            return UUID(uuid: uuid) as! T
        }
        if type == CBORValue.self {
            let end = try StreamItem.end(bytes, of: offset)
            guard let value = try? CBORReader.decode(bytes[offset..<end]) else { throw StreamMiss() }
            return value as! T
        }
        if type == [UInt8].self {
            return Array(bytes[try StreamItem.byteString(bytes, at: offset)]) as! T
        }
        if type == Data.self {
            return Data(bytes[try StreamItem.byteString(bytes, at: offset)]) as! T
        }
        return try T(from: self)
    }
}

/// A read the stream decoder did not expect: the tree decoder runs instead
/// and says what is wrong.
struct StreamMiss: Error {}

/// Reading items in place (the input is already known to be well-formed,
/// but every read still checks its bounds).
enum StreamItem {
    /// The head at `offset`: major type, argument, and the head's length.
    static func head(_ bytes: [UInt8], at offset: Int) throws(StreamMiss) -> (major: UInt8, argument: UInt64, length: Int) {
        guard offset >= 0, offset < bytes.count else { throw StreamMiss() }
        let initial = bytes[offset]
        let info = initial & 0x1f
        let width: Int
        switch info {
        case 0..<24: return (initial >> 5, UInt64(info), 1)
        case 24: width = 1
        case 25: width = 2
        case 26: width = 4
        case 27: width = 8
        default: throw StreamMiss()
        }
        guard bytes.count - offset > width else { throw StreamMiss() }
        var argument: UInt64 = 0
        for index in (offset + 1)...(offset + width) { argument = argument << 8 | UInt64(bytes[index]) }
        return (initial >> 5, argument, 1 + width)
    }

    /// The range of a byte or text string's content (`major`: 2 or 3).
    static func string(_ bytes: [UInt8], at offset: Int, major: UInt8) throws(StreamMiss) -> Range<Int> {
        let head = try head(bytes, at: offset)
        let start = offset + head.length
        guard head.major == major, head.argument <= UInt64(bytes.count - start) else { throw StreamMiss() }
        return start..<(start + Int(head.argument))
    }

    static func byteString(_ bytes: [UInt8], at offset: Int) throws(StreamMiss) -> Range<Int> {
        try string(bytes, at: offset, major: 2)
    }

    /// Where the item at `offset` ends (one past its last byte).
    static func end(_ bytes: [UInt8], of offset: Int) throws(StreamMiss) -> Int {
        var position = offset
        // Items still to skip: a map's entry counts two.
        var remaining: UInt64 = 1
        while remaining > 0 {
            let head = try head(bytes, at: position)
            position += head.length
            remaining -= 1
            switch head.major {
            case 2, 3:
                guard head.argument <= UInt64(bytes.count - position) else { throw StreamMiss() }
                position += Int(head.argument)
            case 4:
                guard head.argument <= UInt64(bytes.count - position) else { throw StreamMiss() }
                remaining += head.argument
            case 5:
                guard head.argument <= UInt64(bytes.count - position) / 2 else { throw StreamMiss() }
                remaining += head.argument * 2
            case 6:
                remaining += 1
            default:
                break  // integers and simple values: the head is the item
            }
        }
        return position
    }

    /// Whether the bytes of `bytes` at `range` are `expected`, compared as
    /// memory (the map lookups, the key checks and the op scanner's keys).
    static func bytes(_ bytes: [UInt8], at range: Range<Int>, equal expected: UnsafeRawBufferPointer) -> Bool {
        range.count == expected.count
            && (range.isEmpty || bytes.withUnsafeBytes { memcmp($0.baseAddress! + range.lowerBound, expected.baseAddress!, range.count) == 0 })
    }

    /// Whether two ranges of `bytes` hold the same bytes.
    static func bytesEqual(_ bytes: [UInt8], _ first: Range<Int>, _ second: Range<Int>) -> Bool {
        bytes.withUnsafeBytes { StreamItem.bytes(bytes, at: first, equal: UnsafeRawBufferPointer(rebasing: $0[second])) }
    }

    /// Whether the text at `range` spells `name`.
    static func textEquals(_ bytes: [UInt8], _ range: Range<Int>, _ name: String) -> Bool {
        var name = name
        return name.withUTF8 { StreamItem.bytes(bytes, at: range, equal: UnsafeRawBufferPointer($0)) }
    }
}

extension StreamDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { offset < bytes.count && bytes[offset] == 0xf6 }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard offset < bytes.count else { throw StreamMiss() }
        switch bytes[offset] {
        case 0xf4: return false
        case 0xf5: return true
        default: throw StreamMiss()
        }
    }

    func decode(_ type: String.Type) throws -> String {
        let range = try StreamItem.string(bytes, at: offset, major: 3)
        // Well-formed input has valid UTF-8 in every text string.
        return bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
    }

    func decode(_ type: Double.Type) throws -> Double {
        let head = try StreamItem.head(bytes, at: offset)
        guard head.major == 7 else { throw StreamMiss() }
        switch head.length {
        case 3: return Double(Float16Bits.float(UInt16(head.argument)))
        case 5: return Double(Float(bitPattern: UInt32(head.argument)))
        case 9: return Double(bitPattern: head.argument)
        default: throw StreamMiss()
        }
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let head = try StreamItem.head(bytes, at: offset)
        switch head.major {
        case 0:
            guard let result = T(exactly: head.argument) else { throw StreamMiss() }
            return result
        case 1:
            guard head.argument <= UInt64(Int64.max), let result = T(exactly: -1 - Int64(head.argument)) else { throw StreamMiss() }
            return result
        default:
            throw StreamMiss()
        }
    }

    func decode(_ type: Int.Type) throws -> Int { try decodeInteger(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decodeInteger(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decodeInteger(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decodeInteger(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decodeInteger(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decodeInteger(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeInteger(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeInteger(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeInteger(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeInteger(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }
}

struct StreamKeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    private let bytes: [UInt8]
    /// Where the map's first key starts.
    private let entries: Int
    private let count: Int
    /// A large map (a `[String: T]`) is indexed once: where each key's entry
    /// is, its key's text item and its value (the last entry of a repeated
    /// key, as the tree decoder reads it).
    private let index: [String: (key: Int, value: Int)]?
    /// A small map whose keys' bytes all differ: a key's first entry is its
    /// only one, so a lookup stops there instead of reading the whole map.
    private let distinct: Bool
    let codingPath: [any CodingKey]

    init(bytes: [UInt8], entries: Int, count: Int, codingPath: [any CodingKey]) throws {
        self.bytes = bytes
        self.entries = entries
        self.count = count
        self.codingPath = codingPath
        // Every key must be text (the tree decoder says so when one is not).
        var index: [String: (key: Int, value: Int)]? = count > 16 ? [:] : nil
        index?.reserveCapacity(count)
        var distinct = index == nil
        try withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: index == nil ? count : 0) { keys in
            var position = entries
            for entry in 0..<count {
                let keyStart = position
                let keyRange = try StreamItem.string(bytes, at: position, major: 3)
                position = keyRange.upperBound
                if index != nil {
                    index![bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[keyRange]), as: UTF8.self) }] =
                        (keyStart, position)
                } else {
                    if distinct, keys[0..<entry].contains(where: { StreamItem.bytesEqual(bytes, $0, keyRange) }) { distinct = false }
                    keys.initializeElement(at: entry, to: keyRange)
                }
                position = try StreamItem.end(bytes, of: position)
            }
        }
        self.index = index
        self.distinct = distinct
    }

    var allKeys: [Key] {
        var keys: [Key] = []
        var position = entries
        for _ in 0..<count {
            guard let keyRange = try? StreamItem.string(bytes, at: position, major: 3),
                let next = try? StreamItem.end(bytes, of: keyRange.upperBound)
            else { break }
            let text = bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[keyRange]), as: UTF8.self) }
            if let key = Key(stringValue: text) { keys.append(key) }
            position = next
        }
        return keys
    }

    /// Where `key`'s entry is: its key's text item and its value; nil
    /// when the map has no such key.
    private func entry(for key: Key) -> (key: Int, value: Int)? {
        let name = key.stringValue
        if let index { return index[name] }
        var found: (key: Int, value: Int)?
        var position = entries
        for _ in 0..<count {
            guard let keyRange = try? StreamItem.string(bytes, at: position, major: 3),
                let next = try? StreamItem.end(bytes, of: keyRange.upperBound)
            else { return nil }
            if StreamItem.textEquals(bytes, keyRange, name) {
                if distinct { return (position, keyRange.upperBound) }
                found = (position, keyRange.upperBound)
            }
            position = next
        }
        return found
    }

    func contains(_ key: Key) -> Bool { entry(for: key) != nil }

    private func child(_ key: Key) throws -> StreamDecoder {
        guard let entry = entry(for: key) else { throw StreamMiss() }
        return StreamDecoder(bytes: bytes, offset: entry.value, parentPath: codingPath, place: .key(at: entry.key))
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decodeValue(type) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { try child(Key(stringValue: "super")!) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

struct StreamUnkeyedDecoder: UnkeyedDecodingContainer {
    private let bytes: [UInt8]
    /// Where the next item starts.
    private var position: Int
    let codingPath: [any CodingKey]
    let count: Int?
    private(set) var currentIndex = 0

    init(bytes: [UInt8], first: Int, count: Int, codingPath: [any CodingKey]) {
        self.bytes = bytes
        position = first
        self.count = count
        self.codingPath = codingPath
    }

    var isAtEnd: Bool { currentIndex >= count! }

    private mutating func next() throws -> StreamDecoder {
        guard !isAtEnd else { throw StreamMiss() }
        let decoder = StreamDecoder(bytes: bytes, offset: position, parentPath: codingPath, place: .index(currentIndex))
        position = try StreamItem.end(bytes, of: position)
        currentIndex += 1
        return decoder
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, position < bytes.count, bytes[position] == 0xf6 else { return false }
        position += 1
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decodeValue(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next().unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { try next() }
}
