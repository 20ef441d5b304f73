import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Synchronization
import Testing

@testable import CogLab
@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback port free now, in 15000–19999 (below Linux's ephemeral
/// range, so no outgoing connection can take it before the server given it
/// binds); never the same one twice in this test process.
///
/// The tests' processes take their ports from ranges that do not meet, so
/// none can take a port another found free and has not bound yet: the Python
/// clients 10000–14999 (`clients/cogwire.py`), this function 15000–19999, a
/// lab run left to its default 20000–31999, and a lab run given a fixed
/// `--ports` range 32000–32767.
func freePort() -> Int {
    for _ in 0..<1_000 {
        let port = Int.random(in: 15_000...19_999)
        guard handedOutPorts.withLock({ $0.insert(port).inserted }) else { continue }
        if LoopbackPorts.isFree(port) { return port }
    }
    fatalError("no free loopback port between 15000 and 19999")
}

private let handedOutPorts = Mutex<Set<Int>>([])

/// Polls `condition` every 50 ms until it holds or `timeout` passes.
func waitUntil(timeout: Duration = .seconds(15), _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

/// One `cogd` child whose output lines the test reads (bounded waits), and
/// which is always stopped at the end.
final class CogdProcess {
    let process = Process()
    private let output = Pipe()
    private var buffer = Data()
    private var readLines: [String] = []
    /// Every whole line the child has written so far (what is waiting in the
    /// pipe is read first, without waiting): a check that a line is absent
    /// sees all the output up to now.
    var lines: [String] {
        readAvailable()
        _ = takeLines { _ in false }
        return readLines
    }

    convenience init(_ arguments: [String]) throws {
        try self.init(executable: cogdExecutable(), arguments)
    }

    /// Any program, its output read the same way; `input` (when given) is
    /// its standard input, `environment` added to this process's.
    init(
        executable: URL, _ arguments: [String], environment: [String: String] = [:], input: Pipe? = nil,
        directory: URL? = nil
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        // Workers log each revision applied only at debug; tests wait for those lines.
        process.environment = ProcessInfo.processInfo.environment.merging(["COGD_LOG_LEVEL": "debug"]) { $1 }.merging(environment) { $1 }
        if let input { process.standardInput = input }
        if let directory { process.currentDirectoryURL = directory }
        process.standardOutput = output
        process.standardError = output
        try process.run()
    }

    /// Waits until a line satisfying `predicate` appears; returns it.
    @discardableResult
    func waitForLine(timeout: Duration = .seconds(20), _ predicate: (String) -> Bool) -> String? {
        // Lines read earlier, then whole lines an earlier call left in the
        // buffer (it returns at its match), then what the child writes next.
        if let line = readLines.first(where: predicate) ?? takeLines(matching: predicate) { return line }
        guard !outputClosed else { return nil }
        let deadline = ContinuousClock.now + timeout
        let handle = output.fileHandleForReading
        let descriptor = handle.fileDescriptor
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
            if let line = takeLines(matching: predicate) { return line }
        }
        return nil
    }

    /// Moves what the pipe holds now into the buffer, without waiting.
    private func readAvailable() {
        guard !outputClosed else { return }
        let handle = output.fileHandleForReading
        var poller = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
        for _ in 0..<1_000 where poll(&poller, 1, 0) > 0 {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
        }
    }

    /// Moves whole lines from the buffer to `lines` until one matches.
    private func takeLines(matching predicate: (String) -> Bool) -> String? {
        while let newline = buffer.firstIndex(of: 0x0a) {
            let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            readLines.append(line)
            if predicate(line) { return line }
        }
        return nil
    }

    func interrupt() { kill(process.processIdentifier, SIGINT) }
    func killHard() { kill(process.processIdentifier, SIGKILL) }
    /// Freezes the process (SIGSTOP), as a partition or a stalled host would.
    func pause() { kill(process.processIdentifier, SIGSTOP) }
    func resume() { kill(process.processIdentifier, SIGCONT) }

    /// Stops the child (SIGTERM, then SIGKILL) and waits for it; then
    /// keeps what it wrote that no wait has read yet and closes the pipe
    /// (a descriptor left to deinit outlived the test: see `PipeReader`).
    func stop() {
        Tests.stop(process)
        guard !outputClosed, !process.isRunning else { return }
        readAvailable()
        outputClosed = true
        let handle = output.fileHandleForReading
        try? handle.close()
    }
    private var outputClosed = false

    deinit { stop() }
}

/// The frame of an `op` request `worker#sequence` opening `account` with
/// `balance` (ledger rig), for tests that speak the wire themselves.
func openAccountFrame(_ account: String, balance: UInt64, worker: String, sequence: UInt64) throws -> [UInt8] {
    let argument = try CBOREncoder().encode(["account": CBORValue.text(account), "balance": .unsigned(balance)])
    return WireMessage.op(OpRequest(request: RequestID(worker: worker, sequence: sequence), op: "ledger.open", argument: argument)).encoded()
}

/// `line` as the JSON object a `--log-format json` leader or worker writes
/// per event; nil when it is not one.
func logEvent(_ line: String) -> [String: Any]? {
    guard line.hasPrefix("{") else { return nil }
    return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
}

/// A leader on fixed free ports over `data`.
struct ClusterPorts {
    let requests = "tcp://127.0.0.1:\(freePort())"
    let turns = "tcp://127.0.0.1:\(freePort())"

    /// Starts `cogd leader` (with `options` after the usual ones) and waits for its first line.
    /// A leader on these ports; `executable` may be the lab's (`cogdLabExecutable()`, which takes `--trap-op`).
    func startLeader(data: String, heartbeatTimeout: Double = 5, options: [String] = [], executable: URL = cogdExecutable()) throws -> CogdProcess {
        let leader = try CogdProcess(executable: executable, [
            "leader", "--data", data, "--requests", requests, "--turns", turns, "--heartbeat-timeout", String(heartbeatTimeout),
        ] + options)
        // Its first event: `… INFO  cogd leader: data …` (`cogd-lab leader:` from the lab's executable), or
        // under `--log-format json` the event `serving`.
        let program = executable.lastPathComponent
        #expect(leader.waitForLine { $0.contains("\(program) leader: data") || $0.contains(#""event":"serving""#) } != nil, "the leader started")
        return leader
    }

    /// A worker in a group of its own (`--group` its name, or `group`), so it
    /// runs every effect of its rig itself (without `--group`, workers of one
    /// rig share them).
    func startWorker(_ name: String, rig: String = "ledger", group: String? = nil) throws -> CogdProcess {
        let worker = try CogdProcess(["worker", "--leader", requests, "--name", name, "--rig", rig, "--group", group ?? name])
        #expect(worker.waitForLine { $0.contains("synced at revision") } != nil, "worker \(name) synced")
        return worker
    }

    /// The scope instances the leader holds open, from `cogd status --json`.
    func openScopeInstances() throws -> [Int] {
        let status = try runCogd(["status", "--leader", requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        return object?["openScopeInstances"] as? [Int] ?? []
    }

    /// The leader's refusals by code, from `cogd status --json`.
    func errorCounts() throws -> [String: Int] {
        let status = try runCogd(["status", "--leader", requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        return object?["errors"] as? [String: Int] ?? [:]
    }

    func call(_ op: String, _ json: String, requestID: String? = nil) throws -> String {
        var arguments = ["call", op, json, "--leader", requests]
        if let requestID { arguments += ["--request-id", requestID] }
        let result = try runCogd(arguments)
        return (result.stdout + result.stderr).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Names the helper file so `Tests.stop` resolves to the shared helper.
enum Tests {
    static func stop(_ process: Process) { stopProcess(process) }
}

extension TurnStore {
    /// How many greetings `account` has had from greeter scopes (ledger rig); nil before the first.
    func greetings(of account: String) throws -> Int? {
        try value(name: "ledger.greeted", key: CBOREncoder().encode(account)).map { try CBORDecoder().decode(Int.self, from: $0) }
    }
}

/// A raw DEALER on a leader's requests endpoint, for tests that script the
/// wire frame by frame; closed with its context when released.
final class RawPeer {
    private let context: ZMQContext
    private let socket: ZMQSocket

    /// `receiveHighWaterMark`: how many messages ZeroMQ takes in for this
    /// peer before it stops reading its connection (1: a peer that reads
    /// nothing leaves what the leader sends in the leader's queues).
    init(endpoint: String, identity: String? = nil, receiveHighWaterMark: Int32? = nil, keys: CurveClientKeys? = nil) throws {
        context = try ZMQContext()
        socket = try ZMQSocket(context, .dealer, linger: .zero)
        if let identity { try socket.setIdentity(identity) }
        try socket.useCurve(keys)
        if let receiveHighWaterMark { try socket.setHighWaterMarks(send: 1_000, receive: receiveHighWaterMark) }
        try socket.connect(endpoint)
    }

    deinit {
        socket.close()
        context.close()
    }

    func send(_ frames: [[UInt8]]) throws { _ = try socket.send(frames) }

    /// The leader's next message (nil after `timeout`, or if it does not decode).
    func next(within timeout: Duration = .seconds(10)) throws -> WireMessage? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try ZMQSocket.poll([socket], timeout: .milliseconds(100))[0], let frames = try socket.receive() {
                return try? WireMessage.decode(frames[frames.count - 1], limit: WireMessage.maximumLeaderMessageSize)
            }
        }
        return nil
    }

    /// Sends one message (as frames) and returns the answer.
    func exchange(_ frames: [[UInt8]]) throws -> WireMessage? {
        try send(frames)
        return try next()
    }

    func exchange(_ message: WireMessage) throws -> WireMessage? { try exchange([message.encoded()]) }

    /// Sends op frames pipelined, `round` at a time, each round answered
    /// before the next goes (bounded in time); returns the replies.
    func replies(to frames: [[UInt8]], round: Int = 200) throws -> [OpReply] {
        var replies: [OpReply] = []
        for start in stride(from: 0, to: frames.count, by: round) {
            let end = min(start + round, frames.count)
            for frame in frames[start..<end] { try send([frame]) }
            let deadline = ContinuousClock.now + .seconds(30)
            while replies.count < end, ContinuousClock.now < deadline {
                if case .reply(let reply)? = try next(within: deadline - .now) { replies.append(reply) }
            }
        }
        return replies
    }
}

/// A leader played by the test: a ROUTER bound on a free loopback port
/// that answers what a `cogd` child sends as the test scripts it; closed
/// with its context when released.
final class ScriptedLeader {
    let endpoint = "tcp://127.0.0.1:\(freePort())"
    private let context: ZMQContext
    private let router: ZMQSocket

    init() throws {
        context = try ZMQContext()
        router = try ZMQSocket(context, .router, linger: .zero)
        try router.bind(endpoint)
    }

    deinit {
        router.close()
        context.close()
    }

    /// The next message a peer sends, with its connection's identity (nil
    /// after `timeout`; a frame that does not decode is `undecodable`).
    func next(within timeout: Duration = .seconds(10)) throws -> (identity: [UInt8], message: WireMessage?)? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try ZMQSocket.poll([router], timeout: .milliseconds(100))[0], let frames = try router.receive(), frames.count >= 2 {
                return (frames[0], try? WireMessage.decode(frames[frames.count - 1]))
            }
        }
        return nil
    }

    func send(_ message: WireMessage, to identity: [UInt8]) throws {
        _ = try router.send([identity, message.encoded()])
    }
}

/// Runs a program to completion with a bounded wait (SIGKILL at the
/// deadline); its exit status and its output (stdout and stderr, in order).
func runBounded(
    _ executable: URL, _ arguments: [String], timeout: Duration = .seconds(30)
) throws -> (status: Int32, output: String) {
    let child = try CogdProcess(executable: executable, arguments)
    // Reads every line until the child closes its output (nil at end of file or the deadline).
    child.waitForLine(timeout: timeout) { _ in false }
    waitForExit(child.process, timeout: .seconds(5))
    return (child.process.terminationStatus, child.lines.joined(separator: "\n"))
}

