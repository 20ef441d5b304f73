import Cog
import CogCodec
import CogCluster
import CogLog
import CogProtocol
import CogWire
import Testing

/// Versioned rigs (`cogwire.md` §7, "Rig versions"): a worker's hello carries its
/// rig's fingerprint; the leader refuses `rig-mismatch` a rig it does not
/// serve or an incompatible version of one, and the worker says hello now
/// and then until a leader takes it.
@MainActor
@Suite("Rig fingerprints in hello")
struct RigFingerprintTests {
    static let served = CogRig.Fingerprint(
        name: "counter", schemaVersion: 1, durableSources: ["counter.count", "counter.isBonusOpen"], ops: ["counter.bump", "counter.setBonus"])
    static let welcome = WireMessage.welcome(epoch: 1, lastRevision: 0, turnsEndpoint: CoreHarness.turnsEndpoint, lastSequence: 0)

    static func hello(_ rig: CogRig.Fingerprint?) -> WireMessage { .hello(worker: "w", lastRevision: 0, rig: rig) }

    @Test func `the same rig, or one that lacks what the leader added, is welcomed`() throws {
        let leader = try CoreHarness(rigs: [Self.served])
        #expect(leader.send("a", Self.hello(Self.served)) == [Self.welcome])
        // The leader's version added `counter.setBonus` and `counter.isBonusOpen`: an older worker follows it.
        let older = CogRig.Fingerprint(name: "counter", schemaVersion: 1, durableSources: ["counter.count"], ops: ["counter.bump"])
        #expect(leader.send("b", .hello(worker: "w2", lastRevision: 0, rig: older)) == [Self.welcome])
        // A hello without a fingerprint (a tool, a client of the protocol alone) is not compared.
        #expect(leader.send("c", .hello(worker: "w3", lastRevision: 0)) == [Self.welcome])
        #expect(leader.core.errorCounts.isEmpty)
    }

    @Test func `a renamed op, a removed durable source or another schema version is refused, naming what differs`() throws {
        let leader = try CoreHarness(rigs: [Self.served])
        let renamed = CogRig.Fingerprint(
            name: "counter", schemaVersion: 1, durableSources: ["counter.count", "counter.isBonusOpen"], ops: ["counter.add", "counter.setBonus"])
        #expect(
            leader.send("a", Self.hello(renamed)) == [
                .error(WireError(
                    .rigMismatch,
                    "worker w's rig counter differs from the leader's: ops the leader does not serve: `counter.add` "
                        + "(a worker may lack what the leader adds, nothing else; run the leader's version of the rig)"))
            ])
        let bumped = CogRig.Fingerprint(
            name: "counter", schemaVersion: 2, durableSources: ["counter.count", "counter.isBonusOpen", "counter.total"], ops: ["counter.bump"])
        let refusal = try #require(leader.error("a", Self.hello(bumped)))
        #expect(refusal.code == .rigMismatch)
        #expect(refusal.message.contains("its schema version is 2, the leader's 1"))
        #expect(refusal.message.contains("durable sources the leader does not declare: `counter.total`"))
        let unknown = try #require(leader.error("a", Self.hello(CogRig.Fingerprint(name: "todos", schemaVersion: 1, durableSources: [], ops: []))))
        #expect(unknown.message == "worker w runs rig `todos`, which this leader does not serve (it serves `counter`)")
        // Refused before the name is taken: nothing is held, nothing logged.
        #expect(leader.send("a", Wire.heartbeat("w")).first?.typeName == "error")
        #expect(leader.core.errorCounts["rig-mismatch"] == 3)
        #expect(leader.log.lastRevision == 0)
    }

    @Test func `a worker whose op argument's type changed is refused naming the op; one without shapes is compared by names`() throws {
        func counter(bump: OpArgumentShape) -> CogRig.Fingerprint {
            var rig = Self.served
            rig.shapes = .init(
                ops: ["counter.bump": bump, "counter.setBonus": .boolean],
                durableSources: ["counter.count": .init(value: .integer), "counter.isBonusOpen": .init(value: .boolean)])
            return rig
        }
        let leader = try CoreHarness(rigs: [counter(bump: .integer)])
        #expect(leader.send("a", Self.hello(counter(bump: .integer))) == [Self.welcome])
        let refusal = try #require(leader.error("b", .hello(worker: "w2", lastRevision: 0, rig: counter(bump: .string))))
        #expect(refusal.code == .rigMismatch)
        #expect(
            refusal.message
                == "worker w2's rig counter differs from the leader's: op `counter.bump` takes integer at the leader, string in this worker's rig "
                + "(a worker may lack what the leader adds, nothing else; run the leader's version of the rig)")
        // A worker built before fingerprints carried shapes: names only, as before.
        #expect(leader.send("c", .hello(worker: "w3", lastRevision: 0, rig: Self.served)) == [Self.welcome])
        #expect(leader.core.errorCounts == ["rig-mismatch": 1])
    }

    @Test func `a hello whose shape nests as deep as the codec allows decodes without trapping and is refused past the limits`() throws {
        func hello(depth: Int) -> [UInt8] {
            var shape = CBORValue.text("integer")
            for _ in 0..<depth { shape = .map([(.text("array"), shape)]) }
            let rig = CBORValue.map([
                (.text("name"), .text("counter")), (.text("schemaVersion"), .unsigned(1)),
                (.text("durableSources"), .array([.text("counter.count"), .text("counter.isBonusOpen")])),
                (.text("ops"), .array([.text("counter.bump"), .text("counter.setBonus")])),
                (.text("shapes"), .map([(.text("ops"), .map([(.text("counter.bump"), shape)]))])),
            ])
            let body = CBORValue.map([(.text("worker"), .text("w")), (.text("lastRevision"), .unsigned(0)), (.text("rig"), rig)])
            return CBORWriter.encode(.map([(.text("v"), .unsigned(1)), (.text("type"), .text("hello")), (.text("body"), body)]))
        }
        // Past the codec's nesting limit: malformed, as any frame nested that deep.
        #expect(throws: WireDecodeError.self) { try WireMessage.decode(hello(depth: 300)) }
        // Within it: decoded, then refused for its shape, naming the op.
        let message = try WireMessage.decode(hello(depth: 240))
        var served = Self.served
        served.shapes = .init(ops: ["counter.bump": .integer])
        let leader = try CoreHarness(rigs: [served])
        let refusal = try #require(leader.error("a", message))
        #expect(refusal.code == .rigMismatch)
        #expect(refusal.message.contains("op `counter.bump`: this worker's shape is past the limits (32 levels deep, 4096 parts)"), "\(refusal.message)")
    }

    @Test func `a leader given no fingerprints compares nothing`() throws {
        let leader = try CoreHarness()
        #expect(leader.send("a", Self.hello(CogRig.Fingerprint(name: "any", schemaVersion: 9, durableSources: ["x"], ops: ["y"]))) == [Self.welcome])
    }

    @Test func `a refused worker sends nothing but a hello every 5 s, and a welcome ends it`() {
        var replica = ReplicaCore(settings: .init(name: "w", checksDigest: false, rig: Self.served))
        #expect(replica.step(.start, now: .zero) == [.send(Self.hello(Self.served))])
        let refusal = WireError(.rigMismatch, "worker w's rig counter differs from the leader's: …")
        #expect(replica.step(.leader(.error(refusal)), now: .milliseconds(10)) == [.refused(refusal), .forgetInstances])
        #expect(replica.rigRefused == refusal && replica.summary.contains("rig refused"))
        #expect(replica.step(.tick, now: .seconds(1)) == [], "no heartbeat")
        #expect(replica.step(.tick, now: .milliseconds(4_900)) == [])
        #expect(replica.step(.tick, now: .seconds(5)) == [.send(Self.hello(Self.served))])
        #expect(replica.step(.leader(.error(refusal)), now: .milliseconds(5_010)) == [.refused(refusal)], "still refused: said once")
        #expect(replica.step(.tick, now: .seconds(6)) == [])
        // The leader now serves a compatible version: welcomed, the replica syncs.
        #expect(
            replica.step(.leader(Self.welcome), now: .seconds(10))
                == [.subscribe(CoreHarness.turnsEndpoint), .send(.snapshotRequest(inParts: true))])
        #expect(replica.rigRefused == nil)
    }
}
