import Cog
import CogTesting
import Testing

private let _roomsCog = Cog<[String]>.Manual(name: "selectors.rooms") { ["a"] }

private let namedCountCog = Cog<Int>(name: "selectors.count") { c in c[_roomsCog].count }
private struct Opaque: Equatable {}
private let opaqueCog = Cog<Opaque>(name: "selectors.opaque") { _ in Opaque() }
private let unnamedCountCog = Cog<Int> { c in c[_roomsCog].count }
private let roomIsListedCogs = CogBox<Bool, String>(name: "selectors.isListed") { c, room in c[_roomsCog].contains(room) }

@MainActor
@Suite("Selectors across processes")
struct SelectorRegistrationTests {
    @Test func `only named automatic cogs and boxes with Codable values can select scopes across processes`() {
        _ = (namedCountCog, opaqueCog, unnamedCountCog, roomIsListedCogs)
        #expect(Cogs.hasSelector(named: "selectors.count"))
        #expect(Cogs.hasSelector(named: "selectors.isListed"))
        #expect(!Cogs.hasSelector(named: "selectors.opaque"))
        #expect(!Cogs.hasSelector(named: unnamedCountCog.label))
    }
}
