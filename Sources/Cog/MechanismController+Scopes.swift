extension MechanismController {
    // MARK: Bool scopes

    /// Runs `body` with a fresh sub-controller each time `gate` settles to
    /// true; when it settles to false, everything registered through that
    /// sub-controller ends (reactions unregister, tasks cancel).
    ///
    /// ```swift
    /// m.scope(isLoggingHikeCog, name: "hikeTimer") { s in
    ///   s.task(name: "tick") { … }
    /// }
    /// ```
    ///
    /// - Important: only the settled value at the end of a turn counts. The
    ///   body is not a reaction: read with `s.peek`, which never restarts it.
    ///   (`ScopeTests` checks the Bool transition table row by row.)
    public func scope(
        _ gate: Cog<Bool>, name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (MechanismController) -> Void
    ) {
        boolScope(gate.ref, path: compose(name, fileID: fileID, line: line), body)
    }

    /// A Bool scope over a manual source.
    public func scope(
        _ gate: Cog<Bool>.Manual, name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (MechanismController) -> Void
    ) {
        boolScope(gate.ref, path: compose(name, fileID: fileID, line: line), body)
    }

    /// A Bool scope over a read-only projection.
    public func scope(
        _ gate: Cog<Bool>.Projection, name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (MechanismController) -> Void
    ) {
        boolScope(gate.ref, path: compose(name, fileID: fileID, line: line), body)
    }

    // MARK: Identity scopes

    /// Opens one child per selected identity: nil opens nothing, A → B
    /// retires A then opens B, A → A (even an equal copy) keeps A, and
    /// A → nil → A across turns opens a second, different A.
    ///
    /// ```swift
    /// m.scope(activeTrailScreenCog, name: "trailScreen") { screenID, s in
    ///   s.watch(trailFilterCogs[screenID], initial: .skip, name: "filter") { _, filter in … }
    /// }
    /// ```
    public func scope<Identity: Equatable>(
        _ identity: Cog<Identity?>, name: String? = nil, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        identityScope(identity.ref, as: Identity.self, path: compose(name, fileID: fileID, line: line), body)
    }

    /// An identity scope over a manual source.
    public func scope<Identity: Equatable>(
        _ identity: Cog<Identity?>.Manual, name: String? = nil, fileID: StaticString = #fileID,
        line: UInt = #line, _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        identityScope(identity.ref, as: Identity.self, path: compose(name, fileID: fileID, line: line), body)
    }

    /// An identity scope over a read-only projection.
    public func scope<Identity: Equatable>(
        _ identity: Cog<Identity?>.Projection, name: String? = nil, fileID: StaticString = #fileID,
        line: UInt = #line, _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        identityScope(identity.ref, as: Identity.self, path: compose(name, fileID: fileID, line: line), body)
    }

    // MARK: Collection scopes

    /// One child per identity in a collection, reconciled by membership:
    /// arrivals open (in collection order), departures retire (in opening
    /// order, first), survivors keep their exact child, reordering does
    /// nothing. One registration however many children come and go.
    ///
    /// - Important: identities must be distinct; a duplicate traps, naming
    ///   the scope and the duplicate.
    public func scope<Identity: Hashable>(
        each identities: Cog<[Identity]>, name: String? = nil, fileID: StaticString = #fileID,
        line: UInt = #line, _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        eachScope(identities.ref, as: Identity.self, path: compose(name, fileID: fileID, line: line), body)
    }

    /// A collection scope over a manual source.
    public func scope<Identity: Hashable>(
        each identities: Cog<[Identity]>.Manual, name: String? = nil, fileID: StaticString = #fileID,
        line: UInt = #line, _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        eachScope(identities.ref, as: Identity.self, path: compose(name, fileID: fileID, line: line), body)
    }

    /// A collection scope over a read-only projection.
    public func scope<Identity: Hashable>(
        each identities: Cog<[Identity]>.Projection, name: String? = nil, fileID: StaticString = #fileID,
        line: UInt = #line, _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        eachScope(identities.ref, as: Identity.self, path: compose(name, fileID: fileID, line: line), body)
    }

    // MARK: Reconciliation

    /// On a replica, registers the selector with the leader: a durable
    /// source, or a named automatic cog with a `Codable` value (the leader
    /// evaluates the same declaration). Other selectors stay local.
    private func remoteScope(_ ref: StateRef, path: String, form: CogScopeForm) -> (any CogRemoteScope)? {
        guard let link = graph.remoteLink, let source = ref.descriptor.stableName else { return nil }
        if let descriptor = ref.descriptor as? DurableKeyEncoding {
            let key: [UInt8]?
            do {
                key = try descriptor.encodedKey(ref.key, codec: link.codec)
            } catch {
                return nil
            }
            // The members as the graph holds them now, not as the worker's
            // table does: that one runs ahead (it takes a whole `turns`
            // message before the replica applies its records one by one), and
            // a child paired by position with a later member list would take
            // another member's instance (and placement).
            let stateKey = ref.key
            return link.registerScope(
                path: path, source: source, key: key, form: form, parent: scopeParentSlot,
                currentEncoding: { [graph] in (try? descriptor.encodedValue(stateKey, graph: graph, codec: link.codec)) ?? nil })
        }
        guard let selector = SelectorRegistry.selector(named: source), selector === ref.descriptor else { return nil }
        let key: [UInt8]?
        do {
            key = try selector.encodedKey(ref.key, codec: link.codec)
        } catch {
            return nil
        }
        return link.registerScope(
            path: path, source: source, key: key, form: form, parent: scopeParentSlot,
            currentEncoding: { [graph] in (try? selector.encodedValue(key: key, graph: graph, codec: link.codec)) ?? nil })
    }

    private func boolScope(
        _ ref: StateRef, path: String, _ body: @escaping @MainActor (MechanismController) -> Void
    ) {
        guard retirement == nil else { return }
        var child: MechanismController?
        let remote = remoteScope(ref, path: path, form: .bool)
        // A local scope of a placed root lives in the root's lifetimes.
        if remote == nil, let gate = rootGate {
            gate.add { $0.boolScope(ref, path: path, body) }
            return
        }
        var lastValue = false
        // Placed in a group: open only while the member is placed here.
        let reconcile: @MainActor (Bool) -> Void = { [weak self] value in
            guard let self, self.retirement == nil else { return }
            let isOpen = value && (remote.map { !$0.isPlaced || $0.owns([]) } ?? true)
            if isOpen, child == nil {
                let opened = self.openChild(path: path)
                opened.instanceSlot = remote?.childSlot(identity: [])
                child = opened
                body(opened)
            } else if !isOpen, let open = child {
                child = nil
                self.retireChildren([open])
            }
        }
        addReaction(
            ReactionNode(label: path, recordsEffect: false) { c in
                lastValue = c.graph.read(ref, as: Bool.self, trackedBy: c.node)
                reconcile(lastValue)
            })
        if let remote, remote.isPlaced { remote.whenPlacementChanges { reconcile(lastValue) } }
    }

    private func identityScope<Identity: Equatable>(
        _ ref: StateRef, as: Identity.Type, path: String,
        _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        guard retirement == nil else { return }
        var current: (identity: Identity, child: MechanismController)?
        let remote = remoteScope(ref, path: path, form: .optional)
        if remote == nil, let gate = rootGate {
            gate.add { $0.identityScope(ref, as: Identity.self, path: path, body) }
            return
        }
        var last: (selected: Identity?, encoded: [UInt8]?) = (nil, nil)
        // Placed in a group: open only while the member is placed here.
        let reconcile: @MainActor (Identity?, [UInt8]?) -> Void = { [weak self] selected, encoded in
            guard let self, self.retirement == nil else { return }
            let placedHere = remote.map { !$0.isPlaced || encoded.map($0.owns) == true } ?? true
            let wanted = placedHere ? selected : nil
            if let open = current, let wanted, open.identity == wanted { return }
            if let open = current {
                current = nil
                self.retireChildren([open.child])
            }
            if let wanted {
                let opened = self.openChild(path: path)
                if let remote, let encoded { opened.instanceSlot = remote.childSlot(identity: encoded) }
                current = (wanted, opened)
                body(wanted, opened)
            }
        }
        addReaction(
            ReactionNode(label: path, recordsEffect: false) { c in
                let selected = c.graph.read(ref, as: Identity?.self, trackedBy: c.node)
                last = (selected, remote?.memberIdentities().first)
                reconcile(last.selected, last.encoded)
            })
        if let remote, remote.isPlaced { remote.whenPlacementChanges { reconcile(last.selected, last.encoded) } }
    }

    private func eachScope<Identity: Hashable>(
        _ ref: StateRef, as: Identity.Type, path: String,
        _ body: @escaping @MainActor (Identity, MechanismController) -> Void
    ) {
        guard retirement == nil else { return }
        var open: [(identity: Identity, child: MechanismController)] = []
        let remote = remoteScope(ref, path: path, form: .each)
        if remote == nil, let gate = rootGate {
            gate.add { $0.eachScope(ref, as: Identity.self, path: path, body) }
            return
        }
        let placed = remote?.isPlaced == true
        var last: (selected: [Identity], encoded: [[UInt8]]?) = ([], nil)
        // `encoded`: the members' encodings when already known (placed:
        // read with the selection, so the two agree); else read when a
        // child opens, as only then are they needed.
        let reconcile: @MainActor ([Identity], [[UInt8]]?) -> Void = { [weak self] all, encoded in
            guard let self, self.retirement == nil else { return }
            var selected = all
            var encodings = encoded
            if placed, let remote, let encoded {
                // Placed in a group: children only for the members placed here.
                let here = all.indices.filter { $0 < encoded.count && remote.owns(encoded[$0]) }
                selected = here.map { all[$0] }
                encodings = here.map { encoded[$0] }
            }
            let members = Set(selected)
            if open.count > 0 {
                var kept: [(identity: Identity, child: MechanismController)] = []
                kept.reserveCapacity(open.count)
                var departed: [MechanismController] = []
                for entry in open {
                    if members.contains(entry.identity) {
                        kept.append(entry)
                    } else {
                        departed.append(entry.child)
                    }
                }
                if !departed.isEmpty {
                    open = kept
                    self.retireChildren(departed)
                }
            }
            guard open.count < selected.count else { return }
            var present = Set<Identity>(minimumCapacity: open.count)
            for entry in open { present.insert(entry.identity) }
            let slots = encodings ?? remote?.memberIdentities() ?? []
            for (index, identity) in selected.enumerated() where !present.contains(identity) {
                let opened = self.openChild(path: path)
                if let remote, index < slots.count { opened.instanceSlot = remote.childSlot(identity: slots[index]) }
                open.append((identity, opened))
                body(identity, opened)
            }
        }
        addReaction(
            ReactionNode(label: path, recordsEffect: false) { c in
                let selected = c.graph.read(ref, as: [Identity].self, trackedBy: c.node)
                var members = Set<Identity>(minimumCapacity: selected.count)
                for identity in selected where !members.insert(identity).inserted {
                    fatalError(
                        "scope(each:) `\(path)` selected `\(identity)` twice; each identity names one lifetime, "
                            + "so the collection must not repeat one")
                }
                last = (selected, placed ? remote?.memberIdentities() ?? [] : nil)
                reconcile(last.selected, last.encoded)
            })
        if placed, let remote { remote.whenPlacementChanges { reconcile(last.selected, last.encoded) } }
    }
}
