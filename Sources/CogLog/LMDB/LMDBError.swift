internal import CLMDB

/// A failed LMDB call: the C code, the operation, and LMDB's own text.
public struct LMDBError: Error, Equatable, CustomStringConvertible, Sendable {
    public let code: Int32
    public let operation: String
    public let message: String

    init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
        self.message = String(cString: mdb_strerror(code))
    }

    public var description: String { "\(operation) failed: \(message) (\(code))" }

    /// The map is full; the store grows it and retries.
    public var isMapFull: Bool { code == MDB_MAP_FULL }
    /// Another process grew the map; a reader adopts the new size and retries.
    var isMapResized: Bool { code == MDB_MAP_RESIZED }
}

/// The one funnel for LMDB calls: `MDB_NOTFOUND` is `false`, other failures throw.
@discardableResult
func lmdb(_ operation: @autoclosure () -> String, _ call: () -> Int32) throws(LMDBError) -> Bool {
    let code = call()
    if code == 0 { return true }
    if code == MDB_NOTFOUND { return false }
    throw LMDBError(code: code, operation: operation())
}
