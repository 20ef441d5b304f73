import CogCodec
import CogCluster
import CogProtocol
import CogSim
import Testing

private let a: [UInt8] = [0xa]
private let b: [UInt8] = [0xb]
private let commit: [UInt8] = [0xc0]

/// The releases a list of effects allows, in order.
private func releases(_ effects: [ShipCore.Effect]) -> [UInt64] {
    effects.compactMap { if case .release(let through) = $0 { through } else { nil } }
}

/// The sync key writes a list of effects asks for.
private func writes(_ effects: [ShipCore.Effect]) -> [[String]] {
    effects.compactMap { if case .writeSync(let standbys) = $0 { standbys } else { nil } }
}

/// The rules of shipping a leader's log to its standbys (ha.md §9).
@Suite("Shipping to standbys: the sync key and the release gate")
struct ShipCoreTests {
    @Test func `with sync one, nothing is released before a standby the sync key names acknowledges it`() {
        var core = ShipCore(.init(sync: .one))
        #expect(core.state == .held)
        // A commit with no standby: held.
        #expect(releases(core.shipped(commit, now: 0)).isEmpty)
        // A standby in step is welcomed, then named in the sync key (it holds the tip); nothing is released meanwhile.
        let hello = core.hello(from: a, node: "n2", inStep: true, now: 1)
        #expect(hello.first == .welcome(to: a, sequence: 1))
        #expect(writes(hello) == [["n2"]])
        #expect(releases(hello).isEmpty && core.writing == ["n2"])
        #expect(releases(core.shipped(commit, now: 1.1)).isEmpty, "a standby being added holds releases")
        // Confirmed: commit 1 (which the standby held at hello) goes; commit 2 waits for its acknowledgement.
        #expect(releases(core.syncWritten(now: 1.2)) == [1])
        #expect(core.state == .sync && core.named == ["n2"])
        #expect(releases(core.acknowledged(from: a, node: "n2", through: 2, now: 1.3)) == [2])
        // Each commit is shipped to the standby, then released on its acknowledgement.
        #expect(core.shipped(commit, now: 2) == [.ship(to: a, sequence: 3, commit: commit)])
        #expect(releases(core.acknowledged(from: a, node: "n2", through: 3, now: 2.1)) == [3])
        // An acknowledgement from another connection under the name counts for nothing: it is refused.
        _ = core.shipped(commit, now: 3)
        #expect(
            core.acknowledged(from: b, node: "n2", through: 4, now: 3.1)
                == [.refuse(to: b, reason: "this leader does not keep standby n2 in step (it was dropped); say standby-hello again")])
        #expect(core.releasedThrough == 3)
    }

    @Test func `a last commit is in every named standby's log once each acknowledged it, late acknowledgements counted`() {
        var core = ShipCore(.init(sync: .quorum(2)))
        #expect(!core.lastCommitAcknowledgedByNamed(late: [:]), "nothing named")
        _ = core.hello(from: a, node: "n2", inStep: true, now: 0)
        _ = core.hello(from: b, node: "n3", inStep: true, now: 0)
        _ = core.syncWritten(now: 0)
        // One standby is added to the sync key at a time.
        _ = core.tick(now: 0.1)
        _ = core.syncWritten(now: 0.2)
        #expect(core.named == ["n2", "n3"])
        _ = core.shipped(commit, now: 1)
        _ = core.acknowledged(from: a, node: "n2", through: 1, now: 1.1)
        #expect(core.lastCommitHeld)
        #expect(!core.lastCommitAcknowledgedByNamed(late: [:]), "n3 has not acknowledged commit 1")
        #expect(!core.lastCommitAcknowledgedByNamed(late: ["n4": 1]), "n4 is not named")
        #expect(!core.lastCommitAcknowledgedByNamed(late: ["n3": 0]))
        #expect(core.lastCommitAcknowledgedByNamed(late: ["n3": 1]))
        // A late acknowledgement is only counted, never released on.
        #expect(core.releasedThrough == 0)
    }

    @Test func `a standby a sync key write in flight or failed would name must hold the last commit too for it to be kept`() {
        var core = ShipCore(.init(sync: .quorum(2)))
        _ = core.hello(from: a, node: "n2", inStep: true, now: 0)
        _ = core.syncWritten(now: 0)
        #expect(core.named == ["n2"])
        _ = core.hello(from: b, node: "n3", inStep: true, now: 0.1)
        #expect(core.writing == ["n2", "n3"], "n3 at the tip is being added")
        _ = core.shipped(commit, now: 1)
        _ = core.acknowledged(from: a, node: "n2", through: 1, now: 1.1)
        #expect(core.lastCommitHeld)
        #expect(!core.lastCommitAcknowledgedByNamed(late: [:]), "etcd may name n3, which has not acknowledged commit 1")
        #expect(core.lastCommitAcknowledgedByNamed(late: ["n3": 1]))
        // The write's answer never came: etcd may apply it yet, so n3 may still lead.
        _ = core.syncWriteFailed(now: 2)
        #expect(core.named == ["n2"] && core.maybeNamed == ["n3"])
        #expect(!core.lastCommitAcknowledgedByNamed(late: [:]))
        _ = core.acknowledged(from: b, node: "n3", through: 1, now: 2.1)
        #expect(core.lastCommitAcknowledgedByNamed(late: [:]))
    }

    @Test func `strict: a standby gone holds every reply; with degrade-after, it is removed from the sync key first, then the leader releases alone`() {
        for degradeAfter in [nil, 2.0] {
            var core = ShipCore(.init(sync: .one, degradeAfter: degradeAfter, standbyTimeout: 1))
            _ = core.hello(from: a, node: "n2", inStep: true, now: 0)
            _ = core.syncWritten(now: 0)
            _ = core.shipped(commit, now: 0)
            _ = core.acknowledged(from: a, node: "n2", through: 1, now: 0.1)
            #expect(core.releasedThrough == 1 && !core.lastCommitHeld)
            // The standby goes silent; commits go on.
            _ = core.shipped(commit, now: 0.5)
            #expect(core.lastCommitHeld, "a step-down now may take commit 2 back")
            let dropped = core.tick(now: 1.2)
            #expect(dropped.first == .drop(node: "n2", reason: "silent for more than 1.0 s"))
            #expect(core.releasedThrough == 1 && core.state == .sync, "named, gone: held")
            let later = core.tick(now: 3)
            if degradeAfter == nil {
                #expect(later.isEmpty && core.releasedThrough == 1, "strict: held for good")
                #expect(core.tick(now: 1_000).isEmpty)
                continue
            }
            // Held for 2 s: the leader asks etcd to name no standby, and releases nothing until it confirms.
            #expect(writes(later) == [[]] && releases(later).isEmpty)
            #expect(releases(core.shipped(commit, now: 3.1)).isEmpty)
            #expect(releases(core.syncWritten(now: 3.2)) == [3])
            #expect(core.state == .degraded && core.named.isEmpty)
            // Degraded: each commit released at once.
            #expect(releases(core.shipped(commit, now: 4)) == [4])
            #expect(!core.lastCommitHeld, "degraded: released on the leader's own commit, never taken back")
            // The standby returns in step: added back, and out of degraded once etcd names it.
            let back = core.hello(from: b, node: "n2", inStep: true, now: 5)
            #expect(writes(back) == [["n2"]])
            #expect(releases(core.shipped(commit, now: 5.1)).isEmpty, "an addition in flight holds releases, degraded or not")
            #expect(releases(core.syncWritten(now: 5.2)).isEmpty, "commit 5 waits for its acknowledgement")
            #expect(core.lastCommitHeld)
            #expect(core.state == .sync && !core.degraded)
            #expect(releases(core.acknowledged(from: b, node: "n2", through: 5, now: 5.3)) == [5])
        }
    }

    @Test func `a standby not in step resyncs, and one that synced a copy gets the commits since, then is named`() {
        var core = ShipCore(.init(sync: .one, window: 3))
        for step in 0..<5 { _ = core.shipped(commit, now: Double(step)) }
        #expect(core.hello(from: a, node: "n2", inStep: false, now: 5) == [.resync(to: a, node: "n2", sequence: 5)])
        #expect(core.standbys.isEmpty)
        // The copy held commits through 3; 4 and 5 are sent after the welcome; named once it acknowledges 5.
        let copied = core.copied(by: a, node: "n2", through: 3, missed: [[4], [5]], now: 6)
        #expect(copied == [.welcome(to: a, sequence: 3), .ship(to: a, sequence: 4, commit: [4]), .ship(to: a, sequence: 5, commit: [5])])
        #expect(writes(core.acknowledged(from: a, node: "n2", through: 4, now: 6.1)).isEmpty, "not at the tip yet")
        #expect(writes(core.acknowledged(from: a, node: "n2", through: 5, now: 6.2)) == [["n2"]])
        // Commits no longer kept, or too many: sync again.
        #expect(core.copied(by: b, node: "n3", through: 1, missed: nil, now: 7) == [.resync(to: b, node: "n3", sequence: 5)])
        #expect(core.copied(by: b, node: "n3", through: 1, missed: [[2], [3], [4], [5]], now: 7) == [.resync(to: b, node: "n3", sequence: 5)])
        // A standby more than the window behind is dropped at the next commit.
        _ = core.syncWritten(now: 7)
        for step in 0..<3 { _ = core.shipped(commit, now: 8 + Double(step)) }
        #expect(core.shipped(commit, now: 11).contains(.drop(node: "n2", reason: "more than 3 commits behind")))
        #expect(core.standbys["n2"] == nil)
    }

    @Test func `a new leader's commits applied as a standby count as shipped and released: the old leader catches up from them`() {
        var core = ShipCore(.init(sync: .one), inherited: 3)
        #expect(core.lastSequence == 3 && core.releasedThrough == 3, "nothing inherited is held")
        _ = core.shipped(commit, now: 1)
        // The old leader's folder ends at inherited commit 1: commits 2 and 3 (applied here as a standby) and 4 follow.
        let copied = core.copied(by: a, node: "n1", through: 1, missed: [[2], [3], [4]], now: 2)
        #expect(copied == [
            .welcome(to: a, sequence: 1), .ship(to: a, sequence: 2, commit: [2]), .ship(to: a, sequence: 3, commit: [3]),
            .ship(to: a, sequence: 4, commit: [4]),
        ])
        #expect(writes(core.acknowledged(from: a, node: "n1", through: 4, now: 3)) == [["n1"]])
    }

    @Test func `kept commits are bounded by count and bytes, and reach back only as far as they are kept`() {
        var kept = KeptCommits(countLimit: 3, byteLimit: 10)
        kept.append([1, 1], firstRevision: 1, name: nil)
        kept.append([2, 2], firstRevision: 3, name: nil)
        kept.append([3, 3], firstRevision: 5, name: nil)
        #expect(kept.after(revision: 0) == nil, "nothing kept at or before revision 0: commit 1 may have had a predecessor")
        #expect(kept.after(revision: 2) == [[2, 2], [3, 3]])
        #expect(kept.after(revision: 4) == [[3, 3]])
        #expect(kept.after(revision: 5) == nil, "nothing follows")
        #expect(kept.last(2) == [[2, 2], [3, 3]] && kept.last(4) == nil)
        kept.append([4, 4], firstRevision: 7, name: nil)
        #expect(kept.firstRevisions == [3, 5, 7] && kept.bytes == 6, "the oldest went past the count")
        kept.append(Array(repeating: 5, count: 9), firstRevision: 9, name: nil)
        #expect(kept.firstRevisions == [9] && kept.bytes == 9, "past the bytes, all but the newest go")
        kept.append(Array(repeating: 6, count: 20), firstRevision: 10, name: nil)
        #expect(kept.firstRevisions == [10], "the newest stays even past the bytes")
        kept.removeAll(base: nil)
        #expect(kept.count == 0 && kept.bytes == 0)
    }

    @Test func `kept commits are found by name, and from their base: the commit before the oldest kept, while every commit after it is`() {
        let name = { CommitName(epoch: 2, number: $0) }
        var kept = KeptCommits(countLimit: 2, byteLimit: 100, base: name(4))
        #expect(kept.after(name: name(4)) == [], "at the folder's last commit, nothing kept yet: nothing lacked")
        kept.append([5], firstRevision: 10, name: name(5))
        kept.append([6], firstRevision: 10, name: name(6))
        #expect(kept.after(name: name(4)) == [[5], [6]] && kept.after(name: name(5)) == [[6]] && kept.after(name: name(6)) == [])
        #expect(kept.after(name: name(3)) == nil && kept.after(name: CommitName(epoch: 1, number: 5)) == nil)
        // Past the count the oldest goes and becomes the base.
        kept.append([7], firstRevision: 11, name: name(7))
        #expect(kept.base == name(5) && kept.after(name: name(5)) == [[6], [7]] && kept.after(name: name(4)) == nil)
        // A retention pass dropped: no name, no base.
        kept.append([0], firstRevision: 12, name: nil)
        kept.append([8], firstRevision: 12, name: name(8))
        kept.append([9], firstRevision: 13, name: name(9))
        #expect(kept.base == nil && kept.after(name: name(7)) == nil && kept.after(name: name(8)) == [[9]])
        kept.removeAll(base: name(9))
        #expect(kept.count == 0 && kept.after(name: name(9)) == [])
    }

    @Test func `kept commits stay the newest ones through many appends, each found after the revision before it`() {
        // Many more appends than kept: the dropped ones are compacted away in steps, which no answer may show.
        var kept = KeptCommits(countLimit: 100, byteLimit: 1 << 20)
        for number in 1...10_000 {
            kept.append([UInt8(truncatingIfNeeded: number), UInt8(truncatingIfNeeded: number >> 8)], firstRevision: UInt64(2 * number), name: nil)
            let oldest = max(1, number - 99)
            #expect(kept.count == number - oldest + 1 && kept.bytes == 2 * kept.count)
            #expect(kept.oldestRevision == UInt64(2 * oldest))
            if number % 97 == 0 {
                #expect(kept.firstRevisions == (oldest...number).map { UInt64(2 * $0) })
                // Revision 2n+1 lies in commit n: the commits after it are n+1 on.
                let middle = (oldest + number) / 2
                #expect(kept.after(revision: UInt64(2 * middle + 1))?.map { Int($0[0]) + Int($0[1]) << 8 } == Array(middle + 1...number))
                #expect(kept.after(revision: UInt64(2 * oldest - 1)) == nil, "nothing kept at or before it")
                #expect(kept.last(3)?.map { Int($0[0]) + Int($0[1]) << 8 } == [number - 2, number - 1, number])
                // The commits starting after a revision: how many, and where the first of them starts.
                #expect(kept.following(revision: UInt64(2 * middle)) == (number - middle, UInt64(2 * middle + 2)))
                #expect(kept.following(revision: UInt64(2 * number)) == (0, nil))
                #expect(kept.following(revision: 0) == (kept.count, UInt64(2 * oldest)))
            }
        }
    }

    @Test func `quorum 2 releases what the second standby acknowledged; none releases at once`() {
        var core = ShipCore(.init(sync: .quorum(2)))
        _ = core.hello(from: a, node: "n2", inStep: true, now: 0)
        _ = core.syncWritten(now: 0)
        #expect(core.state == .held, "one of two named")
        _ = core.hello(from: b, node: "n3", inStep: true, now: 0)
        _ = core.syncWritten(now: 0)
        #expect(core.state == .sync && core.named == ["n2", "n3"])
        _ = core.shipped(commit, now: 1)
        _ = core.shipped(commit, now: 1)
        #expect(releases(core.acknowledged(from: a, node: "n2", through: 2, now: 1)).isEmpty)
        #expect(releases(core.acknowledged(from: b, node: "n3", through: 1, now: 1)) == [1])
        #expect(releases(core.acknowledged(from: b, node: "n3", through: 2, now: 1)) == [2])

        var async = ShipCore(.init(sync: .none))
        #expect(async.state == .async)
        #expect(releases(async.shipped(commit, now: 0)) == [1])
        #expect(writes(async.hello(from: a, node: "n2", inStep: true, now: 0)) == [["n2"]], "named, so it can take the lead")
        #expect(releases(async.shipped(commit, now: 0)) == [2], "an addition in flight holds nothing with --sync none")
    }

    @Test func `with sync one the sync key names one standby; a second is a spare that replaces it when it goes`() {
        var core = ShipCore(.init(sync: .one))
        #expect(writes(core.hello(from: a, node: "n2", inStep: true, now: 0)) == [["n2"]])
        _ = core.syncWritten(now: 0)
        #expect(writes(core.hello(from: b, node: "n3", inStep: true, now: 0)).isEmpty, "one is named: any named standby may take the lead")
        #expect(core.named == ["n2"])
        _ = core.shipped(commit, now: 1)
        // The spare acknowledging does not release: n2, which may take the lead, does not hold commit 1 yet.
        #expect(releases(core.acknowledged(from: b, node: "n3", through: 1, now: 1)).isEmpty)
        #expect(releases(core.acknowledged(from: a, node: "n2", through: 1, now: 1)) == [1])
        // n2 goes with commit 2 unacknowledged: held, and the spare at the tip is named in its place.
        _ = core.shipped(commit, now: 2)
        #expect(releases(core.acknowledged(from: b, node: "n3", through: 2, now: 2)).isEmpty)
        #expect(writes(core.gone("n2", now: 2)) == [["n3"]])
        #expect(releases(core.syncWritten(now: 2)) == [2], "n3 holds everything released")
        #expect(core.named == ["n3"] && core.state == .sync)
    }

    @Test func `a named standby that holds releases a second while still connected is replaced by a spare at the tip`() {
        var core = ShipCore(.init(sync: .one, standbyTimeout: 5, replaceAfter: 1))
        _ = core.hello(from: a, node: "n2", inStep: true, now: 0)
        _ = core.syncWritten(now: 0)
        _ = core.hello(from: b, node: "n3", inStep: true, now: 0)
        // n2 freezes (still connected, silent); n3 acknowledges commit 1 at once.
        _ = core.shipped(commit, now: 0.2)
        #expect(releases(core.acknowledged(from: b, node: "n3", through: 1, now: 0.2)).isEmpty)
        #expect(writes(core.tick(now: 1.1)).isEmpty, "held 0.9 s: n2 keeps its place")
        #expect(writes(core.tick(now: 1.2)) == [["n3"]], "held 1 s: the spare at the tip takes n2's place")
        #expect(releases(core.syncWritten(now: 1.2)) == [1], "n3 holds everything released")
        #expect(core.named == ["n3"] && core.state == .sync && core.standbys["n2"] != nil, "n2 stays connected, a spare now")
        // A named standby that acknowledges the tip in time is never replaced.
        _ = core.shipped(commit, now: 2)
        _ = core.acknowledged(from: a, node: "n2", through: 2, now: 2)
        #expect(releases(core.acknowledged(from: b, node: "n3", through: 2, now: 2.5)) == [2])
        #expect(writes(core.tick(now: 4)).isEmpty)
        // Nor is one when no spare holds the tip: the standbys lag together, and replies wait for the named one.
        _ = core.shipped(commit, now: 4.2)
        #expect(writes(core.tick(now: 5.5)).isEmpty)
        #expect(core.named == ["n3"])
    }

    @Test func `a standby a failed sync key write would have named holds releases back until a later write is confirmed`() {
        var core = ShipCore(.init(sync: .one, degradeAfter: 1))
        _ = core.hello(from: a, node: "n2", inStep: true, now: 0)
        _ = core.syncWritten(now: 0)
        // n2 goes; held a second, the leader writes it out of the key and releases alone.
        _ = core.gone("n2", now: 0)
        _ = core.shipped(commit, now: 0)
        #expect(writes(core.tick(now: 1)) == [[]])
        #expect(releases(core.syncWritten(now: 1)) == [1])
        #expect(core.state == .degraded)
        // n3 arrives at the tip; the write naming it gets no answer in time. etcd may have applied it, so n3 may be
        // named: what n3 lacks is not released, though the leader is degraded.
        #expect(writes(core.hello(from: b, node: "n3", inStep: true, now: 2)) == [["n3"]])
        #expect(releases(core.shipped(commit, now: 2)).isEmpty, "a standby is being added")
        let failed = core.syncWriteFailed(now: 2)
        #expect(core.maybeNamed == ["n3"])
        #expect(releases(failed).isEmpty && writes(failed).isEmpty, "commit 2 waits for n3, which lacks it")
        // n3 acknowledges: commit 2 is released, the key is written again naming n3, and once that is confirmed
        // the key is known again.
        let acknowledged = core.acknowledged(from: b, node: "n3", through: 2, now: 2)
        #expect(releases(acknowledged) == [2] && writes(acknowledged) == [["n3"]])
        _ = core.syncWritten(now: 2)
        #expect(core.maybeNamed.isEmpty && core.named == ["n3"] && core.state == .sync)
    }

    @Test func `a standby dropped while it went on is refused its acknowledgement, so it says hello again`() {
        var core = ShipCore(.init(sync: .one, standbyTimeout: 2))
        _ = core.hello(from: a, node: "n2", inStep: true, now: 0)
        _ = core.syncWritten(now: 0)
        #expect(core.tick(now: 3).contains(.drop(node: "n2", reason: "silent for more than 2.0 s")))
        #expect(
            core.acknowledged(from: a, node: "n2", through: 0, now: 3)
                == [.refuse(to: a, reason: "this leader does not keep standby n2 in step (it was dropped); say standby-hello again")])
        // Its hello (on a new connection) brings it back.
        _ = core.hello(from: b, node: "n2", inStep: true, now: 4)
        #expect(core.standbys["n2"]?.peer == b)
    }

    @Test func `at most 16 standbys are taken, and a node name that is not a cluster node's is malformed`() throws {
        var core = ShipCore(.init(sync: .one))
        for index in 0..<ShipCore.maximumStandbys {
            #expect(core.hello(from: [UInt8(index)], node: "n\(index)", inStep: true, now: 0).first == .welcome(to: [UInt8(index)], sequence: 0))
        }
        let refused = "the leader serves 16 standbys already; this one is not taken"
        #expect(core.hello(from: [99], node: "n99", inStep: true, now: 0) == [.refuse(to: [99], reason: refused)])
        #expect(core.copied(by: [99], node: "n99", through: 0, missed: [], now: 0) == [.refuse(to: [99], reason: refused)])
        #expect(core.standbys.count == 16)
        // A name already connected may say hello again.
        #expect(core.hello(from: [98], node: "n3", inStep: true, now: 1).contains(.welcome(to: [98], sequence: 0)))

        for bad in ["n 2", "", String(repeating: "n", count: 65), "n\u{1b}[2J"] {
            for message in [
                WireMessage.standbyHello(node: bad, logID: nil, epoch: 0, revision: 0, stateDigest: nil, lastCommit: nil), .shipAck(node: bad, sequence: 1),
                .standbyCopied(node: bad, sequence: 1),
            ] {
                #expect(throws: WireDecodeError.self) { try WireMessage.decode(message.encoded()) }
                do {
                    _ = try WireMessage.decode(message.encoded())
                } catch {
                    #expect(error.code == .malformed)
                }
            }
        }
    }

    @Test func `ship-crashed names a request within the note's limits, else it is malformed with the field's reason`() throws {
        let request = RequestID(worker: "w1", sequence: 19)
        let good = WireMessage.shipCrashed(epoch: 3, request: request, op: "ledger.trap", digest: Array(1...8), signal: 4)
        #expect(try WireMessage.decode(good.encoded()) == good)
        let cases: [(WireMessage, String)] = [
            (.shipCrashed(epoch: 3, request: RequestID(worker: "", sequence: 1), op: "x", digest: Array(1...8), signal: 4),
             "ship-crashed body: `worker` must be 1 to 255 bytes"),
            (.shipCrashed(epoch: 3, request: RequestID(worker: String(repeating: "w", count: 256), sequence: 1), op: "x", digest: Array(1...8), signal: 4),
             "ship-crashed body: `worker` must be 1 to 255 bytes"),
            (.shipCrashed(epoch: 3, request: request, op: String(repeating: "o", count: 1_025), digest: Array(1...8), signal: 4),
             "ship-crashed body: `op` is longer than 1024 bytes"),
            (.shipCrashed(epoch: 3, request: request, op: "x", digest: Array(1...32), signal: 4), "ship-crashed body: `digest` must be 8 bytes"),
            (.shipCrashed(epoch: 3, request: request, op: "x", digest: Array(1...8), signal: 0), "ship-crashed body: `signal` must be 1 to 255"),
            (.shipCrashed(epoch: 3, request: request, op: "x", digest: Array(1...8), signal: 256), "ship-crashed body: `signal` must be 1 to 255"),
        ]
        for (message, reason) in cases {
            do {
                _ = try WireMessage.decode(message.encoded())
                Issue.record("decoded: \(message)")
            } catch {
                #expect(error.code == .malformed && error.message == reason, "\(error)")
            }
        }
    }

    @Test func `sync modes read as the flag writes them`() {
        #expect(ShipCore.SyncMode(text: "one") == .one)
        #expect(ShipCore.SyncMode(text: "none") == ShipCore.SyncMode.none)
        #expect(ShipCore.SyncMode(text: "quorum:2") == .quorum(2))
        for bad in ["", "two", "quorum:0", "quorum:9", "quorum:", "quorum:-1", "ONE"] { #expect(ShipCore.SyncMode(text: bad) == nil, "\(bad)") }
        #expect(ShipCore.SyncMode.quorum(3).description == "quorum:3" && ShipCore.SyncMode.one.description == "one")
    }
}

/// A leader's shipping rules driven by seeded random events among three
/// standbys: commits shipped, ships delivered and applied, acknowledgements,
/// standbys leaving and returning (in step, or through a copy), etcd
/// confirming or failing sync key writes, time passing. After every event,
/// each standby the confirmed sync key names holds every commit released
/// (ha.md §2: any of them may take the lead).
@Suite("Shipping to standbys, under random events")
struct ShipCoreRandomTests {
    /// One standby as the harness sees it: what reached it, what it applied.
    private struct Node {
        let name: String
        let peer: [UInt8]
        var connected = false
        /// Ships delivered to it, not yet applied (in order).
        var inbox: [UInt64] = []
        /// The last commit it applied (committed on its own disk).
        var applied: UInt64 = 0
    }

    /// The first broken rule of one seeded run (nil: none), and how many commits it released of those it shipped.
    private static func check(seed: UInt64, sync: ShipCore.SyncMode, degradeAfter: Double?) -> (problem: String?, released: UInt64, shipped: UInt64) {
        var random = SimRandom(seed: seed)
        var core = ShipCore(.init(sync: sync, degradeAfter: degradeAfter, standbyTimeout: 2))
        var nodes = ["n2", "n3", "n4"].enumerated().map { Node(name: $1, peer: [UInt8($0 + 1)]) }
        var now = 0.0
        var writeInFlight = false
        func carry(_ effects: [ShipCore.Effect]) {
            for effect in effects {
                switch effect {
                case .ship(let peer, let sequence, _):
                    if let index = nodes.firstIndex(where: { $0.peer == peer }), nodes[index].connected { nodes[index].inbox.append(sequence) }
                case .welcome(let peer, let sequence):
                    if let index = nodes.firstIndex(where: { $0.peer == peer }) { nodes[index].applied = max(nodes[index].applied, sequence) }
                case .resync(let peer, _, let sequence):
                    // It receives a copy through `sequence` and says so.
                    guard let index = nodes.firstIndex(where: { $0.peer == peer }) else { continue }
                    nodes[index].applied = sequence
                    nodes[index].inbox = []
                    carry(core.copied(by: peer, node: nodes[index].name, through: sequence, missed: [], now: now))
                case .writeSync:
                    writeInFlight = true
                case .drop(let node, _):
                    // Dropped (silent, too far behind, connected again): it says hello again when next connected.
                    if let index = nodes.firstIndex(where: { $0.name == node }) {
                        nodes[index].inbox = []
                        nodes[index].connected = false
                    }
                case .release, .refuse:
                    break
                }
            }
        }
        for step in 0..<3_000 {
            let index = Int(random.next() % 3)
            switch random.next() % 10 {
            case 0, 1, 2:
                carry(core.shipped([0xc0], now: now))
            case 3, 4:
                // The standby applies what reached it, in order, then acknowledges.
                guard nodes[index].connected, !nodes[index].inbox.isEmpty else { continue }
                let count = 1 + Int(random.next() % UInt64(nodes[index].inbox.count))
                for sequence in nodes[index].inbox.prefix(count) where sequence == nodes[index].applied + 1 { nodes[index].applied = sequence }
                nodes[index].inbox.removeFirst(count)
                carry(core.acknowledged(from: nodes[index].peer, node: nodes[index].name, through: nodes[index].applied, now: now))
            case 5:
                if nodes[index].connected {
                    nodes[index].connected = false
                    carry(core.gone(nodes[index].name, now: now))
                } else {
                    nodes[index].connected = true
                    carry(core.hello(from: nodes[index].peer, node: nodes[index].name, inStep: nodes[index].applied == core.lastSequence, now: now))
                }
            case 6, 7:
                guard writeInFlight else { continue }
                writeInFlight = false
                carry(random.next() % 4 == 0 ? core.syncWriteFailed(now: now) : core.syncWritten(now: now))
            default:
                now += Double(random.next() % 1_000) / 1_000
                carry(core.tick(now: now))
            }
            if case .quorum(let count) = sync, core.named.count > count {
                return ("seed \(seed) step \(step): \(core.named.count) standbys named with \(sync)", core.releasedThrough, core.lastSequence)
            }
            for name in core.named {
                guard let node = nodes.first(where: { $0.name == name }) else {
                    return ("seed \(seed) step \(step): unknown \(name) named", core.releasedThrough, core.lastSequence)
                }
                if node.applied < core.releasedThrough {
                    let problem =
                        "seed \(seed) step \(step) (\(sync), degrade after \(degradeAfter.map { "\($0) s" } ?? "never")): "
                        + "\(name) is named with commits through \(node.applied), and \(core.releasedThrough) were released"
                    return (problem, core.releasedThrough, core.lastSequence)
                }
            }
        }
        return (nil, core.releasedThrough, core.lastSequence)
    }

    @Test(arguments: [ShipCore.SyncMode.one, .quorum(2)], [nil, 1.5] as [Double?])
    func `every standby the sync key names holds every commit released`(sync: ShipCore.SyncMode, degradeAfter: Double?) {
        var released: UInt64 = 0
        var shipped: UInt64 = 0
        for seed in 1...200 {
            let run = Self.check(seed: UInt64(seed), sync: sync, degradeAfter: degradeAfter)
            if let problem = run.problem {
                Issue.record(Comment(rawValue: problem))
                return
            }
            released += run.released
            shipped += run.shipped
        }
        // Not a vacuous pass: the runs release much of what they ship.
        #expect(released * 4 > shipped, "released \(released) of \(shipped)")
    }
}
