import Foundation
import Testing

@testable import CogLab
@testable import CogdCommandLine

/// Each subcommand's help page against its parser: the options are found
/// by asking the parser, not by reading the page, so an option added to
/// the parser and not to the page fails here.
@Suite("Every help page lists what its subcommand accepts")
struct HelpPageTests {
    /// Arguments that reach each subcommand's options: one list per action
    /// (`log stats`, `bench cluster`), with the positionals it needs first.
    static let invocations: [String: [[String]]] = [
        "leader": [["leader"]],
        "worker": [["worker"]],
        "tail": [["tail"]],
        "log": [["log", "verify"], ["log", "stats"], ["log", "upgrade"], ["log", "soak"]],
        "call": [["call", "ledger.open", "{}"]],
        "status": [["status"]],
        "get": [["get", "ledger.balance"]],
        "ops": [["ops"]],
        "keys": [["keys", "generate", "k"], ["keys", "show", "k.pub"]],
        "drill": [["drill"]],
        "sim": [["sim"]],
        "bench": [["bench", "graph"], ["bench", "log"], ["bench", "cluster"], ["bench", "retention"]],
        "version": [["version"]],
        "help": [["help"]],
    ]

    /// Every `"--option"` literal in the command line's and the lab's
    /// sources: what any parser could accept (and some text that only
    /// mentions an option).
    static func candidateOptions() throws -> Set<String> {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let pattern = try NSRegularExpression(pattern: #""(--[a-z][a-z0-9-]*)""#)
        var options = Set<String>()
        for sources in ["Sources/CogdCommandLine", "Sources/CogLab"].map({ root.appendingPathComponent($0) }) {
            for file in FileManager.default.enumerator(atPath: sources.path)?.compactMap({ $0 as? String }) ?? [] where file.hasSuffix(".swift") {
                let text = try String(contentsOfFile: sources.appendingPathComponent(file).path, encoding: .utf8)
                for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    if let range = Range(match.range(at: 1), in: text) { options.insert(String(text[range])) }
                }
            }
        }
        // Everywhere, and said once on the top-level page.
        options.subtract(["--help", "--version"])
        return options
    }

    /// Whether the parser takes `option` after `prefix`: it parses, or
    /// fails over the option's value, not over the option itself.
    static func accepts(_ prefix: [String], _ option: String) -> Bool {
        do {
            if let extra = CogLab.program.extras.first(where: { $0.name == prefix.first }) {
                _ = try extra.parse(Array(prefix.dropFirst()) + [option])
            } else {
                _ = try Command.parse(prefix + [option])
            }
            return true
        } catch {
            return !["unknown option", "unexpected argument", "unknown subcommand"].contains { error.message.hasPrefix($0) }
        }
    }

    /// The lines of `option`'s entry on `page`: its own line (indented,
    /// starting with the option) and the lines indented deeper under it.
    static func entry(of option: String, on page: String) -> [String]? {
        let lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
        guard
            let start = lines.firstIndex(where: { line in
                let trimmed = line.drop { $0 == " " }
                return indent(line) > 0 && trimmed.hasPrefix(option) && (trimmed.count == option.count || trimmed.dropFirst(option.count).first == " ")
            })
        else { return nil }
        var entry = [lines[start]]
        for line in lines[(start + 1)...] {
            guard !line.isEmpty, indent(line) > indent(lines[start]) else { break }
            entry.append(line)
        }
        return entry
    }

    @Test func `cogd help X lists every option X accepts with its default, gives an example, and never points at itself`() throws {
        let candidates = try HelpPageTests.candidateOptions()
        var acceptedAnywhere = Set<String>()
        let lab = CogLab.program.extras.filter { !$0.hidden }.map(\.name)
        #expect(Set(Command.subcommands.map(\.name) + lab) == Set(HelpPageTests.invocations.keys), "every subcommand has invocations here")
        for subcommand in Command.subcommands.map(\.name) + lab {
            // The lab's own subcommands are cogd-lab's; the runtime's, cogd's.
            let run = lab.contains(subcommand) ? runCogdLab : runCogd
            let help = try run(["help", subcommand], .seconds(60), [:])
            #expect(help.status == 0 && help.stderr.isEmpty, "\(subcommand): \(help)")
            let page = help.stdout
            let accepted = candidates.filter { option in
                HelpPageTests.invocations[subcommand, default: []].contains { HelpPageTests.accepts($0, option) }
            }
            acceptedAnywhere.formUnion(accepted)
            for option in accepted.sorted() {
                guard let entry = HelpPageTests.entry(of: option, on: page) else {
                    Issue.record("cogd help \(subcommand) does not list \(option), which `cogd \(subcommand)` accepts:\n\(page)")
                    continue
                }
                #expect(entry.joined().contains("default"), "cogd help \(subcommand): \(option) gives its default: \(entry)")
            }
            #expect(
                page.split(separator: "\n").contains { $0.drop { $0 == " " }.hasPrefix("Example:") },
                "cogd help \(subcommand) has an Example: line:\n\(page)")
            #expect(!page.contains("\(subcommand) --help") && !page.contains("help \(subcommand)"), "cogd help \(subcommand) points at itself:\n\(page)")
            let dashed = try run([subcommand, "--help"], .seconds(60), [:])
            #expect(dashed.status == 0 && dashed.stdout == page, "cogd \(subcommand) --help is cogd help \(subcommand)")
        }
        // The scan found the parsers' options (a broken scan would make every page pass).
        for option in ["--curve-secret", "--peers", "--insecure", "--max-record-bytes", "--connect", "--leader-key", "--batch", "--break"] {
            #expect(acceptedAnywhere.contains(option), "\(option) is accepted somewhere")
        }
    }

    @Test func `the leader's page lists CURVE and every leader option, and tail's lists --connect with its keys`() throws {
        let leader = try runCogd(["leader", "--help"]).stdout
        for option in ["--curve-secret FILE", "--peers FILE", "--insecure", "--spin-wait", "--commit-cpu", "--accept-data-loss"] {
            #expect(leader.contains(option), "leader --help lists \(option)")
        }
        // The trap op is the lab's: only cogd-lab's leader offers it.
        #expect(!leader.contains("--trap-op"), "\(leader)")
        #expect(try runCogdLab(["leader", "--help"]).stdout.contains("--trap-op               also serve ledger.trap, an op whose body stops the leader\n"))
        let tail = try runCogd(["tail", "--help"]).stdout
        for option in ["--connect ENDPOINT", "--key FILE", "--leader-key FILE"] { #expect(tail.contains(option), "tail --help lists \(option)") }
        let top = try runCogd(["help"])
        #expect(top.status == 0 && top.stdout.contains("  get ") && top.stdout.contains("  ops "), "\(top.stdout)")
    }
}
