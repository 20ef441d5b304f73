extension CogRig {
    /// What a worker tells its leader about the rig it runs (in `hello`),
    /// so code built from another version of the rig is refused before it
    /// reads state it does not understand or sends ops nobody serves:
    /// the rig's name, its schema version, and the names of its durable
    /// sources and ops (sorted).
    public struct Fingerprint: Sendable, Hashable, Codable, CustomStringConvertible {
        public var name: String
        public var schemaVersion: Int
        public var durableSources: [String]
        public var ops: [String]

        public init(name: String, schemaVersion: Int, durableSources: [String], ops: [String]) {
            self.name = name
            self.schemaVersion = schemaVersion
            self.durableSources = Array(Set(durableSources)).sorted()
            self.ops = Array(Set(ops)).sorted()
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
            guard !problems.isEmpty else { return nil }
            return "rig \(name) differs from the leader's: " + problems.joined(separator: "; ")
                + " (a worker may lack what the leader adds, nothing else; run the leader's version of the rig)"
        }

        /// Up to 8 names, then how many more (a peer chooses the list).
        static func list(_ names: [String]) -> String {
            let shown = names.prefix(8).map { "`\($0)`" }.joined(separator: ", ")
            return names.count > 8 ? "\(shown) and \(names.count - 8) more" : shown
        }
    }

    /// This rig's fingerprint.
    public var fingerprint: Fingerprint {
        Fingerprint(name: name, schemaVersion: schemaVersion, durableSources: durableSources.map(\.name), ops: opNames)
    }
}
