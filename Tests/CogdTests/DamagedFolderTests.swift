import CogCodec
import CogLog
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Cuts `data.mdb` in `folder` to `length` bytes.
private func truncateDataFile(_ folder: String, to length: Int) {
    #expect(truncate(folder + "/data.mdb", off_t(length)) == 0)
}

private func dataFileSize(_ folder: String) throws -> Int {
    try #require(try FileManager.default.attributesOfItem(atPath: folder + "/data.mdb")[.size] as? Int)
}

@Suite("Damaged data folders", .timeLimit(.minutes(10)))
struct DamagedFolderTests {
    @Test func `a truncated data.mdb is refused with a clear message by tail, verify, the leader and the store, never a crash`() throws {
        let pageSize = 4_096
        for cut in ["half", "first pages", "last page"] {
            let folder = TemporaryFolder()
            defer { folder.cleanUp() }
            #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "2000", "--batch", "50"]).status == 0)
            let size = try dataFileSize(folder.path)
            #expect(size > 8 * pageSize)
            let length: Int
            switch cut {
            case "half": length = (size / 2 / pageSize) * pageSize
            case "first pages": length = 3 * pageSize
            default: length = size - pageSize
            }
            truncateDataFile(folder.path, to: length)
            for arguments in [["tail", "--data", folder.path], ["log", "verify", "--data", folder.path], ["log", "stats", "--data", folder.path]] {
                let run = try runCogd(arguments)
                #expect(run.status == 1, "\(cut), \(arguments[0]): exits 1, not by a signal")
                #expect(run.stderr.hasPrefix("Error: data.mdb is truncated: \(length) bytes, LMDB's meta page says at least \(size)"),
                        "\(cut), \(arguments): \(run.stderr)")
            }
            let ports = ClusterPorts()
            let leader = try runCogd(["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
            #expect(leader.status == 1)
            #expect(leader.stderr.contains("data.mdb is truncated: \(length) bytes"), "\(cut), leader: \(leader.stderr)")
            for mode in [TurnStore.Mode.writer, .reader] {
                #expect {
                    _ = try TurnStore(directory: folder.path, mode: mode)
                } throws: { error in
                    (error as? TurnStoreError)?.message.hasPrefix("data.mdb is truncated: \(length) bytes, LMDB's meta page says at least \(size)") == true
                }
            }
            #expect(try dataFileSize(folder.path) == length, "nothing wrote to the damaged file")
        }
    }

    @Test func `a data.mdb that is not an LMDB file is refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "3"]).status == 0)
        try Data(repeating: 0x41, count: 100).write(to: URL(fileURLWithPath: folder.path + "/data.mdb"))
        let run = try runCogd(["log", "verify", "--data", folder.path])
        #expect(run.status == 1)
        #expect(run.stderr.contains("is truncated or not an LMDB file: 100 bytes, and no LMDB meta page at its start"))
    }
}

@Suite("A lost data.mdb never silently restarts history", .timeLimit(.minutes(10)))
struct DataLossTests {
    private func soak(_ folder: String, _ count: Int) throws {
        #expect(try runCogd(["log", "soak", "--data", folder, "--count", String(count), "--batch", "4"]).status == 0)
    }

    private func identity(_ folder: String) throws -> [String] {
        try String(contentsOfFile: folder + "/cogd.identity", encoding: .utf8).split(separator: "\n").map(String.init)
    }

    @Test func `the folder remembers its log and how far it got, after every commit`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try soak(folder.path, 12)
        let lines = try identity(folder.path)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("cogd-log ") && lines[0].count == 9 + 32)
        #expect(lines[1] == "epoch 00000000000000000001")
        #expect(lines[2] == "revision 00000000000000000012")
        let store = try TurnStore(directory: folder.path, mode: .writer)
        #expect(store.logID.map { $0.map { String(format: "%02x", $0) }.joined() } == String(lines[0].dropFirst(9)))
        try store.append([TurnDraft(name: "x", writes: [TurnWrite(name: "soak.last", key: nil, value: [1])])])
        #expect(try identity(folder.path) == [lines[0], "epoch 00000000000000000002", "revision 00000000000000000013"])
    }

    @Test func `a writer refuses an emptied, missing, replaced or older data.mdb unless the loss is accepted`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try soak(folder.path, 12)
        let logID = String(try identity(folder.path)[0].dropFirst(9))
        let path = folder.path + "/data.mdb"
        let saved = try Data(contentsOf: URL(fileURLWithPath: path))
        try soak(folder.path, 8)  // revision 20, epoch 2
        let expected = "cogd.identity says this folder holds log \(logID) up to revision 20 (epoch 2)"
        let hint = "restore data.mdb from a backup, or start the leader with --accept-data-loss to go on from what data.mdb holds"

        func refusal() -> String? {
            do {
                _ = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
                return nil
            } catch {
                #expect(error.code == .dataLoss)
                return error.message
            }
        }
        // Older: a copy of data.mdb from revision 12.
        try saved.write(to: URL(fileURLWithPath: path))
        #expect(refusal() == "data folder \(folder.path): data.mdb ends at revision 12, behind what was committed: \(expected); \(hint)")
        // Emptied, and missing.
        try Data().write(to: URL(fileURLWithPath: path))
        #expect(refusal() == "data folder \(folder.path): data.mdb is empty, but \(expected); \(hint)")
        try FileManager.default.removeItem(atPath: path)
        try? FileManager.default.removeItem(atPath: folder.path + "/lock.mdb")
        #expect(refusal() == "data folder \(folder.path): data.mdb is missing, but \(expected); \(hint)")
        #expect(!FileManager.default.fileExists(atPath: path), "the refusal created nothing")
        // Replaced by another log.
        let other = TemporaryFolder()
        defer { other.cleanUp() }
        try soak(other.path, 32)
        let otherID = String(try identity(other.path)[0].dropFirst(9))
        try FileManager.default.copyItem(atPath: other.path + "/data.mdb", toPath: path)
        #expect(refusal() == "data folder \(folder.path): data.mdb holds another log (\(otherID), ending at revision 32), but \(expected); \(hint)")

        // The leader says the same and exits 1; with --accept-data-loss it goes on from what data.mdb holds.
        try FileManager.default.removeItem(atPath: path)
        try saved.write(to: URL(fileURLWithPath: path))
        let ports = ClusterPorts()
        let leader = try runCogd(["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
        #expect(leader.status == 1)
        #expect(leader.stderr.contains("data.mdb ends at revision 12, behind what was committed: \(expected)"), "\(leader.stderr)")
        let accepted = try ClusterPorts().startLeader(data: folder.path, options: ["--accept-data-loss"])
        accepted.stop()
        #expect(try identity(folder.path) == ["cogd-log \(logID)", "epoch 00000000000000000003", "revision 00000000000000000012"],
                "epochs only go up; the folder now remembers what it holds")
        #expect(refusal() == nil)
    }

    @Test func `accepting the loss of an emptied data.mdb starts a new log whose epoch follows the old one`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try soak(folder.path, 5)
        let old = try identity(folder.path)
        try Data().write(to: URL(fileURLWithPath: folder.path + "/data.mdb"))
        let store = try TurnStore(directory: folder.path, mode: .writer, acceptDataLoss: true)
        #expect(store.lastRevision == 0)
        #expect(store.epoch == 2)
        let now = try identity(folder.path)
        #expect(now[0] != old[0], "a new log id")
        #expect(now[1...] == ["epoch 00000000000000000002", "revision 00000000000000000000"])
    }
}
