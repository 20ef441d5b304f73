/// SHA-256 (FIPS 180-4), for the `state` table's digest keys (a key too
/// long for LMDB is stored under the digest of its encoding), request
/// digests and the state digest's entry hashes (`turnlog.md` §2, §3). The
/// toolchain ships no hash on Linux, so it is written out here.
///
/// Streaming: `update` with the message's pieces, then `finish()`; or
/// `SHA256.hash(message)` at once. The state digest hashes every write
/// twice (its old and new entry), so the compression runs over the bytes in
/// place, with its state and schedule on the stack: no allocation per block
/// or per hash.
struct SHA256 {
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

    private var h0: UInt32 = 0x6a09_e667, h1: UInt32 = 0xbb67_ae85, h2: UInt32 = 0x3c6e_f372, h3: UInt32 = 0xa54f_f53a
    private var h4: UInt32 = 0x510e_527f, h5: UInt32 = 0x9b05_688c, h6: UInt32 = 0x1f83_d9ab, h7: UInt32 = 0x5be0_cd19
    /// Bytes of an unfinished block (64 bytes of room).
    private var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var pendingCount = 0
    /// Message bytes so far.
    private var length: UInt64 = 0

    init() {}

    /// The 32-byte digest of `message`.
    static func hash(_ message: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        message.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }

    /// Adds `bytes` to the message.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
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
            withUnsafeBytes(of: &block) { compress($0.baseAddress!) }
            pendingCount = 0
        }
        while remaining >= 64 {
            compress(from)
            from += 64
            remaining -= 64
        }
        if remaining > 0 {
            withUnsafeMutableBytes(of: &pending) { block in block.baseAddress!.copyMemory(from: from, byteCount: remaining) }
            pendingCount = remaining
        }
    }

    /// Adds a 32-bit unsigned integer, big-endian.
    mutating func update(bigEndian value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { update($0) }
    }

    /// The 32-byte digest (the hasher is spent).
    mutating func finish() -> [UInt8] {
        finishWords()
        return [h0, h1, h2, h3, h4, h5, h6, h7].flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> UInt32(24 - $0 * 8)) } }
    }

    /// The first 16 bytes of the digest as one big-endian 128-bit number.
    mutating func finishPrefix128() -> UInt128 {
        finishWords()
        return UInt128(h0) << 96 | UInt128(h1) << 64 | UInt128(h2) << 32 | UInt128(h3)
    }

    /// Pads the message (a 1 bit, zeros to 56 mod 64 bytes, its bit length) and compresses the rest.
    private mutating func finishWords() {
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

    /// One 64-byte block.
    private mutating func compress(_ block: UnsafeRawPointer) {
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
            var (a, b, c, d, e, f, g, h) = (h0, h1, h2, h3, h4, h5, h6, h7)
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
            h0 &+= a
            h1 &+= b
            h2 &+= c
            h3 &+= d
            h4 &+= e
            h5 &+= f
            h6 &+= g
            h7 &+= h
        }
    }
}

extension UInt32 {
    /// Masking shifts: one rotate instruction (`>>` checks for overshift).
    @inline(__always)
    fileprivate func rotatedRight(_ count: UInt32) -> UInt32 { (self &>> count) | (self &<< (32 &- count)) }
}
