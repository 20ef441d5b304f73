import CogCodec

/// The worker's side of scope instances (`protocol/cogwire.md` §6): which
/// instance the leader minted for each member of each of this worker's
/// registrations, as of the revision the replica has applied.
///
/// Three things tell it, and they can cross: a registration's reply (its
/// members as of the reply's revision, adopted once the replica reaches
/// that revision), the open and retire events of each record the replica
/// applies, and the replica's own resets (a registration sent again, every
/// instance forgotten, a snapshot). The rules:
/// - a reply above the applied revision waits for it; a snapshot drops the
///   replies waiting (a new epoch registers anew);
/// - a member an event changed since its registration was (re)sent is
///   older news in a reply that arrives later, and keeps what the event said;
/// - a reply of a revision below the one the replica had applied when the
///   registration was (re)sent answers an earlier sending: its members are
///   older than what the replica applied since (an instance it lists may
///   have been retired by a record already applied), so it is not adopted;
/// - a retire event of an instance the book no longer pairs with the member
///   (the registration was sent again, or dropped, since) changes nothing.
///
/// Pure: the driver feeds it and performs the `Change`s it returns (fills
/// or drops the child slots opened locally); the simulator runs the same.
public struct ReplicaScopes: Sendable {
    /// What a driver does with its child slot for one member.
    public enum Change: Sendable, Equatable {
        /// A reply's member, as of the applied revision: the member's slot takes `instance`.
        case adopted(registration: UInt64, identity: [UInt8], instance: UInt64)
        /// An open event minted `instance`: a slot with no instance, or with
        /// one of an older epoch, takes it.
        case opened(registration: UInt64, identity: [UInt8], instance: UInt64)
        /// A retire event retired `instance`, the one the member was paired
        /// with: its slot is done with.
        case retired(registration: UInt64, identity: [UInt8], instance: UInt64)
        /// A reply was adopted (after its members' `adopted`, none when it
        /// listed none): what is placed on this worker may have changed.
        case replyAdopted(registration: UInt64)

        public var registration: UInt64 {
            switch self {
            case .adopted(let registration, _, _), .opened(let registration, _, _), .retired(let registration, _, _),
                .replyAdopted(let registration):
                registration
            }
        }
    }

    /// One registration's members and their instances.
    private struct Book: Sendable {
        var instances: [[UInt8]: UInt64] = [:]
        /// Members an event changed since the registration was (re)sent.
        var touched: Set<[UInt8]> = []
        /// The revision the replica had applied when it was (re)sent: the
        /// reply to this sending is of this revision or later.
        var sentAt: UInt64 = 0
    }

    private var books: [UInt64: Book] = [:]
    /// Registrations the socket could not take yet, oldest first, one per
    /// number (a newer sending replaces an older).
    public private(set) var unsent: [ScopeRegistration] = []
    /// Replies above the applied revision, oldest first.
    private var waiting: [(registration: UInt64, revision: UInt64, members: [ScopeMember])] = []

    /// At most this many replies wait for the replica to reach their
    /// revision; past it the oldest is dropped (the leader answers a
    /// registration once, so only a leader that answers far ahead of what
    /// it publishes could fill it — its registrations are sent again at
    /// the next `register-again` or epoch).
    public static let maximumWaitingReplies = 4_096

    public init() {}

    /// The replies waiting for the replica to reach their revision.
    public var waitingReplies: Int { waiting.count }

    /// The instance the member is paired with now (nil: none known).
    public func instance(registration: UInt64, identity: [UInt8]) -> UInt64? {
        books[registration]?.instances[identity]
    }

    /// The members of a registration that have an instance, with it.
    public func instances(registration: UInt64) -> [[UInt8]: UInt64] {
        books[registration]?.instances ?? [:]
    }

    /// The registration is being (re)sent, the replica having applied
    /// `applied`: what it knew is replaced by what its reply and the events
    /// after it say.
    public mutating func registering(_ registration: UInt64, applied: UInt64) {
        books[registration] = Book(sentAt: applied)
    }

    /// The registration is done with (its parent retired): nothing more is kept for it.
    public mutating func drop(_ registration: UInt64) {
        books[registration] = nil
        waiting.removeAll { $0.registration == registration }
        unsent.removeAll { $0.registration == registration }
    }

    /// What to do with a registration about to be sent (cogwire §6): a
    /// top-level one goes; a nested one goes under its parent's instance of
    /// the followed epoch, waits for one (the parent's is unknown, or of an
    /// earlier epoch), or is not sent once its parent retired.
    public enum Sending: Sendable, Equatable {
        case send(ScopeRegistration)
        case waitForParent
        case drop
    }

    public static func sending(_ spec: ScopeRegistration, parent: (instance: UInt64?, retired: Bool)?, epoch: UInt64?) -> Sending {
        guard let parent else { return .send(spec) }
        guard !parent.retired else { return .drop }
        guard let instance = parent.instance, let epoch, ScopeTable.epoch(of: instance) == epoch else { return .waitForParent }
        var sent = spec
        sent.parent = instance
        return .send(sent)
    }

    /// The socket did not take `registration`: it is sent again later
    /// (its children wait for the instances its reply brings; a dropped
    /// registration would leave them waiting for good).
    public mutating func notSent(_ registration: ScopeRegistration) {
        unsent.removeAll { $0.registration == registration.registration }
        unsent.append(registration)
    }

    /// The oldest registration to send again, after dropping those no longer
    /// `wanted` (forgotten, or their parent retired); `sentAgain()` once the
    /// socket took it.
    public mutating func nextUnsent(wanted: (ScopeRegistration) -> Bool) -> ScopeRegistration? {
        while let first = unsent.first {
            if wanted(first) { return first }
            unsent.removeFirst()
        }
        return nil
    }

    /// The registration `nextUnsent` gave went.
    public mutating func sentAgain() {
        if !unsent.isEmpty { unsent.removeFirst() }
    }

    /// Every scope registers anew (a new epoch, or the leader dropped them): what was kept unsent is not wanted.
    public mutating func dropUnsent() {
        unsent = []
    }

    /// The leader retired every instance of this worker (it gave the worker
    /// up, or another process took the name): every member waits for the
    /// instances the next registration brings.
    public mutating func forgetInstances() {
        for registration in books.keys { books[registration]?.instances = [:] }
    }

    /// A snapshot was applied: replies waiting are of the old state (the
    /// registrations are sent anew).
    public mutating func snapshotApplied() {
        waiting = []
    }

    /// A registration's reply: adopted now when the replica has applied
    /// `revision`, else when it does.
    public mutating func replied(registration: UInt64, revision: UInt64, members: [ScopeMember], applied: UInt64) -> [Change] {
        if waiting.count >= ReplicaScopes.maximumWaitingReplies { waiting.removeFirst() }
        waiting.append((registration, revision, members))
        return self.reached(applied)
    }

    /// A record the replica applies: its open and retire events for
    /// `worker`'s registrations (before its writes reach the graph; then
    /// `reached(record.revision)` adopts the replies it reaches).
    /// `slotInstance` is the instance the driver's child slot holds for a
    /// member (it may still hold one the book no longer pairs, after a
    /// registration was sent again).
    public mutating func applied(
        _ record: TurnRecord, worker: String, slotInstance: (UInt64, [UInt8]) -> UInt64? = { _, _ in nil }
    ) -> [Change] {
        var changes: [Change] = []
        for event in record.scopeEvents where event.worker == worker {
            guard let registration = event.registration, var book = books[registration] else { continue }
            let identity = event.identity ?? []
            switch event.kind {
            case .open:
                book.touched.insert(identity)
                book.instances[identity] = event.instance
                changes.append(.opened(registration: registration, identity: identity, instance: event.instance))
            case .retire:
                guard (book.instances[identity] ?? slotInstance(registration, identity)) == event.instance else { continue }
                book.touched.insert(identity)
                book.instances[identity] = nil
                changes.append(.retired(registration: registration, identity: identity, instance: event.instance))
            }
            books[registration] = book
        }
        return changes
    }

    /// The replica has applied `revision`: adopts the replies it reaches,
    /// each member an event has not changed since its registration was (re)sent.
    public mutating func reached(_ reached: UInt64) -> [Change] {
        guard waiting.contains(where: { $0.revision <= reached }) else { return [] }
        var changes: [Change] = []
        var later: [(registration: UInt64, revision: UInt64, members: [ScopeMember])] = []
        for reply in waiting {
            guard reply.revision <= reached else {
                later.append(reply)
                continue
            }
            // An earlier sending's answer, older than what was applied since.
            guard var book = books[reply.registration], reply.revision >= book.sentAt else { continue }
            for member in reply.members where !book.touched.contains(member.identity) {
                book.instances[member.identity] = member.instance
                changes.append(.adopted(registration: reply.registration, identity: member.identity, instance: member.instance))
            }
            books[reply.registration] = book
            changes.append(.replyAdopted(registration: reply.registration))
        }
        waiting = later
        return changes
    }
}
