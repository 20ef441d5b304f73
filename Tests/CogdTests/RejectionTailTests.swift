import Foundation
import Testing

@testable import CogdCommandLine

/// Rejections on the record (issue 28 item 4): a refused overdraft and its
/// retry, through `cogd call` against a real leader (loopback), then read
/// back by `cogd tail --rejections` at the revision they were answered at.
@Suite("cogd tail --rejections", .serialized, .timeLimit(.minutes(10)))
struct RejectionTailTests {
    @Test func `an overdraft and its retry exit 3 and cogd tail --rejections shows both at their revision, in text and JSON`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 30}"#).hasPrefix("applied revision 1"))
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 0}"#).hasPrefix("applied revision 2"))

        let overdraft = #"{"from": "alice", "to": "bob", "amount": 50}"#
        let first = try runCogd(["call", "ledger.transfer", overdraft, "--leader", ports.requests, "--request-id", "teller#1"])
        #expect(first.status == 3 && first.stderr == "refused insufficient-funds: alice has 30, the transfer needs 50 (request teller#1)\n", "\(first)")
        let retry = try runCogd(["call", "ledger.transfer", overdraft, "--leader", ports.requests, "--request-id", "teller#1"])
        #expect(
            retry.status == 3
                && retry.stderr == "answered from an earlier request: refused insufficient-funds: alice has 30, the transfer needs 50 (request teller#1)\n",
            "\(retry)")
        #expect(try ports.call("ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 10}"#).hasPrefix("applied revision 3"))
        let unknown = try runCogd(["call", "ledger.transfer", #"{"from": "alice", "to": "zed\u001b[2J", "amount": 5}"#, "--leader", ports.requests, "--request-id", "teller#2"])
        #expect(unknown.status == 3, "\(unknown)")

        // Text: each rejection after the turn of its revision, control characters escaped.
        let tail = try runCogd(["tail", "--data", folder.path, "--rejections"])
        #expect(tail.status == 0, "\(tail)")
        let lines = tail.stdout.split(separator: "\n").map(String.init)
        let headers = lines.filter { $0.hasPrefix("#") }
        #expect(headers.count == 6, "three turns and three rejections: \(tail.stdout)")
        guard headers.count == 6 else { return }
        #expect(headers[0].hasPrefix("#1  ") && headers[1].hasPrefix("#2  ") && headers[4].hasPrefix("#3  "), "\(tail.stdout)")
        #expect(headers[2].hasPrefix("#2 +  ") && headers[2].hasSuffix(
            "  refused insufficient-funds: alice has 30, the transfer needs 50  (op ledger.transfer, request teller#1, digest "
                + headers[2].suffix(17).prefix(16) + ")"), "\(headers[2])")
        #expect(headers[3].hasPrefix("#2 +  ") && headers[3].contains("refused insufficient-funds: alice has 30")
            && headers[3].hasSuffix(") (a retry answered from an earlier request)"), "\(headers[3])")
        #expect(headers[5].hasPrefix("#3 +  ") && headers[5].contains(#"refused unknown-account: no open account named zed\u{1B}[2J  (op ledger.transfer, request teller#2"#),
                "\(headers[5])")
        #expect(!tail.stdout.contains("\u{1B}"), "no raw escape reaches the terminal")

        // Without the flag: turns only, as before.
        let plain = try runCogd(["tail", "--data", folder.path])
        #expect(plain.status == 0 && plain.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }.count == 3, "\(plain)")
        #expect(!plain.stdout.contains("refused"))

        // JSON: a field tells a rejection from a turn; the same order.
        let json = try runCogd(["tail", "--data", folder.path, "--rejections", "--json"])
        #expect(json.status == 0, "\(json)")
        let objects = try json.stdout.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
        #expect(objects.map { $0["revision"] as? Int ?? -1 } == [1, 2, 2, 2, 3, 3], "\(json.stdout)")
        #expect(objects.map { $0["rejection"] as? Bool ?? false } == [false, false, true, true, false, true])
        let refused = objects[2]
        #expect(refused["kind"] as? String == "refused" && refused["code"] as? String == "insufficient-funds")
        #expect(refused["reason"] as? String == "alice has 30, the transfer needs 50" && refused["op"] as? String == "ledger.transfer")
        #expect((refused["request"] as? [String: Any])?["worker"] as? String == "teller" && (refused["request"] as? [String: Any])?["seq"] as? Int == 1)
        #expect((refused["digest"] as? String)?.count == 16 && refused["digest"] as? String == objects[3]["digest"] as? String, "the retry carries the same digest")
        #expect(refused["earlier"] as? Bool == false && objects[3]["earlier"] as? Bool == true && refused["time"] is String)
        #expect(objects[5]["reason"] as? String == "no open account named zed\u{1B}[2J")
        #expect(json.stdout.contains(#"zed\u001b[2J"#) || json.stdout.contains(#"zed\u001B[2J"#), "escaped in JSON: \(json.stdout)")

        // The folder checks out, and stats counts them.
        let verify = try runCogd(["log", "verify", "--data", folder.path])
        #expect(verify.status == 0, "\(verify)")
        let stats = try runCogd(["log", "stats", "--data", folder.path, "--json"])
        #expect(stats.stdout.contains(#""rejections": 3"#), "\(stats.stdout)")

        // Compacted to the newest turn: the two rejections at revision 2 go with it, the one at 3 stays.
        leader.stop()
        let compact = try runCogd(["log", "compact", "--data", folder.path, "--keep", "1"])
        #expect(compact.status == 0 && compact.stdout.contains("and 2 rejections kept at their revisions"), "\(compact)")
        let kept = try runCogd(["tail", "--data", folder.path, "--rejections"])
        let keptHeaders = kept.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }.map { String($0.prefix(5)) }
        #expect(keptHeaders == ["#3  2", "#3 + "], "\(kept.stdout)")
        #expect(try runCogd(["log", "verify", "--data", folder.path]).status == 0)
    }

    @Test func `a follower prints a rejection answered after the last turn it printed, then the next turn after it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 30}"#).hasPrefix("applied revision 1"))
        let tail = try CogdProcess(["tail", "--data", folder.path, "--rejections", "--follow"])
        defer { tail.stop() }
        #expect(tail.waitForLine { $0.hasPrefix("#1  ") } != nil, "\(tail.lines)")
        let refused = try runCogd(["call", "ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 50}"#, "--leader", ports.requests, "--request-id", "teller#1"])
        #expect(refused.status == 3, "\(refused)")
        let line = tail.waitForLine { $0.hasPrefix("#1 +  ") }
        #expect(line?.contains("refused unknown-account: no open account named bob  (op ledger.transfer, request teller#1") == true, "\(tail.lines)")
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 0}"#).hasPrefix("applied revision 2"))
        #expect(tail.waitForLine { $0.hasPrefix("#2  ") } != nil, "\(tail.lines)")
        let headers = tail.lines.filter { $0.hasPrefix("#") }.map { String($0.prefix(5)) }
        #expect(headers == ["#1  2", "#1 + ", "#2  2"], "each once, in order: \(tail.lines)")
    }

    @Test func `--rejections parses, and is refused with --connect`() throws {
        guard case .tail(let options) = try Command.parse(["tail", "--rejections", "--json"]) else {
            Issue.record("not a tail")
            return
        }
        #expect(options.rejections && options.json)
        guard case .tail(let plain) = try Command.parse(["tail"]) else { return }
        #expect(!plain.rejections)
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--connect", "127.0.0.1:7002", "--rejections"]) }
        #expect(throws: Command.UsageError.self) { try Command.parse(["tail", "--rejections=yes"]) }
    }
}
