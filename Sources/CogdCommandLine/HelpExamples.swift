import Cog

/// The example lines of `call`, `get` and `tail` help: the demo's own
/// ledger lines when the program serves the ledger rig (`cogd`), else lines
/// made from the program's own rigs — its first op with a sample argument,
/// its first durable source, its rigs' op prefixes — so a user's app never
/// shows an op it does not serve.
struct HelpExamples {
    let call: String
    let get: String
    let tailPattern: String
    let otherTailPattern: String

    init(rigs: Rigs, program: String) {
        if rigs.rig(named: "ledger") != nil {
            call = """
                  \(program) call ledger.open '{"account": "alice", "balance": 100}' --leader 127.0.0.1:5701 --timeout 2
                  \(program) call ledger.transfer '{"from": "alice", "to": "bob", "amount": 30}' --request-id console#7
                  (the same line again: `answered from an earlier request: applied at revision R`, not applied twice)
                  \(program) call ledger.close '"bob"' --name ops-console
                """
            get = """
                  \(program) get ledger.balance '"alice"' --data cogd-data
                  \(program) get ledger.balance --leader 127.0.0.1:5701 --json
                """
            tailPattern = "ledger.*"
            otherTailPattern = rigs.rig(named: "trails") != nil ? "trails.*" : "ledger.*"
            return
        }
        let ops = rigs.all.flatMap(\.ops)
        if let op = ops.first {
            let sample = OpsCommand.sample(of: op.argumentShape).map { OpsCommand.json($0, shape: op.argumentShape) } ?? "null"
            let argument = (sample.hasPrefix("-") ? "-- " : "") + OpsCommand.shellQuoted(sample)
            call = """
                  \(program) call \(TerminalText.escaped(op.name)) \(argument) --leader 127.0.0.1:5701 --timeout 2
                  \(program) call \(TerminalText.escaped(op.name)) \(argument) --request-id console#7
                  (the same line again: `answered from an earlier request: …`, not applied twice)
                  \(program) ops    (every op this program serves, each with an example argument)
                """
        } else {
            call = "  \(program) ops    (this program serves no op)"
        }
        if let source = GetCommand.declaredSources(rigs).first {
            let name = TerminalText.escaped(source.name)
            get = source.isKeyed
                ? "  \(program) get \(name) --data cogd-data          (every key)\n  \(program) get \(name) --leader 127.0.0.1:5701 --json"
                : "  \(program) get \(name) --data cogd-data\n  \(program) get \(name) --leader 127.0.0.1:5701 --json"
        } else {
            get = "  \(program) get --help    (this program declares no durable source)"
        }
        let prefixes = ops.compactMap { $0.name.split(separator: ".").first.map(String.init) }
        let first = prefixes.first
        tailPattern = first.map { "\(TerminalText.escaped($0)).*" } ?? "*"
        otherTailPattern = prefixes.first(where: { $0 != first }).map { "\(TerminalText.escaped($0)).*" } ?? tailPattern
    }
}
