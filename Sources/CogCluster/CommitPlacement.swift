internal import CThreadAffinity
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Which CPUs the leader's serving thread — the one that runs turns and
/// commits them — may run on.
///
/// A durable commit sleeps twice on the disk (`fdatasync`, then the meta
/// page's synchronous write). When the disk's completion interrupt arrives on
/// another CPU than the sleeping thread's, waking it costs a cross-CPU
/// interrupt; on this kind of virtual machine that was measured at about
/// 50 µs per wake (a raw LMDB commit: 215 µs on the interrupt's CPU, 315 µs
/// on the other). A thread that only commits ends up on the interrupt's CPU
/// by itself; the leader's thread is woken by the network as often, so the
/// scheduler keeps moving it away.
public enum CommitAffinity: Sendable, Equatable {
    /// Left to the scheduler.
    case unpinned
    /// The CPUs the data folder's disk delivers its completion interrupts
    /// to, when they are some of the CPUs this process may use (not all).
    case automatic
    /// These CPUs (numbered as Linux numbers them).
    case cpus([Int])
}

/// Where the serving thread was placed, and why: what `cogd leader` prints.
public struct CommitPlacement: Sendable, Equatable {
    /// The CPUs the serving thread (and the ZeroMQ threads the leader starts) run on; nil when unpinned.
    public var cpus: [Int]?
    /// Why, in words.
    public var reason: String
    /// The CPUs the process may use (where ZeroMQ's I/O thread spreads under load).
    public var processCPUs: [Int] = []

    public var description: String {
        guard let cpus else { return "serving thread unpinned (\(reason))" }
        return "serving thread on CPU \(CPUList.format(cpus)) (\(reason))"
    }

    /// Decides the placement for `affinity` and pins the calling thread.
    /// Threads it starts later (ZeroMQ's) inherit the placement.
    public static func apply(_ affinity: CommitAffinity, dataFolder: String) throws -> CommitPlacement {
        let allowed = ThreadAffinity.current()
        var placement = try decide(affinity, dataFolder: dataFolder, allowed: allowed)
        placement.processCPUs = allowed
        if let cpus = placement.cpus { try ThreadAffinity.pin(cpus) }
        return placement
    }

    private static func decide(_ affinity: CommitAffinity, dataFolder: String, allowed: [Int]) throws -> CommitPlacement {
        switch affinity {
        case .unpinned:
            return CommitPlacement(cpus: nil, reason: "as asked")
        case .cpus(let cpus):
            let refused = cpus.filter { !allowed.contains($0) }
            guard refused.isEmpty, !cpus.isEmpty else {
                throw CommitPlacementError(
                    message: "cannot run the serving thread on CPU \(CPUList.format(refused.isEmpty ? cpus : refused)): "
                        + "this process may use CPU \(CPUList.format(allowed))")
            }
            return CommitPlacement(cpus: cpus.sorted(), reason: "as asked")
        case .automatic:
            let disk: DiskInterrupts.Finding
            switch DiskInterrupts().locate(folder: dataFolder) {
            case .success(let finding): disk = finding
            case .failure(let unknown): return CommitPlacement(cpus: nil, reason: unknown.reason)
            }
            let target = disk.cpus.filter { allowed.contains($0) }
            if target.isEmpty {
                return CommitPlacement(
                    cpus: nil,
                    reason: "\(disk.name)'s interrupts go to CPU \(CPUList.format(disk.cpus)), which this process may not use")
            }
            if Set(target) == Set(allowed) {
                return CommitPlacement(cpus: nil, reason: "\(disk.name)'s interrupts go to every CPU it may use")
            }
            return CommitPlacement(cpus: target, reason: "where \(disk.name)'s completion interrupts go")
        }
    }
}

/// Where ZeroMQ's I/O thread runs while the serving thread is pinned: on the
/// serving thread's CPUs while requests arrive one at a time (a request's
/// hand-offs between the two threads then wake nothing on another CPU —
/// the op round trip was ~4% faster so), on every CPU the process may use
/// under load (its sends and receives then run beside the turns: with 16
/// pipelining clients, 74–80k turns/s against 62–66k sharing one CPU).
/// Decided from a moving average of messages per batch, with hysteresis.
struct IOPlacementPolicy {
    private(set) var spread = false
    /// Messages per batch, averaged over the last ten batches or so.
    private(set) var load = 1.0

    /// Takes one batch's message count; returns the new placement (spread
    /// or not) when it changes.
    mutating func observe(batch messages: Int) -> Bool? {
        load = load * 0.9 + Double(messages) * 0.1
        if !spread && load >= 2 {
            spread = true
            return true
        }
        if spread && load <= 1.2 {
            spread = false
            return false
        }
        return nil
    }
}

public struct CommitPlacementError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// The calling thread's CPU affinity (Linux `sched_{get,set}affinity`).
public enum ThreadAffinity {
    /// CPUs a mask holds (glibc's `CPU_SETSIZE`).
    public static let capacity = 1_024

    /// The CPUs the calling thread may run on.
    public static func current() -> [Int] {
        var mask = [UInt8](repeating: 0, count: capacity / 8)
        guard cogd_thread_affinity(&mask, mask.count) == 0 else { return [] }
        return (0..<capacity).filter { mask[$0 / 8] & (1 << UInt8($0 % 8)) != 0 }
    }

    /// Restricts `thread` (a thread id of this process; 0, the calling thread) to `cpus`.
    public static func pin(_ cpus: [Int], thread: Int32 = 0) throws {
        var mask = [UInt8](repeating: 0, count: capacity / 8)
        for cpu in cpus where cpu >= 0 && cpu < capacity { mask[cpu / 8] |= 1 << UInt8(cpu % 8) }
        let code = cogd_set_thread_affinity(thread, mask, mask.count)
        guard code == 0 else {
            throw CommitPlacementError(message: "sched_setaffinity(CPU \(CPUList.format(cpus))) failed: \(String(cString: strerror(code)))")
        }
    }
}

extension ThreadAffinity {
    /// The ids of this process's threads whose name starts with `prefix`
    /// (ZeroMQ names its own: "ZMQbg/IO/0", "ZMQbg/Reaper").
    public static func threads(named prefix: String) -> [Int32] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            guard let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                name.hasPrefix(prefix)
            else { return nil }
            return Int32(task)
        }.sorted()
    }
}

/// Linux CPU lists: "0-3,5,7-8".
public enum CPUList {
    /// Parses a list; nil when any part is not a number or a range of them.
    public static func parse(_ text: String) -> [Int]? {
        var cpus: [Int] = []
        for part in text.split(separator: ",") {
            let bounds = part.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(bounds.count), let low = Int(bounds[0]), low >= 0,
                let high = bounds.count == 2 ? Int(bounds[1]) : low, high >= low
            else { return nil }
            cpus += Array(low...high)
        }
        return cpus.isEmpty ? nil : Array(Set(cpus)).sorted()
    }

    /// Formats sorted CPUs with ranges: [0, 1, 2, 5] → "0-2,5".
    public static func format(_ cpus: [Int]) -> String {
        var parts: [String] = []
        var index = 0
        let sorted = Array(Set(cpus)).sorted()
        while index < sorted.count {
            var end = index
            while end + 1 < sorted.count && sorted[end + 1] == sorted[end] + 1 { end += 1 }
            parts.append(end == index ? "\(sorted[index])" : "\(sorted[index])-\(sorted[end])")
            index = end + 1
        }
        return parts.joined(separator: ",")
    }
}

/// Finds the CPUs a folder's disk delivers its completion interrupts to,
/// from sysfs and procfs (roots injectable for tests): the folder's device
/// (`/sys/dev/block/MAJOR:MINOR`, its whole disk if it is a partition, the
/// disks under it if it is a device-mapper or RAID device), the MSI
/// interrupts of the bus device above each disk (`msi_irqs`), and for those that
/// have fired, the CPUs they are routed to now (`/proc/irq/N/effective_affinity_list`,
/// else the CPUs that counted them in `/proc/interrupts`).
public struct DiskInterrupts: Sendable {
    public struct Finding: Sendable, Equatable {
        /// The disk's name ("vda", "nvme0n1").
        public var name: String
        public var cpus: [Int]

        public init(name: String, cpus: [Int]) {
            self.name = name
            self.cpus = cpus
        }
    }

    public struct Unknown: Error, Equatable {
        public var reason: String

        public init(reason: String) { self.reason = reason }
    }

    public var sysRoot: String
    public var procRoot: String

    public init(sysRoot: String = "/sys", procRoot: String = "/proc") {
        self.sysRoot = sysRoot
        self.procRoot = procRoot
    }

    public func locate(folder: String) -> Result<Finding, Unknown> {
        var info = stat()
        guard stat(folder, &info) == 0 else {
            return .failure(Unknown(reason: "cannot stat \(folder): \(String(cString: strerror(errno)))"))
        }
        return locate(device: UInt64(info.st_dev))
    }

    /// As `locate(folder:)`, for a device number (`st_dev`).
    public func locate(device: UInt64) -> Result<Finding, Unknown> {
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let link = "\(sysRoot)/dev/block/\(major):\(minor)"
        guard let disk = realPath(link) else {
            return .failure(Unknown(reason: "device \(major):\(minor) is not a block device (a memory or network file system?)"))
        }
        return locate(disk: disk, depth: 0)
    }

    /// The CPUs for the block device at `path` (its sysfs folder): its own
    /// interrupts, or those of the devices it is built on (`slaves`: device
    /// mapper, LVM, software RAID).
    private func locate(disk path: String, depth: Int) -> Result<Finding, Unknown> {
        var disk = path
        if FileManager.default.fileExists(atPath: disk + "/partition") { disk = parent(disk) }
        let name = (disk as NSString).lastPathComponent
        guard let irqs = msiInterrupts(above: disk) else {
            let slaves = ((try? FileManager.default.contentsOfDirectory(atPath: disk + "/slaves")) ?? []).sorted()
            guard !slaves.isEmpty, depth < 4 else { return .failure(Unknown(reason: "no MSI interrupts found for \(name)")) }
            var cpus = Set<Int>()
            var under: [String] = []
            for slave in slaves {
                guard let slavePath = realPath("\(disk)/slaves/\(slave)") else { continue }
                switch locate(disk: slavePath, depth: depth + 1) {
                case .success(let finding):
                    cpus.formUnion(finding.cpus)
                    under.append(finding.name)
                case .failure(let unknown):
                    return .failure(Unknown(reason: "\(name) is on \(slave): \(unknown.reason)"))
                }
            }
            guard !cpus.isEmpty else { return .failure(Unknown(reason: "no MSI interrupts found for \(name)")) }
            return .success(Finding(name: "\(name) on \(under.joined(separator: ", "))", cpus: cpus.sorted()))
        }
        guard let counts = interruptCounts(irqs), !counts.isEmpty else {
            return .failure(Unknown(reason: "\(name)'s interrupts are not in \(procRoot)/interrupts"))
        }
        var cpus = Set<Int>()
        for (irq, perCPU) in counts where perCPU.contains(where: { $0 > 0 }) {
            let routed = (try? String(contentsOfFile: "\(procRoot)/irq/\(irq)/effective_affinity_list", encoding: .utf8))
                .flatMap(CPUList.parse)
            cpus.formUnion(routed ?? perCPU.indices.filter { perCPU[$0] > 0 })
        }
        guard !cpus.isEmpty else { return .failure(Unknown(reason: "\(name) has not interrupted yet")) }
        return .success(Finding(name: name, cpus: cpus.sorted()))
    }

    /// The interrupt numbers in the nearest `msi_irqs` folder above `path`.
    private func msiInterrupts(above path: String) -> [Int]? {
        var current = path
        let devices = realPath(sysRoot + "/devices") ?? sysRoot + "/devices"
        while current.hasPrefix(devices), current != devices {
            if let entries = try? FileManager.default.contentsOfDirectory(atPath: current + "/msi_irqs") {
                let irqs = entries.compactMap { Int($0) }.sorted()
                return irqs.isEmpty ? nil : irqs
            }
            current = parent(current)
        }
        return nil
    }

    /// Per CPU, how many times each of `irqs` fired (`/proc/interrupts`).
    private func interruptCounts(_ irqs: [Int]) -> [Int: [UInt64]]? {
        guard let text = try? String(contentsOfFile: procRoot + "/interrupts", encoding: .utf8) else { return nil }
        var lines = text.split(separator: "\n")
        guard !lines.isEmpty else { return nil }
        let columns = lines.removeFirst().split(separator: " ").compactMap { $0.hasPrefix("CPU") ? Int($0.dropFirst(3)) : nil }
        var counts: [Int: [UInt64]] = [:]
        let wanted = Set(irqs)
        for line in lines {
            let fields = line.split(separator: " ")
            guard let first = fields.first, first.hasSuffix(":"), let irq = Int(first.dropLast()), wanted.contains(irq) else { continue }
            var perCPU = [UInt64](repeating: 0, count: (columns.max() ?? -1) + 1)
            for (column, cpu) in columns.enumerated() where column + 1 < fields.count {
                perCPU[cpu] = UInt64(fields[column + 1]) ?? 0
            }
            counts[irq] = perCPU
        }
        return counts
    }

    private func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private func parent(_ path: String) -> String { (path as NSString).deletingLastPathComponent }
}
