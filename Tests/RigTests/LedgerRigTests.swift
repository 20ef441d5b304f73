import Cog
import CogCodec
import CogLog
import CogTesting
import LedgerRig
import Testing

@MainActor
@Suite("Ledger rig arithmetic never traps")
struct LedgerRigTests {
    /// A bank holding `Int.max` in `rich` and nothing in `empty`.
    private func richBank() -> Cogs {
        let cogs = Cogs.forTesting()
        cogs.open(account: "rich", with: Int.max)
        cogs.open(account: "empty", with: 0)
        #expect(cogs.peek(accountsCog) == ["rich", "empty"])
        return cogs
    }

    private func expectUnchanged(_ cogs: Cogs, turn: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(lastTurnName(cogs) == turn, "the op ran", sourceLocation: sourceLocation)
        #expect(writesOfLastTurn(cogs).isEmpty, "and wrote nothing", sourceLocation: sourceLocation)
        #expect(cogs.peek(accountsCog) == ["rich", "empty"], sourceLocation: sourceLocation)
        #expect(cogs.peek(balanceCogs["rich"]) == Int.max, sourceLocation: sourceLocation)
        #expect(cogs.peek(balanceCogs["empty"]) == 0, sourceLocation: sourceLocation)
        #expect(cogs.peek(totalMoneyCog) == Int.max, sourceLocation: sourceLocation)
    }

    @Test func `opening an account whose balance would overflow the bank's total changes nothing`() {
        let cogs = richBank()
        cogs.open(account: "more", with: 1)
        expectUnchanged(cogs, turn: "ledger.open")
        cogs.open(account: "more", with: Int.max)
        expectUnchanged(cogs, turn: "ledger.open")
        cogs.open(account: "negative", with: Int.min)
        expectUnchanged(cogs, turn: "ledger.open")
    }

    @Test func `a transfer with an extreme amount changes nothing, an overdraft refuses insufficient-funds`() {
        let cogs = richBank()
        for amount in [Int.max, Int.min, -1, 0] {
            cogs.transfer(from: "empty", to: "rich", amount: amount)
            expectUnchanged(cogs, turn: "ledger.transfer")
            #expect(
                cogs.lastRefusal
                    == (amount > 0 ? Refusal("insufficient-funds", "empty has 0, the transfer needs \(amount)") : nil), "\(amount)")
            cogs.transfer(from: "rich", to: "empty", amount: amount == Int.max ? Int.min : amount)
            expectUnchanged(cogs, turn: "ledger.transfer")
            #expect(cogs.lastRefusal == nil, "an amount under 1 changes nothing: no refusal")
        }
        // The whole fortune moves: the receiving balance fits, as the total does.
        cogs.transfer(from: "rich", to: "empty", amount: Int.max)
        #expect(cogs.peek(balanceCogs["rich"]) == 0)
        #expect(cogs.peek(balanceCogs["empty"]) == Int.max)
        #expect(cogs.peek(totalMoneyCog) == Int.max)
    }

    @Test func `a teller transfer with an extreme amount changes nothing`() {
        let cogs = richBank()
        for amount in [Int.max, Int.min] {
            cogs.tellerTransfer(from: "empty", to: "rich", amount: amount, receipt: "rich")
            expectUnchanged(cogs, turn: "ledger.tellerTransfer")
            #expect(cogs.lastRefusal?.code == (amount > 0 ? "insufficient-funds" : nil))
            cogs.tellerTransfer(from: "rich", to: "empty", amount: amount == Int.max ? Int.min : amount, receipt: "rich")
            expectUnchanged(cogs, turn: "ledger.tellerTransfer")
        }
    }

    @Test func `a transfer to or from an account not open refuses unknown-account`() {
        let cogs = richBank()
        cogs.transfer(from: "rich", to: "nobody", amount: 5)
        expectUnchanged(cogs, turn: "ledger.transfer")
        #expect(cogs.lastRefusal == Refusal("unknown-account", "no open account named nobody"))
        cogs.transfer(from: "ghost", to: "rich", amount: 5)
        #expect(cogs.lastRefusal == Refusal("unknown-account", "no open account named ghost"))
        // An outside name is shortened in the reason, so the reason stays within its bound.
        let long = String(repeating: "n", count: 5_000)
        cogs.transfer(from: long, to: "rich", amount: 5)
        #expect(cogs.lastRefusal?.code == "unknown-account")
        #expect(cogs.lastRefusal?.reason == "no open account named \(String(repeating: "n", count: 97))…")
        // Genuinely nothing to do stays unchanged, with no refusal.
        cogs.open(account: "rich", with: 5)
        expectUnchanged(cogs, turn: "ledger.open")
        #expect(cogs.lastRefusal == nil)
    }

    @Test func `a refused op writes no record in a durable runtime`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try DurableTurnStore(directory: folder.path)
        let cogs = Cogs.forTesting(store: store)
        cogs.open(account: "rich", with: Int.max)
        cogs.open(account: "empty", with: 0)
        #expect(store.store.lastRevision == 2)
        cogs.open(account: "more", with: 1)
        cogs.transfer(from: "empty", to: "rich", amount: Int.max)
        cogs.tellerTransfer(from: "empty", to: "rich", amount: Int.min, receipt: "rich")
        #expect(store.store.lastRevision == 2, "unchanged: no revision, no record")
        #expect(try store.store.value(name: "ledger.accounts", key: nil).map { try store.decode([String].self, from: $0) } == ["rich", "empty"])
    }

    @Test func `the total saturates instead of trapping on a log an older build wrote`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        // An older build of the rig opened accounts without checking the total:
        // its turn is written to the log as it would have written it (the
        // rig's own declarations are the only ones named `ledger.*` in this
        // process — a second declaration of a durable name would take over
        // replication for every other test).
        let older = try TurnStore(directory: folder.path, mode: .writer, createIfMissing: true)
        let encoder = CBOREncoder()
        try older.append([
            TurnDraft(
                name: "older open",
                writes: [
                    TurnWrite(name: "ledger.accounts", key: nil, value: try encoder.encode(["a", "b", "c"])),
                    TurnWrite(name: "ledger.balance", key: try encoder.encode("a"), value: try encoder.encode(Int.max)),
                    TurnWrite(name: "ledger.balance", key: try encoder.encode("b"), value: try encoder.encode(Int.max)),
                    TurnWrite(name: "ledger.balance", key: try encoder.encode("c"), value: try encoder.encode(5)),
                ])
        ])
        #expect(older.lastRevision == 1)
        older.close()

        let store = try DurableTurnStore(directory: folder.path)
        let cogs = Cogs.forTesting(store: store)
        #expect(cogs.peek(balanceCogs["b"]) == Int.max)
        #expect(cogs.peek(totalMoneyCog) == Int.max, "saturated")
        cogs.open(account: "d", with: 0)
        cogs.transfer(from: "c", to: "a", amount: 1)
        #expect(store.store.lastRevision == 1, "no op can add to a total that does not fit")
        cogs.transfer(from: "a", to: "c", amount: 5)
        #expect(cogs.peek(balanceCogs["c"]) == 10)
    }
}
