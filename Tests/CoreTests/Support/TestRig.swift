import Cog

/// Durable sources the scope tests set directly, one per selector form, and
/// the remote ops that set them.
enum TestRig {
    /// An `each` source: its elements are the members.
    static let members = Cog<[String]>.Manual(name: "test.members") { [] }
    /// An `optional` source: one member unless nil.
    static let chosen = Cog<String?>.Manual(name: "test.chosen") { nil }
    /// A `bool` source: one member while true.
    static let flag = Cog<Bool>.Manual(name: "test.flag") { false }

    static let setMembers = RemoteOp<[String]>(name: "test.setMembers") { c, value in c[members] = value }
    /// Sets the members to each value in turn, all in one turn.
    static let setMembersInSteps = RemoteOp<[[String]]>(name: "test.setMembersInSteps") { c, steps in
        for value in steps { c[members] = value }
    }
    static let choose = RemoteOp<String?>(name: "test.choose") { c, value in c[chosen] = value }
    static let setFlag = RemoteOp<Bool>(name: "test.setFlag") { c, value in c[flag] = value }

    /// Touches every declaration, so `OpRegistry.declared()` has the ops.
    static func register() {
        _ = members
        _ = chosen
        _ = flag
        _ = setMembers
        _ = setMembersInSteps
        _ = choose
        _ = setFlag
    }
}
