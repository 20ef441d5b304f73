import CogWire
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// An IPv4 address of this host that is not loopback, if it has one.
private func nonLoopbackInterfaceAddress() -> String? {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0, let first = list else { return nil }
    defer { freeifaddrs(list) }
    var entry: UnsafeMutablePointer<ifaddrs>? = first
    while let current = entry {
        defer { entry = current.pointee.ifa_next }
        guard let address = current.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { ipv4 in
            var raw = ipv4.pointee.sin_addr
            _ = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
        }
        let printed = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if !printed.hasPrefix("127.") { return printed }
    }
    return nil
}

@Suite("a leader without authentication stays on loopback unless --insecure", .serialized, .timeLimit(.minutes(10)))
struct LeaderSecurityTests {
    @Test func `endpoints on this host are told from the rest`() {
        for local in [
            "tcp://127.0.0.1:5701", "tcp://127.3.2.1:1", "tcp://localhost:5701", "tcp://LOCALHOST:*", "tcp://[::1]:5701", "tcp://::1:5701",
            "ipc:///run/cogd/requests", "inproc://x",
        ] {
            #expect(WireEndpoint.isLocal(local), "\(local)")
        }
        for exposed in [
            "tcp://0.0.0.0:5701", "tcp://*:5701", "tcp://[::]:5701", "tcp://192.168.1.2:5701", "tcp://128.0.0.1:5701", "tcp://eth0:5701",
            "tcp://lo:5701", "tcp://127.0.0.1", "tcp://127.0.0.1;10.0.0.1:5701", "tcp://[::2]:5701", "ws://127.0.0.1:5701", "udp://127.0.0.1:1",
            "pgm://eth0;239.192.1.1:5555", "",
        ] {
            #expect(!WireEndpoint.isLocal(exposed), "\(exposed)")
        }
    }

    @Test func `a leader refuses a wildcard or a network interface, saying why, and opens nothing`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let port = freePort()
        let loopback = "tcp://127.0.0.1:\(freePort())"
        let interface = nonLoopbackInterfaceAddress() ?? "192.0.2.1"  // TEST-NET-1 when the host has none
        let cases: [(requests: String, turns: String, named: String)] = [
            ("tcp://0.0.0.0:\(port)", loopback, "tcp://0.0.0.0:\(port)"),
            (loopback, "tcp://*:\(port)", "tcp://*:\(port)"),
            ("tcp://\(interface):\(port)", loopback, "tcp://\(interface):\(port)"),
            ("tcp://0.0.0.0:\(port)", "tcp://[::]:\(port)", "tcp://0.0.0.0:\(port) and tcp://[::]:\(port)"),
        ]
        for (requests, turns, named) in cases {
            let refused = try runCogd(["leader", "--data", folder.path, "--requests", requests, "--turns", turns])
            #expect(refused.status == 1, "\(requests) \(turns): \(refused)")
            #expect(
                refused.stderr
                    == "Error: cogd leader serves without authentication; binding \(named) would let anyone on the network run ops "
                    + "and read state — authenticate with CURVE (`cogd keys generate leader`, then --curve-secret leader.key "
                    + "--peers FILE), keep it on loopback, or pass --insecure to accept that\n")
            #expect(refused.stdout.isEmpty)
            #expect(!FileManager.default.fileExists(atPath: folder.path), "nothing is opened before the refusal")
        }
    }

    @Test func `with --insecure a leader binds beyond loopback and says it does not authenticate`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        // `lo` is an interface name — not loopback by the rule — that still binds only 127.0.0.1.
        let port = freePort()
        let leader = try CogdProcess([
            "leader", "--data", folder.path, "--requests", "tcp://lo:\(port)", "--turns", "tcp://127.0.0.1:\(freePort())", "--insecure",
        ])
        defer { leader.stop() }
        let first = leader.waitForLine { $0.contains("cogd leader: data") }
        #expect(first?.hasSuffix(", no authentication (--insecure)") == true, "\(String(describing: first))")
        let status = try runCogd(["status", "--leader", "tcp://127.0.0.1:\(port)"])
        #expect(status.status == 0 && status.stdout.contains("revision"), "\(status)")
    }

    @Test func `on loopback a leader starts without flags and says it does not authenticate`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(leader.lines.first { $0.contains("cogd leader: data") }?.hasSuffix(", no authentication: loopback only") == true)
    }
}
