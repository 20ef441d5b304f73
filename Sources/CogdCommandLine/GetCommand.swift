import Cog
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation

/// `cogd get NAME [KEY]`: the current value(s) of one durable source — every
/// key of a box, one key, or the one value of a keyless source — read from
/// the data folder (beside a running leader, as `tail` reads it) or from a
/// snapshot the leader sends (`--leader`).
struct GetCommand {
    let options: Command.GetOptions
    let rigs: Rigs

    /// `cogd get`'s exit statuses (documented in its help and the README).
    enum Exit {
        static let found: Int32 = 0
        /// No such durable source, a key given to a keyless one, or another failure.
        static let failed: Int32 = 1
        /// The source is known but holds no stored value (for that key).
        static let noValue: Int32 = 3
        static let noAnswer: Int32 = 4
    }

    /// What was read: the entries of the source and the revision they are as of.
    struct State {
        var revision: UInt64
        var entries: [StateEntry]
    }

    @MainActor
    func run() -> Int32 {
        let state: State
        if let endpoint = options.leaderEndpoint {
            do {
                // Several nodes of an HA cluster: asked in turn, a standby's `not-leader` followed.
                guard
                    let answer = try ClusterCommands.following(endpoint, timeout: options.timeout, { node, budget in
                        try LeaderSnapshot.state(named: options.name, leader: node, timeout: budget, keys: options.keys)
                    })
                else {
                    printError(ClusterCommands.noAnswer(from: endpoint, within: options.timeout))
                    return Exit.noAnswer
                }
                state = answer
            } catch let refused as LeaderSnapshot.Refused {
                printError("Error: the leader refused the snapshot: \(escaped: refused.error)")
                if let hint = refused.hint { printError(hint) }
                return Exit.failed
            } catch let wrong as EndpointHandshake.WrongEndpoint {
                printError("Error: \(escaped: wrong)")
                return Exit.noAnswer
            } catch let none as EndpointHandshake.NotALeader {
                printError("Error: \(none)")
                return Exit.noAnswer
            } catch {
                printError("Error: \(escaped: error)")
                return Exit.failed
            }
        } else {
            do {
                let store = try TurnStore(directory: options.dataFolder, mode: .reader)
                defer { store.close() }
                let read = try store.state(named: options.name)
                state = State(revision: read.revision, entries: read.entries)
            } catch {
                printError("Error: \(escaped: error)")
                return Exit.failed
            }
        }
        return report(state)
    }

    /// Prints what `state` holds for the name (and key) asked for, or says
    /// why nothing is printed; returns the exit status.
    @MainActor
    private func report(_ state: State) -> Int32 {
        let name = options.name
        let declared = rigs.all.lazy.flatMap(\.durableSources).first { $0.name == name }
        if state.entries.isEmpty && declared == nil {
            if rigs.all.contains(where: { $0.selectors.contains { $0.name == name } }) || Cogs.hasSelector(named: name) {
                printError(
                    "Error: `\(escaped: name)` is an automatic cog, computed from other values and never stored; "
                        + "\(CogdCommandLine.programName) get reads durable sources (this program declares: \(declaredNames.joined(separator: ", ")))")
            } else {
                printError(
                    "Error: no durable source named `\(escaped: name)`: the state holds nothing under that name and this program "
                        + "declares no such source (it declares: \(declaredNames.joined(separator: ", ")))")
            }
            return Exit.failed
        }
        let isKeyed = declared?.isKeyed ?? state.entries.contains { $0.key != nil }
        // In key order, whichever way they were read (a long key's entry is stored under its digest).
        var entries = state.entries.sorted { ($0.key ?? []).lexicographicallyPrecedes($1.key ?? []) }
        if let keyText = options.key {
            guard isKeyed else {
                printError("Error: `\(escaped: name)` holds one value, not a value per key: leave out the key")
                return Exit.failed
            }
            let wanted = GetCommand.canonical(json: keyText) ?? []
            entries = entries.filter { $0.key.map { GetCommand.matches($0, wanted) } ?? false }
        }
        if options.json {
            let items = entries.map { entry in
                "{\"key\": \(entry.key.map { CBORText.json(bytes: $0) } ?? "null"), \"value\": \(CBORText.json(bytes: entry.value))}"
            }
            print("{\"name\": \(CBORText.quoted(name)), \"revision\": \(state.revision), \"entries\": [\(items.joined(separator: ", "))]}")
        } else {
            for entry in entries {
                let key = entry.key.map { "[\(CBORText.display(bytes: $0))]" } ?? ""
                print("\(escaped: name)\(key) = \(CBORText.display(bytes: entry.value))")
            }
        }
        guard entries.isEmpty else { return Exit.found }
        let initial = "so it reads as its declared initial value"
        if let keyText = options.key {
            printError(
                "`\(escaped: name)[\(escaped: keyText)]` has no stored value at revision \(state.revision): never written, or released, "
                    + initial)
        } else if isKeyed {
            printError("`\(escaped: name)` has no key with a stored value at revision \(state.revision): none was written, or all were released")
        } else {
            printError("`\(escaped: name)` has no stored value at revision \(state.revision): never written, or released, \(initial)")
        }
        return Exit.noValue
    }

    /// The durable sources the program's rigs declare, in name order.
    private var declaredNames: [String] { GetCommand.declaredSources(rigs).map(\.name) }

    /// The durable sources `rigs` declare, each once, in name order.
    static func declaredSources(_ rigs: Rigs) -> [CogRig.Declaration] {
        var seen = Set<String>()
        return rigs.all.flatMap(\.durableSources).filter { seen.insert($0.name).inserted }.sorted { $0.name < $1.name }
    }

    /// `json` in the log's deterministic CBOR, as `cogd call` sends an
    /// argument; nil when it is not JSON.
    static func canonical(json: String) -> [UInt8]? {
        (try? JSONDecoder().decode(CBORValue.self, from: Data(json.utf8)))?.encodedBytes
    }

    /// Whether a stored key is the one asked for: the same bytes, or the same
    /// once written as JSON (`--json` prints it) and read back as `cogd call`
    /// reads an argument — so `1` finds a key stored as the float 1.0, and a
    /// UUID key is found by its text.
    static func matches(_ stored: [UInt8], _ wanted: [UInt8]) -> Bool {
        stored == wanted || canonical(json: CBORText.json(bytes: stored)) == wanted
    }
}

/// Reads one durable source's entries from a snapshot the leader sends:
/// `protocol/cogwire.md` has no message for one value, so `cogd get
/// --leader` asks for the whole state table in parts (§5) and keeps the
/// entries of the name it wants. Without keys a connection must say hello
/// before it may ask (§2 `hello-first`): it says hello as a tool under a
/// name of its own, `get-` and a UUID, sending no rig, so it holds no one
/// else's name, registers nothing and leaves no record; the leader lists it
/// among its tools until it says goodbye as it closes. With keys it must be an
/// observer key, which asks without a hello (§9, "Roles").
enum LeaderSnapshot {
    /// The leader answered with an `error`.
    struct Refused: Error {
        let error: WireError
        /// What to do about it, when there is something to say.
        var hint: String? {
            switch error.code {
            case .roleForbids:
                "a client key may not read the state: cogd get --leader needs an observer key (or a worker key, read in its "
                    + "worker's name while that worker is not running; protocol/cogwire.md §9), or read the data folder with --data"
            case .nameInUse:
                "a worker key reads only in its worker's name, which the running worker holds: use an observer key "
                    + "(protocol/cogwire.md §9), or read the data folder with --data"
            case .notYourName:
                "a worker key reads in the name the peers file gives it, and cogd get says hello in its key file's name (NAME.key): "
                    + "name the key file after it, use an observer key, or read the data folder with --data"
            default: nil
            }
        }
    }

    /// The leader's snapshot broke the protocol (parts out of their run, a digest that does not add up).
    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    /// The entries named `name` in the leader's state table and the
    /// revision of the snapshot they came from; nil when the leader stays
    /// silent for `timeout` (at any step).
    static func state(
        named name: String, leader endpoint: String, timeout: Duration, keys: Command.ClientKeyFiles?
    ) throws -> GetCommand.State? {
        let curve = try keys?.load()
        let context = try ZMQContext()
        defer { context.close() }
        let socket = try ZMQSocket(context, .dealer, linger: .zero)
        defer { socket.close() }
        // Without keys a name of its own; with a worker key its key's name (below).
        var tool = "get-\(UUID().uuidString.lowercased())"
        try socket.setIdentity("\(tool)/\(UInt32.random(in: 0...UInt32.max))")
        try socket.useCurve(curve)
        var handshakes = try EndpointHandshake(socket, context: context, endpoint: endpoint, expected: .requests, curve: curve, timeout: timeout)
        defer { handshakes.close() }
        try socket.connect(endpoint)

        // Said hello: heartbeats once a second, so a long snapshot keeps the tool listed until its goodbye.
        var lastSaid: ContinuousClock.Instant?
        /// The leader's next message, nil after `timeout` of silence.
        func next() throws -> WireMessage? {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let said = lastSaid, ContinuousClock.now - said >= CatchUpClient.heartbeatInterval,
                    try socket.send([WireMessage.heartbeat(worker: tool, revision: 0).encoded()], wait: false)
                {
                    lastSaid = .now
                }
                let remaining = deadline - ContinuousClock.now
                if try ZMQSocket.poll([socket], timeout: min(remaining, .milliseconds(20)))[0],
                    let frames = try socket.receive(), let frame = frames.last
                {
                    let message = try WireMessage.decode(frame, limit: WireMessage.maximumLeaderMessageSize)
                    if case .notLeader(let leader, let epoch) = message {
                        throw ClusterCommands.StandbyAnswered(endpoint: endpoint, leader: leader, epoch: epoch)
                    }
                    if case .error(let error) = message {
                        // A heartbeat refused (the leader restarted mid-snapshot): no refusal of the read; its parts stop coming.
                        if lastSaid != nil && error.code == .helloFirst { continue }
                        throw Refused(error: error)
                    }
                    return message
                }
                try handshakes.check()
            }
            try handshakes.checkSilence()
            return nil
        }

        /// Says hello as a tool under `tool`; false when the leader stays silent.
        func sayHello() throws -> Bool {
            guard try handshakes.send(WireMessage.hello(worker: tool, lastRevision: 0, tool: true).encoded(), on: socket, within: timeout)
            else { return false }
            while true {
                guard let answer = try next() else { return false }
                if case .welcome = answer { break }
            }
            lastSaid = .now
            return true
        }
        var greeted = false
        if curve == nil {
            guard try sayHello() else { return nil }
            greeted = true
        }
        // Welcomed (or no hello): whatever comes next, the leader drops the tool as it closes.
        defer { if greeted { socket.sayGoodbye(as: tool) } }
        guard try handshakes.send(WireMessage.snapshotRequest(inParts: true).encoded(), on: socket, within: timeout) else { return nil }
        // Parts of one run (same epoch and revision) by number, each kept as
        // the entries of `name` and the sum of all its entries' hashes: the
        // whole table never sits in memory, yet the parts must add up to the
        // snapshot's state digest. A part 0 of a newer revision starts a new
        // run (the leader started over).
        var run: (epoch: UInt64, revision: UInt64, digest: StateDigest?)?
        var parts: [UInt64: (named: [StateEntry], hashes: UInt128)] = [:]
        var last: UInt64?
        while true {
            let answer: WireMessage?
            do {
                answer = try next()
            } catch let refused as Refused where refused.error.code == .helloFirst && !greeted && keys != nil {
                // A worker key reads after its hello, in its own name (§9): said as a tool, which registers nothing.
                tool = ClusterCommands.keyFileName(keys?.key ?? "")
                guard try sayHello() else { return nil }
                greeted = true
                guard try handshakes.send(WireMessage.snapshotRequest(inParts: true).encoded(), on: socket, within: timeout) else { return nil }
                continue
            }
            guard let message = answer else { return nil }
            guard case .snapshot(let epoch, let revision, let entries, let part, let more, let stateDigest) = message else { continue }
            if let current = run, (epoch, revision) != (current.epoch, current.revision) {
                guard part == 0, revision > current.revision || epoch != current.epoch else { continue }
                parts = [:]
                last = nil
            }
            run = (epoch, revision, stateDigest)
            parts[part] = (
                entries.filter { $0.name == name }.map { StateEntry(name: $0.name, key: $0.key, value: $0.value) },
                StateDigest(entries: entries.map { (name: $0.name, key: $0.key, value: $0.value) }).value
            )
            if !more { last = part }
            guard let last, parts.count == Int(clamping: last) + 1 else { continue }
            var named: [StateEntry] = []
            var sum: UInt128 = 0
            for index in 0...last {
                guard let kept = parts[index] else { throw Malformed(description: "the leader's snapshot has no part \(index)") }
                named += kept.named
                sum &+= kept.hashes
            }
            // Every entry counts toward the digest, so none was lost between parts.
            if let expected = run?.digest, StateDigest(value: sum) != expected {
                throw Malformed(description: "the leader's snapshot of revision \(revision) does not add up to its state digest: try again")
            }
            return GetCommand.State(revision: revision, entries: named)
        }
    }
}
