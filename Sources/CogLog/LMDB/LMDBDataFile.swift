import CogCodec
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Checks `data.mdb` against what LMDB's own meta pages claim, before LMDB
/// maps it: a file shorter than its last page makes any read of that page
/// a SIGBUS, which no error handling can catch.
///
/// The layout (LMDB 0.9, 64-bit; checked against a hexdump of a real file):
/// pages 0 and 1 are meta pages, each a 16-byte page header followed by
/// `MDB_meta`: the magic `0xBEEFC0DE` (little-endian u32) at byte 16, the
/// page size (the free database's `md_pad`, u32) at byte 40, the last page
/// number (u64) at byte 136 and the transaction id (u64) at byte 144. The
/// meta page with the higher transaction id is the current one; the file
/// must hold at least (last page + 1) × page size bytes.
enum LMDBDataFile {
    static let magic: UInt32 = 0xBEEF_C0DE

    struct Meta: Equatable {
        var pageSize: UInt32
        var lastPage: UInt64
        var transaction: UInt64
        /// The root page of the free database (`P_INVALID`, all ones: empty).
        var freeRoot: UInt64 = .max
    }

    /// Throws unless `directory/data.mdb` is absent, empty (LMDB creates it),
    /// or at least as long as its current meta page says.
    static func check(directory: String) throws(TurnStoreError) {
        let path = directory + "/data.mdb"
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return }
            throw TurnStoreError(code: .lmdb, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        do {
            try checkOnce(descriptor, path: path)
        } catch {
            // A writer may have been rewriting a meta page under the read: read once more.
            try checkOnce(descriptor, path: path)
        }
    }

    private static func checkOnce(_ descriptor: Int32, path: String) throws(TurnStoreError) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw TurnStoreError(code: .lmdb, message: "cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        let size = UInt64(max(0, status.st_size))
        guard size > 0 else { return }
        guard let first = readMeta(descriptor, at: 0) else {
            throw TurnStoreError(
                code: .corrupt, message: "\(path) is truncated or not an LMDB file: \(size) bytes, and no LMDB meta page at its start")
        }
        let second = readMeta(descriptor, at: UInt64(first.pageSize))
        let current = second.map { $0.transaction > first.transaction ? $0 : first } ?? first
        let (pages, pagesOverflow) = current.lastPage.addingReportingOverflow(1)
        let (needed, neededOverflow) = pages.multipliedReportingOverflow(by: UInt64(current.pageSize))
        guard !pagesOverflow, !neededOverflow else {
            throw TurnStoreError(code: .corrupt, message: "\(path) is damaged: its meta page claims \(current.lastPage) as its last page")
        }
        let minimum = max(needed, 2 * UInt64(first.pageSize))
        // The size again, after the meta pages were read: a writer extends the
        // file before it writes the meta page that counts the new pages, so
        // a size read before the meta could be older than it (beside a
        // writer that commits, that was a false "truncated").
        guard fstat(descriptor, &status) == 0 else {
            throw TurnStoreError(code: .lmdb, message: "cannot stat \(path): \(String(cString: strerror(errno)))")
        }
        let sizeNow = UInt64(max(0, status.st_size))
        // A commit can count pages it took from the end of the file and freed
        // again before it ended ("loose" pages, e.g. a leaf emptied by a
        // deletion) without writing them: the file then ends before the last
        // page the meta names, and those pages are on LMDB's free list, never
        // read. Only then is a shorter file sound.
        if sizeNow < minimum, sizeNow >= 2 * UInt64(first.pageSize),
            tailIsFree(descriptor, current, filePages: sizeNow / UInt64(current.pageSize))
        {
            return
        }
        guard sizeNow >= minimum else {
            throw TurnStoreError(
                code: .corrupt, message: "data.mdb is truncated: \(sizeNow) bytes, LMDB's meta page says at least \(minimum) (\(path))")
        }
    }

    /// Takes back the file's last committed transaction, `transaction`, with
    /// the environment closed: the meta page that names it is overwritten
    /// with the other one, which names the transaction before — LMDB keeps
    /// both, and a transaction writes only pages the one before it did not
    /// use, so the tree the older meta page names is whole. LMDB 0.9.27
    /// calls the same view `MDB_PREVSNAPSHOT`; 0.9.24, Debian's, has no such
    /// flag. The next commit writes its meta page over the taken-back
    /// transaction's slot, which it numbers again.
    ///
    /// Refuses unless the newer meta page names `transaction` and the older
    /// one the transaction just before it (then nothing else committed since).
    static func takeBackLastTransaction(directory: String, transaction: UInt64) throws(TurnStoreError) {
        let path = directory + "/data.mdb"
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw TurnStoreError(code: .lmdb, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        guard let first = readMeta(descriptor, at: 0), let second = readMeta(descriptor, at: UInt64(first.pageSize)) else {
            throw TurnStoreError(code: .corrupt, message: "\(path) has no two LMDB meta pages")
        }
        let (newer, older): (UInt64, UInt64) = second.transaction > first.transaction ? (UInt64(first.pageSize), 0) : (0, UInt64(first.pageSize))
        let (newest, previous) = second.transaction > first.transaction ? (second, first) : (first, second)
        guard newest.transaction == transaction, transaction > 0, previous.transaction == transaction - 1 else {
            throw TurnStoreError(
                code: .outOfOrder,
                message: "\(path) ends at LMDB transaction \(newest.transaction) after \(previous.transaction), not at \(transaction) "
                    + "after \(transaction &- 1): another commit followed")
        }
        // The meta itself: `MDB_meta` is 136 bytes after the 16-byte page header (the header names its own page).
        var meta = [UInt8](repeating: 0, count: metaBytes)
        let read = meta.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, metaBytes, off_t(older + 16)) }
        let written = meta.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, metaBytes, off_t(newer + 16)) }
        guard read == metaBytes, written == metaBytes, fdatasync(descriptor) == 0 else {
            throw TurnStoreError(code: .lmdb, message: "cannot rewrite the meta page of \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The bytes of `MDB_meta` (LMDB 0.9, 64-bit), from byte 16 of its page to the transaction id's end.
    static let metaBytes = 136

    /// The meta page at `offset`; nil when it is not one (short, wrong
    /// magic, a page size that is not a power of two from 512 to 65536).
    static func readMeta(_ descriptor: Int32, at offset: UInt64) -> Meta? {
        var page = [UInt8](repeating: 0, count: 152)
        let count = page.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 152, off_t(clamping: offset)) }
        guard count == 152 else { return nil }
        func little<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
            (0..<MemoryLayout<T>.size).reduce(T(0)) { $0 | T(page[at + $1]) << (8 * $1) }
        }
        let pageSize = little(40, UInt32.self)
        guard little(16, UInt32.self) == magic, pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else { return nil }
        return Meta(
            pageSize: pageSize, lastPage: little(136, UInt64.self), transaction: little(144, UInt64.self), freeRoot: little(80, UInt64.self))
    }

    /// Whether every page from `filePages` to the meta's last page is on the
    /// free list of `meta`, read with `pread` from the file (never mapped:
    /// a page past its end is a short read, not a SIGBUS). The free list is
    /// LMDB's free database: branch pages (flag 0x01) whose nodes name child
    /// pages, leaf pages (0x02) whose values are lists of page numbers (the
    /// first element the count), inline or on overflow pages (node flag
    /// 0x01, `F_BIGDATA`). A file whose pages say anything else, or a walk
    /// past its limits, is not taken as sound.
    static func tailIsFree(_ descriptor: Int32, _ meta: Meta, filePages: UInt64) -> Bool {
        let pageSize = Int(meta.pageSize)
        guard meta.lastPage >= filePages, meta.lastPage - filePages < 4_096, meta.freeRoot < filePages else { return false }
        var missing = Set(filePages...meta.lastPage)
        var pending: [(page: UInt64, depth: Int)] = [(meta.freeRoot, 0)]
        var visited = 0
        func read(_ offset: UInt64, _ count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            let (end, overflow) = offset.addingReportingOverflow(UInt64(count))
            guard !overflow, end <= UInt64(Int64.max) else { return nil }
            let got = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
            return got == count ? bytes : nil
        }
        func u16(_ bytes: [UInt8], _ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
        while let (number, depth) = pending.popLast() {
            visited += 1
            guard visited <= 1_000_000, depth <= 64, number < filePages,
                let page = read(number * UInt64(pageSize), pageSize), u64(page, 0) == number
            else { return false }
            let flags = u16(page, 10)
            let lower = u16(page, 12)
            guard flags & 0x03 != 0, lower >= 16, lower <= pageSize else { return false }
            for index in 0..<((lower - 16) / 2) {
                let node = u16(page, 16 + 2 * index)
                guard node >= lower, node + 8 <= pageSize else { return false }
                let keySize = u16(page, node + 6)
                let dataAt = node + 8 + keySize
                if flags & 0x01 != 0 {
                    // A branch node: the child's page number in lo, hi and flags.
                    let child = UInt64(u16(page, node)) | UInt64(u16(page, node + 2)) << 16 | UInt64(u16(page, node + 4)) << 32
                    pending.append((child, depth + 1))
                    continue
                }
                let dataSize = u16(page, node) | u16(page, node + 2) << 16
                let list: [UInt8]
                if u16(page, node + 4) & 0x01 != 0 {
                    guard dataAt + 8 <= pageSize else { return false }
                    let overflowPage = u64(page, dataAt)
                    guard overflowPage < filePages, dataSize <= 64 << 20,
                        let bytes = read(overflowPage * UInt64(pageSize) + 16, dataSize)
                    else { return false }
                    list = bytes
                } else {
                    guard dataAt + dataSize <= pageSize else { return false }
                    list = Array(page[dataAt..<(dataAt + dataSize)])
                }
                guard list.count >= 8 else { return false }
                let count = Int(clamping: u64(list, 0))
                guard count <= list.count / 8 - 1 else { return false }
                for entry in 0..<count { missing.remove(u64(list, 8 + 8 * entry)) }
                if missing.isEmpty { return true }
            }
        }
        return missing.isEmpty
    }
}
