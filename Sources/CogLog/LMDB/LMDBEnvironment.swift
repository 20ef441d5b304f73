import Foundation
internal import CLMDB

/// Owns one `MDB_env` and its named databases.
///
/// - Important: transactions are synchronous closures (`read`, `write`), so a
///   transaction never spans an `await`. A write transaction that hits a full
///   map is aborted, the map is doubled and the closure runs again — so the
///   closure must be safe to repeat. Not thread-safe: use one environment per
///   thread (the leader and the durable runtime use the main actor).
final class LMDBEnvironment {
    private var env: OpaquePointer?
    private(set) var mapSize: Int
    let readOnly: Bool
    /// Read transactions held open across calls: given up before the map
    /// grows (LMDB may move the map; no transaction may be open then).
    private var heldReads: [Weak<HeldRead>] = []
    /// Held shared by each `copy(to:)` (a thread of its own may run one
    /// while the writer commits: a leader's copy for a standby) and
    /// exclusively while the map grows, so the map never moves under the
    /// copy's read: LMDB remaps without looking at other threads' reads.
    private let mapLock = MapLock()

    /// Opens (creating, when writable) the environment in directory `path`.
    init(path: String, readOnly: Bool, maxDatabases: Int32 = 16, initialMapSize: Int = 64 << 20) throws(LMDBError) {
        self.readOnly = readOnly
        self.mapSize = initialMapSize
        var handle: OpaquePointer?
        try lmdb("mdb_env_create") { mdb_env_create(&handle) }
        env = handle
        do {
            try lmdb("mdb_env_set_maxdbs") { mdb_env_set_maxdbs(handle, MDB_dbi(maxDatabases)) }
            if !readOnly {
                try lmdb("mdb_env_set_mapsize") { mdb_env_set_mapsize(handle, initialMapSize) }
            }
            let flags: UInt32 = UInt32(MDB_NOTLS) | (readOnly ? UInt32(MDB_RDONLY) : 0)
            try lmdb("mdb_env_open(\(path))") { mdb_env_open(handle, path, flags, 0o644) }
            var info = MDB_envinfo()
            try lmdb("mdb_env_info") { mdb_env_info(handle, &info) }
            mapSize = info.me_mapsize
        } catch {
            mdb_env_close(handle)
            env = nil
            throw error
        }
    }

    deinit { close() }

    /// Closes the environment; later calls do nothing.
    func close() {
        guard let env else { return }
        for held in heldReads { held.value?.end() }
        heldReads = []
        mdb_env_close(env)
        self.env = nil
    }

    /// Begins a read-only transaction that stays open until its `end()` (or
    /// until the map grows, which ends it: `isEnded` then says so).
    func beginHeldRead() throws(LMDBError) -> HeldRead {
        var txn: OpaquePointer?
        var code = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
        if code == MDB_MAP_RESIZED {
            try lmdb("mdb_env_set_mapsize") { mdb_env_set_mapsize(env, 0) }
            code = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
        }
        try lmdb("mdb_txn_begin(held read)") { code }
        let held = HeldRead(handle: txn)
        heldReads.removeAll { $0.value == nil || $0.value?.isEnded == true }
        heldReads.append(Weak(held))
        return held
    }

    /// Clears reader slots left by processes that died; returns how many.
    @discardableResult
    func clearStaleReaders() throws(LMDBError) -> Int {
        var dead: Int32 = 0
        try lmdb("mdb_reader_check") { mdb_reader_check(env, &dead) }
        return Int(dead)
    }

    /// The id of the environment's last committed write transaction, as its
    /// current meta page says (a transaction that wrote nothing commits no id).
    var lastTransaction: UInt64 {
        var info = MDB_envinfo()
        guard mdb_env_info(env, &info) == 0 else { return 0 }
        return UInt64(info.me_last_txnid)
    }

    /// How many reader slots hold a read transaction now, in any process
    /// (`mdb_reader_list`: one line a slot, its transaction id or `-` when idle).
    func readersInTransactions() throws(LMDBError) -> Int {
        var count = 0
        _ = try withUnsafeMutablePointer(to: &count) { (pointer: UnsafeMutablePointer<Int>) throws(LMDBError) in
            try lmdb("mdb_reader_list") {
                mdb_reader_list(env, { message, context in
                    guard let message, let context else { return 0 }
                    let fields = String(cString: message).split(whereSeparator: { $0 == " " || $0 == "\n" })
                    if fields.count == 3, Int(fields[0]) != nil, UInt64(fields[2]) != nil {
                        context.assumingMemoryBound(to: Int.self).pointee += 1
                    }
                    return 0
                }, pointer)
            }
        }
        return count
    }

    /// Opens named databases (creating them in a writable environment) in
    /// one committed transaction, so their handles stay valid; nil for a
    /// database that does not exist.
    func openDatabases(_ names: [String]) throws(LMDBError) -> [MDB_dbi?] {
        var txn: OpaquePointer?
        try lmdb("mdb_txn_begin(open)") { mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn) }
        var handles: [MDB_dbi?] = []
        for name in names {
            var dbi: MDB_dbi = 0
            let code = mdb_dbi_open(txn, name, readOnly ? 0 : UInt32(MDB_CREATE), &dbi)
            if code == MDB_NOTFOUND {
                handles.append(nil)
                continue
            }
            if code != 0 {
                mdb_txn_abort(txn)
                throw LMDBError(code: code, operation: "mdb_dbi_open(\(name))")
            }
            handles.append(dbi)
        }
        try lmdb("mdb_txn_commit(open)") { mdb_txn_commit(txn) }
        return handles
    }

    /// Runs `body` in a read-only transaction.
    func read<T>(_ body: (Transaction) throws -> T) throws -> T {
        while true {
            var txn: OpaquePointer?
            let code = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
            if code == MDB_MAP_RESIZED {
                try lmdb("mdb_env_set_mapsize") { mdb_env_set_mapsize(env, 0) }
                continue
            }
            try lmdb("mdb_txn_begin(read)") { code }
            let transaction = Transaction(handle: txn)
            defer { mdb_txn_abort(txn) }
            return try body(transaction)
        }
    }

    /// Runs `body` in a write transaction and commits it; a full map is
    /// grown and the body run again.
    func write<T>(_ body: (Transaction) throws -> T) throws -> T {
        while true {
            var txn: OpaquePointer?
            try lmdb("mdb_txn_begin(write)") { mdb_txn_begin(env, nil, 0, &txn) }
            let transaction = Transaction(handle: txn)
            let result: T
            do {
                result = try body(transaction)
            } catch let error as LMDBError where error.isMapFull {
                mdb_txn_abort(txn)
                try grow()
                continue
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            // The commit frees the transaction whether or not it succeeds: it
            // must never be aborted after this (a failed commit on a full disk
            // then freed it twice and crashed the leader).
            let code = mdb_txn_commit(txn)
            if code == MDB_MAP_FULL {
                try grow()
                continue
            }
            try lmdb("mdb_txn_commit") { code }
            return result
        }
    }

    private func grow() throws(LMDBError) {
        mapLock.lockExclusive()
        defer { mapLock.unlock() }
        for held in heldReads { held.value?.end() }
        heldReads = []
        let doubled = mapSize * 2
        try lmdb("mdb_env_set_mapsize(\(doubled))") { mdb_env_set_mapsize(env, doubled) }
        mapSize = doubled
    }

    /// Writes a consistent copy of the environment as it is now — one read
    /// transaction's view — to `directory/data.mdb` (`mdb_env_copy2`); with
    /// `compact`, free pages are left out and the pages renumbered
    /// (`MDB_CP_COMPACT`). The folder must exist and hold no `data.mdb`.
    ///
    /// - Important: the read it holds while it copies keeps the writer from
    ///   reusing pages freed meanwhile, so the file a writer grows may grow more.
    func copy(to directory: String, compact: Bool) throws(LMDBError) {
        mapLock.lockShared()
        defer { mapLock.unlock() }
        try lmdb("mdb_env_copy2(\(directory))") { mdb_env_copy2(env, directory, compact ? UInt32(MDB_CP_COMPACT) : 0) }
    }

    /// How the file's pages are used, as of `txn`: the page size, the pages
    /// the environment has ever used (the file is at least that long) and
    /// the pages on LMDB's free list (reused by later commits; those freed
    /// after the oldest open read only once it ends).
    func pageUse(in txn: Transaction) throws(LMDBError) -> (pageSize: Int, usedPages: Int, freePages: Int) {
        var info = MDB_envinfo()
        try lmdb("mdb_env_info") { mdb_env_info(env, &info) }
        var stat = MDB_stat()
        try lmdb("mdb_env_stat") { mdb_env_stat(env, &stat) }
        // The free list is database 0 (`FREE_DBI`): each value is a list of
        // page numbers whose first element is its count (`mdb_stat -f`).
        var free = 0
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open(free list)") { mdb_cursor_open(txn.handle, 0, &cursor) }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        var found = try lmdb("mdb_cursor_get(free list, FIRST)") { mdb_cursor_get(cursor, &key, &data, MDB_FIRST) }
        while found {
            if data.mv_size >= MemoryLayout<Int>.size, let base = data.mv_data {
                free += max(0, base.loadUnaligned(as: Int.self))
            }
            found = try lmdb("mdb_cursor_get(free list, NEXT)") { mdb_cursor_get(cursor, &key, &data, MDB_NEXT) }
        }
        return (Int(stat.ms_psize), info.me_last_pgno + 1, free)
    }

    /// Page size and entry counts of one database.
    func statistics(of dbi: MDB_dbi, in txn: Transaction) throws(LMDBError) -> (entries: Int, pages: Int, pageSize: Int) {
        var stat = MDB_stat()
        try lmdb("mdb_stat") { mdb_stat(txn.handle, dbi, &stat) }
        let pages = stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages
        return (stat.ms_entries, pages, Int(stat.ms_psize))
    }
}

/// A readers-writer lock (`pthread_rwlock_t`, at a fixed address).
final class MapLock: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    init() { pthread_rwlock_init(lock, nil) }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func lockShared() { pthread_rwlock_rdlock(lock) }
    func lockExclusive() { pthread_rwlock_wrlock(lock) }
    func unlock() { pthread_rwlock_unlock(lock) }
}

/// A read-only transaction held open across calls: a consistent view of
/// the store while writes go on. Its cursors must not outlive one call (the
/// map may be moved when it grows, after ending every held read).
final class HeldRead {
    private(set) var handle: OpaquePointer?

    init(handle: OpaquePointer?) {
        self.handle = handle
    }

    var isEnded: Bool { handle == nil }

    /// Runs `body` in the transaction; nil once it has ended.
    func read<T>(_ body: (Transaction) throws -> T) rethrows -> T? {
        guard let handle else { return nil }
        return try body(Transaction(handle: handle))
    }

    /// Ends the transaction; later calls do nothing.
    func end() {
        guard let handle else { return }
        mdb_txn_abort(handle)
        self.handle = nil
    }

    deinit { end() }
}

struct Weak<Value: AnyObject> {
    weak var value: Value?
    init(_ value: Value) { self.value = value }
}

/// One open transaction; valid only inside the closure it was passed to.
struct Transaction {
    let handle: OpaquePointer?

    func get(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> [UInt8]? {
        var keyValue = MDB_val()
        var data = MDB_val()
        let found: Bool = try key.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> Bool in
            keyValue.mv_size = raw.count
            keyValue.mv_data = UnsafeMutableRawPointer(mutating: raw.baseAddress)
            return try lmdb("mdb_get") { mdb_get(handle, dbi, &keyValue, &data) }
        }
        guard found else { return nil }
        return Array(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
    }

    func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], append: Bool = false) throws {
        try key.withUnsafeBytes { (rawKey: UnsafeRawBufferPointer) throws in
            try value.withUnsafeBytes { (rawValue: UnsafeRawBufferPointer) throws in
                var keyValue = MDB_val(mv_size: rawKey.count, mv_data: UnsafeMutableRawPointer(mutating: rawKey.baseAddress))
                var data = MDB_val(mv_size: rawValue.count, mv_data: UnsafeMutableRawPointer(mutating: rawValue.baseAddress))
                try lmdb("mdb_put") { mdb_put(handle, dbi, &keyValue, &data, append ? UInt32(MDB_APPEND) : 0) }
            }
        }
    }

    /// Puts raw bytes under raw bytes (no intermediate arrays).
    func put(_ dbi: MDB_dbi, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, append: Bool = false) throws {
        var keyValue = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var data = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try lmdb("mdb_put") { mdb_put(handle, dbi, &keyValue, &data, append ? UInt32(MDB_APPEND) : 0) }
    }

    /// Deletes the entry under raw key bytes.
    @discardableResult
    func delete(_ dbi: MDB_dbi, key: UnsafeRawBufferPointer) throws -> Bool {
        var keyValue = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        return try lmdb("mdb_del") { mdb_del(handle, dbi, &keyValue, nil) }
    }

    @discardableResult
    func delete(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> Bool in
            var keyValue = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            return try lmdb("mdb_del") { mdb_del(handle, dbi, &keyValue, nil) }
        }
    }

    /// Runs `body` with a cursor on `dbi`, closed when it returns: many puts
    /// through one cursor skip a cursor setup each.
    func withCursor<T>(_ dbi: MDB_dbi, _ body: (Cursor) throws -> T) throws -> T {
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open") { mdb_cursor_open(handle, dbi, &cursor) }
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(handle: cursor))
    }

    /// Calls `body` with each entry from the first key ≥ `start` (or the
    /// first entry) in key order, until it returns false.
    func scan(_ dbi: MDB_dbi, from start: [UInt8]?, _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open") { mdb_cursor_open(handle, dbi, &cursor) }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        var found: Bool
        if let start {
            found = try start.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> Bool in
                key = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
                return try lmdb("mdb_cursor_get(SET_RANGE)") { mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE) }
            }
        } else {
            found = try lmdb("mdb_cursor_get(FIRST)") { mdb_cursor_get(cursor, &key, &data, MDB_FIRST) }
        }
        while found {
            let keyBytes = Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
            let valueBytes = Array(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
            guard try body(keyBytes, valueBytes) else { return }
            found = try lmdb("mdb_cursor_get(NEXT)") { mdb_cursor_get(cursor, &key, &data, MDB_NEXT) }
        }
    }

    /// Deletes entries from the start of `dbi`, in key order, while
    /// `delete` says so (given each key and value), at most `limit` of
    /// them; returns the keys deleted, in order.
    func deleteLeading(
        _ dbi: MDB_dbi, limit: Int, while delete: ([UInt8], UnsafeRawBufferPointer) throws -> Bool
    ) throws -> [[UInt8]] {
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open") { mdb_cursor_open(handle, dbi, &cursor) }
        defer { mdb_cursor_close(cursor) }
        var deleted: [[UInt8]] = []
        var key = MDB_val()
        var data = MDB_val()
        while deleted.count < limit, try lmdb("mdb_cursor_get(FIRST)", { mdb_cursor_get(cursor, &key, &data, MDB_FIRST) }) {
            let keyBytes = Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
            guard try delete(keyBytes, UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size)) else { break }
            try lmdb("mdb_cursor_del") { mdb_cursor_del(cursor, 0) }
            deleted.append(keyBytes)
        }
        return deleted
    }

    /// The first entry in key order.
    func first(_ dbi: MDB_dbi) throws -> (key: [UInt8], value: [UInt8])? {
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open") { mdb_cursor_open(handle, dbi, &cursor) }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        guard try lmdb("mdb_cursor_get(FIRST)", { mdb_cursor_get(cursor, &key, &data, MDB_FIRST) }) else { return nil }
        return (
            Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)),
            Array(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
        )
    }

    /// The sum of the sizes of every value in `dbi` (the values are not read).
    func valueBytes(_ dbi: MDB_dbi) throws -> Int {
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open") { mdb_cursor_open(handle, dbi, &cursor) }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        var total = 0
        var found = try lmdb("mdb_cursor_get(FIRST)") { mdb_cursor_get(cursor, &key, &data, MDB_FIRST) }
        while found {
            total += data.mv_size
            found = try lmdb("mdb_cursor_get(NEXT)") { mdb_cursor_get(cursor, &key, &data, MDB_NEXT) }
        }
        return total
    }

    /// The last key in `dbi` that is less than `bound`, if any.
    func lastKey(_ dbi: MDB_dbi, before bound: [UInt8]) throws -> [UInt8]? {
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open") { mdb_cursor_open(handle, dbi, &cursor) }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        let foundAtOrAfter = try bound.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> Bool in
            key = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            return try lmdb("mdb_cursor_get(SET_RANGE)") { mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE) }
        }
        let found = foundAtOrAfter
            ? try lmdb("mdb_cursor_get(PREV)") { mdb_cursor_get(cursor, &key, &data, MDB_PREV) }
            : try lmdb("mdb_cursor_get(LAST)") { mdb_cursor_get(cursor, &key, &data, MDB_LAST) }
        guard found else { return nil }
        return Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
    }

    /// The last entry in key order.
    func last(_ dbi: MDB_dbi) throws -> (key: [UInt8], value: [UInt8])? {
        var cursor: OpaquePointer?
        try lmdb("mdb_cursor_open") { mdb_cursor_open(handle, dbi, &cursor) }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var data = MDB_val()
        guard try lmdb("mdb_cursor_get(LAST)", { mdb_cursor_get(cursor, &key, &data, MDB_LAST) }) else { return nil }
        return (
            Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)),
            Array(UnsafeRawBufferPointer(start: data.mv_data, count: data.mv_size))
        )
    }
}

/// A write cursor inside a `Transaction.withCursor` body.
struct Cursor {
    let handle: OpaquePointer?

    /// Puts raw bytes under raw bytes (`append`: the key sorts after every key present).
    func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, append: Bool = false) throws {
        var keyValue = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var data = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try lmdb("mdb_cursor_put") { mdb_cursor_put(handle, &keyValue, &data, append ? UInt32(MDB_APPEND) : 0) }
    }
}
