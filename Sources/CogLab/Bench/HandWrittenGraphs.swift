import CogdCommandLine

/// The hand-written baselines of `cogd-lab bench graph`: each shape's
/// computation as an app would write it without a graph — plain values,
/// closures, arrays and dictionaries, a derived value recomputed by its
/// closure when its input changes and a watcher closure called only when the
/// watched value changed (and once at the start, as `initial: .run` does).
///
/// Each leaves what its watchers were given in its own `BenchSink`, which
/// the bench holds equal to the graph's sink after the same turns, so a
/// baseline cannot drift from the graph's computation or be optimized away.
/// Each turn is one call that is not inlined (`@inline(never)`), as a turn
/// arriving from outside would be, so the bench's loop of turns is not
/// folded into one addition.
/// - Important: Plain, eager, single-threaded code on the main actor: no
///   tracking of dependencies, no batching, no undo; what the graph adds
///   on top of this is what its ratio measures.
@MainActor
enum HandWritten {
    /// steady: a source, a ×2 derived value, one watcher.
    @MainActor final class Steady {
        private(set) var source = 0
        private(set) var double: Int
        private let rule: (Int) -> Int
        private let watcher: @MainActor (Int) -> Void

        init(sink: BenchSink) {
            let rule: (Int) -> Int = { $0 * 2 }
            let watcher: @MainActor (Int) -> Void = { sink.value &+= $0 }
            self.rule = rule
            self.watcher = watcher
            double = rule(0)
            watcher(double)
        }

        @inline(never) func incrementSource() {
            source += 1
            let new = rule(source)
            guard new != double else { return }
            double = new
            watcher(new)
        }
    }

    /// deep: a chain of links, each its own closure over the previous one,
    /// recomputed link by link until one is unchanged; the tail watched.
    @MainActor final class Chain {
        private(set) var head = 0
        private(set) var links: [Int]
        private let rules: [(Int) -> Int]
        private let watcher: @MainActor (Int) -> Void

        init(links count: Int, sink: BenchSink) {
            let rules: [(Int) -> Int] = (0..<count).map { _ in { previous in previous + 1 } }
            var links: [Int] = []
            links.reserveCapacity(count)
            var previous = 0
            for rule in rules {
                previous = rule(previous)
                links.append(previous)
            }
            let watcher: @MainActor (Int) -> Void = { sink.value &+= $0 }
            self.rules = rules
            self.links = links
            self.watcher = watcher
            watcher(previous)
        }

        @inline(never) func incrementHead() {
            head += 1
            if let tail = Self.recompute(&links, from: head, rules: rules) { watcher(tail) }
        }

        /// Recomputes the links from the head's value; the new tail, nil when
        /// a link came out unchanged (nothing past it changes).
        private static func recompute(_ links: inout [Int], from head: Int, rules: [(Int) -> Int]) -> Int? {
            var previous = head
            for depth in links.indices {
                let new = rules[depth](previous)
                guard new != links[depth] else { return nil }
                links[depth] = new
                previous = new
            }
            return previous
        }
    }

    /// broad: a source feeding many derived values (each its own closure),
    /// all read by one reader that sums them when any changed.
    @MainActor final class Fan {
        private(set) var source = 0
        private(set) var leaves: [Int]
        private let rules: [(Int) -> Int]
        private let reader: @MainActor ([Int]) -> Void

        init(width: Int, sink: BenchSink) {
            let rules: [(Int) -> Int] = (0..<width).map { index in { source in source + index } }
            let reader: @MainActor ([Int]) -> Void = { leaves in
                var total = 0
                for leaf in leaves { total &+= leaf }
                sink.value &+= total
            }
            self.rules = rules
            self.reader = reader
            leaves = rules.map { $0(0) }
            reader(leaves)
        }

        @inline(never) func incrementSource() {
            source += 1
            if Self.recompute(&leaves, from: source, rules: rules) { reader(leaves) }
        }

        /// Recomputes every leaf from the source's value; whether any changed.
        private static func recompute(_ leaves: inout [Int], from source: Int, rules: [(Int) -> Int]) -> Bool {
            var changed = false
            for index in leaves.indices {
                let new = rules[index](source)
                if new != leaves[index] {
                    leaves[index] = new
                    changed = true
                }
            }
            return changed
        }
    }

    /// diamond: a source, two branches over it, a join over both, the join watched.
    @MainActor final class Diamond {
        private(set) var source = 0
        private(set) var left: Int
        private(set) var right: Int
        private(set) var join: Int
        private let leftRule: (Int) -> Int
        private let rightRule: (Int) -> Int
        private let joinRule: (Int, Int) -> Int
        private let watcher: @MainActor (Int) -> Void

        init(sink: BenchSink) {
            let leftRule: (Int) -> Int = { $0 + 1 }
            let rightRule: (Int) -> Int = { $0 * 2 }
            let joinRule: (Int, Int) -> Int = { $0 + $1 }
            let watcher: @MainActor (Int) -> Void = { sink.value &+= $0 }
            self.leftRule = leftRule
            self.rightRule = rightRule
            self.joinRule = joinRule
            self.watcher = watcher
            left = leftRule(0)
            right = rightRule(0)
            join = joinRule(left, right)
            watcher(join)
        }

        @inline(never) func incrementSource() {
            source += 1
            let newLeft = leftRule(source)
            let newRight = rightRule(source)
            guard newLeft != left || newRight != right else { return }
            left = newLeft
            right = newRight
            let newJoin = joinRule(left, right)
            guard newJoin != join else { return }
            join = newJoin
            watcher(newJoin)
        }
    }

    /// keyed: a dictionary of values and a list of keys, the sum over the
    /// keys recomputed whole when a value changes (as the graph's sum cog
    /// is), the sum watched.
    @MainActor final class KeyedSum {
        private(set) var ids: [Int]
        private(set) var values: [Int: Int]
        private(set) var sum: Int
        private let rule: ([Int], [Int: Int]) -> Int
        private let watcher: @MainActor (Int) -> Void

        init(count: Int, sink: BenchSink) {
            let rule: ([Int], [Int: Int]) -> Int = { ids, values in
                var sum = 0
                for id in ids { sum &+= values[id, default: 0] }
                return sum
            }
            let watcher: @MainActor (Int) -> Void = { sink.value &+= $0 }
            ids = Array(0..<count)
            var values: [Int: Int] = [:]
            values.reserveCapacity(count)
            for id in 0..<count { values[id] = 1 }
            self.values = values
            self.rule = rule
            self.watcher = watcher
            sum = rule(ids, values)
            watcher(sum)
        }

        @inline(never) func incrementValue(_ id: Int) {
            values[id, default: 0] += 1
            let new = rule(ids, values)
            guard new != sum else { return }
            sum = new
            watcher(new)
        }
    }

    /// keyed-single: a dictionary of values, a reader per key (value + 1)
    /// kept in a dictionary, and a watcher on one key's reader; a change to a
    /// key recomputes that key's reader only.
    @MainActor final class SingleKey {
        private(set) var values: [Int: Int]
        private(set) var readers: [Int: Int]
        private var watchers: [Int: @MainActor (Int) -> Void]
        private let rule: (Int) -> Int

        /// Keys `0...others`, each value its key, each read; key `watched` watched.
        init(others: Int, watched: Int, sink: BenchSink) {
            let rule: (Int) -> Int = { $0 + 1 }
            var values: [Int: Int] = [:]
            var readers: [Int: Int] = [:]
            values.reserveCapacity(others + 1)
            readers.reserveCapacity(others + 1)
            for key in 0...others {
                values[key] = key
                readers[key] = rule(key)
            }
            let watcher: @MainActor (Int) -> Void = { sink.value &+= $0 }
            self.values = values
            self.readers = readers
            self.rule = rule
            watchers = [watched: watcher]
            watcher(readers[watched] ?? 0)
        }

        @inline(never) func incrementValue(_ key: Int) {
            let value = values[key, default: 0] + 1
            values[key] = value
            guard let old = readers[key] else { return }
            let new = rule(value)
            guard new != old else { return }
            readers[key] = new
            watchers[key]?(new)
        }
    }

    /// cold: a source and a ×2 derived value nobody reads while the source
    /// changes: a change only marks it stale; a read recomputes it once.
    @MainActor final class Lazy {
        private(set) var source = 0
        private var cached: Int?
        private let rule: (Int) -> Int

        init() {
            rule = { $0 * 2 }
        }

        @inline(never) func incrementSource() {
            source += 1
            cached = nil
        }

        @inline(never) func read() -> Int {
            if let cached { return cached }
            let value = rule(source)
            cached = value
            return value
        }
    }

    /// scopes: a dictionary of children by id, each a watcher closure on a
    /// source's ×2; setting the ids creates the new ids' children and
    /// removes the gone ones'.
    @MainActor final class Children {
        private(set) var source = 0
        private(set) var double = 0
        private(set) var children: [Int: @MainActor (Int) -> Void] = [:]
        private let sink: BenchSink

        init(sink: BenchSink) {
            self.sink = sink
        }

        @inline(never) func setChildIDs(_ ids: [Int]) {
            let wanted = Set(ids)
            let retired = children.keys.filter { !wanted.contains($0) }
            for id in retired { children.removeValue(forKey: id) }
            for id in ids where children[id] == nil {
                children[id] = { [sink] new in sink.value &+= new }
            }
        }

        @inline(never) func incrementSource() {
            source += 1
            let new = source * 2
            guard new != double else { return }
            double = new
            for child in children.values { child(new) }
        }
    }

    /// quiet-reactions: a list of reactions, each a closure with the value
    /// it watches; a change calls the reactions watching it, one of them.
    @MainActor final class Reactions {
        private(set) var source = 0
        private(set) var double = 0
        /// `watches` 0: the source's ×2; `n`: the n-th quiet value, never changed.
        private var reactions: [(watches: Int, body: @MainActor (Int) -> Void)] = []

        init(count: Int, sink: BenchSink) {
            let woken: @MainActor (Int) -> Void = { sink.value &+= $0 }
            reactions.append((watches: 0, body: woken))
            for index in 0..<(count - 1) {
                reactions.append((watches: index + 1, body: { sink.value &+= $0 }))
            }
            woken(double)
        }

        @inline(never) func incrementSource() {
            source += 1
            let new = source * 2
            guard new != double else { return }
            double = new
            for reaction in reactions where reaction.watches == 0 { reaction.body(new) }
        }
    }
}
