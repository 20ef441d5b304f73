import CogCluster
import CogProtocol
import CogWire
import Foundation
import Testing

/// A standby the leader refuses says hello again every second; a cause that
/// lasts (copies in progress, standbys enough) must not write a warning a
/// second into the operator's log.
@Suite("A standby refused for a lasting cause")
struct StandbyRefusalLogTests {
    /// A follower of a stand-in leader: a ROUTER on loopback that answers each `standby-hello` as the test says.
    final class Rig {
        let context: ZMQContext
        let router: ZMQSocket
        let endpoint = "tcp://127.0.0.1:\(freePort())"
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-refusal-\(UUID().uuidString)").path
        var follower: StandbyFollower!
        /// What the follower logged: (event, message).
        var notes: [(event: String, message: String)] = []
        private(set) var hellos = 0

        init(refusalLogInterval: Duration = .seconds(60)) throws {
            context = try ZMQContext()
            router = try ZMQSocket(context, .router, linger: .zero)
            try router.bind(endpoint)
            follower = try StandbyFollower(node: "n2", dataFolder: folder, refusalLogInterval: refusalLogInterval) { [unowned self] event, message, _ in
                notes.append((event, message))
            }
        }

        func close() {
            follower.close()
            router.close()
            context.close()
            try? FileManager.default.removeItem(atPath: folder)
        }

        var refusals: [String] { notes.filter { $0.event == "standby-refused" }.map(\.message) }
        /// The follower's ZeroMQ identity, from its first hello (empty before).
        private(set) var identity: [UInt8] = []

        /// Runs the follower, answering hello number N with `answer(N)`, until `done` holds (false after 10 s).
        func drive(answer: (Int) -> WireMessage, until done: () -> Bool) throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                follower.pass(leaderEndpoint: endpoint, leaderEpoch: 3, timeout: .milliseconds(20))
                while let frames = try router.receive(), frames.count == 2 {
                    guard case .standbyHello? = try? WireMessage.decode(frames[1]) else { continue }
                    hellos += 1
                    identity = frames[0]
                    _ = try router.send([frames[0], answer(hellos).encoded()])
                }
                if done() { return true }
            }
            return false
        }

        /// Sends the follower `message` unasked, as a leader may at any time (it reads each in order).
        func send(_ message: WireMessage) throws {
            _ = try router.send([identity, message.encoded()])
        }
    }

    private static let copies = "the leader is sending 2 copies already; say standby-hello again later"
    private static let full = "the leader serves 16 standbys already; this one is not taken"

    @Test func `the same refusal is logged once while it lasts, a new reason at once, and again once the standby was in step`() throws {
        let rig = try Rig()
        defer { rig.close() }
        let copies = WireMessage.error(WireError(.unavailable, Self.copies))
        // Its first hello is refused, and three more refusals for the same reason follow; then one for another reason,
        // read after them (one connection keeps the order).
        #expect(try rig.drive(answer: { _ in copies }, until: { !rig.refusals.isEmpty }))
        for _ in 0..<3 { try rig.send(copies) }
        try rig.send(.error(WireError(.unavailable, Self.full)))
        #expect(try rig.drive(answer: { _ in copies }, until: { rig.refusals.count >= 2 }))
        #expect(rig.refusals == ["the leader refused this standby: \(Self.copies)", "the leader refused this standby: \(Self.full)"])
        // Welcomed, then refused for the first reason again (a leader that dropped it): logged, as a new episode.
        try rig.send(.shipWelcome(epoch: 3, sequence: 0))
        #expect(try rig.drive(answer: { _ in copies }, until: { rig.notes.contains { $0.event == "standby-in-step" } }))
        try rig.send(copies)
        #expect(try rig.drive(answer: { _ in copies }, until: { rig.refusals.count >= 3 }))
        #expect(rig.refusals.count == 3 && rig.refusals.last == "the leader refused this standby: \(Self.copies)")
    }

    @Test func `a refusal that lasts past the interval is logged again with how many times it came meanwhile`() throws {
        let rig = try Rig(refusalLogInterval: .milliseconds(300))
        defer { rig.close() }
        let copies = WireMessage.error(WireError(.unavailable, Self.copies))
        #expect(try rig.drive(answer: { _ in copies }, until: { !rig.refusals.isEmpty }))
        // The same refusal every 50 ms: most are skipped, and the next line logged says how many.
        var sent = 1
        let logged = try rig.drive(answer: { _ in copies }) {
            if sent < 200 {
                try? rig.send(copies)
                sent += 1
                usleep(30_000)
            }
            return rig.refusals.count >= 2
        }
        #expect(logged)
        #expect(rig.refusals.first == "the leader refused this standby: \(Self.copies)")
        let counted = rig.refusals.dropFirst().first
        #expect(counted?.hasPrefix("the leader refused this standby: \(Self.copies) (refused ") == true)
        #expect(counted?.hasSuffix("more times for this reason since it was logged)") == true)
        #expect(rig.refusals.count < sent)
    }
}
