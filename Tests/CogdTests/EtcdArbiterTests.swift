import CogCluster
import CogProtocol
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The arbiter against a real etcd on loopback (ha.md §3–4): the gateway's
/// five requests, one leader per epoch with epochs minted in etcd, the
/// sync key deciding who may take over, a leader that cannot renew closing
/// its release gate by its deadline, and the starts it refuses.
@Suite("Arbiter on a real etcd", .serialized, .timeLimit(.minutes(10)))
struct EtcdArbiterTests {
    /// The events an arbiter reported, in order.
    final class Events: Sendable {
        private let list = Mutex<[Arbiter.Event]>([])
        func append(_ event: Arbiter.Event) { list.withLock { $0.append(event) } }
        var all: [Arbiter.Event] { list.withLock { $0 } }
        func wait(timeout: Duration = .seconds(20), _ predicate: (Arbiter.Event) -> Bool) -> Arbiter.Event? {
            var found: Arbiter.Event?
            _ = waitUntil(timeout: timeout) {
                found = all.first(where: predicate)
                return found != nil
            }
            return found
        }
    }

    static func arbiter(_ etcd: TestEtcd, node: String, ttl: Int64 = 2, ownEpoch: UInt64 = 0) throws -> (Arbiter, Events) {
        let events = Events()
        let arbiter = Arbiter(
            gateway: EtcdGateway(endpoints: try EtcdGateway.endpoints(etcd.url)),
            configuration: .init(cluster: "bank", node: node, endpoint: "tcp://127.0.0.1:7\(node.suffix(1))00", leaseSeconds: ttl, ownEpoch: ownEpoch),
            onEvent: { events.append($0) })
        arbiter.run()
        return (arbiter, events)
    }

    static func isLead(_ event: Arbiter.Event) -> Bool { if case .lead = event { true } else { false } }

    @Test func `the gateway's requests and answers on a real etcd`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let gateway = EtcdGateway(endpoints: try EtcdGateway.endpoints("http://127.0.0.1:\(freePort()), \(etcd.url)/"))
        // The first endpoint refuses the connection; the second answers within the same request.
        guard case .granted(let lease, let seconds) = gateway.perform(.grantLease(seconds: 5), limit: .seconds(5)) else {
            Issue.record("no lease granted")
            return
        }
        #expect(seconds == 5)
        let put = EtcdRequest.transaction(
            compares: [EtcdCompare(key: "/t/a", modRevision: 0)], puts: [EtcdPut(key: "/t/a", value: "n1 1 tcp://x:1", lease: lease), EtcdPut(key: "/t/b", value: "7")])
        #expect(gateway.perform(put, limit: .seconds(5)) == .transaction(succeeded: true))
        #expect(gateway.perform(put, limit: .seconds(5)) == .transaction(succeeded: false))
        guard case .values(let values) = gateway.perform(.read(["/t/a", "/t/b", "/t/none"]), limit: .seconds(5)) else {
            Issue.record("no values read")
            return
        }
        #expect(values.keys.sorted() == ["/t/a", "/t/b"])
        #expect(values["/t/a"]?.value == "n1 1 tcp://x:1" && values["/t/b"]?.value == "7")
        #expect(values["/t/a"]?.modRevision == values["/t/b"]?.modRevision && (values["/t/a"]?.modRevision ?? 0) > 0)
        #expect(gateway.perform(.keepAlive(lease: lease), limit: .seconds(5)) == .keptAlive(seconds: 5))
        #expect(gateway.perform(.revoke(lease: lease), limit: .seconds(5)) == .revoked)
        // The lease is gone, and the key that lived on it.
        #expect(gateway.perform(.keepAlive(lease: lease), limit: .seconds(5)) == .keptAlive(seconds: 0))
        #expect(gateway.perform(.read(["/t/a"]), limit: .seconds(5)) == .values([:]))
        #expect(gateway.perform(.revoke(lease: lease), limit: .seconds(5)) == .revoked)
    }

    @Test func `an endpoint that is not etcd answers garbage, one with nothing behind it is unreachable`() throws {
        let port = freePort()
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0 && listen(listener, 4) == 0)
        let server = Thread {
            for reply in ["SSH-2.0-OpenSSH_9.2\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"] {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                _ = Array(reply.utf8).withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(connection)
            }
        }
        server.start()
        let gateway = EtcdGateway(endpoints: try EtcdGateway.endpoints("http://127.0.0.1:\(port)"))
        #expect(gateway.perform(.grantLease(seconds: 5), limit: .seconds(5))
            == .failed(EtcdFailure(.garbage, "http://127.0.0.1:\(port) answered something that is not HTTP, not etcd's HTTP gateway")))
        #expect(gateway.perform(.grantLease(seconds: 5), limit: .seconds(5))
            == .failed(EtcdFailure(.garbage, "http://127.0.0.1:\(port) answered HTTP 200 with a body that is not a JSON object")))
        let nothing = freePort()
        let unreachable = EtcdGateway(endpoints: try EtcdGateway.endpoints("http://127.0.0.1:\(nothing)"))
        #expect(unreachable.perform(.grantLease(seconds: 5), limit: .seconds(5))
            == .failed(EtcdFailure(.unreachable, "connect to http://127.0.0.1:\(nothing): Connection refused")))
        #expect(throws: EtcdGateway.EndpointError.self) { try EtcdGateway.endpoints("https://127.0.0.1:2379") }
        #expect(throws: EtcdGateway.EndpointError.self) { try EtcdGateway.endpoints("127.0.0.1:2379") }
    }

    @Test func `one node leads each epoch; only a node the sync key names takes over, in a higher epoch`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let (first, firstEvents) = try Self.arbiter(etcd, node: "n1")
        #expect(firstEvents.wait(Self.isLead) == .lead(epoch: 1))
        #expect(first.mayRelease())
        #expect(try etcd.get("/cogd/bank/leader") == "n1 1 tcp://127.0.0.1:7100")
        #expect(try etcd.get("/cogd/bank/epoch") == "1")
        #expect(try etcd.get("/cogd/bank/sync") == "1 n1")

        let (second, secondEvents) = try Self.arbiter(etcd, node: "n2")
        let leader = ArbiterRecords.Leader(node: "n1", epoch: 1, endpoint: "tcp://127.0.0.1:7100")
        #expect(secondEvents.wait { $0 == .follow(leader) } != nil)
        #expect(!second.mayRelease())

        // n1 goes; the sync key names only n1 (no standby acknowledged its turns): n2 waits.
        first.resign()
        #expect(!first.mayRelease())
        #expect(secondEvents.wait { $0 == .follow(nil) } != nil)
        #expect(secondEvents.wait { $0 == .note("no node leads; only n1 may take the lead (epoch 1's leader and synchronous standbys)") } != nil)
        #expect(waitUntil(timeout: .seconds(20)) { first.isFinished })

        // A synchronous standby named in the sync key takes over, in epoch 2.
        let (third, thirdEvents) = try Self.arbiter(etcd, node: "n3")
        #expect(thirdEvents.wait { $0 == .follow(nil) } != nil)
        try etcd.put("/cogd/bank/sync", "1 n1 n3")
        #expect(thirdEvents.wait(Self.isLead) == .lead(epoch: 2))
        #expect(third.mayRelease())
        #expect(!secondEvents.all.contains(where: Self.isLead))
        #expect(try etcd.get("/cogd/bank/epoch") == "2")
        #expect(secondEvents.wait { $0 == .follow(ArbiterRecords.Leader(node: "n3", epoch: 2, endpoint: "tcp://127.0.0.1:7300")) } != nil)
        second.resign()
        third.resign()
        #expect(waitUntil(timeout: .seconds(20)) { second.isFinished && third.isFinished })
    }

    @Test func `a leader that cannot reach etcd closes its release gate by its deadline and steps down`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let (arbiter, events) = try Self.arbiter(etcd, node: "n1", ttl: 2)
        #expect(events.wait(Self.isLead) == .lead(epoch: 1))
        #expect(arbiter.mayRelease())
        etcd.pause()
        // Within the 2 s TTL the gate closes: nothing is released past the deadline.
        #expect(waitUntil(timeout: .seconds(10)) { !arbiter.mayRelease() })
        let stepDown = events.wait { if case .stepDown = $0 { true } else { false } }
        #expect(stepDown == .stepDown(reason: "the lease could not be renewed in time: epoch 1 ends at the local deadline, before etcd can give the leader key to another node"))
        etcd.resume()
        #expect(waitUntil(timeout: .seconds(10)) { arbiter.isFinished })
        #expect(!arbiter.mayRelease())
        // etcd back: once its old lease has ended (the presence key gone with it), the node, started again, leads a new
        // epoch. (Started while a loaded etcd still held it, it would be refused as a second node of its name.)
        #expect(waitUntil(timeout: .seconds(30)) { (try? etcd.get("/cogd/bank/members/n1")) == nil })
        let (again, againEvents) = try Self.arbiter(etcd, node: "n1", ttl: 2)
        #expect(againEvents.wait(Self.isLead) == .lead(epoch: 2))
        again.resign()
        #expect(waitUntil(timeout: .seconds(10)) { again.isFinished })
    }

    @Test func `a second node of one name and an etcd below the node's own epoch are refused at start`() throws {
        let etcd = try TestEtcd()
        defer { etcd.stop() }
        guard try etcd.start() else { return }
        let (first, firstEvents) = try Self.arbiter(etcd, node: "n1", ttl: 2)
        #expect(firstEvents.wait(Self.isLead) == .lead(epoch: 1))
        let (twin, twinEvents) = try Self.arbiter(etcd, node: "n1", ttl: 2)
        let refused = twinEvents.wait { if case .refuse = $0 { true } else { false } }
        #expect(refused == .refuse(reason:
            "another node named n1 is running in cluster bank: its presence key /cogd/bank/members/n1 stayed on a live lease "
                + "for longer than the lease TTL (2 s); give each node its own --name"))
        #expect(waitUntil(timeout: .seconds(10)) { twin.isFinished })
        #expect(first.mayRelease())

        let (ahead, aheadEvents) = try Self.arbiter(etcd, node: "n4", ttl: 2, ownEpoch: 9)
        let refusedAhead = aheadEvents.wait { if case .refuse = $0 { true } else { false } }
        #expect(refusedAhead == .refuse(reason:
            "etcd holds epoch 1 for cluster bank, below this node's own log (epoch 9): --ha names another etcd than the cluster's, "
                + "or etcd's data was lost; point --ha at the cluster's etcd (or, to start the cluster anew on this etcd, put 9 at /cogd/bank/epoch first)"))
        #expect(waitUntil(timeout: .seconds(10)) { ahead.isFinished })
        first.resign()
        #expect(waitUntil(timeout: .seconds(10)) { first.isFinished })
    }
}
