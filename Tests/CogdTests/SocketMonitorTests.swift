import CogWire
import Foundation
import Testing

/// ZeroMQ's I/O thread hands a socket's monitor events to a `HandshakeWatch`
/// with a blocking send. Sent to a reader already closed, or into a full
/// queue, it would wait for good, and with it every connection of the
/// context: a worker stopped hearing its leader after a restart (the drill
/// found it: the worker replaces its turn-stream socket at a new epoch, and
/// the old socket's late connection event went to a closed reader).
@Suite("Socket monitors never stall a context", .serialized, .timeLimit(.minutes(10)))
struct SocketMonitorTests {
    /// Sends one message from a fresh DEALER to a ROUTER, both in `context`;
    /// whether the ROUTER got it within 5 s.
    private func contextStillCarries(_ context: ZMQContext) throws -> Bool {
        let endpoint = "tcp://127.0.0.1:\(freePort())"
        let router = try ZMQSocket(context, .router, linger: .zero)
        defer { router.close() }
        try router.bind(endpoint)
        let dealer = try ZMQSocket(context, .dealer, linger: .zero)
        defer { dealer.close() }
        try dealer.connect(endpoint)
        _ = try dealer.send([Array("ping".utf8)])
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if try ZMQSocket.poll([router], timeout: .milliseconds(100))[0], let frames = try router.receive() {
                return frames.last == Array("ping".utf8)
            }
        }
        return false
    }

    /// A publisher bound on a free port, and a subscriber watched, not yet connected.
    private func watchedSubscriber(_ context: ZMQContext) throws -> (publisher: ZMQSocket, subscriber: ZMQSocket, watch: HandshakeWatch, endpoint: String) {
        let endpoint = "tcp://127.0.0.1:\(freePort())"
        let publisher = try ZMQSocket(context, .publisher, linger: .zero)
        try publisher.bind(endpoint)
        let subscriber = try ZMQSocket(context, .subscriber, linger: .zero)
        try subscriber.subscribeToAll()
        return (publisher, subscriber, try HandshakeWatch(subscriber), endpoint)
    }

    @Test func `a watch closed before its socket connects leaves the context carrying messages`() throws {
        let context = try ZMQContext()
        let (publisher, subscriber, watch, endpoint) = try watchedSubscriber(context)
        watch.close()
        // Connected and handshaken: events the closed watch must not be sent.
        try subscriber.connect(endpoint)
        let carries = try contextStillCarries(context)
        #expect(carries, "the context's I/O thread is blocked")
        subscriber.close()
        publisher.close()
        // A blocked I/O thread would hang the context's close too.
        if carries { context.close() }
    }

    @Test func `a socket closed while it connects, then its watch, leaves the context carrying messages`() throws {
        let context = try ZMQContext()
        for _ in 0..<50 {
            let (publisher, subscriber, watch, endpoint) = try watchedSubscriber(context)
            try subscriber.connect(endpoint)
            // The order the worker used when it replaced its turn-stream socket.
            subscriber.close()
            watch.close()
            publisher.close()
        }
        let carries = try contextStillCarries(context)
        #expect(carries, "the context's I/O thread is blocked")
        if carries { context.close() }
    }

    @Test func `thousands of handshakes unread by the watch leave the context carrying messages`() throws {
        let context = try ZMQContext()
        let endpoint = "tcp://127.0.0.1:\(freePort())"
        let router = try ZMQSocket(context, .router, linger: .zero)
        try router.bind(endpoint)
        let watch = try HandshakeWatch(router)
        // Clients from another context: each handshake is one event on the
        // router's monitor, more than ZeroMQ's default queue of 2,000.
        var received = 0
        for _ in 0..<10 {
            // (A context holds at most 1,023 sockets, closed ones until reaped.)
            let clients = try ZMQContext()
            for _ in 0..<250 {
                let client = try ZMQSocket(clients, .dealer, linger: .seconds(5))
                try client.connect(endpoint)
                _ = try client.send([[1]])
                client.close()
                while try router.receive() != nil { received += 1 }
            }
            clients.close()
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while received < 2_500, ContinuousClock.now < deadline {
            if try ZMQSocket.poll([router], timeout: .milliseconds(100))[0] {
                while try router.receive() != nil { received += 1 }
            }
        }
        #expect(received == 2_500)
        let carries = try contextStillCarries(context)
        #expect(carries, "the context's I/O thread is blocked")
        _ = try watch.problem()
        #expect(watch.succeeded)
        watch.close()
        router.close()
        if carries { context.close() }
    }
}
