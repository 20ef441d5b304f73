/// An app as a distributed runtime runs it: a name, the durable sources its
/// ops write, its remote ops, the named automatic cogs its scopes select
/// (which the leader evaluates), and the mechanisms a worker runs. A leader
/// serves the ops of every rig it is given; a worker runs one rig's
/// mechanisms (`cogd worker --rig NAME`).
///
/// Write the rig in three files (`+Model`, `+Cogs`, `+Mechanisms`: `docs/api-guide.md`)
/// and list its declarations in one value, next to them:
///
/// ```swift
/// public enum Todos {
///   public static let rig = CogRig(
///     name: "todos",
///     summary: "a todo list",
///     durableSources: [_todoIDsCog, _todoTitleCogs],
///     ops: [addTodoOp, removeTodoOp],
///     selectors: [overdueTodoIDsCog],
///     mechanisms: { host in [ReminderMechanism(log: host.log)] })
/// }
/// ```
///
/// Then `CogdCommandLine.main(rigs: [Todos.rig])` is an executable with
/// every subcommand `cogd` has, running that rig.
///
/// - Important: building the value touches every declaration it lists, which
///   is what registers their names in the process: a replica applies a
///   turn's writes by durable name, and a write to a name no declaration in
///   the process has is skipped. List every durable source an op of the rig
///   writes. Listing a declaration that cannot take part (no `name:`, a
///   value or key type that is not `Codable`) traps at once, naming it.
public struct CogRig: Sendable {
    /// What `--rig` selects: unique among the rigs one executable offers.
    public let name: String
    /// One line for help: what the rig does.
    public let summary: String
    /// The version of the rig's durable types, which the author bumps when
    /// a stored value's encoding changes in a way old code cannot read.
    public let schemaVersion: Int
    /// The named durable sources (manual cogs and boxes), in listing order.
    public let durableSources: [Declaration]
    /// The remote ops, in listing order.
    public let ops: [any RemoteOpDeclaration]
    /// The named automatic cogs and boxes with `Codable` values that the
    /// rig's scopes select: the leader evaluates them after each turn
    /// (`docs/concepts.md`, "Mechanisms and scopes").
    public let selectors: [Declaration]
    /// The mechanisms a worker running this rig assembles, in order. It may
    /// throw (a setting it cannot read, `Settings.Problem`): the worker
    /// stops at start-up with the error's message.
    public let mechanisms: @MainActor @Sendable (Host) throws -> [any Mechanism]

    /// A rig of these declarations. Traps, naming the declaration and the
    /// fix, when one listed cannot take part (see `CogRig`).
    public init(
        name: String, summary: String = "", schemaVersion: Int = 1,
        durableSources: [any CogRigDurableSource] = [], ops: [any RemoteOpDeclaration] = [],
        selectors: [any CogRigSelector] = [],
        mechanisms: @escaping @MainActor @Sendable (Host) throws -> [any Mechanism] = { _ in [] }
    ) {
        let sources = durableSources.map(\.durableSourceDeclaration)
        let selected = selectors.map(\.selectorDeclaration)
        for declaration in sources + selected {
            if let problem = declaration.problem { fatalError("rig `\(name)`: \(problem)") }
        }
        self.init(
            name: name, summary: summary, schemaVersion: schemaVersion, sources: sources, ops: ops, selectors: selected,
            mechanisms: mechanisms)
    }

    private init(
        name: String, summary: String, schemaVersion: Int, sources: [Declaration], ops: [any RemoteOpDeclaration],
        selectors: [Declaration], mechanisms: @escaping @MainActor @Sendable (Host) throws -> [any Mechanism]
    ) {
        self.name = name
        self.summary = summary
        self.schemaVersion = schemaVersion
        self.durableSources = sources
        self.ops = ops
        self.selectors = selectors
        self.mechanisms = mechanisms
    }

    /// The same declarations under another name, with other mechanisms: a
    /// variant of one app that a worker chooses by name (the Ledger rig's
    /// `ledger-greeter` adds a greeter scope to `ledger`'s audit).
    public func variant(
        named name: String, summary: String, mechanisms: @escaping @MainActor @Sendable (Host) throws -> [any Mechanism]
    ) -> CogRig {
        CogRig(
            name: name, summary: summary, schemaVersion: schemaVersion, sources: durableSources, ops: ops,
            selectors: selectors, mechanisms: mechanisms)
    }

    /// A rig that runs no mechanisms and declares what all of `rigs` declare
    /// (each declaration once): a pure replica of their state.
    public static func replica(of rigs: [CogRig], name: String = "replica") -> CogRig {
        func unique<T>(_ items: [T], by key: (T) -> String) -> [T] {
            var seen = Set<String>()
            return items.filter { seen.insert(key($0)).inserted }
        }
        return CogRig(
            name: name, summary: "a pure replica of every rig's state; runs no mechanisms",
            schemaVersion: rigs.map(\.schemaVersion).max() ?? 1,
            sources: unique(rigs.flatMap(\.durableSources)) { "\($0.name) \($0.site)" },
            ops: unique(rigs.flatMap(\.ops)) { "\($0.name) \($0.site)" },
            selectors: unique(rigs.flatMap(\.selectors)) { "\($0.name) \($0.site)" },
            mechanisms: { _ in [] })
    }

    /// The op names, in listing order.
    public var opNames: [String] { ops.map(\.name) }

    /// One named declaration a rig lists: its stable name and where it is.
    public struct Declaration: Sendable, Hashable, CustomStringConvertible {
        /// The stable name (`name:`).
        public let name: String
        /// Where it was declared: `fileID:line`.
        public let site: String
        /// A box (a value per key) rather than one value: what `cogd get`
        /// needs to tell a key with no value from a key given to a keyless source.
        public let isKeyed: Bool
        /// The shape of its values, derived from the value type as `cogd
        /// ops` derives an op's argument (`unknown` when not derived): what
        /// the rig's fingerprint compares (`protocol/cogwire.md` §7).
        public let valueShape: OpArgumentShape
        /// The shape of its keys, for a box (nil for one value).
        public let keyShape: OpArgumentShape?
        /// Why it cannot be listed (nil: it can).
        let problem: String?

        init(
            name: String, site: String, isKeyed: Bool = false, valueShape: OpArgumentShape = .unknown, keyShape: OpArgumentShape? = nil,
            problem: String? = nil
        ) {
            self.name = name
            self.site = site
            self.isKeyed = isKeyed
            self.valueShape = valueShape
            self.keyShape = keyShape
            self.problem = problem
        }

        public var description: String { "\(name) (\(site))" }
    }

    /// What a worker gives the rig's mechanisms when it assembles them: its
    /// name, its log, the clock to wait on and the app's settings.
    ///
    /// ```swift
    /// mechanisms: { host in
    ///   let holdFor = try host.settings.duration("hold-seconds") ?? .seconds(600)
    ///   return [SeatHoldMechanism(clock: host.clock, holdFor: holdFor)]
    /// }
    /// ```
    ///
    /// A test builds one with a `TestClock` and the settings it needs, and
    /// drives the mechanisms' waits with `advance(by:)`:
    /// `CogRig.Host(workerName: "w", clock: clock, settings: try CogRig.Settings(["hold-seconds": "5"])) { _ in }`.
    public struct Host: Sendable {
        /// The worker's name (`--name`).
        public let workerName: String
        /// Writes one line to the worker's log, control characters
        /// escaped (`TerminalText`): what a rig reports for operators and
        /// tests to read (`ledger total 100`). `cogd worker` logs it as the
        /// event `rig` (standard error, with the time and level, or as JSON).
        public let log: @Sendable (String) -> Void
        /// The clock mechanisms wait on (`try await host.clock.sleep(for: .seconds(5))`):
        /// the real one (`ContinuousClock`) in `cogd worker`, a `TestClock`
        /// in a test, so a wait is driven, never slept through.
        public let clock: any Clock<Duration>
        /// The app's settings (`cogd worker --set KEY=VALUE`, `--settings FILE`).
        public let settings: Settings

        /// A host; `clock` and `settings` default to the real clock and no settings.
        public init(
            workerName: String, clock: any Clock<Duration> = ContinuousClock(), settings: Settings = Settings(),
            log: @escaping @Sendable (String) -> Void
        ) {
            self.workerName = workerName
            self.log = log
            self.clock = clock
            self.settings = settings
        }
    }
}
