/// The values a cluster keeps in etcd, under `/cogd/<cluster>/` (ha.md §2),
/// and the names they hold. Each value is one line of UTF-8 text, fields
/// separated by one space, so `etcdctl get --prefix /cogd/` reads them as
/// they are.
public enum ArbiterRecords {
    /// A cluster or node name: 1–64 bytes of `[A-Za-z0-9_.-]`, so a name
    /// never holds a space, a slash or a control character and is safe in a
    /// key, a value and a log line.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        return (1...64).contains(bytes.count) && bytes.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
                || $0 == 0x5F || $0 == 0x2E || $0 == 0x2D
        }
    }

    /// The keys of one cluster.
    public struct Keys: Sendable, Equatable {
        public let prefix: String

        public init(cluster: String) {
            prefix = "/cogd/\(cluster)/"
        }

        /// Who leads, on the leader's lease: gone within the lease's TTL of
        /// its holder's last renewal.
        public var leader: String { prefix + "leader" }
        /// The last epoch minted, a decimal number; only grows.
        public var epoch: String { prefix + "epoch" }
        /// Who may take the leader key when it is gone: the last leader and
        /// the synchronous standbys it named.
        public var sync: String { prefix + "sync" }
        /// A node's presence, on its own lease: two live nodes never share a name.
        public func member(_ node: String) -> String { prefix + "members/" + node }
        /// The node's run, on its own lease (`lease ID boot BOOT pidns NS
        /// pid PID`, as its folder's run record): what lets a next run whose
        /// folder was destroyed revoke that lease (ha.md §4.1).
        public func run(_ node: String) -> String { prefix + "runs/" + node }
    }

    /// The leader key's value: `NODE EPOCH ENDPOINT` (the endpoint may be
    /// empty, then the line ends after the epoch).
    public struct Leader: Sendable, Equatable {
        public var node: String
        public var epoch: UInt64
        public var endpoint: String

        public init(node: String, epoch: UInt64, endpoint: String) {
            self.node = node
            self.epoch = epoch
            self.endpoint = endpoint
        }

        public var text: String { endpoint.isEmpty ? "\(node) \(epoch)" : "\(node) \(epoch) \(endpoint)" }

        /// Reads a leader value; nil when it is not one.
        public init?(text: String) {
            let fields = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 2 || fields.count == 3, isValidName(fields[0]), let epoch = ArbiterRecords.number(fields[1])
            else { return nil }
            self.init(node: fields[0], epoch: epoch, endpoint: fields.count == 3 ? fields[2] : "")
        }
    }

    /// The sync key's value: `EPOCH LEADER [STANDBY ...]`: in `epoch`,
    /// `leader` led and the standbys named had acknowledged every turn it
    /// released, so each of them may take its place.
    public struct Sync: Sendable, Equatable {
        public var epoch: UInt64
        public var leader: String
        public var standbys: [String]

        public init(epoch: UInt64, leader: String, standbys: [String]) {
            self.epoch = epoch
            self.leader = leader
            self.standbys = standbys
        }

        public var text: String { ([String(epoch), leader] + standbys).joined(separator: " ") }

        public init?(text: String) {
            let fields = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 2, let epoch = ArbiterRecords.number(fields[0]), fields.dropFirst().allSatisfy(isValidName)
            else { return nil }
            self.init(epoch: epoch, leader: fields[1], standbys: Array(fields.dropFirst(2)))
        }

        /// Whether `node` may take the leader key.
        public func allows(_ node: String) -> Bool { leader == node || standbys.contains(node) }
    }

    /// A decimal number of 1–20 digits that fits 64 bits; nil otherwise.
    public static func number(_ text: String) -> UInt64? {
        let bytes = Array(text.utf8)
        guard (1...20).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt64(text)
    }
}
