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

        /// Runs the follower, answering hello number N with `answer(N)`, until `done` holds (false after 10 s).
        func drive(answer: (Int) -> WireMessage, until done: () -> Bool) throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                follower.pass(leaderEndpoint: endpoint, leaderEpoch: 3, timeout: .milliseconds(20))
                while let frames = try router.receive(), frames.count == 2 {
                    guard case .standbyHello? = try? WireMessage.decode(frames[1]) else { continue }
                    hellos += 1
                    _ = try router.send([frames[0], answer(hellos).encoded()])
                }
                if done() { return true }
            }
            return false
        }

        /// Sends the follower `message` unasked (its identity is the last hello's).
        func send(_ message: WireMessage, to identity: [UInt8]) throws {
            _ = try router.send([identity, message.encoded()])
        }
    }

    private static let copies = "the leader is sending 2 copies already; say standby-hello again later"
    private static let full = "the leader serves 16 standbys already; this one is not taken"

    @Test func `the same refusal is logged once while it lasts, a new reason at once, and again once the standby was in step`() throws {
        let rig = try Rig()
        defer { rig.close() }
        // Hello 5 is sent only once refusal 4 was read: four refusals for one reason, one warning.
        #expect(try rig.drive(answer: { _ in .error(WireError(.unavailable, Self.copies)) }, until: { rig.hellos >= 5 }))
        #expect(rig.refusals == ["the leader refused this standby: \(Self.copies)"])
        // Another reason is logged at once.
        #expect(try rig.drive(answer: { _ in .error(WireError(.unavailable, Self.full)) }, until: { rig.hellos >= 7 }))
        #expect(rig.refusals == ["the leader refused this standby: \(Self.copies)", "the leader refused this standby: \(Self.full)"])
        // Welcomed, then refused for the first reason again (a leader that dropped it): logged, as a new episode.
        #expect(try rig.drive(answer: { _ in .shipWelcome(epoch: 3, sequence: 0) }, until: { rig.notes.contains { $0.event == "standby-in-step" } }))
        // In step, it says no hello: the leader refuses its acknowledgement instead, which the stand-in sends unasked.
        var identity: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while identity.isEmpty && ContinuousClock.now < deadline {
            rig.follower.pass(leaderEndpoint: rig.endpoint, leaderEpoch: 3, timeout: .milliseconds(20))
            // Its keep-alive (every 0.5 s) says who it is.
            if let frames = try rig.router.receive(), frames.count == 2, case .shipAck? = try? WireMessage.decode(frames[1]) { identity = frames[0] }
        }
        #expect(!identity.isEmpty)
        try rig.send(.error(WireError(.unavailable, Self.copies)), to: identity)
        #expect(try rig.drive(answer: { _ in .error(WireError(.unavailable, Self.copies)) }, until: { rig.refusals.count == 3 }))
        #expect(rig.refusals.last == "the leader refused this standby: \(Self.copies)")
    }

    @Test func `a refusal that lasts past the interval is logged again with how many times it came meanwhile`() throws {
        // Hellos come a second apart: with 1.5 s between lines, a line is skipped, then counted in the next.
        let rig = try Rig(refusalLogInterval: .milliseconds(1_500))
        defer { rig.close() }
        #expect(try rig.drive(answer: { _ in .error(WireError(.unavailable, Self.copies)) }, until: { rig.refusals.count >= 2 && rig.hellos >= 4 }))
        let counted = rig.refusals.dropFirst().first { $0.contains("(refused ") }
        #expect(rig.refusals.first == "the leader refused this standby: \(Self.copies)")
        #expect(counted?.hasPrefix("the leader refused this standby: \(Self.copies) (refused ") == true)
        #expect(counted?.hasSuffix("for this reason since it was logged)") == true)
        #expect(rig.refusals.count < rig.hellos)
    }
}
