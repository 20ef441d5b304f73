import CogCodec
import Foundation
import Testing

@testable import CogLog

#if canImport(Glibc)
    import Glibc
#endif

@Suite("data.mdb against its meta pages (internal)")
struct DataFileTests {
    /// The file's size and the size its current meta page names.
    private func sizes(_ folder: TemporaryFolder) throws -> (file: UInt64, named: UInt64) {
        let descriptor = open(folder.path + "/data.mdb", O_RDONLY)
        defer { close(descriptor) }
        let first = try #require(LMDBDataFile.readMeta(descriptor, at: 0))
        let second = try #require(LMDBDataFile.readMeta(descriptor, at: UInt64(first.pageSize)))
        let current = second.transaction > first.transaction ? second : first
        var status = stat()
        fstat(descriptor, &status)
        return (UInt64(status.st_size), (current.lastPage + 1) * UInt64(current.pageSize))
    }

    @Test func `a file that ends before pages a commit took and freed again opens; one missing a written page is refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        do {
            let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
            try store.append([TurnDraft(name: "set()", writes: [TurnWrite(name: "x", key: nil, value: [1])])])
            // One transaction takes pages from the end of the file (a large value) and frees them again.
            try store.environment.write { txn in
                try txn.put(store.stateHandle, Array("big".utf8), [UInt8](repeating: 7, count: 40_000))
                try txn.delete(store.stateHandle, Array("big".utf8))
            }
            store.close()
        }
        let (file, named) = try sizes(folder)
        #expect(file < named, "LMDB left the freed pages unwritten: \(file) < \(named)")
        for mode in [TurnStore.Mode.reader, .writer] {
            let store = try TurnStore(directory: folder.path, mode: mode)
            #expect(store.lastRevision == 1)
            #expect(try store.verify().isSound)
            store.close()
        }
        // Cut a page that was written: refused.
        #expect(truncate(folder.path + "/data.mdb", off_t(file - 4_096)) == 0)
        #expect {
            _ = try TurnStore(directory: folder.path, mode: .reader)
        } throws: { error in
            (error as? TurnStoreError)?.message.hasPrefix("data.mdb is truncated: \(file - 4_096) bytes") == true
        }
    }
}
