import Synchronization

/// The identity of one declaration: every `Cog…`/`CogBox…` value made by one
/// initializer call shares one descriptor. Descriptors are immutable and made
/// once (file-scope `let`s), so a runtime can index its node tables by `id`.
///
/// - Important: subclasses hold only `@MainActor` closures and immutable
///   values, which is what makes the `@unchecked Sendable` honest.
class Descriptor: @unchecked Sendable {
    private static let nextID = Atomic<Int>(0)

    /// Dense, process-wide number used as an index into per-runtime tables.
    let id: Int
    /// `name:` when given, otherwise `fileID:line`; used in history and errors.
    let label: String
    /// Whether the declaration is a box (`CogBox…`), whose states carry a key.
    let isKeyed: Bool

    init(name: String?, fileID: StaticString, line: UInt, isKeyed: Bool) {
        self.id = Descriptor.nextID.add(1, ordering: .relaxed).oldValue
        self.label = name ?? "\(fileID):\(line)"
        self.isKeyed = isKeyed
    }

    /// Makes the runtime node for one state of this declaration.
    @MainActor func makeNode(key: AnyHashable?, graph: Graph) -> Node {
        fatalError("internal inconsistency: \(type(of: self)) does not make nodes")
    }

    /// The label of one state: `label` or `label[key]`.
    func label(for key: AnyHashable?) -> String {
        guard let key else { return label }
        return "\(label)[\(key.base)]"
    }
}

/// Identifies one state in any runtime: a declaration plus, for boxes, a key.
/// Building one allocates nothing for small keys (`AnyHashable` stores up to
/// three words inline).
struct StateRef: Hashable, @unchecked Sendable {
    let descriptor: Descriptor
    let key: AnyHashable?

    static func == (lhs: StateRef, rhs: StateRef) -> Bool {
        lhs.descriptor === rhs.descriptor && lhs.key == rhs.key
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(descriptor.id)
        hasher.combine(key)
    }

    var label: String { descriptor.label(for: key) }
}

/// How a manual source is kept: `.app` (the default) lives as long as its
/// runtime; `.whileObserved(resetToInitial: true)` may be released by
/// `discard`, after which the next read starts again from the initial closure.
public enum ManualCogLifetime: Sendable, Equatable {
    case app
    case whileObserved(resetToInitial: Bool, grace: Duration? = nil)

    /// Rejects `.whileObserved(resetToInitial: false)`, which Cog does not
    /// support: a released manual value can only come back as its initial one.
    func validated(label: String) -> ManualCogLifetime {
        if case .whileObserved(let reset, _) = self, !reset {
            fatalError(
                "`\(label)` asks for .whileObserved(resetToInitial: false); a released manual "
                    + "source restarts from its initial value, so write "
                    + ".whileObserved(resetToInitial: true) or keep the default .app")
        }
        return self
    }

    var allowsRelease: Bool {
        if case .whileObserved = self { return true }
        return false
    }
}

final class ManualDescriptor<Value>: Descriptor, @unchecked Sendable {
    let initial: @MainActor (AnyHashable?) -> Value
    let equals: (@MainActor (Value, Value) -> Bool)?
    let lifetime: ManualCogLifetime

    init(
        initial: @escaping @MainActor (AnyHashable?) -> Value,
        equals: (@MainActor (Value, Value) -> Bool)?,
        lifetime: ManualCogLifetime,
        name: String?, fileID: StaticString, line: UInt, isKeyed: Bool
    ) {
        self.initial = initial
        self.equals = equals
        self.lifetime = lifetime
        super.init(name: name, fileID: fileID, line: line, isKeyed: isKeyed)
        _ = lifetime.validated(label: label)
    }

    @MainActor override func makeNode(key: AnyHashable?, graph: Graph) -> Node {
        let node = ManualNode<Value>(descriptor: self, key: key)
        node.storage = initial(key)
        return node
    }
}

final class ComputedDescriptor<Value>: Descriptor, @unchecked Sendable {
    let selector: @MainActor (Reader<Value>, AnyHashable?) -> Value
    let equals: (@MainActor (Value, Value) -> Bool)?

    init(
        selector: @escaping @MainActor (Reader<Value>, AnyHashable?) -> Value,
        equals: (@MainActor (Value, Value) -> Bool)?,
        name: String?, fileID: StaticString, line: UInt, isKeyed: Bool
    ) {
        self.selector = selector
        self.equals = equals
        super.init(name: name, fileID: fileID, line: line, isKeyed: isKeyed)
    }

    @MainActor override func makeNode(key: AnyHashable?, graph: Graph) -> Node {
        ComputedNode<Value>(descriptor: self, key: key)
    }
}

/// Makes a `Key`-typed closure callable with the erased key a state carries.
@inline(__always)
func unwrapKey<Key>(_ key: AnyHashable?, as: Key.Type) -> Key {
    guard let key, let typed = key.base as? Key else {
        fatalError("internal inconsistency: a keyed state has no \(Key.self) key")
    }
    return typed
}
