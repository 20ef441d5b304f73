import Synchronization

/// An op that can cross processes: a stable name, a `Codable` argument and a
/// writer body. In an embedded runtime (and on the leader) `perform` runs the
/// body as a turn; on a worker's replica it sends a request to the leader,
/// which runs the same body (both link the same rig).
///
/// ```swift
/// let depositOp = RemoteOp<Deposit>(name: "ledger.deposit") { c, deposit in
///   c[_balanceCogs[deposit.account]] += deposit.amount
/// }
///
/// extension CogOps {
///   func deposit(_ deposit: Deposit) { perform(depositOp, deposit) }
/// }
/// ```
///
/// - Important: the body must only read and write through `c` (it runs on
///   the leader, where nothing else of the caller exists) and must decide
///   receipts inside itself.
public struct RemoteOp<Argument: Codable & Sendable>: Sendable {
    /// The stable name requests carry.
    public let name: String
    let body: @MainActor (Writer, Argument) -> Void

    public init(name: String, _ body: @escaping @MainActor (Writer, Argument) -> Void) {
        self.name = name
        self.body = body
        RemoteOpRegistry.register(name: name, argument: Argument.self, body: body)
    }
}

/// Where a replica sends remote ops: the worker's link to its leader.
@MainActor
public protocol CogRemoteLink: AnyObject {
    /// Sends one op request; `owner` is the controller that asked (nil for
    /// the runtime itself). A scope child's request carries its instance.
    func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?)

    /// Registers a scope selector (a durable source, or a named automatic cog
    /// with a `Codable` value) with the leader,
    /// which mints the instances (DESIGN §6). `parent` is the instance the
    /// registering controller lives in (nil for a mechanism's own scopes): a
    /// nested scope's instances end with it. Nil when it cannot be tracked
    /// remotely (the scope then only has local authority).
    ///
    /// `currentEncoding` is given for a selector that is an automatic cog: it
    /// encodes the cog's value on this replica (a durable source's value is
    /// the replicated bytes).
    func registerScope(
        path: String, source: String, key: [UInt8]?, form: CogScopeForm, parent: CogInstanceSlot?,
        currentEncoding: (@MainActor () -> [UInt8]?)?
    ) -> (any CogRemoteScope)?

    /// The codec the replica uses (to encode a selector's key).
    var codec: any CogDurableStore { get }
}

/// How a scope turns its selected value into members.
public enum CogScopeForm: String, Sendable {
    case bool, optional, each
}

/// One scope registration as the worker tracks it.
@MainActor
public protocol CogRemoteScope: AnyObject {
    /// The encoded identities the selector's current (replicated) value
    /// selects, in collection order.
    func memberIdentities() -> [[UInt8]]
    /// The instance slot of a child opened for the member `identity`.
    func childSlot(identity: [UInt8]) -> CogInstanceSlot
}

/// The leader-minted instance of one scope child, filled in when the
/// leader's answer arrives; ops from the child carry it.
@MainActor
public final class CogInstanceSlot {
    /// The instance, once known.
    public var instance: UInt64?
    /// The child has retired: its requests are dropped.
    public var isRetired = false
    /// Requests waiting for `instance`.
    public var waiting: [@MainActor (UInt64) -> Void] = []

    public init(instance: UInt64? = nil) {
        self.instance = instance
    }

    /// Sets the instance and runs what waited for it.
    public func resolve(_ instance: UInt64) {
        self.instance = instance
        let waiting = self.waiting
        self.waiting = []
        if !isRetired { for send in waiting { send(instance) } }
    }
}

/// The type-erased runners of every remote op declared in this process.
public enum RemoteOpRegistry {
    /// Runs one op body for a decoded argument inside a turn.
    public typealias Runner = @MainActor (Cogs, [UInt8], any CogDurableStore, String) throws -> Void

    private static let runners = MutexBox<[String: Runner]>([:])

    static func register<Argument: Codable & Sendable>(
        name: String, argument: Argument.Type, body: @escaping @MainActor (Writer, Argument) -> Void
    ) {
        runners.withLock { table in
            table[name] = table[name] ?? { cogs, bytes, codec, turnName in
                let argument = try codec.decode(Argument.self, from: bytes)
                cogs.turn(named: turnName) { c in body(c, argument) }
            }
        }
    }

    /// The runner for `name`, if a `RemoteOp` of that name was declared in this process.
    public static func runner(named name: String) -> Runner? {
        runners.withLock { $0[name] }
    }
}

extension Cogs {
    /// Runs a remote op here, or sends it to the leader when this runtime is a replica.
    public func perform<A>(_ op: RemoteOp<A>, _ argument: A) {
        if let link = remoteLink {
            link.submit(op: op.name, argument: argument, owner: nil)
        } else {
            turn(named: op.name) { c in op.body(c, argument) }
        }
    }
}

extension MechanismController {
    /// Runs a remote op here (named under this controller and owned by it),
    /// or sends it to the leader stamped with this controller as its owner.
    /// Inert once retired.
    public func perform<A>(_ op: RemoteOp<A>, _ argument: A) {
        guard !isRetired else { return }
        if let link = graph.remoteLink {
            link.submit(op: op.name, argument: argument, owner: self)
        } else {
            turn(named: op.name) { c in op.body(c, argument) }
        }
    }
}


/// A `Mutex` in a class, so a static can hold one.
final class MutexBox<Value>: Sendable where Value: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T { try mutex.withLock { try body(&$0) } }
}
