import CogCodec
import Foundation
import Testing

@testable import CogLog
internal import CLMDB

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

/// Turn `n` sets account `n % 4` to `n`; every fifth releases account 3.
private func turn(_ n: Int) throws -> TurnDraft {
    let write =
        n % 5 == 0
        ? TurnWrite(name: "ledger.balance", key: try cbor("a3"), value: nil)
        : TurnWrite(name: "ledger.balance", key: try cbor("a\(n % 4)"), value: try cbor(n))
    return TurnDraft(name: "set()", origin: TurnOrigin(worker: "teller", request: RequestID(worker: "teller", sequence: UInt64(n))), writes: [write])
}

/// A dedup value as the leader stores it: an 8-byte digest, then a reply frame.
private func answer(_ sequence: UInt64) -> (RequestID, [UInt8]) {
    (RequestID(worker: "teller", sequence: sequence), [UInt8](repeating: UInt8(sequence & 0xff), count: 8) + [0xa0])
}

private func refusal(_ sequence: UInt64) -> RejectionRecord {
    RejectionRecord(
        request: RequestID(worker: "teller", sequence: sequence), op: "ledger.transfer", digest: [1, 2, 3, 4, 5, 6, 7, 8], kind: .refused,
        code: "insufficient-funds", reason: "alice has 30, the transfer needs 50")
}

/// Every entry of every database of a folder, by database name, then the
/// folder's `cogd.identity`: what two copies of one log must agree on.
private func contents(of store: TurnStore) throws -> [String: [[UInt8]]] {
    var databases: [String: MDB_dbi] = ["turns": store.turnsDB, "state": store.stateDB, "dedup": store.dedupDB, "meta": store.metaDB]
    databases["dedup-order"] = store.dedupOrderDB
    databases["dedup-expired"] = store.dedupExpiredDB
    databases["instances"] = store.instancesDB
    databases["rejections"] = store.rejectionsDB
    var found: [String: [[UInt8]]] = [:]
    try store.environment.read { txn in
        for (name, dbi) in databases {
            var entries: [[UInt8]] = []
            try txn.scan(dbi, from: nil) { key, value in
                entries.append(key + [0xff, 0xfe] + value)
                return true
            }
            found[name] = entries
        }
    }
    found["cogd.identity"] = [Array(try Data(contentsOf: URL(fileURLWithPath: store.directory + "/cogd.identity")))]
    return found
}

/// Commits shipped from a leader's store, through their bytes, as a standby receives them.
private final class Shipment {
    var commits: [[UInt8]] = []

    func attach(to store: TurnStore) {
        store.shipper = { [unowned self] commit in commits.append(commit.encoded()) }
    }

    /// Applies every commit shipped since the last call to `standby`.
    func deliver(to standby: TurnStore) throws {
        for bytes in commits { try standby.apply(ShippedCommit.decode(bytes)) }
        commits = []
    }
}

@Suite("A standby's copy of the log (issue 29)")
struct StandbyApplyTests {
    @Test func `a standby that applies every shipped commit holds what the leader's folder holds, database by database`() throws {
        let leaderFolder = TemporaryFolder()
        let standbyFolder = TemporaryFolder()
        defer {
            leaderFolder.cleanUp()
            standbyFolder.cleanUp()
        }
        let standby = try TurnStore(directory: standbyFolder.path, mode: .standby, createIfMissing: true)
        #expect(standby.epoch == 0 && standby.logID == nil && standby.lastRevision == 0)
        let shipment = Shipment()
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        do {
            let leader = try TurnStore(directory: leaderFolder.path, mode: .writer, createIfMissing: true)
            shipment.attach(to: leader)
            // Turns with their answers; a batch whose answers stay in the records (unindexed), then indexed.
            try leader.append(try (1...3).map(turn), replies: (1...3).map(answer), at: time)
            try leader.append(try (4...6).map(turn), replies: [], index: .unindexedFrom(4), at: time + 1)
            try leader.append([], replies: (4...6).map(answer), index: .indexed, at: time + 2)
            // Openings alone, rejections alone, and both beside a turn.
            let opening = ScopeEvent(kind: .open, instance: 1 << 32 | 1, scope: "Journal", identity: nil, worker: "w", registration: 1)
            try leader.append([], replies: [], openings: [opening], at: time + 3)
            try leader.append([], replies: [], rejections: [refusal(7)], at: time + 4)
            try leader.append([try turn(8)], replies: [answer(8)], openings: [opening], rejections: [refusal(9)], at: time + 5)
            try shipment.deliver(to: standby)
            #expect(try contents(of: standby) == contents(of: leader))
            // Retention prunes as the leader's commits do: records, answers and rejections go on both.
            for n in 10...40 { try leader.append([try turn(n)], replies: [answer(UInt64(n))], retention: .turns(5), at: time + Double(n)) }
            try shipment.deliver(to: standby)
            #expect(leader.firstRevision > 1 && standby.firstRevision == leader.firstRevision)
            #expect(try standby.lastDedupSequence(worker: "teller") == 40 && standby.expiredSequence(worker: "teller") != nil)
            #expect(try contents(of: standby) == contents(of: leader))
            // A pass of retention between commits (an idle leader's) is shipped and run on the copy too.
            for n in 41...45 { try leader.append([try turn(n)], replies: [answer(UInt64(n))], at: time + Double(n)) }
            #expect(try leader.prune(.turns(3), now: time + 46, limit: 2).records == 2)
            try leader.prune(.turns(3), now: time + 46)
            try shipment.deliver(to: standby)
            #expect(standby.firstRevision == leader.firstRevision)
            #expect(try contents(of: standby) == contents(of: leader))
            leader.close()
        }
        // The leader restarts in epoch 2: its commits carry it, and the standby's fence rises with them.
        let leader = try TurnStore(directory: leaderFolder.path, mode: .writer)
        shipment.attach(to: leader)
        try leader.append([try turn(46)], replies: [answer(46)], retention: .age(seconds: 5), at: time + 50)
        try shipment.deliver(to: standby)
        #expect(standby.epoch == 2 && standby.lastRevision == leader.lastRevision)
        #expect(try contents(of: standby) == contents(of: leader))
        leader.close()

        // Promoted: the standby's folder opens as a writer in the epoch the cluster gives, with everything it applied.
        let records = try standby.records(from: 1)
        standby.close()
        let promoted = try TurnStore(directory: standbyFolder.path, mode: .writer, epoch: 3)
        #expect(promoted.epoch == 3 && promoted.logID == leader.logID)
        #expect(try promoted.records(from: 1) == records)
        #expect(try promoted.verify().isSound)
    }

    @Test func `each shipped commit is named by its epoch and number, on the leader's folder and the standby's; a retention pass is not, an unshipped commit clears the name`() throws {
        let leaderFolder = TemporaryFolder()
        let standbyFolder = TemporaryFolder()
        defer {
            leaderFolder.cleanUp()
            standbyFolder.cleanUp()
        }
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        let shipment = Shipment()
        let standby = try TurnStore(directory: standbyFolder.path, mode: .standby, createIfMissing: true)
        #expect(standby.lastCommit == nil)
        do {
            let leader = try TurnStore(directory: leaderFolder.path, mode: .writer, createIfMissing: true)
            shipment.attach(to: leader)
            try leader.append([try turn(1)], replies: [answer(1)], at: time)
            // Two commits without a record: same last revision, told apart by their names.
            try leader.append([], replies: [answer(2)], at: time + 1)
            try leader.append([], replies: [], rejections: [refusal(3)], at: time + 2)
            #expect(leader.lastCommit == CommitName(epoch: 1, number: 3) && leader.lastRevision == 1)
            #expect(try shipment.commits.map { try ShippedCommit.decode($0).name } == [1, 2, 3].map { CommitName(epoch: 1, number: $0) })
            // A retention pass is shipped unnamed and leaves the name as it was.
            try leader.append([try turn(4)], replies: [], at: time + 3)
            try leader.prune(.turns(1), now: time + 4)
            #expect(try ShippedCommit.decode(shipment.commits.last!).name == nil)
            #expect(leader.lastCommit == CommitName(epoch: 1, number: 4))
            try shipment.deliver(to: standby)
            #expect(standby.lastCommit == CommitName(epoch: 1, number: 4))
            #expect(try contents(of: standby) == contents(of: leader))
            leader.close()
        }
        // Read back from meta.last-commit; the next epoch numbers from 1 again.
        let leader = try TurnStore(directory: leaderFolder.path, mode: .writer)
        #expect(leader.lastCommit == CommitName(epoch: 1, number: 4))
        shipment.attach(to: leader)
        try leader.append([], replies: [answer(5)], at: time + 5)
        #expect(leader.lastCommit == CommitName(epoch: 2, number: 1))
        try shipment.deliver(to: standby)
        #expect(standby.lastCommit == CommitName(epoch: 2, number: 1))
        // Not shipped (no standby): the folder's last commit has no name.
        leader.shipper = nil
        try leader.append([try turn(6)], replies: [], at: time + 6)
        #expect(leader.lastCommit == nil)
        leader.close()
        let reopened = try TurnStore(directory: leaderFolder.path, mode: .reader)
        #expect(reopened.lastCommit == nil)
        reopened.close()
        standby.close()
    }

    @Test func `a standby refuses a deposed leader's commit, another log's, a gap, a drifted copy, and takes the right one after`() throws {
        let leaderFolder = TemporaryFolder()
        let standbyFolder = TemporaryFolder()
        let otherFolder = TemporaryFolder()
        defer {
            leaderFolder.cleanUp()
            standbyFolder.cleanUp()
            otherFolder.cleanUp()
        }
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        let shipment = Shipment()
        let standby = try TurnStore(directory: standbyFolder.path, mode: .standby, createIfMissing: true)
        // Epoch 1 ships turn 1, then the leader is replaced by epoch 2, which ships turn 2.
        let oldLeader = try TurnStore(directory: leaderFolder.path, mode: .writer, createIfMissing: true)
        shipment.attach(to: oldLeader)
        try oldLeader.append([try turn(1)], at: time)
        try shipment.deliver(to: standby)
        oldLeader.close()
        let leader = try TurnStore(directory: leaderFolder.path, mode: .writer)
        shipment.attach(to: leader)
        try leader.append([try turn(2)], at: time + 1)
        let second = try ShippedCommit.decode(shipment.commits.removeFirst())
        try standby.apply(second)
        #expect(standby.epoch == 2 && standby.lastRevision == 2)

        func refusal(_ commit: ShippedCommit) -> TurnStoreError? {
            do {
                try standby.apply(commit)
                return nil
            } catch { return error }
        }
        // A late ship of epoch 1 (its leader deposed) continuing the copy's revisions.
        var late = second
        late.epoch = 1
        late.firstRevision = 3
        #expect(refusal(late)?.code == .fenced)
        #expect(refusal(late)?.message.contains("epoch 1") == true)
        // Another log's commit.
        let other = try TurnStore(directory: otherFolder.path, mode: .writer, createIfMissing: true)
        let otherShipment = Shipment()
        otherShipment.attach(to: other)
        try other.append([try turn(3)], at: time + 2)
        var foreign = try ShippedCommit.decode(otherShipment.commits[0])
        foreign.epoch = 2
        #expect(refusal(foreign)?.code == .otherLog)
        // A gap: the leader's revision 4 shipped before 3.
        try leader.append([try turn(3)], at: time + 2)
        try leader.append([try turn(4)], at: time + 3)
        let third = try ShippedCommit.decode(shipment.commits[0])
        let fourth = try ShippedCommit.decode(shipment.commits[1])
        shipment.commits = []
        #expect(refusal(fourth)?.code == .outOfOrder)
        // A drifted record: the value turn 3 writes differs from the leader's, under the leader's digest.
        var record = try TurnRecord.decode(third.record(0))
        record.writes[0].value = try cbor(999)
        var drifted = third
        let batch = EncodedTurnBatch([record])
        drifted.recordBytes = batch.bytes
        drifted.recordEnds = batch.ends
        #expect(refusal(drifted)?.code == .diverged)
        #expect(refusal(drifted)?.message.contains("after shipped turn 3") == true)
        // A record that is not the commit's own (revision 4's bytes shipped as 3).
        var misplaced = third
        misplaced.recordBytes = fourth.recordBytes
        misplaced.recordEnds = fourth.recordEnds
        #expect(refusal(misplaced)?.code == .corrupt)
        // None of it changed the copy: the leader's commits apply in order.
        #expect(standby.lastRevision == 2 && standby.epoch == 2)
        try standby.apply(third)
        try standby.apply(fourth)
        #expect(try standby.records(from: 1) == leader.records(from: 1))
        #expect(try contents(of: standby) == contents(of: leader))
        // A writer applies nothing shipped.
        #expect(throws: TurnStoreError.self) { try leader.apply(fourth) }
    }

    @Test func `a shipped commit reads back from its bytes, and bytes that are not one are refused`() throws {
        let time = Date(timeIntervalSince1970: 1_800_000_000.25)
        let record = TurnRecord(revision: 7, epoch: 2, time: time, name: "set()", writes: [TurnWrite(name: "n", key: nil, value: try cbor(1))])
        let commit = ShippedCommit(
            epoch: 2, logID: Array(0..<16), firstRevision: 7, time: time, records: EncodedTurnBatch([record]),
            replies: [.init(request: RequestID(worker: "w", sequence: 3), reply: [1, 2])], index: .unindexedFrom(7), retention: .turns(100),
            openings: [ScopeEvent(kind: .open, instance: 9, scope: "Journal", identity: nil)], rejections: [refusal(4)])
        #expect(try ShippedCommit.decode(commit.encoded()) == commit)
        for retention in [Retention.everything, .age(seconds: 60), .bytes(1 << 20)] {
            var other = commit
            other.retention = retention
            other.index = .indexed
            #expect(try ShippedCommit.decode(other.encoded()) == other)
        }
        let pass = ShippedCommit(epoch: 2, logID: Array(0..<16), firstRevision: 8, time: time, retention: .turns(10), pruneLimit: 1_024)
        #expect(try ShippedCommit.decode(pass.encoded()) == pass)
        var crowded = commit
        crowded.pruneLimit = 10
        #expect(throws: CodecError.self) { try ShippedCommit.decode(crowded.encoded()) }
        var shortID = commit
        shortID.logID = [1, 2, 3]
        #expect(throws: CodecError.self) { try ShippedCommit.decode(shortID.encoded()) }
        #expect(throws: CodecError.self) { try ShippedCommit.decode([0xa1, 0x61]) }
        #expect(throws: CodecError.self) { try ShippedCommit.decode(try cbor(["epoch": 1])) }
        #expect(throws: CodecError.self) { try ShippedCommit.decode([UInt8](repeating: 0, count: ShippedCommit.maximumBytes + 1)) }
    }
}
