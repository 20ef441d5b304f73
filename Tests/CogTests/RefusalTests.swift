import Cog
import CogTesting
import Testing

private let _stockCogs = CogBox<Int, String>.Manual(name: "refusals.stock") { 0 }
private let _soldCog = Cog<Int>.Manual(name: "refusals.sold") { 0 }

private struct Sale: Codable, Sendable {
    var item: String
    var count: Int
}

/// Sells from stock, or refuses `sold-out` after writing (the writes must vanish).
private let sellOp = RemoteOp<Sale>(name: "refusals.sell") { c, sale in
    c[_soldCog] += sale.count
    let stock = c[_stockCogs[sale.item]]
    guard stock >= sale.count else { try c.refuse("sold-out", "\(sale.item) has \(stock) left, the sale needs \(sale.count)") }
    c[_stockCogs[sale.item]] = stock - sale.count
}

/// Restocks: an op written before refusals, with no `try`, compiles as it did.
private let restockOp = RemoteOp<Sale>(name: "refusals.restock") { c, sale in
    c[_stockCogs[sale.item]] += sale.count
}

/// Restocks and then sells in one turn: the nested sale's refusal refuses the whole turn.
private let restockAndSellOp = RemoteOp<Sale>(name: "refusals.restockAndSell") { c, sale in
    c[_stockCogs[sale.item]] += 1
    try c.refuse("sold-out", "refused by the outer op after its restock")
}

private struct NotARefusal: Error {}

/// Throws an error of its own, not a `Refusal`.
private let throwingOp = RemoteOp<Int>(name: "refusals.throwing") { c, _ in
    c[_soldCog] = 99
    throw NotARefusal()
}

extension CogOps {
    fileprivate func sell(_ item: String, _ count: Int) { perform(sellOp, Sale(item: item, count: count)) }
    fileprivate func restock(_ item: String, _ count: Int) { perform(restockOp, Sale(item: item, count: count)) }
}

@MainActor
@Suite("Refusals in process")
struct RefusalTests {
    @Test func `a refused op keeps none of its writes and a test sees the refusal`() {
        let cogs = Cogs.forTesting()
        cogs.restock("tea", 2)
        #expect(cogs.lastRefusal == nil)
        cogs.sell("tea", 3)
        #expect(cogs.lastRefusal == Refusal("sold-out", "tea has 2 left, the sale needs 3"))
        #expect(cogs.peek(_soldCog) == 0, "the write before the refusal is discarded")
        #expect(cogs.peek(_stockCogs["tea"]) == 2)
        #expect(cogs.debugHistory.turnNames.last == "refusals.sell", "the turn ran")
        #expect(!cogs.debugHistory.entries.contains { $0.event == .write && $0.name.hasPrefix("refusals.sold") })
        cogs.sell("tea", 2)
        #expect(cogs.lastRefusal == nil, "the next op did not refuse")
        #expect(cogs.peek(_soldCog) == 2 && cogs.peek(_stockCogs["tea"]) == 0)
    }

    @Test func `a refusal that ends a nested op refuses the turn it joined`() {
        let cogs = Cogs.forTesting()
        cogs.turn(named: "outer") { c in
            c[_soldCog] = 5
            cogs.perform(restockAndSellOp, Sale(item: "tea", count: 1))
            c[_soldCog] = 6
        }
        #expect(cogs.lastRefusal?.code == "sold-out")
        #expect(cogs.peek(_soldCog) == 0 && cogs.peek(_stockCogs["tea"]) == 0, "nothing of the turn kept")
    }

    @Test func `an error other than a refusal refuses bad-refusal, naming it`() {
        let cogs = Cogs.forTesting()
        cogs.perform(throwingOp, 1)
        #expect(cogs.lastRefusal?.code == "bad-refusal")
        #expect(cogs.lastRefusal?.reason.hasPrefix(#"the op threw "NotARefusal()", which is not a Refusal"#) == true, "\(String(describing: cogs.lastRefusal))")
        #expect(cogs.peek(_soldCog) == 0)
    }

    @Test func `a refusal's code is checked: empty, long or odd characters become bad-refusal`() {
        #expect(Refusal("sold-out", "none left") == Refusal("sold-out", "none left"))
        #expect(Refusal("v1.2-x", "").code == "v1.2-x")
        for code in ["", "Sold-Out", "sold out", "sold_out", "é", String(repeating: "a", count: 65), "a\nb"] {
            let refusal = Refusal(code, "why")
            #expect(refusal.code == "bad-refusal", "\(code)")
            #expect(!refusal.reason.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(refusal.reason)")
        }
        #expect(Refusal("x", String(repeating: "a", count: 513)).code == "bad-refusal")
        #expect(Refusal("x", String(repeating: "a", count: 512)).code == "x")
        #expect(Refusal("x", "line\none").description == #"refused x: line\none"#, "printed escaped")
        #expect(Refusal.shortened("αβγδ", toBytes: 6) == "α…")
        #expect(Refusal.shortened("abc", toBytes: 3) == "abc")
    }
}
