@testable import CogLab
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real etcd (Debian's `etcd-server`, installed by deploy/install-deps.sh)
/// on loopback for one test: free client and peer ports, a folder of its
/// own, no fsync (a test's etcd need not survive the machine), always stopped.
/// Started as the lab's `LabEtcd` starts one; run as a `CogdProcess`, so a
/// test may read its lines and pause it.
final class TestEtcd {
    let clientPort = freePort()
    let peerPort = freePort()
    let folder: URL
    private(set) var server: CogdProcess?

    var url: String { LabEtcd.url(port: clientPort) }

    /// `etcd` (`LabEtcd.program()`); nil (and a recorded issue naming the install script) when missing.
    static func program() -> URL? {
        guard let program = LabEtcd.program() else {
            Issue.record(Comment(rawValue: LabEtcd.missing))
            return nil
        }
        return program
    }

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-etcd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    /// Starts etcd and waits (at most 30 s) until it grants a lease.
    func start() throws -> Bool {
        guard let program = Self.program() else { return false }
        let process = try CogdProcess(
            executable: program,
            LabEtcd.arguments(name: "test", dataFolder: folder.appendingPathComponent("data").path, clientPort: clientPort, peerPort: peerPort))
        server = process
        let ready = waitUntil(timeout: .seconds(30)) {
            guard process.process.isRunning else { return true }
            return LabEtcd.grantsLease(port: clientPort)
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
