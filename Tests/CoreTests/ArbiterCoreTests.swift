import CogProtocol
import Testing

/// The arbiter's rules with time as an input (ha.md §4): who may take the
/// leader key, the epoch etcd mints, the local release deadline, and the
/// starts it refuses.
@Suite("Arbiter core: leader key, epochs and the release deadline")
struct ArbiterCoreTests {
    static let keys = ArbiterRecords.Keys(cluster: "bank")

    /// A core for node `n1` of cluster `bank` with a 5 s lease, started at
    /// 0 and given its lease (id 7) and its presence key.
    static func started(node: String = "n1", ownEpoch: UInt64 = 0) -> ArbiterCore {
        var core = ArbiterCore(.init(cluster: "bank", node: node, endpoint: "tcp://127.0.0.1:7000", leaseSeconds: 5, ownEpoch: ownEpoch))
        #expect(core.start(now: .zero) == [.send(.grantLease(seconds: 5))])
        #expect(core.answered(.granted(lease: 7, seconds: 5), now: .milliseconds(10)) == [
            .leaseGranted(7),
            .send(.transaction(
                compares: [EtcdCompare(key: "/cogd/bank/members/\(node)", modRevision: 0)],
                puts: [EtcdPut(key: "/cogd/bank/members/\(node)", value: node, lease: 7)]))
        ])
        #expect(core.answered(.transaction(succeeded: true), now: .milliseconds(20)) == [
            .send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))
        ])
        return core
    }

    @Test func `a node whose previous run died holding its lease revokes it before asking for its own`() {
        var settings = ArbiterCore.Configuration(cluster: "bank", node: "n1", endpoint: "tcp://127.0.0.1:7000", leaseSeconds: 5)
        settings.deadRunLease = 41
        var core = ArbiterCore(settings)
        #expect(core.start(now: .zero) == [.send(.revoke(lease: 41))])
        // The lease's time counts from the grant's send, after the revocation's answer.
        #expect(core.answered(.revoked, now: .milliseconds(300)) == [
            .note("revoked lease 41 of this node's previous run, which ended holding it"), .send(.grantLease(seconds: 5)),
        ])
        #expect(core.answered(.granted(lease: 42, seconds: 5), now: .milliseconds(310)) == [
            .leaseGranted(42),
            .send(.transaction(
                compares: [EtcdCompare(key: "/cogd/bank/members/n1", modRevision: 0)],
                puts: [EtcdPut(key: "/cogd/bank/members/n1", value: "n1", lease: 42)])),
        ])
        #expect(core.releaseDeadline == .milliseconds(300) + .seconds(5) - .milliseconds(500))

        // etcd unreachable for the revocation: the node goes on, and its name waits out the dead run's TTL.
        var unlucky = ArbiterCore(settings)
        _ = unlucky.start(now: .zero)
        let effects = unlucky.answered(.failed(EtcdFailure(.unreachable, "connect: connection refused")), now: .milliseconds(200))
        #expect(effects.count == 2 && effects.last == .send(.grantLease(seconds: 5)))
        if case .note(let text)? = effects.first {
            #expect(text.hasPrefix("could not revoke lease 41 of this node's previous run ("))
        } else {
            Issue.record("expected a note, got \(effects)")
        }
    }

    @Test func `on a cluster that never had a leader the first node mints epoch 1 in one transaction`() {
        var core = Self.started()
        let effects = core.answered(.values([:]), now: .milliseconds(30))
        #expect(effects == [
            .send(.transaction(
                compares: [
                    EtcdCompare(key: "/cogd/bank/leader", modRevision: 0),
                    EtcdCompare(key: "/cogd/bank/epoch", modRevision: 0),
                    EtcdCompare(key: "/cogd/bank/sync", modRevision: 0),
                ],
                puts: [
                    EtcdPut(key: "/cogd/bank/leader", value: "n1 1 tcp://127.0.0.1:7000", lease: 7),
                    EtcdPut(key: "/cogd/bank/epoch", value: "1"),
                    EtcdPut(key: "/cogd/bank/sync", value: "1 n1"),
                ]))
        ])
        #expect(core.answered(.transaction(succeeded: true), now: .milliseconds(40)) == [.lead(epoch: 1)])
        #expect(core.role == .leading(epoch: 1))
    }

    @Test func `a node the sync key allows takes the lead after the last one, compared at the revisions it read`() {
        var core = Self.started(node: "n2", ownEpoch: 4)
        let effects = core.answered(.values([
            "/cogd/bank/epoch": EtcdValue(value: "4", modRevision: 40),
            "/cogd/bank/sync": EtcdValue(value: "4 n1 n2", modRevision: 41),
        ]), now: .milliseconds(30))
        #expect(effects == [
            .send(.transaction(
                compares: [
                    EtcdCompare(key: "/cogd/bank/leader", modRevision: 0),
                    EtcdCompare(key: "/cogd/bank/epoch", modRevision: 40),
                    EtcdCompare(key: "/cogd/bank/sync", modRevision: 41),
                ],
                puts: [
                    EtcdPut(key: "/cogd/bank/leader", value: "n2 5 tcp://127.0.0.1:7000", lease: 7),
                    EtcdPut(key: "/cogd/bank/epoch", value: "5"),
                    EtcdPut(key: "/cogd/bank/sync", value: "5 n2"),
                ]))
        ])
        // Another node won the race: the transaction failed, and the node reads again.
        #expect(core.answered(.transaction(succeeded: false), now: .milliseconds(40)) == [
            .send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))
        ])
        #expect(core.answered(.values([
            "/cogd/bank/leader": EtcdValue(value: "n3 5 tcp://127.0.0.1:7003", modRevision: 50),
            "/cogd/bank/epoch": EtcdValue(value: "5", modRevision: 50),
        ]), now: .milliseconds(50)) == [.follow(ArbiterRecords.Leader(node: "n3", epoch: 5, endpoint: "tcp://127.0.0.1:7003"))])
        #expect(core.role == .standby(leader: ArbiterRecords.Leader(node: "n3", epoch: 5, endpoint: "tcp://127.0.0.1:7003")))
        #expect(core.epochSeen == 5)
    }

    @Test func `a leader writes the sync key only while the leader key and the sync key are as it read them`() {
        let read = EtcdRequest.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"])
        func keys(sync: String, revision: Int64) -> [String: EtcdValue] {
            [
                "/cogd/bank/leader": EtcdValue(value: "n1 1 tcp://127.0.0.1:7000", modRevision: 12),
                "/cogd/bank/epoch": EtcdValue(value: "1", modRevision: 12),
                "/cogd/bank/sync": EtcdValue(value: sync, modRevision: revision),
            ]
        }
        func write(_ value: String, syncRevision: Int64) -> EtcdRequest {
            .transaction(
                compares: [EtcdCompare(key: "/cogd/bank/leader", modRevision: 12), EtcdCompare(key: "/cogd/bank/sync", modRevision: syncRevision)],
                puts: [EtcdPut(key: "/cogd/bank/sync", value: value)])
        }
        var core = Self.started()
        _ = core.answered(.values([:]), now: .milliseconds(30))
        #expect(core.answered(.transaction(succeeded: true), now: .milliseconds(40)) == [.lead(epoch: 1)])
        // Asked before the keys' revisions are known: held until a read finds the leader key its own.
        #expect(core.writeSync(standbys: ["n2"], now: .milliseconds(50)).isEmpty)
        #expect(core.tick(now: .milliseconds(140)) == [.send(read)])
        #expect(core.answered(.values(keys(sync: "1 n1", revision: 12)), now: .milliseconds(150)).isEmpty)
        #expect(core.tick(now: .milliseconds(151)) == [.send(write("1 n1 n2", syncRevision: 12))])
        #expect(core.answered(.transaction(succeeded: true), now: .milliseconds(160)) == [.syncWritten(["n2"])])
        // The write moved the sync key's revision: the next write reads it first (at once after a write).
        #expect(core.writeSync(standbys: [], now: .milliseconds(700)) == [.send(read)])
        #expect(core.answered(.values(keys(sync: "1 n1 n2", revision: 13)), now: .milliseconds(710)).isEmpty)
        #expect(core.tick(now: .milliseconds(711)) == [.send(write("1 n1", syncRevision: 13))])
        // The answer is lost: etcd may apply the write yet. The next write compares the revision read after the loss,
        // so if the lost one lands first this one fails, and if this one lands first the lost one fails.
        #expect(core.answered(.failed(EtcdFailure(.timedOut, "no answer in 1 s")), now: .milliseconds(720)) == [
            .syncWriteFailed("etcd request failed (timed-out: no answer in 1 s)")
        ])
        #expect(core.writeSync(standbys: ["n3"], now: .milliseconds(730)).isEmpty)  // the read waits out the retry interval
        #expect(core.tick(now: .milliseconds(1_000)) == [.send(read)])
        #expect(core.answered(.values(keys(sync: "1 n1 n2", revision: 13)), now: .milliseconds(1_010)).isEmpty)
        #expect(core.tick(now: .milliseconds(1_011)) == [.send(write("1 n1 n3", syncRevision: 13))])
        // The key changed under it (the lost write landed): not written, and the node reads again.
        #expect(core.answered(.transaction(succeeded: false), now: .milliseconds(1_020)) == [
            .send(read),
            .syncWriteFailed("the leader key or the sync key changed since this node read them"),
        ])
        // A node that does not lead writes nothing.
        var standby = Self.started(node: "n2")
        #expect(standby.writeSync(standbys: ["n3"], now: .milliseconds(30)) == [.syncWriteFailed("this node does not lead")])
    }

    @Test func `the last leader lets a standby the sync key names take the lead first, and campaigns when none did`() {
        let read = ArbiterCore.Effect.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))
        let values = ["/cogd/bank/epoch": EtcdValue(value: "4", modRevision: 40), "/cogd/bank/sync": EtcdValue(value: "4 n1 n2", modRevision: 41)]
        let deferring = ArbiterCore.Effect.note(
            "no node leads; this node led epoch 4 and lets its synchronous standby n2 take the lead first (it may hold a commit "
                + "this node shipped but did not commit); this node campaigns in 300 ms if none does")
        var core = Self.started(node: "n1", ownEpoch: 4)
        #expect(core.deferral == .milliseconds(300))
        #expect(core.answered(.values(values), now: .milliseconds(30)) == [.follow(nil), deferring])
        // Reads within the deferral say nothing more and send no campaign.
        #expect(core.tick(now: .milliseconds(130)) == [read])
        #expect(core.answered(.values(values), now: .milliseconds(140)) == [])
        #expect(core.tick(now: .milliseconds(240)) == [read])
        #expect(core.answered(.values(values), now: .milliseconds(250)) == [])
        // No standby took it: the first read past the deferral campaigns.
        #expect(core.tick(now: .milliseconds(350)) == [read])
        guard case .send(.transaction(_, let puts))? = core.answered(.values(values), now: .milliseconds(360)).first else {
            Issue.record("no campaign past the deferral")
            return
        }
        #expect(puts.map(\.value) == ["n1 5 tcp://127.0.0.1:7000", "5", "5 n1"])

        // Another run: the standby takes the lead while this node defers; it is followed, and a later
        // episode without a leader defers anew.
        var again = Self.started(node: "n1", ownEpoch: 4)
        #expect(again.answered(.values(values), now: .milliseconds(30)) == [.follow(nil), deferring])
        #expect(again.tick(now: .milliseconds(130)) == [read])
        let n2 = ArbiterRecords.Leader(node: "n2", epoch: 5, endpoint: "tcp://127.0.0.1:7002")
        #expect(again.answered(.values([
            "/cogd/bank/leader": EtcdValue(value: n2.text, modRevision: 50), "/cogd/bank/epoch": EtcdValue(value: "5", modRevision: 50),
            "/cogd/bank/sync": EtcdValue(value: "5 n2 n1", modRevision: 51),
        ]), now: .milliseconds(140)) == [.follow(n2)])
        // n2 named n1 its standby: n1 is not the sync key's leader now, so it would campaign at once.
        #expect(again.tick(now: .milliseconds(240)) == [read])
        let afterN2 = ["/cogd/bank/epoch": EtcdValue(value: "5", modRevision: 50), "/cogd/bank/sync": EtcdValue(value: "5 n2 n1", modRevision: 51)]
        guard case .send(.transaction(_, let puts))? = again.answered(.values(afterN2), now: .milliseconds(250)).first else {
            Issue.record("a standby of the last leader did not campaign at once")
            return
        }
        #expect(puts.map(\.value) == ["n1 6 tcp://127.0.0.1:7000", "6", "6 n1"])

        // The sync key names no standby: nothing to defer to, the last leader campaigns at once.
        var alone = Self.started(node: "n1", ownEpoch: 4)
        let aloneValues = ["/cogd/bank/epoch": EtcdValue(value: "4", modRevision: 40), "/cogd/bank/sync": EtcdValue(value: "4 n1", modRevision: 41)]
        guard case .send(.transaction)? = alone.answered(.values(aloneValues), now: .milliseconds(30)).first else {
            Issue.record("the last leader without standbys did not campaign at once")
            return
        }
    }

    @Test func `a node the sync key does not name waits and never campaigns`() {
        var core = Self.started(node: "n3")
        let values = ["/cogd/bank/epoch": EtcdValue(value: "4", modRevision: 40), "/cogd/bank/sync": EtcdValue(value: "4 n1 n2", modRevision: 41)]
        #expect(core.answered(.values(values), now: .milliseconds(30)) == [
            .follow(nil),
            .note("no node leads; only n1, n2 may take the lead (epoch 4's leader and synchronous standbys)"),
        ])
        // Its next look, a read interval later, finds the same: nothing new to say, no campaign.
        #expect(core.tick(now: .milliseconds(100)) == [])
        #expect(core.tick(now: .milliseconds(530)) == [.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))])
        #expect(core.answered(.values(values), now: .milliseconds(540)) == [])
        #expect(core.role == .standby(leader: nil))
    }

    @Test func `a named node whose folder holds no log waits for a copy before it may take the lead`() {
        var core = Self.started(node: "n1")
        core.holdsLog(false)
        // Epoch 4's leader, its folder destroyed: named, yet it may not lead with nothing.
        let values = ["/cogd/bank/epoch": EtcdValue(value: "4", modRevision: 40), "/cogd/bank/sync": EtcdValue(value: "4 n1 n2", modRevision: 41)]
        #expect(core.answered(.values(values), now: .milliseconds(30)) == [
            .follow(nil),
            .note("no node leads; this node's folder holds no log, so it may not take the lead of a cluster at epoch 4: it waits for a copy from the next leader"),
        ])
        #expect(core.role == .standby(leader: nil))
        // A copy arrived: at its next look it may lead, and as epoch 4's leader it lets n2 take the lead first; then it campaigns.
        core.holdsLog(true)
        #expect(core.tick(now: .milliseconds(530)) == [.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))])
        #expect(core.answered(.values(values), now: .milliseconds(540)).first.map { if case .note = $0 { true } else { false } } == true)
        #expect(core.tick(now: .milliseconds(900)) == [.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))])
        guard case .send(.transaction(_, let puts))? = core.answered(.values(values), now: .milliseconds(910)).first else {
            Issue.record("no campaign")
            return
        }
        #expect(puts.first == EtcdPut(key: "/cogd/bank/leader", value: "n1 5 tcp://127.0.0.1:7000", lease: 7))
        // A cluster that never had a leader needs no log to start one.
        var first = Self.started(node: "n2")
        first.holdsLog(false)
        guard case .send(.transaction)? = first.answered(.values([:]), now: .milliseconds(30)).first else {
            Issue.record("no first campaign")
            return
        }
    }

    @Test func `a leader releases only before the deadline its last confirmed renewal set, then steps down`() {
        var core = Self.started()
        _ = core.answered(.values([:]), now: .milliseconds(30))
        _ = core.answered(.transaction(succeeded: true), now: .milliseconds(40))
        // Granted at 0 with 5 s: the deadline is 5 s − 0.5 s margin.
        #expect(core.releaseDeadline == .milliseconds(4500))
        #expect(core.mayRelease(now: .milliseconds(4499)))
        #expect(!core.mayRelease(now: .milliseconds(4500)))
        // Renewal every third of the TTL; the deadline counts from the send, not the answer.
        // A leader reads who leads, like a standby, and finds itself.
        #expect(core.tick(now: .milliseconds(1000)) == [.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))])
        #expect(core.answered(.values(["/cogd/bank/leader": EtcdValue(value: "n1 1 tcp://127.0.0.1:7000", modRevision: 5)]), now: .milliseconds(1010)) == [])
        #expect(core.tick(now: .milliseconds(1700)) == [.send(.keepAlive(lease: 7))])
        #expect(core.answered(.keptAlive(seconds: 5), now: .milliseconds(2900)) == [])
        #expect(core.releaseDeadline == .milliseconds(6200))
        // etcd stops answering: each try fails, the deadline stays, and at it the leader steps down.
        #expect(core.tick(now: .milliseconds(3400)) == [.send(.keepAlive(lease: 7))])
        #expect(core.answered(.failed(EtcdFailure(.timedOut, "no answer in 1 s")), now: .milliseconds(4400)) == [
            .note("etcd request failed (timed-out: no answer in 1 s); trying again")
        ])
        #expect(core.mayRelease(now: .milliseconds(6199)))
        let effects = core.tick(now: .milliseconds(6200))
        #expect(effects == [.stepDown(reason: "the lease could not be renewed in time: epoch 1 ends at the local deadline, before etcd can give the leader key to another node")])
        #expect(core.role == .stopped)
        #expect(!core.mayRelease(now: .milliseconds(6200)))
        #expect(core.tick(now: .milliseconds(7000)) == [])
    }

    @Test func `a lease etcd says has ended ends the lead at once`() {
        var core = Self.started()
        _ = core.answered(.values([:]), now: .milliseconds(30))
        _ = core.answered(.transaction(succeeded: true), now: .milliseconds(40))
        _ = core.tick(now: .milliseconds(1700))
        #expect(core.answered(.keptAlive(seconds: 0), now: .milliseconds(1710)) == [
            .stepDown(reason: "etcd says this node's lease has ended: its presence and any leader key it held are gone")
        ])
        #expect(!core.mayRelease(now: .milliseconds(1711)))
    }

    @Test func `a node puts its run beside its presence, on its lease, for a next run whose folder is gone`() {
        var settings = ArbiterCore.Configuration(cluster: "bank", node: "n1", leaseSeconds: 5)
        settings.runFields = "boot 0c1d pidns pid:[4026531836] pid 4242"
        var core = ArbiterCore(settings)
        _ = core.start(now: .zero)
        #expect(core.answered(.granted(lease: 7, seconds: 5), now: .milliseconds(10)) == [
            .leaseGranted(7),
            .send(.transaction(
                compares: [EtcdCompare(key: "/cogd/bank/members/n1", modRevision: 0)],
                puts: [
                    EtcdPut(key: "/cogd/bank/members/n1", value: "n1", lease: 7),
                    EtcdPut(key: "/cogd/bank/runs/n1", value: "lease 7 boot 0c1d pidns pid:[4026531836] pid 4242", lease: 7),
                ]))
        ])
    }

    @Test func `a name held by a live node is refused once a whole TTL has passed`() {
        var core = ArbiterCore(.init(cluster: "bank", node: "n1", leaseSeconds: 2))
        _ = core.start(now: .zero)
        _ = core.answered(.granted(lease: 9, seconds: 2), now: .milliseconds(5))
        #expect(core.answered(.transaction(succeeded: false), now: .milliseconds(10)) == [
            .note("waiting for the presence key /cogd/bank/members/n1: a node of this name held it (a crashed run's lease ends within 2 s)")
        ])
        // The lease is renewed while it waits, and the claim tried again.
        #expect(core.tick(now: .milliseconds(510)) == [
            .send(.transaction(compares: [EtcdCompare(key: "/cogd/bank/members/n1", modRevision: 0)],
                               puts: [EtcdPut(key: "/cogd/bank/members/n1", value: "n1", lease: 9)]))
        ])
        #expect(core.answered(.transaction(succeeded: false), now: .milliseconds(520)).isEmpty, "the wait is noted once")
        #expect(core.tick(now: .milliseconds(700)) == [.send(.keepAlive(lease: 9))])
        _ = core.answered(.keptAlive(seconds: 2), now: .milliseconds(710))
        #expect(core.tick(now: .milliseconds(1100)) == [
            .send(.transaction(compares: [EtcdCompare(key: "/cogd/bank/members/n1", modRevision: 0)],
                               puts: [EtcdPut(key: "/cogd/bank/members/n1", value: "n1", lease: 9)]))
        ])
        let effects = core.answered(.transaction(succeeded: false), now: .milliseconds(2300))
        #expect(effects == [.refuse(reason:
            "another node named n1 is running in cluster bank: its presence key /cogd/bank/members/n1 stayed on a live lease "
                + "for longer than the lease TTL (2 s); give each node its own --name")])
        #expect(core.role == .stopped)
    }

    @Test func `an etcd that holds a lower epoch than the node's log is refused at start`() {
        var core = Self.started(ownEpoch: 9)
        let effects = core.answered(.values(["/cogd/bank/epoch": EtcdValue(value: "3", modRevision: 12)]), now: .milliseconds(30))
        #expect(effects == [.refuse(reason:
            "etcd holds epoch 3 for cluster bank, below this node's own log (epoch 9): --ha names another etcd than the cluster's, "
                + "or etcd's data was lost; point --ha at the cluster's etcd (or, to start the cluster anew on this etcd, put 9 at /cogd/bank/epoch first)")])
    }

    @Test func `an unreachable etcd and a value no node writes are refused at start, the value escaped`() {
        var core = ArbiterCore(.init(cluster: "bank", node: "n1"))
        _ = core.start(now: .zero)
        #expect(core.answered(.failed(EtcdFailure(.unreachable, "connect to 127.0.0.1:1: connection refused")), now: .milliseconds(1)) == [
            .refuse(reason: "etcd could not be used (unreachable: connect to 127.0.0.1:1: connection refused); "
                + "check that --ha names the cluster's etcd client URLs and that etcd is running")
        ])

        var other = Self.started()
        #expect(other.answered(.values(["/cogd/bank/epoch": EtcdValue(value: "7\u{1B}[2J", modRevision: 3)]), now: .milliseconds(30)) == [
            .refuse(reason: "etcd's /cogd/bank/epoch holds \"7\\u{1b}[2J\", which no cogd node writes; remove the cluster's keys only if no node of it runs, or name another --cluster")
        ])
    }

    @Test func `a leader that reads another node's leader key steps down`() {
        var core = Self.started()
        _ = core.answered(.values([:]), now: .milliseconds(30))
        _ = core.answered(.transaction(succeeded: true), now: .milliseconds(40))
        #expect(core.tick(now: .milliseconds(540)) == [.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))])
        #expect(core.answered(.values(["/cogd/bank/leader": EtcdValue(value: "n1 1 tcp://127.0.0.1:7000", modRevision: 5)]), now: .milliseconds(550)) == [])
        #expect(core.tick(now: .milliseconds(1050)) == [.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))])
        #expect(core.answered(.values(["/cogd/bank/leader": EtcdValue(value: "n2 2", modRevision: 9)]), now: .milliseconds(1060)) == [
            .stepDown(reason: "etcd names n2 in epoch 2 while this node leads epoch 1")
        ])
        #expect(!core.mayRelease(now: .milliseconds(1061)))
    }

    @Test func `records read only what a node writes, and a resigning leader revokes its lease`() {
        #expect(ArbiterRecords.Leader(text: "n1 1 tcp://127.0.0.1:7000") == ArbiterRecords.Leader(node: "n1", epoch: 1, endpoint: "tcp://127.0.0.1:7000"))
        #expect(ArbiterRecords.Leader(text: "n1 1")?.text == "n1 1")
        #expect(ArbiterRecords.Leader(text: "n 1 x y") == nil)
        #expect(ArbiterRecords.Leader(text: "n1 18446744073709551616") == nil)
        #expect(ArbiterRecords.Sync(text: "3 n1 n2")?.allows("n2") == true)
        #expect(ArbiterRecords.Sync(text: "3 n1 n2")?.allows("n3") == false)
        #expect(ArbiterRecords.Sync(text: "3 n1 bad/name") == nil)
        #expect(!ArbiterRecords.isValidName("") && !ArbiterRecords.isValidName("a b") && !ArbiterRecords.isValidName(String(repeating: "a", count: 65)))

        var core = Self.started()
        _ = core.answered(.values([:]), now: .milliseconds(30))
        _ = core.answered(.transaction(succeeded: true), now: .milliseconds(40))
        #expect(core.resign(now: .milliseconds(50)) == [.send(.revoke(lease: 7))])
        #expect(core.role == .stopped && !core.mayRelease(now: .milliseconds(51)))
    }

    @Test func `a campaign whose answer was lost is won at the next read, not followed forever`() {
        var core = Self.started()
        _ = core.answered(.values([:]), now: .milliseconds(30))
        // The transaction applied in etcd; its answer never came.
        #expect(core.answered(.failed(EtcdFailure(.timedOut, "no answer in time")), now: .milliseconds(1030)) == [
            .note("etcd request failed (timed-out: no answer in time); trying again")
        ])
        #expect(core.tick(now: .milliseconds(1290)) == [.send(.read(["/cogd/bank/leader", "/cogd/bank/epoch", "/cogd/bank/sync"]))])
        #expect(core.answered(.values([
            "/cogd/bank/leader": EtcdValue(value: "n1 1 tcp://127.0.0.1:7000", modRevision: 4),
            "/cogd/bank/epoch": EtcdValue(value: "1", modRevision: 4),
        ]), now: .milliseconds(1300)) == [.lead(epoch: 1)])
        #expect(core.role == .leading(epoch: 1) && core.mayRelease(now: .milliseconds(1301)))
        // A key naming this node in another epoch (a crashed run's, on its old lease) is not taken for its own.
        var other = Self.started()
        #expect(other.answered(.values(["/cogd/bank/leader": EtcdValue(value: "n1 7", modRevision: 9)]), now: .milliseconds(30)) == [
            .follow(ArbiterRecords.Leader(node: "n1", epoch: 7, endpoint: ""))
        ])
    }

    @Test func `a campaign won while the node was frozen past its deadline leads nothing`() {
        var core = Self.started()
        _ = core.answered(.values([:]), now: .milliseconds(30))
        // The answer arrives 10 s later: the lease's local deadline (4.5 s) has passed.
        #expect(core.answered(.transaction(succeeded: true), now: .seconds(10)) == [
            .stepDown(reason: "won epoch 1 in etcd, but the answer came after the lease's local deadline: another node may lead by now")
        ])
        #expect(core.role == .stopped && !core.mayRelease(now: .seconds(10)))
    }
}
