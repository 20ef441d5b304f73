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

@Suite("Damaged data folders", .timeLimit(.minutes(2)))
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
