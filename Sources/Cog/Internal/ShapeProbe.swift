/// A `Decoder` that answers every request with a placeholder (0, "", false,
/// no optional present, one array element) and notes what was asked for:
/// decoding a type from it once yields the type's JSON shape
/// (`OpArgumentShape.of`).
final class ShapeProbe: Decoder {
    /// The probe gave up: the type asked for something it cannot answer
    /// (its decoding depends on the values it reads, or it nests too deep).
    struct Failure: Error {}

    /// What the decoded value asked for, first request wins.
    private enum Request {
        case nothing
        case single(OpArgumentShape)
        case keyed([(name: String, isOptional: Bool, shape: () -> OpArgumentShape)])
        case unkeyed(element: (() -> OpArgumentShape)?)
    }

    let depth: Int
    /// What a text request answers (a `UUID` must parse).
    var textPlaceholder = ""
    private var request = Request.nothing

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(depth: Int) {
        self.depth = depth
    }

    /// The shape of what was decoded from this probe.
    var shape: OpArgumentShape {
        switch request {
        case .nothing: .unknown
        case .single(let shape): shape
        case .keyed(let fields): .object(fields.map { OpArgumentShape.Field(name: $0.name, shape: $0.shape(), isOptional: $0.isOptional) })
        case .unkeyed(let element): .array(element?() ?? .unknown)
        }
    }

    /// The shape of `type` and a placeholder value of it; throws when the
    /// type cannot be decoded from a probe.
    static func probe<T: Decodable>(_ type: T.Type, depth: Int) throws -> (shape: OpArgumentShape, value: T) {
        guard depth <= OpArgumentShape.maximumDepth else { throw Failure() }
        if let special = type as? any ProbedSpecially.Type {
            let (shape, value) = try special.probeSpecially(depth: depth)
            guard let value = value as? T else { throw Failure() }
            return (shape, value)
        }
        if let enumeration = type as? any (CaseIterable & RawRepresentable).Type, let cases = textCases(of: enumeration),
            let first = cases.first as? T
        {
            return (.oneOf(cases.texts), first)
        }
        let probe = ShapeProbe(depth: depth)
        // Foundation's types, named so Cog stays free of Foundation: the log's
        // codec writes them as CBOR tags and bytes, which JSON cannot carry.
        let opaque: String? =
            switch String(reflecting: type) {
            case "Foundation.Date", "FoundationEssentials.Date": "Date"
            case "Foundation.UUID", "FoundationEssentials.UUID": "UUID"
            case "Foundation.Data", "FoundationEssentials.Data": "Data"
            default: nil
            }
        if opaque == "UUID" { probe.textPlaceholder = "00000000-0000-0000-0000-000000000000" }
        let value = try T(from: probe)
        return (opaque.map(OpArgumentShape.opaque) ?? probe.shape, value)
    }

    /// The shape of `type`, `unknown` when it cannot be probed.
    static func shape<T: Decodable>(of type: T.Type, depth: Int) -> OpArgumentShape {
        (try? probe(type, depth: depth))?.shape ?? .unknown
    }

    /// The raw values of an enum of text cases, and its first case.
    private static func textCases<E: CaseIterable & RawRepresentable>(of type: E.Type) -> (texts: [String], first: Any)? {
        let texts = E.allCases.compactMap { $0.rawValue as? String }
        guard let first = E.allCases.first, texts.count == E.allCases.count else { return nil }
        return (texts, first)
    }

    fileprivate func single(_ shape: OpArgumentShape) {
        if case .nothing = request { request = .single(shape) }
    }

    fileprivate func field(_ name: String, isOptional: Bool, _ shape: @escaping () -> OpArgumentShape) {
        guard case .keyed(var fields) = request, !fields.contains(where: { $0.name == name }) else { return }
        fields.append((name, isOptional, shape))
        request = .keyed(fields)
    }

    fileprivate func element(_ shape: @escaping () -> OpArgumentShape) {
        if case .unkeyed(nil) = request { request = .unkeyed(element: shape) }
    }

    fileprivate var hasElement: Bool {
        if case .unkeyed(let element) = request { return element != nil || depth >= OpArgumentShape.maximumDepth }
        return true
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        switch request {
        case .nothing: request = .keyed([])
        case .keyed: break
        default: throw Failure()
        }
        return KeyedDecodingContainer(KeyedProbe<Key>(probe: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        switch request {
        case .nothing: request = .unkeyed(element: nil)
        case .unkeyed: break
        default: throw Failure()
        }
        return UnkeyedProbe(probe: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleProbe(probe: self)
    }
}

/// A type the probe shapes without decoding it (it would read nothing
/// useful from a probe): `Optional`, `Dictionary`.
protocol ProbedSpecially {
    static func probeSpecially(depth: Int) throws -> (OpArgumentShape, Any)
}

extension Optional: ProbedSpecially where Wrapped: Decodable {
    static func probeSpecially(depth: Int) throws -> (OpArgumentShape, Any) {
        (.optional(ShapeProbe.shape(of: Wrapped.self, depth: depth + 1)), Wrapped?.none as Any)
    }
}

extension Dictionary: ProbedSpecially where Key: Decodable, Value: Decodable {
    static func probeSpecially(depth: Int) throws -> (OpArgumentShape, Any) {
        // Only text keys make a JSON object; other keys have no JSON form `cogd call` sends.
        let shape: OpArgumentShape = Key.self == String.self ? .dictionary(ShapeProbe.shape(of: Value.self, depth: depth + 1)) : .unknown
        return (shape, [Key: Value]())
    }
}

private struct KeyedProbe<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let probe: ShapeProbe

    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }
    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let (shape, value) = try ShapeProbe.probe(type, depth: probe.depth + 1)
        probe.field(key.stringValue, isOptional: false) { shape }
        return value
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        let shape = ShapeProbe.shape(of: type, depth: probe.depth + 1)
        probe.field(key.stringValue, isOptional: true) { shape }
        return nil
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decode(type as Bool.Type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decode(type as String.Type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decode(type as Double.Type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decode(type as Float.Type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decode(type as Int.Type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decode(type as Int8.Type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decode(type as Int16.Type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decode(type as Int32.Type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decode(type as Int64.Type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decode(type as UInt.Type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decode(type as UInt8.Type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decode(type as UInt16.Type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decode(type as UInt32.Type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decode(type as UInt64.Type, key) }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try present(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try present(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try present(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try present(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try present(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try present(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try present(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try present(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try present(type, key) }

    /// The generic paths under names of their own, so the overloads above
    /// cannot call themselves.
    private func decode<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T { try decode(type, forKey: key) as T }
    private func present<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? { try decodeIfPresent(type, forKey: key) as T? }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let nested = ShapeProbe(depth: probe.depth + 1)
        guard nested.depth <= OpArgumentShape.maximumDepth else { throw ShapeProbe.Failure() }
        probe.field(key.stringValue, isOptional: false) { nested.shape }
        return try nested.container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let nested = ShapeProbe(depth: probe.depth + 1)
        guard nested.depth <= OpArgumentShape.maximumDepth else { throw ShapeProbe.Failure() }
        probe.field(key.stringValue, isOptional: false) { nested.shape }
        return try nested.unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { throw ShapeProbe.Failure() }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw ShapeProbe.Failure() }
}

private struct UnkeyedProbe: UnkeyedDecodingContainer {
    let probe: ShapeProbe

    var codingPath: [any CodingKey] { [] }
    var count: Int? { nil }
    /// One element, then the end (at the depth limit, none).
    var isAtEnd: Bool { probe.hasElement }
    var currentIndex: Int { probe.hasElement ? 1 : 0 }

    mutating func decodeNil() throws -> Bool { false }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (shape, value) = try ShapeProbe.probe(type, depth: probe.depth + 1)
        probe.element { shape }
        return value
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try element(type) }
    mutating func decode(_ type: String.Type) throws -> String { try element(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try element(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try element(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try element(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try element(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try element(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try element(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try element(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try element(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try element(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try element(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try element(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try element(type) }

    private mutating func element<T: Decodable>(_ type: T.Type) throws -> T { try decode(type) as T }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let nested = ShapeProbe(depth: probe.depth + 1)
        guard nested.depth <= OpArgumentShape.maximumDepth else { throw ShapeProbe.Failure() }
        probe.element { nested.shape }
        return try nested.container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let nested = ShapeProbe(depth: probe.depth + 1)
        guard nested.depth <= OpArgumentShape.maximumDepth else { throw ShapeProbe.Failure() }
        probe.element { nested.shape }
        return try nested.unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { throw ShapeProbe.Failure() }
}

private struct SingleProbe: SingleValueDecodingContainer {
    let probe: ShapeProbe

    var codingPath: [any CodingKey] { [] }
    func decodeNil() -> Bool { false }

    func decode(_ type: Bool.Type) throws -> Bool { note(.boolean, false) }
    func decode(_ type: String.Type) throws -> String { note(.string, probe.textPlaceholder) }
    func decode(_ type: Double.Type) throws -> Double { note(.number, 0) }
    func decode(_ type: Float.Type) throws -> Float { note(.number, 0) }
    func decode(_ type: Int.Type) throws -> Int { note(.integer, 0) }
    func decode(_ type: Int8.Type) throws -> Int8 { note(.integer, 0) }
    func decode(_ type: Int16.Type) throws -> Int16 { note(.integer, 0) }
    func decode(_ type: Int32.Type) throws -> Int32 { note(.integer, 0) }
    func decode(_ type: Int64.Type) throws -> Int64 { note(.integer, 0) }
    func decode(_ type: UInt.Type) throws -> UInt { note(.integer, 0) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { note(.integer, 0) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { note(.integer, 0) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { note(.integer, 0) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { note(.integer, 0) }

    /// A wrapper decoding what it wraps (`struct ID { let raw: Int }` with its own `init(from:)`).
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (shape, value) = try ShapeProbe.probe(type, depth: probe.depth + 1)
        probe.single(shape)
        return value
    }

    private func note<T>(_ shape: OpArgumentShape, _ value: T) -> T {
        probe.single(shape)
        return value
    }
}
