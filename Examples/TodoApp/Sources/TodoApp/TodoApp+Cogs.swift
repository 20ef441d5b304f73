import Cog

/// The todos, in adding order.
let _todoIDsCog = Cog<[TodoID]>.Manual(name: "todos.ids") { [] }
public let todoIDsCog = _todoIDsCog.readOnly

/// Each todo's title.
let _todoTitleCogs = CogBox<String, TodoID>.Manual(name: "todos.title") { "" }
public let todoTitleCogs = _todoTitleCogs.readOnly

/// Whether each todo is done.
let _todoIsCompletedCogs = CogBox<Bool, TodoID>.Manual(name: "todos.isCompleted") { false }
public let todoIsCompletedCogs = _todoIsCompletedCogs.readOnly

/// Each todo's estimate in minutes, once a worker's estimator has given one.
let _todoEstimateCogs = CogBox<Int?, TodoID>.Manual(name: "todos.estimate") { nil }
public let todoEstimateCogs = _todoEstimateCogs.readOnly

/// The todos not yet done, in adding order: an automatic cog, named and
/// `Codable`, so the leader evaluates it too and mints the instances of a
/// worker's `scope(each:)` over it (the rig lists it under `selectors`).
public let activeTodoIDsCog = Cog<[TodoID]>(name: "todos.activeIDs") { c in
    let todoIDs = c[todoIDsCog]
    return todoIDs.filter { id in
        let todoIsCompleted = c[todoIsCompletedCogs[id]]
        return !todoIsCompleted
    }
}

/// Minutes of work left: the estimates of the todos not yet done (each at
/// most `TodoApp.estimateMinuteLimit`, so the sum fits).
public let remainingMinutesCog = Cog<Int> { c in
    let activeTodoIDs = c[activeTodoIDsCog]
    return activeTodoIDs.reduce(into: 0) { minutes, id in
        let todoEstimate = c[todoEstimateCogs[id]]
        minutes += todoEstimate ?? 0
    }
}

/// Adds a todo. Refuses (nothing is kept; the caller is told why) an id
/// already in the list (`duplicate-id`), an empty one or one longer than
/// `TodoApp.idByteLimit` (`bad-id`), and a blank title or one longer than
/// `TodoApp.titleByteLimit` (`bad-title`).
let addTodoOp = RemoteOp<TodoAddition>(
    name: "todos.add", summary: "adds a todo; refuses a taken id (duplicate-id), an empty or too long one (bad-id), a blank or too long title (bad-title)",
    example: TodoAddition(id: TodoID(rawValue: "milk"), title: "buy milk")
) { c, addition in
    let title = addition.title
    guard title.contains(where: { !$0.isWhitespace }), title.utf8.count <= TodoApp.titleByteLimit else {
        try c.refuse("bad-title", "a title has some text and at most \(TodoApp.titleByteLimit) bytes")
    }
    guard !addition.id.rawValue.isEmpty, addition.id.rawValue.utf8.count <= TodoApp.idByteLimit else {
        try c.refuse("bad-id", "an id has 1 to \(TodoApp.idByteLimit) bytes")
    }
    guard !c[_todoIDsCog].contains(addition.id) else {
        try c.refuse("duplicate-id", "a todo with id \(addition.id) is in the list already")
    }
    c[_todoIDsCog].append(addition.id)
    c[_todoTitleCogs[addition.id]] = title
    c[_todoIsCompletedCogs[addition.id]] = false
}

/// Marks a todo done; refuses an id not in the list (`unknown-todo`).
let completeTodoOp = RemoteOp<TodoID>(
    name: "todos.complete", summary: "marks a todo done (its estimator stops); refuses an id not in the list (unknown-todo)",
    example: TodoID(rawValue: "milk")
) { c, id in
    guard c[_todoIDsCog].contains(id) else { try c.refuse("unknown-todo", "no todo has the id \(Refusal.shortened(id.rawValue, toBytes: 100))") }
    c[_todoIsCompletedCogs[id]] = true
}

/// Removes a todo and resets its row; refuses an id not in the list (`unknown-todo`).
let removeTodoOp = RemoteOp<TodoID>(
    name: "todos.remove", summary: "removes a todo and clears its row; refuses an id not in the list (unknown-todo)",
    example: TodoID(rawValue: "milk")
) { c, id in
    guard c[_todoIDsCog].contains(id) else { try c.refuse("unknown-todo", "no todo has the id \(Refusal.shortened(id.rawValue, toBytes: 100))") }
    c[_todoIDsCog].removeAll { $0 == id }
    c[_todoTitleCogs[id]] = ""
    c[_todoIsCompletedCogs[id]] = false
    c[_todoEstimateCogs[id]] = nil
}

/// Keeps an estimate only for a todo that is still in the list and not
/// done (the receipt check: an estimate that arrives late writes nothing),
/// and only a positive one of at most a day.
let acceptEstimateOp = RemoteOp<EstimateAcceptance>(
    name: "todos.acceptEstimate",
    summary: "keeps an estimate (1 minute to a day) for a todo still open; sent by the estimator with the todo as its receipt",
    example: EstimateAcceptance(minutes: 20, receipt: TodoID(rawValue: "milk"))
) { c, acceptance in
    let id = acceptance.receipt
    guard c[_todoIDsCog].contains(id), !c[_todoIsCompletedCogs[id]] else { return }
    guard (1...TodoApp.estimateMinuteLimit).contains(acceptance.minutes) else { return }
    c[_todoEstimateCogs[id]] = acceptance.minutes
}

extension CogOps {
    /// Adds a todo (refused if `id` is taken, empty or too long, or the title is blank or too long).
    public func addTodo(id: TodoID, title: String) { perform(addTodoOp, TodoAddition(id: id, title: title)) }

    /// Marks a todo done.
    public func completeTodo(_ id: TodoID) { perform(completeTodoOp, id) }

    /// Removes a todo.
    public func removeTodo(_ id: TodoID) { perform(removeTodoOp, id) }

    /// Keeps an estimate for the todo that asked for it, if it is still open.
    public func acceptEstimate(_ minutes: Int, receipt: TodoID) {
        perform(acceptEstimateOp, EstimateAcceptance(minutes: minutes, receipt: receipt))
    }
}
