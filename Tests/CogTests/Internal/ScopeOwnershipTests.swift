@testable import Cog
import CogTesting
import Testing

private let _desksCog = Cog<[String]>.Manual(name: "ownership.desks") { ["a"] }
private let _lampCog = Cog<Bool>.Manual(name: "ownership.lamp") { true }
private let lampIsOnCog = Cog<Bool>(name: "ownership.lampIsOn") { c in c[_lampCog] }

/// Which leader-minted instance a controller's requests carry on a worker
/// (cogwire.md §6): its own, or the nearest enclosing scope child's.
@MainActor
@Suite("Scope ownership")
struct ScopeOwnershipTests {
    @Test func `a controller inside a scope the leader does not track belongs to the nearest enclosing instance`() {
        let owners = Recorder<UInt64?>()
        _ = Cogs.forTesting(mechanisms: [
            Probe("M") { m in
                owners.append(m.owningSlot?.instance)
                m.scope(each: _desksCog, name: "desk") { _, desk in
                    // What a worker's replica does when the leader minted this child's instance.
                    desk.instanceSlot = CogInstanceSlot(instance: 7)
                    desk.scope(lampIsOnCog, name: "lamp") { lamp in
                        owners.append(lamp.owningSlot?.instance)
                        lamp.scope(_lampCog, name: "switch") { inner in
                            inner.instanceSlot = CogInstanceSlot(instance: 9)
                            owners.append(inner.owningSlot?.instance)
                        }
                    }
                }
            }
        ])
        #expect(owners.values == [nil, 7, 9])
    }
}
