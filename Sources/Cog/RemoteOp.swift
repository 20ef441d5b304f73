import Synchronization

/// An op that can cross processes: a stable name, a `Codable` argument and a
/// writer body. In an embedded runtime (and on the leader) `perform` runs the
/// body as a turn; on a worker's replica it sends a request to the leader,
/// which runs the same body (both link the same rig).
///
/// ```swift
/// let depositOp = RemoteOp<Deposit>(name: "ledger.deposit") { c, deposit in
///   guard deposit.amount > 0 else { try c.refuse("bad-amount", "a deposit is 1 or more, not \(deposit.amount)") }
///   c[_balanceCogs[deposit.account]] += deposit.amount
/// }
///
/// extension CogOps {
///   func deposit(_ deposit: Deposit) { perform(depositOp, deposit) }
/// }
/// ```
///
/// The body may refuse (`try c.refuse(code, reason)`, `Refusal`): then
/// nothing of its turn is kept and the requester is answered `refused`.
/// A body that never refuses needs no `try` and compiles as before. Any
/// other error a body throws refuses it too, as `bad-refusal` naming the
/// error.
///
/// - Important: the body must only read and write through `c` (it runs on
///   the leader, where nothing else of the caller exists) and must decide
///   receipts inside itself.
public struct RemoteOp<Argument: Codable & Sendable>: RemoteOpDeclaration {
    /// The stable name requests carry.
    public let name: String
    let body: @MainActor (Writer, Argument) throws -> Void

    /// Where it was declared: `fileID:line` (a duplicate name names both).
    public let site: String

    /// One line for `cogd ops`: what the op does ("" when not given).
    public let summary: String

    /// An argument to show in `cogd ops` (nil: one is made from the
    /// argument's shape, when it can be).
    public let example: Argument?

    /// An op named `name` whose body runs as one turn with the decoded
    /// argument. `summary` and `example` are what `cogd ops` shows beside
    /// the argument's shape, which it derives from `Argument`:
    ///
    /// ```swift
    /// let transferOp = RemoteOp<Transfer>(
    ///   name: "ledger.transfer", summary: "moves money between two open accounts",
    ///   example: Transfer(from: "alice", to: "bob", amount: 30)
    /// ) { c, transfer in … }
    /// ```
    public init(
        name: String, summary: String = "", example: Argument? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (Writer, Argument) throws -> Void
    ) {
        self.name = name
        self.body = body
        self.summary = summary
        self.example = example
        site = "\(fileID):\(line)"
        RemoteOpRegistry.register(name: name, site: site, argument: Argument.self, body: body)
    }

    /// The JSON shape of `Argument` (what `cogd call` sends).
    public var argumentShape: OpArgumentShape { OpArgumentShape.of(Argument.self) }

    /// `example` in the log's codec (`codec.encode`); nil without one.
    @MainActor public func encodedExample(codec: any CogDurableStore) throws -> [UInt8]? {
        try example.map { try codec.encode($0) }
    }

    /// Decodes the argument and runs the body as one turn named as the
    /// leader names it (what `OpRegistry` holds for this op).
    public var runner: OpRegistry.Runner { RemoteOpRegistry.runner(Argument.self, body: body) }
}

/// Where a replica sends remote ops: the worker's link to its leader.
@MainActor
public protocol CogRemoteLink: AnyObject {
    /// Sends one op request; `owner` is the controller that asked (nil for
    /// the runtime itself). A scope child's request carries its instance.
    func submit(op name: String, argument: any Encodable & Sendable, owner: MechanismController?)

    /// Sends one op request like `submit(op:argument:owner:)` and tells
    /// `outcome` what became of it (`OpOutcome`): the leader's reply, or
    /// the link's own rejection of a request it could not send. The link
    /// calls it at most once, on the main actor, and keeps a bounded
    /// number of them waiting. A link without answers (the default) sends
    /// the request and answers `rejected` `unavailable` at once.
    func submit(
        op name: String, argument: any Encodable & Sendable, owner: MechanismController?, outcome: @escaping @MainActor (OpOutcome) -> Void)

    /// Registers a scope selector (a durable source, or a named automatic cog
    /// with a `Codable` value) with the leader,
    /// which mints the instances (`protocol/cogwire.md` §6). `parent` is the instance the
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

    /// Whether the leader places the root of the mechanism named
    /// `mechanism` (a worker of a group, `cogwire.md` §6a): then the link
    /// registers it and tells `gate` where it is placed, and the
    /// mechanism's own reactions and tasks run only while it is placed here.
    func placeRoot(mechanism: String, gate: CogRootGate) -> Bool
}

extension CogRemoteLink {
    public func placeRoot(mechanism: String, gate: CogRootGate) -> Bool { false }

    public func submit(
        op name: String, argument: any Encodable & Sendable, owner: MechanismController?, outcome: @escaping @MainActor (OpOutcome) -> Void
    ) {
        submit(op: name, argument: argument, owner: owner)
        outcome(.rejected(code: "unavailable", detail: "sent, but this link does not report outcomes"))
    }
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
    /// Whether the leader places this selector's members on the workers of
    /// a group (`cogwire.md` §6a): then a child is open only for a member
    /// placed here.
    var isPlaced: Bool { get }
    /// Whether the member `identity` is placed on this worker now.
    func owns(_ identity: [UInt8]) -> Bool
    /// Runs `action` whenever what is placed here changes.
    func whenPlacementChanges(_ action: @escaping @MainActor () -> Void)
}

extension CogRemoteScope {
    public var isPlaced: Bool { false }
    public func owns(_ identity: [UInt8]) -> Bool { true }
    public func whenPlacementChanges(_ action: @escaping @MainActor () -> Void) {}
}

/// The leader-minted instance of one scope child, filled in when the
/// leader's answer arrives; ops from the child carry it.
@MainActor
public final class CogInstanceSlot {
    /// Something waiting for the instance: sent with it once it is known,
    /// or told that the child retired first (never both, never neither).
    public struct Waiter {
        public let send: @MainActor (UInt64) -> Void
        public let abandon: @MainActor () -> Void

        public init(send: @escaping @MainActor (UInt64) -> Void, abandon: @escaping @MainActor () -> Void) {
            self.send = send
            self.abandon = abandon
        }
    }

    /// The instance, once known.
    public var instance: UInt64?
    /// The child has retired: nothing more is sent for it, and what still
    /// waits for its instance is abandoned (told so) now.
    public var isRetired = false {
        didSet {
            guard isRetired, !oldValue else { return }
            let abandoned = waiting
            waiting = []
            for waiter in abandoned { waiter.abandon() }
        }
    }
    /// What waits for `instance`, oldest first.
    public private(set) var waiting: [Waiter] = []

    public init(instance: UInt64? = nil) {
        self.instance = instance
    }

    /// Waits for the next `resolve`: `send` runs with its instance, or
    /// `abandon` instead when the child retires first (at once when it has).
    public func wait(_ waiter: Waiter) {
        if isRetired {
            waiter.abandon()
        } else {
            waiting.append(waiter)
        }
    }

    /// Sets the instance and sends what waited for it.
    public func resolve(_ instance: UInt64) {
        self.instance = instance
        let waiting = self.waiting
        self.waiting = []
        for waiter in waiting { waiter.send(instance) }
    }
}

/// The type-erased runners of every remote op declared in this process so
/// far, by name, with where each was declared (`OpRegistry.declared()`
/// takes them into a value, refusing a name declared twice).
enum RemoteOpRegistry {
    struct Declaration {
        let site: String
        let runner: OpRegistry.Runner
    }

    private static let declarations = MutexBox<[String: [Declaration]]>([:])

    static func register<Argument: Codable & Sendable>(
        name: String, site: String, argument: Argument.Type, body: @escaping @MainActor (Writer, Argument) throws -> Void
    ) {
        declarations.withLock { table in
            // The same declaration made again (a `RemoteOp` built in a function) is one declaration.
            guard table[name]?.contains(where: { $0.site == site }) != true else { return }
            table[name, default: []].append(Declaration(site: site, runner: runner(argument, body: body)))
        }
    }

    /// Decodes an `Argument` and runs `body` with it as one settled turn;
    /// a body that refused throws its `Refusal` (it settled nothing).
    static func runner<Argument: Codable & Sendable>(
        _ argument: Argument.Type, body: @escaping @MainActor (Writer, Argument) throws -> Void
    ) -> OpRegistry.Runner {
        { cogs, bytes, codec, turnName in
            let argument = try codec.decode(Argument.self, from: bytes)
            // At once (the leader's case) the body stays on the stack; else it escapes into the graph's queue.
            let (turns, refusal) =
                cogs.settleOpAtOnce(named: turnName) { c in run(body, c, argument) }
                ?? cogs.settleOp(named: turnName) { c in run(body, c, argument) }
            if let refusal {
                // A refused turn stages nothing, so flushes nothing; only a
                // turn it queued could settle, and an op body queues none.
                precondition(turns.isEmpty, "internal inconsistency: a refused op settled \(turns.count) turns")
                throw refusal
            }
            return turns
        }
    }

    /// Runs an op body inside its turn: a refusal marks the turn refused
    /// (its writes are dropped when the body returns).
    @MainActor
    static func run<Argument>(_ body: @MainActor (Writer, Argument) throws -> Void, _ c: Writer, _ argument: Argument) {
        do {
            try body(c, argument)
        } catch let refusal as Refusal {
            c.refuseTurn(refusal)
        } catch {
            c.refuseTurn(Refusal(thrown: error))
        }
    }

    static var all: [String: [Declaration]] { declarations.withLock { $0 } }
}

/// The remote ops a leader runs, by name: a value built once at start from
/// the declarations of the rigs it links (`declared()`), so that a name
/// declared twice is an error there, naming both, instead of
/// one declaration silently winning.
public struct OpRegistry: Sendable {
    /// Runs one op body for a decoded argument as a turn and returns the
    /// durable turns it settled (none: it changed nothing). A body that
    /// refused throws its `Refusal`; an argument that does not decode
    /// throws the decoding error.
    public typealias Runner = @MainActor @Sendable (Cogs, [UInt8], any CogDurableStore, String) throws -> [CogDurableTurn]

    /// One op's runner in a struct: a dictionary or a `Result` then keeps
    /// the closure as it is called. A bare closure in a generic container
    /// is wrapped in a new heap-allocated thunk each time it is taken out,
    /// which the leader would pay on every op.
    package struct Entry: Sendable {
        package let run: Runner
    }

    private let runners: [String: Entry]

    /// The op names, sorted.
    public var names: [String] { runners.keys.sorted() }

    /// The runner of the op named `name`.
    public func runner(named name: String) -> Runner? { runners[name]?.run }

    /// The runner of the op named `name`, in its `Entry` (the leader's path: nothing allocated).
    package func entry(named name: String) -> Entry? { runners[name] }

    /// A registry of exactly these runners (tests, simulations).
    public init(runners: [String: Runner]) {
        self.runners = runners.mapValues { Entry(run: $0) }
    }

    /// The ops of `rigs` (a leader serves every rig it is given), after
    /// checking that no name — of an op, a durable source or a selector —
    /// is given to two declarations, within one rig or across them: one
    /// declaration listed by several rigs (a rig and its variants) is one.
    /// A declaration elsewhere in the process with a name the rigs list (a
    /// copy of a rig's file, say) counts too: a replica applies by name.
    ///
    /// ```swift
    /// let registry = try OpRegistry(rigs: [Todos.rig, Billing.rig])
    /// let leader = try Leader(configuration: configuration, registry: registry)
    /// ```
    public init(rigs: [CogRig]) throws(DuplicateDeclaration) {
        var ops: [String: [(site: String, runner: Runner)]] = [:]
        var sources: [String: [String]] = [:]
        var selectors: [String: [String]] = [:]
        for rig in rigs {
            for op in rig.ops where ops[op.name]?.contains(where: { $0.site == op.site }) != true {
                ops[op.name, default: []].append((op.site, op.runner))
            }
            for source in rig.durableSources { sources[source.name, default: []].append(source.site) }
            for selector in rig.selectors { selectors[selector.name, default: []].append(selector.site) }
        }
        // What else the process declared under those names (sites in declaration order after the rigs').
        let declaredOps = RemoteOpRegistry.all
        let declaredSources = DurableRegistry.sites
        let declaredSelectors = SelectorRegistry.sites
        func withDeclared(_ table: [String: [String]], _ declared: [String: [String]]) -> [String: [String]] {
            table.reduce(into: [:]) { result, entry in result[entry.key] = entry.value + (declared[entry.key] ?? []) }
        }
        let opSites = withDeclared(ops.mapValues { $0.map(\.site) }, declaredOps.mapValues { $0.map(\.site) })
        if let duplicate = DuplicateDeclaration.first(in: opSites, kind: "remote op")
            ?? DuplicateDeclaration.first(in: withDeclared(sources, declaredSources), kind: "durable source")
            ?? DuplicateDeclaration.first(in: withDeclared(selectors, declaredSelectors), kind: "selector")
        {
            throw duplicate
        }
        self.init(runners: ops.compactMapValues { $0.first?.runner })
    }

    /// Every remote op declared in this process so far (building a rig's
    /// value touches its declarations), after checking that no
    /// name — of an op, a durable source or a named selector — is declared
    /// at two places.
    public static func declared() throws(DuplicateDeclaration) -> OpRegistry {
        if let duplicate = DuplicateDeclaration.first(
            in: RemoteOpRegistry.all.mapValues { $0.map(\.site) }, kind: "remote op")
            ?? DuplicateDeclaration.first(in: DurableRegistry.sites, kind: "durable source")
            ?? DuplicateDeclaration.first(in: SelectorRegistry.sites, kind: "selector")
        {
            throw duplicate
        }
        return OpRegistry(runners: RemoteOpRegistry.all.compactMapValues { $0.first?.runner })
    }
}

/// A name given to two declarations: a start-up error naming both.
public struct DuplicateDeclaration: Error, Equatable, Sendable, CustomStringConvertible {
    /// `remote op`, `durable source` or `selector`.
    public let kind: String
    public let name: String
    /// Where each declaration is (`fileID:line`), in order.
    public let sites: [String]

    public var description: String {
        "the \(kind) name `\(name)` is declared \(sites.count) times: at \(sites.joined(separator: " and at ")); each name needs exactly one declaration"
    }

    /// The first name (in name order) with more than one site.
    static func first(in table: [String: [String]], kind: String) -> DuplicateDeclaration? {
        guard let (name, sites) = table.filter({ Set($0.value).count > 1 }).min(by: { $0.key < $1.key }) else { return nil }
        var distinct: [String] = []
        for site in sites where !distinct.contains(site) { distinct.append(site) }
        return DuplicateDeclaration(kind: kind, name: name, sites: distinct)
    }
}

extension Cogs {
    /// Runs a remote op here, or sends it to the leader when this runtime is a replica.
    public func perform<A>(_ op: RemoteOp<A>, _ argument: A) {
        if let link = remoteLink {
            link.submit(op: op.name, argument: argument, owner: nil)
        } else {
            turn(named: op.name) { c in RemoteOpRegistry.run(op.body, c, argument) }
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
            turn(named: op.name) { c in RemoteOpRegistry.run(op.body, c, argument) }
        }
    }
}


/// A `Mutex` in a class, so a static can hold one.
final class MutexBox<Value>: Sendable where Value: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T { try mutex.withLock { try body(&$0) } }
}
