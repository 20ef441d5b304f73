import CogCodec
import CogProtocol
import Foundation
import Testing

/// `CogdCode`: one type for wire errors, rejections and the leader's events,
/// each said by its text, and the documents listing exactly the codes this
/// build knows, each in the table of where it is said.
@Suite("codes")
struct CodeTests {
    @Test("every code this build knows reads back from its text, and a text it does not know is kept as it came")
    func texts() throws {
        let texts = CogdCode.known.map(\.text)
        #expect(Set(texts).count == texts.count, "no two codes share a text")
        for code in CogdCode.known {
            #expect(CogdCode(code.text) == code)
            #expect(CogdCode(known: code.text) == code)
            #expect(!code.uses.isEmpty, "\(code) is said somewhere")
        }
        #expect(CogdCode("quota-exceeded") == .other("quota-exceeded"))
        #expect(CogdCode(known: "quota-exceeded") == nil)
        #expect(CogdCode.other("quota-exceeded").uses.isEmpty)
        #expect(CogdCode("retired-scope") == .retiredScope)
    }

    @Test("an error with a code this build does not know decodes, and is sent on as the same text")
    func unknownCodeOnTheWire() throws {
        let error = WireError(code: .other("quota-exceeded"), message: "later")
        let frame = WireMessage.error(error).encoded()
        #expect(try CBORValue.parse(frame)["body"]?["code"]?.textValue == "quota-exceeded")
        #expect(try WireMessage.decode(frame) == .error(error))
        let reply = OpReply(request: RequestID(worker: "w1", sequence: 3), outcome: .rejected(code: .other("quota-exceeded"), detail: "later"))
        #expect(OpReply(scanning: reply.frame()) == reply)
        #expect(reply.outcome.reason == "quota-exceeded: later")
    }

    @Test("a leader's status carries its counts by each code's text, and reads them back by code")
    func statusCounts() {
        let status = LeaderStatus(
            epoch: 1, revision: 2, workers: [], errorCounts: [.retiredScope: 3, .sendDropped: 1, .other("later"): 2], openScopeInstances: [])
        #expect(status.errorCounts == ["retired-scope": 3, "send-dropped": 1, "later": 2])
        #expect(status.count(.retiredScope) == 3)
        #expect(status.count(.crashedLeader) == 0)
    }

    @Test("protocol/ lists each code in the table of where it is said: wire errors, rejections, events")
    func documented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let cogwire = try String(contentsOf: root.appendingPathComponent("protocol/cogwire.md"), encoding: .utf8)
        let metrics = try String(contentsOf: root.appendingPathComponent("protocol/metrics.md"), encoding: .utf8)
        let wireErrors = try codes(in: cogwire, from: "## 2. Frames", to: "## 3. Messages")
        let rejections = try codes(in: cogwire, from: "### Rejection codes", to: "### Refusals")
        let events = try codes(in: metrics, from: "### Event codes", to: "## 3a.")
        func known(_ use: CogdCode.Uses) -> Set<String> { Set(CogdCode.known.filter { $0.uses.contains(use) }.map(\.text)) }
        #expect(wireErrors == known(.wireError))
        #expect(rejections == known(.rejection))
        #expect(events == known(.event))
    }

    /// The codes in the first column of the tables between two headings
    /// (a cell may name several: `` `unknown-key`, `not-your-name` ``).
    private func codes(in text: String, from start: String, to end: String) throws -> Set<String> {
        let section = try #require(text.range(of: start).flatMap { begin in text.range(of: end, range: begin.upperBound..<text.endIndex).map { begin.upperBound..<$0.lowerBound } })
        var found: Set<String> = []
        for line in text[section].split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            for part in cell.split(separator: ",") {
                let name = part.trimmingCharacters(in: .whitespaces)
                if name.hasPrefix("`"), name.hasSuffix("`") { found.insert(String(name.dropFirst().dropLast())) }
            }
        }
        return found
    }
}
