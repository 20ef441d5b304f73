import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real etcd (Debian's `etcd-server`, installed by deploy/install-deps.sh)
/// on loopback for one test: free client and peer ports, a folder of its
/// own, no fsync (a test's etcd need not survive the machine), always stopped.
final class TestEtcd {
    let clientPort = freePort()
    let peerPort = freePort()
    let folder: URL
    private(set) var server: CogdProcess?

    var url: String { "http://127.0.0.1:\(clientPort)" }

    /// `etcd` from PATH or /usr/bin; nil (and a recorded issue naming the install script) when missing.
    static func program() -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/bin"] {
            let candidate = "\(directory)/etcd"
            if FileManager.default.isExecutableFile(atPath: candidate) { return URL(fileURLWithPath: candidate) }
        }
        Issue.record("etcd is missing: run deploy/install-deps.sh (it installs Debian's etcd-server)")
        return nil
    }

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-etcd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    /// Starts etcd and waits (at most 30 s) until it grants a lease.
    func start() throws -> Bool {
        guard let program = Self.program() else { return false }
        let peer = "http://127.0.0.1:\(peerPort)"
        let process = try CogdProcess(
            executable: program,
            [
                "--name", "test", "--data-dir", folder.appendingPathComponent("data").path,
                "--listen-client-urls", url, "--advertise-client-urls", url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "test=\(peer)", "--unsafe-no-fsync", "--log-level", "error",
            ])
        server = process
        let ready = waitUntil(timeout: .seconds(30)) {
            guard process.process.isRunning else { return true }
            return (try? TestEtcd.post(clientPort, "/v3/lease/grant", #"{"TTL": "2"}"#).contains("\"ID\"")) == true
        }
        #expect(ready && process.process.isRunning, "etcd did not start: \(process.lines.suffix(20))")
        return ready && process.process.isRunning
    }

    func pause() { server?.pause() }
    func resume() { server?.resume() }

    func stop() {
        server?.resume()
        server?.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    deinit { stop() }

    /// Puts `value` at `key` with no lease (to set a cluster's keys the way a node would).
    func put(_ key: String, _ value: String) throws {
        let body = #"{"key": "\#(Data(key.utf8).base64EncodedString())", "value": "\#(Data(value.utf8).base64EncodedString())"}"#
        _ = try Self.post(clientPort, "/v3/kv/put", body)
    }

    /// The value at `key`, nil when absent.
    func get(_ key: String) throws -> String? {
        let answer = try Self.post(clientPort, "/v3/kv/range", #"{"key": "\#(Data(key.utf8).base64EncodedString())"}"#)
        guard let json = try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any],
            let value = ((json["kvs"] as? [[String: Any]])?.first?["value"] as? String).flatMap({ Data(base64Encoded: $0) })
        else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// POSTs `body` to 127.0.0.1:`port` as HTTP/1.0 (answered whole, then closed); the body of the answer.
    static func post(_ port: Int, _ path: String, _ body: String) throws -> String {
        let request = "POST \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        return try MetricsEndpointTests.exchange(port, Array(request.utf8)).body
    }
}
