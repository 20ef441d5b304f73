import Cog
import Testing

/// The settings a worker takes from outside (`--set KEY=VALUE`, `--settings
/// FILE`): bounded, checked, and every problem a message naming the key or line.
@Suite("Host settings are checked and bounded")
struct HostSettingsTests {
    typealias Settings = CogRig.Settings

    /// The problem `body` throws (nil: none; another error fails the test).
    func problem(_ body: () throws -> Void) -> Settings.Problem? {
        do {
            try body()
            return nil
        } catch let problem as Settings.Problem {
            return problem
        } catch {
            Issue.record("not a settings problem: \(error)")
            return nil
        }
    }

    @Test func `a settings file of KEY=VALUE lines with comments and blanks gives its values`() throws {
        let file = "# box office\n\nhold-seconds = 5\n  mail.from=tickets@example.com\r\nEMPTY=\nurl=http://x/?a=b\n"
        let settings = try Settings(fileBytes: Array(file.utf8))
        #expect(settings.values == ["hold-seconds": "5", "mail.from": "tickets@example.com", "EMPTY": "", "url": "http://x/?a=b"])
        #expect(settings.keys == ["EMPTY", "hold-seconds", "mail.from", "url"])
        #expect(settings["hold-seconds"] == "5")
        #expect(settings["missing"] == nil)
        #expect("\(settings)" == "EMPTY, hold-seconds, mail.from, url")
    }

    @Test func `--set wins over the file for a key both give`() throws {
        let file = try Settings(fileBytes: Array("hold-seconds=5\nvenue=hall\n".utf8))
        let merged = try file.merging(Settings(assignments: ["hold-seconds=7", "mail.from=a@b"]))
        #expect(merged.values == ["hold-seconds": "7", "venue": "hall", "mail.from": "a@b"])
    }

    @Test func `a bad key, a long value, a duplicate, a line that is not KEY=VALUE and too many settings are refused by name`() {
        #expect(
            problem { _ = try Settings(assignments: ["bad key=1"]) }?.message
                == "setting key 'bad key' is not allowed: a key is 1 to 64 of A-Z a-z 0-9 _ . -")
        #expect(problem { _ = try Settings(assignments: ["=1"]) }?.code == .badKey)
        #expect(problem { _ = try Settings(assignments: [String(repeating: "k", count: 65) + "=1"]) }?.code == .badKey)
        #expect(problem { _ = try Settings(assignments: [String(repeating: "k", count: 64) + "=1"]) } == nil)
        #expect(
            problem { _ = try Settings(assignments: ["k=" + String(repeating: "v", count: 4_097)]) }?.message
                == "setting 'k' is 4097 bytes long; a value is at most 4096 bytes")
        #expect(problem { _ = try Settings(assignments: ["k=" + String(repeating: "v", count: 4_096)]) } == nil)
        #expect(problem { _ = try Settings(assignments: ["k=1", "k=2"]) }?.message == "setting 'k' is given twice")
        #expect(problem { _ = try Settings(assignments: ["k"]) }?.message == "'k' is not KEY=VALUE")
        #expect(problem { _ = try Settings(assignments: (0...256).map { "k\($0)=1" }) }?.message == "more than 256 settings")
        #expect(problem { _ = try Settings(assignments: (0..<256).map { "k\($0)=1" }) } == nil)
        #expect(
            problem { _ = try Settings(fileBytes: Array("k=1\n# c\nk=2\n".utf8)) }?.message
                == "line 3: setting 'k' is given twice (first on line 1)")
        #expect(problem { _ = try Settings(fileBytes: Array("ok=1\noops\n".utf8)) }?.message == "line 2: 'oops' is not KEY=VALUE")
        #expect(
            problem { _ = try Settings(fileBytes: Array("a b=1\n".utf8)) }?.message
                == "line 1: setting key 'a b' is not allowed: a key is 1 to 64 of A-Z a-z 0-9 _ . -")
        #expect(
            problem { _ = try Settings(fileBytes: [UInt8](repeating: UInt8(ascii: "#"), count: 65_537)) }?.message
                == "the file is 65537 bytes; a settings file is at most 65536 bytes")
        #expect(problem { _ = try Settings(fileBytes: [0x6B, 0x3D, 0xFF]) }?.message == "the file is not UTF-8 text")
        #expect(
            problem { _ = try Settings(["bad\u{1B}key": "1"]) }?.message
                == "setting key 'bad\\u{1B}key' is not allowed: a key is 1 to 64 of A-Z a-z 0-9 _ . -")
    }

    @Test func `the typed readers read durations, whole numbers and booleans, and name the key of a value they cannot read`() throws {
        let settings = try Settings([
            "a": "5", "b": "0.25", "c": "250ms", "d": "10m", "e": "2h", "f": "1d", "g": "366d", "n": "42", "t": "true", "x": "false",
        ])
        #expect(try settings.duration("a") == .seconds(5))
        #expect(try settings.duration("b") == .milliseconds(250))
        #expect(try settings.duration("c") == .milliseconds(250))
        #expect(try settings.duration("d") == .seconds(600))
        #expect(try settings.duration("e") == .seconds(7_200))
        #expect(try settings.duration("f") == .seconds(86_400))
        #expect(try settings.duration("g") == .seconds(366 * 86_400))
        #expect(try settings.duration("missing") == nil)
        #expect(try settings.int("n") == 42)
        #expect(try settings.int("n", in: 1...100) == 42)
        #expect(try settings.bool("t") == true)
        #expect(try settings.bool("x") == false)
        for bad in ["-1", "1e3", "nan", "inf", "367d", "", ".", "1.2.3", "5 s", "5w", "99999999999999999999999999999999999"] {
            let problem = problem { _ = try Settings(["hold-seconds": bad]).duration("hold-seconds") }
            #expect(problem?.code == .badValue, "\(bad)")
            #expect(problem?.key == "hold-seconds", "\(bad)")
        }
        #expect(
            problem { _ = try settings.int("a", in: 10...20) }?.message == "setting 'a' is '5', not a whole number from 10 to 20")
        #expect(problem { _ = try settings.int("b") }?.message == "setting 'b' is '0.25', not a whole number")
        #expect(problem { _ = try settings.bool("a") }?.message == "setting 'a' is '5', not true or false")
    }
}
