internal import CZMQ

/// Owns one ZeroMQ context. Sockets keep their context alive.
///
/// - Important: `close()` terminates the context and blocks until every
///   socket made from it is closed (their linger is bounded); `deinit` only
///   shuts it down, which never blocks.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    private var terminated = false

    public init(ioThreads: Int32 = 1) throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError(operation: "zmq_ctx_new") }
        self.handle = handle
        if ioThreads != 1, zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) != 0 {
            let error = ZMQError(operation: "zmq_ctx_set(IO_THREADS)")
            zmq_ctx_term(handle)
            throw error
        }
    }

    /// Terminates the context; later calls do nothing.
    public func close() {
        guard !terminated else { return }
        terminated = true
        while zmq_ctx_term(handle) != 0 && zmq_errno() == EINTR {}
    }

    deinit {
        if !terminated { zmq_ctx_shutdown(handle) }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
