import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Tells the service manager how the process is doing (systemd's
/// `sd_notify` protocol, written directly: one datagram of `KEY=VALUE`
/// lines to the unix socket named by `NOTIFY_SOCKET`; an address starting
/// with `@` is abstract). Without `NOTIFY_SOCKET` it does nothing.
///
/// `cogd leader` sends `READY=1` once its store is open and its sockets are
/// bound; `cogd worker` once it has said hello and synced the first time
/// (`Type=notify` in `deploy/systemd`).
struct ServiceNotifier {
    /// The socket's address as given, nil when the process was not started by a service manager.
    let socketAddress: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let address = environment["NOTIFY_SOCKET"]
        socketAddress = address?.isEmpty == false ? address : nil
    }

    /// Sends `fields` (`READY=1`, `STATUS=…`) as one message; returns why not
    /// when there is a socket and the send failed (nil: sent, or no socket).
    @discardableResult
    func notify(_ fields: [String]) -> String? {
        guard let socketAddress else { return nil }
        // A field is one line: a newline in a status would start a field of its own.
        let message = fields.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: "\n")
        guard socketAddress.hasPrefix("/") || socketAddress.hasPrefix("@") else {
            return "NOTIFY_SOCKET is neither a path nor an abstract address (@…): \(socketAddress)"
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketAddress.utf8)
        if path[0] == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return "NOTIFY_SOCKET is longer than a unix socket address: \(socketAddress)" }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        // An abstract address is exactly its bytes; a path ends at its NUL.
        let length = socklen_t(MemoryLayout.offset(of: \sockaddr_un.sun_path)! + path.count + (path[0] == 0 ? 0 : 1))
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return "socket(AF_UNIX) failed: \(String(cString: strerror(errno)))" }
        defer { close(descriptor) }
        let bytes = Array(message.utf8)
        while true {
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    bytes.withUnsafeBytes { sendto(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, length) }
                }
            }
            if sent < 0 && errno == EINTR { continue }
            guard sent == bytes.count else {
                return "sending to NOTIFY_SOCKET \(socketAddress) failed: \(String(cString: strerror(errno)))"
            }
            return nil
        }
    }
}
