import Cog
import CogLog
import CogTesting
import Observation
import Synchronization
import Testing

private let _cityCog = Cog<String>.Manual(name: "durable.observation.city") { "Oslo" }
private let _greetingCog = Cog<String>(name: "durable.observation.greeting") { c in "Hello, \(c[_cityCog])" }

/// Notices counted from `onChange`, which may run on any thread.
private final class Notices: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func bump() { count.withLock { $0 += 1 } }
}

@MainActor
private func tracked<T>(_ read: () -> T) -> (value: T, notices: Notices) {
    let notices = Notices()
    let value = withObservationTracking(read) { notices.bump() }
    return (value, notices)
}

/// Issue 31 item 3 where state is durable or replicated: a tracked read
/// hears each committed (or applied) change once.
@MainActor
@Suite("Observation in a durable runtime and on a replica", .timeLimit(.minutes(1)))
struct ObservationDurableTests {
    @Test("Observation in a durable runtime: a committed turn notifies a tracked read once; an equal one not at all")
    func durableRuntimeNotifiesOncePerCommittedChange() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let store = try DurableTurnStore(directory: folder.path)
        let cogs = Cogs.forTesting(store: store)
        let (greeting, notices) = tracked { cogs[_greetingCog] }
        #expect(greeting == "Hello, Oslo")

        cogs.turn(named: "stay") { c in c[_cityCog] = "Oslo" }
        #expect(notices.value == 0)
        cogs.turn(named: "move") { c in c[_cityCog] = "Bergen" }
        #expect(notices.value == 1)
        #expect(store.store.lastRevision == 1)
        #expect(cogs[_greetingCog] == "Hello, Bergen")
    }

    @Test("Observation on a replica: an applied turn notifies a tracked read once")
    func replicaNotifiesOncePerAppliedChange() throws {
        let replica = Cogs.replica()
        let codec = TestCodec()
        let (city, cityNotices) = tracked { replica[_cityCog] }
        let (_, greetingNotices) = tracked { replica[_greetingCog] }
        #expect(city == "Oslo")

        let write = CogDurableWrite(name: "durable.observation.city", key: nil, value: try codec.encode("Tromsø"))
        try replica.applyReplicatedTurn(named: "move", writes: [write], codec: codec)
        #expect(cityNotices.value == 1)
        #expect(greetingNotices.value == 1)
        #expect(replica[_greetingCog] == "Hello, Tromsø")
    }
}
