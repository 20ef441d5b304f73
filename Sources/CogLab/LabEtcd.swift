import CogCluster
import CogProtocol
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real etcd (Debian's `etcd-server`, installed by deploy/install-deps.sh)
/// for one lab run or test: on two loopback ports (client and peer), in a
/// temporary folder of its own, without fsync (`--unsafe-no-fsync`: it need
/// not survive the machine). `start()` waits until it grants a lease;
/// `stop()` ends it and removes its folder, and is called on every path
/// (deinit too).
final class LabEtcd {
    let clientPort: Int
    let peerPort: Int
    let folder: String
    private(set) var process: Process?

    /// Its client URL, as `cogd leader --ha` takes it.
    var url: String { Self.url(port: clientPort) }

    static func url(port: Int) -> String { "http://127.0.0.1:\(port)" }

    /// What to do when etcd is not installed.
    static let missing = "etcd is missing: run deploy/install-deps.sh (it installs Debian's etcd-server)"

    /// `etcd` from PATH or /usr/bin; nil when it is in neither.
    static func program() -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/bin"] {
            let candidate = "\(directory)/etcd"
            if FileManager.default.isExecutableFile(atPath: candidate) { return URL(fileURLWithPath: candidate) }
        }
        return nil
    }

    /// The arguments of a one-member etcd named `name` keeping its data in
    /// `dataFolder`, serving clients on `clientPort` and peers on `peerPort`
    /// of 127.0.0.1, without fsync.
    static func arguments(name: String, dataFolder: String, clientPort: Int, peerPort: Int) -> [String] {
        let client = url(port: clientPort)
        let peer = url(port: peerPort)
        return [
            "--name", name, "--data-dir", dataFolder,
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", "\(name)=\(peer)", "--unsafe-no-fsync", "--log-level", "error",
        ]
    }

    /// Whether the etcd at 127.0.0.1:`port` grants a lease now (asked once, within `limit`).
    static func grantsLease(port: Int, limit: Duration = .seconds(2)) -> Bool {
        let gateway = EtcdGateway(endpoints: try! EtcdGateway.endpoints(url(port: port)))
        if case .granted = gateway.perform(.grantLease(seconds: 2), limit: limit) { return true }
        return false
    }

    /// Ends etcd and removes its folder if the run is interrupted.
    private let interruptGuard: LabInterruptGuard?

    /// Takes the two ports; nothing runs until `start()`.
    init(clientPort: Int, peerPort: Int, interruptGuard: LabInterruptGuard? = nil) {
        self.clientPort = clientPort
        self.peerPort = peerPort
        self.interruptGuard = interruptGuard
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-lab-etcd-\(getpid())-\(clientPort)").path
        interruptGuard?.add(folder: folder)
    }

    /// Starts etcd and waits (at most `timeout`) until it grants a lease;
    /// throws (etcd stopped, its folder removed) when it is missing, exits or
    /// does not grant one in time.
    func start(timeout: Duration = .seconds(30)) throws {
        guard let program = Self.program() else { throw LabError(message: Self.missing) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let etcd = Process()
        etcd.executableURL = program
        etcd.arguments = Self.arguments(name: "lab", dataFolder: folder + "/data", clientPort: clientPort, peerPort: peerPort)
        etcd.standardOutput = FileHandle.nullDevice
        etcd.standardError = FileHandle.nullDevice
        do { try etcd.run() } catch {
            stop()
            throw LabError(message: "etcd (\(program.path)) could not be started: \(error)")
        }
        process = etcd
        interruptGuard?.add(etcd)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, etcd.isRunning {
            if Self.grantsLease(port: clientPort) { return }
            usleep(50_000)
        }
        let exited = !etcd.isRunning
        stop()
        throw LabError(
            message: exited
                ? "etcd exited (status \(etcd.terminationStatus)) before it granted a lease on \(url)"
                : "etcd granted no lease on \(url) within \(timeout)")
    }

    /// The value at `key`, nil when absent or when etcd does not answer.
    func value(_ key: String) -> String? {
        let gateway = EtcdGateway(endpoints: try! EtcdGateway.endpoints(url))
        guard case .values(let values) = gateway.perform(.read([key]), limit: .seconds(2)) else { return nil }
        return values[key]?.value
    }

    /// Ends etcd (SIGTERM, SIGKILL after 5 s) and removes its folder.
    func stop() {
        if let process {
            if process.isRunning {
                kill(process.processIdentifier, SIGTERM)
                for _ in 0..<500 where process.isRunning { usleep(10_000) }
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            }
            process.waitUntilExit()
            interruptGuard?.remove(process)
            self.process = nil
        }
        try? FileManager.default.removeItem(atPath: folder)
    }

    deinit { stop() }
}
