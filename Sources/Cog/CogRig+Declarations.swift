/// A declaration a rig can list among its durable sources: a manual cog or
/// box (or its read-only projection) with a `name:` and `Codable`,
/// `Equatable`, `Sendable` values (keys `Codable`).
public protocol CogRigDurableSource: Sendable {
    /// Its stable name and site (a listing that cannot take part makes
    /// `CogRig.init` trap, saying why).
    var durableSourceDeclaration: CogRig.Declaration { get }
}

/// A declaration a rig can list among its selectors: a named automatic cog
/// or box with `Codable & Equatable` values (keys `Codable`), which the
/// leader evaluates for workers' scopes.
public protocol CogRigSelector: Sendable {
    /// Its stable name and site (a listing that cannot take part makes
    /// `CogRig.init` trap, saying why).
    var selectorDeclaration: CogRig.Declaration { get }
}

/// An op a rig can list: a stable name, where it is declared, and how the
/// leader runs it (`RemoteOp` is one).
public protocol RemoteOpDeclaration: Sendable {
    /// The stable name requests carry.
    var name: String { get }
    /// Where it was declared: `fileID:line` (a duplicate name names both).
    var site: String { get }
    /// Decodes the argument and runs the body as one turn on the leader.
    var runner: OpRegistry.Runner { get }
    /// One line for `cogd ops`: what the op does ("" when not given).
    var summary: String { get }
    /// The JSON shape of the argument (`unknown` when not derived).
    var argumentShape: OpArgumentShape { get }
    /// An example argument in the log's codec, for `cogd ops` (nil: none given).
    @MainActor func encodedExample(codec: any CogDurableStore) throws -> [UInt8]?
}

extension RemoteOpDeclaration {
    /// No summary: declarations made before `cogd ops` existed.
    public var summary: String { "" }
    /// Not derived: declarations made before `cogd ops` existed.
    public var argumentShape: OpArgumentShape { .unknown }
    /// No example: declarations made before `cogd ops` existed.
    @MainActor public func encodedExample(codec: any CogDurableStore) throws -> [UInt8]? { nil }
}

extension CogRig.Declaration {
    /// `descriptor` (state `key`) as a listed durable source.
    static func durableSource(_ descriptor: Descriptor, key: StateKey) -> CogRig.Declaration {
        let name = descriptor.stableName ?? ""
        let problem: String? =
            if key != .none {
                "`\(descriptor.label(for: key))` (declared at \(descriptor.site)) is one member of a box; list the box itself"
            } else if descriptor.stableName == nil {
                "the durable source declared at \(descriptor.site) has no stable name; give the declaration a `name:`"
            } else if (descriptor as? DurableListing)?.isDurable != true {
                "`\(descriptor.label)` (declared at \(descriptor.site)) is listed as a durable source, but it is not a manual "
                    + "source whose value is Codable & Equatable & Sendable (keys Codable & Hashable)"
            } else {
                nil
            }
        let shapes = (descriptor as? DurableListing)?.durableShapes
        return CogRig.Declaration(
            name: name, site: descriptor.site, isKeyed: descriptor.isKeyed, valueShape: shapes?.value ?? .unknown, keyShape: shapes?.key,
            problem: problem)
    }

    /// `descriptor` (state `key`) as a listed selector.
    static func selector(_ descriptor: Descriptor, key: StateKey) -> CogRig.Declaration {
        let name = descriptor.stableName ?? ""
        let problem: String? =
            if key != .none {
                "`\(descriptor.label(for: key))` (declared at \(descriptor.site)) is one member of a box; list the box itself"
            } else if descriptor.stableName == nil {
                "the selector declared at \(descriptor.site) has no stable name; give the declaration a `name:`"
            } else if (descriptor as? SelectorListing)?.isEncodableSelector != true {
                "`\(descriptor.label)` (declared at \(descriptor.site)) is listed as a selector, but it is not an automatic "
                    + "cog or box whose value is Codable & Equatable (keys Codable)"
            } else {
                nil
            }
        let shapes = (descriptor as? SelectorListing)?.selectorShapes
        return CogRig.Declaration(
            name: name, site: descriptor.site, isKeyed: descriptor.isKeyed, valueShape: shapes?.value ?? .unknown, keyShape: shapes?.key,
            problem: problem)
    }
}

/// A descriptor that can say whether it is durable.
protocol DurableListing {
    var isDurable: Bool { get }
    /// The shapes of its value and key types (nil: not durable).
    var durableShapes: (value: OpArgumentShape, key: OpArgumentShape?)? { get }
}

extension ManualDescriptor: DurableListing {
    var isDurable: Bool { durable != nil }
    var durableShapes: (value: OpArgumentShape, key: OpArgumentShape?)? {
        durable.map { ($0.valueShape(), $0.keyShape?()) }
    }
}

/// A descriptor that can say whether the leader can evaluate it by name.
protocol SelectorListing {
    var isEncodableSelector: Bool { get }
    /// The shapes of its value and key types (nil: not encodable).
    var selectorShapes: (value: OpArgumentShape, key: OpArgumentShape?)? { get }
}

extension ComputedDescriptor: SelectorListing {
    var isEncodableSelector: Bool { coding != nil }
    var selectorShapes: (value: OpArgumentShape, key: OpArgumentShape?)? {
        coding.map { ($0.valueShape(), $0.keyShape?()) }
    }
}

extension Cog.Manual: CogRigDurableSource {
    public var durableSourceDeclaration: CogRig.Declaration { .durableSource(ref.descriptor, key: ref.key) }
}

extension Cog.Projection: CogRigDurableSource {
    public var durableSourceDeclaration: CogRig.Declaration { .durableSource(ref.descriptor, key: ref.key) }
}

extension CogBox.Manual: CogRigDurableSource {
    public var durableSourceDeclaration: CogRig.Declaration { .durableSource(descriptor, key: .none) }
}

extension CogBox.Projection: CogRigDurableSource {
    public var durableSourceDeclaration: CogRig.Declaration { .durableSource(descriptor, key: .none) }
}

extension Cog: CogRigSelector {
    public var selectorDeclaration: CogRig.Declaration { .selector(ref.descriptor, key: ref.key) }
}

extension CogBox: CogRigSelector {
    public var selectorDeclaration: CogRig.Declaration { .selector(descriptor, key: .none) }
}
