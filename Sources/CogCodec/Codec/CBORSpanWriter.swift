import Foundation

/// Writes deterministic CBOR into memory the caller has already sized, with
/// no capacity checks: the hot paths (turn records, reply frames) first add
/// up their exact size with the `size` functions, allocate once, then write.
/// Every write must have been counted; writing past the span is undefined.
package struct CBORSpanWriter {
    package private(set) var cursor: UnsafeMutablePointer<UInt8>

    package init(_ start: UnsafeMutablePointer<UInt8>) {
        cursor = start
    }

    // MARK: Sizes

    /// Bytes of a head carrying `argument`.
    @inline(__always)
    package static func headSize(_ argument: UInt64) -> Int {
        argument < 24 ? 1 : argument <= 0xff ? 2 : argument <= 0xffff ? 3 : argument <= 0xffff_ffff ? 5 : 9
    }

    /// Bytes of the head that starts with `initial` (its first byte).
    @inline(__always)
    package static func headLength(_ initial: UInt8) -> Int {
        switch initial & 0x1f {
        case 24: 2
        case 25: 3
        case 26: 5
        case 27: 9
        default: 1
        }
    }

    /// Bytes of a text string.
    @inline(__always)
    package static func textSize(_ text: String) -> Int {
        let count = text.utf8.count
        return headSize(UInt64(count)) + count
    }

    /// Bytes of a text string known at compile time (a map key).
    @inline(__always)
    package static func textSize(_ text: StaticString) -> Int {
        headSize(UInt64(text.utf8CodeUnitCount)) + text.utf8CodeUnitCount
    }

    /// Bytes of a float in its shortest exact form.
    @inline(__always)
    package static func floatSize(_ value: Double) -> Int {
        CBORFloat(value).size
    }

    // MARK: Writing

    @inline(__always)
    package mutating func head(major: UInt8, _ argument: UInt64) {
        let type = major << 5
        if argument < 24 {
            cursor.pointee = type | UInt8(truncatingIfNeeded: argument)
            cursor += 1
        } else if argument <= 0xff {
            cursor[0] = type | 24
            cursor[1] = UInt8(truncatingIfNeeded: argument)
            cursor += 2
        } else if argument <= 0xffff {
            cursor.pointee = type | 25
            bigEndian(UInt16(truncatingIfNeeded: argument), at: cursor + 1)
            cursor += 3
        } else if argument <= 0xffff_ffff {
            cursor.pointee = type | 26
            bigEndian(UInt32(truncatingIfNeeded: argument), at: cursor + 1)
            cursor += 5
        } else {
            cursor.pointee = type | 27
            bigEndian(argument, at: cursor + 1)
            cursor += 9
        }
    }

    @inline(__always)
    package mutating func text(_ text: StaticString) {
        head(major: 3, UInt64(text.utf8CodeUnitCount))
        copy(text.utf8Start, count: text.utf8CodeUnitCount)
    }

    @inline(__always)
    package mutating func text(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            head(major: 3, UInt64(utf8.count))
            if let base = utf8.baseAddress { copy(base, count: utf8.count) }
        }
    }

    /// Copies an already-encoded item.
    @inline(__always)
    package mutating func raw(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            if let base = buffer.baseAddress { copy(base, count: buffer.count) }
        }
    }

    /// Copies `count` bytes; short runs (keys, names) byte by byte, which
    /// beats a call to `memmove` at these sizes.
    @inline(__always)
    private mutating func copy(_ source: UnsafePointer<UInt8>, count: Int) {
        if count <= 16 {
            for index in 0..<count { cursor[index] = source[index] }
        } else {
            cursor.update(from: source, count: count)
        }
        cursor += count
    }

    @inline(__always)
    package mutating func byte(_ byte: UInt8) {
        cursor.pointee = byte
        cursor += 1
    }

    package mutating func float(_ value: Double) {
        let encoded = CBORFloat(value)
        cursor.pointee = encoded.initial
        switch encoded.size {
        case 3: bigEndian(UInt16(truncatingIfNeeded: encoded.bits), at: cursor + 1)
        case 5: bigEndian(UInt32(truncatingIfNeeded: encoded.bits), at: cursor + 1)
        default: bigEndian(encoded.bits, at: cursor + 1)
        }
        cursor += encoded.size
    }

    @inline(__always)
    private func bigEndian<T: FixedWidthInteger>(_ value: T, at position: UnsafeMutablePointer<UInt8>) {
        UnsafeMutableRawPointer(position).storeBytes(of: value.bigEndian, as: T.self)
    }
}

/// A float in the shortest of half, single or double precision that keeps it
/// exactly (RFC 8949 §4.2.1): the initial byte, the bits, and the total size.
struct CBORFloat {
    let initial: UInt8
    let bits: UInt64
    let size: Int

    init(_ value: Double) {
        if value.isNaN {
            (initial, bits, size) = (0xf9, 0x7e00, 3)
            return
        }
        let single = Float(value)
        if Double(single) == value {
            if let half = CBORFloat.exactHalf(single) {
                (initial, bits, size) = (0xf9, UInt64(half), 3)
            } else {
                (initial, bits, size) = (0xfa, UInt64(single.bitPattern), 5)
            }
        } else {
            (initial, bits, size) = (0xfb, value.bitPattern, 9)
        }
    }

    /// The IEEE 754 half-precision bits of `value`, if it converts exactly.
    private static func exactHalf(_ value: Float) -> UInt16? {
        let bits = value.bitPattern
        let sign = UInt16((bits >> 16) & 0x8000)
        let exponent = Int((bits >> 23) & 0xff)
        let mantissa = bits & 0x7f_ffff
        if exponent == 0xff { return sign | 0x7c00 | UInt16(mantissa >> 13) }  // infinity (NaN handled earlier)
        if exponent == 0 && mantissa == 0 { return sign }  // ±0
        let unbiased = exponent - 127
        if unbiased >= -14 && unbiased <= 15 {
            guard mantissa & 0x1fff == 0 else { return nil }
            return sign | UInt16(unbiased + 15) << 10 | UInt16(mantissa >> 13)
        }
        if unbiased >= -24 && unbiased < -14 {
            // Subnormal half: value = m × 2^-24 with m < 1024.
            let full = mantissa | 0x80_0000
            let shift = -unbiased - 14 + 13
            guard full & ((1 << shift) - 1) == 0 else { return nil }
            return sign | UInt16(full >> shift)
        }
        return nil
    }
}
