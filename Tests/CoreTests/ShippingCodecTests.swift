import CogCodec
import CogProtocol
import Foundation
import Testing

/// The leader writes a `ship` frame around a shipped commit for every
/// standby and commit, and the standby answers `ship-ack`: both are written
/// and read directly, and must be the bytes and values of the general codec.
@Suite("Shipping codec")
struct ShippingCodecTests {
    private let time = Date(timeIntervalSince1970: 1_800_000_000.25)
    private let logID = Array(UInt8(0x10)..<0x20)

    /// Commits of every shape a leader ships: records and answers, each index change, each retention, a retention pass.
    private func commits() throws -> [ShippedCommit] {
        let encoder = CBOREncoder()
        let records = EncodedTurnBatch([
            TurnRecord(
                revision: 43, epoch: 3, time: time, name: "Bank.transfer",
                writes: [TurnWrite(name: "ledger.balance", key: try encoder.encode("a"), value: try encoder.encode(6))]),
            TurnRecord(revision: 44, epoch: 3, time: time, name: "Bank.close", writes: [TurnWrite(name: "ledger.balance", key: try encoder.encode("b"), value: nil)]),
        ])
        let answers = [
            ShippedCommit.DedupAnswer(request: RequestID(worker: "teller", sequence: 7), reply: [0xa1, 0x01]),
            ShippedCommit.DedupAnswer(request: RequestID(worker: "wörker-2", sequence: 1 << 40), reply: Array(repeating: 0x5a, count: 300)),
        ]
        return [
            ShippedCommit(epoch: 3, logID: logID, firstRevision: 43, time: time, records: records, replies: answers),
            ShippedCommit(epoch: 3, logID: logID, firstRevision: 43, time: time, records: records, index: .unindexedFrom(44), retention: .turns(100_000)),
            ShippedCommit(epoch: 1 << 33, logID: logID, firstRevision: 45, time: time, replies: answers, index: .indexed, retention: .bytes(1 << 30)),
            ShippedCommit(epoch: 3, logID: logID, firstRevision: 45, time: Date(timeIntervalSince1970: 0), retention: .age(seconds: 86_400.5)),
            ShippedCommit(epoch: 3, logID: logID, firstRevision: 45, time: time, retention: .turns(10), pruneLimit: 2_048),
            ShippedCommit(
                epoch: 3, logID: logID, firstRevision: 45, time: time,
                openings: [ScopeEvent(kind: .open, instance: 3 << 32 | 3, scope: "Journal", identity: nil, worker: "w1", registration: 2)],
                rejections: [
                    RejectionRecord(
                        time: time, request: RequestID(worker: "teller", sequence: 1), op: "ledger.transfer", digest: Array(1...8), kind: .refused,
                        code: "insufficient-funds", reason: "alice has 30, the transfer needs 50")
                ]),
        ]
    }

    @Test func `a shipped commit is written as the general encoder writes it and read back whole`() throws {
        for commit in try commits() {
            let bytes = commit.encoded()
            #expect(bytes == commit.encodedGenerically())
            #expect(try ShippedCommit.decode(bytes) == commit)
            // Read directly unless it carries openings or rejections (the general reader reads those).
            #expect(ShippedCommit.isScannable(bytes) == (commit.openings.isEmpty && commit.rejections.isEmpty))
        }
    }

    @Test func `a shipped commit the direct reader reads is refused for what the general reader refuses`() throws {
        var short = ShippedCommit(epoch: 3, logID: logID, firstRevision: 43, time: time)
        short.logID = Array(logID.prefix(15))
        #expect(ShippedCommit.isScannable(short.encoded()))
        #expect(throws: CodecError.self) { try ShippedCommit.decode(short.encoded()) }
        do {
            _ = try ShippedCommit.decode(short.encoded())
        } catch {
            #expect(error.message == "a shipped commit's log id is 15 bytes, expected 16")
        }
        let zeroCount = ShippedCommit(epoch: 3, logID: logID, firstRevision: 43, time: time, retention: .turns(0))
        #expect(ShippedCommit.isScannable(zeroCount.encoded()))
        do {
            _ = try ShippedCommit.decode(zeroCount.encoded())
            Issue.record("a retention count of 0 was read")
        } catch {
            #expect(error.message == "a shipped commit's retention is not one of everything, turns, age or bytes")
        }
    }

    @Test func `ship and ship-ack frames are the general encoding's bytes and read back as they were`() throws {
        let commit = try #require(try commits().first).encoded()
        let messages: [WireMessage] = [
            .ship(epoch: 3, sequence: 8, commit: commit), .ship(epoch: 1 << 40, sequence: 1, commit: []),
            .shipAck(node: "n2", sequence: 8), .shipAck(node: "node-3.east", sequence: 1 << 50),
        ]
        for message in messages {
            let frame = message.encoded()
            #expect(frame == message.encodedGenerically())
            #expect(try WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize) == message)
        }
    }

    @Test func `a ship-ack naming no node is refused as malformed, with the general reader's words`() throws {
        let frame = WireMessage.shipAck(node: "n 2", sequence: 8).encodedGenerically()
        #expect(frame == WireMessage.shipAck(node: "n 2", sequence: 8).encoded())
        do {
            _ = try WireMessage.decode(frame)
            Issue.record("a ship-ack from node `n 2` was read")
        } catch {
            #expect(error.code == .malformed)
            #expect(error.message == "ship-ack body: `node` must be 1 to 64 letters, digits, '_', '.' or '-'")
        }
    }
}
