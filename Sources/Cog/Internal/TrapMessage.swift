/// The wording of the traps a user's code can meet (issue 31, item 4), kept
/// in one place so each says the same facts the same way: the cog (`label`,
/// `label[key]` for a box's key, or `fileID:line` when unnamed), the path or
/// the attempt, and what to do instead — in the Cog API's own words
/// (`turn`, `automatic cog`, `assemble`, `→`).
///
/// - Important: every message is one line. Labels and names come from user
///   code, so each is escaped (`TerminalText`) as it is put into the line.
enum TrapMessage {
    /// A cog's label as a message names it: escaped, in backticks.
    static func cog(_ label: String) -> String {
        "`\(TerminalText.escaped(label))`"
    }

    /// What a running computation is called: an async cog's selector or an
    /// automatic cog's.
    @MainActor
    static func computing(_ node: Node) -> String {
        "\(node is any AsyncStatusProviding ? "async" : "automatic") cog \(cog(node.label))"
    }

    // MARK: Cycles (CYCLE-01/02/03/07, DECL-10)

    /// The closed path, `a -> b -> a`: the test seam's message and the start of
    /// the trap's, so the two cannot drift apart.
    static func cyclePath(_ path: [String]) -> String {
        "Cog dependency cycle: \(path.map(TerminalText.escaped).joined(separator: " -> "))."
    }

    static func cycle(_ path: [String]) -> String {
        cyclePath(path)
            + " An automatic cog may not read itself, directly or through others; break the loop "
            + "(keep what one of them needs in a manual source that an op or a reaction writes)"
    }

    // MARK: Turns during a computation (CYCLE-06, ASYNC-27)

    /// A turn, a `refresh` or a `discard` attempted while `node` computes.
    @MainActor
    static func turnDuringComputation(_ turn: String, computing node: Node, instead: String = "this op") -> String {
        "Cog cannot run turn \(TerminalText.quoted(turn)) while the \(computing(node)) is computing: a turn "
            + "during automatic computation would write from code that may only read Cog state. Call \(instead) "
            + "outside the computation, from event handling, an op or a reaction"
    }

    // MARK: Cold nesting (GRAPH-14)

    /// `depth` nested computations, the innermost last.
    static func coldNesting(depth: Int, limit: Int, innermost: [String]) -> String {
        let links = innermost.map(TerminalText.escaped).joined(separator: " -> ")
        return "Reading a cog needed \(depth) nested computations, past the limit of \(limit): a first read "
            + "computes each never-computed link inside the next. The innermost links were: … -> \(links). "
            + "Read the chain from its source end first, so each link is already computed when the next one "
            + "reads it, or make the chain shorter"
    }

    // MARK: Assembly (MECH-04, ONE-02)

    static func duplicateMechanism(_ name: String) -> String {
        "Two mechanisms in one runtime are both named \(TerminalText.quoted(name)). Mechanism names attribute "
            + "debug history, task names and diagnostics, so each mechanism needs its own: give one of them an "
            + "explicit `name`"
    }

    static let secondAssemble =
        "Cog is already assembled. Cogs.assemble installs the process's one runtime and runs exactly once, at "
        + "the entry point; a second would leave this process holding two graphs, with its state split between "
        + "them. Keep the runtime the first call returned and pass it on instead of assembling again; tests "
        + "take their own isolated runtime from `Cogs.forTesting(seeding:mechanisms:)` (CogTesting)"

    // MARK: Seeding (SEED-08)

    /// `seed(label)` called where `place` says (`in the body of turn "x"`, …).
    static func seedOutsideSetup(_ label: String, place: String) -> String {
        "Cog seed can run only during idle test setup, outside a turn, selector or reaction: "
            + "seed(\(TerminalText.escaped(label))) was called \(place). Seed before the code under test runs; "
            + "to change state from there, call an op"
    }

    // MARK: Writers (TURN-07)

    static func escapedWriter(_ label: String, writing: Bool) -> String {
        "This writer outlived the turn that created it, so \(writing ? "writing to" : "reading") \(cog(label)) "
            + "through it is not part of any turn. A writer is valid only while its turn's body runs, so never "
            + "store it or capture it in an escaping closure or a Task; to write now, call an op (a new turn) "
            + "and use the writer it passes to the body"
    }
}
