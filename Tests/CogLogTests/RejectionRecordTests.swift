import CogCodec
import CogLog
import Foundation
import Testing

private func tick(_ n: Int) throws -> TurnDraft {
    TurnDraft(name: "tick()", writes: [TurnWrite(name: "clock.ticks", key: nil, value: try CBOREncoder().encode(n))])
}

private func overdraft(_ sequence: UInt64, earlier: Bool = false) -> RejectionRecord {
    RejectionRecord(
        request: RequestID(worker: "teller", sequence: sequence), op: "ledger.transfer", digest: [1, 2, 3, 4, 5, 6, 7, 8], kind: .refused,
        code: "insufficient-funds", reason: "alice has 30, the transfer needs 50", earlier: earlier)
}

/// Rejections on the record (issue 28 item 4, `protocol/turnlog.md` §2d).
@Suite("Rejections kept beside the turns")
struct RejectionRecordTests {
    @Test func `rejections committed with a batch sit at the revision the log ended at, numbered on across commits`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let reader = try TurnStore(directory: folder.path, mode: .reader)
        let early = Date(timeIntervalSince1970: 1_800_000_000.5)
        try writer.append([], replies: [], rejections: [overdraft(1)], at: early)
        let time = Date(timeIntervalSince1970: 1_800_000_001.25)
        let rejected = RejectionRecord(
            request: RequestID(worker: "w", sequence: 9), op: "ledger.nope", digest: [0, 0, 0, 0, 0, 0, 0, 1], kind: .rejected,
            code: "unknown-op", reason: "no op named `ledger.nope` is registered")
        #expect(try writer.append([try tick(1)], replies: [], rejections: [overdraft(2), rejected], at: time) == 1..<2)
        try writer.append([], replies: [], rejections: [overdraft(2, earlier: true)], at: time)

        let kept = try reader.rejections(from: 0, through: 1)
        #expect(kept.map(\.revision) == [0, 1, 1, 1] && kept.map(\.order) == [0, 0, 1, 2])
        #expect(kept[0].time == early && kept[1].time == time)
        #expect(kept[1] == RejectionRecord(revision: 1, order: 0, time: time, request: RequestID(worker: "teller", sequence: 2),
                                           op: "ledger.transfer", digest: [1, 2, 3, 4, 5, 6, 7, 8], kind: .refused, code: "insufficient-funds",
                                           reason: "alice has 30, the transfer needs 50"))
        #expect(kept[2].kind == .rejected && kept[2].code == "unknown-op" && !kept[2].earlier)
        #expect(kept[3].earlier && kept[3].request.sequence == 2)
        #expect(try reader.rejections(from: 1, order: 2, through: 1).map(\.order) == [2], "read on from an order")
        #expect(try reader.rejections(from: 0, through: 0).count == 1)
        #expect(try writer.records(from: 1).map(\.revision) == [1] && writer.lastRevision == 1, "rejections add no record and no revision")
    }

    @Test func `an entry is a deterministic CBOR map keyed by revision and order`() throws {
        var record = overdraft(7, earlier: true)
        record.revision = 12
        record.order = 3
        record.time = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(record.key == [0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 3])
        let bytes = try record.encoded()
        guard case .map(let entries) = try CBORValue.parse(bytes) else {
            Issue.record("not a map: \(bytes)")
            return
        }
        // Shorter keys first, then bytewise (RFC 8949 §4.2.1).
        #expect(entries.map { CBORText.display($0.key) } == [
            #""op""#, #""seq""#, #""code""#, #""kind""#, #""time""#, #""digest""#, #""reason""#, #""worker""#, #""earlier""#,
        ])
        #expect(try record.encoded() == bytes, "the same entry encodes the same")
        #expect(RejectionRecord(key: record.key, value: bytes) == record)
        var first = record
        first.earlier = false
        guard case .map(let without) = try CBORValue.parse(try first.encoded()) else { return }
        #expect(without.count == 8, "`earlier` is left out of a first answer")
        #expect(RejectionRecord(key: [0, 1], value: bytes) == nil, "a key that is not 16 bytes is not an entry")
    }

    @Test func `an op name, code and reason are bounded, cut at a character`() {
        let long = RejectionRecord(
            request: RequestID(worker: "w", sequence: 1), op: String(repeating: "é", count: 600), digest: [], kind: .refused,
            code: String(repeating: "a", count: 100), reason: String(repeating: "€", count: 400))
        #expect(long.op.utf8.count == 1_024 && long.op.unicodeScalars.allSatisfy { $0 == "é" })
        #expect(long.code.utf8.count == 64)
        #expect(long.reason.utf8.count == 1_023 && long.reason.count == 341)
    }

    @Test func `the state digest and the log are unchanged by a commit of rejections alone, and verify passes`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try writer.append([try tick(1), try tick(2)])
        let before = try writer.verify()
        try writer.append([], replies: [], rejections: [overdraft(1), overdraft(1, earlier: true)])
        let after = try writer.verify()
        #expect(after.isSound, "\(after.problem ?? "")")
        #expect(after.stateDigest == before.stateDigest && after.lastRevision == 2 && after.turns == 2)
        #expect(try writer.records(from: 2).first?.stateDigest == after.stateDigest)
    }

    @Test func `retention removes the rejections kept at the revisions it removes, and no others`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try writer.append([], replies: [], rejections: [overdraft(1)])  // at revision 0
        for n in 1...5 {
            try writer.append([try tick(n)], replies: [], rejections: n == 2 || n == 4 || n == 5 ? [overdraft(UInt64(n + 1))] : [])
        }
        #expect(try writer.rejections(from: 0, through: 5).map(\.revision) == [0, 2, 4, 5])
        // Keeping 2 keeps revisions 4 and 5: the rejections at 0 (counted as 1) and 2 go with revisions 1…3.
        let report = try writer.prune(.turns(2))
        #expect(report.records == 3 && report.firstRevision == 4 && report.rejections == 2)
        #expect(try writer.rejections(from: 0, through: 5).map(\.revision) == [4, 5])
        #expect(try writer.verify().isSound)
        // A commit's own retention pass removes them too.
        try writer.append([try tick(6)], replies: [], retention: .turns(1))
        #expect(writer.lastPruned?.rejections == 2 && writer.firstRevision == 6)
        #expect(try writer.rejections(from: 0, through: 6).isEmpty)
    }
}
