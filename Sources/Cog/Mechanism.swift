import Synchronization

/// A group of side-effect code with the services it needs, registered once at
/// assembly. Its `operate` registers what it does through its controller `m`.
///
/// ```swift
/// struct TodoMechanism: Mechanism {
///   let store: TodoStore
///   func operate(_ m: MechanismController) {
///     m.installTodos(store.load() ?? [])
///   }
/// }
/// ```
///
/// - Important: `operate` runs exactly once, synchronously, in assembly
///   order; writes made in it settle before the next mechanism operates.
@MainActor
public protocol Mechanism {
    /// Names this mechanism in history, task names and diagnostics. Defaults
    /// to the type name with a trailing `Mechanism` dropped.
    var name: String { get }

    /// Registers this mechanism's work. Called once, at assembly.
    func operate(_ m: MechanismController)
}

extension Mechanism {
    public var name: String {
        let typeName = String(describing: type(of: self))
        guard typeName != "Mechanism", typeName.hasSuffix("Mechanism") else { return typeName }
        return String(typeName.dropLast("Mechanism".count))
    }
}

extension Cogs {
    private static let assembled = Atomic<Bool>(false)
    /// The runtime `assemble` installed, while it lives.
    private static weak var installed: Cogs?

    /// Builds the app's one runtime and operates each mechanism, in order.
    ///
    /// Writes made in `operate` settle before the next mechanism operates and
    /// before `assemble` returns. Call it once, at the entry point, and keep
    /// the result.
    ///
    /// - Important: a second `assemble` in one process traps; tests use
    ///   `Cogs.forTesting()` instead.
    @discardableResult
    public static func assemble(mechanisms: [any Mechanism] = []) -> Cogs {
        assemble(durableStore: nil, mechanisms: mechanisms)
    }

    /// Builds the app's one runtime over a durable store: every settled turn
    /// is committed to `store` before its reactions run or its op returns,
    /// and durable sources start from their stored values (no replay).
    ///
    /// ```swift
    /// let store = try DurableTurnStore(directory: "data")   // module CogLog
    /// let cogs = Cogs.assemble(store: store, mechanisms: [TodoMechanism()])
    /// ```
    ///
    /// - Important: every manual source the runtime writes needs a stable
    ///   `name:` and a `Codable & Equatable & Sendable` value (box keys
    ///   `Codable & Hashable`); writing one without traps, naming it.
    @discardableResult
    public static func assemble(store: any CogDurableStore, mechanisms: [any Mechanism] = []) -> Cogs {
        assemble(durableStore: store, mechanisms: mechanisms)
    }

    private static func assemble(durableStore: (any CogDurableStore)?, mechanisms: [any Mechanism]) -> Cogs {
        guard !assembled.exchange(true, ordering: .relaxed) else {
            fatalError(TrapMessage.secondAssemble)
        }
        let cogs = Cogs(durableStore: durableStore)
        installed = cogs
        cogs.operate(mechanisms)
        return cogs
    }

    /// Seam for `CogTesting`'s install fixture: assembles the app's runtime
    /// through the real guarded `assemble`, runs `body` with it, and empties
    /// the install slot again when `body` returns or throws. Synchronous, so
    /// no other main-actor code runs while the slot is taken.
    package static func withInstalledAppForTesting<Result>(
        mechanisms: [any Mechanism], _ body: (Cogs) throws -> Result
    ) rethrows -> Result {
        let cogs = assemble(durableStore: nil, mechanisms: mechanisms)
        defer {
            installed = nil
            assembled.store(false, ordering: .relaxed)
        }
        return try body(cogs)
    }

    /// Seam for `CogTesting`: whether `cogs` is the runtime `assemble` installed.
    package static func isInstalledAppForTesting(_ cogs: Cogs) -> Bool {
        installed === cogs
    }

    /// Seam for `CogTesting`: whether the install slot is taken.
    package static var hasInstalledAppForTesting: Bool {
        assembled.load(ordering: .relaxed)
    }

    /// Operates `mechanisms` in order, failing on duplicate names.
    package func operate(_ mechanisms: [any Mechanism]) {
        var seen = Set(self.mechanisms.map(\.name))
        for mechanism in mechanisms {
            let name = mechanism.name
            guard seen.insert(name).inserted else {
                fatalError(TrapMessage.duplicateMechanism(name))
            }
            let controller = MechanismController(graph: graph, path: name, parent: nil)
            if let link = graph.remoteLink {
                let gate = CogRootGate(root: controller)
                if link.placeRoot(mechanism: name, gate: gate) { controller.rootGate = gate }
            }
            self.mechanisms.append(mechanism)
            controllers.append(controller)
            mechanism.operate(controller)
        }
    }
}

extension Cogs {
    /// A runtime over a durable store that is not the app's assembled one
    /// (the cluster leader's graph, which hosts no mechanisms).
    public static func durable(store: any CogDurableStore) -> Cogs {
        Cogs(durableStore: store)
    }

    /// A replica's runtime: in memory, changed only by applied turns, with
    /// its mechanisms operated by the worker after the first sync.
    /// Unobserved states expire after `whileObservedGrace` on `clock`, as in
    /// any runtime; a replicated source's value outlives its node (the next
    /// read gets it back), because the replica holds the only copy here.
    public static func replica(
        clock: any Clock<Duration> = ContinuousClock(), whileObservedGrace: Duration = .seconds(30)
    ) -> Cogs {
        Cogs(clock: clock, whileObservedGrace: whileObservedGrace, parksDurableSources: true)
    }

    /// Operates mechanisms on a replica after its first sync (workers only).
    public func operateReplicaMechanisms(_ mechanisms: [any Mechanism]) {
        operate(mechanisms)
    }
}
