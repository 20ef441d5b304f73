internal import CZMQ

#if canImport(Glibc)
    import Glibc
#endif

/// A failed ZeroMQ call: `zmq_errno()`, the operation, and ZeroMQ's text.
public struct ZMQError: Error, Equatable, CustomStringConvertible, Sendable {
    public let code: Int32
    public let operation: String
    public let message: String

    init(operation: String) {
        code = zmq_errno()
        self.operation = operation
        message = String(cString: zmq_strerror(code))
    }

    public var description: String { "\(operation) failed: \(message) (errno \(code))" }

    /// The socket was closed or the context terminated.
    public var isTerminated: Bool { code == ETERM || code == ENOTSOCK }
}

/// One funnel for ZeroMQ calls: retries `EINTR`, returns would-block as
/// `false`, throws everything else.
@discardableResult
func zmqCall(_ operation: @autoclosure () -> String, _ call: () -> Int32) throws(ZMQError) -> Bool {
    while true {
        if call() >= 0 { return true }
        let code = zmq_errno()
        if code == EINTR { continue }
        if code == EAGAIN { return false }
        throw ZMQError(operation: operation())
    }
}
