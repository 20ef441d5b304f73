import CogCluster
import CogProtocol
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real etcd (Debian's `etcd-server`, installed by deploy/install-deps.sh)
/// on loopback for one lab run: its client and peer ports given (free when
/// taken), a temporary folder of its own, no fsync (`--unsafe-no-fsync`: a
/// lab run's etcd need not survive the machine). `stop()` ends it and
/// removes its folder; the run calls it on every path.
final class EtcdServer {
    let clientPort: Int
    let peerPort: Int
    let folder: String
    /// Where etcd writes its own log (errors only).
    let errors: String
    private(set) var process: Child?

    /// `http://127.0.0.1:PORT`: what `cogd leader --ha` takes.
    var url: String { "http://127.0.0.1:\(clientPort)" }

    /// `etcd` from PATH or /usr/bin; an error naming the install script when missing.
    static func program(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> URL {
        let path = environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin"] {
            let candidate = directory + "/etcd"
            if FileManager.default.isExecutableFile(atPath: candidate) { return URL(fileURLWithPath: candidate) }
        }
        throw LabError(message: missing)
    }

    /// What is said when etcd is not installed.
    static let missing = "etcd is missing: run deploy/install-deps.sh (it installs Debian's etcd-server)"

    /// Ends etcd and removes its folder if the run is interrupted (SIGINT, SIGTERM).
    private let interruptGuard: LabInterruptGuard?

    init(clientPort: Int, peerPort: Int, interruptGuard: LabInterruptGuard? = nil) {
        self.clientPort = clientPort
        self.peerPort = peerPort
        self.interruptGuard = interruptGuard
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-etcd-\(getpid())-\(UUID().uuidString)").path
        errors = folder + ".err"
        interruptGuard?.add(folder: folder)
    }

    /// Starts etcd and waits (at most `timeout`) until it grants a lease;
    /// throws (etcd stopped, its last lines said) when it does not.
    func start(timeout: Duration = .seconds(30)) throws {
        let program = try Self.program()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let peer = "http://127.0.0.1:\(peerPort)"
        let child = try Child(
            program,
            [
                "--name", "lab", "--data-dir", folder + "/data",
                "--listen-client-urls", url, "--advertise-client-urls", url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "lab=\(peer)", "--unsafe-no-fsync", "--log-level", "error",
            ],
            errors: errors)
        process = child
        interruptGuard?.add(pid: child.processIdentifier)
        let gateway = try self.gateway()
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, child.isRunning {
            if case .granted = gateway.perform(.grantLease(seconds: 2), limit: .seconds(1)) { return }
            usleep(100_000)
        }
        let said = child.lastLines(in: errors) ?? "nothing"
        stop()
        throw LabError(message: "etcd did not start on \(url) (\(child.ending)); it said: \(said)")
    }

    /// A gateway to this etcd (what `cogd` itself speaks).
    func gateway() throws -> EtcdGateway {
        EtcdGateway(endpoints: try EtcdGateway.endpoints(url))
    }

    /// The values of `keys` now (absent keys left out); nil when etcd does not answer within `limit`.
    func read(_ keys: [String], limit: Duration = .seconds(1)) -> [String: String]? {
        guard let gateway = try? gateway(), case .values(let values) = gateway.perform(.read(keys), limit: limit) else { return nil }
        return values.mapValues(\.value)
    }

    var isRunning: Bool { process?.isRunning == true }

    /// SIGSTOP: etcd answers nothing until `resume()`.
    func pause() { process?.freeze() }

    /// SIGCONT.
    func resume() { process?.thaw() }

    /// Ends etcd (let run first if paused) and removes its folder and log.
    func stop() {
        process?.thaw()
        process?.stop()
        if let process { interruptGuard?.remove(pid: process.processIdentifier) }
        try? FileManager.default.removeItem(atPath: folder)
        try? FileManager.default.removeItem(atPath: errors)
    }

    deinit { stop() }
}
