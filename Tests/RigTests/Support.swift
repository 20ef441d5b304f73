import Cog
import Foundation

/// The sources the last turn of `cogs` wrote (empty: the turn changed nothing).
@MainActor
func writesOfLastTurn(_ cogs: Cogs) -> [String] {
    let entries = cogs.debugHistory.entries
    guard let turn = entries.last(where: { $0.event == .turn })?.turn else { return [] }
    return entries.filter { $0.event == .write && $0.turn == turn }.map(\.name)
}

/// The name of the last turn that ran in `cogs`.
@MainActor
func lastTurnName(_ cogs: Cogs) -> String? { cogs.debugHistory.turnNames.last }

/// A fresh folder under the system temp directory, removed by `cleanUp`.
struct TemporaryFolder {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-rig-test-\(UUID().uuidString)").path

    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}
