internal import CCRC32C

/// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and
/// final XOR 0xFFFFFFFF), the checksum of every turn record
/// (`protocol/turnlog.md` §3). `CRC32C.checksum(Array("123456789".utf8))`
/// is 0xE3069283, the standard check value.
///
/// With the CPU's CRC32 instruction where it has one (SSE 4.2, through the
/// `CCRC32C` shim), eight bytes an instruction; else table-driven, eight
/// bytes a step ("slicing by 8"), about a byte per cycle.
package enum CRC32C {
    /// Whether the CRC32 instruction is there (asked once).
    private static let hardware = cogd_crc32c_hardware_available() != 0

    /// Eight tables of 256 entries, back to back: table `k` gives the CRC of
    /// a byte followed by `k` zero bytes.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[byte] = crc
        }
        for byte in 0..<256 {
            var crc = tables[byte]
            for slice in 1..<8 {
                crc = (crc >> 8) ^ tables[Int(crc & 0xff)]
                tables[slice * 256 + byte] = crc
            }
        }
        return tables
    }()

    /// The CRC-32C of `bytes`.
    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        update(0xFFFF_FFFF, bytes) ^ 0xFFFF_FFFF
    }

    package static func checksum<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> UInt32 {
        if let crc = bytes.withContiguousStorageIfAvailable({ checksum(UnsafeRawBufferPointer($0)) }) { return crc }
        return Array(bytes).withUnsafeBytes { checksum($0) }
    }

    /// Continues a CRC (not yet finally XORed) over `bytes`.
    package static func update(_ start: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return start }
        if hardware { return cogd_crc32c_hardware_update(start, base.assumingMemoryBound(to: UInt8.self), bytes.count) }
        return softwareUpdate(start, bytes)
    }

    /// `update` by tables (also where the instruction is missing; tests compare the two).
    package static func softwareUpdate(_ start: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = start
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        var index = 0
        let count = bytes.count
        tables.withUnsafeBufferPointer { t in
            while count - index >= 8 {
                var low: UInt32 = 0
                var high: UInt32 = 0
                for shift in 0..<4 { low |= UInt32(base.load(fromByteOffset: index + shift, as: UInt8.self)) << (8 * shift) }
                for shift in 0..<4 { high |= UInt32(base.load(fromByteOffset: index + 4 + shift, as: UInt8.self)) << (8 * shift) }
                low ^= crc
                crc = t[7 * 256 + Int(low & 0xff)] ^ t[6 * 256 + Int((low >> 8) & 0xff)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xff)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xff)] ^ t[2 * 256 + Int((high >> 8) & 0xff)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xff)] ^ t[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = (crc >> 8) ^ t[Int((crc ^ UInt32(base.load(fromByteOffset: index, as: UInt8.self))) & 0xff)]
                index += 1
            }
        }
        return crc
    }
}
