import Synchronization

// The API guide's worked examples, as a rig: identities, records and
// capabilities live here.

/// A trail in the catalogue.
struct TrailID: Hashable, Sendable, CustomStringConvertible {
    let rawValue: String
    var description: String { rawValue }
}

/// One opening of a trail screen; two openings of one trail get two IDs.
struct TrailScreenID: Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int
    var description: String { "screen\(rawValue)" }
}

/// A loaded trail.
struct Trail: Equatable, Sendable {
    let id: TrailID
    let name: String
}

/// What the app persists: the saved trails.
struct TrailsSnapshot: Equatable, Sendable {
    var savedTrailIDs: [TrailID]
    static let empty = TrailsSnapshot(savedTrailIDs: [])
}

/// Storage capability: read once at assembly, then only written.
struct TrailStore {
    var load: @MainActor () -> TrailsSnapshot?
    var save: @MainActor (TrailsSnapshot) -> Void
}

/// Loads trails; a test double finishes each request by hand and ignores
/// cancellation, like a request already on the wire.
final class TrailLoader: Sendable {
    private let pending = Mutex<[CheckedContinuation<Trail, Never>]>([])
    private let requests = Mutex<[TrailID]>([])
    private let started: AsyncStream<Int>.Continuation
    /// The index of each request as it starts.
    let starts: AsyncStream<Int>

    init() {
        (starts, started) = AsyncStream.makeStream(of: Int.self)
    }

    func load(_ id: TrailID) async -> Trail {
        await withCheckedContinuation { continuation in
            let index = pending.withLock { pending in
                pending.append(continuation)
                return pending.count - 1
            }
            requests.withLock { $0.append(id) }
            started.yield(index)
        }
    }

    /// Finishes request `index` with a trail named `name`.
    func finish(_ index: Int, name: String) {
        let (continuation, id) = (pending.withLock { $0[index] }, requests.withLock { $0[index] })
        continuation.resume(returning: Trail(id: id, name: name))
    }
}
