import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP listener on 127.0.0.1 that accepts each connection and closes it
/// at once, saying nothing (as a port scanner's target, or a crashed
/// service's supervisor, does); stopped by `stop()`.
private final class ClosingListener: @unchecked Sendable {
    let port: Int
    private let descriptor: Int32
    private final class Flag: Sendable { let stopped = Atomic<Bool>(false) }
    private let flag = Flag()
    private let thread: Thread

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && listen(descriptor, 64) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard descriptor >= 0, bound else { throw POSIXError(.EADDRNOTAVAIL) }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        let flag = flag
        thread = Thread {
            while !flag.stopped.load(ordering: .relaxed) {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 50) > 0 else { continue }
                let connection = accept(descriptor, nil, nil)
                if connection >= 0 { close(connection) }
            }
        }
        thread.start()
    }

    func stop() {
        flag.stopped.store(true, ordering: .relaxed)
        usleep(100_000)
        close(descriptor)
    }
}

@Suite("what the tools say when the other end is not a leader", .serialized, .timeLimit(.minutes(10)))
struct OtherEndTests {
    @Test func `something that accepts and closes is named as not a cogd leader by status, call, get and tail --connect`() throws {
        let listener = try ClosingListener()
        defer { listener.stop() }
        let endpoint = "tcp://127.0.0.1:\(listener.port)"
        let requests = "it is not a cogd leader's requests endpoint (its --requests, tcp://127.0.0.1:5701 by default)"
        for tool in [["status"], ["call", "ledger.open", #"{"account": "a", "balance": 1}"#], ["get", "ledger.balance"]] {
            let result = try runCogd(tool + ["--leader", endpoint, "--timeout", "2"], timeout: .seconds(30))
            #expect(result.status == 4, "\(tool): \(result)")
            #expect(
                result.stderr == "Error: something at \(endpoint) accepted the connection and closed it without a ZeroMQ greeting: \(requests)\n",
                "\(tool): \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(tool): \(result)")
        }
        let tail = try runCogd(["tail", "--connect", endpoint, "--timeout", "2"], timeout: .seconds(30))
        #expect(tail.status == 4, "\(tail)")
        #expect(
            tail.stderr
                == "Error: something at \(endpoint) accepted the connection and closed it without a ZeroMQ greeting: it is not a cogd "
                + "leader's turn stream (its --turns, tcp://127.0.0.1:5702 by default)\n", "\(tail.stderr)")
        // The catch-up's endpoint the same way, named as the requests endpoint.
        let catchUp = try runCogd(["tail", "--connect", endpoint, "--leader", endpoint, "--from", "1", "--timeout", "2"], timeout: .seconds(30))
        #expect(catchUp.status == 4, "\(catchUp)")
    }

    @Test func `the leader's metrics port, the swapped endpoints and COGD_LEADER are each named for what they are`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let metrics = "127.0.0.1:\(freePort())"
        let leader = try ports.startLeader(data: folder.path, options: ["--metrics", metrics])
        defer { leader.stop() }
        // An HTTP server accepts and waits for a request: no ZeroMQ handshake ever completes.
        let http = try runCogd(["status", "--leader", metrics, "--timeout", "1"], timeout: .seconds(30))
        #expect(http.status == 4, "\(http)")
        #expect(
            http.stderr
                == "Error: something at tcp://\(metrics) accepted the connection but completed no ZeroMQ handshake within 1 s: it is not a cogd "
                + "leader's requests endpoint (its --requests, tcp://127.0.0.1:5701 by default) — another service (an HTTP port, such as a --metrics one?) "
                + "— or a leader that is stopped or stalled\n",
            "\(http.stderr)")
        // Swapped: the socket types do not fit, which ZeroMQ's handshake shows (each of several runs says so).
        for _ in 0..<3 {
            for tool in [["status"], ["get", "ledger.balance"], ["call", "ledger.open", #"{"account": "a", "balance": 1}"#]] {
                let swapped = try runCogd(tool + ["--leader", ports.turns], timeout: .seconds(30))
                #expect(swapped.status == 4, "\(tool): \(swapped)")
                #expect(
                    swapped.stderr.hasPrefix("Error: \(ports.turns) is a leader's turn stream, not its requests endpoint: --leader takes"),
                    "\(tool): \(swapped.stderr)")
            }
            let tail = try runCogd(["tail", "--connect", ports.requests], timeout: .seconds(30))
            #expect(tail.status == 4, "\(tail)")
            #expect(tail.stderr.hasPrefix("Error: \(ports.requests) is a leader's requests endpoint, not its turn stream: --connect takes"), "\(tail.stderr)")
        }
        // Set through the environment, the message names the variable, not an option never given.
        for tool in [["status"], ["call", "ledger.open", #"{"account": "a", "balance": 1}"#]] {
            let fromEnvironment = try runCogd(tool, timeout: .seconds(30), environment: ["COGD_LEADER": ports.turns])
            #expect(fromEnvironment.status == 4, "\(tool): \(fromEnvironment)")
            #expect(
                fromEnvironment.stderr
                    == "Error: \(ports.turns) is a leader's turn stream, not its requests endpoint: COGD_LEADER takes the requests endpoint "
                    + "(tcp://127.0.0.1:5701 by default, the leader's --requests), not the turn stream\n", "\(tool): \(fromEnvironment.stderr)")
        }
        let tail = try runCogd(
            ["tail", "--connect", ports.turns, "--from", "1"], timeout: .seconds(30), environment: ["COGD_LEADER": ports.turns])
        #expect(tail.stderr.hasPrefix("Error: \(ports.turns) is a leader's turn stream, not its requests endpoint: COGD_LEADER takes"), "\(tail.stderr)")
        #expect(tail.status == 4, "\(tail)")
    }
}
