import CogCodec
import CogdCommandLine
import CogLog
import Foundation

/// Reads a turn log written by a worker group running the ledger-greeter rig
/// (a greeter scope child per account, each greeting its account once per
/// opening) and judges placement from the records alone (`cogwire.md` §6a):
///
/// - **Ownership**: after every record, at most one live instance per
///   (selector, member) — the drill's workers form one group, so this is per
///   (group, selector, member).
/// - **Coverage**: after every record from the first at which every selected
///   account has a live instance, each selected account's instance is owned
///   by a worker that is alive, or whose kill is at most `window` old at the
///   record's commit time.
/// - **Effects**: no turn of one name applied twice for one instance, none
///   from a retired instance or from a worker not its owner.
/// - **Moves**: for each kill, the accounts the killed worker owned then;
///   when each opened on another worker (the reopening record's commit
///   time) and when its new greeter's greeting was applied ("live").
///
/// An instance that no record opens was placed by a `scope-registered`
/// reply (the group's first registration): it counts as live from the first
/// greeting stamped with it.
struct GroupLogCheck {
    /// A SIGKILL the drill sent: the worker's name and when.
    struct Kill {
        var worker: String
        var at: Date
    }

    /// One kill's move: the accounts its worker owned, and how long after the kill each reopened and greeted.
    struct Move {
        var kill: Kill
        var members: Set<String>
        var reopened: [String: Date] = [:]
        var live: [String: Date] = [:]
        /// Members closed before they were live again (no longer required).
        var closed: Set<String> = []

        /// Milliseconds from the kill to the last of its members reopened elsewhere (nil: one never was).
        var reopenMilliseconds: Double? { milliseconds(reopened) }
        /// Milliseconds from the kill to the last of its members greeted by a new instance (nil: one never was).
        var liveMilliseconds: Double? { milliseconds(live) }

        private func milliseconds(_ times: [String: Date]) -> Double? {
            let required = members.subtracting(closed)
            guard required.allSatisfy({ times[$0] != nil }) else { return nil }
            return required.map { times[$0]!.timeIntervalSince(kill.at) * 1_000 }.max() ?? 0
        }
    }

    private struct Instance {
        var member: String
        var owner: String
    }

    /// How many of a kind were found, and the first few (kept bounded however many there are).
    struct Findings {
        private(set) var count = 0
        private(set) var first: [String] = []

        mutating func append(_ finding: String) {
            count += 1
            if first.count < 10 { first.append(finding) }
        }
    }

    let window: TimeInterval
    private var killedAt: [String: Date] = [:]
    private var pendingKills: [Kill]
    private var live: [UInt64: Instance] = [:]
    private var byMember: [String: Set<UInt64>] = [:]
    private var retired = Set<UInt64>()
    private var epoch: UInt64 = 0
    private var selected = Set<String>()
    private var effects: [String: Int] = [:]
    private var deadlines: [Date]
    private(set) var moves: [Move] = []
    /// The first revision coverage was checked at (every selected account had an instance); nil: never.
    private(set) var coveredFrom: UInt64?
    private(set) var doubleOwnership = Findings()
    private(set) var uncovered = Findings()
    private(set) var duplicatedEffects = Findings()
    private(set) var foreignEffects = Findings()
    private(set) var scopeEffects = 0
    private(set) var instancesSeen = Set<UInt64>()
    private(set) var openedByReply = 0
    private(set) var records = 0

    init(kills: [Kill], window: TimeInterval) {
        self.window = window
        pendingKills = kills.sorted { $0.at < $1.at }
        deadlines = pendingKills.map { $0.at.addingTimeInterval(window) }
    }

    /// The account a scope event or a write key names (a CBOR text), if it is one.
    private static func account(_ bytes: [UInt8]?) -> String? {
        bytes.flatMap { try? CBORDecoder().decode(String.self, from: $0) }
    }

    mutating func read(_ record: TurnRecord) {
        records += 1
        // Kills before this record: what each killed worker owned as of the record before.
        while let kill = pendingKills.first, kill.at < record.time {
            pendingKills.removeFirst()
            killedAt[kill.worker] = kill.at
            let members = Set(live.values.filter { $0.owner == kill.worker }.map(\.member))
            moves.append(Move(kill: kill, members: members))
        }
        if record.epoch > epoch {
            // A new epoch ends every instance of older ones (§6), without a record.
            for (number, instance) in live where number >> 32 < record.epoch { end(number, instance) }
            epoch = record.epoch
        }
        var changed = false
        var touched = Set<String>()
        if let number = record.origin.instance, stamped(number, record) {
            changed = true
            if let member = live[number]?.member { touched.insert(member) }
        }
        for event in record.scopeEvents {
            changed = true
            guard let member = Self.account(event.identity) else { continue }
            touched.insert(member)
            switch event.kind {
            case .retire:
                if let instance = live[event.instance] { end(event.instance, instance) }
                retired.insert(event.instance)
            case .open:
                let owner = event.worker ?? ""
                live[event.instance] = Instance(member: member, owner: owner)
                byMember[member, default: []].insert(event.instance)
                instancesSeen.insert(event.instance)
                for index in moves.indices
                where moves[index].members.contains(member) && owner != moves[index].kill.worker && moves[index].reopened[member] == nil {
                    moves[index].reopened[member] = record.time
                }
            }
        }
        for write in record.writes where write.name == "ledger.accounts" {
            let accounts = write.value.flatMap { try? CBORDecoder().decode([String].self, from: $0) } ?? []
            let now = Set(accounts)
            for index in moves.indices {
                for gone in selected.subtracting(now) where moves[index].live[gone] == nil { moves[index].closed.insert(gone) }
            }
            selected = now
            changed = true
        }
        for member in touched.sorted() {
            guard let instances = byMember[member], instances.count > 1 else { continue }
            let owners = instances.sorted().map { "\($0) on \(live[$0]?.owner ?? "?")" }
            doubleOwnership.append("revision \(record.revision): \(member) has \(instances.count) live instances (\(owners.joined(separator: ", ")))")
        }
        var passedDeadline = false
        while let first = deadlines.first, first < record.time {
            deadlines.removeFirst()
            passedDeadline = true
        }
        if changed || passedDeadline { checkCoverage(revision: record.revision, at: record.time) }
    }

    /// After the last record, with every kill's window over: each selected account owned by a worker not killed.
    mutating func finish(lastRevision: UInt64) {
        checkCoverage(revision: lastRevision, at: .distantFuture)
    }

    /// A turn stamped with scope instance `number`: an effect of that instance.
    private mutating func stamped(_ number: UInt64, _ record: TurnRecord) -> Bool {
        scopeEffects += 1
        var adopted = false
        if live[number] == nil, !retired.contains(number), number >> 32 == record.epoch,
            let member = record.writes.first(where: { $0.name == "ledger.greeted" }).flatMap({ Self.account($0.key) })
        {
            // Placed by a registration reply: no record opened it.
            live[number] = Instance(member: member, owner: record.origin.worker ?? "")
            byMember[member, default: []].insert(number)
            instancesSeen.insert(number)
            openedByReply += 1
            adopted = true
        }
        let key = "\(number) \(record.name)"
        effects[key, default: 0] += 1
        if effects[key] == 2 { duplicatedEffects.append("instance \(number) applied \(record.name) twice (again at revision \(record.revision))") }
        guard let instance = live[number] else {
            // Retired (the drill's older check names these too) or never placed.
            foreignEffects.append("revision \(record.revision) (\(record.name)) from instance \(number), not live")
            return adopted
        }
        if instance.owner != record.origin.worker {
            foreignEffects.append("revision \(record.revision) (\(record.name)) from \(record.origin.worker ?? "?"), instance \(number) is \(instance.owner)'s")
        }
        let greeted = record.writes.filter { $0.name == "ledger.greeted" }.compactMap { Self.account($0.key) }
        if let other = greeted.first(where: { $0 != instance.member }) {
            // A child stamped its request with another member's instance: its effect lands under the wrong owner.
            foreignEffects.append("revision \(record.revision) (\(record.name)) greets \(other) with instance \(number), which is \(instance.member)'s")
        }
        if record.name.hasSuffix("ledger.greet") {
            for index in moves.indices where moves[index].members.contains(instance.member) && moves[index].live[instance.member] == nil {
                // A greeting from an instance opened since the kill, on another worker.
                if instance.owner != moves[index].kill.worker, moves[index].reopened[instance.member] != nil || adopted {
                    moves[index].live[instance.member] = record.time
                    if moves[index].reopened[instance.member] == nil { moves[index].reopened[instance.member] = record.time }
                }
            }
        }
        return adopted
    }

    private mutating func end(_ number: UInt64, _ instance: Instance) {
        live[number] = nil
        byMember[instance.member]?.remove(number)
        if byMember[instance.member]?.isEmpty == true { byMember[instance.member] = nil }
    }

    private mutating func checkCoverage(revision: UInt64, at time: Date) {
        if coveredFrom == nil {
            guard !selected.isEmpty, selected.allSatisfy({ byMember[$0] != nil }) else { return }
            coveredFrom = revision
        }
        for member in selected.sorted() {
            guard let number = byMember[member]?.min(), let instance = live[number] else {
                uncovered.append("revision \(revision): \(member) has no live instance")
                continue
            }
            if let killed = killedAt[instance.owner], time.timeIntervalSince(killed) > window {
                let when = time == .distantFuture ? "at the end" : "\(String(format: "%.0f", time.timeIntervalSince(killed) * 1_000)) ms after its kill"
                uncovered.append("revision \(revision): \(member) still owned by \(instance.owner), killed, \(when)")
            }
        }
    }
}
