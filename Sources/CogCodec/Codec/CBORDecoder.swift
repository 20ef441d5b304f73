import Foundation

/// Decodes `Decodable` values from CBOR written by `CBOREncoder` (or any
/// encoder following `protocol/turnlog.md`'s mapping). Malformed input,
/// truncation and wrong shapes throw a `CodecError` naming the path; nothing
/// traps.
public struct CBORDecoder: Sendable {
    public init() {}

    public func decode<T: Decodable, Bytes: Collection<UInt8>>(_ type: T.Type, from bytes: Bytes) throws(CodecError) -> T {
        try decode(type, from: Array(bytes))
    }

    /// `decode(_:from:)` of an array as it is (an op's argument on the
    /// leader: no generic collection's metadata looked up for each one).
    public func decode<T: Decodable>(_ type: T.Type, from input: [UInt8]) throws(CodecError) -> T {
        // In place first (no tree); anything it did not expect is read again
        // through the tree, which names the problem.
        if input.count <= StreamDecoder.maximumInput, CBORReader.isWellFormed(input),
            let value = try? StreamDecoder(bytes: input, offset: 0, parentPath: [], place: .none).decodeValue(T.self)
        {
            return value
        }
        let tree: CBORValue
        do {
            tree = try CBORReader.decode(input)
        } catch {
            throw CodecError(code: .malformed, path: [], message: error.description)
        }
        return try decode(type, fromTree: tree)
    }

    public func decode<T: Decodable>(_ type: T.Type, fromTree tree: CBORValue) throws(CodecError) -> T {
        do {
            return try NodeDecoder(value: tree, codingPath: []).decodeValue(T.self)
        } catch let error as CodecError {
            throw error
        } catch let error as DecodingError {
            throw CodecError(decoding: error)
        } catch {
            throw CodecError(code: .invalidValue, path: [], message: "\(error)")
        }
    }
}

struct NodeDecoder: Decoder {
    let value: CBORValue
    /// The path to the container holding this value, and this value's key in
    /// it: the full path is only put together when asked for (an error, a
    /// nested container), not for every field decoded.
    private let parentPath: [any CodingKey]
    private let key: (any CodingKey)?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(value: CBORValue, codingPath: [any CodingKey]) {
        self.value = value
        parentPath = codingPath
        key = nil
    }

    init(value: CBORValue, parentPath: [any CodingKey], key: any CodingKey) {
        self.value = value
        self.parentPath = parentPath
        self.key = key
    }

    var codingPath: [any CodingKey] {
        guard let key else { return parentPath }
        return parentPath + [key]
    }

    func mismatch(_ expected: String) -> DecodingError {
        .typeMismatch(
            Any.self, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(value.kindName)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .map(let entries) = value else { throw mismatch("map") }
        for entry in entries {
            guard case .text = entry.key else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: codingPath, debugDescription: "map key is a \(entry.key.kindName), not text"))
            }
        }
        return KeyedDecodingContainer(KeyedNodeDecoder<Key>(entries: entries, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = value else { throw mismatch("array") }
        return UnkeyedNodeDecoder(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    /// Decodes one value, reading `Date`, `UUID` and `Data` in the codec's own form.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if type == Date.self {
            guard case .tag(CBORTag.epochDate, let inner) = value else { throw mismatch("tag 1 (date)") }
            switch inner {
            case .float(let seconds): return Date(timeIntervalSince1970: seconds) as! T
            case .unsigned(let seconds): return Date(timeIntervalSince1970: Double(seconds)) as! T
            case .negative(let n): return Date(timeIntervalSince1970: -1 - Double(n)) as! T
            default: throw mismatch("tag 1 over a number")
            }
        }
        if type == UUID.self {
            guard case .tag(CBORTag.uuid, .bytes(let bytes)) = value, bytes.count == 16 else {
                throw mismatch("tag 37 over 16 bytes (UUID)")
            }
            let uuid = bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
            return UUID(uuid: uuid) as! T
        }
        if type == CBORValue.self {
            return value as! T
        }
        if type == [UInt8].self {
            guard case .bytes(let bytes) = value else { throw mismatch("byte string") }
            return bytes as! T
        }
        if type == Data.self {
            guard case .bytes(let bytes) = value else { throw mismatch("byte string") }
            return Data(bytes) as! T
        }
        return try T(from: self)
    }
}

extension NodeDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool {
        if case .null = value { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let flag) = value else { throw mismatch("boolean") }
        return flag
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .text(let text) = value else { throw mismatch("text string") }
        return text
    }

    func decode(_ type: Double.Type) throws -> Double {
        guard case .float(let double) = value else { throw mismatch("float") }
        return double
    }

    func decode(_ type: Float.Type) throws -> Float {
        guard case .float(let double) = value else { throw mismatch("float") }
        return Float(double)
    }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        switch value {
        case .unsigned(let n):
            guard let result = T(exactly: n) else { throw outOfRange(String(n), T.self) }
            return result
        case .negative(let n):
            guard n <= UInt64(Int64.max), let result = T(exactly: -1 - Int64(n)) else {
                throw outOfRange("-1-\(n)", T.self)
            }
            return result
        default:
            throw mismatch("integer")
        }
    }

    private func outOfRange<T>(_ text: String, _ type: T.Type) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath, debugDescription: "integer \(text) does not fit \(T.self)"))
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

struct KeyedNodeDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    /// The map's entries (every key text), searched in place when there are
    /// few (a struct's fields); a dictionary indexes many (a `[String: T]`).
    private let entries: [(key: CBORValue, value: CBORValue)]
    private let index: [String: Int]?
    let codingPath: [any CodingKey]

    init(entries: [(key: CBORValue, value: CBORValue)], codingPath: [any CodingKey]) {
        self.entries = entries
        self.codingPath = codingPath
        if entries.count > 16 {
            var index: [String: Int] = [:]
            index.reserveCapacity(entries.count)
            for (position, entry) in entries.enumerated() {
                if case .text(let text) = entry.key { index[text] = position }
            }
            self.index = index
        } else {
            index = nil
        }
    }

    var allKeys: [Key] {
        entries.compactMap { entry in
            if case .text(let text) = entry.key { Key(stringValue: text) } else { nil }
        }
    }

    private func value(for key: Key) -> CBORValue? {
        let name = key.stringValue
        if let index { return index[name].map { entries[$0].value } }
        // From the end, so a repeated key reads as its last entry (as the index does).
        for entry in entries.reversed() {
            if case .text(let text) = entry.key, text == name { return entry.value }
        }
        return nil
    }

    func contains(_ key: Key) -> Bool { value(for: key) != nil }

    private func child(_ key: Key) throws -> NodeDecoder {
        guard let value = value(for: key) else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "required field `\(key.stringValue)` is missing"))
        }
        return NodeDecoder(value: value, parentPath: codingPath, key: key)
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

struct UnkeyedNodeDecoder: UnkeyedDecodingContainer {
    let items: [CBORValue]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(items: [CBORValue], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    private mutating func next() throws -> NodeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                .init(
                    codingPath: codingPath + [IndexKey(currentIndex)],
                    debugDescription: "array has only \(items.count) elements"))
        }
        defer { currentIndex += 1 }
        return NodeDecoder(value: items[currentIndex], parentPath: codingPath, key: IndexKey(currentIndex))
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, case .null = items[currentIndex] else { return false }
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
