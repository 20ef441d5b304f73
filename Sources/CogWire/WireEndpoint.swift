#if canImport(Glibc)
    import Glibc
#endif

/// What a ZeroMQ endpoint a leader binds exposes: this host only, or a network.
///
/// Until the leader authenticates its peers (CURVE, issue 15) it serves
/// anyone who can connect, so `cogd leader` binds only endpoints for which
/// `isLocal` holds unless given `--insecure` (`protocol/cogwire.md`, "Security").
public enum WireEndpoint {
    /// Whether binding `endpoint` keeps it on this host: `tcp://` on an
    /// address of 127.0.0.0/8, `::1` (`[::1]`) or `localhost`, and `ipc://`
    /// and `inproc://`. Anything else is not: a wildcard (`*`, `0.0.0.0`,
    /// `[::]`), another address, an interface name, another transport.
    ///
    /// ```swift
    /// WireEndpoint.isLocal("tcp://127.0.0.1:5701")   // true
    /// WireEndpoint.isLocal("tcp://0.0.0.0:5701")     // false
    /// ```
    public static func isLocal(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
        guard endpoint.hasPrefix("tcp://") else { return false }
        let address = endpoint.dropFirst("tcp://".count)
        guard let colon = address.lastIndex(of: ":") else { return false }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2 { host = String(host.dropFirst().dropLast()) }
        if host.lowercased() == "localhost" { return true }
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 {
            return UInt32(bigEndian: ipv4.s_addr) >> 24 == 127
        }
        var ipv6 = in6_addr()
        if inet_pton(AF_INET6, host, &ipv6) == 1 {
            let bytes = withUnsafeBytes(of: &ipv6) { Array($0) }
            return bytes == [UInt8](repeating: 0, count: 15) + [1]
        }
        return false
    }
}
