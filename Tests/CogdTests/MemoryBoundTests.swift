import CLMDB
import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation
import Synchronization
import Testing

@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

/// Whatever a peer sends, or fails to read, the leader's memory stays
/// bounded (`protocol/cogwire.md` §8): each case measured on the leader's
/// anonymous RSS, which must grow by less than 64 MiB.
@Suite("Memory stays bounded (real processes, loopback)", .serialized, .timeLimit(.minutes(10)))
struct MemoryBoundTests {
    static let bound = 64 << 20

    // MARK: - Cases

    @Test func `300 unread whole snapshot-requests with a 2 MB state: RssAnon grows under 64 MiB and another peer is served`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        // A state of about 2 MB: 10 screens showing trails of 200 KB each.
        let setup = try RawPeer(endpoint: ports.requests)
        try MemoryBoundTests.openScreens(1...10, textBytes: 200_000, through: setup)
        let revision = try MemoryBoundTests.status(setup).revision

        let watch = RssWatch(pid: leader.process.processIdentifier)
        // A worker that said hello asks for the whole state 300 times, then
        // opens an account (seen once every request before it was taken),
        // and reads nothing.
        let flooder = try RawPeer(endpoint: ports.requests, receiveHighWaterMark: 1)
        #expect(try flooder.exchange(.hello(worker: "flooder", lastRevision: 0))?.typeName == "welcome")
        let request = WireMessage.snapshotRequest(inParts: false).encoded()
        for _ in 0..<300 { try flooder.send([request]) }
        try flooder.send([openAccountFrame("flooder-done", balance: 1, worker: "flooder", sequence: 1)])

        // Another peer is answered meanwhile (within the exchange's bounded wait).
        let other = try RawPeer(endpoint: ports.requests)
        guard case .reply(let reply)? = try other.exchange([openAccountFrame("alice", balance: 5, worker: "other", sequence: 1)]) else {
            Issue.record("no reply to another peer's op while the snapshots are unread; \(watch.report())")
            return
        }
        #expect(reply.outcome.isApplied, "\(reply.outcome)")
        #expect(
            try waitUntil { try MemoryBoundTests.status(other).revision == revision + 2 },
            "the flooder's requests were all taken; \(watch.report())")
        // What it is owed has gone as far as the queues take it: the next
        // batch (the status asked for below) comes after that pass.
        _ = try MemoryBoundTests.status(other)
        let report = watch.finish()
        MemoryBoundTests.log("300 unread whole snapshots (2 MB state)", report)
        #expect(report.growth < MemoryBoundTests.bound, "\(report)")
        #expect(leader.process.isRunning)
    }

    @Test func `150 unread catch-ups of 200 KB records: RssAnon grows under 64 MiB and the busy refusals are counted`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        // Records of 200 KB each: a catch-up answer holds the first record and
        // at most 64 KiB past it, so one record here.
        let setup = try RawPeer(endpoint: ports.requests)
        try MemoryBoundTests.openScreens(1...10, textBytes: 200_000, through: setup)
        let revision = try MemoryBoundTests.status(setup).revision
        #expect(try setup.exchange(.hello(worker: "probe", lastRevision: 0))?.typeName == "welcome")
        guard case .turns(_, let records)? = try setup.exchange(.catchUpRequest(from: 1)) else {
            Issue.record("no catch-up")
            return
        }
        let answerBytes = WireMessage.turns(epoch: 1, records: records).encoded().count
        #expect(records.count == 1 && answerBytes > 200_000 && answerBytes < 300_000, "a catch-up answer is \(answerBytes) bytes")

        let watch = RssWatch(pid: leader.process.processIdentifier)
        let flooder = try RawPeer(endpoint: ports.requests, receiveHighWaterMark: 1)
        #expect(try flooder.exchange(.hello(worker: "flooder", lastRevision: 0))?.typeName == "welcome")
        let request = WireMessage.catchUpRequest(from: 1).encoded()
        for _ in 0..<150 { try flooder.send([request]) }
        try flooder.send([openAccountFrame("flooder-done", balance: 1, worker: "flooder", sequence: 1)])
        #expect(
            try waitUntil { try MemoryBoundTests.status(setup).revision == revision + 1 },
            "the flooder's requests were all taken; \(watch.report())")
        guard case .reply(let reply)? = try RawPeer(endpoint: ports.requests).exchange([openAccountFrame("alice", balance: 5, worker: "other", sequence: 1)]) else {
            Issue.record("no reply to another peer's op while the catch-ups are unread; \(watch.report())")
            return
        }
        #expect(reply.outcome.isApplied, "\(reply.outcome)")
        let report = watch.finish()
        let errors = try ports.errorCounts()
        MemoryBoundTests.log("150 unread catch-ups of \(answerBytes) bytes (errors \(errors))", report)
        #expect(report.growth < MemoryBoundTests.bound, "\(report); errors \(errors)")
        // The answers past the first of a batch are refused `busy`, counted.
        #expect((errors["busy"] ?? 0) >= 1, "\(errors)")
        #expect((errors["busy"] ?? 0) < 150, "\(errors)")
    }

    /// What a subscriber that reads nothing may make the leader hold
    /// (`cogwire.md` §8: `Leader.turnsQueueBytes`), plus 8 MiB for the
    /// leader's own batches and allocator (+27.9 MiB before the byte bound,
    /// +14.9 MiB with it, for 85 MiB published).
    static let subscriberBound = Leader.turnsQueueBytes + (8 << 20)

    @Test func `a subscriber that never reads while over 64 MiB of turns go out: RssAnon grows under the turn-stream byte bound and a reading worker converges`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        let worker = try ports.startWorker("reader")
        defer { worker.stop() }
        let peer = try RawPeer(endpoint: ports.requests)

        // A subscriber taking in one message at a time, which reads the
        // first (so it is known to be subscribed) and then nothing.
        let context = try ZMQContext()
        defer { context.close() }
        let subscriber = try ZMQSocket(context, .subscriber, linger: .zero)
        defer { subscriber.close() }
        try subscriber.setHighWaterMarks(send: 1_000, receive: 1)
        try subscriber.subscribeToAll()
        try subscriber.connect(ports.turns)
        var subscribed = false
        for sequence in 1...100 where !subscribed {
            guard case .reply? = try peer.exchange([openAccountFrame("probe-\(sequence)", balance: 1, worker: "prober", sequence: UInt64(sequence))]) else { break }
            subscribed = try ZMQSocket.poll([subscriber], timeout: .milliseconds(100))[0] && (try subscriber.receive()) != nil
        }
        try #require(subscribed, "the subscriber got a turn")

        // 450 openings of one screen with a trail text of 200 KB (each its
        // own), each closed again: the state stays small, about 90 MB of
        // records go out. At most 10 requests in flight, so the batches —
        // and the turn messages, about 1 MiB each — stay alike.
        let watch = RssWatch(pid: leader.process.processIdentifier)
        var frames: [[UInt8]] = []
        var sequence: UInt64 = 0
        for index in 0..<450 {
            sequence += 1
            frames.append(try MemoryBoundTests.openScreenFrame(1, text: MemoryBoundTests.text(index, bytes: 200_000), worker: "publisher", sequence: sequence))
            sequence += 1
            frames.append(try MemoryBoundTests.closeScreenFrame(1, worker: "publisher", sequence: sequence))
        }
        let publishedBytes = frames.reduce(0) { $0 + $1.count }
        let replies = try peer.replies(to: frames, round: 10)
        #expect(replies.count == frames.count && replies.allSatisfy(\.outcome.isApplied), "\(replies.count) replies")
        let revision = try MemoryBoundTests.status(peer).revision
        // The worker that reads keeps up (catching up by the gap where it fell behind).
        #expect(
            try waitUntil(timeout: .seconds(30)) {
                try MemoryBoundTests.status(peer).workers.first { $0.name == "reader" }?.appliedRevision ?? 0 >= revision
            },
            "the reading worker converged at revision \(revision); \(watch.report())")
        var report = watch.finish()
        report.bound = MemoryBoundTests.subscriberBound
        MemoryBoundTests.log("a subscriber reading nothing while \(publishedBytes >> 20) MiB of ops were published", report)
        #expect(report.growth < MemoryBoundTests.subscriberBound, "\(report)")
        #expect(leader.process.isRunning)
    }

    @Test func `records too large for one turn message are not published, counted turn-unpublished, and a worker fetches them by the gap`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        let worker = try ports.startWorker("reader")
        defer { worker.stop() }
        let peer = try RawPeer(endpoint: ports.requests)

        // A subscriber that never reads, with one message of room.
        let context = try ZMQContext()
        defer { context.close() }
        let subscriber = try ZMQSocket(context, .subscriber, linger: .zero)
        defer { subscriber.close() }
        try subscriber.setHighWaterMarks(send: 1_000, receive: 1)
        try subscriber.subscribeToAll()
        try subscriber.connect(ports.turns)

        // 60 openings of a 600 KB trail text, each closed again: records over
        // `Leader.turnsMessageBytes` (about 36 MB of them) alternate with
        // small ones, which are published and show each gap.
        let watch = RssWatch(pid: leader.process.processIdentifier)
        var frames: [[UInt8]] = []
        var sequence: UInt64 = 0
        for index in 0..<60 {
            sequence += 1
            frames.append(try MemoryBoundTests.openScreenFrame(1, text: MemoryBoundTests.text(index, bytes: 600_000), worker: "publisher", sequence: sequence))
            sequence += 1
            frames.append(try MemoryBoundTests.closeScreenFrame(1, worker: "publisher", sequence: sequence))
        }
        let replies = try peer.replies(to: frames, round: 1)
        #expect(replies.count == frames.count && replies.allSatisfy(\.outcome.isApplied), "\(replies.count) replies")
        let status = try MemoryBoundTests.status(peer)
        #expect(status.errorCounts["turn-unpublished"] == 60, "\(status.errorCounts)")
        #expect(
            try waitUntil(timeout: .seconds(30)) {
                try MemoryBoundTests.status(peer).workers.first { $0.name == "reader" }?.appliedRevision ?? 0 >= status.revision
            },
            "the reading worker fetched the unpublished records and converged at revision \(status.revision)")
        var report = watch.finish()
        report.bound = MemoryBoundTests.subscriberBound
        MemoryBoundTests.log("a subscriber reading nothing while 60 records over a turn message went unpublished", report)
        #expect(report.growth < MemoryBoundTests.subscriberBound, "\(report)")
        #expect(leader.process.isRunning)
    }

    @Test(arguments: ["requests", "turns"])
    func `a message whose last frame never comes: the connection is shut down, RssAnon grows under 64 MiB, a worker stays served`(socket: String) throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        let worker = try ports.startWorker("reader")
        defer { worker.stop() }
        #expect(worker.waitForLine { $0.contains("cogd worker reader: synced at revision 0") } != nil, "\(worker.lines)")

        // A peer speaking ZMTP by hand: 1 MiB frames, each saying "more", up to 200 MiB.
        let watch = RssWatch(pid: leader.process.processIdentifier)
        let endpoint = socket == "requests" ? ports.requests : ports.turns
        let sent = try UnfinishedMessagePeer(endpoint: endpoint, socketType: socket == "requests" ? "DEALER" : "SUB").sendFrames(200)
        let report = watch.finish()
        MemoryBoundTests.log("\(sent) MiB of one message never finished, to the \(socket) socket", report)
        #expect(sent < 200, "the leader closed the connection before 200 MiB: \(sent) MiB went")
        #expect(report.growth < MemoryBoundTests.bound, "\(report)")
        #expect(try ports.errorCounts()["unfinished-message"] == 1)
        // Everyone else is served on: a turn reaches the reading worker.
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        #expect(
            try waitUntil(timeout: .seconds(30)) {
                let status = try runCogd(["status", "--leader", ports.requests, "--json"]).stdout
                return status.contains(#""name": "reader""#) && status.contains(#""appliedRevision": 1"#)
            }, "the reading worker applied revision 1")
        #expect(leader.process.isRunning)
    }

    @Test func `36 MiB of whole messages sent while the leader is stopped are all served after it resumes: none taken for unfinished`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        let peer = try RawPeer(endpoint: ports.requests)
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        // 40 openings of a screen with a 900 KB trail text, all in flight while the leader is stopped.
        let frames = try (1...40).map { try MemoryBoundTests.openScreenFrame($0, text: MemoryBoundTests.text($0, bytes: 900_000), worker: "bulk", sequence: UInt64($0)) }
        kill(leader.process.processIdentifier, SIGSTOP)
        for frame in frames { try peer.send([frame]) }
        usleep(2_000_000)
        kill(leader.process.processIdentifier, SIGCONT)
        var answered: [OpReply] = []
        let deadline = ContinuousClock.now + .seconds(60)
        while answered.count < 40, ContinuousClock.now < deadline {
            if case .reply(let reply)? = try peer.next(within: deadline - .now) { answered.append(reply) }
        }
        #expect(answered.count == 40 && answered.allSatisfy(\.outcome.isApplied), "\(answered.count) replies")
        let errors = try ports.errorCounts()
        #expect(errors["unfinished-message"] == nil, "\(errors)")
    }

    @Test func `a snapshot in parts its requester never reads is abandoned at the deadline, its LMDB read released`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(
            data: folder.path, heartbeatTimeout: 60, options: ["--snapshot-part-bytes", "1024", "--snapshot-deadline", "1"])
        defer { leader.stop() }
        let pid = leader.process.processIdentifier
        // A state of about 16 MB in 2,000 entries of 8 KB, each a part of its
        // own: far more parts than ZeroMQ's queue of 500 and the sockets'
        // buffers take.
        let setup = try RawPeer(endpoint: ports.requests)
        try MemoryBoundTests.openScreens(1...2_000, textBytes: 8_000, through: setup)
        #expect(try MemoryBoundTests.activeReaders(folder.path, pid: pid).isEmpty, "no read held before the snapshot")

        let watch = RssWatch(pid: pid)
        let requester = try RawPeer(endpoint: ports.requests, receiveHighWaterMark: 1)
        #expect(try requester.exchange(.hello(worker: "requester", lastRevision: 0))?.typeName == "welcome")
        try requester.send([WireMessage.snapshotRequest(inParts: true).encoded()])
        #expect(
            try waitUntil { try !MemoryBoundTests.activeReaders(folder.path, pid: pid).isEmpty },
            "the snapshot holds an LMDB read while it goes out")
        #expect(
            try waitUntil { try MemoryBoundTests.status(setup).errorCounts["snapshot-abandoned"] == 1 },
            "the unread snapshot was given up; \(watch.report())")
        #expect(try MemoryBoundTests.activeReaders(folder.path, pid: pid).isEmpty, "its LMDB read was released")
        #expect(try ports.errorCounts()["snapshot-abandoned"] == 1)
        // The leader keeps serving.
        guard case .reply(let reply)? = try RawPeer(endpoint: ports.requests).exchange([openAccountFrame("alice", balance: 5, worker: "other", sequence: 1)]) else {
            Issue.record("no reply after the abandonment")
            return
        }
        #expect(reply.outcome.isApplied, "\(reply.outcome)")
        let report = watch.finish()
        MemoryBoundTests.log("an unread snapshot in parts (16 MB state) until abandoned", report)
        #expect(report.growth < MemoryBoundTests.bound, "\(report)")
    }

    @Test func `a worker holding 4,096 registrations is refused the next with too-many-registrations, and may re-send one it holds`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        let watch = RssWatch(pid: leader.process.processIdentifier)
        let peer = try RawPeer(endpoint: ports.requests)
        #expect(try peer.exchange(.hello(worker: "many", lastRevision: 0))?.typeName == "welcome")
        var registered = 0
        let limit = 4_096  // Leader.maximumRegistrationsPerWorker
        for start in stride(from: 1, through: limit, by: 512) {
            let end = min(start + 511, limit)
            for number in start...end { try peer.send([RobustnessTests.accountsRegistration("many", number: UInt64(number)).encoded()]) }
            for _ in start...end {
                guard case .scopeRegistered(_, let number, _, _)? = try peer.next() else { break }
                #expect(number == UInt64(registered + 1))
                registered += 1
            }
        }
        #expect(registered == 4_096)
        guard case .error(let refusal)? = try peer.exchange(RobustnessTests.accountsRegistration("many", number: 4_097)) else {
            Issue.record("no refusal of the 4,097th registration")
            return
        }
        #expect(refusal.code == "too-many-registrations")
        #expect(refusal.message == "worker many holds 4096 scope registrations, the most a worker may")
        // A number it holds, sent again, replaces that registration.
        guard case .scopeRegistered(let worker, let number, _, _)? = try peer.exchange(RobustnessTests.accountsRegistration("many", number: 1)) else {
            Issue.record("a registration sent again was not answered")
            return
        }
        #expect(worker == "many" && number == 1)
        #expect(try ports.errorCounts()["too-many-registrations"] == 1)
        let report = watch.finish()
        MemoryBoundTests.log("4,096 registrations of one worker", report)
        #expect(report.growth < MemoryBoundTests.bound, "\(report)")
    }

    @Test func `3,000 ops pipelined without reading get all 3,000 replies in order`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: folder.path, heartbeatTimeout: 60)
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 5}"#).hasPrefix("applied revision 1"))
        let watch = RssWatch(pid: leader.process.processIdentifier)
        let peer = try RawPeer(endpoint: ports.requests, receiveHighWaterMark: 1)
        for sequence in 1...3_000 {
            try peer.send([RobustnessTests.greetFrame("alice", worker: "piper", sequence: UInt64(sequence), instance: nil)])
        }
        var replies: [OpReply] = []
        let deadline = ContinuousClock.now + .seconds(30)
        while replies.count < 3_000, ContinuousClock.now < deadline {
            guard let message = try peer.next(within: deadline - .now) else { break }
            guard case .reply(let reply) = message else {
                Issue.record("not a reply: \(message.typeName)")
                break
            }
            replies.append(reply)
        }
        #expect(replies.count == 3_000)
        #expect(replies.map(\.request.sequence) == Array(1...UInt64(replies.count)), "in the order sent")
        let revisions = replies.compactMap { reply -> UInt64? in
            guard case .applied(let revision) = reply.outcome else { return nil }
            return revision
        }
        #expect(revisions == Array(2...UInt64(revisions.count + 1)), "each applied, in order")
        #expect(try ports.errorCounts()["send-dropped"] == nil)
        let report = watch.finish()
        MemoryBoundTests.log("3,000 pipelined ops", report)
        #expect(report.growth < MemoryBoundTests.bound, "\(report)")
    }

    // MARK: - Helpers

    /// Prints a case's figures (the test output keeps them).
    static func log(_ label: String, _ report: RssWatch.Report) {
        print("MemoryBoundTests: \(label): \(report)")
    }

    /// A text of `bytes` bytes that differs for each `index`.
    static func text(_ index: Int, bytes: Int) -> String {
        let prefix = "trail-\(index)-"
        return prefix + String(repeating: "x", count: bytes - prefix.utf8.count)
    }

    static func openScreenFrame(_ screen: Int, text: String, worker: String, sequence: UInt64) throws -> [UInt8] {
        let argument = try CBOREncoder().encode(["screen": CBORValue.unsigned(UInt64(screen)), "trail": .text(text)])
        return WireMessage.op(OpRequest(request: RequestID(worker: worker, sequence: sequence), op: "trails.openScreen", argument: argument)).encoded()
    }

    static func closeScreenFrame(_ screen: Int, worker: String, sequence: UInt64) throws -> [UInt8] {
        WireMessage.op(
            OpRequest(request: RequestID(worker: worker, sequence: sequence), op: "trails.closeScreen", argument: try CBOREncoder().encode(screen))
        ).encoded()
    }

    /// Opens `screens`, each showing a trail text of `textBytes` bytes of its
    /// own (one state entry each), pipelined; every one must be applied.
    static func openScreens(_ screens: ClosedRange<Int>, textBytes: Int, through peer: RawPeer) throws {
        let frames = try screens.map { try openScreenFrame($0, text: text($0, bytes: textBytes), worker: "setup", sequence: UInt64($0)) }
        let replies = try peer.replies(to: frames, round: 16)
        try #require(replies.count == frames.count && replies.allSatisfy(\.outcome.isApplied), "the state was built: \(replies.count) replies")
    }

    /// The leader's status, asked on `peer` (bounded wait).
    static func status(_ peer: RawPeer) throws -> LeaderStatus {
        guard case .status(let status)? = try peer.exchange(.statusRequest) else { throw StatusUnanswered() }
        return status
    }

    struct StatusUnanswered: Error {}

    /// The read transactions process `pid` holds open on the LMDB
    /// environment in `folder` (its reader table, as `mdb_stat -r` lists it).
    static func activeReaders(_ folder: String, pid: Int32) throws -> [String] {
        var env: OpaquePointer?
        guard mdb_env_create(&env) == 0, let env else { throw LMDBUnreadable(code: -1) }
        defer { mdb_env_close(env) }
        let opened = mdb_env_open(env, folder, UInt32(MDB_RDONLY | MDB_NOTLS), 0o644)
        guard opened == 0 else { throw LMDBUnreadable(code: opened) }
        final class Lines { var lines: [String] = [] }
        let collected = Lines()
        let listed = withExtendedLifetime(collected) {
            mdb_reader_list(env, { message, context in
                guard let message, let context else { return 0 }
                Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().lines.append(String(cString: message))
                return 0
            }, Unmanaged.passUnretained(collected).toOpaque())
        }
        guard listed >= 0 else { throw LMDBUnreadable(code: listed) }
        // Lines are "pid thread txnid", txnid "-" for a slot not reading now.
        return collected.lines.flatMap { $0.split(separator: "\n") }.filter { line in
            let fields = line.split(separator: " ")
            return fields.count == 3 && Int32(fields[0]) == pid && fields[2] != "-"
        }.map(String.init)
    }

    struct LMDBUnreadable: Error { let code: Int32 }
}

extension OpReply.Outcome {
    var isApplied: Bool {
        if case .applied = self { return true }
        return false
    }
}

/// The anonymous resident memory of process `pid` (`RssAnon` in
/// `/proc/PID/status`), in bytes.
func residentAnonymousBytes(of pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
        let fields = line.split(separator: " ")
        guard fields.count >= 2, let kilobytes = Int(fields[1]) else { return nil }
        return kilobytes * 1_024
    }
    return nil
}

/// Samples a process's RssAnon every few milliseconds from the moment it
/// is made until `finish`: its baseline, its peak and its last value.
final class RssWatch: Sendable {
    struct Report: CustomStringConvertible {
        let baseline: Int
        let peak: Int
        let last: Int
        /// What the test holds the growth to, for the log line.
        var bound = MemoryBoundTests.bound
        var growth: Int { peak - baseline }

        var description: String {
            func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }
            return "leader RssAnon \(mib(baseline)) before, peak \(mib(peak)), \(mib(last)) at the end: growth \(growth >= 0 ? "+" : "")\(mib(growth)) (bound \(mib(bound)))"
        }
    }

    let pid: Int32
    let baseline: Int
    private let peak: Atomic<Int>
    private let last: Atomic<Int>
    private let sampling = Atomic<Bool>(true)
    private let stopped = Atomic<Bool>(false)

    init(pid: Int32) {
        self.pid = pid
        let now = residentAnonymousBytes(of: pid) ?? 0
        baseline = now
        peak = Atomic(now)
        last = Atomic(now)
        let thread = Thread { [self] in
            // Until finished, or the process is gone.
            while sampling.load(ordering: .relaxed), let bytes = residentAnonymousBytes(of: pid) {
                last.store(bytes, ordering: .relaxed)
                peak.max(bytes)
                usleep(5_000)
            }
            stopped.store(true, ordering: .releasing)
        }
        thread.start()
    }

    /// The figures so far (sampling goes on).
    func report() -> Report {
        Report(baseline: baseline, peak: peak.load(ordering: .relaxed), last: last.load(ordering: .relaxed))
    }

    /// Takes a last sample, stops sampling and returns the figures.
    func finish() -> Report {
        sampling.store(false, ordering: .relaxed)
        while !stopped.load(ordering: .acquiring) { usleep(1_000) }
        if let bytes = residentAnonymousBytes(of: pid) {
            last.store(bytes, ordering: .relaxed)
            peak.max(bytes)
        }
        return report()
    }
}

extension Atomic where Value == Int {
    fileprivate func max(_ value: Int) {
        var current = load(ordering: .relaxed)
        while value > current {
            let (exchanged, original) = compareExchange(expected: current, desired: value, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}

/// A peer that speaks ZMTP 3.0 (NULL mechanism) over a plain TCP socket, so
/// it can do what no ZeroMQ library lets a sender do: send the frames of a
/// multipart message and never the last.
struct UnfinishedMessagePeer {
    let descriptor: Int32

    init(endpoint: String, socketType: String) throws {
        let port = UInt16(endpoint.split(separator: ":").last.flatMap { Int($0) } ?? 0)
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        // Bounded: a send the leader stops reading fails after 20 s instead of waiting forever.
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0, "connected to \(endpoint)")
        // The greeting a tool's probe sends: signature, version 3.0, mechanism NULL, not a server.
        try #require(send(GreetingProbe.greeting))
        var theirs = [UInt8](repeating: 0, count: 64)
        var read = 0
        while read < 64 {
            let count = theirs.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + read, 64 - read, 0) }
            try #require(count > 0, "the leader's greeting")
            read += count
        }
        // READY with Socket-Type, as a command frame.
        let name = Array("Socket-Type".utf8)
        let value = Array(socketType.utf8)
        let body = [5] + Array("READY".utf8) + [UInt8(name.count)] + name + withUnsafeBytes(of: UInt32(value.count).bigEndian, Array.init) + value
        try #require(send([0x04, UInt8(body.count)] + body))
    }

    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let count = Glibc.send(descriptor, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                if count <= 0 { return false }
                offset += count
            }
            return true
        }
    }

    /// Sends up to `count` frames of 1 MiB, each flagged "more" (a long
    /// frame: flags 0x03, an 8-byte size); returns how many went before the
    /// connection failed. Closes the socket.
    func sendFrames(_ count: Int) -> Int {
        defer { close(descriptor) }
        let frame = [0x03] + withUnsafeBytes(of: UInt64(1 << 20).bigEndian, Array.init) + [UInt8](repeating: 0x78, count: 1 << 20)
        for index in 0..<count where !send(frame) { return index }
        return count
    }
}
