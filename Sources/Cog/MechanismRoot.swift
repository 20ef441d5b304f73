/// A mechanism's app-lifetime root on a worker of a group (`cogwire.md`
/// §6a): the leader places it on one member of the group, and only there do
/// the mechanism's own reactions, tasks and local scopes run — in a
/// *lifetime* opened when the root is placed here and retired (tasks
/// cancelled, reactions stopped, local scope children retired) when it moves
/// away. The mechanism's scopes over tracked selectors stay registered on
/// every member: their children are placed one by one.
///
/// Requests made through the root are stamped with its instance: while it is
/// not placed here they are dropped (before its first placement is known,
/// they wait for it), so a moved-away owner's late requests reach the leader
/// only stamped with a retired instance, and are rejected.
@MainActor
public final class CogRootGate {
    private weak var root: MechanismController?
    /// The registrations each lifetime runs, in declaration order.
    private var work: [@MainActor (MechanismController) -> Void] = []
    /// The lifetime open now (the root is placed here).
    private var lifetime: MechanismController?
    /// Stamps the root's own requests: the open lifetime's instance; before
    /// any placement is known, a slot that waits; else a retired slot.
    private(set) var requestSlot = CogInstanceSlot()

    init(root: MechanismController) {
        self.root = root
    }

    /// The root's instance while it is placed here.
    public var placedInstance: UInt64? { lifetime?.instanceSlot?.instance }

    /// How many lifetimes of the root opened here.
    public private(set) var openings = 0

    /// Runs `registration` in every lifetime: the open one now, and each
    /// one opened later.
    func add(_ registration: @escaping @MainActor (MechanismController) -> Void) {
        work.append(registration)
        if let lifetime { registration(lifetime) }
    }

    /// The root is placed here as `instance`, or (nil) not here: a change of
    /// instance retires the open lifetime and opens a new one.
    public func place(_ instance: UInt64?) {
        guard let root, !root.isRetired else { return }
        if let instance, instance == placedInstance { return }
        if let open = lifetime {
            lifetime = nil
            root.retireChildren([open])
        }
        guard let instance else {
            // Not placed here: what the root asks is dropped.
            requestSlot.isRetired = true  // what waits is abandoned
            return
        }
        let slot = requestSlot.isRetired || requestSlot.instance != nil ? CogInstanceSlot() : requestSlot
        let opened = root.openChild(path: root.path)
        opened.instanceSlot = slot
        lifetime = opened
        requestSlot = slot
        openings += 1
        slot.resolve(instance)
        for registration in work { registration(opened) }
    }
}
