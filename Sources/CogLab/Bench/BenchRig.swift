import CogdCommandLine
import Cog

// The graph shapes `cogd-lab bench graph` drives, declared the way an app would:
// private manual sources, automatic cogs, and ops on CogOps.

enum BenchRig {
    // steady: one source, one ×2 cog.
    fileprivate static let _steadySourceCog = Cog<Int>.Manual(name: "bench.steady.source") { 0 }
    static let steadyDoubleCog = Cog<Int>(name: "bench.steady.double") { c in c[_steadySourceCog] * 2 }

    // deep: a chain of automatic cogs, each the previous + 1.
    fileprivate static let _deepHeadCog = Cog<Int>.Manual(name: "bench.deep.head") { 0 }
    static let deepLinkCogs: CogBox<Int, Int> = CogBox(name: "bench.deep.link") { c, depth in
        depth == 0 ? c[_deepHeadCog] + 1 : c[deepLinkCogs[depth - 1]] + 1
    }

    // broad: one source feeding many automatic cogs.
    fileprivate static let _broadSourceCog = Cog<Int>.Manual(name: "bench.broad.source") { 0 }
    static let broadLeafCogs = CogBox<Int, Int>(name: "bench.broad.leaf") { c, index in
        c[_broadSourceCog] + index
    }

    // diamond: source → two arms → join.
    fileprivate static let _diamondSourceCog = Cog<Int>.Manual(name: "bench.diamond.source") { 0 }
    static let diamondLeftCog = Cog<Int>(name: "bench.diamond.left") { c in c[_diamondSourceCog] + 1 }
    static let diamondRightCog = Cog<Int>(name: "bench.diamond.right") { c in c[_diamondSourceCog] * 2 }
    static let diamondJoinCog = Cog<Int>(name: "bench.diamond.join") { c in
        c[diamondLeftCog] + c[diamondRightCog]
    }

    // keyed: a manual box summed over a keys list.
    fileprivate static let _keyedIDsCog = Cog<[Int]>.Manual(name: "bench.keyed.ids") { [] }
    fileprivate static let _keyedValueCogs = CogBox<Int, Int>.Manual(name: "bench.keyed.value") { 0 }
    static let keyedSumCog = Cog<Int>(name: "bench.keyed.sum") { c in
        let keyedIDs = c[_keyedIDsCog]
        var sum = 0
        for id in keyedIDs { sum &+= c[_keyedValueCogs[id]] }
        return sum
    }

    // keyed-single: one key's reader among many live keys.
    fileprivate static let _singleValueCogs = CogBox<Int, Int>.Manual(name: "bench.single.value") { 0 }
    static let singleReadCogs = CogBox<Int, Int>(name: "bench.single.read") { c, key in
        c[_singleValueCogs[key]] + 1
    }

    // cold: an automatic cog nobody reads while its source changes.
    fileprivate static let _coldSourceCog = Cog<Int>.Manual(name: "bench.cold.source") { 0 }
    static let coldDoubleCog = Cog<Int>(name: "bench.cold.double") { c in c[_coldSourceCog] * 2 }
}

extension CogOps {
    func incrementSteadySource() { turn { c in c[BenchRig._steadySourceCog] += 1 } }
    func incrementDeepHead() { turn { c in c[BenchRig._deepHeadCog] += 1 } }
    func incrementBroadSource() { turn { c in c[BenchRig._broadSourceCog] += 1 } }
    func incrementDiamondSource() { turn { c in c[BenchRig._diamondSourceCog] += 1 } }
    func incrementColdSource() { turn { c in c[BenchRig._coldSourceCog] += 1 } }

    /// Fills the keyed shape: ids 0..<count, each value 1.
    func installKeyedValues(count: Int) {
        turn { c in
            c[BenchRig._keyedIDsCog] = Array(0..<count)
            for id in 0..<count { c[BenchRig._keyedValueCogs[id]] = 1 }
        }
    }

    func incrementKeyedValue(_ id: Int) {
        turn { c in c[BenchRig._keyedValueCogs[id]] += 1 }
    }

    /// Makes `count` keys of the single-key shape live (written and read elsewhere).
    func installSingleValues(count: Int) {
        turn { c in
            for key in 0..<count { c[BenchRig._singleValueCogs[key]] = key }
        }
    }

    func incrementSingleValue(_ key: Int) {
        turn { c in c[BenchRig._singleValueCogs[key]] += 1 }
    }
}

extension BenchRig {
    // scopes: a collection scope over many children.
    fileprivate static let _childIDsCog = Cog<[Int]>.Manual(name: "bench.scope.ids") { [] }
    // quiet reactions: many sources, one reaction each.
    fileprivate static let _quietCogs = CogBox<Int, Int>.Manual(name: "bench.quiet") { 0 }
}

extension CogOps {
    func setChildIDs(_ ids: [Int]) { turn(BenchRig._childIDsCog, to: ids) }
}

/// The reactions each shape is driven through (the shapes, as written).
struct BenchMechanism: Mechanism {
    enum Shape {
        case steady, deep(links: Int), broad(width: Int), diamond, keyed, keyedSingle, scopes
        case quiet(reactions: Int)
    }

    let shape: Shape
    /// Counts reaction runs, so the loop cannot be optimized away.
    let sink: BenchSink

    var name: String { "Bench" }

    func operate(_ m: MechanismController) {
        switch shape {
        case .steady:
            m.watch(BenchRig.steadyDoubleCog, initial: .run, name: "double") { _, new in sink.value &+= new }
        case .deep(let links):
            m.watch(BenchRig.deepLinkCogs[links - 1], initial: .run, name: "tail") { _, new in sink.value &+= new }
        case .broad(let width):
            let leaves = (0..<width).map { BenchRig.broadLeafCogs[$0] }
            m.run { c in
                var total = 0
                for leaf in leaves { total &+= c[leaf] }
                sink.value &+= total
            }
        case .diamond:
            m.watch(BenchRig.diamondJoinCog, initial: .run, name: "join") { _, new in sink.value &+= new }
        case .keyed:
            m.watch(BenchRig.keyedSumCog, initial: .run, name: "sum") { _, new in sink.value &+= new }
        case .keyedSingle:
            m.watch(BenchRig.singleReadCogs[0], initial: .run, name: "single") { _, new in sink.value &+= new }
        case .scopes:
            m.scope(each: BenchRig._childIDsCog, name: "child") { _, s in
                s.watch(BenchRig.steadyDoubleCog, initial: .skip, name: "double") { _, new in sink.value &+= new }
            }
        case .quiet(let reactions):
            m.watch(BenchRig.steadyDoubleCog, initial: .run, name: "woken") { _, new in sink.value &+= new }
            for index in 0..<(reactions - 1) {
                m.watch(BenchRig._quietCogs[index], initial: .skip, name: "quiet") { _, new in sink.value &+= new }
            }
        }
    }
}

/// Where bench reactions leave their results.
@MainActor
final class BenchSink {
    var value = 0
}
