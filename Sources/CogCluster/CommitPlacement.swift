import Foundation

/// Where the serving thread was placed, and why: what `cogd leader` prints.
public struct CommitPlacement: Sendable, Equatable {
    /// The CPUs the serving thread (and the ZeroMQ threads the leader starts) run on; nil when unpinned.
    public var cpus: [Int]?
    /// Why, in words.
    public var reason: String
    /// The CPUs the process may use (where ZeroMQ's I/O thread spreads under load).
    public var processCPUs: [Int] = []
    /// The CPUs the process may use besides the serving thread's (none when unpinned).
    public var spareCPUs: [Int] {
        guard let cpus else { return [] }
        return processCPUs.filter { !cpus.contains($0) }
    }

    public var description: String {
        guard let cpus else { return "serving thread unpinned (\(reason))" }
        return "serving thread on CPU \(CPUList.format(cpus)) (\(reason))"
    }

    /// Decides the placement for `affinity` and pins the calling thread.
    /// Threads it starts later (ZeroMQ's) inherit the placement. CPUs asked
    /// for by number that cannot be had are an error; `.automatic` then
    /// leaves the thread unpinned and says why.
    public static func apply(_ affinity: CommitAffinity, dataFolder: String) throws -> CommitPlacement {
        let allowed = ThreadAffinity.current()
        var placement = try decide(affinity, dataFolder: dataFolder, allowed: allowed)
        placement.processCPUs = allowed
        if let cpus = placement.cpus {
            do {
                try ThreadAffinity.pin(cpus)
            } catch where affinity == .automatic {
                return CommitPlacement(cpus: nil, reason: "\(error)", processCPUs: allowed)
            }
        }
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
                    code: .cpuNotAllowed,
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
/// hand-offs between the two threads then wake nothing on another CPU: the
/// op round trip's median ratio was 1.28–1.30 so against 1.31–1.36 with the
/// I/O thread free, close to this machine's noise), on every CPU the process
/// may use under load (its sends and receives then run beside the turns:
/// with 16 pipelining clients, 74–80k turns/s against 62–66k sharing one CPU).
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

/// Why the serving thread could not be placed as asked.
public struct CommitPlacementError: Error, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The CPUs asked for are not all ones this process may use.
        case cpuNotAllowed
        /// `sched_setaffinity` refused.
        case affinityRefused
    }

    public let code: Code
    public let message: String
    public var description: String { message }

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }
}
