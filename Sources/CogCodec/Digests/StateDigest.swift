/// The digest of the whole durable state: every record carries the digest
/// of the state after its turn (`state`), so a replica that applied the
/// record can tell at once whether it still holds what the leader holds
/// (normative in `protocol/turnlog.md` §3a).
///
/// Each entry of the state — a durable name, its encoded key (none for a
/// keyless source) and its encoded value (`f6` for a `nil` value) — has an
/// *entry hash*: the first 16 bytes of the SHA-256 of
///
///     u32 BE length of the name's UTF-8 ‖ the name's UTF-8
///     ‖ u32 BE length of the encoded key (0: keyless) ‖ the encoded key
///     ‖ the encoded value
///
/// read as a big-endian 128-bit number. The state digest is the sum of the
/// entry hashes of every entry, modulo 2^128, written as 16 bytes
/// big-endian; the empty state's is 16 zero bytes. A release removes its
/// entry. Being a sum, it is kept in O(writes): a write takes its entry's
/// old hash off and adds the new one.
///
/// ```swift
/// var digest = StateDigest()
/// digest.apply(name: "ledger.accounts", key: key, old: nil, new: value)
/// if record.stateDigest != digest { … }   // the replica diverged
/// ```
public struct StateDigest: Hashable, Sendable, CustomStringConvertible {
    /// Bytes of a digest (and of an entry hash).
    public static let size = 16

    /// The digest as a number (the sum of the entry hashes, mod 2^128).
    public private(set) var value: UInt128

    /// The empty state's digest.
    public init() { value = 0 }

    /// A digest given as its number (tests, and sums kept elsewhere).
    public init(value: UInt128) { self.value = value }

    /// A digest read from 16 bytes, big-endian; nil for any other length.
    public init?<Bytes: Collection<UInt8>>(bytes: Bytes) {
        guard bytes.count == StateDigest.size else { return nil }
        value = bytes.reduce(UInt128(0)) { $0 << 8 | UInt128($1) }
    }

    /// The digest of a whole state: one entry per `(name, key, value)`.
    public init<Entries: Sequence>(entries: Entries) where Entries.Element == (name: String, key: [UInt8]?, value: [UInt8]) {
        value = 0
        for entry in entries { value &+= StateDigest.entryHash(name: entry.name, key: entry.key, value: entry.value) }
    }

    /// The 16 bytes, big-endian.
    public var bytes: [UInt8] {
        (0..<StateDigest.size).map { UInt8(truncatingIfNeeded: value >> UInt128(8 * (StateDigest.size - 1 - $0))) }
    }

    /// 32 lowercase hex digits.
    public var description: String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Accounts for one write: the entry held `old` (nil: absent) and holds
    /// `new` now (nil: released).
    public mutating func apply(name: String, key: [UInt8]?, old: [UInt8]?, new: [UInt8]?) {
        if let old { value &-= StateDigest.entryHash(name: name, key: key, value: old) }
        if let new { value &+= StateDigest.entryHash(name: name, key: key, value: new) }
    }

    /// Replaces an entry whose hash was `old` (0: absent) by one whose hash
    /// is `new` (0: released): for callers that keep entry hashes (the store).
    package mutating func replace(entryHash old: UInt128, with new: UInt128) {
        value = value &- old &+ new
    }

    /// The entry hash of one entry (see the type's documentation).
    public static func entryHash(name: String, key: [UInt8]?, value: [UInt8]) -> UInt128 {
        var name = name
        return name.withUTF8 { name in
            (key ?? []).withUnsafeBytes { key in
                value.withUnsafeBytes { value in entryHash(name: UnsafeRawBufferPointer(name), key: key, value: value) }
            }
        }
    }

    /// The entry hash of one entry given as bytes (`key` empty: keyless).
    package static func entryHash(name: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> UInt128 {
        SHA256.prefix128(count: 8 + name.count + key.count + value.count) { message in
            func put(_ piece: UnsafeRawBufferPointer, at offset: Int) {
                if let bytes = piece.baseAddress, piece.count > 0 { (message + offset).copyMemory(from: bytes, byteCount: piece.count) }
            }
            message.storeBytes(of: UInt32(truncatingIfNeeded: name.count).bigEndian, as: UInt32.self)
            put(name, at: 4)
            message.storeBytes(of: UInt32(truncatingIfNeeded: key.count).bigEndian, toByteOffset: 4 + name.count, as: UInt32.self)
            put(key, at: 8 + name.count)
            put(value, at: 8 + name.count + key.count)
        }
    }
}
