import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A unit file as systemd reads it: its `Key=value` lines, continuation
/// lines (a trailing `\`) joined with a space, comments and section
/// headers dropped.
struct UnitFile {
    let settings: [(key: String, value: String)]

    init(_ text: String) {
        var settings: [(key: String, value: String)] = []
        var pending: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if pending == nil {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") || trimmed.hasPrefix("[") { continue }
            }
            let joined = (pending ?? "") + line
            if joined.hasSuffix("\\") {
                pending = String(joined.dropLast()) + " "
                continue
            }
            pending = nil
            guard let equals = joined.firstIndex(of: "=") else { continue }
            settings.append((String(joined[..<equals]).trimmingCharacters(in: .whitespaces), String(joined[joined.index(after: equals)...])))
        }
        self.settings = settings
    }

    /// Every value of `key`, in order.
    func values(_ key: String) -> [String] { settings.filter { $0.key == key }.map(\.value) }
}

/// The units of deploy/systemd run the way systemd runs them, without
/// systemd: a folder stands in for the host's `/` (`etc/cogd/cogd.env`,
/// `etc/cogd/keys`, `etc/cogd/peers`), the units' paths are moved into it
/// and their `cogd` is the one built beside the tests. `start` does what
/// the service manager does before `ExecStart=`: the environment from
/// `Environment=` and `EnvironmentFile=`, the credentials from
/// `LoadCredential=` (or `SetCredential=` when a file is missing) in a
/// folder named by `CREDENTIALS_DIRECTORY`, then the command with its
/// specifiers and variables replaced.
///
/// - Important: it emulates only what the units use (`%i`, `%n`, `%%`;
///   `$NAME` as a word, `${NAME}` and `$$`; quotes without backslashes) and
///   records an issue for anything else, so a unit that outgrows it fails
///   its tests instead of being run differently from systemd.
struct ServiceHost {
    let root: String
    var etc: String { root + "/etc/cogd" }
    var keys: String { etc + "/keys" }

    /// A host whose settings are deploy/systemd's cogd.env with `settings` in place of its values.
    init(root: String, settings: [String: String]) throws {
        self.root = root
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        chmod(keys, 0o700)
        var remaining = settings
        var lines: [String] = []
        for line in try String(contentsOf: ServiceHost.deployFolder.appendingPathComponent("cogd.env"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        {
            if let key = line.split(separator: "=").first.map(String.init), !line.hasPrefix("#"), let value = remaining.removeValue(forKey: key) {
                lines.append("\(key)=\(value)")
            } else {
                lines.append(line)
            }
        }
        lines += remaining.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        try (lines.joined(separator: "\n") + "\n").write(toFile: etc + "/cogd.env", atomically: true, encoding: .utf8)
    }

    static let deployFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy/systemd")

    /// `cogd keys generate NAME --out etc/cogd/keys` for each name.
    func generateKeys(_ names: [String]) throws {
        for name in names {
            let made = try runCogd(["keys", "generate", name, "--out", keys])
            #expect(made.status == 0, "\(made)")
        }
    }

    /// The peers file's line for `name`'s key in `role`.
    func peerLine(_ name: String, _ role: String) throws -> String {
        let shown = try runCogd(["keys", "show", keys + "/\(name).pub"])
        return "\(shown.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) \(role) \(name)\n"
    }

    func writePeers(_ text: String) throws { try text.write(toFile: etc + "/peers", atomically: true, encoding: .utf8) }

    /// The unit file's text as installed on this host: `/etc/cogd` moved
    /// under the root, `/usr/local/bin/cogd` the built one.
    func unit(_ template: String) throws -> UnitFile {
        let text = try String(contentsOf: ServiceHost.deployFolder.appendingPathComponent(template), encoding: .utf8)
        return UnitFile(
            text.replacingOccurrences(of: "/etc/cogd/", with: etc + "/").replacingOccurrences(of: "/usr/local/bin/cogd", with: cogdExecutable().path))
    }

    /// Starts `name` (`cogd-leader.service`, `cogd-worker@w1.service`) as
    /// systemd would start it; `through` (a program and its arguments) runs
    /// the command, to stand in for a part of systemd's sandbox.
    func start(_ name: String, through wrapper: [String] = []) throws -> CogdProcess {
        let (template, instance) = ServiceHost.template(of: name)
        let unit = try unit(template)
        let credentials = try self.credentials(of: unit, name: name, instance: instance)
        var environment = try self.environment(of: unit)
        environment["CREDENTIALS_DIRECTORY"] = credentials
        let lines = unit.values("ExecStart")
        #expect(lines.count == 1, "\(name): one ExecStart=")
        let words = wrapper + command(lines.first ?? "", name: name, instance: instance, environment: environment)
        return try CogdProcess(executable: URL(fileURLWithPath: words[0]), Array(words.dropFirst()), environment: environment)
    }

    /// Runs `name`'s `ExecReload=` (to completion) for a main process `mainPID`, as `systemctl reload` does.
    func reload(_ name: String, mainPID: Int32) throws -> (status: Int32, stdout: String, stderr: String) {
        let (template, instance) = ServiceHost.template(of: name)
        let unit = try unit(template)
        var environment = try self.environment(of: unit)
        environment["MAINPID"] = String(mainPID)
        let lines = unit.values("ExecReload")
        #expect(lines.count == 1, "\(name): one ExecReload=")
        let words = command(lines.first ?? "", name: name, instance: instance, environment: environment)
        return try runProgram(URL(fileURLWithPath: words[0]), Array(words.dropFirst()), environment: environment, timeout: .seconds(10))
    }

    /// `cogd-worker@w1.service` → (`cogd-worker@.service`, `w1`).
    static func template(of name: String) -> (template: String, instance: String?) {
        guard let at = name.firstIndex(of: "@"), let dot = name.lastIndex(of: ".") else { return (name, nil) }
        return (String(name[...at]) + String(name[dot...]), String(name[name.index(after: at)..<dot]))
    }

    /// `Environment=` lines, then the `EnvironmentFile=`, which overrides them.
    private func environment(of unit: UnitFile) throws -> [String: String] {
        var environment: [String: String] = [:]
        func take(_ assignment: String) {
            guard let equals = assignment.firstIndex(of: "=") else { return }
            environment[String(assignment[..<equals])] = String(assignment[assignment.index(after: equals)...])
        }
        for line in unit.values("Environment") { take(line) }
        for file in unit.values("EnvironmentFile") {
            for line in try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n") where !line.hasPrefix("#") {
                take(String(line))
            }
        }
        return environment
    }

    /// The unit's credentials, as systemd copies them before it starts the
    /// unit: each `LoadCredential=ID:PATH` file, or the `SetCredential=ID:VALUE`
    /// when the file is missing; files 0400.
    private func credentials(of unit: UnitFile, name: String, instance: String?) throws -> String {
        let folder = root + "/run/credentials/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var fallbacks: [String: String] = [:]
        for line in unit.values("SetCredential") {
            let parts = specifiers(line, name: name, instance: instance).split(separator: ":", maxSplits: 1).map(String.init)
            fallbacks[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        for line in unit.values("LoadCredential") {
            let parts = specifiers(line, name: name, instance: instance).split(separator: ":", maxSplits: 1).map(String.init)
            let target = folder + "/" + parts[0]
            if let data = FileManager.default.contents(atPath: parts[1]) {
                #expect(FileManager.default.createFile(atPath: target, contents: data))
            } else if let fallback = fallbacks[parts[0]] {
                #expect(FileManager.default.createFile(atPath: target, contents: Data(fallback.utf8)))
            } else {
                Issue.record("\(name): \(parts[1]) is missing and no SetCredential= stands in: systemd would not start the unit (243/CREDENTIALS)")
                continue
            }
            chmod(target, 0o400)
        }
        return folder
    }

    /// An `Exec…=` line split into words, its specifiers and variables replaced.
    private func command(_ line: String, name: String, instance: String?, environment: [String: String]) -> [String] {
        var words: [String] = []
        var word = ""
        var quote: Character?
        var inWord = false
        for character in specifiers(line, name: name, instance: instance) {
            if character == "\\" { Issue.record("\(name): a backslash in an Exec line is not emulated") }
            if let open = quote {
                if character == open { quote = nil } else { word.append(character) }
            } else if character == "'" || character == "\"" {
                quote = character
                inWord = true
            } else if character == " " || character == "\t" {
                if inWord { words.append(word) }
                word = ""
                inWord = false
            } else {
                word.append(character)
                inWord = true
            }
        }
        if inWord { words.append(word) }
        #expect(quote == nil, "\(name): an unclosed quote")
        return words.flatMap { variables($0, name: name, environment: environment) }
    }

    /// `%i`, `%n` and `%%` replaced.
    private func specifiers(_ text: String, name: String, instance: String?) -> String {
        var result = ""
        var iterator = text.makeIterator()
        while let character = iterator.next() {
            guard character == "%" else {
                result.append(character)
                continue
            }
            switch iterator.next() {
            case "%": result.append("%")
            case "i": result.append(instance ?? "")
            case "n": result.append(name)
            case let other: Issue.record("\(name): specifier %\(String(describing: other)) is not emulated")
            }
        }
        return result
    }

    /// A word with `$NAME` (the whole word: split at whitespace), `${NAME}` and `$$` replaced.
    private func variables(_ word: String, name: String, environment: [String: String]) -> [String] {
        if word.hasPrefix("$"), word.count > 1, word.dropFirst().allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) {
            return (environment[String(word.dropFirst())] ?? "").split(separator: " ").map(String.init)
        }
        var result = ""
        var rest = Substring(word)
        while let dollar = rest.firstIndex(of: "$") {
            result += rest[..<dollar]
            let after = rest[rest.index(after: dollar)...]
            if after.hasPrefix("$") {
                result += "$"
                rest = after.dropFirst()
            } else if after.hasPrefix("{"), let close = after.firstIndex(of: "}") {
                result += environment[String(after[after.index(after: after.startIndex)..<close])] ?? ""
                rest = after[after.index(after: close)...]
            } else {
                Issue.record("\(name): `$` inside a word without braces is not emulated: \(word.prefix(80))")
                result += "$"
                rest = after
            }
        }
        return [result + rest]
    }
}
