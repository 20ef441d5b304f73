import CogCluster
import CogLog
import CogProtocol
import CogWire
import Foundation
import Testing

@testable import CogLab
@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Serving thread placement")
struct PlacementTests {
    @Test func `CPU lists parse and format as Linux writes them`() {
        #expect(CPUList.parse("1") == [1])
        #expect(CPUList.parse("0-3,5,7-8\n") == [0, 1, 2, 3, 5, 7, 8])
        #expect(CPUList.parse("3,1,1") == [1, 3])
        for bad in ["", "x", "3-1", "-1", "1-", "1,,x", "0-2-4"] {
            #expect(CPUList.parse(bad) == nil, "'\(bad)'")
        }
        #expect(CPUList.format([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8")
        #expect(CPUList.format([4]) == "4")
    }

    /// A sysfs and procfs as a virtio disk with one request queue shows them:
    /// partition 254:1 of disk vda (254:0), MSI interrupts 35 (config) and 36
    /// (requests), the requests routed to CPU 1.
    private func fakeMachine(effectiveAffinity: String?) throws -> (DiskInterrupts, TemporaryFolder) {
        let folder = TemporaryFolder()
        let root = folder.path
        let pci = root + "/sys/devices/pci0000:00/0000:00:02.0"
        let disk = pci + "/virtio1/block/vda"
        let manager = FileManager.default
        try manager.createDirectory(atPath: pci + "/msi_irqs", withIntermediateDirectories: true)
        for irq in ["35", "36"] { #expect(manager.createFile(atPath: pci + "/msi_irqs/" + irq, contents: Data())) }
        try manager.createDirectory(atPath: disk + "/vda1", withIntermediateDirectories: true)
        #expect(manager.createFile(atPath: disk + "/vda1/partition", contents: Data("1\n".utf8)))
        try manager.createDirectory(atPath: root + "/sys/dev/block", withIntermediateDirectories: true)
        try manager.createSymbolicLink(
            atPath: root + "/sys/dev/block/254:0", withDestinationPath: "../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda")
        try manager.createSymbolicLink(
            atPath: root + "/sys/dev/block/254:1", withDestinationPath: "../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda/vda1")
        try manager.createDirectory(atPath: root + "/sys/dev/block/7:0", withIntermediateDirectories: true)
        // dm-0 (an LVM volume) on partition vda1; dm-1 on the loop device, which has no interrupts.
        let mapper = root + "/sys/devices/virtual/block"
        try manager.createDirectory(atPath: mapper + "/dm-0/slaves", withIntermediateDirectories: true)
        try manager.createSymbolicLink(
            atPath: mapper + "/dm-0/slaves/vda1", withDestinationPath: "../../../../pci0000:00/0000:00:02.0/virtio1/block/vda/vda1")
        try manager.createSymbolicLink(atPath: root + "/sys/dev/block/253:0", withDestinationPath: "../../devices/virtual/block/dm-0")
        try manager.createDirectory(atPath: mapper + "/dm-1/slaves", withIntermediateDirectories: true)
        try manager.createSymbolicLink(atPath: mapper + "/dm-1/slaves/loop0", withDestinationPath: "../../loop0")
        try manager.createDirectory(atPath: mapper + "/loop0", withIntermediateDirectories: true)
        try manager.createSymbolicLink(atPath: root + "/sys/dev/block/253:1", withDestinationPath: "../../devices/virtual/block/dm-1")
        try manager.createDirectory(atPath: root + "/proc/irq/36", withIntermediateDirectories: true)
        if let effectiveAffinity {
            try effectiveAffinity.write(toFile: root + "/proc/irq/36/effective_affinity_list", atomically: true, encoding: .utf8)
        }
        try """
                       CPU0       CPU1
             24:          1          0  IO-APIC   5-edge      ACPI:Ged
             35:          0          0 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
             36:         12   22179629 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
             41:       6635          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
            NMI:          0          0   Non-maskable interrupts

            """.write(toFile: root + "/proc/interrupts", atomically: true, encoding: .utf8)
        return (DiskInterrupts(sysRoot: root + "/sys", procRoot: root + "/proc"), folder)
    }

    private func device(_ major: UInt64, _ minor: UInt64) -> UInt64 {
        ((major & 0xfff) << 8) | ((major & ~0xfff) << 32) | (minor & 0xff) | ((minor & ~0xff) << 12)
    }

    @Test func `a partition's disk and the CPUs its completion interrupts go to are found`() throws {
        let (interrupts, folder) = try fakeMachine(effectiveAffinity: "1\n")
        defer { folder.cleanUp() }
        #expect(try interrupts.locate(device: device(254, 1)).get() == DiskInterrupts.Finding(name: "vda", cpus: [1]))
        #expect(try interrupts.locate(device: device(254, 0)).get() == DiskInterrupts.Finding(name: "vda", cpus: [1]))
        #expect(try interrupts.locate(device: device(253, 0)).get() == DiskInterrupts.Finding(name: "dm-0 on vda", cpus: [1]))
        #expect(
            interrupts.locate(device: device(253, 1))
                == .failure(DiskInterrupts.Unknown(reason: "dm-1 is on loop0: no MSI interrupts found for loop0")))
    }

    @Test func `without the routing file the CPUs that counted the interrupts are taken`() throws {
        let (interrupts, folder) = try fakeMachine(effectiveAffinity: nil)
        defer { folder.cleanUp() }
        // Interrupt 36 was counted on both CPUs (12 and 22 million times).
        #expect(try interrupts.locate(device: device(254, 1)).get() == DiskInterrupts.Finding(name: "vda", cpus: [0, 1]))
    }

    @Test func `devices without a disk or interrupts are named in the reason`() throws {
        let (interrupts, folder) = try fakeMachine(effectiveAffinity: "1")
        defer { folder.cleanUp() }
        #expect(
            interrupts.locate(device: device(0, 27))
                == .failure(DiskInterrupts.Unknown(reason: "device 0:27 is not a block device (a memory or network file system?)")))
        #expect(interrupts.locate(device: device(7, 0)) == .failure(DiskInterrupts.Unknown(reason: "no MSI interrupts found for 7:0")))
        #expect(
            DiskInterrupts().locate(folder: folder.path + "/missing")
                == .failure(DiskInterrupts.Unknown(reason: "cannot stat \(folder.path)/missing: No such file or directory")))
    }

    @Test func `--commit-cpu parses auto, none and CPU lists`() throws {
        #expect(try Command.parse(["leader"]) == .leader(Command.LeaderOptions()))
        #expect(Command.LeaderOptions().commitAffinity == .automatic)
        var leader = Command.LeaderOptions()
        leader.commitAffinity = .unpinned
        #expect(try Command.parse(["leader", "--commit-cpu", "none"]) == .leader(leader))
        leader.commitAffinity = .cpus([0, 2, 3])
        #expect(try Command.parse(["leader", "--commit-cpu=0,2-3"]) == .leader(leader))
        #expect(throws: Command.UsageError(message: "--commit-cpu takes auto, none or a CPU list like 1 or 0-3,6, not 'fast'", subcommand: "leader")) {
            try Command.parse(["leader", "--commit-cpu", "fast"])
        }
    }

    @Test func `--spin-wait parses microseconds, for the leader and the cluster bench's leader`() throws {
        #expect(Command.LeaderOptions().spinWaitMicroseconds == 0)
        var leader = Command.LeaderOptions()
        leader.spinWaitMicroseconds = 250
        #expect(try Command.parse(["leader", "--spin-wait", "250"]) == .leader(leader))
        #expect(throws: Command.UsageError(message: "--spin-wait takes microseconds from 0 to 1000000, not 'soon'", subcommand: "leader")) {
            try Command.parse(["leader", "--spin-wait", "soon"])
        }
        #expect(throws: Command.UsageError(message: "--spin-wait takes microseconds from 0 to 1000000, not '-5'", subcommand: "leader")) {
            try Command.parse(["leader", "--spin-wait=-5"])
        }
        var bench = BenchOptions(suite: .cluster)
        bench.leaderSpinWaitMicroseconds = 150
        #expect(try LabParse.parseBench(["cluster", "--leader-spin-wait", "150"]) == bench)
        #expect(throws: Command.UsageError(message: "unknown option '--leader-spin-wait'", subcommand: "bench")) {
            try LabParse.parseBench(["log", "--leader-spin-wait", "150"])
        }
    }

    @Test func `a spinning leader serves one-at-a-time and pipelined requests, says so, and stops on SIGTERM`() throws {
        let data = TemporaryFolder()
        defer { data.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: data.path, options: ["--spin-wait", "300"])
        defer { leader.stop() }
        #expect(leader.waitForLine { $0.contains("cogd leader: serving thread") }?.hasSuffix(", spinning 300 µs after each batch") == true)
        let peer = try RawPeer(endpoint: ports.requests)
        var outcomes: [OpReply.Outcome] = []
        for sequence in 1...20 {
            guard case .reply(let reply)? = try peer.exchange([openAccountFrame("s\(sequence)", balance: 1, worker: "spin", sequence: UInt64(sequence))]) else {
                Issue.record("no reply to request \(sequence)")
                return
            }
            outcomes.append(reply.outcome)
        }
        #expect(outcomes == (1...20).map { .applied(revision: UInt64($0)) })
        let pipelined = try peer.replies(to: (21...220).map { try openAccountFrame("s\($0)", balance: 1, worker: "spin", sequence: UInt64($0)) })
        #expect(pipelined.map(\.outcome) == (21...220).map { .applied(revision: UInt64($0)) })
        let status = try runCogd(["status", "--leader", ports.requests])
        #expect(status.stdout.contains(", spinning 300 µs after each batch\n"), "\(status.stdout)")
        kill(leader.process.processIdentifier, SIGTERM)
        #expect(leader.waitForLine { $0.contains("cogd leader: stopped") }?.hasSuffix(" cogd leader: stopped at revision 220") == true)
        waitForExit(leader.process, timeout: .seconds(10))
        #expect(!leader.process.isRunning)
        #expect(leader.process.terminationStatus == 0)
    }

    /// The CPUs each of a process's threads may run on, by thread name.
    private func threadCPUs(_ pid: Int32) -> [(name: String, cpus: String)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { return nil }
            var name = ""
            var cpus = ""
            for line in status.split(separator: "\n") {
                if line.hasPrefix("Name:") { name = line.dropFirst(5).trimmingCharacters(in: .whitespaces) }
                if line.hasPrefix("Cpus_allowed_list:") { cpus = line.dropFirst(18).trimmingCharacters(in: .whitespaces) }
            }
            return (name, cpus)
        }
    }

    /// A leader started with `--commit-cpu 0`, which it says.
    private func leaderOnCPU0(_ data: TemporaryFolder, _ ports: ClusterPorts) throws -> CogdProcess {
        let leader = try ports.startLeader(data: data.path, options: ["--commit-cpu", "0"])
        #expect(leader.waitForLine { $0.contains("cogd leader: serving thread") }?.hasSuffix(" cogd leader: serving thread on CPU 0 (as asked)") == true)
        return leader
    }

    @Test func `a leader asked for a CPU serves there, its request I/O too, the turn stream's I/O on the CPUs left`() throws {
        let data = TemporaryFolder()
        defer { data.cleanUp() }
        let ports = ClusterPorts()
        let leader = try leaderOnCPU0(data, ports)
        defer { leader.stop() }
        // It serves (its I/O threads are placed by the time it answers).
        #expect(try ports.call("ledger.open", #"{"account":"a","balance":5}"#).hasPrefix("applied"))
        let threads = threadCPUs(leader.process.processIdentifier)
        let zeroMQ = Dictionary(threads.filter { $0.name.hasPrefix("ZMQbg") }.map { ($0.name, $0.cpus) }) { a, _ in a }
        let spare = ThreadAffinity.current().filter { $0 != 0 }
        var expected = ["ZMQbg/Reaper": "0", "ZMQbg/IO/0": "0"]
        if !spare.isEmpty { expected["ZMQbg/IO/1"] = CPUList.format(spare) }
        #expect(zeroMQ == expected, "threads: \(threads)")
        #expect(threads.contains { !$0.name.hasPrefix("ZMQbg") && $0.cpus == "0" }, "the serving thread too: \(threads)")
    }

    @Test(.enabled(if: ThreadAffinity.current().count > 1, "needs two CPUs"))
    func `a pinned leader lets its I/O threads use every CPU while loaded, then takes them back`() throws {
        let data = TemporaryFolder()
        defer { data.cleanUp() }
        let ports = ClusterPorts()
        let leader = try leaderOnCPU0(data, ports)
        defer { leader.stop() }
        let everyCPU = CPUList.format(ThreadAffinity.current())
        let spare = CPUList.format(ThreadAffinity.current().filter { $0 != 0 })
        let pid = leader.process.processIdentifier
        func ioCPUs() -> [String: String] {
            Dictionary(threadCPUs(pid).filter { $0.name.hasPrefix("ZMQbg/IO") }.map { ($0.name, $0.cpus) }) { a, _ in a }
        }
        let gatheredCPUs = ["ZMQbg/IO/0": "0", "ZMQbg/IO/1": spare]
        let peer = try RawPeer(endpoint: ports.requests)
        var sequence: UInt64 = 0
        func request() throws -> [UInt8] {
            sequence += 1
            return try openAccountFrame("load", balance: 1, worker: "placement", sequence: sequence)
        }
        #expect(try peer.exchange([request()]) != nil)
        #expect(ioCPUs() == gatheredCPUs, "requests' beside the serving thread at first: \(threadCPUs(pid))")
        // Pipelined: the leader takes many requests per batch.
        var spread = false
        for _ in 0..<10 where !spread {
            let replies = try peer.replies(to: (0..<500).map { _ in try request() }, round: 500)
            #expect(replies.count == 500)
            spread = ioCPUs() == ["ZMQbg/IO/0": everyCPU, "ZMQbg/IO/1": everyCPU]
        }
        #expect(spread, "spread under load: \(threadCPUs(pid))")
        let loaded = try runCogd(["status", "--leader", ports.requests])
        #expect(
            loaded.stdout.contains("placement serving thread on CPU 0 (as asked), ZeroMQ I/O on CPU \(everyCPU) (under load)\n"),
            "\(loaded.stdout)")
        #expect(threadCPUs(pid).contains { !$0.name.hasPrefix("ZMQbg") && $0.cpus == "0" }, "the serving thread stays: \(threadCPUs(pid))")
        // One at a time again.
        var gathered = false
        for _ in 0..<400 where !gathered {
            #expect(try peer.exchange([request()]) != nil)
            gathered = ioCPUs() == gatheredCPUs
        }
        #expect(gathered, "back with the serving thread: \(threadCPUs(pid))")
        let quiet = try runCogd(["status", "--leader", ports.requests, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(quiet.stdout.utf8)) as? [String: Any]
        #expect(
            object?["placement"] as? String == "serving thread on CPU 0 (as asked), requests' I/O beside it, the turn stream's on CPU \(spare)",
            "\(quiet.stdout)")
    }

    @Test func `a leader asked for a CPU it may not use says so and exits`() throws {
        let data = TemporaryFolder()
        defer { data.cleanUp() }
        let result = try runCogd([
            "leader", "--data", data.path, "--requests", "tcp://127.0.0.1:\(freePort())", "--turns", "tcp://127.0.0.1:\(freePort())",
            "--commit-cpu", "1023",
        ])
        #expect(result.status == 1)
        #expect(result.stderr.contains("Error: cannot run the serving thread on CPU 1023: this process may use CPU "), "\(result.stderr)")
    }

    @Test func `by default the leader says where its serving thread runs`() throws {
        let data = TemporaryFolder()
        defer { data.cleanUp() }
        let ports = ClusterPorts()
        let leader = try ports.startLeader(data: data.path)
        defer { leader.stop() }
        let line = leader.waitForLine { $0.contains("cogd leader: serving thread") }
        // Which one depends on the machine: pinned where the disk interrupts, or unpinned with the reason.
        #expect(
            line?.range(of: #" INFO  cogd leader: serving thread (on CPU [0-9,-]+ \(where .+'s completion interrupts go\)|unpinned \(.+\))$"#, options: .regularExpression) != nil,
            "\(line ?? "no line")")
    }
}
