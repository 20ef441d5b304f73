import Cog
import CogCluster
import CogLog
import CogProtocol
import CogWire
import Testing

/// The key rules of `cogwire.md` §9 in the leader core, with no sockets:
/// each message is judged by the key its connection authenticated with.
@MainActor
@Suite("Leader core: keys decide names and roles")
struct KeyAuthorizationTests {
    static let worker = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
    static let client = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
    static let observer = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"

    static func table(_ lines: [String]) throws -> PeerTable { try PeerTable(parsing: lines.joined(separator: "\n")) }
    static let all = ["\(worker) worker w1", "\(client) client ops-* ledger.open", "\(observer) observer dash"]

    /// A harness whose peers `w` (worker key), `c` (client key), `o` (observer key) and `x` (no key) connect.
    static func harness() throws -> CoreHarness {
        let leader = try CoreHarness(peers: try table(all))
        leader.keys = ["w": worker, "c": client, "o": observer]
        return leader
    }

    @Test func `a connection without a key, or with a key no longer listed, is refused unknown-key and nothing runs`() throws {
        let leader = try Self.harness()
        #expect(leader.error("x", Wire.hello("w1"))?.code == "unknown-key")
        #expect(leader.outcome("x", try Wire.open("a", 1, worker: "w1", seq: 1))?.rejection?.code == .unknownKey)
        #expect(leader.outcome("c", try Wire.open("a", 1, worker: "ops-1", seq: 1)) == .applied(revision: 1))

        #expect(leader.core.step(.peers(try Self.table([Self.all[0]])), now: leader.now).isEmpty)
        let refused = leader.outcome("c", try Wire.open("b", 1, worker: "ops-1", seq: 2))?.rejection
        #expect(refused == Rejection(.unknownKey, "key \(Self.client) is not in the leader's peers file (removed since it connected?)"))
        #expect(leader.log.lastRevision == 1)
        #expect(leader.outcome("w", try Wire.open("b", 1, worker: "w1", seq: 1)) == .applied(revision: 2), "the listed key goes on")
    }

    @Test func `a worker key acts only in its own names; the refusal leaves no dedup entry`() throws {
        let leader = try Self.harness()
        let who = "key \(Self.worker) (worker w1, line 1 of the peers file)"
        #expect(leader.error("w", Wire.hello("w2")) == WireError(.notYourName, "\(who) may act only as w1, not as w2"))
        #expect(leader.send("w", Wire.hello("w1")).first?.typeName == "welcome")
        #expect(leader.error("w", Wire.heartbeat("w2"))?.code == "not-your-name")
        // The client key pre-sends (w1, 7): refused; w1's own (w1, 7) then runs.
        #expect(leader.outcome("c", try Wire.open("forged", 1, worker: "w1", seq: 7))?.rejection?.code == .notYourName)
        #expect(leader.outcome("w", try Wire.open("real", 1, worker: "w1", seq: 7)) == .applied(revision: 1))
        #expect(leader.core.errorCounts == ["not-your-name": 3])
    }

    @Test func `a client runs its ops in its names; an observer reads without a hello and runs nothing`() throws {
        let leader = try Self.harness()
        #expect(leader.outcome("c", try Wire.open("a", 1, worker: "ops-console", seq: 1)) == .applied(revision: 1))
        let outside = leader.outcome("c", try Wire.transfer("a", "b", 1, worker: "ops-console", seq: 2))?.rejection
        #expect(outside?.code == .roleForbids)
        #expect(outside?.detail.hasSuffix("may not run `ledger.transfer`: its op patterns are ledger.open") == true)
        #expect(leader.error("c", .snapshotRequest(inParts: true))?.code == "role-forbids")
        #expect(leader.error("c", Wire.hello("ops-console"))?.code == "role-forbids")

        #expect(leader.outcome("o", try Wire.open("b", 1, worker: "dash", seq: 1))?.rejection?.code == .roleForbids)
        #expect(leader.batch([("o", .snapshotRequest(inParts: true))]).snapshots.count == 1)
        guard case .turns(_, let records)? = leader.send("o", .catchUpRequest(from: 1)).first else {
            Issue.record("an observer gets a catch-up without a hello")
            return
        }
        #expect(records.map(\.revision) == [1])
        #expect(leader.batch([("o", .statusRequest), ("c", .statusRequest)]).statusRequests.count == 2)
    }

    @Test func `without a peers table nothing is judged by key`() throws {
        let leader = try CoreHarness()
        #expect(leader.outcome("x", try Wire.open("a", 1, worker: "anyone", seq: 1)) == .applied(revision: 1))
    }

    @Test func `a standby key follows the log as its own node and nothing else; no other key may follow it`() throws {
        let standby = "0#00000000000000000000000000000000000001"
        let leader = try CoreHarness(peers: try Self.table(Self.all + ["\(standby) standby n2"]))
        leader.keys = ["w": Self.worker, "c": Self.client, "o": Self.observer, "s": standby]
        let hello = WireMessage.standbyHello(node: "n2", logID: nil, epoch: 0, revision: 0, stateDigest: nil, lastCommit: nil)
        // Allowed: handed to the leader's shipping, as from any standby without CURVE.
        #expect(leader.send("s", hello) == [hello])
        #expect(leader.send("s", .shipAck(node: "n2", sequence: 1)) == [.shipAck(node: "n2", sequence: 1)])
        let who = "key \(standby) (standby n2, line 4 of the peers file)"
        #expect(leader.error("s", .shipAck(node: "n3", sequence: 1)) == WireError(.notYourName, "\(who) may act only as n2, not as n3"))
        for other in ["w", "c", "o"] {
            #expect(leader.error(other, hello)?.message.hasSuffix("may not follow the log as a standby: only a standby key may") == true)
        }
        #expect(leader.error("s", Wire.hello("n2"))?.code == "role-forbids")
        #expect(leader.error("s", .snapshotRequest(inParts: true))?.code == "role-forbids")
        #expect(leader.error("s", .goodbye(worker: "n2"))?.code == "role-forbids")
        #expect(leader.outcome("s", try Wire.open("a", 1, worker: "n2", seq: 1))?.rejection?.code == .roleForbids)
        #expect(leader.send("s", .statusRequest).isEmpty && leader.log.lastRevision == 0)
        #expect(leader.core.errorCounts == ["role-forbids": 7, "not-your-name": 1], "the op's rejection too")
    }
}
