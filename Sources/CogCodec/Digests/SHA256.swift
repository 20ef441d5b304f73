internal import CSHA256

/// SHA-256 (FIPS 180-4), for the `state` table's digest keys (a key too
/// long for LMDB is stored under the digest of its encoding), request
/// digests and the state digest's entry hashes (`turnlog.md` §2, §3, §3a).
/// The toolchain ships no hash on Linux, so it is written out here.
///
/// Streaming: `update` with the message's pieces, then `finish()`; or
/// `SHA256.hash(message)` at once. A commit hashes every write's entry (the
/// state digest), so blocks are compressed in place with no allocation —
/// with the CPU's SHA instructions where it has them (x86-64 SHA-NI, through
/// the `CSHA256` shim: about ten times faster), else by the rounds below.
package struct SHA256 {
    /// Whether the SHA instructions are there (asked once).
    private static let hardware = cogd_sha256_hardware_available() != 0

    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// The eight working words, h0 first (a homogeneous tuple: contiguous, for the shim).
    private var words: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
    )
    /// Bytes of an unfinished block (64 bytes of room).
    private var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var pendingCount = 0
    /// Message bytes so far.
    private var length: UInt64 = 0
    /// Compress with the rounds below even where the instructions are (tests compare the two).
    private var software = false

    package init() {}

    /// A hasher that never uses the SHA instructions (tests).
    package static func softwareOnly() -> SHA256 {
        var hasher = SHA256()
        hasher.software = true
        return hasher
    }

    /// The 32-byte digest of `message`.
    package static func hash(_ message: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        message.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }

    /// The first 16 bytes of the SHA-256 of the `count` bytes `write` lays
    /// out, as one big-endian number: the message is written, padded and
    /// compressed in one temporary buffer (on the stack when small, as a
    /// state entry's mostly is), with no streaming.
    package static func prefix128(count: Int, _ write: (UnsafeMutableRawPointer) -> Void) -> UInt128 {
        let blocks = (count + 9 + 63) / 64
        return withUnsafeTemporaryAllocation(byteCount: blocks * 64, alignment: 16) { buffer in
            let base = buffer.baseAddress!
            write(base)
            (base + count).initializeMemory(as: UInt8.self, repeating: 0, count: blocks * 64 - count)
            base.storeBytes(of: 0x80, toByteOffset: count, as: UInt8.self)
            base.storeBytes(of: (UInt64(count) &* 8).bigEndian, toByteOffset: blocks * 64 - 8, as: UInt64.self)
            var hasher = SHA256()
            hasher.compress(UnsafeRawPointer(base), blocks: blocks)
            return hasher.prefix128
        }
    }

    /// Adds `bytes` to the message.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var from = bytes.baseAddress, !bytes.isEmpty else { return }
        var remaining = bytes.count
        length &+= UInt64(remaining)
        if pendingCount > 0 {
            let taken = min(64 - pendingCount, remaining)
            withUnsafeMutableBytes(of: &pending) { block in
                (block.baseAddress! + pendingCount).copyMemory(from: from, byteCount: taken)
            }
            pendingCount += taken
            from += taken
            remaining -= taken
            guard pendingCount == 64 else { return }
            var block = pending
            withUnsafeBytes(of: &block) { compress($0.baseAddress!, blocks: 1) }
            pendingCount = 0
        }
        if remaining >= 64 {
            compress(from, blocks: remaining / 64)
            from += remaining / 64 * 64
            remaining %= 64
        }
        if remaining > 0 {
            withUnsafeMutableBytes(of: &pending) { block in block.baseAddress!.copyMemory(from: from, byteCount: remaining) }
            pendingCount = remaining
        }
    }

    /// The 32-byte digest (the hasher is spent).
    package mutating func finish() -> [UInt8] {
        pad()
        return withUnsafeBytes(of: words) { raw in
            (0..<32).map { UInt8(truncatingIfNeeded: raw.load(fromByteOffset: $0 & ~3, as: UInt32.self) >> UInt32(24 - ($0 & 3) * 8)) }
        }
    }

    /// The first 16 bytes of the digest as one big-endian 128-bit number (the hasher is spent).
    package mutating func finishPrefix128() -> UInt128 {
        pad()
        return prefix128
    }

    private var prefix128: UInt128 {
        UInt128(words.0) << 96 | UInt128(words.1) << 64 | UInt128(words.2) << 32 | UInt128(words.3)
    }

    /// Pads the message (a 1 bit, zeros to 56 mod 64 bytes, its bit length) and compresses the rest.
    private mutating func pad() {
        let bitLength = length &* 8
        var padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0, 0)
        let padCount = pendingCount < 56 ? 56 - pendingCount : 120 - pendingCount
        withUnsafeMutableBytes(of: &padding) { pad in
            pad[0] = 0x80
            for index in 0..<8 { pad[padCount + index] = UInt8(truncatingIfNeeded: bitLength >> UInt64(56 - 8 * index)) }
            let saved = length
            update(UnsafeRawBufferPointer(rebasing: pad[..<(padCount + 8)]))
            length = saved
        }
    }

    /// Compresses `blocks` consecutive 64-byte blocks.
    private mutating func compress(_ data: UnsafeRawPointer, blocks: Int) {
        if SHA256.hardware && !software {
            withUnsafeMutableBytes(of: &words) { state in
                cogd_sha256_hardware_compress(
                    state.baseAddress!.assumingMemoryBound(to: UInt32.self), data.assumingMemoryBound(to: UInt8.self), blocks)
            }
            return
        }
        for block in 0..<blocks { compressInSoftware(data + block * 64) }
    }

    /// One 64-byte block, round by round.
    private mutating func compressInSoftware(_ block: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { schedule in
            let w = schedule.baseAddress!
            for index in 0..<16 {
                w[index] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self))
            }
            for index in 16..<64 {
                let early = w[index - 15]
                let late = w[index - 2]
                let sigma0 = early.rotatedRight(7) ^ early.rotatedRight(18) ^ (early &>> 3)
                let sigma1 = late.rotatedRight(17) ^ late.rotatedRight(19) ^ (late &>> 10)
                w[index] = w[index - 16] &+ sigma0 &+ w[index - 7] &+ sigma1
            }
            var (a, b, c, d, e, f, g, h) = words
            SHA256.roundConstants.withUnsafeBufferPointer { constants in
                let k = constants.baseAddress!
                for index in 0..<64 {
                    let sum1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
                    let choice = (e & f) ^ (~e & g)
                    let first = h &+ sum1 &+ choice &+ k[index] &+ w[index]
                    let sum0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
                    let majority = (a & b) ^ (a & c) ^ (b & c)
                    let second = sum0 &+ majority
                    (h, g, f, e, d, c, b, a) = (g, f, e, d &+ first, c, b, a, first &+ second)
                }
            }
            words = (
                words.0 &+ a, words.1 &+ b, words.2 &+ c, words.3 &+ d, words.4 &+ e, words.5 &+ f, words.6 &+ g, words.7 &+ h
            )
        }
    }
}

extension SHA256 {
    /// The 32-byte digest of `message` without the SHA instructions (tests compare the two paths).
    package static func softwareHash(_ message: [UInt8]) -> [UInt8] {
        var hasher = SHA256.softwareOnly()
        message.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }

    /// Whether this process compresses with the SHA instructions.
    package static var usesHardware: Bool { hardware }
}

extension UInt32 {
    /// Masking shifts: one rotate instruction (`>>` checks for overshift).
    @inline(__always)
    fileprivate func rotatedRight(_ count: UInt32) -> UInt32 { (self &>> count) | (self &<< (32 &- count)) }
}
