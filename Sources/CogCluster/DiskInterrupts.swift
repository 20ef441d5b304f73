import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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
