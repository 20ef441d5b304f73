extension CogRig {
    /// What a worker tells its leader about the rig it runs (in `hello`),
    /// so code built from another version of the rig is refused before it
    /// reads state it does not understand or sends ops nobody serves:
    /// the rig's name, its schema version, the names of its durable
    /// sources and ops (sorted), and the shapes of their types.
    public struct Fingerprint: Sendable, Hashable, Codable, CustomStringConvertible {
        public var name: String
        public var schemaVersion: Int
        public var durableSources: [String]
        public var ops: [String]
        /// The shapes of the ops' arguments and of the durable sources' and
        /// selectors' values (and keys), as `cogd ops` derives them; nil
        /// from a build before they were sent, and then only the names are
        /// compared (`protocol/cogwire.md` §7, "Rig versions").
        public var shapes: Shapes?

        public init(name: String, schemaVersion: Int, durableSources: [String], ops: [String], shapes: Shapes? = nil) {
            self.name = name
            self.schemaVersion = schemaVersion
            self.durableSources = Array(Set(durableSources)).sorted()
            self.ops = Array(Set(ops)).sorted()
            self.shapes = shapes
        }

        /// The derived shapes of a rig's types, by stable name.
        public struct Shapes: Sendable, Hashable, Codable {
            /// Each op's argument.
            public var ops: [String: OpArgumentShape]
            /// Each durable source's values (and, for a box, keys).
            public var durableSources: [String: Stored]
            /// Each selector's values (and keys).
            public var selectors: [String: Stored]

            public init(ops: [String: OpArgumentShape] = [:], durableSources: [String: Stored] = [:], selectors: [String: Stored] = [:]) {
                self.ops = ops
                self.durableSources = durableSources
                self.selectors = selectors
            }

            private enum CodingKeys: String, CodingKey {
                case ops, durableSources, selectors
            }

            /// Empty maps are left out.
            public func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                if !ops.isEmpty { try container.encode(ops, forKey: .ops) }
                if !durableSources.isEmpty { try container.encode(durableSources, forKey: .durableSources) }
                if !selectors.isEmpty { try container.encode(selectors, forKey: .selectors) }
            }

            /// Absent maps read as empty (a peer may send only what it has).
            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                ops = try container.decodeIfPresent([String: OpArgumentShape].self, forKey: .ops) ?? [:]
                durableSources = try container.decodeIfPresent([String: Stored].self, forKey: .durableSources) ?? [:]
                selectors = try container.decodeIfPresent([String: Stored].self, forKey: .selectors) ?? [:]
            }
        }

        /// The shape of a stored value, and of its key for a box.
        public struct Stored: Sendable, Hashable, Codable {
            public var value: OpArgumentShape
            public var key: OpArgumentShape?

            public init(value: OpArgumentShape, key: OpArgumentShape? = nil) {
                self.value = value
                self.key = key
            }
        }

        public var description: String {
            "rig \(name) (schema \(schemaVersion), \(durableSources.count) durable sources, \(ops.count) ops)"
        }

        /// Why a worker running this rig cannot follow a leader serving
        /// `leader` (the leader's rig of the same name), in words; nil when
        /// it can.
        ///
        /// Compatible (`protocol/cogwire.md` §7, "Rig versions"): the same schema
        /// version, and every durable source and op the worker declares is
        /// declared by the leader too. The leader may declare more — an op
        /// or a durable source added — so a rig grows by upgrading the
        /// leader first, then the workers one by one. An op or durable
        /// source removed or renamed at the leader, or a schema version
        /// bumped on either side, is not compatible: the worker would send
        /// ops nobody serves, wait for state nobody writes, or misread what
        /// is stored.
        ///
        /// When both sides carry shapes, each op, durable source and
        /// selector both declare is compared too, by who encodes and who
        /// decodes: an op's argument the worker encodes must read as the
        /// leader's (`OpArgumentShape.canBeRead(as:)`), a durable source's
        /// value the leader encodes must read as the worker's, and a box's
        /// keys and a selector's values and keys must be the same on both
        /// sides (`isSame(as:)`). A worker's shape past the limits
        /// (`OpArgumentShape.maximumComparedDepth`, `maximumComparedParts`)
        /// is not compared and refuses it.
        public func incompatibility(with leader: Fingerprint) -> String? {
            var problems: [String] = []
            if schemaVersion != leader.schemaVersion {
                problems.append("its schema version is \(schemaVersion), the leader's \(leader.schemaVersion)")
            }
            let missingSources = durableSources.filter { !leader.durableSources.contains($0) }
            if !missingSources.isEmpty {
                problems.append("durable sources the leader does not declare: \(Fingerprint.list(missingSources))")
            }
            let missingOps = ops.filter { !leader.ops.contains($0) }
            if !missingOps.isEmpty {
                problems.append("ops the leader does not serve: \(Fingerprint.list(missingOps))")
            }
            if let mine = shapes, let theirs = leader.shapes {
                problems += Fingerprint.shapeProblems(worker: mine, leader: theirs, ops: ops, durableSources: durableSources)
            }
            guard !problems.isEmpty else { return nil }
            return "rig \(TerminalText.escaped(name)) differs from the leader's: " + problems.joined(separator: "; ")
                + " (a worker may lack what the leader adds, nothing else; run the leader's version of the rig)"
        }

        /// How the worker's shapes differ from the leader's, one text per
        /// op or source (up to 8, then how many more).
        static func shapeProblems(worker: Shapes, leader: Shapes, ops: [String], durableSources: [String]) -> [String] {
            var problems: [String] = []
            func compare(_ what: String, _ name: String, _ verb: String, worker: OpArgumentShape?, leader: OpArgumentShape?, _ fits: (OpArgumentShape, OpArgumentShape) -> Bool) {
                // A name the worker sends no shape for is one it could not derive.
                guard let leader else { return }
                let worker = worker ?? .unknown
                let label = "\(what) `\(TerminalText.escaped(name))`"
                guard worker.isWithinComparedLimits else {
                    problems.append(
                        "\(label): this worker's shape is past the limits (\(OpArgumentShape.maximumComparedDepth) levels deep, "
                            + "\(OpArgumentShape.maximumComparedParts) parts), so it is not compared")
                    return
                }
                guard !fits(worker, leader) else { return }
                problems.append("\(label) \(verb) \(leader.shown) at the leader, \(worker.shown) in this worker's rig")
            }
            // Only names both declare: the names' check above tells of the others.
            for name in ops.sorted() {
                compare("op", name, "takes", worker: worker.ops[name], leader: leader.ops[name]) { $0.canBeRead(as: $1) }
            }
            for name in durableSources.sorted() {
                guard let theirs = leader.durableSources[name] else { continue }
                let mine = worker.durableSources[name]
                compare("durable source", name, "holds", worker: mine?.value, leader: theirs.value) { $1.canBeRead(as: $0) }
                if theirs.key != nil || mine?.key != nil {
                    compare("durable source", name, "is keyed by", worker: mine?.key, leader: theirs.key ?? .unknown) { $0.isSame(as: $1) }
                }
            }
            for name in worker.selectors.keys.sorted() {
                guard let theirs = leader.selectors[name], let mine = worker.selectors[name] else { continue }
                compare("selector", name, "selects", worker: mine.value, leader: theirs.value) { $0.isSame(as: $1) }
                if theirs.key != nil || mine.key != nil {
                    compare("selector", name, "is keyed by", worker: mine.key, leader: theirs.key ?? .unknown) { $0.isSame(as: $1) }
                }
            }
            guard problems.count > 8 else { return problems }
            return Array(problems.prefix(8)) + ["and \(problems.count - 8) more"]
        }

        /// Up to 8 names, then how many more (a peer chooses the list).
        static func list(_ names: [String]) -> String {
            let shown = names.prefix(8).map { "`\(TerminalText.escaped($0))`" }.joined(separator: ", ")
            return names.count > 8 ? "\(shown) and \(names.count - 8) more" : shown
        }
    }

    /// This rig's fingerprint.
    public var fingerprint: Fingerprint {
        func stored(_ declarations: [Declaration]) -> [String: Fingerprint.Stored] {
            Dictionary(declarations.map { ($0.name, Fingerprint.Stored(value: $0.valueShape, key: $0.keyShape)) }, uniquingKeysWith: { first, _ in first })
        }
        let shapes = Fingerprint.Shapes(
            ops: Dictionary(ops.map { ($0.name, $0.argumentShape) }, uniquingKeysWith: { first, _ in first }),
            durableSources: stored(durableSources), selectors: stored(selectors))
        return Fingerprint(name: name, schemaVersion: schemaVersion, durableSources: durableSources.map(\.name), ops: opNames, shapes: shapes)
    }
}
