import CogCodec

extension TurnStoreError {
    init(_ error: LMDBError) {
        self.init(code: .lmdb, message: error.description)
    }

    /// Runs `body`, turning what it throws into a `TurnStoreError` (an
    /// LMDB failure is `.lmdb`; anything else unexpected, `.corrupt`).
    static func catching<T>(_ body: () throws -> T) throws(TurnStoreError) -> T {
        do {
            return try body()
        } catch let error as TurnStoreError {
            throw error
        } catch let error as LMDBError {
            throw TurnStoreError(error)
        } catch {
            throw TurnStoreError(code: .corrupt, message: "\(error)")
        }
    }
}
