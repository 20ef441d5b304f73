import CogCodec

/// The state table as of one revision, read a part at a time: the leader's
/// LMDB view (`StateSnapshotReader`) or the simulator's copy.
public protocol SnapshotSource: AnyObject {
    /// The revision the view holds.
    var revision: UInt64 { get }
    /// The state digest at `revision`.
    var stateDigest: StateDigest { get }
    /// The next entries in key order, as many as fit `maximumBytes` by
    /// `size` (at least one while any are left), and whether more follow.
    /// Throws `snapshotEnded` when the view is gone (take a new one).
    func next(maximumBytes: Int, size: (StateEntry) -> Int) throws(TurnStoreError) -> (entries: [StateEntry], more: Bool)
    /// Ends the view.
    func close()
}

/// The leader's snapshots asked for by `snapshot-request` (cogwire §5, §8),
/// as a pure state machine: one stream per requester, parts of about
/// `partBytes` (a whole snapshot: one message of at most
/// `WireMessage.snapshotPartTarget`, else `oversize`), a view that ends
/// under a stream started again at the newest revision, and a requester
/// that takes no part for `deadline` given up with its view.
///
/// The driver starts streams (`start`) and, between batches, offers each
/// part to the requester's socket (`pump`, whose `send` answers whether
/// the socket took it); it performs the effects.
public struct SnapshotSender<Source: SnapshotSource> {
    /// What the driver does for the sender.
    public enum Effect: Equatable {
        /// Count `event` in the leader's error counts (`snapshot-replaced`, `snapshot-abandoned`).
        case count(CogdCode)
        /// Send `peer` this error (counted by its code), then end its snapshot.
        case refuse(peer: [UInt8], WireError)
        /// The snapshot to `peer` is over (its last part went, or it was given up): tell the core.
        case ended(peer: [UInt8])
        /// The last part of a snapshot of `revision` went to `peer`, `parts` in all.
        case streamed(peer: [UInt8], parts: UInt64, revision: UInt64)
    }

    /// What a socket did with a part.
    public enum Sent {
        case taken
        /// No room now (the requester reads slowly): offered again later.
        case full
        /// The requester is gone.
        case failed
    }

    struct Stream {
        let peer: [UInt8]
        var source: Source
        var whole: Bool
        var part: UInt64 = 0
        /// The next part, encoded, if the socket had no room for it yet.
        var unsent: [UInt8]?
        var isLast = false
        /// When a part last went out (or the stream began).
        var progress: Duration
    }

    public let partBytes: Int
    public let deadline: Duration
    /// The simulator's broken rule: a requester that reads nothing is never given up.
    public var neverGivesUp = false
    private var streams: [Stream] = []

    public init(partBytes: Int, deadline: Duration) {
        precondition(partBytes > 0 && deadline > .zero, "internal inconsistency: a snapshot sender with part size \(partBytes) and deadline \(deadline)")
        self.partBytes = partBytes
        self.deadline = deadline
    }

    /// Snapshots being streamed now.
    public var count: Int { streams.count }
    public var isEmpty: Bool { streams.isEmpty }

    /// When the oldest stream last made progress (nil: none is under way).
    public var oldestProgress: Duration? { streams.map(\.progress).min() }

    /// Starts a snapshot for `peer` from `source` (or refuses it when the
    /// view could not be taken), replacing one under way for `peer`: that
    /// one's request gets no further part (counted `snapshot-replaced`).
    public mutating func start(to peer: [UInt8], whole: Bool, source: Result<Source, TurnStoreError>, now: Duration) -> [Effect] {
        var effects: [Effect] = []
        streams.removeAll { stream in
            guard stream.peer == peer else { return false }
            stream.source.close()
            effects.append(.count(.snapshotReplaced))
            return true
        }
        switch source {
        case .success(let source):
            streams.append(Stream(peer: peer, source: source, whole: whole, progress: now))
        case .failure(let error):
            effects += [.refuse(peer: peer, WireError(.unavailable, "cannot read the state table: \(error.message)")), .ended(peer: peer)]
        }
        return effects
    }

    /// Offers the next part of each stream to `send`. `reopen` takes a new
    /// view when one ended under its stream (nil: it cannot). Returns
    /// whether any part went, and the effects.
    public mutating func pump(
        now: Duration, epoch: UInt64, reopen: () -> Source?, send: ([UInt8], [UInt8]) -> Sent
    ) -> (sent: Bool, effects: [Effect]) {
        var sent = false
        var effects: [Effect] = []
        for index in streams.indices.reversed() {
            var stream = streams[index]
            if stream.unsent == nil {
                do {
                    let limit = stream.whole ? WireMessage.snapshotPartTarget : partBytes
                    let (entries, more) = try stream.source.next(maximumBytes: limit) {
                        WireMessage.snapshotEntrySize(name: $0.name, key: $0.key, value: $0.value)
                    }
                    if stream.whole && more {
                        // A whole snapshot is at most one part: a larger state comes only in parts.
                        stream.source.close()
                        streams.remove(at: index)
                        effects += [
                            .refuse(peer: stream.peer, WireError(
                                .oversize,
                                "the state table is over \(WireMessage.snapshotPartTarget) bytes: ask for it in parts (snapshot-request {\"parts\": true})")),
                            .ended(peer: stream.peer),
                        ]
                        continue
                    }
                    let snapshotEntries = entries.map { SnapshotEntry(name: $0.name, key: $0.key, value: $0.value) }
                    stream.unsent =
                        stream.whole
                        ? WireMessage.snapshot(
                            epoch: epoch, revision: stream.source.revision, entries: snapshotEntries, stateDigest: stream.source.stateDigest
                        ).encoded()
                        : WireMessage.snapshot(
                            epoch: epoch, revision: stream.source.revision, entries: snapshotEntries, part: stream.part, more: more,
                            stateDigest: stream.source.stateDigest
                        ).encoded()
                    stream.isLast = !more
                } catch {
                    stream.source.close()
                    // The view ended under the stream: start over at the newest
                    // revision (the requester takes a part 0 as the start of a
                    // new run). Any other failure ends the snapshot.
                    guard error.code == .snapshotEnded, let source = reopen() else {
                        streams.remove(at: index)
                        effects += [
                            .refuse(peer: stream.peer, WireError(.unavailable, "cannot read the state table: \(error.message)")),
                            .ended(peer: stream.peer),
                        ]
                        continue
                    }
                    streams[index] = Stream(peer: stream.peer, source: source, whole: stream.whole, progress: now)
                    continue
                }
            }
            switch send(stream.peer, stream.unsent!) {
            case .full:
                if !neverGivesUp, now - stream.progress > deadline {
                    // Its requester reads nothing: the held view (and the file
                    // growth it pins) is given up; it may ask again.
                    stream.source.close()
                    streams.remove(at: index)
                    effects += [.count(.snapshotAbandoned), .ended(peer: stream.peer)]
                } else {
                    streams[index] = stream
                }
                continue
            case .failed:
                // The requester is gone: it asks again.
                stream.source.close()
                streams.remove(at: index)
                effects.append(.ended(peer: stream.peer))
                continue
            case .taken:
                break
            }
            sent = true
            stream.unsent = nil
            stream.part += 1
            stream.progress = now
            if stream.isLast {
                stream.source.close()
                streams.remove(at: index)
                effects += [.streamed(peer: stream.peer, parts: stream.part, revision: stream.source.revision), .ended(peer: stream.peer)]
            } else {
                streams[index] = stream
            }
        }
        return (sent || streams.isEmpty, effects)
    }

    /// Ends every view (the leader stops).
    public mutating func closeAll() {
        for stream in streams { stream.source.close() }
        streams = []
    }
}
