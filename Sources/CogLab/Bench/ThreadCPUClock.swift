import Cog
import CogCluster
import Foundation
import LedgerRig

#if canImport(Glibc)
    import Glibc
#endif

/// The CPU time one thread of another process has used, read from
/// `/proc/PID/task/TID/schedstat` (its first field: nanoseconds on a CPU,
/// as the scheduler counts them): how `bench cluster` weighs the leader
/// child's serving thread (named `Leader.servingThreadName`) per op.
struct ThreadCPUClock {
    let path: String

    /// The thread of process `pid` named `name`, or nil when it has none (yet).
    init?(pid: Int32, threadNamed name: String) {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        guard
            let task = tasks.first(where: { task in
                let comm = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)
                return comm?.trimmingCharacters(in: .newlines) == name
            })
        else { return nil }
        path = "/proc/\(pid)/task/\(task)/schedstat"
    }

    /// Nanoseconds of CPU so far; nil once the thread is gone.
    func nanoseconds() -> UInt64? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return text.split(separator: " ").first.flatMap { UInt64($0) }
    }

    /// The calling thread's CPU time in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
    static func current() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}

extension ClusterBench {
    /// The in-run baseline of the leader's CPU per op: the CPU time of one
    /// graph turn of the same op (`ledger.transfer`, the transfers the
    /// clients send, between the same 100 accounts) on an in-process
    /// `Cogs`, with no store, socket or log: what running the op itself
    /// costs in this build on this machine now. The median of five runs of
    /// 20,000 turns, in µs.
    static func graphTurnMicroseconds() -> Double {
        let cogs = Cogs()
        for account in 0..<accounts { cogs.open(account: "a\(account)", with: 1_000_000) }
        var runs: [Double] = []
        var index = 0
        for _ in 0..<6 {
            let start = ThreadCPUClock.current()
            for _ in 0..<20_000 {
                let move = transfer(index)
                cogs.transfer(from: move.from, to: move.to, amount: move.amount)
                index += 1
            }
            runs.append(Double(ThreadCPUClock.current() - start) / 20_000 / 1_000)
        }
        return BenchFigure.median(Array(runs.dropFirst()))  // the first warms the graph up
    }
}

/// `ClusterBench.graphTurnMicroseconds()`, measured once per bench run.
@MainActor
enum GraphTurnBaseline {
    private static var measured: Double?

    static var microseconds: Double {
        if let measured { return measured }
        let value = ClusterBench.graphTurnMicroseconds()
        measured = value
        return value
    }
}
