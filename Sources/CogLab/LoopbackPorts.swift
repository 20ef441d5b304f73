import CogdCommandLine
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The loopback ports a lab run may serve on: `--ports A-B` of `cogd-lab
/// drill` and `cogd-lab bench cluster|groups|retention`.
///
/// The default, 20000–31999, lies below Linux's ephemeral range (32768 and
/// up), so no outgoing connection can take a port between the moment it is
/// found free and the moment the server given it binds.
struct PortRange: Equatable, Sendable, CustomStringConvertible {
    var lowerBound: Int
    var upperBound: Int

    /// What a run uses unless `--ports` says otherwise.
    static let standard = PortRange(lowerBound: 20_000, upperBound: 31_999)

    /// How many ports the range holds.
    var count: Int { upperBound - lowerBound + 1 }

    /// `A-B`, as `--ports` takes it.
    var description: String { "\(lowerBound)-\(upperBound)" }

    /// Parses `--ports`' value, `A-B` with 1024 ≤ A ≤ B ≤ 65535 (`A` alone: that one port).
    static func parse(_ text: String, subcommand: String) throws(CommandUsageError) -> PortRange {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let lower = Int(parts[0]), let upper = Int(parts[parts.count - 1]),
            (1024...65535).contains(lower), (1024...65535).contains(upper), lower <= upper
        else {
            throw CommandUsageError(
                message: "--ports takes a range of loopback ports A-B with 1024 ≤ A ≤ B ≤ 65535, not '\(text)'", subcommand: subcommand)
        }
        return PortRange(lowerBound: lower, upperBound: upper)
    }

    /// A usage error when the range holds fewer than `needed` ports (what the run will take).
    func check(needed: Int, what: String, subcommand: String) throws(CommandUsageError) {
        guard count < needed else { return }
        throw CommandUsageError(
            message: "--ports \(self) holds \(count) port\(count == 1 ? "" : "s"); \(what) needs \(needed)", subcommand: subcommand)
    }
}

/// The loopback ports one lab run serves on: `count` ports of a
/// `PortRange`, each free (bindable on 127.0.0.1) when taken at the start,
/// never the same twice, handed out in order with `next()`.
///
/// - Important: the run takes all of them at its start and says which in
///   one line (`line`), so a person can see them before anything binds.
final class LoopbackPorts: Sendable {
    let range: PortRange
    /// The ports taken, in the order `next()` hands them out.
    let ports: [Int]
    private let handedOut = Mutex(0)

    /// Finds `count` ports in `range` that bind now, starting at a random one.
    init(range: PortRange, count: Int) throws {
        self.range = range
        var found: [Int] = []
        let start = Int.random(in: 0..<range.count)
        for offset in 0..<range.count where found.count < count {
            let port = range.lowerBound + (start + offset) % range.count
            if Self.isFree(port) { found.append(port) }
        }
        guard found.count == count else {
            throw LabError(message: "only \(found.count) of the \(count) loopback ports this run needs are free in \(range) (--ports)")
        }
        ports = found
    }

    /// The next port not yet handed out.
    func next() -> Int {
        let index = handedOut.withLock { index in
            defer { index += 1 }
            return index
        }
        precondition(index < ports.count, "internal inconsistency: the run took \(ports.count) ports at its start and asks for another")
        return ports[index]
    }

    /// `tcp://127.0.0.1:PORT` with the next port.
    func nextEndpoint() -> String { "tcp://127.0.0.1:\(next())" }

    /// The line a run prints on stderr at its start: which ports, from which range.
    func line(_ program: String) -> String {
        "\(program): loopback ports \(ports.map(String.init).joined(separator: ", ")) on 127.0.0.1 (from --ports \(range))"
    }

    /// The ports as a JSON array.
    var json: String { "[" + ports.map(String.init).joined(separator: ", ") + "]" }

    /// Whether a TCP socket binds to 127.0.0.1:`port` now.
    static func isFree(_ port: Int) -> Bool {
        onLoopback(port) { descriptor, address, length in bind(descriptor, address, length) == 0 }
    }

    /// Whether something accepts a TCP connection on 127.0.0.1:`port` now
    /// (a port a run has closed may stay in TIME-WAIT a while, taken for
    /// `isFree` though nothing listens there).
    static func answers(_ port: Int) -> Bool {
        onLoopback(port) { descriptor, address, length in connect(descriptor, address, length) == 0 }
    }

    /// `body` with a fresh TCP socket (closed after) and the address 127.0.0.1:`port`; false when no socket is had.
    private static func onLoopback(
        _ port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}

/// A lab run that cannot go on (exit 1), with what to do.
struct LabError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
