import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

/// What a peer sends cannot kill the leader, act without saying hello, or
/// leave the log unable to say when an instance ended (issue: robustness).
@Suite("Robustness against peers (real processes, loopback)")
struct RobustnessTests {
    /// A scope registration of `worker` over the open accounts.
    static func accountsRegistration(_ worker: String, number: UInt64 = 1) -> WireMessage {
        .scopeRegister(ScopeRegistration(worker: worker, registration: number, path: "Test.each", source: "ledger.accounts", key: nil, form: .each))
    }

    static func greetFrame(_ account: String, worker: String, sequence: UInt64, instance: UInt64?) throws -> [UInt8] {
        WireMessage.op(
            OpRequest(
                request: RequestID(worker: worker, sequence: sequence), op: "ledger.greet", argument: try CBOREncoder().encode(account),
                instance: instance)
        ).encoded()
    }

    @Test func `a request whose body traps kills the leader once: after the restart its retry is rejected crashed-leader and the rest is served`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path, options: ["--trap-op"], executable: cogdLabExecutable())
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let trap = WireMessage.op(
            OpRequest(request: RequestID(worker: "poison", sequence: 1), op: "ledger.trap", argument: try CBOREncoder().encode("on demand"))
        ).encoded()
        let first = try RawPeer(endpoint: ports.requests)
        try first.send([trap])
        #expect(waitUntil { !leader.process.isRunning }, "the trap stopped the leader")
        // A Swift trap is SIGILL on x86_64 (ud2), SIGTRAP on arm64 (brk): the crash handler marks the note and dies of it.
        #expect(leader.process.terminationReason == .uncaughtSignal)
        #expect([SIGILL, SIGTRAP].contains(leader.process.terminationStatus), "\(leader.process.terminationStatus)")
        let signal = leader.process.terminationStatus == SIGILL ? "SIGILL" : "SIGTRAP"

        leader = try ports.startLeader(data: folder.path, options: ["--trap-op"], executable: cogdLabExecutable())
        let logged = leader.waitForLine { $0.contains("quarantined request") }
        #expect(logged?.hasSuffix(#" WARN  cogd-lab leader: quarantined request "poison#1" (op "ledger.trap"): the previous leader process died of "# + signal + #" while running it; its retries are answered rejected(crashed-leader)"#) == true, "\(leader.lines)")
        // The client retries the same request: rejected, never run again.
        let retry = try RawPeer(endpoint: ports.requests)
        for _ in 0..<2 {
            guard case .reply(let reply)? = try retry.exchange([trap]) else {
                Issue.record("no reply to the retry")
                return
            }
            #expect(reply.outcome == .rejected(code: "crashed-leader", detail: "the leader stopped while running this request (op `ledger.trap`); it is not run again"))
        }
        #expect(leader.process.isRunning, "the retries did not stop the leader")
        // Everything else is served, and nothing acknowledged was lost.
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 7}"#).hasPrefix("applied revision 2"))
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try store.records(from: 1).map(\.name) == ["ledger.open", "ledger.open"])
        #expect(try store.value(name: "ledger.accounts", key: nil) == CBOREncoder().encode(["alice", "bob"]))
        #expect(try ports.errorCounts()["crashed-leader"] == 1)
        // On the record (turnlog.md §2d): the quarantine, then both retries, marked earlier, at revision 1.
        let onRecord = try store.rejections(from: 0, through: 2)
        #expect(onRecord.map(\.code) == ["crashed-leader", "crashed-leader", "crashed-leader"] && onRecord.map(\.earlier) == [false, true, true], "\(onRecord)")
        #expect(onRecord.allSatisfy { $0.revision == 1 && $0.op == "ledger.trap" && $0.request == RequestID(worker: "poison", sequence: 1) }, "\(onRecord)")

        // A third start finds nothing to quarantine: the answer is in dedup.
        leader.stop()
        leader = try ports.startLeader(data: folder.path)
        #expect(leader.lines.allSatisfy { !$0.contains("quarantined") })
        guard case .reply(let stored)? = try RawPeer(endpoint: ports.requests).exchange([trap]) else {
            Issue.record("no reply from dedup")
            return
        }
        #expect(stored.outcome == .rejected(code: "crashed-leader", detail: "the leader stopped while running this request (op `ledger.trap`); it is not run again"))
    }

    @Test func `a request whose body overflows the stack is marked a crash too: the leader dies of SIGSEGV once and its retry is rejected crashed-leader`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path, options: ["--trap-op"], executable: cogdLabExecutable())
        defer { leader.stop() }
        let overflow = WireMessage.op(
            OpRequest(request: RequestID(worker: "deep", sequence: 1), op: "ledger.trap", argument: try CBOREncoder().encode("stack overflow"))
        ).encoded()
        let first = try RawPeer(endpoint: ports.requests)
        try first.send([overflow])
        guard waitUntil({ !leader.process.isRunning }) else {
            Issue.record("the overflow did not stop the leader")
            return
        }
        #expect(leader.process.terminationReason == .uncaughtSignal && leader.process.terminationStatus == SIGSEGV, "\(leader.process.terminationStatus)")

        // The handler ran on the serving thread's alternate stack and marked the note: the first death quarantines.
        leader = try ports.startLeader(data: folder.path, options: ["--trap-op"], executable: cogdLabExecutable())
        let logged = leader.waitForLine { $0.contains("quarantined request") }
        #expect(
            logged?.hasSuffix(
                #" WARN  cogd-lab leader: quarantined request "deep#1" (op "ledger.trap"): the previous leader process died of SIGSEGV while running it; its retries are answered rejected(crashed-leader)"#)
                == true, "\(leader.lines)")
        guard case .reply(let reply)? = try RawPeer(endpoint: ports.requests).exchange([overflow]) else {
            Issue.record("no reply to the retry")
            return
        }
        #expect(reply.outcome == .rejected(code: "crashed-leader", detail: "the leader stopped while running this request (op `ledger.trap`); it is not run again"))
        #expect(leader.process.isRunning, "the retry was not run again")
    }

    /// The `running-request` file a leader killed by SIGKILL while running
    /// `request` leaves (`protocol/turnlog.md` §1): the note, no crash mark,
    /// and no survivor.
    static func unmarkedNote(_ request: RequestID, op: String, argument: [UInt8]) throws -> [UInt8] {
        struct Note: Codable {
            var op: String
            var seq: UInt64
            var digest: [UInt8]
            var worker: String
        }
        func entry(_ id: RequestID) throws -> [UInt8] {
            let body = try CBOREncoder().encode(Note(op: op, seq: id.sequence, digest: RequestDigest.of(op: op, argument: argument), worker: id.worker))
            let length = UInt32(body.count)
            return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
                + [UInt8](repeating: 0, count: 4_096 - body.count)
        }
        let empty = [UInt8](repeating: 0, count: 4 + 4_096)
        return try entry(request) + [0, 0, 0, 0] + empty
    }

    @Test func `a request running when the leader was killed from outside (SIGKILL) runs once more when retried; running at a second such death, it is quarantined`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        leader.stop()
        let note = folder.path + "/running-request"
        let argument = { (account: String) in try CBOREncoder().encode(["account": CBORValue.text(account), "balance": .unsigned(7)]) }
        func open(_ id: RequestID, _ account: String) throws -> OpReply.Outcome? {
            let frame = WireMessage.op(OpRequest(request: id, op: "ledger.open", argument: try argument(account))).encoded()
            guard case .reply(let reply)? = try RawPeer(endpoint: ports.requests).exchange([frame]) else { return nil }
            return reply.outcome
        }

        // Killed while bank#1 ran (SIGKILL: no handler ran, the note is unmarked).
        let first = RequestID(worker: "bank", sequence: 1)
        try Data(try Self.unmarkedNote(first, op: "ledger.open", argument: try argument("bob"))).write(to: URL(fileURLWithPath: note))
        leader = try ports.startLeader(data: folder.path)
        let spared = leader.waitForLine { $0.contains("was running when the previous leader process was killed") }
        #expect(
            spared?.hasSuffix(#" WARN  cogd leader: request "bank#1" (op "ledger.open") was running when the previous leader process was killed from outside (no crash marked it): a retry may run it once more; if the leader dies again while it runs, it is quarantined"#) == true,
            "\(leader.lines)")
        #expect(!leader.lines.contains { $0.contains("quarantined request") })
        #expect(try open(first, "bob") == .applied(revision: 2), "the retry runs")
        #expect(try open(first, "bob") == .applied(revision: 2), "and is answered from dedup after")
        #expect(try ports.errorCounts()["crashed-leader"] == nil)
        leader.stop()

        // bank#2 running at one outside kill, then (its retry running again) at a second: quarantined.
        let second = RequestID(worker: "bank", sequence: 2)
        try Data(try Self.unmarkedNote(second, op: "ledger.open", argument: try argument("carol"))).write(to: URL(fileURLWithPath: note))
        leader = try ports.startLeader(data: folder.path)
        #expect(leader.waitForLine { $0.contains(#"request "bank#2" (op "ledger.open") was running when"#) } != nil, "\(leader.lines)")
        leader.stop()
        // The note as a second kill leaves it; the rest of the file (the survivor) as the leader left it.
        var file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: note)))
        #expect(file.count == 8_204)
        file.replaceSubrange(0..<4_100, with: try Self.unmarkedNote(second, op: "ledger.open", argument: try argument("carol")).prefix(4_100))
        try Data(file).write(to: URL(fileURLWithPath: note))
        leader = try ports.startLeader(data: folder.path)
        let quarantined = leader.waitForLine { $0.contains("quarantined request") }
        #expect(
            quarantined?.hasSuffix(#" WARN  cogd leader: quarantined request "bank#2" (op "ledger.open"): leader processes were killed from outside twice while running it; its retries are answered rejected(crashed-leader)"#) == true,
            "\(leader.lines)")
        #expect(try open(second, "carol") == .rejected(code: "crashed-leader", detail: "the leader stopped while running this request (op `ledger.open`); it is not run again"))
        #expect(try ports.errorCounts()["crashed-leader"] == 1)
        let store = try TurnStore(directory: folder.path, mode: .reader)
        defer { store.close() }
        #expect(try store.value(name: "ledger.accounts", key: nil) == CBOREncoder().encode(["alice", "bob"]))
    }

    @Test func `a fatal signal sent to the leader from outside marks no crash in its running-request file`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        // Without the Swift runtime's backtracer (which may wait for a key before it lets the process die): the handler alone.
        let leader = try CogdProcess(
            executable: cogdExecutable(),
            ["leader", "--data", folder.path, "--requests", ports.requests, "--turns", ports.turns, "--heartbeat-timeout", "5"],
            environment: ["SWIFT_BACKTRACE": "enable=no"])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("cogd leader: data") } != nil, "the leader started: \(leader.lines)")
        kill(leader.process.processIdentifier, SIGSEGV)
        try #require(waitUntil(timeout: .seconds(30)) { !leader.process.isRunning }, "SIGSEGV stopped the leader: \(leader.lines.suffix(5))")
        #expect(leader.process.terminationReason == .uncaughtSignal && leader.process.terminationStatus == SIGSEGV)
        // Byte 4,100: the crash mark (turnlog §1), written only for a signal the process raised itself.
        let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder.path + "/running-request")))
        #expect(file.count == 8_204 && file[4_100] == 0)
    }

    @Test func `a retry under the same request id with another op or argument is refused request-mismatch, also after a restart`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        var leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let close = { (sequence: UInt64) in
            WireMessage.op(OpRequest(request: RequestID(worker: "c", sequence: sequence), op: "ledger.close", argument: try CBOREncoder().encode("alice"))).encoded()
        }
        func outcomes(_ frames: [[UInt8]]) throws -> [OpReply.Outcome?] {
            let peer = try RawPeer(endpoint: ports.requests)
            return try frames.map { frame in
                guard case .reply(let reply)? = try peer.exchange([frame]) else { return nil }
                return reply.outcome
            }
        }
        let mismatch = { (sequence: Int) in
            OpReply.Outcome.rejected(
                code: "request-mismatch", detail: "request c#\(sequence) was answered for another op or argument; a new request needs a new sequence")
        }
        #expect(
            try outcomes([
                try openAccountFrame("alice", balance: 5, worker: "c", sequence: 1),
                try openAccountFrame("alice", balance: 6, worker: "c", sequence: 1),  // another argument
                try close(1),  // another op
                try openAccountFrame("alice", balance: 5, worker: "c", sequence: 1),  // a true retry
                try openAccountFrame("alice", balance: 5, worker: "c", sequence: 2),  // unchanged
                try close(2),
            ]) == [.applied(revision: 1), mismatch(1), mismatch(1), .applied(revision: 1), .unchanged, mismatch(2)])
        // After a restart the answers come from the log and dedup, digests with them.
        leader.stop()
        leader = try ports.startLeader(data: folder.path)
        #expect(
            try outcomes([
                try openAccountFrame("alice", balance: 6, worker: "c", sequence: 1), try openAccountFrame("alice", balance: 5, worker: "c", sequence: 1),
                try close(2), try openAccountFrame("alice", balance: 5, worker: "c", sequence: 2),
            ]) == [mismatch(1), .applied(revision: 1), mismatch(2), .unchanged])
        #expect(try TurnStore(directory: folder.path, mode: .reader).lastRevision == 1, "nothing ran twice")
    }

    @Test func `any v but the integer 1 is a version error`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let peer = try RawPeer(endpoint: ports.requests)
        let body: CBORValue = .map([(.text("worker"), .text("w")), (.text("lastRevision"), .unsigned(0))])
        let versions: [(CBORValue, String)] = [
            (.negative(0), "-1"), (.float(1.0), "1.0"), (.unsigned(2), "2"), (.text("1"), "\"1\""),
        ]
        for (version, shown) in versions {
            let frame = CBORValue.map([(.text("v"), version), (.text("type"), .text("hello")), (.text("body"), body)]).encodedBytes
            guard case .error(let error)? = try peer.exchange([frame]) else {
                Issue.record("no answer to v \(shown)")
                continue
            }
            #expect(error.code == "version", "v \(shown)")
            #expect(error.message == "protocol version \(shown) is not supported (this side speaks 1)")
        }
        #expect(try peer.exchange(.hello(worker: "w", lastRevision: 0))?.typeName == "welcome")
    }

    @Test func `a connection that never said hello registers no scopes, gets no snapshot or catch-up, and its heartbeats are refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let stranger = try RawPeer(endpoint: ports.requests)
        let refusals: [(WireMessage, String)] = [
            (RobustnessTests.accountsRegistration("ghost"), "`scope-register` needs a worker that said hello on this connection (worker ghost has not); say hello first"),
            (.snapshotRequest(inParts: true), "`snapshot-request` needs a worker that said hello on this connection; say hello first"),
            (.snapshotRequest(inParts: false), "`snapshot-request` needs a worker that said hello on this connection; say hello first"),
            (.catchUpRequest(from: 1), "`catch-up-request` needs a worker that said hello on this connection; say hello first"),
            (.heartbeat(worker: "ghost", revision: 1), "`heartbeat` needs a worker that said hello on this connection (worker ghost has not); say hello first"),
        ]
        for (message, expected) in refusals {
            guard case .error(let error)? = try stranger.exchange(message) else {
                Issue.record("no answer to \(message.typeName)")
                continue
            }
            #expect(error.code == "hello-first")
            #expect(error.message == expected)
        }
        #expect(try ports.openScopeInstances().isEmpty, "nothing was registered")
        // Its op in the name it never said hello with, claiming an instance, is not applied.
        guard case .reply(let reply)? = try stranger.exchange([try RobustnessTests.greetFrame("alice", worker: "ghost", sequence: 1, instance: 1 << 32 | 1)]) else {
            Issue.record("no reply to the op")
            return
        }
        #expect(reply.outcome == .rejected(code: "retired-scope", detail: "scope instance 4294967297 is retired or not owned by ghost"))
        // After a hello, the same connection is served.
        #expect(try stranger.exchange(.hello(worker: "ghost", lastRevision: 0))?.typeName == "welcome")
        #expect(try stranger.exchange(.heartbeat(worker: "ghost", revision: 1))?.typeName == "welcome")
        guard case .scopeRegistered(_, _, _, let members)? = try stranger.exchange(RobustnessTests.accountsRegistration("ghost")) else {
            Issue.record("no registration reply after hello")
            return
        }
        #expect(members.count == 1)
        guard case .snapshot(_, let revision, let entries, _, _, _)? = try stranger.exchange(.snapshotRequest(inParts: false)) else {
            Issue.record("no snapshot after hello")
            return
        }
        #expect(revision == 1 && entries.count == 2)
        guard case .turns(_, let records)? = try stranger.exchange(.catchUpRequest(from: 1)) else {
            Issue.record("no catch-up after hello")
            return
        }
        #expect(records.map(\.revision) == [1])
    }

    @Test func `a hello claiming a revision beyond the leader's log is refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let peer = try RawPeer(endpoint: ports.requests)
        guard case .error(let error)? = try peer.exchange(.hello(worker: "w", lastRevision: 2)) else {
            Issue.record("no answer")
            return
        }
        #expect(error.code == "revision-ahead")
        #expect(error.message == "worker w says it holds revision 2, but this leader's log ends at revision 1; sync again from revision 0")
        #expect(try peer.exchange(.hello(worker: "w", lastRevision: 1))?.typeName == "welcome")
    }

    @Test func `request sequences outside 1 to 2^63-1 are refused, and a worker whose name used the last one starts and keeps serving`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        let peer = try RawPeer(endpoint: ports.requests)
        for sequence in [0, UInt64(1) << 63, .max] {
            guard case .reply(let reply)? = try peer.exchange([try openAccountFrame("a\(sequence)", balance: 1, worker: "big", sequence: sequence)]) else {
                Issue.record("no reply to sequence \(sequence)")
                continue
            }
            #expect(reply.outcome == .rejected(code: "bad-request", detail: "request sequences are 1 to 2^63-1; this one is \(sequence)"))
        }
        // The highest sequence allowed: the worker that takes the name next
        // has no sequence left for its requests, and says so instead of trapping.
        guard case .reply(let last)? = try peer.exchange([try openAccountFrame("alice", balance: 1, worker: "big", sequence: (1 << 63) - 1)]) else {
            Issue.record("no reply")
            return
        }
        #expect(last.outcome == .applied(revision: 1))
        let worker = try ports.startWorker("big", rig: "ledger-greeter")
        defer { worker.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 5}"#).hasPrefix("applied revision 2"))
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker big: applied 2") } != nil, "\(worker.lines)")
        #expect(worker.process.isRunning, "the worker did not trap numbering its greetings")
    }

    @Test func `a registration number sent again replaces the registration: the old instances retire in a record and their requests are refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let peer = try RawPeer(endpoint: ports.requests)
        #expect(try peer.exchange(.hello(worker: "r1", lastRevision: 0))?.typeName == "welcome")
        guard case .scopeRegistered(_, _, let firstRevision, let first)? = try peer.exchange(RobustnessTests.accountsRegistration("r1")),
            case .scopeRegistered(_, _, let secondRevision, let second)? = try peer.exchange(RobustnessTests.accountsRegistration("r1"))
        else {
            Issue.record("no registration replies")
            return
        }
        #expect(first.count == 1 && second.count == 1)
        #expect(first[0].instance != second[0].instance, "a new instance for alice")
        #expect(firstRevision == 1 && secondRevision == 2, "the second registration is as of its retirement record")
        let store = try TurnStore(directory: folder.path, mode: .reader)
        let record = try store.records(from: 2).first
        #expect(record?.name == "cogd.scopeReregistered")
        #expect(record?.origin.isSystem == true && record?.writes.isEmpty == true)
        #expect(record?.scopeEvents.map { [$0.kind == .retire ? "retire" : "open", "\($0.instance)", $0.worker ?? "", "\($0.registration ?? 0)"] }
            == [["retire", "\(first[0].instance)", "r1", "1"]])
        #expect(try ports.openScopeInstances() == [Int(second[0].instance)])
        guard case .reply(let stale)? = try peer.exchange([try RobustnessTests.greetFrame("alice", worker: "r1", sequence: 1, instance: first[0].instance)]),
            case .reply(let fresh)? = try peer.exchange([try RobustnessTests.greetFrame("alice", worker: "r1", sequence: 2, instance: second[0].instance)])
        else {
            Issue.record("no replies")
            return
        }
        #expect(stale.outcome == .rejected(code: "retired-scope", detail: "scope instance \(first[0].instance) is retired or not owned by r1"))
        #expect(fresh.outcome == .applied(revision: 3))
    }

    @Test func `a worker given up for silence has its instances retired in a record of their own`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 1)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let peer = try RawPeer(endpoint: ports.requests)
        #expect(try peer.exchange(.hello(worker: "quiet", lastRevision: 0))?.typeName == "welcome")
        guard case .scopeRegistered(_, _, _, let members)? = try peer.exchange(RobustnessTests.accountsRegistration("quiet")) else {
            Issue.record("no registration reply")
            return
        }
        // It never heartbeats: past the timeout its instance retires in revision 2.
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(waitUntil { (try? store.records(from: 2).first) != nil })
        let record = try store.records(from: 2).first
        #expect(record?.name == "cogd.workerGone")
        #expect(record?.scopeEvents.map(\.instance) == members.map(\.instance))
        #expect(record?.scopeEvents.allSatisfy { $0.kind == .retire && $0.worker == "quiet" } == true)
        #expect(try ports.openScopeInstances().isEmpty)
    }

    @Test func `a leader paused past the heartbeat timeout gives no healthy worker up when it resumes`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 1.5)
        defer {
            leader.resume()
            leader.stop()
        }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let worker = try ports.startWorker("steady", rig: "ledger-greeter")
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.hasSuffix(" cogd worker steady: applied 2") } != nil, "alice was greeted")
        var revision = 2
        for round in 1...3 {
            leader.pause()
            usleep(3_000_000)  // the fault: the leader is stopped twice the timeout
            leader.resume()
            revision += 1
            #expect(try ports.call("ledger.open", #"{"account": "a\#(round)", "balance": 0}"#).hasPrefix("applied revision \(revision)"))
            revision += 1  // the new account's greeting
            #expect(worker.waitForLine { $0.hasSuffix(" cogd worker steady: applied \(revision)") } != nil, "round \(round): \(worker.lines.suffix(3))")
            // Once its heartbeat reports that revision, a worker given up at
            // the resume would have heard `gone` (counted) by now.
            let reported = waitUntil {
                let status = try? runCogd(["status", "--leader", ports.requests, "--json"])
                let object = status.flatMap { try? JSONSerialization.jsonObject(with: Data($0.stdout.utf8)) as? [String: Any] }
                let workers = object?["workers"] as? [[String: Any]] ?? []
                return workers.contains { $0["name"] as? String == "steady" && $0["appliedRevision"] as? Int == revision }
            }
            #expect(reported, "round \(round): the worker reports revision \(revision)")
        }
        #expect(try ports.errorCounts()["gone"] == nil)
        let store = try TurnStore(directory: folder.path, mode: .reader)
        #expect(try store.records(from: 1).filter { $0.name.hasPrefix("cogd.") }.isEmpty, "no instance retired")
    }
}
