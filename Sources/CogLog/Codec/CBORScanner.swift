/// Reads deterministic CBOR item by item, for hot paths that know the exact
/// layout to expect (an `op` frame): no tree is built, and any surprise —
/// another key, another type, a truncation — reads as `nil`, so the caller
/// falls back to the general decoder, which names the problem.
package struct CBORScanner {
    private let bytes: [UInt8]
    private var offset = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Whether every byte has been read.
    package var isAtEnd: Bool { offset == bytes.count }

    /// The next head as (major type, argument); nil for an indefinite length,
    /// a reserved value or truncation.
    package mutating func head() -> (major: UInt8, argument: UInt64)? {
        guard offset < bytes.count else { return nil }
        let initial = bytes[offset]
        let info = initial & 0x1f
        let width: Int
        switch info {
        case 0..<24: width = 0
        case 24: width = 1
        case 25: width = 2
        case 26: width = 4
        case 27: width = 8
        default: return nil
        }
        guard bytes.count - offset > width else { return nil }
        var argument = width == 0 ? UInt64(info) : 0
        for index in 0..<width { argument = argument << 8 | UInt64(bytes[offset + 1 + index]) }
        offset += 1 + width
        return (initial >> 5, argument)
    }

    /// An unsigned integer.
    package mutating func unsigned() -> UInt64? {
        guard let (major, argument) = head(), major == 0 else { return nil }
        return argument
    }

    /// The head of a map; its entry count.
    package mutating func mapCount() -> UInt64? {
        guard let (major, argument) = head(), major == 5 else { return nil }
        return argument
    }

    /// A byte string.
    package mutating func byteString() -> [UInt8]? {
        guard let span = span(major: 2) else { return nil }
        return Array(bytes[span])
    }

    /// A text string (valid UTF-8).
    package mutating func text() -> String? {
        guard let span = span(major: 3) else { return nil }
        return String(validating: bytes[span], as: UTF8.self)
    }

    /// Reads the text `expected` if it comes next; otherwise reads nothing.
    package mutating func skip(text expected: StaticString) -> Bool {
        let saved = offset
        guard let span = span(major: 3), span.count == expected.utf8CodeUnitCount,
            bytes[span].elementsEqual(UnsafeBufferPointer(start: expected.utf8Start, count: expected.utf8CodeUnitCount))
        else {
            offset = saved
            return false
        }
        return true
    }

    private mutating func span(major expected: UInt8) -> Range<Int>? {
        let saved = offset
        guard let (major, length) = head(), major == expected, length <= UInt64(bytes.count - offset) else {
            offset = saved
            return nil
        }
        let start = offset
        offset += Int(length)
        return start..<offset
    }
}
