import CogCodec

/// The leader's scope instances (`protocol/cogwire.md` §6): for every selector a worker
/// registered, the members its durable source selects now, each with the
/// instance the leader minted when it arrived. After each turn the table
/// reconciles the registrations whose source the turn wrote, with Cog's
/// scope transition rules: only settled values count, departures retire first (in
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
///
/// **Groups** (`protocol/cogwire.md` §6a): a top-level selector registered
/// by workers of one group is one registration of the group. Each of its
/// members is placed on exactly one subscriber — the one owning the fewest
/// of its members, the earliest to subscribe on a tie — and stays there
/// while that worker lives. When an owner is dropped, its members retire
/// and open again on the others; when a worker subscribes, members move to
/// it (retired on their owner, opened on it, newest first from the most
/// loaded) until the counts differ by at most one. A mechanism's root (a
/// one-member registration) is spread the same way over the group's roots:
/// placed on the worker owning fewest of them, and moved to a worker that
/// subscribes when its owner holds at least two more. Scope events name the
/// owner and the owner's own registration number. A registration nested in
/// a placed instance is its owner's alone, as before.
package struct ScopeTable {
    struct Registration {
        let spec: ScopeRegistration
        /// Open members in opening order.
        var open: [(identity: [UInt8], instance: UInt64)]
        /// The selector is a named automatic cog the leader evaluates after
        /// each turn (not a durable source matched by writes).
        var computed = false
        /// A computed selector's encoding when last evaluated.
        var lastValue: [UInt8]?
        /// The group whose registration this is (nil: one worker's).
        var group: String?
        /// A group registration's workers, in the order they subscribed,
        /// each with its own number for the registration.
        var subscribers: [(worker: String, registration: UInt64)] = []
        /// The worker each open instance of a group registration is placed on.
        var owners: [UInt64: String] = [:]

        /// The worker an open instance belongs to.
        func owner(of instance: UInt64) -> String { owners[instance] ?? spec.worker }

        /// The worker's own number for this registration.
        func number(of worker: String) -> UInt64 {
            subscribers.first { $0.worker == worker }?.registration ?? spec.registration
        }
    }

    private(set) var registrations: [String: Registration] = [:]
    /// Each group subscription (`worker#number`) and the group registration it joined.
    private var subscriptions: [String: String] = [:]
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

    /// The highest epoch whose instance numbers can be told apart from every
    /// other epoch's (the epoch fills the high 32 bits).
    package static let highestEpoch = UInt64(UInt32.max)
    /// The highest `n` of an instance number `epoch << 32 | n`.
    package static let highestInstance = UInt64(UInt32.max)
    /// Set when an epoch's instance numbers ran out (2^32 − 1 opened): from
    /// then on nothing more opens (a member that would have stays closed)
    /// and the leader must stop; it restarts in a new epoch, numbering from
    /// 1 again, and every worker registers anew (cogwire §6).
    private(set) var exhausted = false

    /// Instance numbers of `epoch` (at most `highestEpoch`), from `first`
    /// (tests start near the end).
    init(epoch: UInt64, first: UInt64 = 1) {
        precondition(epoch <= ScopeTable.highestEpoch, "the leader checks the epoch before it builds its scope table")
        nextInstance = first
        epochBits = epoch << 32
    }

    /// The epoch an instance number was minted in.
    package static func epoch(of instance: UInt64) -> UInt64 { instance >> 32 }

    private static func key(_ worker: String, _ registration: UInt64) -> String { "\(worker)#\(registration)" }

    /// A group registration's key: the group and the selector (not any
    /// worker's number: those differ between members). `\u{1}` cannot be in
    /// a worker name's `#`-key, so the two kinds of key never meet.
    private static func groupKey(_ group: String, _ spec: ScopeRegistration) -> String {
        let key = spec.key.map { $0.map { String($0, radix: 16) }.joined(separator: ".") } ?? "-"
        return "\u{1}\(group)\u{1}\(spec.path)\u{1}\(spec.source)\u{1}\(key)\u{1}\(spec.form.rawValue)"
    }

    /// Registers (or re-registers) a selector over its source's current
    /// value; returns the instances it opened, in collection order, and the
    /// retirements a re-registration caused (the instances the registration
    /// had, and what was nested in them: they are replaced, not kept). Under
    /// a parent instance that is not live (or not this worker's) it opens
    /// nothing and is not kept.
    ///
    /// With a `group`, a top-level selector joins the group's registration:
    /// the members placed on this worker are returned, and `moved` holds
    /// the retirements and openings of the members moved to it from others.
    ///
    /// `exclusive` false (the simulator's `--break exclusive-placement`)
    /// places every member on a joining worker, beside its owner.
    mutating func register(
        _ spec: ScopeRegistration, group: String? = nil, currentValue: [UInt8]?, computed: Bool = false, exclusive: Bool = true
    ) -> (members: [ScopeMember], retired: [ScopeEvent], moved: [ScopeEvent]) {
        var retired: [ScopeEvent] = []
        let own = Self.key(spec.worker, spec.registration)
        if let joined = subscriptions[own] {
            // Registered again: what it owned retires, and is placed anew below.
            unsubscribe(spec.worker, from: joined, replace: false, events: &retired)
        } else {
            drop(own, events: &retired)
        }
        retired.sort { $0.instance < $1.instance }
        if let group, spec.parent == nil {
            let (members, moved) = subscribe(spec, group: group, currentValue: currentValue, computed: computed, exclusive: exclusive)
            return (members, retired, moved)
        }
        if let parent = spec.parent, live[parent] != spec.worker { return ([], retired, []) }
        // A value that cannot be read opens nothing yet (nothing was open to keep).
        let members = ScopeTable.members(of: currentValue, form: spec.form) ?? []
        var open: [(identity: [UInt8], instance: UInt64)] = []
        for identity in members {
            guard let instance = mint(for: spec.worker) else { break }
            open.append((identity, instance))
        }
        registrations[Self.key(spec.worker, spec.registration)] = Registration(
            spec: spec, open: open, computed: computed, lastValue: currentValue)
        countByWorker[spec.worker, default: 0] += 1
        indexIsStale = true
        return (open.map { ScopeMember(identity: $0.identity, instance: $0.instance) }, retired, [])
    }

    /// `spec.worker` joins (or creates) its group's registration: members
    /// no one owns are placed on it, then members move to it until the
    /// counts are within one.
    private mutating func subscribe(
        _ spec: ScopeRegistration, group: String, currentValue: [UInt8]?, computed: Bool, exclusive: Bool
    ) -> (members: [ScopeMember], moved: [ScopeEvent]) {
        let key = Self.groupKey(group, spec)
        var registration = registrations[key] ?? Registration(spec: spec, open: [], computed: computed, lastValue: currentValue, group: group)
        registration.subscribers.append((spec.worker, spec.registration))
        subscriptions[Self.key(spec.worker, spec.registration)] = key
        countByWorker[spec.worker, default: 0] += 1
        indexIsStale = true
        // A value that cannot be read places nothing new; what is open stays.
        let selected = ScopeTable.members(of: currentValue, form: spec.form) ?? []
        var mine: [[UInt8]: UInt64] = [:]
        var placed = exclusive ? Set(registration.open.map(\.identity)) : []
        for identity in selected where placed.insert(identity).inserted {
            guard let instance = mint(for: spec.worker) else { break }
            registration.open.append((identity, instance))
            registration.owners[instance] = spec.worker
            mine[identity] = instance
        }
        // Balance: from the most loaded owner, its newest member, while it
        // holds at least two more than this worker. A root (one member) is
        // balanced over the group's roots: it moves here when its owner
        // holds at least two more of them than this worker.
        var retirements: [ScopeEvent] = []
        var openings: [ScopeEvent] = []
        while true {
            let counts = spec.isRoot ? rootCounts(group, with: registration, at: key) : ownedCounts(registration)
            let here = counts[spec.worker] ?? 0
            let donors = counts.filter { owner, _ in
                owner != spec.worker && registration.open.contains { registration.owner(of: $0.instance) == owner }
            }
            guard let (donor, most) = donors.max(by: { ($0.value, $1.key) < ($1.value, $0.key) }),
                most >= here + 2,
                let index = registration.open.lastIndex(where: { registration.owner(of: $0.instance) == donor }),
                let instance = mint(for: spec.worker)  // minted first: a member moves only if it can open here
            else { break }
            let entry = registration.open.remove(at: index)
            live[entry.instance] = nil
            retirements.append(event(.retire, entry.instance, entry.identity, registration, owner: donor))
            registration.owners[entry.instance] = nil
            retireNested(under: entry.instance, events: &retirements)
            registration.open.append((entry.identity, instance))
            registration.owners[instance] = spec.worker
            mine[entry.identity] = instance
            openings.append(event(.open, instance, entry.identity, registration, owner: spec.worker))
        }
        registrations[key] = registration
        let members = selected.compactMap { identity in mine[identity].map { ScopeMember(identity: identity, instance: $0) } }
        return (members, retirements.sorted { $0.instance < $1.instance } + openings)
    }

    /// How many open members of a group registration each subscriber owns.
    private func ownedCounts(_ registration: Registration) -> [String: Int] {
        var counts = Dictionary(uniqueKeysWithValues: registration.subscribers.map { ($0.worker, 0) })
        for entry in registration.open { counts[registration.owner(of: entry.instance), default: 0] += 1 }
        return counts
    }

    /// How many of `group`'s roots each worker owns, with `current` (not yet
    /// stored) in place of the registration at `key`; `current`'s
    /// subscribers count from zero.
    private func rootCounts(_ group: String, with current: Registration, at key: String) -> [String: Int] {
        var counts = Dictionary(uniqueKeysWithValues: current.subscribers.map { ($0.worker, 0) })
        for (other, registration) in registrations where other != key && registration.spec.isRoot && registration.group == group {
            for entry in registration.open { counts[registration.owner(of: entry.instance), default: 0] += 1 }
        }
        for entry in current.open { counts[current.owner(of: entry.instance), default: 0] += 1 }
        return counts
    }

    /// The subscriber a new member of a group registration goes to: the one
    /// owning fewest (of a root: of the group's roots), the earliest to
    /// subscribe on a tie.
    private func placement(in registration: Registration, at key: String) -> String? {
        let counts =
            registration.spec.isRoot && registration.group != nil
            ? rootCounts(registration.group!, with: registration, at: key) : ownedCounts(registration)
        var best: (worker: String, count: Int)?
        for subscriber in registration.subscribers {
            let count = counts[subscriber.worker] ?? 0
            if best == nil || count < best!.count { best = (subscriber.worker, count) }
        }
        return best?.worker
    }

    /// Takes `worker` out of a group registration: its members retire and,
    /// when `replace`, open again on the other subscribers (appended to
    /// `openings`); a registration left with no subscriber is dropped.
    private mutating func unsubscribe(
        _ worker: String, from key: String, replace: Bool, events: inout [ScopeEvent], openings: inout [ScopeEvent]
    ) {
        guard var registration = registrations[key] else { return }
        let numbers = registration.subscribers.filter { $0.worker == worker }.map(\.registration)
        for number in numbers { subscriptions[Self.key(worker, number)] = nil }
        countByWorker[worker, default: numbers.count] -= numbers.count
        if countByWorker[worker] ?? 0 <= 0 { countByWorker[worker] = nil }
        var orphans: [[UInt8]] = []
        var kept: [(identity: [UInt8], instance: UInt64)] = []
        for entry in registration.open {
            guard registration.owner(of: entry.instance) == worker else {
                kept.append(entry)
                continue
            }
            live[entry.instance] = nil
            registration.owners[entry.instance] = nil
            events.append(event(.retire, entry.instance, entry.identity, registration, owner: worker))
            retireNested(under: entry.instance, events: &events)
            orphans.append(entry.identity)
        }
        registration.open = kept
        registration.subscribers.removeAll { $0.worker == worker }
        indexIsStale = true
        guard !registration.subscribers.isEmpty else {
            registrations[key] = nil
            return
        }
        // Re-registering (not `replace`): the orphans are placed again when it subscribes.
        if replace {
            for identity in orphans {
                guard let owner = placement(in: registration, at: key), let instance = mint(for: owner) else { break }
                registration.open.append((identity, instance))
                registration.owners[instance] = owner
                openings.append(event(.open, instance, identity, registration, owner: owner))
            }
        }
        registrations[key] = registration
    }

    private mutating func unsubscribe(_ worker: String, from key: String, replace: Bool, events: inout [ScopeEvent]) {
        var openings: [ScopeEvent] = []
        unsubscribe(worker, from: key, replace: replace, events: &events, openings: &openings)
        events += openings
    }

    /// Whether `worker` holds registration number `registration`.
    func isRegistered(_ worker: String, _ registration: UInt64) -> Bool {
        registrations[Self.key(worker, registration)] != nil || subscriptions[Self.key(worker, registration)] != nil
    }

    /// How many registrations `worker` holds.
    func registrationCount(of worker: String) -> Int {
        countByWorker[worker] ?? 0
    }

    /// Selections that could not be read (a computed selector whose value
    /// did not encode, an `each:` value that is not an array): each left
    /// what was open as it was (counted `selector-unreadable`).
    package private(set) var unreadableSelections: UInt64 = 0

    /// Reads an unreadable selection as "no members", retiring every
    /// instance open under it: the bug the rule above guards against, for
    /// the simulator's `--break selector-encoding` only (`LeaderRule`).
    package var readsUnreadableAsEmpty = false

    /// Reconciles every registration whose selector a turn changed — a
    /// durable source `writes` wrote, or a computed selector whose value
    /// `evaluate` now encodes differently — and returns the scope events,
    /// for the record of the turn that caused them: retirements first
    /// (nested instances with their parents), in opening order, then
    /// openings in collection order.
    mutating func apply(_ writes: [TurnWrite], evaluate: (String, [UInt8]?) -> SelectorReading = { _, _ in .encoded(nil) }) -> [ScopeEvent] {
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
            let value: [UInt8]?
            switch evaluate(registration.spec.source, registration.spec.key) {
            case .encoded(let encoded):
                value = encoded
            case .failed:
                // Not "no members": what is open stays open until the selector reads again.
                unreadableSelections &+= 1
                guard readsUnreadableAsEmpty else { continue }
                value = nil
            }
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
            guard let members = ScopeTable.members(of: value, form: registration.spec.form) ?? (readsUnreadableAsEmpty ? [] : nil) else {
                unreadableSelections &+= 1
                continue
            }
            let present = Set(members)
            var kept: [(identity: [UInt8], instance: UInt64)] = []
            var departed: [UInt64] = []
            for entry in registration.open {
                if present.contains(entry.identity) {
                    kept.append(entry)
                } else {
                    live[entry.instance] = nil
                    retirements.append(event(.retire, entry.instance, entry.identity, registration, owner: registration.owner(of: entry.instance)))
                    registration.owners[entry.instance] = nil
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
                let owner = registration.group == nil ? registration.spec.worker : placement(in: registration, at: key) ?? registration.spec.worker
                guard let instance = mint(for: owner) else { break }
                registration.open.append((identity, instance))
                if registration.group != nil { registration.owners[instance] = owner }
                events.append(event(.open, instance, identity, registration, owner: owner))
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
    ///
    /// Its members of group registrations retire and open again on the
    /// group's other subscribers: the openings follow the retirements.
    mutating func dropWorker(_ worker: String) -> [ScopeEvent] {
        var retired: [ScopeEvent] = []
        var openings: [ScopeEvent] = []
        for key in registrations.keys.sorted() {
            guard let registration = registrations[key] else { continue }
            if registration.group != nil {
                if registration.subscribers.contains(where: { $0.worker == worker }) {
                    unsubscribe(worker, from: key, replace: true, events: &retired, openings: &openings)
                }
            } else if registration.spec.worker == worker {
                drop(key, events: &retired)
            }
        }
        // An opening whose instance a later drop retired (nested in it) is not kept.
        return retired.sorted { $0.instance < $1.instance } + openings.filter { live[$0.instance] != nil }
    }

    var openInstances: [UInt64] { live.keys.sorted() }

    /// The mechanisms whose root each worker owns (`cogwire.md` §6a), sorted.
    var rootsByWorker: [String: [String]] {
        var roots: [String: [String]] = [:]
        for registration in registrations.values where registration.spec.isRoot {
            for entry in registration.open { roots[registration.owner(of: entry.instance), default: []].append(registration.spec.path) }
        }
        return roots.mapValues { $0.sorted() }
    }

    /// Removes a registration, retiring its open instances and what is nested in them.
    private mutating func drop(_ key: String, events: inout [ScopeEvent]) {
        guard let registration = registrations.removeValue(forKey: key) else { return }
        countByWorker[registration.spec.worker, default: 1] -= 1
        if countByWorker[registration.spec.worker] == 0 { countByWorker[registration.spec.worker] = nil }
        indexIsStale = true
        for entry in registration.open {
            live[entry.instance] = nil
            events.append(event(.retire, entry.instance, entry.identity, registration, owner: registration.owner(of: entry.instance)))
            retireNested(under: entry.instance, events: &events)
        }
    }

    /// A new instance for `worker`; nil once the epoch's numbers are used up
    /// (then `exhausted`): a number is never used twice, nor spills into
    /// the epoch's bits.
    private mutating func mint(for worker: String) -> UInt64? {
        guard nextInstance <= ScopeTable.highestInstance else {
            exhausted = true
            return nil
        }
        let instance = epochBits | nextInstance
        nextInstance += 1
        // One owner per instance, of this epoch: a number is never handed out twice.
        precondition(live.updateValue(worker, forKey: instance) == nil, "internal inconsistency: instance \(instance) minted twice")
        return instance
    }

    /// A scope event of `registration` for the instance placed on `owner`
    /// (named with the owner's own registration number).
    private func event(
        _ kind: ScopeEvent.Kind, _ instance: UInt64, _ identity: [UInt8], _ registration: Registration, owner: String
    ) -> ScopeEvent {
        ScopeEvent(
            kind: kind, instance: instance, scope: registration.spec.path, identity: identity.isEmpty ? nil : identity,
            worker: owner, registration: registration.number(of: owner))
    }

    /// The members a source's encoded value selects, in collection order,
    /// each once (an element repeated in an `each:` value selects one
    /// member, at its first place: one instance per identity, never two);
    /// nil when an `each:` selector's value is not an array that parses —
    /// not "no members": the caller keeps what is open (retiring every
    /// instance of a selector it cannot read would be a durable loss).
    package static func members(of value: [UInt8]?, form: ScopeRegistration.Form) -> [[UInt8]]? {
        guard let value else { return [] }
        switch form {
        case .bool:
            return value == [0xf5] ? [[]] : []
        case .optional:
            return value == [0xf6] ? [] : [value]
        case .each:
            do {
                guard case .array(let items) = try CBORValue.parse(value) else { return nil }
                var seen = Set<[UInt8]>()
                return items.map(\.encodedBytes).filter { seen.insert($0).inserted }
            } catch {
                return nil
            }
        }
    }
}

/// A computed selector's value as the leader's graph has it now.
package enum SelectorReading: Equatable, Sendable {
    /// Its encoded value (nil: none).
    case encoded([UInt8]?)
    /// It did not encode (why): what it selects is unknown, not empty.
    case failed(String)
}

