/// Who may connect to a leader that authenticates (`cogd leader --peers
/// FILE`), and what each may do: the peers file, read and checked
/// (`protocol/cogwire.md` §9).
///
/// Each line is `PUBLIC-KEY ROLE NAME [OP-PATTERN…]`: a peer's CURVE public
/// key (Z85), its role, the worker name (or name pattern) it may act in,
/// and, for a `client`, the ops it may run:
///
/// ```
/// # key                                      role      name        ops
/// Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID   worker    w1
/// rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7   client    ops-console ledger.* trails.openScreen
/// JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6   observer  dashboard
/// ```
///
/// - Important: a name belongs to one key. A file in which two keys'
///   names could meet (`w*` and `w1`) is refused, so the name a request
///   carries always says whose it is, and no key can pre-empt, answer for,
///   or poison another's request ids.
public struct PeerTable: Sendable, Equatable {
    public enum Role: String, Sendable, CaseIterable {
        /// May say hello, register scopes, heartbeat, read the turn stream,
        /// ask for snapshots and catch-ups, and send ops, in its own names.
        case worker
        /// May send ops matching its op patterns, in its own names, and ask for status.
        case client
        /// May ask for status, read the turn stream, and ask for snapshots
        /// and catch-ups; no ops.
        case observer
        /// A node of an HA cluster: may follow the leader's log as the
        /// standby its name names (`ha.md` §9) and ask for status; nothing else.
        case standby
    }

    /// A name or op name, or a prefix of them: `w1`, `w*`, `ledger.*`, `*` (any).
    public struct Pattern: Sendable, Equatable, CustomStringConvertible {
        public let text: String
        var isPrefix: Bool { text.hasSuffix("*") }
        var stem: Substring { isPrefix ? text.dropLast() : Substring(text) }

        public func matches(_ name: String) -> Bool { isPrefix ? name.hasPrefix(stem) : name == text }

        /// Whether some name matches both.
        func overlaps(_ other: Pattern) -> Bool {
            switch (isPrefix, other.isPrefix) {
            case (false, false): text == other.text
            case (true, false): other.text.hasPrefix(stem)
            case (false, true): text.hasPrefix(other.stem)
            case (true, true): stem.hasPrefix(other.stem) || other.stem.hasPrefix(stem)
            }
        }

        public var description: String { text }
    }

    /// One line of the file.
    public struct Peer: Sendable, Equatable {
        public let publicKey: String
        public let role: Role
        public let name: Pattern
        /// The ops a `client` may run (empty for the other roles).
        public let ops: [Pattern]
        /// Its line in the file.
        public let line: Int

        public func mayUse(name worker: String) -> Bool { name.matches(worker) }
        public func mayRun(op: String) -> Bool { role == .worker || ops.contains { $0.matches(op) } }
        /// Whether it may subscribe to the turn stream.
        public var mayReadTurns: Bool { role == .worker || role == .observer }
        /// Whether its name is a worker name, one key's alone (observers' and standbys' are labels or node names).
        var actsInWorkerNames: Bool { role == .worker || role == .client }
    }

    /// The most bytes a peers file may have, and the most peers it may list.
    public static let maximumFileBytes = 1 << 20
    public static let maximumPeers = 10_000

    public let peers: [Peer]
    private let byKey: [String: Peer]

    /// The peer whose public key is `key`, if listed.
    public subscript(key: String) -> Peer? { byKey[key] }

    public var count: Int { peers.count }

    /// Reads and checks a peers file's text; `path` names it in errors.
    public init(parsing text: String, path: String = "peers file") throws(PeerTableError) {
        var peers: [Peer] = []
        var byKey: [String: Peer] = [:]
        // "\r\n" is one Character in Swift: both line ends are named.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            func problem(_ why: String) -> PeerTableError { PeerTableError(path: path, line: number, message: why) }
            var fields = rawLine.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
            // A field that starts with `#` starts a comment. A key may hold a
            // `#` but never start with one: the first of each five Z85 digits
            // is at most `%` (the group is below 2^32).
            if let comment = fields.firstIndex(where: { $0.hasPrefix("#") }) {
                fields.removeSubrange(comment...)
            }
            if fields.isEmpty { continue }
            if let control = fields.joined().unicodeScalars.first(where: LeaderCore.isControlCharacter) {
                throw problem("a control character (U+\(String(control.value, radix: 16, uppercase: true))) is not allowed")
            }
            guard fields.count >= 3 else {
                throw problem("a peer line is PUBLIC-KEY ROLE NAME [OP-PATTERN…]; this one has \(fields.count) field\(fields.count == 1 ? "" : "s")")
            }
            let key = fields[0]
            guard CurveKeyText.isValid(key) else {
                throw problem("'\(key.prefix(60))' is not a CURVE public key (40 characters of the Z85 alphabet; `cogd keys show FILE` prints one)")
            }
            guard let role = Role(rawValue: fields[1]) else {
                throw problem("the role is worker, client, observer or standby, not '\(fields[1].prefix(60))'")
            }
            if role == .standby, !ArbiterRecords.isValidName(fields[2]) {
                throw problem("a standby line names its node (its --name): 1 to 64 letters, digits, '_', '.' or '-', not '\(fields[2].prefix(60))'")
            }
            let name = try PeerTable.pattern(fields[2], what: "name", problem)
            let ops = try fields.dropFirst(3).map { (text) throws(PeerTableError) in try PeerTable.pattern(text, what: "op pattern", problem) }
            switch role {
            case .client where ops.isEmpty:
                throw problem("a client line lists the ops it may run after its name (for example `ledger.*`)")
            case .worker where !ops.isEmpty, .observer where !ops.isEmpty, .standby where !ops.isEmpty:
                throw problem("only a client line lists op patterns (\(role == .worker ? "a worker runs any op in its own names" : "a\(role == .observer ? "n observer" : " standby") runs none"))")
            default: break
            }
            if let earlier = byKey[key] {
                throw problem("this key is listed already, on line \(earlier.line): one line per key")
            }
            if role == .standby, let other = peers.first(where: { $0.role == .standby && $0.name == name }) {
                throw problem("node `\(name)` has a standby key on line \(other.line) already: one key per node")
            }
            if role == .worker || role == .client, let other = peers.first(where: { $0.actsInWorkerNames && $0.name.overlaps(name) }) {
                throw problem(
                    "name `\(name)` meets `\(other.name)` of line \(other.line): a worker name belongs to one key, so two keys' names may not overlap")
            }
            guard peers.count < PeerTable.maximumPeers else {
                throw problem("a peers file lists at most \(PeerTable.maximumPeers) peers")
            }
            let peer = Peer(publicKey: key, role: role, name: name, ops: ops, line: number)
            peers.append(peer)
            byKey[key] = peer
        }
        self.peers = peers
        self.byKey = byKey
    }

    private static func pattern(_ text: String, what: String, _ problem: (String) -> PeerTableError) throws(PeerTableError) -> Pattern {
        guard text.utf8.count <= LeaderCore.maximumWorkerName else {
            throw problem("a \(what) is at most \(LeaderCore.maximumWorkerName) bytes")
        }
        guard !text.dropLast().contains("*") else {
            throw problem("'\(text)': a \(what) is a name, or a prefix ending in `*` (a `*` goes only at the end)")
        }
        return Pattern(text: text)
    }
}

/// A peers file that cannot be read or is not valid: where, and why.
public struct PeerTableError: Error, Equatable, CustomStringConvertible, Sendable {
    public let path: String
    /// The line at fault (nil: the file as a whole).
    public let line: Int?
    public let message: String

    public init(path: String, line: Int?, message: String) {
        self.path = path
        self.line = line
        self.message = message
    }

    public var description: String {
        "peers file \(path)\(line.map { " line \($0)" } ?? ""): \(message)"
    }
}
