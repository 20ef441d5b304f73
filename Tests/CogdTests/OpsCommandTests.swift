import Foundation
import Testing

@Suite("cogd ops lists what the leader serves")
struct OpsCommandTests {
    @Test func `ops shows each op's argument shape and an example, and every example is accepted by cogd call`() throws {
        let text = try runCogd(["ops"])
        #expect(text.status == 0 && text.stderr.isEmpty, "\(text)")
        #expect(
            text.stdout.contains(
                """
                ledger.transfer  (rig ledger)
                    moves money between two open accounts; refuses unknown-account and insufficient-funds; an amount under 1 changes nothing
                    argument: {"from": string, "to": string, "amount": integer}
                    example:  cogd call ledger.transfer '{"from": "alice", "to": "bob", "amount": 30}'
                """), "\(text.stdout)")
        #expect(text.stdout.contains(#"argument: {"trail": {"id": string, "name": string, "lengthKm": number}, "receipt": integer}"#))
        #expect(text.stdout.contains("example:  cogd call trails.tickHike 5\n"), "\(text.stdout)")
        // The trap op is the lab's: cogd does not list it, cogd-lab lists it behind --trap-op.
        #expect(!text.stdout.contains("ledger.trap"), "\(text.stdout)")
        #expect(try runCogdLab(["ops"]).stdout.contains("ledger.trap  (served only by `cogd-lab leader --trap-op`)"))

        let json = try runCogd(["ops", "--json"])
        #expect(json.status == 0, "\(json)")
        let ops = try json.stdout.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        let names = ops.compactMap { $0["name"] as? String }
        #expect(
            names == [
                "trails.openScreen", "trails.closeScreen", "trails.accept", "trails.startHike", "trails.stopHike", "trails.tickHike",
                "trails.journal", "ledger.open", "ledger.transfer", "ledger.close", "ledger.greet", "ledger.tellerTransfer",
            ], "\(names)")
        #expect(ops.allSatisfy { ($0["argument"] as? String)?.isEmpty == false && $0["example"] != nil && !($0["example"] is NSNull) })

        // Each example line, run as a user copies it, decodes as the op's argument: applied, unchanged or refused by
        // the op's body (a transfer between accounts not opened here), never bad-argument.
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let examples = text.stdout.split(separator: "\n").compactMap { line -> (op: String, argument: String)? in
            guard let range = line.range(of: "example:  cogd call ") else { return nil }
            let words = line[range.upperBound...].split(separator: " ", maxSplits: 1).map(String.init)
            guard words.count == 2 else { return nil }
            let quoted = words[1].hasPrefix("'") && words[1].hasSuffix("'") && words[1].count >= 2
            return (words[0], quoted ? String(words[1].dropFirst().dropLast()) : words[1])
        }
        #expect(examples.count == names.count, "an example for every op: \(examples)")
        for (op, argument) in examples {
            let call = try runCogd(["call", op, argument, "--leader", ports.requests])
            #expect(call.status == 0 || (call.status == 3 && call.stderr.hasPrefix("refused ")), "cogd call \(op) \(argument): \(call)")
        }
    }

    @Test func `a user's own executable lists its ops with examples made from their shapes`() throws {
        let counter = cogdExecutable().deletingLastPathComponent().appendingPathComponent("CounterApp")
        let ops = try runProgram(counter, ["ops"])
        #expect(ops.status == 0, "\(ops)")
        #expect(ops.stdout.contains("counter.bump  (rig counter)\n    argument: integer\n    example:  CounterApp call counter.bump 1\n"), "\(ops.stdout)")
        #expect(ops.stdout.contains("counter.setBonus  (rig counter)\n    argument: boolean\n    example:  CounterApp call counter.setBonus true\n"), "\(ops.stdout)")
    }
}
