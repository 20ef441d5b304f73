import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The repository's root folder (this file is Tests/CogdTests/…).
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// `Examples/TodoApp`, the template a user copies: a separate package that
/// depends on this one by path. It is built into a folder of its own under
/// the root's `.build`, so a second build is incremental (`deploy/test.sh`
/// builds it before the tests run; this suite's build is then a no-op).
enum TemplatePackage {
    static let folder = repositoryRoot.appendingPathComponent("Examples/TodoApp")
    static let scratch = repositoryRoot.appendingPathComponent(".build/examples/TodoApp")

    /// The command `deploy/test.sh` runs too.
    static let buildArguments = [
        "swift", "build", "--package-path", folder.path, "--scratch-path", scratch.path, "--product", "todo",
    ]

    /// The built `todo` executable (after `build()`).
    static var todo: URL { scratch.appendingPathComponent("debug/todo") }
}

/// The template package: built by `swift build` and run as a leader, two
/// workers, `call`, `status` and `tail` on loopback — what its README shows.
@Suite("the template package Examples/TodoApp", .timeLimit(.minutes(10)))
struct TemplatePackageTests {
    @Test func `the template builds, and a leader, an estimating worker and a replica run the todo list`() throws {
        // 1. It builds (incremental after deploy/test.sh; a cold build takes about a minute here).
        let build = try runBounded(
            URL(fileURLWithPath: "/usr/bin/env"), TemplatePackage.buildArguments, timeout: .seconds(480))
        try #require(build.status == 0, "swift build of Examples/TodoApp failed:\n\(build.output)")
        try #require(FileManager.default.isExecutableFile(atPath: TemplatePackage.todo.path))
        let todo = TemplatePackage.todo

        // 2. A leader and two workers: w1 runs the rig's mechanisms, w2 is a pure replica.
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try CogdProcess(
            executable: todo, ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
        defer { leader.stop() }
        let started = leader.waitForLine { $0.contains("todo leader: data") }
        try #require(started?.contains("rig todo, epoch 1, revision 0") == true, "\(leader.lines)")

        let w1 = try CogdProcess(executable: todo, ["worker", "--leader", ports.requests, "--name", "w1", "--set", "estimate-delay=250ms"])
        defer { w1.stop() }
        let w2 = try CogdProcess(executable: todo, ["worker", "--leader", ports.requests, "--name", "w2", "--rig", "replica"])
        defer { w2.stop() }
        #expect(w1.waitForLine { $0.hasSuffix("rig todo, group todo, settings estimate-delay") } != nil, "\(w1.lines)")
        // A value the rig cannot read stops a worker at start-up, naming the key.
        let badSetting = try runProgram(todo, ["worker", "--leader", ports.requests, "--name", "w9", "--set", "estimate-delay=soon"], timeout: .seconds(20))
        #expect(badSetting.status == 1, "\(badSetting)")
        #expect(badSetting.stderr.contains("setting 'estimate-delay' is 'soon', not a duration"), "\(badSetting.stderr)")
        #expect(w1.waitForLine { $0.hasSuffix("synced at revision 0, epoch 1") } != nil, "\(w1.lines)")
        #expect(w2.waitForLine { $0.hasSuffix("synced at revision 0, epoch 1") } != nil, "\(w2.lines)")
        // (Once the leader has placed the mechanism's root on w1, §6a: a reply after the sync.)
        #expect(w1.waitForLine { $0.hasSuffix(": todos open: none") } != nil, "the report runs on w1: \(w1.lines)")

        // 3. An op from the shell: applied at revision 1; w1's report sees the new todo.
        let add = try runBounded(
            todo, ["call", "todos.add", #"{"id": "milk", "title": "Buy milk"}"#, "--leader", ports.requests])
        #expect(add.status == 0 && add.output.hasPrefix("applied revision 1 "), "\(add)")
        #expect(w1.waitForLine { $0.hasSuffix(": todos open: milk") } != nil, "\(w1.lines)")

        // 4. The scope's effect: w1's estimator (scope(each:) over the open
        // todos) accepts an estimate with the todo as receipt, at revision 2.
        #expect(w1.waitForLine { $0.hasSuffix(": todos left: 10 minutes") } != nil, "the estimate arrived: \(w1.lines)")

        // 5. Completing the todo retires its scope; the report shows nothing left.
        let complete = try runBounded(todo, ["call", "todos.complete", #""milk""#, "--leader", ports.requests])
        #expect(complete.status == 0 && complete.output.hasPrefix("applied revision 3 "), "\(complete)")
        #expect(w1.waitForLine { $0.hasSuffix(": todos left: 0 minutes") } != nil, "\(w1.lines)")
        // A todo that is not there is refused: exit 3, the code and the reason, nothing kept (no revision).
        let unknown = try runBounded(todo, ["call", "todos.complete", #""bread""#, "--leader", ports.requests])
        #expect(unknown.status == 3 && unknown.output.hasPrefix("refused unknown-todo: no todo has the id bread (request call-"), "\(unknown)")

        // 6. Both workers converged: each applied revision 3 and its state digest agrees with the leader's.
        #expect(w1.waitForLine { $0.hasSuffix("w1: applied 3") } != nil, "\(w1.lines)")
        #expect(w2.waitForLine { $0.hasSuffix("w2: applied 3") } != nil, "\(w2.lines)")
        var status: (status: Int32, output: String) = (0, "")
        let converged = try waitUntil {
            status = try runBounded(todo, ["status", "--leader", ports.requests])
            return status.output.contains("w1: applied 3, lag 0") && status.output.contains("w2: applied 3, lag 0")
        }
        #expect(converged, "\(status.output)")
        #expect(status.output.contains("revision  3") && status.output.components(separatedBy: "digest agrees").count == 3, "\(status.output)")
        #expect(status.output.contains("errors    none"), "\(status.output)")

        // 7. `todo tail` prints the turns: the op, the scope's receipt-checked op (with its worker and scope instance), the completion.
        let tail = try runBounded(todo, ["tail", "--data", folder.path])
        #expect(tail.status == 0, "\(tail)")
        let lines = tail.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 9, "three turns, their four writes, and the estimator's instance opening and retiring: \(tail.output)")
        #expect(lines.contains { $0.hasPrefix(#"    opens  TodoEstimator.estimator["milk"] #"#) && $0.hasSuffix(" on w1") }, "\(tail.output)")
        #expect(lines.first?.hasPrefix("#1  ") == true && lines.first?.contains("  todos.add  (worker call-") == true, "\(tail.output)")
        #expect(lines.contains(#"    todos.ids = ["milk"]"#) && lines.contains(#"    todos.title["milk"] = "Buy milk""#), "\(tail.output)")
        #expect(
            lines.contains { $0.hasPrefix("#2  ") && $0.contains(#"  TodoEstimator.estimator.todos.acceptEstimate  (worker w1, scope TodoEstimator.estimator["milk"] #"#) },
            "\(tail.output)")
        #expect(lines.contains(#"    todos.estimate["milk"] = 10"#), "\(tail.output)")
        #expect(lines.contains { $0.hasPrefix("#3  ") && $0.contains("  todos.complete  ") }, "\(tail.output)")
        #expect(lines.contains(#"    todos.isCompleted["milk"] = true"#), "\(tail.output)")
        #expect(lines.last?.hasPrefix(#"    retires TodoEstimator.estimator["milk"] #"#) == true, "completing it retires its estimator: \(tail.output)")

        // 8. Everything stops cleanly on SIGINT, the leader last. w1 says goodbye as
        // it stops: its mechanisms' roots retire at once, in revision 4, which the replica applies.
        for (name, worker, revision) in [("w1", w1, 3), ("w2", w2, 4)] {
            if revision == 4 { #expect(worker.waitForLine { $0.hasSuffix(" todo worker w2: applied 4") } != nil, "\(worker.lines)") }
            worker.interrupt()
            #expect(worker.waitForLine { $0.hasSuffix("worker \(name): stopped at revision \(revision)") } != nil, "\(worker.lines)")
            waitForExit(worker.process, timeout: .seconds(10))
            #expect(worker.process.terminationStatus == 0)
        }
        #expect(leader.waitForLine { $0.hasSuffix(" todo leader: worker w1 left (said goodbye as it stopped); its scope instances retire") } != nil)
        leader.interrupt()
        #expect(leader.waitForLine { $0.hasSuffix(" todo leader: stopped at revision 4") } != nil, "\(leader.lines)")
        waitForExit(leader.process, timeout: .seconds(10))
        #expect(leader.process.terminationStatus == 0)
    }

    /// The fenced output block that follows the `sh` block holding `command` in the template's README.
    static func readmeBlock(after command: String) throws -> [String] {
        let text = try String(contentsOf: TemplatePackage.folder.appendingPathComponent("README.md"), encoding: .utf8)
        let commandBlock = try #require(text.range(of: "```sh\n\(command)\n```\n\n```\n"), "README has no block after `\(command)`")
        let rest = text[commandBlock.upperBound...]
        let end = try #require(rest.range(of: "```\n"))
        return rest[..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    /// What differs from run to run, made the same: times, call names, uptimes, heard-ago, commit timings, placement.
    static func normalized(_ line: String) -> String {
        var line = line
        let rules: [(String, String)] = [
            (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"#, "TIME"),
            (#"call-[0-9a-f]{8}-(…|[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"#, "call-ID"),
            (#"heard [0-9.]+s ago"#, "heard Ns ago"),
            (#", up .*$"#, ", up T"),
            (#"^commits .*$"#, "commits …"),
            (#"^placement .*$"#, "placement …"),
        ]
        for (pattern, replacement) in rules {
            line = line.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return line
    }

    @Test func `the README's ops, status, tail and report blocks are what the template prints for its steps`() throws {
        let build = try runBounded(URL(fileURLWithPath: "/usr/bin/env"), TemplatePackage.buildArguments, timeout: .seconds(480))
        try #require(build.status == 0, "swift build of Examples/TodoApp failed:\n\(build.output)")
        let todo = TemplatePackage.todo
        // `todo ops`: each op with its summary, argument and example, as the README shows them.
        let ops = try runProgram(todo, ["ops"], timeout: .seconds(30))
        #expect(ops.status == 0 && ops.stderr.isEmpty, "\(ops)")
        let printedOps = ops.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // (Each op ends with a blank line, the last one too.)
        let opsLines = Array(printedOps.reversed().drop { $0.isEmpty }.reversed())
        #expect(opsLines == (try Self.readmeBlock(after: ".build/debug/todo ops")), "\(ops.stdout)")
        #expect(printedOps.filter { $0.hasPrefix("    example:  todo call todos.") }.count == 4, "\(ops.stdout)")
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        // The README's steps, on free ports: a leader, w1 with the rig's mechanisms (the default estimate delay), w2 a replica.
        let leader = try CogdProcess(executable: todo, ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns])
        defer { leader.stop() }
        try #require(leader.waitForLine { $0.contains("todo leader: data") } != nil, "\(leader.lines)")
        let w1 = try CogdProcess(executable: todo, ["worker", "--name", "w1", "--leader", ports.requests])
        defer { w1.stop() }
        let w2 = try CogdProcess(executable: todo, ["worker", "--name", "w2", "--rig", "replica", "--leader", ports.requests])
        defer { w2.stop() }
        #expect(w1.waitForLine { $0.hasSuffix(": todos left: 0 minutes") } != nil, "\(w1.lines)")
        #expect(w2.waitForLine { $0.hasSuffix("synced at revision 0, epoch 1") } != nil, "\(w2.lines)")
        for argument in [#"{"id": "milk", "title": "Buy milk"}"#, #"{"id": "taxes", "title": "File the tax return"}"#] {
            #expect(try runBounded(todo, ["call", "todos.add", argument, "--leader", ports.requests]).status == 0)
        }
        // Revisions 3 and 4 are w1's estimates, before milk is completed.
        #expect(w1.waitForLine { $0.hasSuffix(": todos left: 30 minutes") } != nil, "\(w1.lines)")
        let complete = try runBounded(todo, ["call", "todos.complete", #""milk""#, "--leader", ports.requests])
        #expect(complete.output.hasPrefix("applied revision 5 "), "\(complete)")
        let bread = try runBounded(todo, ["call", "todos.complete", #""bread""#, "--leader", ports.requests])
        #expect(bread.status == 3)
        #expect(w1.waitForLine { $0.hasSuffix(": todos left: 20 minutes") } != nil, "\(w1.lines)")

        var status: (status: Int32, output: String) = (0, "")
        _ = try waitUntil {
            status = try runBounded(todo, ["status", "--leader", ports.requests])
            return status.output.contains("w1: applied 5, lag 0") && status.output.contains("w2: applied 5, lag 0")
        }
        let printedStatus = status.output.split(separator: "\n").map { Self.normalized(String($0)) }
        #expect(printedStatus == (try Self.readmeBlock(after: ".build/debug/todo status")).map(Self.normalized), "\(status.output)")

        let tail = try runBounded(todo, ["tail", "--data", folder.path])
        let printedTail = tail.output.split(separator: "\n").map { Self.normalized(String($0)) }
        #expect(printedTail == (try Self.readmeBlock(after: ".build/debug/todo tail")).map(Self.normalized), "\(tail.output)")

        // w1's report, in the README without the log's prefix, comes in that order.
        let text = try String(contentsOf: TemplatePackage.folder.appendingPathComponent("README.md"), encoding: .utf8)
        let reportStart = try #require(text.range(of: "w1's report follows along:\n\n```\n"))
        let report = text[reportStart.upperBound...].prefix { $0 != "`" }.split(separator: "\n").map(String.init)
        let said = w1.lines.compactMap { line in line.range(of: "todo worker w1: ").map { String(line[$0.upperBound...]) } }.filter { $0.hasPrefix("todos ") }
        #expect(Array(said.drop { $0 != report.first }.prefix(report.count)) == report, "\(w1.lines)")
    }
}
