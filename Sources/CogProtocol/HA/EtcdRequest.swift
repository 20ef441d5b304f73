/// What the arbiter asks of etcd, in etcd's own terms (its v3 KV and lease
/// API, ha.md §3). The driver (`EtcdGateway` in `CogCluster`) turns each
/// into one JSON request to etcd's gateway and its answer into an
/// `EtcdAnswer`; the arbiter core decides what to ask and what an answer
/// means.
public enum EtcdRequest: Sendable, Equatable {
    /// A new lease that lives `seconds` past its last renewal.
    case grantLease(seconds: Int64)
    /// Renews `lease`.
    case keepAlive(lease: Int64)
    /// Ends `lease` now: every key on it goes.
    case revoke(lease: Int64)
    /// The values of these keys (a key that is absent is missing from the answer).
    case read([String])
    /// When every compare holds, every put; the answer says which.
    case transaction(compares: [EtcdCompare], puts: [EtcdPut])
}

/// One compare of a transaction: the key's modification revision equals
/// `modRevision` (0: the key is absent).
public struct EtcdCompare: Sendable, Equatable {
    public var key: String
    public var modRevision: Int64

    public init(key: String, modRevision: Int64) {
        self.key = key
        self.modRevision = modRevision
    }
}

/// One put of a transaction, on `lease` (0: on no lease).
public struct EtcdPut: Sendable, Equatable {
    public var key: String
    public var value: String
    public var lease: Int64

    public init(key: String, value: String, lease: Int64 = 0) {
        self.key = key
        self.value = value
        self.lease = lease
    }
}

/// A key's value as read, with the revision that last wrote it.
public struct EtcdValue: Sendable, Equatable {
    public var value: String
    public var modRevision: Int64

    public init(value: String, modRevision: Int64) {
        self.value = value
        self.modRevision = modRevision
    }
}

/// What etcd answered, or why there is no answer.
public enum EtcdAnswer: Sendable, Equatable {
    case granted(lease: Int64, seconds: Int64)
    /// The lease lives `seconds` more; 0: it is gone.
    case keptAlive(seconds: Int64)
    case revoked
    case values([String: EtcdValue])
    case transaction(succeeded: Bool)
    case failed(EtcdFailure)
}

/// Why a request to etcd has no answer.
public struct EtcdFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// No connection: nothing listens there, or the network is down.
        case unreachable
        /// Connected, but no whole answer within the request's time.
        case timedOut = "timed-out"
        /// Something answered, but not etcd's gateway: not HTTP, not JSON,
        /// or JSON without the fields the request's answer has.
        case garbage
        /// etcd answered with an error of its own (its code and message in `detail`).
        case refused
    }

    public var kind: Kind
    /// What happened, for an operator (already free of control characters).
    public var detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind.rawValue): \(detail)" }
}
