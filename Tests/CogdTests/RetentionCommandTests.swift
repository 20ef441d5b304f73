import CogCluster
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

/// The frame of an `op` request `worker#sequence` adding `line` to the
/// trails journal (the newest 100 lines: a record of a steady size).
private func journalFrame(_ line: String, worker: String, sequence: UInt64) throws -> [UInt8] {
    WireMessage.op(OpRequest(
        request: RequestID(worker: worker, sequence: sequence), op: "trails.journal", argument: try CBOREncoder().encode(line))
    ).encoded()
}

private func fileSize(_ path: String) -> Int {
    (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
}

private func jsonObject(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}

/// Sends `count` journal lines as requests `worker#…` (pipelined, `round` at a
/// time) and expects each applied; `lineBytes` pads each line.
private func sendJournal(
    _ peer: RawPeer, count: Int, worker: String, from sequence: inout UInt64, lineBytes: Int = 0, round: Int = 100
) throws {
    var frames: [[UInt8]] = []
    for _ in 0..<count {
        sequence += 1
        frames.append(try journalFrame("\(sequence)" + String(repeating: "x", count: lineBytes), worker: worker, sequence: sequence))
    }
    let replies = try peer.replies(to: frames, round: round)
    let applied = replies.filter { if case .applied = $0.outcome { true } else { false } }.count
    #expect(replies.count == count && applied == count, "\(applied) of \(count) applied")
}

@Suite("Retention and backup, with the real binaries", .serialized, .timeLimit(.minutes(10)))
struct RetentionCommandTests {
    @Test func `under steady load with --retain-turns the data file stops growing`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, options: ["--retain-turns", "200"])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("cogd leader: retention keeps the newest 200 turns") } != nil)
        let peer = try RawPeer(endpoint: ports.requests)
        var sequence: UInt64 = 0
        // Warm-up: the first kept revision moves on; applied requests' answers
        // are indexed (every 1,024) and expire with the records around them.
        try sendJournal(peer, count: 4_000, worker: "load", from: &sequence)
        var sizes: [Int] = []
        for _ in 0..<5 {
            try sendJournal(peer, count: 1_000, worker: "load", from: &sequence)
            sizes.append(fileSize(folder.path + "/data.mdb"))
        }
        print("retention plateau: data.mdb \(sizes) bytes after 5,000…9,000 turns (--retain-turns 200)")

        let stats = jsonObject(try runCogd(["log", "stats", "--json", "--data", folder.path]).stdout)
        let first = stats["firstRevision"] as? Int ?? 0
        // Kept, the 4,000 turns between the first and the last sample would
        // take about this many bytes of records alone. With retention the file
        // reuses freed pages: it may grow by a step while batches are larger
        // than usual (a loaded machine commits more turns at once, needing
        // more pages in one transaction), never by anything like that.
        let kept = max(stats["turns"] as? Int ?? 1, 1)
        let fourThousandTurns = (stats["recordBytes"] as? Int ?? 0) / kept * 4_000
        let growth = (sizes.last ?? 0) - (sizes.first ?? 0)
        print("retention plateau: grew \(growth) bytes; the same 4,000 turns kept would take \(fourThousandTurns) bytes of records")
        #expect(fourThousandTurns > 0 && growth * 10 <= fourThousandTurns, "data.mdb grew \(growth) bytes after the warm-up (\(sizes)); 4,000 kept turns: \(fourThousandTurns) bytes")
        #expect(stats["lastRevision"] as? Int == 9_000)
        // The newest 200, and those whose replies are not indexed yet (at most the last 1,024 applied requests' records).
        #expect(first <= 8_801 && first >= 9_000 - 1_024 - 200, "\(stats)")
        #expect(stats["turns"] as? Int == 9_000 - first + 1)
        #expect((stats["dedupEntries"] as? Int ?? .max) <= 2 * 1_024, "answers expire too: \(stats)")
        #expect(stats["fileBytes"] as? Int == sizes.last)
        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0 && verify.stdout.hasPrefix("ok: \(9_000 - first + 1) turns, revisions \(first)…9000 contiguous"), "\(verify)")
    }

    @Test func `a worker behind the first revision kept is told compacted, syncs from a snapshot and converges`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, options: ["--retain-turns", "20"])
        defer { leader.stop() }
        let worker = try ports.startWorker("w1", rig: "replica")
        defer { worker.stop() }
        // Frozen while 3,000 records of about 20 KiB go by: the turn stream
        // drops what its queue to the worker cannot hold, and the leader
        // removes all but the newest (and the unindexed) records meanwhile.
        worker.pause()
        let peer = try RawPeer(endpoint: ports.requests)
        var sequence: UInt64 = 0
        try sendJournal(peer, count: 3_000, worker: "load", from: &sequence, lineBytes: 200, round: 10)
        worker.resume()
        #expect(
            worker.waitForLine { $0.contains("the turns it lacked are no longer in the leader's log (retention); re-synced from a snapshot at revision") }
                != nil, "\(worker.lines.suffix(5))")
        let converged = try waitUntil(timeout: .seconds(20)) {
            let status = jsonObject(try runCogd(["status", "--leader", ports.requests, "--json"]).stdout)
            let workers = status["workers"] as? [[String: Any]] ?? []
            return status["revision"] as? Int == 3_000 && workers.count == 1 && workers[0]["appliedRevision"] as? Int == 3_000
                && workers[0]["digest"] as? String == "agrees"
        }
        #expect(converged, "w1 at the leader's revision with an agreeing digest")
        #expect((try ports.errorCounts())["compacted"] ?? 0 >= 1)

        // The same on the wire, for a peer that says hello and asks from revision 1.
        let raw = try RawPeer(endpoint: ports.requests)
        guard case .welcome(_, let last, _, _, _)? = try raw.exchange(.hello(worker: "w2", lastRevision: 0)) else {
            Issue.record("no welcome")
            return
        }
        #expect(last == 3_000)
        guard case .error(let refusal)? = try raw.exchange(.catchUpRequest(from: 1)) else {
            Issue.record("no answer to the catch-up")
            return
        }
        #expect(refusal.code == "compacted")
        #expect(refusal.message.hasPrefix("revision 1 is no longer in the log: it keeps revisions "))
        #expect(refusal.message.hasSuffix(" to 3000; sync from a snapshot (snapshot-request)"))
        let stats = jsonObject(try runCogd(["log", "stats", "--json", "--data", folder.path]).stdout)
        let first = try #require(stats["firstRevision"] as? Int)
        #expect(refusal.message.contains("keeps revisions \(first) to"))
        guard case .turns(_, let records)? = try raw.exchange(.catchUpRequest(from: UInt64(first))) else {
            Issue.record("no turns from the first revision kept")
            return
        }
        #expect(records.first?.revision == UInt64(first))
    }

    @Test func `log compact, stats, tail and verify on a log whose oldest turns were removed`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        #expect(try runCogd(["log", "soak", "--data", folder.path, "--count", "100", "--batch", "10"]).status == 0)
        // Refused while a leader holds the folder, saying so.
        do {
            let ports = ClusterPorts()
            let leader = try ports.startLeader(data: folder.path)
            let refused = try runCogd(["log", "compact", "--keep", "10", "--data", folder.path])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("is locked by another writer (pid \(leader.process.processIdentifier))"), "\(refused.stderr)")
            #expect(refused.stderr.contains("a leader serves from this folder. Stop it first, or let it remove old turns while it serves (cogd leader --retain-turns 10)"))
            leader.interrupt()
            waitForExit(leader.process, timeout: .seconds(10))
        }
        let compact = try runCogd(["log", "compact", "--keep", "10", "--data", folder.path])
        #expect(compact.status == 0, "\(compact)")
        #expect(compact.stdout.hasPrefix("ok: removed revisions 1…90 (90 turns); \(folder.path) keeps revisions 91…100"), "\(compact.stdout)")
        // Compacting starts no epoch, and with nothing to remove writes nothing: the file's bytes stay as they were.
        let epoch = jsonObject(try runCogd(["log", "stats", "--json", "--data", folder.path]).stdout)["epoch"] as? Int
        #expect(epoch == 2, "soak 1, the leader 2; compact none")
        let bytes = FileManager.default.contents(atPath: folder.path + "/data.mdb")
        let again = try runCogd(["log", "compact", "--keep", "10", "--data", folder.path])
        #expect(again.status == 0 && again.stdout.hasPrefix("ok: nothing to remove: \(folder.path) keeps revisions 91…100"), "\(again)")
        #expect(FileManager.default.contents(atPath: folder.path + "/data.mdb") == bytes, "nothing removed, nothing written")
        #expect(jsonObject(try runCogd(["log", "stats", "--json", "--data", folder.path]).stdout)["epoch"] as? Int == 2)

        let stats = try runCogd(["log", "stats", "--data", folder.path])
        #expect(stats.stdout.contains("revisions    91…100 (10 turns; retention removed 1…90)"), "\(stats.stdout)")
        #expect(stats.stdout.contains("pages        "))
        let json = jsonObject(try runCogd(["log", "stats", "--json", "--data", folder.path]).stdout)
        #expect(json["firstRevision"] as? Int == 91 && json["lastRevision"] as? Int == 100 && json["turns"] as? Int == 10)
        #expect((json["recordBytes"] as? Int ?? 0) > 0 && (json["freePages"] as? Int ?? 0) > 0)
        #expect(json["fileBytes"] as? Int == fileSize(folder.path + "/data.mdb"))

        let below = try runCogd(["tail", "--data", folder.path, "--from", "5"])
        #expect(below.status == 1 && below.stdout.isEmpty)
        #expect(
            below.stderr
                == "Error: revision 5 is no longer in the log: retention removed revisions 1…90; it keeps 91…100 (--from 91 to 100)\n")
        let kept = try runCogd(["tail", "--data", folder.path, "--from", "91", "--json"])
        #expect(kept.status == 0)
        #expect(kept.stdout.split(separator: "\n").map { jsonObject(String($0))["revision"] as? Int } == (91...100).map { $0 })

        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0)
        #expect(verify.stdout.hasPrefix("ok: 10 turns, revisions 91…100 contiguous (retention removed revisions 1…90), every record decodes; "))
        #expect(try runCogd(["log", "upgrade", "--data", folder.path]).stdout == "ok: \(folder.path) already has schema 5; nothing to do\n")
        // A leader starts on it and goes on from 100.
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(leader.lines.contains { $0.contains("epoch 3, revision 100") }, "\(leader.lines)")
    }

    @Test func `a fresh backup compacts at once: its unindexed replies are indexed first, and a retry of a removed turn is still answered`() throws {
        let folder = TemporaryFolder()
        let copy = TemporaryFolder()
        defer {
            folder.cleanUp()
            copy.cleanUp()
        }
        do {
            let ports = ClusterPorts()
            let leader = try ports.startLeader(data: folder.path)
            defer { leader.stop() }
            for sequence in 1...6 {
                let call = try ports.call("ledger.open", #"{"account": "a\#(sequence)", "balance": 1}"#, requestID: "client#\(sequence)")
                #expect(call.hasPrefix("applied revision \(sequence)"), "\(call)")
            }
            // Fewer replies than the leader indexes at once: the backup holds them only in their records.
            #expect(try runCogd(["log", "backup", copy.path + "/b", "--data", folder.path]).status == 0)
        }
        let backup = copy.path + "/b"
        #expect(jsonObject(try runCogd(["log", "stats", "--json", "--data", backup]).stdout)["unindexedFrom"] as? Int == 1)
        let sizeBefore = try #require(FileManager.default.attributesOfItem(atPath: backup + "/data.mdb")[.size] as? Int)
        let compact = try runCogd(["log", "compact", "--keep", "2", "--data", backup])
        #expect(compact.status == 0 && compact.stderr.isEmpty, "\(compact)")
        // A backup is tight: removing records writes pages anew, and the line says the file grew rather than hide it.
        let sizeAfter = try #require(FileManager.default.attributesOfItem(atPath: backup + "/data.mdb")[.size] as? Int)
        #expect(compact.stdout.contains(sizeAfter > sizeBefore ? "; data.mdb grew from " : "; data.mdb is "), "\(sizeBefore) → \(sizeAfter): \(compact.stdout)")
        #expect(
            compact.stdout.hasPrefix(
                "ok: removed revisions 1…4 (4 turns); \(backup) keeps revisions 5…6; first indexed 6 replies held only in their records "
                    + "(as a leader does when it opens the folder)"), "\(compact.stdout)")
        let stats = jsonObject(try runCogd(["log", "stats", "--json", "--data", backup]).stdout)
        #expect(stats["firstRevision"] as? Int == 5 && stats["unindexedFrom"] is NSNull, "\(stats)")
        // A leader on the compacted backup answers a retry of a request whose turn is gone, from dedup.
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: backup)
        defer { leader.stop() }
        #expect(
            try ports.call("ledger.open", #"{"account": "a1", "balance": 1}"#, requestID: "client#1")
                .hasPrefix("answered from an earlier request: applied at revision 1"))
    }

    @Test func `a backup taken under load verifies, and a leader started on it serves the same state at its last revision`() throws {
        let folder = TemporaryFolder()
        let copy = TemporaryFolder()
        defer {
            folder.cleanUp()
            copy.cleanUp()
        }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        // A client sends ops until told to stop, on a thread of its own.
        let stop = StopFlag()
        let finished = DispatchSemaphore(value: 0)
        let endpoint = ports.requests
        Thread {
            defer { finished.signal() }
            guard let peer = try? RawPeer(endpoint: endpoint) else { return }
            var sequence: UInt64 = 0
            while !stop.isStopped {
                var frames: [[UInt8]] = []
                for _ in 0..<20 {
                    sequence += 1
                    frames.append((try? journalFrame("line \(sequence)", worker: "client", sequence: sequence)) ?? [])
                }
                _ = try? peer.replies(to: frames, round: 20)
            }
        }.start()
        var loadStopped = false
        func stopLoad() {
            guard !loadStopped else { return }
            loadStopped = true
            stop.stop()
            #expect(finished.wait(timeout: .now() + 60) == .success, "the client thread ended")
        }
        defer { stopLoad() }
        func lastRevision() throws -> Int { jsonObject(try runCogd(["log", "stats", "--json", "--data", folder.path]).stdout)["lastRevision"] as? Int ?? 0 }
        #expect(try waitUntil { try lastRevision() >= 500 }, "the client's ops are applied")

        let backup = try runCogd(["log", "backup", copy.path + "/b", "--data", folder.path])
        #expect(backup.status == 0, "\(backup)")
        let report = backup.stdout
        #expect(report.hasPrefix("ok: backed up \(folder.path) to \(copy.path)/b: revisions 1…"), "\(report)")
        let copied = try #require(UInt64(report.split(separator: "…").dropFirst().first?.prefix { $0.isNumber } ?? ""), "\(report)")
        let digest = String(try #require(report.split(separator: "state digest ").dropFirst().first?.prefix(32), "\(report)"))
        #expect(report.contains("revisions 1…\(copied), epoch 1, state digest \(digest); data.mdb "))
        #expect(report.contains(", and a cogd.identity naming that revision"))
        #expect(try waitUntil { try lastRevision() > Int(copied) + 100 }, "the leader went on serving while and after it copied")
        stopLoad()

        let verify = try runCogd(["log", "verify", "--data", copy.path + "/b"])
        #expect(verify.status == 0 && verify.stdout.hasPrefix("ok: \(copied) turns, revisions 1…\(copied) contiguous"), "\(verify)")
        // The copy's digest is the one the live log's record says for that revision.
        let live = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try live.stateDigest(at: copied)?.description == digest)

        // A leader on the copy starts as it is (no --accept-data-loss) at the copy's last revision…
        let restoredPorts = ClusterPorts()
        let restored = try restoredPorts.startLeader(data: copy.path + "/b")
        defer { restored.stop() }
        #expect(restored.lines.contains { $0.contains("epoch 2, revision \(copied)") }, "\(restored.lines)")
        // …and serves that state: a snapshot at that revision whose entries add up to the digest.
        let raw = try RawPeer(endpoint: restoredPorts.requests)
        guard case .welcome(_, let last, _, _, _)? = try raw.exchange(.hello(worker: "w1", lastRevision: 0)) else {
            Issue.record("no welcome from the restored leader")
            return
        }
        #expect(last == copied)
        guard case .snapshot(_, let revision, let entries, _, let more, let sent)? = try raw.exchange(.snapshotRequest(inParts: true)) else {
            Issue.record("no snapshot from the restored leader")
            return
        }
        #expect(revision == copied && !more)
        #expect(sent?.description == digest)
        #expect(StateDigest(entries: entries.map { (name: $0.name, key: $0.key, value: $0.value) }).description == digest)
        let journal = try #require(entries.first { $0.name == "trails.journal" })
        let lines = try CBORDecoder().decode([String].self, from: journal.value)
        #expect(lines.last == "line \(copied)", "the journal's newest line is the copy's last request's")
    }

    @Test func `retention options and the log actions parse, and bad values are usage errors`() throws {
        func retention(_ arguments: [String]) throws -> Retention? {
            guard case .leader(let options) = try Command.parse(["leader"] + arguments) else { return nil }
            return options.retention
        }
        #expect(try retention([]) == .everything)
        #expect(try retention(["--retain-turns", "100000"]) == .turns(100_000))
        #expect(try retention(["--retain-age=7d"]) == .age(seconds: 7 * 86_400))
        #expect(try retention(["--retain-age", "90m"]) == .age(seconds: 5_400))
        #expect(try retention(["--retain-bytes", "10GiB"]) == .bytes(10 << 30))
        #expect(try retention(["--retain-bytes", "500MB"]) == .bytes(500_000_000))
        for bad in [
            ["--retain-turns", "0"], ["--retain-turns", "-3"], ["--retain-age", "5"], ["--retain-age", "0h"], ["--retain-age", "3w"],
            ["--retain-bytes", "1KiB"], ["--retain-bytes", "lots"], ["--retain-bytes", "99999999999TiB"],
            ["--retain-turns", "5", "--retain-age", "1d"],
        ] {
            #expect(throws: Command.UsageError.self, "\(bad)") { try Command.parse(["leader"] + bad) }
        }
        #expect(try Command.parse(["log", "compact", "--keep", "5", "--data", "d"]) == .logCompact(dataFolder: "d", keep: 5))
        #expect(try Command.parse(["log", "backup", "/b", "--data", "d"]) == .logBackup(dataFolder: "d", destination: "/b"))
        #expect(try Command.parse(["log", "backup", "--data", "d", "/b"]) == .logBackup(dataFolder: "d", destination: "/b"))
        #expect(try Command.parse(["log", "backup", "/b"]) == .logBackup(dataFolder: Command.defaultDataFolder, destination: "/b"))
        for bad in [["log", "compact"], ["log", "compact", "--keep", "0"], ["log", "backup"], ["log", "backup", "/b", "/c"], ["log", "stats", "--keep", "3"]] {
            #expect(throws: Command.UsageError.self, "\(bad)") { try Command.parse(bad) }
        }
        #expect(Retention.durationText(7 * 86_400) == "7d" && Retention.sizeText(10 << 30) == "10GiB")
    }
}
