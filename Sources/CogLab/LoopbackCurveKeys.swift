import CogdCommandLine
import CogCluster
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The CURVE keys of a cluster that a command starts by itself on loopback
/// (`cogd-lab drill --curve`, `cogd-lab bench cluster --curve`): a key pair for the
/// leader, one per worker and one its own clients share, and the peers file
/// that lists them, all in one folder.
///
/// Each worker is listed under its exact name with the `worker` role; the
/// clients' key on one `client` line with a name prefix (`drill-c*`) and the
/// op patterns it may run (`ledger.*`) — `protocol/cogwire.md` §9.
///
/// ```swift
/// let keys = try LoopbackCurveKeys(
///     folder: data + "/keys", workers: ["drill-w0", "drill-w1"], clientNames: "drill-c*", clientOps: ["ledger.*"])
/// // cogd leader … --curve-secret keys.leaderSecretFile --peers keys.peersFile
/// // cogd worker --name drill-w0 … --key keys.workerKeyFiles["drill-w0"]! --leader-key keys.leaderPublicFile
/// try socket.useCurve(keys.clients)   // before connect
/// ```
///
/// - Important: a key pair already in the folder (from an earlier run over
///   a kept data folder) is reused, never overwritten; the peers file is
///   written anew each time, whole (a new file renamed over the old one).
struct LoopbackCurveKeys {
    /// The key names (`NAME.key`, `NAME.pub`) of the leader and the clients; no worker may be named so.
    static let leaderKeyName = "leader"
    static let clientsKeyName = "clients"
    /// The peers file's name in the folder.
    static let peersFileName = "peers"

    let folder: String
    let leaderSecretFile: String
    let leaderPublicFile: String
    let peersFile: String
    /// Each worker's secret key file, by worker name.
    let workerKeyFiles: [String: String]
    /// The clients' secret key file.
    let clientsKeyFile: String
    /// What the clients connect with (their pair and the leader's public key).
    let clients: CurveClientKeys
    /// The peers line of the clients' key: its name pattern and op patterns.
    let clientNames: String
    let clientOps: [String]

    /// Makes (or reuses) the key pairs in `folder` and writes the peers file.
    ///
    /// `workers` are worker names (each a valid key name, not `leader` or
    /// `clients`); `clientNames` is the name, or the prefix ending in `*`,
    /// every client's request names match; `clientOps` the op patterns
    /// (at least one) the clients may run.
    init(folder: String, workers: [String], clientNames: String, clientOps: [String]) throws {
        precondition(!clientOps.isEmpty, "a client peers line needs op patterns (for example `ledger.*`)")
        for worker in workers {
            precondition(
                CurveKeyPair.isValidName(worker) && worker != Self.leaderKeyName && worker != Self.clientsKeyName,
                "worker name `\(worker)` cannot name a key file beside `leader` and `clients`; rename the worker")
        }
        self.folder = folder
        self.clientNames = clientNames
        self.clientOps = clientOps
        let leader = try Self.pair(named: Self.leaderKeyName, in: folder)
        leaderSecretFile = leader.files.secretKeyFile
        leaderPublicFile = leader.files.publicKeyFile
        var lines = [
            "# Written by cogd for the cluster it runs on loopback (rewritten at each run).",
            "# PUBLIC-KEY ROLE NAME [OP-PATTERN…]",
        ]
        var workerKeyFiles: [String: String] = [:]
        for worker in workers {
            let made = try Self.pair(named: worker, in: folder)
            workerKeyFiles[worker] = made.files.secretKeyFile
            lines.append("\(made.pair.publicKey) worker \(worker)")
        }
        self.workerKeyFiles = workerKeyFiles
        let client = try Self.pair(named: Self.clientsKeyName, in: folder)
        clientsKeyFile = client.files.secretKeyFile
        clients = CurveClientKeys(pair: client.pair, leaderKey: leader.pair.publicKey)
        lines.append("\(client.pair.publicKey) client \(clientNames) \(clientOps.joined(separator: " "))")
        let text = lines.joined(separator: "\n") + "\n"
        peersFile = (folder.hasSuffix("/") ? folder : folder + "/") + Self.peersFileName
        do {
            // What the leader will read: refused here, by the same rules, if the names meet.
            _ = try PeerTable(parsing: text, path: peersFile)
        } catch {
            fatalError("internal inconsistency: the peers file written for the loopback cluster is not valid: \(error)")
        }
        let staging = peersFile + ".new"
        try? FileManager.default.removeItem(atPath: staging)
        guard FileManager.default.createFile(atPath: staging, contents: Data(text.utf8)) else {
            throw CurveKeyError(.io, "cannot write the peers file \(staging)")
        }
        if rename(staging, peersFile) != 0 {
            throw CurveKeyError(.io, "cannot rename \(staging) to \(peersFile): \(String(cString: strerror(errno)))")
        }
    }

    /// The client key files as `cogd call|status --key --leader-key` take them.
    var clientKeyFiles: CommandClientKeyFiles {
        CommandClientKeyFiles(key: clientsKeyFile, leaderKey: leaderPublicFile)
    }

    /// The pair `NAME.key` in `folder` holds, or a new one written there.
    private static func pair(
        named name: String, in folder: String
    ) throws(CurveKeyError) -> (pair: CurveKeyPair, files: (secretKeyFile: String, publicKeyFile: String)) {
        let base = folder.hasSuffix("/") ? folder : folder + "/"
        let files = (secretKeyFile: base + name + ".key", publicKeyFile: base + name + ".pub")
        guard FileManager.default.fileExists(atPath: files.secretKeyFile) else {
            let pair = try CurveKeyPair.generate()
            return (pair, try pair.write(name: name, to: folder))
        }
        let pair = try CurveKeyPair.load(secretKeyFile: files.secretKeyFile)
        let fix = "remove \(files.secretKeyFile) and \(files.publicKeyFile) to have a new pair made"
        let publicKey: String
        do {
            publicKey = try CurveKeyPair.publicKey(ofFile: files.publicKeyFile)
        } catch {
            throw CurveKeyError(error.code, "\(error.message); \(fix)")
        }
        guard publicKey == pair.publicKey else {
            throw CurveKeyError(.invalidFile, "\(files.publicKeyFile) does not hold the public key of \(files.secretKeyFile); \(fix)")
        }
        return (pair, files)
    }
}
