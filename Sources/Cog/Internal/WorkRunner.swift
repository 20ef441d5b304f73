/// How a new input reaches an async state's work under each policy, how
/// ordered runs follow one another (D24), and how a stream's elements become
/// turns (D25). `.latest` one-shot work is `startGeneration`/`deliver` in
/// AsyncNode.swift.
extension Graph {
    /// A new input for `node`: its selector ran again (a dependency changed,
    /// first demand, or `refresh`).
    func accept<Value: Sendable>(_ work: Work<Value>, into node: AsyncNode<Value>) {
        switch node.policy {
        case .latest:
            startGeneration(of: node, running: work)
        case .merged:
            node.generation += 1
            startRun(node.generation, of: work, in: node)
        case .queue, .exhaustLatest:
            node.generation += 1
            let generation = node.generation
            if node.runs.isEmpty {
                startRun(generation, of: work, in: node)
                return
            }
            if node.policy == .exhaustLatest, let replaced = node.waiting.popLast() {
                resolveRefreshes(of: node, exactly: replaced.generation, with: .superseded)
            }
            node.waiting.append((generation, work))
        }
    }

    /// Starts one ordered run and shows the state as pending.
    private func startRun<Value: Sendable>(_ generation: Int, of work: Work<Value>, in node: AsyncNode<Value>) {
        guard case .run(let operation) = work.body else {
            preconditionFailure("\(node.label): an ordered policy runs one-shot work only (RunWork)")
        }
        node.runs[generation] = oneShotTask(operation, node: node) { graph, node, result in
            graph.deliverRun(result, generation: generation, to: node)
        }
        publishPending(of: node)
    }

    /// The task that runs one-shot work where it is isolated (the graph's
    /// actor, unless the body is `@concurrent`) and hands its result back on
    /// the graph's actor, unless the runtime or the state is gone by then.
    func oneShotTask<Value: Sendable>(
        _ operation: @escaping @Sendable @isolated(any) () async throws -> Value, node: AsyncNode<Value>,
        deliver: @escaping @MainActor (Graph, AsyncNode<Value>, Result<Value, any Error>) -> Void
    ) -> Task<Void, Never> {
        // Named after the state it computes (`forecast[90210]`), as a debugger or `Task.name` shows it.
        Task(name: node.label) { [weak self, weak node] in
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            guard let self else { return }
            guard let node else {
                // Released by grace and gone: the result is dropped, still checked.
                self.droppedResultOfReleasedState()
                return
            }
            deliver(self, node, result)
        }
    }

    /// Shows the state as pending (keeping its value) as a system turn named
    /// `label pending`.
    /// The status it keeps is the one current when the turn runs (a result
    /// queued before it may have changed it). A pending that replaces an
    /// earlier published one (a new generation before the last one ended)
    /// reaches status consumers as its own turn (ASYNC-32, STREAM-03); the
    /// first one only restates the resting status, and so does one started
    /// when no consumer watched the status: a consumer returning to a state
    /// whose dependency changed while it was away reads that pending as it
    /// starts the run, and hears next of the result, not of its own read
    /// again (ASYNC-24).
    func publishPending<Value: Sendable>(of node: AsyncNode<Value>) {
        let replacesWatchedPending = !node.statusCell.observers.isEmpty
        systemTurn(named: "\(node.label) pending") { [unowned self] _ in
            let current = node.statusCell.staged ?? node.statusCell.value
            self.stage(
                CogStatus(kind: .pending, value: current.value, hasSucceeded: current.hasSucceeded, error: nil),
                into: node.statusCell)
            if node.publishedStatus && replacesWatchedPending { node.statusCell.stagedIsChange = true }
            node.publishedStatus = true
        }
    }

    /// An ordered run ended: every run's result is published (none is
    /// replaced), then the next waiting input, if any, starts.
    private func deliverRun<Value: Sendable>(
        _ result: Result<Value, any Error>, generation: Int, to node: AsyncNode<Value>
    ) {
        defer { acknowledgeAsyncCompletionCheck() }
        guard !node.released, node.runs.removeValue(forKey: generation) != nil else { return }
        publish(result, of: node)
        resolveRefreshes(of: node, exactly: generation, with: CogRefresh<Value>.Outcome(result))
        if node.runs.isEmpty, !node.waiting.isEmpty {
            let next = node.waiting.removeFirst()
            startRun(next.generation, of: next.work, in: node)
        }
    }

    /// The task that iterates one generation of a stream on the graph's actor.
    func streamTask<Value: Sendable>(
        _ iterate: @escaping @MainActor @Sendable (_ publish: (Value) -> Bool) async throws -> Void,
        generation: Int, node: AsyncNode<Value>
    ) -> Task<Void, Never> {
        Task(name: node.label) { @MainActor [weak self, weak node] in
            var previous: Value?
            var outcome: Result<Void, any Error> = .success(())
            do {
                try await iterate { element in
                    guard let self, let node else { return false }
                    return self.deliverElement(element, generation: generation, to: node, after: &previous)
                }
            } catch {
                outcome = .failure(error)
            }
            guard let self else { return }
            guard let node else {
                // Released by grace and gone: the end is dropped, still checked.
                self.droppedResultOfReleasedState()
                return
            }
            self.endStream(outcome, generation: generation, to: node)
        }
    }

    /// One element of a current stream: its own turn, unless it equals the
    /// element before it. Returns false once the stream is replaced.
    private func deliverElement<Value: Sendable>(
        _ element: Value, generation: Int, to node: AsyncNode<Value>, after previous: inout Value?
    ) -> Bool {
        defer { acknowledgeAsyncCompletionCheck() }
        guard !node.released, generation == node.generation else { return false }
        // Made stale by a dependency change no one has settled yet: dropped;
        // the consumer that settles it next replaces the stream.
        if node.state == .check { settleSources(of: node) }
        guard node.state != .dirty else { return true }
        if let equals = node.elementEquals, let previous, equals(previous, element) { return true }
        previous = element
        publish(.success(element), of: node)
        resolveRefreshes(of: node, through: generation, with: .success(element))
        return true
    }

    /// A stream ended. A replaced or released one ends silently (Cog
    /// cancelled it); a natural end publishes nothing; a throw is one failure.
    private func endStream<Value: Sendable>(
        _ outcome: Result<Void, any Error>, generation: Int, to node: AsyncNode<Value>
    ) {
        defer { acknowledgeAsyncCompletionCheck() }
        guard isCurrent(generation, of: node) else { return }
        node.task = nil
        switch outcome {
        case .success:
            // A refresh handle still waiting saw no element: it resolves with
            // the value the stream left in place.
            resolveRefreshes(of: node, through: generation, with: .success(node.valueCell.value))
        case .failure(let error):
            publish(.failure(error), of: node)
            resolveRefreshes(of: node, through: generation, with: .failure(error))
        }
    }

    /// Resolves the refresh handles of one generation only (ordered runs
    /// end in their own order, so a later one never settles an earlier one).
    private func resolveRefreshes<Value: Sendable>(
        of node: AsyncNode<Value>, exactly generation: Int, with outcome: CogRefresh<Value>.Outcome
    ) {
        guard !node.refreshes.isEmpty else { return }
        node.refreshes.removeAll { entry in
            guard entry.generation == generation else { return false }
            entry.handle.resolve(outcome)
            return true
        }
    }

    /// Wakes a test waiting for the next async completion check.
    func acknowledgeAsyncCompletionCheck() {
        if !asyncCompletionCheckAcknowledgements.isEmpty {
            asyncCompletionCheckAcknowledgements.removeFirst().acknowledge()
        }
    }
}

extension CogRefresh.Outcome {
    init(_ result: Result<Value, any Error>) {
        switch result {
        case .success(let value): self = .success(value)
        case .failure(let error): self = .failure(error)
        }
    }
}
