import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

/// A turn that cannot be committed — its record too large for any reader, or
/// the disk full — is answered, leaves nothing visible, and the leader goes on
/// serving (issue: robustness, items 4 and 6).
@Suite("Turns that cannot be committed (real processes, loopback)")
struct CommitFailureTests {
    static func accounts(in folder: String) throws -> [String] {
        let store = try TurnStore(directory: folder, mode: .reader)
        defer { store.close() }
        return try store.value(name: "ledger.accounts", key: nil).map { try CBORDecoder().decode([String].self, from: $0) } ?? []
    }

    @Test func `a turn whose record would be too large is refused too-large, undone, and the leader keeps serving`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, options: ["--max-record-bytes", "8192"])
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "ledger")
        defer { worker.stop() }
        let peer = try RawPeer(endpoint: ports.requests)
        // Each opening's record holds every account name so far (the accounts array).
        let name = { (index: Int) in "account-\(index)-" + String(repeating: "x", count: 1_000) }
        var outcomes: [OpReply.Outcome] = []
        for index in 1...10 {
            guard case .reply(let reply)? = try peer.exchange([try openAccountFrame(name(index), balance: 1, worker: "big", sequence: UInt64(index))]) else {
                Issue.record("no reply to opening \(index)")
                return
            }
            outcomes.append(reply.outcome)
        }
        let applied = outcomes.prefix { if case .applied = $0 { true } else { false } }.count
        #expect(applied >= 3 && applied < 10, "\(outcomes)")
        guard case .rejected(let code, let detail) = outcomes[applied] else {
            Issue.record("the first opening past the limit was \(outcomes[applied])")
            return
        }
        #expect(code == "too-large")
        #expect(detail.hasPrefix("the turn's record would take about "), "\(detail)")
        #expect(detail.hasSuffix("bytes; a record holds at most 8192"))
        // Undone: every later opening is refused the same way (the array did
        // not keep the refused name), and the store holds only the applied ones.
        #expect(outcomes[applied...].allSatisfy { if case .rejected("too-large", _) = $0 { true } else { false } })
        #expect(try CommitFailureTests.accounts(in: folder.path) == (1...applied).map(name))
        // The leader keeps serving; a smaller turn applies; the worker's replica agrees.
        #expect(try ports.call("ledger.transfer", #"{"from": "\#(name(1))", "to": "\#(name(2))", "amount": 1}"#).hasPrefix("applied revision \(applied + 1)"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker w1: applied \(applied + 1)") } != nil)
        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(try ports.errorCounts()["too-large"] == 10 - applied)
    }

    @Test(.enabled(if: getuid() == 0, "mounts a small tmpfs (root only)"))
    func `a commit that fails on a full disk answers every request of its batch unavailable, keeps nothing, and succeeds again once space returns`() throws {
        let mountPoint = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: mountPoint) }
        let mount = try runCogdlessCommand(["/bin/mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", mountPoint])
        guard mount == 0 else {
            Issue.record("cannot mount a tmpfs at \(mountPoint)")
            return
        }
        defer { _ = try? runCogdlessCommand(["/bin/umount", "-l", mountPoint]) }
        // A filler file takes most of the space; removing it is "space returns".
        let filler = mountPoint + "/filler"
        #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: 12 << 20)))
        let data = mountPoint + "/data"
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: data)
        defer { leader.stop() }
        let peer = try RawPeer(endpoint: ports.requests)
        let name = { (index: Int) in "account-\(index)-" + String(repeating: "y", count: 200_000) }
        var outcomes: [(Int, OpReply.Outcome)] = []
        for index in 1...60 {
            guard case .reply(let reply)? = try peer.exchange([try openAccountFrame(name(index), balance: 1, worker: "filler", sequence: UInt64(index))]) else {
                Issue.record("no reply to opening \(index)")
                return
            }
            outcomes.append((index, reply.outcome))
            if case .rejected = reply.outcome { break }
        }
        guard case (let failedIndex, .rejected(let code, let detail))? = outcomes.last else {
            Issue.record("the disk never filled: \(outcomes.count) openings applied")
            return
        }
        #expect(code == "unavailable")
        #expect(detail.hasPrefix("the commit failed: disk full ("), "\(detail)")
        #expect(detail.hasSuffix("; nothing of this request was kept"))
        #expect(leader.process.isRunning, "the leader keeps serving")
        let appliedNames = (1..<failedIndex).map(name)
        #expect(try CommitFailureTests.accounts(in: data) == appliedNames)
        // The same request again, still no room: refused again, not answered from dedup.
        guard case .reply(let again)? = try peer.exchange([try openAccountFrame(name(failedIndex), balance: 1, worker: "filler", sequence: UInt64(failedIndex))]) else {
            _ = leader.waitForLine(timeout: .seconds(1)) { _ in false }
            Issue.record("no reply to the retry; the leader is running: \(leader.process.isRunning); it said: \(leader.lines.prefix(20).joined(separator: " | "))")
            return
        }
        #expect({ if case .rejected("unavailable", _) = again.outcome { true } else { false } }())
        // Space returns: the retry applies, as the next revision, and the failed
        // opening left nothing behind in the graph (else it would be unchanged).
        try FileManager.default.removeItem(atPath: filler)
        guard case .reply(let retried)? = try peer.exchange([try openAccountFrame(name(failedIndex), balance: 1, worker: "filler", sequence: UInt64(failedIndex))]) else {
            Issue.record("no reply once space returned")
            return
        }
        #expect(retried.outcome == .applied(revision: UInt64(failedIndex)))
        #expect(try CommitFailureTests.accounts(in: data) == appliedNames + [name(failedIndex)])
        #expect((try ports.errorCounts()["commit-failed"] ?? 0) >= 2)
        leader.stop()
        let verify = try runCogd(["log", "verify", "--data", data])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
    }
}

/// Runs a system command (not cogd) to completion; returns its exit status.
func runCogdlessCommand(_ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[0])
    process.arguments = Array(arguments.dropFirst())
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    waitForExit(process, timeout: .seconds(20))
    return process.terminationStatus
}
