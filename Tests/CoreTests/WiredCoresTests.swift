import Cog
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import LedgerRig
import Testing

/// A leader core and a replica core wired by hand: every message the
/// replica sends goes to the leader as a batch of its own, and what the
/// leader sends, publishes or streams (a snapshot in small parts) goes back.
@MainActor
final class WiredCores {
    let leader: CoreHarness
    var replica: ReplicaCore
    /// The replica's connection.
    let connection: String
    /// Where the replica subscribed (nil: not yet).
    private(set) var subscribed: String?
    /// Publications are lost while this is true (the subscriber missed them).
    var losingPublications = false
    /// What the replica did, in order, in words (for the assertions).
    private(set) var log: [String] = []
    /// Replies the replica got.
    private(set) var replies: [OpReply] = []
    private var toLeader: [WireMessage] = []

    init(leader: CoreHarness, worker: String) {
        self.leader = leader
        replica = ReplicaCore(settings: ReplicaCore.Settings(name: worker))
        connection = worker + "/1"
    }

    /// The replica starts and syncs.
    func start() {
        carryOut(replica.step(.start, now: leader.now))
        settle()
    }

    /// The replica sends one of its own requests (numbered by its core).
    func request(_ op: String, _ argument: [UInt8]) throws {
        let next = replica.nextSequence()
        let sequence = try #require(next)
        toLeader.append(.op(OpRequest(request: RequestID(worker: replica.settings.name, sequence: sequence), op: op, argument: argument)))
        settle()
    }

    /// Another peer's ops, in one batch; the replica gets what was published.
    func clientBatch(_ messages: [WireMessage]) {
        deliver(leader.batch(messages.map { ("client", $0) }))
        settle()
    }

    /// Time passes for both, in steps of 100 ms (heartbeats, expiry);
    /// `replicaTicks` false: the replica is frozen meanwhile.
    func advance(by duration: Duration, replicaTicks: Bool = true) {
        let end = leader.now + duration
        while leader.now < end {
            deliver(leader.tick(at: leader.now + .milliseconds(100)))
            if replicaTicks { carryOut(replica.step(.tick, now: leader.now)) }
            settle()
        }
    }

    /// Passes messages to the leader (one batch per round) until none is left.
    func settle() {
        var rounds = 0
        while !toLeader.isEmpty {
            rounds += 1
            guard rounds < 100 else {
                Issue.record("the cores kept talking: \(toLeader.map(\.typeName))")
                return
            }
            let messages = toLeader
            toLeader = []
            deliver(leader.batch(messages.map { (connection, $0) }))
        }
    }

    private func deliver(_ sent: Sent) {
        // The turn stream first, then the replies, then snapshots streamed between batches.
        for revisions in sent.published where subscribed != nil && !losingPublications {
            let records = Array(leader.log.records[Int(revisions.lowerBound - 1)..<Int(revisions.upperBound - 1)])
            carryOut(replica.step(.published(epoch: leader.core.epoch, records: records), now: leader.now))
        }
        for message in sent[connection] { carryOut(replica.step(.leader(message), now: leader.now)) }
        for snapshot in sent.snapshots where snapshot.peer == peer(connection) {
            let entries = snapshot.entries.map { SnapshotEntry(name: $0.name, key: $0.key, value: $0.value) }
            let parts =
                snapshot.whole
                ? [WireMessage.snapshot(epoch: leader.core.epoch, revision: snapshot.revision, entries: entries)]
                : WireMessage.snapshotParts(epoch: leader.core.epoch, revision: snapshot.revision, entries: entries, target: 100)
            log.append("snapshot in \(parts.count) parts")
            for part in parts { carryOut(replica.step(.leader(part), now: leader.now)) }
            leader.snapshotEnded(connection)
        }
    }

    private func carryOut(_ effects: [ReplicaCore.Effect]) {
        for effect in effects {
            switch effect {
            case .send(let message): toLeader.append(message)
            case .subscribe(let endpoint):
                subscribed = endpoint
                log.append("subscribe")
            case .applySnapshot(let revision, _, _): log.append("sync at \(revision)")
            case .apply(let record): log.append("apply \(record.revision)")
            case .firstSync: log.append("first sync")
            case .registerScopesAnew: log.append("register anew")
            case .forgetInstances: log.append("forget instances")
            case .reply(let reply): replies.append(reply)
            case .registered(let registration, _, _): log.append("registered \(registration)")
            case .refused(let error): log.append("refused \(error.code)")
            case .suspendEffects: log.append("suspend effects")
            case .resumeEffects: log.append("resume effects")
            case .followLeader(let endpoint, let epoch): log.append("follow \(endpoint) epoch \(epoch)")
            }
        }
    }

    /// The replica holds exactly the leader's committed state.
    var converged: Bool {
        replica.encodedState == leader.log.state.mapValues(\.value) && replica.appliedRevision == leader.log.lastRevision
    }
}

@MainActor
@Suite("Leader and replica cores wired by hand")
struct WiredCoresTests {
    static func openings(_ range: ClosedRange<Int>, seq: UInt64) throws -> [WireMessage] {
        try range.enumerated().map { offset, n in try Wire.open("acct\(n)", 100 + n, worker: "client", seq: seq + UInt64(offset)) }
    }

    @Test func `a replica that joins late, misses a publication and sends its own ops ends at the leader's state`() throws {
        let wired = WiredCores(leader: try CoreHarness(), worker: "w1")
        wired.clientBatch(try Self.openings(1...12, seq: 1))
        wired.clientBatch([try Wire.transfer("acct1", "acct2", 30, worker: "client", seq: 13)])
        #expect(wired.leader.log.lastRevision == 13)

        wired.start()
        #expect(wired.log.first == "subscribe")
        #expect(wired.log.contains { $0.hasPrefix("snapshot in ") && $0 != "snapshot in 1 parts" }, "a state of many parts: \(wired.log)")
        #expect(wired.log.suffix(2) == ["sync at 13", "first sync"])
        #expect(wired.converged)

        // Published turns are applied as they come.
        wired.clientBatch([try Wire.transfer("acct2", "acct3", 5, worker: "client", seq: 14), try Wire.greet("acct3", worker: "client", seq: 15)])
        #expect(wired.log.suffix(2) == ["apply 14", "apply 15"])
        // A publication lost: the next one shows the gap, a catch-up fills it.
        wired.losingPublications = true
        wired.clientBatch([try Wire.open("late", 1, worker: "client", seq: 16)])
        wired.losingPublications = false
        wired.clientBatch([try Wire.transfer("late", "acct1", 1, worker: "client", seq: 17), try Wire.close("late", worker: "client", seq: 18)])
        #expect(wired.replica.appliedRevision == 18)
        #expect(wired.log.suffix(3) == ["apply 16", "apply 17", "apply 18"])
        // The replica's own request.
        try wired.request("ledger.transfer", try CBOREncoder().encode(Transfer(from: "acct12", to: "acct1", amount: 12)))
        #expect(wired.replies == [OpReply(request: RequestID(worker: "w1", sequence: 1), outcome: .applied(revision: 19))])
        wired.advance(by: .seconds(3))
        #expect(wired.converged)
        #expect(wired.leader.core.status(now: wired.leader.now).workers.map(\.appliedRevision) == [19])
        #expect(try wired.leader.accounts().count == 12)
    }

    @Test func `after a leader restart the replica re-syncs in the new epoch and converges again`() throws {
        let wired = WiredCores(leader: try CoreHarness(), worker: "w1")
        wired.clientBatch(try Self.openings(1...5, seq: 1))
        wired.start()
        #expect(wired.converged)

        try wired.leader.restart()
        wired.clientBatch([try Wire.transfer("acct5", "acct1", 5, worker: "client", seq: 6)])  // published in epoch 2, before it rejoins
        #expect(wired.replica.appliedRevision == 5, "a record of an epoch it has not joined is ignored")
        wired.advance(by: .milliseconds(1_100))
        #expect(wired.replica.epoch == 2)
        #expect(wired.log.contains("refused hello-first"))
        #expect(wired.log.suffix(2) == ["sync at 6", "register anew"])
        #expect(wired.converged)
        // Its requests are served in the new epoch.
        try wired.request("ledger.greet", try CBOREncoder().encode("acct1"))
        #expect(wired.replies.last == OpReply(request: RequestID(worker: "w1", sequence: 1), outcome: .applied(revision: 7)))
        wired.clientBatch(try Self.openings(6...8, seq: 7))
        #expect(wired.converged)
    }

    @Test func `a frozen replica given up for silence rejoins and converges`() throws {
        let wired = WiredCores(leader: try CoreHarness(), worker: "w1")
        wired.clientBatch(try Self.openings(1...3, seq: 1))
        wired.start()
        wired.advance(by: .seconds(6), replicaTicks: false)
        #expect(wired.leader.core.status(now: wired.leader.now).workers.isEmpty, "gone")
        wired.clientBatch([try Wire.transfer("acct3", "acct1", 3, worker: "client", seq: 4)])
        wired.advance(by: .seconds(2))
        #expect(wired.log.contains("refused gone"))
        let gone = try #require(wired.log.firstIndex(of: "refused gone"))
        #expect(wired.log[gone...].prefix(3) == ["refused gone", "forget instances", "register anew"])
        #expect(wired.leader.core.status(now: wired.leader.now).workers.map(\.name) == ["w1"])
        #expect(wired.converged)
    }
}
