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
        guard size >= minimum else {
            throw TurnStoreError(
                code: .corrupt, message: "data.mdb is truncated: \(size) bytes, LMDB's meta page says at least \(minimum) (\(path))")
        }
    }

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
        return Meta(pageSize: pageSize, lastPage: little(136, UInt64.self), transaction: little(144, UInt64.self))
    }
}
