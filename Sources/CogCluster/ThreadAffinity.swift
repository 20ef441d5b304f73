internal import CThreadAffinity
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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
            throw CommitPlacementError(
                code: .affinityRefused, message: "sched_setaffinity(CPU \(CPUList.format(cpus))) failed: \(String(cString: strerror(code)))")
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

extension ThreadAffinity {
    /// Names the calling thread as `top -H`, `ps -L`, `perf` and
    /// `/proc/PID/task/TID/comm` show it (Linux keeps at most 15 bytes; a
    /// longer name is cut there). Returns the name it had, nil when unreadable.
    @discardableResult
    public static func nameCurrentThread(_ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 16)
        let previous = cogd_thread_name(&buffer, buffer.count) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        _ = cogd_set_thread_name(name)
        return previous
    }
}
