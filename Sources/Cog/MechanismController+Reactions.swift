extension MechanismController {
    /// Registers a reaction over whatever `body` reads. It runs now to learn
    /// its dependencies, then again after every turn that changes one of them,
    /// in registration order, against settled state, before the op returns.
    ///
    /// ```swift
    /// m.run { c in
    ///   let uploads = c[pendingUploadsCog]
    ///   sync.enqueue(uploads)
    /// }
    /// ```
    ///
    /// - Important: it reads but cannot write; an op it calls runs as a later
    ///   turn. Labelled by file and line in history (there is no `name:`).
    public func run(
        fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (ReactionReader) -> Void
    ) {
        guard retirement == nil else { return }
        if let gate = rootGate {
            gate.add { $0.run(fileID: fileID, line: line, body) }
            return
        }
        addReaction(ReactionNode(label: reactionLabel(nil, fileID: fileID, line: line), body: body))
    }

    /// Watches one automatic cog: `initial: .run` calls `body(value, value)`
    /// now; later changes call `body(old, new)` after the turn.
    public func watch<V>(
        _ cog: Cog<V>, initial: CogWatchStart, name: String? = nil,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (V, V) -> Void
    ) {
        watchValue(label: reactionLabel(name, fileID: fileID, line: line), initial: initial, body) { $0[cog] }
    }

    /// Watches one manual source.
    public func watch<V>(
        _ cog: Cog<V>.Manual, initial: CogWatchStart, name: String? = nil,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (V, V) -> Void
    ) {
        watchValue(label: reactionLabel(name, fileID: fileID, line: line), initial: initial, body) { $0[cog] }
    }

    /// Watches a source through its read-only projection.
    public func watch<V>(
        _ cog: Cog<V>.Projection, initial: CogWatchStart, name: String? = nil,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (V, V) -> Void
    ) {
        watchValue(label: reactionLabel(name, fileID: fileID, line: line), initial: initial, body) { $0[cog] }
    }

    /// Watches an async cog's value (quiet across reloads that keep it).
    public func watch<V: Sendable>(
        _ cog: Cog<V>.Async, initial: CogWatchStart, name: String? = nil,
        fileID: StaticString = #fileID, line: UInt = #line,
        _ body: @escaping @MainActor (V, V) -> Void
    ) {
        watchValue(label: reactionLabel(name, fileID: fileID, line: line), initial: initial, body) { $0[cog] }
    }

    /// The status lens of a controller: `m.status.watch(asyncCog, …)`, `m.status.peek(asyncCog)`.
    public var status: Status { Status(controller: self) }

    /// Watches and reads async status through a controller.
    @MainActor
    public struct Status {
        let controller: MechanismController

        /// Watches an async cog's full status; every pending, success and failure step is a change.
        public func watch<V: Sendable>(
            _ cog: Cog<V>.Async, initial: CogWatchStart, name: String? = nil,
            fileID: StaticString = #fileID, line: UInt = #line,
            _ body: @escaping @MainActor (CogStatus<V>, CogStatus<V>) -> Void
        ) {
            controller.watchValue(
                label: controller.reactionLabel(name, fileID: fileID, line: line), initial: initial, body
            ) { $0.status[cog] }
        }

        /// The async cog's status now; traps once the controller is retired.
        public func peek<V: Sendable>(_ cog: Cog<V>.Async) -> CogStatus<V> {
            controller.checkLive("status.peek")
            let status = controller.graph.readAsyncStatus(cog.ref, as: V.self, trackedBy: nil)
            controller.graph.runDeferredWorkIfIdle()
            return status
        }
    }

    func watchValue<V>(
        label: String, initial: CogWatchStart, _ body: @escaping @MainActor (V, V) -> Void,
        read: @escaping @MainActor (ReactionReader) -> V
    ) {
        guard retirement == nil else { return }
        if let gate = rootGate {
            gate.add { $0.watchValue(label: label, initial: initial, body, read: read) }
            return
        }
        var last: V?
        addReaction(
            ReactionNode(label: label) { c in
                let new = read(c)
                guard let old = last else {
                    last = new
                    if initial == .run { body(new, new) }
                    return
                }
                last = new
                body(old, new)
            })
    }

    func addReaction(_ node: ReactionNode) {
        reactions.append(node)
        graph.register(node)
    }

    /// Starts a task owned by this scope, named by the composed path
    /// (`Weather.hourlyRefresh`). The scope's end cancels it. Timed work
    /// sleeps on an injected clock.
    ///
    /// ```swift
    /// m.task(name: "hourlyRefresh") { [weak m] in
    ///   while true {
    ///     try await clock.sleep(for: .seconds(3_600))
    ///     guard let m else { return }
    ///     await m.refreshCurrentLocation()
    ///   }
    /// }
    /// ```
    ///
    /// - Important: once retired, returns an already-cancelled task whose
    ///   operation never starts. A scope keeps every task it started until it
    ///   retires. On a worker of a group, a mechanism's own task runs only
    ///   while its root is placed there (`cogwire.md` §6a), started anew in
    ///   each of the root's lifetimes; the task returned is the one started
    ///   now, or an already-cancelled one where the root is not placed.
    @discardableResult
    public func task(
        name: String, _ operation: sending @escaping @isolated(any) () async throws -> Void
    ) -> Task<Void, any Error> {
        if retirement == nil, let gate = rootGate {
            var started: Task<Void, any Error>?
            let body = TaskBody(operation)
            gate.add { started = $0.task(name: name, body: body) }
            return started ?? Self.inertTask()
        }
        guard retirement == nil else {
            let inert = Task<Void, any Error> {}
            inert.cancel()
            return inert
        }
        let task = Task(name: "\(path).\(name)", operation: operation)
        tasks.append(task)
        return task
    }
}

/// A task's operation kept to start in each lifetime of a placed root.
@MainActor
final class TaskBody {
    let operation: @isolated(any) () async throws -> Void
    init(_ operation: @escaping @isolated(any) () async throws -> Void) { self.operation = operation }
}

extension MechanismController {
    /// An already-cancelled task whose operation never starts.
    fileprivate static func inertTask() -> Task<Void, any Error> {
        let inert = Task<Void, any Error> {}
        inert.cancel()
        return inert
    }

    /// Starts a lifetime's copy of a placed root's task.
    fileprivate func task(name: String, body: TaskBody) -> Task<Void, any Error> {
        guard retirement == nil else { return Self.inertTask() }
        let task = Task<Void, any Error>(name: "\(path).\(name)") { @MainActor in try await body.operation() }
        tasks.append(task)
        return task
    }
}
