import CogCluster
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// An HA node's run record (`cogd.ha-run`, ha.md §4.1): a lease is called
/// dead only when the run that recorded it certainly no longer exists.
@Suite("HA run record: when a previous run's lease may be revoked")
struct RunRecordTests {
    static func folder() -> String {
        let path = NSTemporaryDirectory() + "run-record-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func machine() throws -> (boot: String, namespace: String) {
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let namespace = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")
        return (boot, namespace)
    }

    @Test func `the record names the lease, this boot, this PID namespace and this process`() throws {
        let path = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let record = RunRecord(dataFolder: path)
        #expect(record.deadRunLease() == nil, "no record: nothing to revoke")
        try record.write(lease: 7_587_123)
        let here = try Self.machine()
        #expect(try String(contentsOfFile: path + "/cogd.ha-run", encoding: .utf8)
            == "lease 7587123 boot \(here.boot) pidns \(here.namespace) pid \(getpid())\n")
        #expect(!FileManager.default.fileExists(atPath: path + "/cogd.ha-run.new"))
        // The run that wrote it is this process: a run read back by its own PID has certainly ended.
        #expect(record.deadRunLease() == 7_587_123)
    }

    @Test func `a live process, another boot, another PID namespace or a garbled file is never revoked`() throws {
        let path = Self.folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let record = RunRecord(dataFolder: path)
        let here = try Self.machine()
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        defer { if sleeper.isRunning { sleeper.terminate() } }
        func write(_ text: String) throws { try text.write(toFile: path + "/cogd.ha-run", atomically: true, encoding: .utf8) }

        try write("lease 9 boot \(here.boot) pidns \(here.namespace) pid \(sleeper.processIdentifier)\n")
        #expect(record.deadRunLease() == nil, "the run is alive")
        try write("lease 9 boot 00000000-0000-0000-0000-000000000000 pidns \(here.namespace) pid \(getpid())\n")
        #expect(record.deadRunLease() == nil, "written on another boot (a copied folder, or before a reboot)")
        try write("lease 9 boot \(here.boot) pidns pid:[1] pid \(getpid())\n")
        #expect(record.deadRunLease() == nil, "written in another PID namespace")
        for garbled in ["", "lease 9\n", "lease x boot \(here.boot) pidns \(here.namespace) pid \(getpid())\n",
            "lease 9 boot \(here.boot) pidns \(here.namespace) pid 99999999999\n",
            "lease 9 lease 9 pidns \(here.namespace) pid \(getpid())\n", String(repeating: "x", count: 600)] {
            try write(garbled)
            #expect(record.deadRunLease() == nil, "\(garbled.prefix(60))")
        }

        // Once the process is gone (killed and reaped), its lease is dead.
        try write("lease 9 boot \(here.boot) pidns \(here.namespace) pid \(sleeper.processIdentifier)\n")
        kill(sleeper.processIdentifier, SIGKILL)
        sleeper.waitUntilExit()
        #expect(record.deadRunLease() == 9)
    }
}
