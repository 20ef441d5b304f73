import CogCodec
import Testing

@testable import CogProtocol

/// A selector the leader cannot read is not "no members": what is open
/// stays open (issue 26, no silent `try?` on a path that decides what retires).
@Suite("A selector that cannot be read keeps what is open")
struct UnreadableSelectorTests {
    static let spec = ScopeRegistration(worker: "w1", registration: 1, path: "Bank.desk", source: "bank.openAccounts", key: nil, form: .each)
    static let alice = try! CBOREncoder().encode("alice")
    static let bob = try! CBOREncoder().encode("bob")

    @Test func `a computed selector that does not encode retires nothing, and opens what it selects once it reads again`() throws {
        var table = ScopeTable(epoch: 1)
        let both = try CBOREncoder().encode(["alice", "bob"])
        let opened = table.register(Self.spec, currentValue: both, computed: true).members
        #expect(opened.map(\.identity) == [Self.alice, Self.bob])
        #expect(table.apply([], evaluate: { _, _ in .failed("the value's encoding threw") }).isEmpty, "no retirement")
        #expect(table.unreadableSelections == 1)
        // Read again: only the change is an event (bob left), alice is the same instance.
        let events = table.apply([], evaluate: { _, _ in .encoded(try! CBOREncoder().encode(["alice"])) })
        #expect(events.map(\.kind) == [.retire])
        #expect(events.first?.identity == Self.bob && events.first?.instance == opened[1].instance)
    }

    @Test func `an each: source whose value is not an array retires nothing; a registration over it opens nothing`() throws {
        var table = ScopeTable(epoch: 1)
        let both = try CBOREncoder().encode(["alice", "bob"])
        #expect(table.register(Self.spec, currentValue: both).members.count == 2)
        let notAnArray = try CBOREncoder().encode(7)
        let events = table.apply([TurnWrite(name: "bank.openAccounts", key: nil, value: notAnArray)])
        #expect(events.isEmpty && table.unreadableSelections == 1)
        #expect(ScopeTable.members(of: notAnArray, form: .each) == nil)
        #expect(ScopeTable.members(of: [0xff, 0x00], form: .each) == nil, "bytes that do not parse")
        #expect(ScopeTable.members(of: nil, form: .each) == [])
        var other = ScopeTable(epoch: 1)
        #expect(other.register(Self.spec, currentValue: notAnArray).members.isEmpty)
    }

    @Test func `an element repeated in an each: value selects one member: one instance, opened once and retired once`() throws {
        var table = ScopeTable(epoch: 1)
        let repeated = try CBOREncoder().encode(["alice", "bob", "alice"])
        #expect(ScopeTable.members(of: repeated, form: .each) == [Self.alice, Self.bob])
        let opened = table.register(Self.spec, currentValue: repeated).members
        #expect(opened.map(\.identity) == [Self.alice, Self.bob])
        #expect(Set(opened.map(\.instance)).count == 2)
        // The same members repeated otherwise: no event.
        let again = try CBOREncoder().encode(["bob", "alice", "bob"])
        #expect(table.apply([TurnWrite(name: "bank.openAccounts", key: nil, value: again)]).isEmpty)
        // alice leaves: her one instance retires, once.
        let onlyBob = try CBOREncoder().encode(["bob", "bob"])
        let events = table.apply([TurnWrite(name: "bank.openAccounts", key: nil, value: onlyBob)])
        #expect(events.map(\.kind) == [.retire])
        #expect(events.map(\.instance) == [opened[0].instance])
    }

    @Test func `an epoch's last instance number opens; past it nothing opens and the table says it is exhausted`() throws {
        var table = ScopeTable(epoch: 3, first: ScopeTable.highestInstance)
        let both = try CBOREncoder().encode(["alice", "bob"])
        let opened = table.register(Self.spec, currentValue: both).members
        // alice gets the last number, 3 << 32 | (2^32 − 1); bob none: no number spills into the epoch's bits.
        #expect(opened.map(\.instance) == [3 << 32 | 0xFFFF_FFFF])
        #expect(ScopeTable.epoch(of: opened[0].instance) == 3)
        #expect(table.exhausted)
        let three = try CBOREncoder().encode(["alice", "bob", "carol"])
        #expect(table.apply([TurnWrite(name: "bank.openAccounts", key: nil, value: three)]).isEmpty)
    }

    @Test @MainActor func `a leader refuses a log whose epoch its instance numbers cannot hold`() throws {
        #expect(throws: TurnStoreError(
            code: .epochTooHigh,
            message: "the log's epoch is 4294967296; a leader serves epochs up to 4294967295 (scope instance numbers hold the epoch in their high 32 bits, cogwire §6)")
        ) {
            _ = try CoreHarness(log: MemoryLog(epoch: 1 << 32))
        }
        #expect(try CoreHarness(log: MemoryLog(epoch: 0xFFFF_FFFF)).core.epoch == 0xFFFF_FFFF)
    }
}

