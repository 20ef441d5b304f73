internal import CZMQ

#if canImport(Glibc)
    import Glibc
#endif

extension ZMQSocket {
    /// Makes this socket a CURVE server (ZeroMQ RFC 26) whose connections
    /// the ZAP handler of its context judges under `domain` (RFC 27); set
    /// before `bind`.
    ///
    /// - Important: without a ZAP handler bound in the same context, ZeroMQ
    ///   accepts any client that knows the server's public key: start
    ///   `ZAPHandler` first.
    public func makeCurveServer(secretKey: String, domain: String) throws(ZMQError) {
        try setOption(ZMQ_CURVE_SERVER, Int32(1))
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(secretKey.utf8))
        try setOption(ZMQ_ZAP_DOMAIN, bytes: Array(domain.utf8))
    }

    /// Makes this socket a CURVE client of the server whose public key is
    /// `keys.leaderKey`, authenticating with `keys.pair`; set before `connect`.
    public func makeCurveClient(_ keys: CurveClientKeys) throws(ZMQError) {
        try setOption(ZMQ_CURVE_SERVERKEY, bytes: Array(keys.leaderKey.utf8))
        try setOption(ZMQ_CURVE_PUBLICKEY, bytes: Array(keys.pair.publicKey.utf8))
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(keys.pair.secretKey.utf8))
    }

    /// `makeCurveClient(keys)` when there are keys; nothing otherwise.
    public func useCurve(_ keys: CurveClientKeys?) throws(ZMQError) {
        if let keys { try makeCurveClient(keys) }
    }
}

/// What a client connects to the leader with under CURVE: its own key pair
/// and the leader's public key (`--key FILE`, `--leader-key FILE`).
public struct CurveClientKeys: Sendable, Equatable {
    public let pair: CurveKeyPair
    /// The leader's public key (Z85).
    public let leaderKey: String

    public init(pair: CurveKeyPair, leaderKey: String) {
        self.pair = pair
        self.leaderKey = leaderKey
    }

    /// Reads a secret key file (`--key`) and the leader's public key from a
    /// public or secret key file (`--leader-key`).
    public static func load(keyFile: String, leaderKeyFile: String) throws(CurveKeyError) -> CurveClientKeys {
        CurveClientKeys(pair: try CurveKeyPair.load(secretKeyFile: keyFile), leaderKey: try CurveKeyPair.publicKey(ofFile: leaderKeyFile))
    }
}
