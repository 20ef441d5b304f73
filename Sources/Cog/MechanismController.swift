/// A mechanism's (or a scope's) link to the graph: reactions, tasks and
/// scopes registered through it end with it, and ops called through it are
/// named under its path (`Weather.checkWeather()`) and owned by it.
///
/// ```swift
/// func operate(_ m: MechanismController) {
///   m.watch(isNiceOutsideCog, initial: .skip, name: "niceAlert") { was, nice in
///     if nice && !was { notifier.alert("It is nice outside!") }
///   }
/// }
/// ```
///
/// - Important: it is a lifetime token owned by its scope. Long-lived work
///   captures it weakly. Once its scope ends it is *retired*: `turn` and
///   every op, `run`, `watch`, `status.watch`, `scope` and `discard` are
///   inert; `task` returns an already-cancelled task; `peek`, `status.peek`
///   and `refresh` trap (use `ifLive`).
@MainActor
public final class MechanismController: CogOps, TurnOwner {
    enum Retirement {
        case scopeEnded
        case runtimeEnded
    }

    let graph: Graph
    /// The composed path: `Weather`, `Weather.session`.
    public let path: String
    private(set) var retirement: Retirement?
    var reactions: [ReactionNode] = []
    var tasks: [Task<Void, any Error>] = []
    /// `performAndWait` calls waiting for an answer (ended on retirement).
    var outcomeWaiters: [OutcomeWaiter] = []
    var children: [MechanismController] = []
    weak var parent: MechanismController?
    /// On a worker's replica: the leader-minted instance of this scope child.
    public internal(set) var instanceSlot: CogInstanceSlot?

    /// The instance this controller's work belongs to: its own, or that of the
    /// nearest enclosing scope child that has one (a scope the leader does not
    /// track lives inside its parent's instance).
    public var owningSlot: CogInstanceSlot? { instanceSlot ?? parent?.owningSlot ?? rootGate?.requestSlot }

    /// The instance a scope declared here is nested in (nil for a
    /// mechanism's own scopes, its root placed or not).
    var scopeParentSlot: CogInstanceSlot? { instanceSlot ?? parent?.scopeParentSlot }

    /// On a worker of a group: the placement of this mechanism's root
    /// (`CogRootGate`); its own reactions, tasks and local scopes run in the
    /// gate's lifetimes. Nil elsewhere.
    public internal(set) var rootGate: CogRootGate?

    init(graph: Graph, path: String, parent: MechanismController?) {
        self.graph = graph
        self.path = path
        self.parent = parent
    }

    /// Whether this controller's scope has ended.
    public var isRetired: Bool { retirement != nil }

    var admitsTurns: Bool { retirement == nil }

    // MARK: CogOps

    public func turn(named name: String, _ body: @escaping (Writer) -> Void) {
        guard retirement == nil else { return }
        graph.turn(named: "\(path).\(name)", owner: self, body)
    }

    public func peek<V>(_ cog: Cog<V>) -> V {
        checkLive("peek")
        return graph.peek(cog.ref, as: V.self)
    }

    public func peek<V>(_ cog: Cog<V>.Manual) -> V {
        checkLive("peek")
        return graph.peek(cog.ref, as: V.self)
    }

    public func peek<V>(_ cog: Cog<V>.Projection) -> V {
        checkLive("peek")
        return graph.peek(cog.ref, as: V.self)
    }

    public func peek<V: Sendable>(_ cog: Cog<V>.Async) -> V {
        checkLive("peek")
        let value = graph.readAsyncValue(cog.ref, as: V.self, trackedBy: nil)
        graph.runDeferredWorkIfIdle()
        return value
    }

    @discardableResult
    public func refresh<V: Sendable>(_ cog: Cog<V>.Async) -> CogRefresh<V> {
        checkLive("refresh")
        return graph.refresh(cog.ref, as: V.self)
    }

    public func discard<V>(_ cog: Cog<V>.Manual) {
        guard retirement == nil else { return }
        graph.discard(cog.ref)
    }

    public func discard<V>(_ cog: Cog<V>) {
        guard retirement == nil else { return }
        graph.discard(cog.ref)
    }

    /// Runs `body` with this controller while it is live; `nil` once retired.
    ///
    /// It checks once, at the call, and reserves nothing: a turn inside the
    /// body can retire this very scope, after which its primitives obey
    /// retirement. Re-check after every `await`.
    @discardableResult
    public func ifLive<Result>(_ body: (MechanismController) -> Result) -> Result? {
        guard retirement == nil else { return nil }
        return body(self)
    }

    func checkLive(_ operation: String) {
        switch retirement {
        case nil:
            return
        case .scopeEnded:
            fatalError(
                "\(operation) through the retired scope `\(path)`: its scope has ended. A late completion that "
                    + "must read wraps the read in `s.ifLive { $0.\(operation)(…) }`, which returns nil once retired")
        case .runtimeEnded:
            fatalError(
                "\(operation) through `\(path)` after its runtime was torn down; nothing can read a dead runtime "
                    + "(`ifLive` returns nil here)")
        }
    }

    // MARK: Names

    /// A scope's path: `path.name`, or `path.fileID:line` when unnamed.
    func compose(_ name: String?, fileID: StaticString, line: UInt) -> String {
        "\(path).\(name ?? "\(fileID):\(line)")"
    }

    /// A reaction's label in history and diagnostics: `path.name`, or just
    /// `fileID:line` for an unnamed one (`m.run` has no `name:`), as Cog
    /// labels them.
    func reactionLabel(_ name: String?, fileID: StaticString, line: UInt) -> String {
        guard let name else { return "\(fileID):\(line)" }
        return "\(path).\(name)"
    }

    // MARK: Retirement

    /// Retires this controller and everything under it, in two passes: mark
    /// the whole subtree, then tear it down (two-pass retirement).
    func retire(_ reason: Retirement = .scopeEnded) {
        guard retirement == nil else { return }
        markRetired(reason)
        tearDown()
    }

    func markRetired(_ reason: Retirement) {
        guard retirement == nil else { return }
        retirement = reason
        instanceSlot?.isRetired = true
        cancelOutcomeWaiters()
        for child in children { child.markRetired(reason) }
    }

    func tearDown() {
        let children = self.children
        self.children = []
        for child in children { child.tearDown() }
        let reactions = self.reactions
        self.reactions = []
        for reaction in reactions { graph.unregister(reaction) }
        let tasks = self.tasks
        self.tasks = []
        for task in tasks { task.cancel() }
    }

    /// Opens a scope child under this controller.
    func openChild(path: String) -> MechanismController {
        let child = MechanismController(graph: graph, path: path, parent: self)
        children.append(child)
        return child
    }

    /// Retires scope children, in the order given, and forgets them.
    func retireChildren(_ departing: [MechanismController]) {
        for child in departing { child.retire() }
        var remaining: [MechanismController] = []
        remaining.reserveCapacity(children.count)
        for child in children where child.retirement == nil { remaining.append(child) }
        children = remaining
    }
}
