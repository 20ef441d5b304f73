/// The workers given up this epoch (silent past the heartbeat timeout, or
/// gone with a goodbye), each with how it went, newest kept: past `limit`
/// names the longest gone is forgotten, so a leader whose workers come and
/// go under fresh names (the default `worker-PID`) does not grow forever. A
/// forgotten worker that speaks again is taken as a newcomer; its scope
/// instances retired with it all the same.
struct GoneWorkers {
    /// How a worker went: what the leader says when it speaks again.
    enum Reason: Equatable {
        /// Silent past the heartbeat timeout.
        case silent
        /// Said goodbye as it stopped.
        case saidGoodbye

        /// The words for messages: `worker w1 \(reason.words)`.
        var words: String {
            switch self {
            case .silent: "was silent past the heartbeat timeout"
            case .saidGoodbye: "said goodbye"
            }
        }
    }

    let limit: Int
    /// Each name held, with the serial of the time it went.
    private var serials: [String: Int] = [:]
    /// How each name held went.
    private var reasons: [String: Reason] = [:]
    /// (name, serial) in the order they went, from `start`; an entry whose
    /// serial is no longer the name's was removed or went again later.
    private(set) var order: [(name: String, serial: Int)] = []
    private var start = 0
    private var nextSerial = 0

    init(limit: Int) {
        self.limit = limit
    }

    var count: Int { serials.count }

    func contains(_ name: String) -> Bool { serials[name] != nil }

    /// How `name` went (nil: it is not held).
    func reason(_ name: String) -> Reason? { serials[name] == nil ? nil : reasons[name] ?? .silent }

    mutating func insert(_ name: String, reason: Reason = .silent) {
        guard serials[name] == nil else { return }
        reasons[name] = reason
        serials[name] = nextSerial
        order.append((name, nextSerial))
        nextSerial += 1
        while serials.count > limit, start < order.count {
            let oldest = order[start]
            if serials[oldest.name] == oldest.serial {
                serials[oldest.name] = nil
                reasons[oldest.name] = nil
            }
            start += 1
        }
        compact()
    }

    mutating func remove(_ name: String) {
        guard serials.removeValue(forKey: name) != nil else { return }
        reasons[name] = nil
        compact()
    }

    /// Drops entries that no longer count once they outnumber the names held.
    private mutating func compact() {
        guard order.count - serials.count > max(serials.count, 64) else { return }
        order = order[start...].filter { serials[$0.name] == $0.serial }
        start = 0
    }
}
