import CogCodec
import Foundation

extension TurnStore {
    /// The data file's size and how its pages are used — what `/metrics`
    /// shows, without `statistics()`'s walk over every record: the file's
    /// length, LMDB's page size, the pages ever used and the pages on its
    /// free list (a walk over the free list's entries, not the log).
    public func fileUse() throws(TurnStoreError) -> (fileBytes: Int, pageSize: Int, usedPages: Int, freePages: Int) {
        try TurnStoreError.catching { () throws in
            try environment.read { (txn: Transaction) in
                var info = stat()
                let fileBytes = stat(directory + "/data.mdb", &info) == 0 ? Int(info.st_size) : 0
                let pages = try environment.pageUse(in: txn)
                return (fileBytes, pages.pageSize, pages.usedPages, pages.freePages)
            }
        }
    }
}
