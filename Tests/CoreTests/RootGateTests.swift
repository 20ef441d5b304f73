import Cog
import CogCluster
import CogCodec
import CogLog
import Testing

private let _rootLevelCog = Cog<Int>.Manual(name: "rootGateTests.level") { 0 }
private let rootPingOp = RemoteOp<Int>(name: "rootGateTests.ping") { _, _ in }

/// A link that places every mechanism's root (`cogwire.md` §6a) and keeps
/// what the replica's mechanisms send, with the instance each is stamped with.
@MainActor
private final class PlacingLink: CogRemoteLink {
    var gates: [String: CogRootGate] = [:]
    var sent: [(op: String, instance: UInt64?)] = []
    /// Requests whose root retired before it was placed (what the worker answers `retired-scope` itself).
    var abandoned: [String] = []
    let codec: any CogDurableStore = ReplicaCodec()

    func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?) {
        // As the worker does: a retired root's request is not sent; one whose instance is unknown waits.
        guard let slot = owner?.owningSlot else { return sent.append((name, nil)) }
        guard !slot.isRetired else { return }
        if let instance = slot.instance {
            sent.append((name, instance))
        } else {
            slot.wait(.init(send: { [weak self] in self?.sent.append((name, $0)) }, abandon: { [weak self] in self?.abandoned.append(name) }))
        }
    }

    func registerScope(
        path: String, source: String, key: [UInt8]?, form: CogScopeForm, parent: CogInstanceSlot?, currentEncoding: (@MainActor () -> [UInt8]?)?
    ) -> (any CogRemoteScope)? { nil }

    func placeRoot(mechanism: String, gate: CogRootGate) -> Bool {
        gates[mechanism] = gate
        return true
    }
}

/// Watches the level (each run pings the leader) and runs a task per lifetime.
private struct LevelMechanism: Mechanism {
    let seen: Recorder<String>
    let controllers: Recorder<MechanismController>
    func operate(_ m: MechanismController) {
        controllers.append(m)
        m.perform(rootPingOp, 0)
        m.watch(_rootLevelCog, initial: .run, name: "level") { [weak m, seen] _, level in
            seen.append("level \(level)")
            m?.perform(rootPingOp, level)
        }
        m.task(name: "life") { @MainActor [seen] in
            seen.append("task started")
            do {
                try await Task.sleep(for: .seconds(3_600))
            } catch {
                seen.append("task cancelled")
            }
        }
    }
}

@MainActor
private final class Recorder<Value>: @unchecked Sendable {
    private(set) var values: [Value] = []
    func append(_ value: Value) { values.append(value) }
}

@MainActor
@Suite("A placed mechanism root runs its own work only where it is placed")
struct RootGateTests {
    static func setLevel(_ cogs: Cogs, _ level: Int) throws {
        try cogs.applyReplicatedTurn(
            named: "set", writes: [CogDurableWrite(name: "rootGateTests.level", key: nil, value: try CBOREncoder().encode(level))],
            codec: ReplicaCodec())
    }

    static func settle() async {
        for _ in 0..<20 { await Task.yield() }
    }

    @Test func `reactions and tasks run in lifetimes opened where the root is placed, their requests stamped with its instance`() async throws {
        let seen = Recorder<String>()
        let controllers = Recorder<MechanismController>()
        let link = PlacingLink()
        let cogs = Cogs.replica()
        cogs.remoteLink = link
        cogs.operateReplicaMechanisms([LevelMechanism(seen: seen, controllers: controllers)])
        let gate = try #require(link.gates["Level"])
        try Self.setLevel(cogs, 1)
        await Self.settle()
        #expect(seen.values == [], "not placed yet: nothing runs")
        #expect(link.sent.isEmpty, "operate's own request waits for the root's placement")

        gate.place(7)
        await Self.settle()
        #expect(seen.values == ["level 1", "task started"])
        #expect(link.sent.map(\.op) == ["rootGateTests.ping", "rootGateTests.ping"])
        #expect(link.sent.map(\.instance) == [7, 7], "operate's request, then the reaction's, stamped with the root")
        try Self.setLevel(cogs, 2)
        #expect(seen.values.last == "level 2")

        // Moved to another instance (placed here again): the old lifetime ends, a new one runs anew.
        gate.place(9)
        await Self.settle()
        // (A cancelled task notices when it next runs: count, not order, across lifetimes.)
        #expect(seen.values.filter { $0.hasPrefix("level") } == ["level 1", "level 2", "level 2"])
        #expect(seen.values.filter { $0 == "task started" }.count == 2 && seen.values.filter { $0 == "task cancelled" }.count == 1)
        #expect(link.sent.last?.instance == 9)

        // Placed elsewhere: the lifetime ends, changes run nothing, requests are not sent.
        gate.place(nil)
        await Self.settle()
        let sent = link.sent.count
        try Self.setLevel(cogs, 3)
        controllers.values.first?.perform(rootPingOp, 3)
        await Self.settle()
        #expect(seen.values.filter { $0.hasPrefix("level") } == ["level 1", "level 2", "level 2"], "level 3 ran nothing")
        #expect(seen.values.filter { $0 == "task started" }.count == 2 && seen.values.filter { $0 == "task cancelled" }.count == 2)
        #expect(link.sent.count == sent, "a root placed elsewhere sends nothing")
        #expect(gate.openings == 2)
    }

    @Test func `a request waiting for the root's placement is abandoned, never left waiting, when the root is placed elsewhere first`() async throws {
        let link = PlacingLink()
        let cogs = Cogs.replica()
        cogs.remoteLink = link
        cogs.operateReplicaMechanisms([LevelMechanism(seen: Recorder<String>(), controllers: Recorder<MechanismController>())])
        let gate = try #require(link.gates["Level"])
        await Self.settle()
        #expect(link.sent.isEmpty && link.abandoned.isEmpty, "operate's request waits for the root's placement")
        gate.place(nil)
        #expect(link.abandoned == ["rootGateTests.ping"], "told at once, so its worker answers it retired-scope")
        gate.place(7)
        await Self.settle()
        #expect(link.abandoned == ["rootGateTests.ping"] && link.sent.map(\.instance) == [7], "only the new lifetime's own request goes, once")
    }
}
