import Cog
import CogCluster
import LedgerRig

/// Durable sources the scope tests set directly, one per selector form.
enum TestRig {
    /// An `each` source: its elements are the members.
    static let members = Cog<[String]>.Manual(name: "test.members") { [] }
    /// An `optional` source: one member unless nil.
    static let chosen = Cog<String?>.Manual(name: "test.chosen") { nil }
    /// A `bool` source: one member while true.
    static let flag = Cog<Bool>.Manual(name: "test.flag") { false }

    /// The ops the leader core runs in these tests: the ledger rig's, by
    /// their names, through its public verbs, and the test rig's.
    ///
    /// Built by hand rather than with `OpRegistry.declared()`: that reads
    /// every declaration made in the process so far, and the test modules
    /// that share the process declare some names twice (CogTests' example
    /// copy of the Trails rig and TrailsRig itself) — `declared()` then
    /// refuses, or not, depending on which tests ran first.
    static func registry() -> OpRegistry {
        LedgerRig.register()
        return OpRegistry(runners: [
            "ledger.open": runner(Opening.self) { cogs, opening in cogs.open(account: opening.account, with: opening.balance) },
            "ledger.transfer": runner(Transfer.self) { cogs, transfer in
                cogs.transfer(from: transfer.from, to: transfer.to, amount: transfer.amount)
            },
            "ledger.close": runner(String.self) { cogs, account in cogs.close(account: account) },
            "ledger.greet": runner(String.self) { cogs, account in cogs.greet(account: account) },
            "ledger.tellerTransfer": runner(TellerTransfer.self) { cogs, request in
                cogs.tellerTransfer(
                    from: request.transfer.from, to: request.transfer.to, amount: request.transfer.amount, receipt: request.receipt)
            },
            "test.setMembers": write([String].self) { c, value in c[members] = value },
            // Sets the members to each value in turn, all in one turn.
            "test.setMembersInSteps": write([[String]].self) { c, steps in
                for value in steps { c[members] = value }
            },
            "test.choose": write(String?.self) { c, value in c[chosen] = value },
            "test.setFlag": write(Bool.self) { c, value in c[flag] = value },
        ])
    }

    /// An op that calls a verb of the graph: the verb's turn joins the one
    /// the runner settles (as a `RemoteOp`'s body would run); a verb whose
    /// op refused refuses it (the runner throws the `Refusal`, as a
    /// `RemoteOp`'s does).
    static func runner<A: Decodable>(_ type: A.Type, _ verb: @escaping @MainActor @Sendable (Cogs, A) -> Void) -> OpRegistry.Runner {
        { cogs, bytes, codec, name in
            let argument = try codec.decode(A.self, from: bytes)
            let (turns, refusal) = cogs.settleOp(named: name) { _ in verb(cogs, argument) }
            if let refusal { throw refusal }
            return turns
        }
    }

    /// An op whose body writes through the turn's writer.
    static func write<A: Decodable>(_ type: A.Type, _ body: @escaping @MainActor @Sendable (Writer, A) -> Void) -> OpRegistry.Runner {
        { cogs, bytes, codec, name in
            let argument = try codec.decode(A.self, from: bytes)
            return cogs.settle(named: name) { c in body(c, argument) }
        }
    }
}
