import CogCodec
import CogLog
import Foundation
import Testing

/// A fresh folder under the system temp directory, removed by `cleanUp()`.
struct TemporaryFolder {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-test-\(UUID().uuidString)").path
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

private func cbor<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

private func deposit(_ account: String, _ balance: Int) throws -> TurnDraft {
    TurnDraft(name: "deposit()", writes: [TurnWrite(name: "ledger.balance", key: try cbor(account), value: try cbor(balance))])
}

@Suite("Turn store")
struct TurnStoreTests {
    @Test func `appended turns get contiguous revisions and survive reopening with a new epoch`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        do {
            let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
            #expect(store.epoch == 1)
            let revisions = try store.append([try deposit("alice", 10), try deposit("bob", 5)])
            #expect(Array(revisions) == [1, 2])
            try store.append([try deposit("alice", 12)])
            #expect(store.lastRevision == 3)
        }
        let reopened = try TurnStore(directory: folder.path, mode: .writer)
        #expect(reopened.epoch == 2)
        #expect(reopened.lastRevision == 3)
        #expect(try reopened.value(name: "ledger.balance", key: try cbor("alice")) == (try cbor(12)))
        let stored = try reopened.records(from: 1)
        #expect(stored.map(\.revision) == [1, 2, 3])
        #expect(stored.map(\.epoch) == [1, 1, 1])
        #expect(stored[0].writes == [TurnWrite(name: "ledger.balance", key: try cbor("alice"), value: try cbor(10))])
        #expect(try reopened.verify().isSound)
    }

    @Test func `a released write removes the state entry`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try store.append([try deposit("carol", 1)])
        try store.append([TurnDraft(name: "discard", writes: [TurnWrite(name: "ledger.balance", key: try cbor("carol"), value: nil)])])
        #expect(try store.value(name: "ledger.balance", key: try cbor("carol")) == nil)
        #expect(try store.records(from: 2)[0].writes[0].isRelease)
        #expect(try store.verify().isSound)
    }

    @Test func `a large group commit keeps each key's latest write, releases included`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try store.append([try deposit("kept", 1), try deposit("dropped", 2), try deposit("back", 3)])
        // Many turns in one transaction (the sorted state path), touching keys
        // several times: the last write of each key in revision order wins.
        var drafts: [TurnDraft] = []
        for index in 0..<600 { drafts.append(try deposit("a\(index % 150)", index)) }
        drafts.append(TurnDraft(name: "discard", writes: [TurnWrite(name: "ledger.balance", key: try cbor("dropped"), value: nil)]))
        drafts.append(TurnDraft(name: "discard", writes: [TurnWrite(name: "ledger.balance", key: try cbor("back"), value: nil)]))
        drafts.append(try deposit("back", 30))
        drafts.append(TurnDraft(name: "two", writes: [
            TurnWrite(name: "ledger.balance", key: try cbor("kept"), value: try cbor(4)),
            TurnWrite(name: "ledger.balance", key: try cbor("kept"), value: try cbor(5)),
        ]))
        try store.append(drafts)
        #expect(try store.value(name: "ledger.balance", key: try cbor("a0")) == (try cbor(450)))
        #expect(try store.value(name: "ledger.balance", key: try cbor("a149")) == (try cbor(599)))
        #expect(try store.value(name: "ledger.balance", key: try cbor("dropped")) == nil)
        #expect(try store.value(name: "ledger.balance", key: try cbor("back")) == (try cbor(30)))
        #expect(try store.value(name: "ledger.balance", key: try cbor("kept")) == (try cbor(5)))
        #expect(try store.stateEntries().count == 152)
        #expect(try store.verify().isSound)
    }

    @Test func `the fast record encoding equals the generic deterministic encoding, checksum sealed`() throws {
        func generic(_ record: TurnRecord) throws -> [UInt8] { TurnRecordChecksum.sealed(try CBOREncoder().encode(record)) }
        let record = TurnRecord(
            revision: 77, epoch: 3, time: Date(timeIntervalSince1970: 1_800_000_000.5), name: "Trails.trailScreen.load()",
            origin: TurnOrigin(worker: "w1", instance: 9, request: RequestID(worker: "w1", sequence: 41)),
            writes: [
                TurnWrite(name: "trails.loaded", key: try cbor(7), value: try cbor(["name": "Ridge"])),
                TurnWrite(name: "trails.open", key: nil, value: nil),
            ],
            scopeEvents: [ScopeEvent(kind: .retire, instance: 4, scope: "Trails.trailScreen", identity: try cbor(7))])
        #expect(record.encoded() == (try generic(record)))
        #expect(try TurnRecord.decode(record.encoded()) == record)
        let system = TurnRecord(revision: 1, epoch: 1, time: Date(timeIntervalSince1970: 0), name: "x", writes: [])
        #expect(system.encoded() == (try generic(system)))
        // Every head width, a single-precision time, and long unicode text.
        let wide = TurnRecord(
            revision: UInt64.max, epoch: 70_000, time: Date(timeIntervalSince1970: 1.5), name: String(repeating: "é", count: 300),
            origin: TurnOrigin(worker: "wörker-\(String(repeating: "x", count: 40))", instance: 0x1_0000_0000),
            writes: (0..<30).map { TurnWrite(name: "n\($0)", key: $0 % 2 == 0 ? nil : try! cbor($0), value: try! cbor([$0])) })
        #expect(wide.encoded() == (try generic(wide)))
        // The scanner the store and replicas read with agrees with the general decoder.
        for plain in [system, wide, TurnRecord(
            revision: 9, epoch: 2, time: Date(timeIntervalSince1970: 1_800_000_000.25), name: "Ledger.release",
            origin: TurnOrigin(worker: "w1", instance: 4, request: RequestID(worker: "w1", sequence: 3)),
            writes: [TurnWrite(name: "ledger.balance", key: try cbor("a"), value: nil), TurnWrite(name: "ledger.total", key: nil, value: try cbor(7))])]
        {
            var scanner = CBORScanner(plain.encoded())
            #expect(TurnRecord(scanning: &scanner) == plain)
            #expect(try CBORDecoder().decode(TurnRecord.self, from: plain.encoded()) == plain)
        }
        // A record with scope events goes to the general decoder; one in
        // another key order is not a record (its checksum is not where it must be).
        var scoped = CBORScanner(record.encoded())
        #expect(TurnRecord(scanning: &scoped) == nil)
        #expect(try TurnRecord.decode(record.encoded()) == record)
        guard case .map(let entries) = try CBORValue.parse(system.encoded()) else {
            Issue.record("a record is not a map")
            return
        }
        var reordered = CBORWriter()
        reordered.appendHead(major: 5, UInt64(entries.count))
        for entry in entries.reversed() {
            reordered.appendRaw(entry.key.encodedBytes)
            reordered.appendRaw(entry.value.encodedBytes)
        }
        var other = CBORScanner(reordered.bytes)
        #expect(TurnRecord(scanning: &other) == nil)
        #expect(throws: CodecError.self) { try TurnRecord.decode(reordered.bytes) }
        let batch = EncodedTurnBatch([record, system, wide])
        #expect(batch.bytes == record.encoded() + system.encoded() + wide.encoded())
        #expect(batch.record(1) == ArraySlice(system.encoded()))
        #expect(batch.count == 3)
    }

    @Test func `a missing folder, a second writer and a reader of nothing get clear errors`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        #expect(throws: TurnStoreError(code: .missingFolder, message: "data folder \(folder.path) does not exist (--data names the folder a cogd leader keeps its log in)")) {
            try TurnStore(directory: folder.path, mode: .writer)
        }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        do {
            _ = try TurnStore(directory: folder.path, mode: .writer)
            Issue.record("a second writer opened")
        } catch {
            #expect(error.code == .locked)
            #expect(error.message.contains("is locked by another writer (pid \(getpid()))"))
        }
        writer.close()
        let empty = TemporaryFolder()
        defer { empty.cleanUp() }
        try FileManager.default.createDirectory(atPath: empty.path, withIntermediateDirectories: true)
        #expect(throws: TurnStoreError.self) { try TurnStore(directory: empty.path, mode: .reader) }
    }

    @Test func `an unwritable folder is refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        if getuid() == 0 {
            // Root writes past permission bits, but not into an immutable folder.
            guard Self.chattr("+i", folder.path) else { return }
        } else {
            chmod(folder.path, 0o555)
        }
        defer {
            if getuid() == 0 { _ = Self.chattr("-i", folder.path) } else { chmod(folder.path, 0o755) }
        }
        do {
            _ = try TurnStore(directory: folder.path, mode: .writer)
            Issue.record("opened an unwritable folder")
        } catch {
            #expect(error.code == .notWritable)
            #expect(error.message == "data folder \(folder.path) is not writable")
        }
    }

    /// Sets or clears a file attribute with `chattr`; false when that is not possible here.
    private static func chattr(_ change: String, _ path: String) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        process.arguments = [change, path]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test func `a reader sees what a writer commits, beside it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let writer = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        try writer.append([try deposit("dan", 1)])
        let reader = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try reader.lastRecords(10).map(\.revision) == [1])
        try writer.append([try deposit("dan", 2), try deposit("dan", 3)])
        #expect(try reader.lastRecords(10).map(\.revision) == [1, 2, 3])
        #expect(try reader.lastRecords(2).map(\.revision) == [2, 3])
    }

    @Test func `a full map grows and the append is retried, never a crash`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let big = [UInt8](repeating: 7, count: 1 << 20)
        for index in 0..<100 {
            try store.append([TurnDraft(name: "blob", writes: [TurnWrite(name: "blob", key: try cbor(index), value: try cbor(Data(big)))])])
        }
        #expect(store.lastRevision == 100)
        #expect(try store.statistics().mapBytes > 64 << 20)
        #expect(try store.verify().isSound)
    }
}
