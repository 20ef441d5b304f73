import Testing

@testable import cogd

@Suite("cogd command line")
struct CommandTests {
    @Test func `no arguments shows help`() throws {
        #expect(try Command.parse([]) == .help(topic: nil))
    }
}
