import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

/// Whether `text` holds a character a terminal would act on (ESC, a newline
/// inside a line, a bidi override, …).
private func holdsUnsafe(_ text: String) -> Bool {
    text.unicodeScalars.contains { $0 != "\n" && TerminalText.isUnsafe($0) }
}

@Suite("Nothing a peer names can forge an operator's screen (real processes, loopback)", .serialized, .timeLimit(.minutes(10)))
struct TerminalEscapingTests {
    /// A turn name that would print a fake record after its own line.
    static let forgedTurn = "x\n#2  2026-01-01T00:00:00.000Z  ledger.transfer  (system, epoch 1)"
    static let clearingWorker = "evil\u{1B}[2J"

    @Test func `a forged turn name, worker name and value print escaped, each record on its own lines`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }

        // A peer names its turn, its request's worker and an account as it likes.
        let peer = try RawPeer(endpoint: ports.requests)
        let argument = try CBOREncoder().encode(["account": CBORValue.text("ab\u{202E}dc"), "balance": .unsigned(5)])
        let request = OpRequest(
            request: RequestID(worker: Self.clearingWorker, sequence: 1), op: "ledger.open", argument: argument, name: Self.forgedTurn)
        let reply = try peer.replies(to: [WireMessage.op(request).encoded()]).first
        #expect(reply?.outcome == .applied(revision: 1))

        let tail = try runCogd(["tail", "--data", folder.path])
        #expect(tail.status == 0)
        #expect(!holdsUnsafe(tail.stdout), "\(tail.stdout.debugDescription)")
        let lines = tail.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 4, "one header, two writes, the final newline: \(lines)")
        #expect(lines[0].hasPrefix("#1  "))
        #expect(
            lines[0].hasSuffix(
                #"  x\n#2  2026-01-01T00:00:00.000Z  ledger.transfer  (system, epoch 1)  (worker evil\u{1B}[2J, request evil\u{1B}[2J#1, epoch \#(leader.epochFromFirstLine))"#),
            "\(lines[0])")
        #expect(lines.dropFirst().filter { $0.hasPrefix("#") }.isEmpty, "no line reads as a record header")
        #expect(lines.contains(#"    ledger.accounts = ["ab\u{202E}dc"]"#), "\(lines)")

        // JSON keeps JSON's escapes: the names read back exactly, and nothing raw reaches the terminal.
        let json = try runCogd(["tail", "--data", folder.path, "--json"])
        #expect(!holdsUnsafe(json.stdout))
        #expect(json.stdout.contains(#""name": "x\n#2  2026"#))
        #expect(json.stdout.contains(#""worker": "evil\u001b[2J""#))
        #expect(json.stdout.contains(#"ab\u202edc"#))
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(object?["name"] as? String == Self.forgedTurn)
        let origin = object?["origin"] as? [String: Any]
        #expect((origin?["request"] as? [String: Any])?["worker"] as? String == Self.clearingWorker)

        // `cogd call` shows the reply's request id and a refusal's reason escaped.
        let call = try runCogd(["call", "ledger.open", #"{"account": "ab", "balance": 1}"#, "--leader", ports.requests, "--request-id", "\(Self.clearingWorker)#2"])
        #expect(call.stdout == "applied revision 2 (request evil\\u{1B}[2J#2)\n", "\(call.stdout.debugDescription) \(call.stderr)")
        let unknown = try runCogd(["call", "no\u{1B}[31mop", "{}", "--leader", ports.requests])
        #expect(unknown.status == 3)
        #expect(!holdsUnsafe(unknown.stdout + unknown.stderr))
        #expect(unknown.stderr.hasPrefix(#"rejected: unknown-op: no op named `no\u{1B}[31mop`"#), "\(unknown.stderr)")
    }

    @Test func `a worker named with an escape sequence shows escaped in status and in its own log`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let name = "w\u{1B}[2J\nfake: applied 99"
        // (A group name takes no control characters: the name's would be refused.)
        let worker = try ports.startWorker(name, rig: "replica", group: "replicas")
        defer { worker.stop() }
        #expect(worker.lines.contains { $0.contains(#"cogd worker w\u{1B}[2J\nfake: applied 99: synced at revision 0"#) }, "\(worker.lines)")
        #expect(!worker.lines.contains { holdsUnsafe($0) })

        let status = try runCogd(["status", "--leader", ports.requests])
        #expect(status.status == 0)
        #expect(!holdsUnsafe(status.stdout), "\(status.stdout.debugDescription)")
        let lines = status.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("workers   1"))
        #expect(lines.contains { $0.hasPrefix(#"  w\u{1B}[2J\nfake: applied 99: applied 0, lag 0, heard "#) }, "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("fake") })
        let json = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((object?["workers"] as? [[String: Any]])?.first?["name"] as? String == name)
        // The leader's log of the join: escaped, on one line.
        let joined = leader.waitForLine { $0.contains(" (its replica at revision 0)") }
        #expect(joined?.hasSuffix(#" INFO  cogd leader: worker w\u{1B}[2J\nfake: applied 99 joined group replicas (its replica at revision 0)"#) == true, "\(leader.lines)")
        #expect(!leader.lines.contains { holdsUnsafe($0) })
    }
}

extension CogdProcess {
    /// The epoch `cogd leader` printed on its first line.
    var epochFromFirstLine: String {
        guard let line = lines.first(where: { $0.contains("cogd leader: data") }), let range = line.range(of: "epoch ") else { return "?" }
        return String(line[range.upperBound...].prefix { $0.isNumber })
    }
}
