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

    /// How many bytes have been read.
    package var position: Int { offset }

    /// Whether the bytes from `start` to here are a turn record carrying its
    /// own checksum (`TurnRecordChecksum`).
    package func checksumMatches(recordFrom start: Int) -> Bool {
        guard start <= offset else { return false }
        return bytes.withUnsafeBytes { TurnRecordChecksum.matches(UnsafeRawBufferPointer(rebasing: $0[start..<offset])) }
    }

    /// Reads `true` if it comes next.
    package mutating func skipTrue() -> Bool {
        guard offset < bytes.count, bytes[offset] == 0xf5 else { return false }
        offset += 1
        return true
    }

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

    /// The head of an array; its element count.
    package mutating func arrayCount() -> UInt64? {
        let saved = offset
        guard let (major, argument) = head(), major == 4 else {
            offset = saved
            return nil
        }
        return argument
    }

    /// Reads `null` if it comes next.
    package mutating func skipNull() -> Bool {
        guard offset < bytes.count, bytes[offset] == 0xf6 else { return false }
        offset += 1
        return true
    }

    /// A float (half, single or double precision).
    package mutating func float() -> Double? {
        guard offset < bytes.count else { return nil }
        let initial = bytes[offset]
        let width: Int
        switch initial {
        case 0xf9: width = 2
        case 0xfa: width = 4
        case 0xfb: width = 8
        default: return nil
        }
        guard bytes.count - offset > width else { return nil }
        var bits: UInt64 = 0
        for index in 0..<width { bits = bits << 8 | UInt64(bytes[offset + 1 + index]) }
        offset += 1 + width
        switch width {
        case 2: return Double(Float16Bits.float(UInt16(bits)))
        case 4: return Double(Float(bitPattern: UInt32(bits)))
        default: return Double(bitPattern: bits)
        }
    }

    /// A tag-1 date: seconds since 1970 as a float or an integer.
    package mutating func epochSeconds() -> Double? {
        guard let (major, tag) = head(), major == 6, tag == CBORTag.epochDate, offset < bytes.count else { return nil }
        switch bytes[offset] {
        case 0xf9, 0xfa, 0xfb:
            return float()
        default:
            guard let (major, argument) = head() else { return nil }
            switch major {
            case 0: return Double(argument)
            case 1: return -1 - Double(argument)
            default: return nil
            }
        }
    }

    /// The bytes of the next complete item (an embedded key or value), skipped.
    package mutating func item() -> ArraySlice<UInt8>? {
        let start = offset
        guard skipItem(depth: 0) else {
            offset = start
            return nil
        }
        return bytes[start..<offset]
    }

    private mutating func skipItem(depth: Int) -> Bool {
        guard depth < 256, offset < bytes.count else { return false }
        let initial = bytes[offset]
        if initial >> 5 == 7 {
            // Simple values and floats: false, true, null, half, single, double.
            let width: Int
            switch initial {
            case 0xf4, 0xf5, 0xf6: width = 0
            case 0xf9: width = 2
            case 0xfa: width = 4
            case 0xfb: width = 8
            default: return false
            }
            guard bytes.count - offset > width else { return false }
            offset += 1 + width
            return true
        }
        guard let (major, argument) = head() else { return false }
        switch major {
        case 0, 1:
            return true
        case 2, 3:
            guard argument <= UInt64(bytes.count - offset) else { return false }
            offset += Int(argument)
            return true
        case 4:
            for _ in 0..<argument where !skipItem(depth: depth + 1) { return false }
            return true
        case 5:
            for _ in 0..<argument where !(skipItem(depth: depth + 1) && skipItem(depth: depth + 1)) { return false }
            return true
        default:  // 6: a tag over one item
            return skipItem(depth: depth + 1)
        }
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
        return UTF8Text.validated(bytes, span)
    }

    /// Reads the text `expected` if it comes next; otherwise reads nothing.
    package mutating func skip(text expected: StaticString) -> Bool {
        let saved = offset
        // Compared as memory, not by a slice's generic `elementsEqual` (a byte
        // and an index check at a time, on every op frame's keys).
        guard let span = span(major: 3),
            StreamItem.bytes(bytes, at: span, equal: UnsafeRawBufferPointer(start: expected.utf8Start, count: expected.utf8CodeUnitCount))
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

/// IEEE 754 half precision to single (CBOR's shortest floats).
enum Float16Bits {
    static func float(_ half: UInt16) -> Float {
        let sign: Float = half & 0x8000 != 0 ? -1 : 1
        let exponent = Int((half >> 10) & 0x1f)
        let mantissa = Float(half & 0x3ff)
        switch exponent {
        case 0: return sign * mantissa * Float(sign: .plus, exponent: -24, significand: 1)
        case 31: return mantissa == 0 ? sign * .infinity : .nan
        default: return sign * (1 + mantissa / 1024) * Float(sign: .plus, exponent: exponent - 15, significand: 1)
        }
    }
}
