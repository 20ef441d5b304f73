import CogProtocol
import Testing

/// A worker's hello may name the keys of its app settings (`cogwire.md` §3):
/// the leader keeps them with the name for `status`, and refuses a hello
/// whose keys break the rule `cogd worker --set` follows.
@MainActor
@Suite("Leader core: a hello's settings keys")
struct HelloSettingsTests {
    @Test func `the keys a hello names are kept, sorted, with the worker, through its heartbeats, for status`() throws {
        let leader = try CoreHarness()
        #expect(leader.send("w1", .hello(worker: "w1", lastRevision: 0, settings: ["venue", "hold-seconds"])).first?.typeName == "welcome")
        #expect(leader.send("w2", .hello(worker: "w2", lastRevision: 0)).first?.typeName == "welcome")
        #expect(leader.send("w1", .heartbeat(worker: "w1", revision: 0)).first?.typeName == "welcome")
        let workers = leader.core.workerStatus(now: leader.now)
        #expect(workers.map(\.settings) == [["hold-seconds", "venue"], nil])
    }

    @Test func `a hello naming a key that is not one, a key twice or more than 256 keys is malformed`() throws {
        let leader = try CoreHarness()
        let cases: [([String], String)] = [
            (["bad key"], "a hello's settings are keys: a key is 1 to 64 of A-Z a-z 0-9 _ . -"),
            ([""], "a hello's settings are keys: a key is 1 to 64 of A-Z a-z 0-9 _ . -"),
            (["k", "k"], "a hello's settings name each key once"),
            ((0...256).map { "k\($0)" }, "a hello names at most 256 settings, not 257"),
        ]
        for (keys, message) in cases {
            let refusal = leader.error("w", .hello(worker: "w", lastRevision: 0, settings: keys))
            #expect(refusal?.code == "malformed", "\(keys.prefix(3))")
            #expect(refusal?.message == message)
        }
        #expect(leader.core.workerStatus(now: leader.now).isEmpty, "nothing is held")
    }
}
