import CogCodec
import Foundation
import Testing

@testable import CogLog

/// A leader writes a copy of its log for a standby on a thread of its own
/// while it commits (`TurnStore.backup`). A commit that fills the map grows
/// it, and LMDB moves the map without looking at other threads' reads: a
/// copy reading then crashed the leader (SIGSEGV, in an HA drill).
@Suite("The map grows beside a copy")
struct MapGrowthTests {
    @Test func `a copy on another thread while a commit grows the map reads a whole log, and the writer goes on`() throws {
        let folder = TemporaryFolder()
        let destination = TemporaryFolder()
        defer {
            folder.cleanUp()
            destination.cleanUp()
        }
        for path in [folder.path, destination.path] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        let environment = try LMDBEnvironment(path: folder.path, readOnly: false, initialMapSize: 64 << 20)
        defer { environment.close() }
        let dbi = try #require(try environment.openDatabases(["blobs"]).first ?? nil)
        let value = [UInt8](repeating: 7, count: 100_000)
        var count = 0
        func commit(_ values: Int) throws {
            // Run again after the map grows: the same keys.
            let first = count
            try environment.write { txn in
                for index in first..<(first + values) { try txn.put(dbi, Array(String(format: "%08d", index).utf8), value) }
            }
            count = first + values
        }
        // Filled to within 4 MiB of the map: the next 8 MiB commit fills it.
        func used() throws -> Int { try environment.read { txn in try environment.pageUse(in: txn) }.usedPages * 4_096 }
        while try used() < environment.mapSize - (4 << 20) { try commit(10) }
        let mapBefore = environment.mapSize
        let filled = count

        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let copier = Unchecked(environment)
        nonisolated(unsafe) var failure: (any Error)?
        Thread.detachNewThread {
            started.signal()
            do { try copier.value.copy(to: destination.path, compact: true) } catch { failure = error }
            finished.signal()
        }
        started.wait()
        try commit(80)
        finished.wait()
        #expect(failure == nil)
        #expect(environment.mapSize == 2 * mapBefore, "the commit grew the map")

        // The copy holds every value written before it or with the commit, whole.
        let copy = try LMDBEnvironment(path: destination.path, readOnly: true)
        defer { copy.close() }
        let copied = try #require(try copy.openDatabases(["blobs"]).first ?? nil)
        let entries = try copy.read { txn in try copy.statistics(of: copied, in: txn).entries }
        #expect(entries == filled || entries == count, "\(entries) of \(filled) or \(count)")
        let last = try copy.read { txn in try txn.get(copied, Array(String(format: "%08d", entries - 1).utf8)) }
        #expect(last == value)
        try commit(1)
        #expect(count == filled + 81)
    }
}

private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
