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

/// A mechanism's (or scope's) link to the graph. Ops called through it are
/// named under its path (`Weather.checkWeather`) and owned by it.
///
/// - Important: it is a lifetime token. Long-lived work captures it weakly.
@MainActor
public final class MechanismController: CogOps, TurnOwner {
    let graph: Graph
    /// The composed path: `Weather`, `Weather.session`.
    public let path: String
    private(set) var isRetired = false

    init(graph: Graph, path: String) {
        self.graph = graph
        self.path = path
    }

    var admitsTurns: Bool { !isRetired }

    public func turn(named name: String, _ body: @escaping (Writer) -> Void) {
        guard !isRetired else { return }
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
        guard !isRetired else { return }
        graph.discard(cog.ref)
    }

    public func discard<V>(_ cog: Cog<V>) {
        guard !isRetired else { return }
        graph.discard(cog.ref)
    }

    /// Runs `body` with this controller while it is live; `nil` once retired.
    /// It checks once, at the call, and reserves nothing.
    @discardableResult
    public func ifLive<Result>(_ body: (MechanismController) -> Result) -> Result? {
        guard !isRetired else { return nil }
        return body(self)
    }

    private func checkLive(_ operation: String) {
        guard isRetired else { return }
        fatalError(
            "\(operation) through the retired scope `\(path)`; its scope has ended. Wrap late reads in "
                + "`s.ifLive { $0.peek(…) }`, which returns nil once the scope is retired")
    }

    func retire() { isRetired = true }
}

extension Cogs {
    private static let assembled = Atomic<Bool>(false)

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
        guard !assembled.exchange(true, ordering: .relaxed) else {
            fatalError("Cogs.assemble was called a second time; assemble once at the entry point and keep the runtime (tests use Cogs.forTesting())")
        }
        let cogs = Cogs()
        cogs.operate(mechanisms)
        return cogs
    }

    /// Operates `mechanisms` in order, failing on duplicate names.
    package func operate(_ mechanisms: [any Mechanism]) {
        var seen = Set(self.mechanisms.map(\.name))
        for mechanism in mechanisms {
            let name = mechanism.name
            guard seen.insert(name).inserted else {
                fatalError("two mechanisms are named `\(name)`; give one of them an explicit `name`")
            }
            let controller = MechanismController(graph: graph, path: name)
            self.mechanisms.append(mechanism)
            controllers.append(controller)
            mechanism.operate(controller)
        }
    }
}
