// A user's own app on cogd, as the tests build it: one rig written with the
// Cog API (a durable source, a gate, two remote ops, a mechanism with
// a watch and a scope); main.swift makes it an executable with one call.
import Cog
import CogdCommandLine
import Foundation

/// The count.
let _countCog = Cog<Int>.Manual(name: "counter.count") { 0 }
let countCog = _countCog.readOnly

/// Whether the bonus scope is open.
let _isBonusOpenCog = Cog<Bool>.Manual(name: "counter.isBonusOpen") { false }
let isBonusOpenCog = _isBonusOpenCog.readOnly

/// Adds to the count (a count that would overflow stays where it is).
let bumpOp = RemoteOp<Int>(name: "counter.bump") { c, amount in
    let (count, overflow) = c[_countCog].addingReportingOverflow(amount)
    if !overflow { c[_countCog] = count }
}

/// Opens or closes the bonus scope.
let setBonusOp = RemoteOp<Bool>(name: "counter.setBonus") { c, open in
    c[_isBonusOpenCog] = open
}

extension CogOps {
    func bump(by amount: Int) { perform(bumpOp, amount) }
}

/// Logs the count as it changes, and adds a bonus of 100 each time the
/// bonus scope opens (a request stamped with the scope's instance).
struct CounterMechanism: Mechanism {
    let log: @Sendable (String) -> Void

    func operate(_ m: MechanismController) {
        m.watch(countCog, initial: .run, name: "count") { _, count in log("counter \(count)") }
        m.scope(isBonusOpenCog, name: "bonus") { s in s.bump(by: 100) }
    }
}

/// `counter.bump` renamed (another build of the app, for the rig-version tests).
let addOp = RemoteOp<Int>(name: "counter.add") { c, amount in
    let (count, overflow) = c[_countCog].addingReportingOverflow(amount)
    if !overflow { c[_countCog] = count }
}

/// The count declared as text (another build of the app, for the tests of
/// evolving types): the numbers written before no longer decode. Only the
/// build that lists it declares it (values outside `main.swift` are made on
/// first use).
enum Retyped {
    static let countAsTextCog = Cog<String>.Manual(name: "counter.count") { "" }
}

/// `counter.bump` taking its amount as text (another build of the app, for
/// the tests of types in the fingerprint): same names, another argument type.
/// A count that refuses numbers over 3 as it decodes (another build of the
/// app): its shape is `integer`, as the leader's, so the fingerprint cannot
/// see the change, but the numbers stored no longer decode.
struct SmallCount: Codable, Equatable, Sendable {
    var value: Int

    init(value: Int) {
        self.value = value
    }

    init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(Int.self)
        guard value <= 3 else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "a small count is at most 3, not \(value)")) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}

extension Retyped {
    static let smallCountCog = Cog<SmallCount>.Manual(name: "counter.count") { SmallCount(value: 0) }
}

enum RetypedOp {
    static let bumpByTextOp = RemoteOp<String>(name: "counter.bump") { c, amount in
        guard let amount = Int(amount) else { return }
        let (count, overflow) = c[_countCog].addingReportingOverflow(amount)
        if !overflow { c[_countCog] = count }
    }
}

/// Sends `counter.bump` with text from its bonus scope, where the leader's
/// op takes a number (another build's mistake the fingerprint cannot see:
/// the op it sends is not the one its rig lists), for the tests of
/// rejections a worker sees.
struct SloppyMechanism: Mechanism {
    func operate(_ m: MechanismController) {
        m.scope(isBonusOpenCog, name: "bonus") { s in s.perform(RetypedOp.bumpByTextOp, "one") }
    }
}

enum Counter {
    static let rig = CogRig(
        name: "counter", summary: "a count, bumped by ops and by a bonus scope",
        durableSources: [_countCog, _isBonusOpenCog], ops: [bumpOp, setBonusOp],
        mechanisms: { host in [CounterMechanism(log: host.log)] })

    /// The rig as another build of the app declares it (`COUNTER_BUILD`):
    /// `older`, before the bonus scope's source and op were added (a
    /// leader of this build serves it); `renamed`, with `counter.bump`
    /// renamed `counter.add` (refused); `bumped`, schema version 2 (refused);
    /// `retyped`, `counter.count` as text (a leader refuses the stored numbers);
    /// `argtyped`, `counter.bump` taking text (refused at hello, naming the op);
    /// `validating`, `counter.count` refusing numbers over 3 as it decodes (same
    /// shape: a worker joins and stops at the snapshot it cannot read);
    /// `sloppy`, the rig as it is, with a mechanism whose bonus scope sends
    /// `counter.bump` with text (joins; its request is rejected `bad-argument`).
    static func build(_ name: String?) -> CogRig {
        switch name {
        case "older":
            CogRig(name: "counter", durableSources: [_countCog], ops: [bumpOp], mechanisms: { _ in [] })
        case "renamed":
            CogRig(name: "counter", durableSources: [_countCog, _isBonusOpenCog], ops: [addOp, setBonusOp], mechanisms: { _ in [] })
        case "retyped":
            CogRig(name: "counter", durableSources: [Retyped.countAsTextCog, _isBonusOpenCog], ops: [setBonusOp], mechanisms: { _ in [] })
        case "validating":
            CogRig(name: "counter", durableSources: [Retyped.smallCountCog, _isBonusOpenCog], ops: [bumpOp, setBonusOp], mechanisms: { _ in [] })
        case "argtyped":
            CogRig(name: "counter", durableSources: [_countCog, _isBonusOpenCog], ops: [RetypedOp.bumpByTextOp, setBonusOp], mechanisms: { _ in [] })
        case "sloppy":
            CogRig(name: "counter", durableSources: [_countCog, _isBonusOpenCog], ops: [bumpOp, setBonusOp], mechanisms: { _ in [SloppyMechanism()] })
        case "bumped":
            CogRig(name: "counter", schemaVersion: 2, durableSources: [_countCog, _isBonusOpenCog], ops: [bumpOp, setBonusOp], mechanisms: { _ in [] })
        default:
            rig
        }
    }
}
