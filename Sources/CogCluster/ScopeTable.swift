import CogLog
import CogWire

/// The leader's scope instances (DESIGN §6): for every selector a worker
/// registered, the members its durable source selects now, each with the
/// instance the leader minted when it arrived. After each turn the table
/// reconciles the registrations whose source the turn wrote, with the seeds'
/// transition rules: only settled values count, departures retire first (in
/// opening order), arrivals open (in collection order), and a member that
/// leaves and comes back later gets a new instance.
///
/// Members are compared by their deterministic encoding, so the leader needs
/// no Swift types: a Bool source is one member when `true`; an optional is
/// one member unless `null`; an `each:` source's members are its elements.
///
/// A nested selector names its parent instance: it lives only while that
/// instance does, so when the parent retires, the nested registration is
/// dropped and its instances retire in the same turn (after the parent, in
/// opening order); registered under a dead parent, it selects nothing.
struct ScopeTable {
    struct Registration {
        let spec: ScopeRegistration
        /// Open members in opening order.
        var open: [(identity: [UInt8], instance: UInt64)]
        /// The selector is a named automatic cog the leader evaluates after
        /// each turn (not a durable source matched by writes).
        var computed = false
        /// A computed selector's encoding when last evaluated.
        var lastValue: [UInt8]?
    }

    private(set) var registrations: [String: Registration] = [:]
    /// The registrations over each durable source, and the computed ones:
    /// a turn looks only at the registrations its writes touch.
    private var bySource: [String: [String]] = [:]
    /// How many registrations each worker holds.
    private var countByWorker: [String: Int] = [:]
    private var computedKeys: [String] = []
    private var indexIsStale = false
    /// Live instances and the worker that owns each.
    private(set) var live: [UInt64: String] = [:]
    private var nextInstance: UInt64 = 1
    /// Instance numbers carry the epoch in their high 32 bits, so an
    /// instance of an older epoch can never match a live one.
    private let epochBits: UInt64

    init(epoch: UInt64) {
        epochBits = epoch << 32
    }

    /// The epoch an instance number was minted in.
    static func epoch(of instance: UInt64) -> UInt64 { instance >> 32 }

    private static func key(_ worker: String, _ registration: UInt64) -> String { "\(worker)#\(registration)" }

    /// Registers (or re-registers) a selector over its source's current
    /// value; returns the instances it opened, in collection order, and the
    /// retirements a re-registration caused (the instances the registration
    /// had, and what was nested in them: they are replaced, not kept). Under
    /// a parent instance that is not live (or not this worker's) it opens
    /// nothing and is not kept.
    mutating func register(
        _ spec: ScopeRegistration, currentValue: [UInt8]?, computed: Bool = false
    ) -> (members: [ScopeMember], retired: [ScopeEvent]) {
        var retired: [ScopeEvent] = []
        drop(Self.key(spec.worker, spec.registration), events: &retired)
        retired.sort { $0.instance < $1.instance }
        if let parent = spec.parent, live[parent] != spec.worker { return ([], retired) }
        let members = ScopeTable.members(of: currentValue, form: spec.form)
        var open: [(identity: [UInt8], instance: UInt64)] = []
        for identity in members {
            open.append((identity, mint(for: spec.worker)))
        }
        registrations[Self.key(spec.worker, spec.registration)] = Registration(
            spec: spec, open: open, computed: computed, lastValue: currentValue)
        countByWorker[spec.worker, default: 0] += 1
        indexIsStale = true
        return (open.map { ScopeMember(identity: $0.identity, instance: $0.instance) }, retired)
    }

    /// Whether `worker` holds registration number `registration`.
    func isRegistered(_ worker: String, _ registration: UInt64) -> Bool {
        registrations[Self.key(worker, registration)] != nil
    }

    /// How many registrations `worker` holds.
    func registrationCount(of worker: String) -> Int {
        countByWorker[worker] ?? 0
    }

    /// Reconciles every registration whose selector a turn changed — a
    /// durable source `writes` wrote, or a computed selector whose value
    /// `evaluate` now encodes differently — and returns the scope events,
    /// for the record of the turn that caused them: retirements first
    /// (nested instances with their parents), in opening order, then
    /// openings in collection order.
    mutating func apply(_ writes: [TurnWrite], evaluate: (String, [UInt8]?) -> [UInt8]? = { _, _ in nil }) -> [ScopeEvent] {
        guard !registrations.isEmpty else { return [] }
        if indexIsStale { rebuildIndex() }
        var changes: [(key: String, value: [UInt8]?)] = []
        for write in writes {
            for key in bySource[write.name] ?? [] {
                guard let spec = registrations[key]?.spec, spec.key == write.key else { continue }
                changes.append((key, write.value))
            }
        }
        for key in computedKeys {
            guard let registration = registrations[key] else { continue }
            let value = evaluate(registration.spec.source, registration.spec.key)
            if value != registration.lastValue {
                registrations[key]?.lastValue = value
                changes.append((key, value))
            }
        }
        guard !changes.isEmpty else { return [] }
        var retirements: [ScopeEvent] = []
        var arrivals: [(key: String, identities: [[UInt8]])] = []
        for (key, value) in changes {
            guard var registration = registrations[key] else { continue }
            let members = ScopeTable.members(of: value, form: registration.spec.form)
            let present = Set(members)
            var kept: [(identity: [UInt8], instance: UInt64)] = []
            var departed: [UInt64] = []
            for entry in registration.open {
                if present.contains(entry.identity) {
                    kept.append(entry)
                } else {
                    live[entry.instance] = nil
                    retirements.append(event(.retire, entry.instance, entry.identity, registration.spec))
                    departed.append(entry.instance)
                }
            }
            registration.open = kept
            registrations[key] = registration
            for instance in departed { retireNested(under: instance, events: &retirements) }
            let keptIdentities = Set(kept.map(\.identity))
            arrivals.append((key, members.filter { !keptIdentities.contains($0) }))
        }
        var events = retirements.sorted { $0.instance < $1.instance }
        for (key, identities) in arrivals {
            // A registration dropped with its parent in this turn opens nothing.
            guard var registration = registrations[key] else { continue }
            var present = Set(registration.open.map(\.identity))
            for identity in identities where present.insert(identity).inserted {
                let instance = mint(for: registration.spec.worker)
                registration.open.append((identity, instance))
                events.append(event(.open, instance, identity, registration.spec))
            }
            registrations[key] = registration
        }
        return events
    }

    /// Indexes the registrations by durable source (keys sorted, as the
    /// reconciliation order is by key).
    private mutating func rebuildIndex() {
        var sources: [String: [String]] = [:]
        var computed: [String] = []
        for key in registrations.keys.sorted() {
            guard let registration = registrations[key] else { continue }
            if registration.computed {
                computed.append(key)
            } else {
                sources[registration.spec.source, default: []].append(key)
            }
        }
        bySource = sources
        computedKeys = computed
        indexIsStale = false
    }

    /// Drops every registration nested in `parent` (recursively), retiring
    /// its instances.
    private mutating func retireNested(under parent: UInt64, events: inout [ScopeEvent]) {
        for key in registrations.keys.sorted() where registrations[key]?.spec.parent == parent {
            drop(key, events: &events)
        }
    }

    /// Whether `instance` is live and belongs to `worker`.
    func isLive(_ instance: UInt64, for worker: String) -> Bool {
        live[instance] == worker
    }

    /// Forgets every registration of a worker (gone, or its name taken
    /// over); returns the retirements, in opening order, for a record.
    mutating func dropWorker(_ worker: String) -> [ScopeEvent] {
        var retired: [ScopeEvent] = []
        for key in registrations.keys.sorted() where registrations[key]?.spec.worker == worker { drop(key, events: &retired) }
        return retired.sorted { $0.instance < $1.instance }
    }

    var openInstances: [UInt64] { live.keys.sorted() }

    /// Removes a registration, retiring its open instances and what is nested in them.
    private mutating func drop(_ key: String, events: inout [ScopeEvent]) {
        guard let registration = registrations.removeValue(forKey: key) else { return }
        countByWorker[registration.spec.worker, default: 1] -= 1
        if countByWorker[registration.spec.worker] == 0 { countByWorker[registration.spec.worker] = nil }
        indexIsStale = true
        for entry in registration.open {
            live[entry.instance] = nil
            events.append(event(.retire, entry.instance, entry.identity, registration.spec))
            retireNested(under: entry.instance, events: &events)
        }
    }

    private mutating func mint(for worker: String) -> UInt64 {
        let instance = epochBits | nextInstance
        nextInstance += 1
        live[instance] = worker
        return instance
    }

    private func event(_ kind: ScopeEvent.Kind, _ instance: UInt64, _ identity: [UInt8], _ spec: ScopeRegistration) -> ScopeEvent {
        ScopeEvent(
            kind: kind, instance: instance, scope: spec.path, identity: identity.isEmpty ? nil : identity,
            worker: spec.worker, registration: spec.registration)
    }

    /// The members a source's encoded value selects, in collection order.
    static func members(of value: [UInt8]?, form: ScopeRegistration.Form) -> [[UInt8]] {
        guard let value else { return [] }
        switch form {
        case .bool:
            return value == [0xf5] ? [[]] : []
        case .optional:
            return value == [0xf6] ? [] : [value]
        case .each:
            guard case .array(let items)? = try? CBORValue.parse(value) else { return [] }
            return items.map(\.encodedBytes)
        }
    }
}
