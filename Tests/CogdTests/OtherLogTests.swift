import CogLog
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The revision a leader's log ends at, from `cogd status --json`.
private enum TurnStoreEnd {
    static func last(of ports: ClusterPorts) throws -> Int {
        let status = try runCogd(["status", "--leader", ports.requests, "--json"])
        return (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["revision"] as? Int ?? -1
    }
}

/// A follower whose leader is replaced by one serving another log (a new
/// folder, a restored backup) says so, instead of splicing the two logs.
@Suite("followers of a log that goes back, on real processes", .serialized, .timeLimit(.minutes(10)))
struct OtherLogTests {
    /// The revisions of the turn lines among `lines`, in order.
    private func revisions(_ lines: [String]) -> [Int] {
        lines.compactMap { line in line.hasPrefix("#") ? Int(line.dropFirst().prefix { $0 != " " }) : nil }
    }

    /// A leader on `ports` over `folder` with three turns (accounts PREFIX0…2).
    private func leaderWithThreeTurns(_ ports: ClusterPorts, _ folder: String, prefix: String = "a") throws -> CogdProcess {
        let leader = try ports.startLeader(data: folder)
        for account in 0..<3 {
            #expect(try ports.call("ledger.open", #"{"account": "\#(prefix)\#(account)", "balance": 1}"#).hasPrefix("applied revision"))
        }
        return leader
    }

    /// Stops `leader` with SIGINT (as an operator does) and waits for it.
    private func interrupt(_ leader: CogdProcess) {
        leader.interrupt()
        waitForExit(leader.process, timeout: .seconds(20))
    }

    @Test func `tail --connect --from says the leader's log went back when a leader on another folder replaces it, and follows the new one`() throws {
        let first = TemporaryFolder()
        let second = TemporaryFolder()
        defer { first.cleanUp(); second.cleanUp() }
        let ports = ClusterPorts()
        let old = try leaderWithThreeTurns(ports, first.path)
        defer { old.stop() }
        let tail = try CogdProcess(["tail", "--connect", ports.turns, "--leader", ports.requests, "--from", "1"])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.hasPrefix("#3 ") } != nil, "\(tail.lines)")
        // The same log restarted (a new epoch, the same turns): no remark, and its next turn follows on.
        interrupt(old)
        let restarted = try ports.startLeader(data: first.path)
        defer { restarted.stop() }
        var account = 0
        while account < 20 && tail.waitForLine(timeout: .milliseconds(500), { $0.hasPrefix("#4 ") }) == nil {
            _ = try ports.call("ledger.open", #"{"account": "r\#(account)", "balance": 1}"#)
            account += 1
        }
        #expect(Array(revisions(tail.lines).prefix(4)) == [1, 2, 3, 4], "\(tail.lines)")
        // Enough time for the catch-up connection's hello to be welcomed again (heartbeats every second).
        #expect(tail.waitForLine(timeout: .seconds(3)) { $0.contains("went back") } == nil, "no remark for the same log: \(tail.lines)")
        let end = try TurnStoreEnd.last(of: ports)
        interrupt(restarted)
        let new = try ports.startLeader(data: second.path)
        defer { new.stop() }
        let said = tail.waitForLine { $0.contains("went back") }
        #expect(
            said == "cogd tail: the leader's log went back from revision \(end) (epoch 2) to 0 (epoch 1): another log, or a restored backup; "
                + "following it from 1", "\(tail.lines)")
        for account in 0..<2 {
            #expect(try ports.call("ledger.open", #"{"account": "n\#(account)", "balance": 1}"#).hasPrefix("applied revision"))
        }
        #expect(tail.waitForLine { _ in revisions(tail.lines).last == 2 } != nil, "\(tail.lines)")
        #expect(revisions(tail.lines) == Array(1...end) + [1, 2], "the new log's turns after the old one's, none dropped: \(tail.lines)")
        #expect(tail.lines.contains { $0.hasPrefix("#1 ") && $0.contains("ledger.open") }, "\(tail.lines)")
    }

    @Test func `tail --connect without --from and status --watch remark a log that goes back`() throws {
        let first = TemporaryFolder()
        let second = TemporaryFolder()
        defer { first.cleanUp(); second.cleanUp() }
        let ports = ClusterPorts()
        let old = try ports.startLeader(data: first.path)
        defer { old.stop() }
        let tail = try CogdProcess(["tail", "--connect", ports.turns])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.hasPrefix("cogd tail: following") } != nil, "\(tail.lines)")
        let watch = try CogdProcess(["status", "--leader", ports.requests, "--watch", "0.3", "--timeout", "1"])
        defer { watch.stop() }
        // The stream reaches a new subscriber asynchronously: turns until the tail shows one (bounded), three at least.
        var account = 0
        while account < 20 && (account < 3 || tail.waitForLine(timeout: .milliseconds(300), { $0.hasPrefix("#") }) == nil) {
            _ = try ports.call("ledger.open", #"{"account": "a\#(account)", "balance": 1}"#)
            account += 1
        }
        #expect(tail.waitForLine { _ in revisions(tail.lines).last == account } != nil, "\(tail.lines)")
        #expect(watch.waitForLine { $0 == "revision  \(account)" } != nil, "\(watch.lines.suffix(20))")
        interrupt(old)
        let new = try ports.startLeader(data: second.path)
        defer { new.stop() }
        // A new subscription takes a moment: turns on the new log until the tail has read one (bounded).
        var opened = 0
        while opened < 20 && tail.waitForLine(timeout: .milliseconds(300), { $0.contains("went back") }) == nil {
            #expect(try ports.call("ledger.open", #"{"account": "n\#(opened)", "balance": 1}"#).hasPrefix("applied revision \(opened + 1)"))
            opened += 1
        }
        let said = tail.lines.first { $0.contains("went back") }
        let newEnd = said.flatMap { line in line.range(of: "to ").map { line[$0.upperBound...].prefix { $0 != " " } } }.flatMap { Int($0) }
        #expect(
            said == "cogd tail: the leader's log went back from revision \(account) (epoch 1) to \(newEnd ?? -1) (epoch 1): another log, "
                + "or a restored backup; following it from \((newEnd ?? -1) + 1)", "\(tail.lines)")
        #expect(newEnd.map { $0 < opened } == true, "\(tail.lines)")
        #expect(tail.waitForLine { _ in revisions(tail.lines).last == (newEnd ?? -1) + 1 } != nil, "the new log's turn is printed: \(tail.lines)")
        let note = watch.waitForLine { $0.hasPrefix("note ") }
        #expect(
            note?.hasPrefix("note      the leader's log went back from revision \(account) (epoch 1) to ") == true
                && note?.contains(" (epoch 1) at 20") == true && note?.hasSuffix("Z: another log, or a restored backup") == true,
            "\(watch.lines.suffix(20))")
    }

    @Test func `tail --follow says when the folder is moved away and when another log takes its place, then follows that one`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp(); try? FileManager.default.removeItem(atPath: folder.path + ".old") }
        let ports = ClusterPorts()
        let old = try leaderWithThreeTurns(ports, folder.path)
        defer { old.stop() }
        let tail = try CogdProcess(["tail", "--data", folder.path, "--follow"])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.hasPrefix("#3 ") } != nil, "\(tail.lines)")
        interrupt(old)
        try FileManager.default.moveItem(atPath: folder.path, toPath: folder.path + ".old")
        let moved = tail.waitForLine { $0.contains("no longer holds") }
        #expect(moved == "cogd tail: \(folder.path) no longer holds the log being read (moved or removed); waiting for a log there", "\(tail.lines)")
        let new = try ports.startLeader(data: folder.path)
        defer { new.stop() }
        let replaced = tail.waitForLine { $0.contains("was replaced") }
        #expect(
            replaced == "cogd tail: the log in \(folder.path) was replaced by another log, or a restored backup, which ends at revision 0; "
                + "following it from 1", "\(tail.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "n", "balance": 1}"#).hasPrefix("applied revision 1"))
        #expect(tail.waitForLine { _ in revisions(tail.lines).count == 4 } != nil, "\(tail.lines)")
        #expect(revisions(tail.lines) == [1, 2, 3, 1], "\(tail.lines)")
    }
}
