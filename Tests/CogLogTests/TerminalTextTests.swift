import Cog
import CogCodec
import CogLog
import Foundation
import Testing

@Suite("Text from peers and files is escaped before it reaches a terminal")
struct TerminalTextTests {
    @Test func `control characters, DEL, C1 controls and bidi controls print as escapes on one line`() {
        #expect(TerminalText.escaped("x\n2026-01-01  fake") == #"x\n2026-01-01  fake"#)
        #expect(TerminalText.escaped("w\u{1B}[2J") == #"w\u{1B}[2J"#)
        #expect(TerminalText.escaped("a\r\tb\0c") == #"a\r\tb\u{0}c"#)
        #expect(TerminalText.escaped("del\u{7F} csi\u{9B}2J nel\u{85}") == #"del\u{7F} csi\u{9B}2J nel\u{85}"#)
        #expect(TerminalText.escaped("abc\u{202E}fed\u{2066}\u{2069}") == #"abc\u{202E}fed\u{2066}\u{2069}"#)
        #expect(TerminalText.escaped("line\u{2028}sep") == #"line\u{2028}sep"#)
    }

    @Test func `a backslash is escaped so the output reads back unambiguously`() {
        #expect(TerminalText.escaped(#"a\nb"#) == #"a\\nb"#)
        #expect(TerminalText.escaped("a\nb") == #"a\nb"#)
        #expect(TerminalText.escaped(#"a\nb"#) != TerminalText.escaped("a\nb"))
    }

    @Test func `printable text, accents and emoji come back as they are`() {
        for text in ["ledger.transfer", "Trails.trailScreen.load", "café", "山道", "👩‍👩‍👧", "quote \" stays"] {
            #expect(TerminalText.escaped(text) == text)
        }
    }

    @Test func `a quoted value escapes its quotes too`() {
        #expect(TerminalText.quoted(#"say "hi"\"#) == #""say \"hi\"\\""#)
        #expect(TerminalText.quoted("x\u{1B}") == #""x\u{1B}""#)
    }

    @Test func `JSON text escapes the same characters and stays valid JSON`() throws {
        let text = "n\u{1B}[2J\u{7F}\u{9B}\u{202E}\u{2028}\n\"\\é"
        let quoted = CBORText.quoted(text)
        #expect(quoted == #""n\u001b[2J\u007f\u009b\u202e\u2028\n\"\\é""#)
        #expect(!quoted.unicodeScalars.contains { TerminalText.isUnsafe($0) })
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(quoted)]".utf8)) as? [String]
        #expect(decoded == [text])
    }

    @Test func `a record's display lines escape its names and text values`() {
        let record = TurnRecord(
            revision: 3, epoch: 1, time: Date(timeIntervalSince1970: 0), name: "x\n#4  fake",
            origin: TurnOrigin(worker: "w\u{1B}[2J", request: RequestID(worker: "w\u{1B}[2J", sequence: 9)),
            writes: [TurnWrite(name: "n\u{202E}", key: nil, value: try! CBOREncoder().encode(["a\u{1B}b": "c\u{85}"]))])
        #expect(
            record.displayLines == [
                #"#3  1970-01-01T00:00:00.000Z  x\n#4  fake  (worker w\u{1B}[2J, request w\u{1B}[2J#9, epoch 1)"#,
                #"    n\u{202E} = {"a\u{1B}b": "c\u{85}"}"#,
            ])
    }
}
