import CogProtocol

#if canImport(Glibc)
    import Glibc
#endif

extension PeerTable {
    /// Reads the peers file at `path` (at most `maximumFileBytes`, UTF-8).
    public static func load(path: String) throws(PeerTableError) -> PeerTable {
        func failure(_ why: String) -> PeerTableError { PeerTableError(path: path, line: nil, message: why) }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("cannot open it: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read it: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += buffer[..<count]
            guard bytes.count <= maximumFileBytes else { throw failure("it is over \(maximumFileBytes) bytes") }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw failure("it is not UTF-8 text") }
        return try PeerTable(parsing: text, path: path)
    }
}
