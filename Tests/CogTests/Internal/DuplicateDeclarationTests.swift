import Testing

@testable import Cog

/// A name given to two declarations is a start-up error naming
/// both. (The table is process-wide, so these tests read it through
/// `DuplicateDeclaration.first` instead of declaring a real duplicate,
/// which would make every later `OpRegistry.declared()` in this process fail.)
@Suite("Duplicate declarations")
struct DuplicateDeclarationTests {
    @Test func `a name declared at two places is refused, naming both places`() {
        let found = DuplicateDeclaration.first(
            in: ["ledger.greet": ["LedgerRig/LedgerRig+Cogs.swift:52", "MyApp/Ops.swift:10"], "ledger.open": ["LedgerRig/LedgerRig+Cogs.swift:70"]],
            kind: "remote op")
        #expect(found == DuplicateDeclaration(kind: "remote op", name: "ledger.greet", sites: ["LedgerRig/LedgerRig+Cogs.swift:52", "MyApp/Ops.swift:10"]))
        #expect(
            found?.description
                == "the remote op name `ledger.greet` is declared 2 times: at LedgerRig/LedgerRig+Cogs.swift:52 and at MyApp/Ops.swift:10; each name needs exactly one declaration")
    }

    @Test func `one place declaring a name again (a RemoteOp built in a function) is one declaration`() {
        #expect(DuplicateDeclaration.first(in: ["a.b": ["X.swift:3", "X.swift:3"]], kind: "durable source") == nil)
    }

    @Test func `the first duplicate in name order is the one reported`() {
        let found = DuplicateDeclaration.first(in: ["b": ["1", "2"], "a": ["3", "4"]], kind: "selector")
        #expect(found?.name == "a")
    }

    @Test func `each op declared is noted under its name with where it was declared`() throws {
        // (Not `OpRegistry.declared()`: this test process also holds the
        // Trails rig beside the examples' copy of it, a real duplicate.)
        let line = #line + 1
        let op = RemoteOp<Int>(name: "duplicateTests.bump") { _, _ in }
        #expect(op.site == "CogTests/DuplicateDeclarationTests.swift:\(line)")
        #expect(RemoteOpRegistry.all["duplicateTests.bump"]?.map(\.site) == [op.site])
        let registry = OpRegistry(runners: RemoteOpRegistry.all.compactMapValues { $0.first?.runner })
        #expect(registry.runner(named: op.name) != nil)
        #expect(registry.names.contains("duplicateTests.bump"))
        #expect(registry.runner(named: "duplicateTests.absent") == nil)
    }
}
