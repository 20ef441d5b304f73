import Foundation
import Testing

@testable import CogLab

#if canImport(Glibc)
    import Glibc
#endif

/// A real etcd (Debian's `etcd-server`, installed by deploy/install-deps.sh)
/// on loopback for one test: the lab's `EtcdServer` (what `cogd-lab drill
/// --ha` runs) on free client and peer ports, a folder of its own, no fsync
/// (a test's etcd need not survive the machine), always stopped.
final class TestEtcd {
    let server = EtcdServer(clientPort: freePort(), peerPort: freePort())

    var clientPort: Int { server.clientPort }
    var url: String { server.url }

    init() throws {}

    /// Starts etcd and waits (at most 30 s) until it grants a lease; false
    /// (and a recorded issue: etcd missing names the install script) when it does not.
    func start() throws -> Bool {
        do {
            try server.start()
            return true
        } catch {
            Issue.record("\(error)")
            return false
        }
    }

    func pause() { server.pause() }
    func resume() { server.resume() }
    func stop() { server.stop() }

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
