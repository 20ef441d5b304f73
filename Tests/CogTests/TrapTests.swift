import Cog
import CogTesting
import Testing

private let _trapSourceCog = Cog<Int>.Manual(name: "trap.source") { 0 }

extension CogOps {
    fileprivate func bumpTrapSource() { turn { c in c[_trapSourceCog] += 1 } }
}

private let writingCog = Cog<Int>(name: "trap.writer") { c in
    MainActor.assumeIsolated { trapRuntime?.bumpTrapSource() }
    return c[_trapSourceCog]
}

@MainActor private var trapRuntime: Cogs?

@Suite("Traps")
struct TrapTests {
    @Test func `a turn attempted inside an automatic computation fails naming the cog and the turn`() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let cogs = Cogs.forTesting()
                trapRuntime = cogs
                _ = cogs.peek(writingCog)
            }
        }
        let text = stderrText(result)
        #expect(text.contains("turn `bumpTrapSource()`"))
        #expect(text.contains("`trap.writer`"))
    }
}
