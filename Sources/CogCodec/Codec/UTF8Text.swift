/// Text from bytes that must be valid UTF-8, for the decoders' hot path.
enum UTF8Text {
    /// The text `bytes[range]` spells, or nil when they are not valid UTF-8.
    ///
    /// All-ASCII text (names, keys, request ids: nearly every string on the
    /// wire) is built directly; `String(validating:as:)` is generic over the
    /// encoding and looks its metadata up at every call, which costed about
    /// 2% of the leader's serving thread.
    static func validated(_ bytes: [UInt8], _ range: Range<Int>) -> String? {
        bytes.withUnsafeBufferPointer { whole in
            let span = UnsafeBufferPointer(rebasing: whole[range])
            var ascii = true
            for byte in span where byte >= 0x80 {
                ascii = false
                break
            }
            return ascii ? String(decoding: span, as: UTF8.self) : String(validating: span, as: UTF8.self)
        }
    }

    /// Whether `bytes[range]` are valid UTF-8 (no string is made for ASCII).
    static func isValid(_ bytes: [UInt8], _ range: Range<Int>) -> Bool {
        let ascii = bytes.withUnsafeBufferPointer { whole in
            UnsafeBufferPointer(rebasing: whole[range]).allSatisfy { $0 < 0x80 }
        }
        return ascii || validated(bytes, range) != nil
    }
}
