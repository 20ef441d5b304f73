import Foundation

/// One commit of a leader's log as it is shipped to a standby, which
/// applies it to its own copy (`TurnStore.apply(_:)`) so that the two
/// folders hold the same records, state, dedup answers, openings and
/// rejections (`protocol/ha.md` §8).
///
/// It carries what the commit was given, not the pages LMDB wrote: the
/// records as the leader encoded them (each with its revision, epoch, time
/// and the state digest after it), the dedup answers stored beside them,
/// the change to the dedup index, the retention the leader prunes with,
/// the openings and the rejections. A standby that applies it checks every
/// record's state digest against its own, so a copy that has drifted is
/// found at the first commit that shows it.
///
/// ```swift
/// store.shipper = { commit in standbys.send(commit.encoded()) }   // leader
/// try copy.apply(ShippedCommit.decode(bytes))                      // standby
/// ```
public struct ShippedCommit: Sendable, Equatable {
    /// The epoch of the leader that made the commit (the fencing token).
    public var epoch: UInt64
    /// The commit's place among those its leader made in `epoch` (1, 2, …):
    /// with `epoch`, its name (`CommitName`), which a copy keeps for its last
    /// commit (`meta.last-commit`) and names in its `standby-hello`. Nil for
    /// a retention pass, which is not named.
    public var number: UInt64?
    /// The log the commit belongs to (`meta.log-id`, 16 bytes).
    public var logID: [UInt8]
    /// The revision of the first record, or, for a commit without records,
    /// the revision after the last: the commit follows revision `firstRevision − 1`.
    public var firstRevision: UInt64
    /// The commit's time (the records', the rejections' and retention's clock).
    public var time: Date
    /// The records, encoded by the leader, back to back (`recordEnds` says where each ends).
    public var recordBytes: [UInt8]
    public var recordEnds: [Int]
    /// The dedup answers stored by the commit.
    public var replies: [DedupAnswer]
    public var index: DedupIndexChange?
    /// The retention the leader's commit pruned with.
    public var retention: Retention
    /// Scope instances opened without a record (`instances`).
    public var openings: [ScopeEvent]
    /// Requests answered rejected or refused (`rejections`).
    public var rejections: [RejectionRecord]
    /// Set for a pass of retention between commits (`TurnStore.prune`),
    /// which ships nothing else: the most records (and, separately, answers)
    /// the pass removes.
    public var pruneLimit: Int?

    /// One dedup answer: the request and the reply stored for it.
    public struct DedupAnswer: Sendable, Equatable {
        public var request: RequestID
        public var reply: [UInt8]

        public init(request: RequestID, reply: [UInt8]) {
            self.request = request
            self.reply = reply
        }
    }

    public init(
        epoch: UInt64, number: UInt64? = nil, logID: [UInt8], firstRevision: UInt64, time: Date, records: EncodedTurnBatch = .empty,
        replies: [DedupAnswer] = [], index: DedupIndexChange? = nil, retention: Retention = .everything, openings: [ScopeEvent] = [],
        rejections: [RejectionRecord] = [], pruneLimit: Int? = nil
    ) {
        self.epoch = epoch
        self.number = number
        self.logID = logID
        self.firstRevision = firstRevision
        self.time = time
        self.recordBytes = records.bytes
        self.recordEnds = records.ends
        self.replies = replies
        self.index = index
        self.retention = retention
        self.openings = openings
        self.rejections = rejections
        self.pruneLimit = pruneLimit
    }

    /// The commit's name: its epoch and number (nil: a retention pass, unnamed).
    public var name: CommitName? { number.map { CommitName(epoch: epoch, number: $0) } }

    /// How many records the commit holds.
    public var recordCount: Int { recordEnds.count }

    /// The bytes of record `index`.
    public func record(_ index: Int) -> ArraySlice<UInt8> {
        recordBytes[(index == 0 ? 0 : recordEnds[index - 1])..<recordEnds[index]]
    }

    /// The largest shipped commit a standby accepts, in encoded bytes
    /// (`protocol/ha.md` §8): a leader's commit is bounded by its batch
    /// limits far below it.
    public static let maximumBytes = 64 << 20
}

// MARK: - Encoding

extension ShippedCommit {
    /// The commit's wire form: a deterministic CBOR map (`protocol/ha.md` §8).
    struct Wire: Codable {
        var epoch: UInt64
        var number: UInt64?
        var log: [UInt8]
        var first: UInt64
        var time: Date
        var records: [[UInt8]]
        var replies: [Reply]
        /// `unindexed-from`'s revision, or 0 for `indexed`; absent: no change.
        var index: UInt64?
        var retain: Retain
        var openings: [ScopeEvent]
        var rejections: [RejectionRecord.Stored]
        /// A retention pass's limit (nothing else is shipped with it).
        var prune: UInt64?

        struct Reply: Codable {
            var worker: String
            var seq: UInt64
            var reply: [UInt8]
        }

        /// A retention: `everything`, `turns` (count), `age` (seconds) or `bytes` (size).
        struct Retain: Codable {
            var kind: String
            var count: UInt64?
            var seconds: Double?
        }
    }

    /// The commit's bytes, written directly in deterministic key order
    /// (byte-equal to `encodedGenerically()`; the `shipped-commit` vector and
    /// `ShippedCommitCodecTests` check it): the leader writes one per commit.
    public func encoded() -> [UInt8] {
        var writer = CBORWriter(reservingCapacity: 160 + recordBytes.count + 8 * recordCount + replies.reduce(0) { $0 + 32 + $1.reply.count })
        let index: UInt64? =
            switch self.index {
            case .unindexedFrom(let revision)?: revision
            case .indexed?: 0
            case nil: nil
            }
        writer.appendHead(major: 5, 9 + (index == nil ? 0 : 1) + (pruneLimit == nil ? 0 : 1) + (number == nil ? 0 : 1))
        // Shorter keys first, then bytewise: log, time, epoch, first, index, prune, number, retain, records, replies, openings, rejections.
        writer.appendText("log")
        writer.appendHead(major: 2, UInt64(logID.count))
        writer.appendRaw(logID)
        writer.appendText("time")
        writer.appendHead(major: 6, CBORTag.epochDate)
        writer.appendFloat(time.timeIntervalSince1970)
        writer.appendText("epoch")
        writer.appendHead(major: 0, epoch)
        writer.appendText("first")
        writer.appendHead(major: 0, firstRevision)
        if let index {
            writer.appendText("index")
            writer.appendHead(major: 0, index)
        }
        if let pruneLimit {
            writer.appendText("prune")
            writer.appendHead(major: 0, UInt64(pruneLimit))
        }
        if let number {
            writer.appendText("number")
            writer.appendHead(major: 0, number)
        }
        writer.appendText("retain")
        switch retention {
        case .everything:
            writer.appendHead(major: 5, 1)
            writer.appendText("kind")
            writer.appendText("everything")
        case .turns(let count):
            writer.appendRaw(ShippedCommit.retainHead)
            writer.appendText("turns")
            writer.appendText("count")
            writer.appendHead(major: 0, count)
        case .bytes(let size):
            writer.appendRaw(ShippedCommit.retainHead)
            writer.appendText("bytes")
            writer.appendText("count")
            writer.appendHead(major: 0, size)
        case .age(let seconds):
            writer.appendHead(major: 5, 2)  // kind, seconds
            writer.appendText("kind")
            writer.appendText("age")
            writer.appendText("seconds")
            writer.appendFloat(seconds)
        }
        writer.appendText("records")
        writer.appendHead(major: 4, UInt64(recordCount))
        for index in 0..<recordCount {
            let record = record(index)
            writer.appendHead(major: 2, UInt64(record.count))
            writer.appendRaw(record)
        }
        writer.appendText("replies")
        writer.appendHead(major: 4, UInt64(replies.count))
        for answer in replies {
            writer.appendHead(major: 5, 3)  // seq, reply, worker
            writer.appendText("seq")
            writer.appendHead(major: 0, answer.request.sequence)
            writer.appendText("reply")
            writer.appendHead(major: 2, UInt64(answer.reply.count))
            writer.appendRaw(answer.reply)
            writer.appendText("worker")
            writer.appendText(answer.request.worker)
        }
        // Openings and rejections are rare (registrations, refusals): their general encoding is their deterministic bytes.
        writer.appendText("openings")
        writer.appendRaw(openings.isEmpty ? [0x80] : ShippedCommit.generic(openings))
        writer.appendText("rejections")
        writer.appendRaw(rejections.isEmpty ? [0x80] : ShippedCommit.generic(rejections.map(\.stored)))
        return writer.bytes
    }

    /// A two-field `retain` map's head and its `kind` key.
    private static let retainHead: [UInt8] = [0xa2, 0x64] + Array("kind".utf8)

    private static func generic<T: Encodable>(_ value: T) -> [UInt8] {
        // Numbers, bytes, texts and times only: the encoder cannot fail on them.
        guard let bytes = try? CBOREncoder().encode(value) else {
            preconditionFailure("internal inconsistency: a shipped commit's \(T.self) did not encode")
        }
        return bytes
    }

    /// The commit's bytes through the general encoder (what `encoded()` must equal).
    package func encodedGenerically() -> [UInt8] {
        let retain: Wire.Retain
        switch retention {
        case .everything: retain = .init(kind: "everything")
        case .turns(let count): retain = .init(kind: "turns", count: count)
        case .age(let seconds): retain = .init(kind: "age", seconds: seconds)
        case .bytes(let bytes): retain = .init(kind: "bytes", count: bytes)
        }
        let index: UInt64? =
            switch self.index {
            case .unindexedFrom(let revision)?: revision
            case .indexed?: 0
            case nil: nil
            }
        let wire = Wire(
            epoch: epoch, number: number, log: logID, first: firstRevision, time: time, records: (0..<recordCount).map { Array(record($0)) },
            replies: replies.map { .init(worker: $0.request.worker, seq: $0.request.sequence, reply: $0.reply) }, index: index, retain: retain,
            openings: openings, rejections: rejections.map(\.stored), prune: pruneLimit.map { UInt64($0) })
        return ShippedCommit.generic(wire)
    }

    /// Reads a commit from its bytes; throws for anything else: bytes past
    /// `maximumBytes`, a map that is not a commit, an unknown retention, an
    /// index of 0 that is not `indexed`' own, a log id that is not 16 bytes,
    /// a retention count of 0, or a number of 0 or on a retention pass.
    public static func decode(_ bytes: [UInt8]) throws(CodecError) -> ShippedCommit {
        guard bytes.count <= maximumBytes else {
            throw invalid("a shipped commit of \(bytes.count) bytes is over the limit of \(maximumBytes)")
        }
        let wire: Wire
        if let scanned = Wire(scanning: bytes) { wire = scanned } else { wire = try CBORDecoder().decode(Wire.self, from: bytes) }
        guard wire.log.count == 16 else { throw invalid("a shipped commit's log id is \(wire.log.count) bytes, expected 16") }
        let retention: Retention
        switch (wire.retain.kind, wire.retain.count, wire.retain.seconds) {
        case ("everything", nil, nil): retention = .everything
        case ("turns", let count?, nil) where count > 0: retention = .turns(count)
        case ("age", nil, let seconds?) where seconds > 0 && seconds.isFinite: retention = .age(seconds: seconds)
        case ("bytes", let size?, nil) where size > 0: retention = .bytes(size)
        default: throw invalid("a shipped commit's retention is not one of everything, turns, age or bytes")
        }
        guard wire.number != 0 else { throw invalid("a shipped commit's number is 0 (a leader numbers its commits from 1)") }
        if let limit = wire.prune {
            guard limit > 0, limit <= UInt64(Int32.max), wire.number == nil, wire.records.isEmpty, wire.replies.isEmpty, wire.index == nil, wire.openings.isEmpty,
                wire.rejections.isEmpty, retention != .everything
            else {
                throw invalid("a shipped retention pass carries a limit from 1 to 2^31-1, a retention other than everything, and nothing else (no number)")
            }
        }
        var ends: [Int] = []
        var recordBytes: [UInt8] = []
        for record in wire.records {
            recordBytes += record
            ends.append(recordBytes.count)
        }
        var commit = ShippedCommit(
            epoch: wire.epoch, number: wire.number, logID: wire.log, firstRevision: wire.first, time: wire.time,
            replies: wire.replies.map { DedupAnswer(request: RequestID(worker: $0.worker, sequence: $0.seq), reply: $0.reply) },
            index: wire.index.map { $0 == 0 ? .indexed : .unindexedFrom($0) }, retention: retention, openings: wire.openings,
            rejections: wire.rejections.map { RejectionRecord(stored: $0) }, pruneLimit: wire.prune.map { Int($0) })
        commit.recordBytes = recordBytes
        commit.recordEnds = ends
        return commit
    }
}

extension ShippedCommit.Wire {
    /// Reads a commit laid out as `ShippedCommit.encoded()` writes it, with
    /// no openings and no rejections (a standby reads one per commit),
    /// without a tree; nil for anything else, which the general decoder reads.
    init?(scanning bytes: [UInt8]) {
        var scanner = CBORScanner(bytes)
        guard let fields = scanner.mapCount(), scanner.skip(text: "log"), let log = scanner.byteString(),
            scanner.skip(text: "time"), let seconds = scanner.epochSeconds(),
            scanner.skip(text: "epoch"), let epoch = scanner.unsigned(), scanner.skip(text: "first"), let first = scanner.unsigned()
        else { return nil }
        var index: UInt64?
        if scanner.skip(text: "index") {
            guard let value = scanner.unsigned() else { return nil }
            index = value
        }
        var prune: UInt64?
        if scanner.skip(text: "prune") {
            guard let value = scanner.unsigned() else { return nil }
            prune = value
        }
        var number: UInt64?
        if scanner.skip(text: "number") {
            guard let value = scanner.unsigned() else { return nil }
            number = value
        }
        guard fields == 9 + (index == nil ? 0 : 1) + (prune == nil ? 0 : 1) + (number == nil ? 0 : 1), scanner.skip(text: "retain"), let retainFields = scanner.mapCount(),
            scanner.skip(text: "kind"), let kind = scanner.text()
        else { return nil }
        var retain = Retain(kind: kind)
        switch retainFields {
        case 1: break
        case 2:
            if scanner.skip(text: "count") {
                guard let count = scanner.unsigned() else { return nil }
                retain.count = count
            } else {
                guard scanner.skip(text: "seconds"), let seconds = scanner.float() else { return nil }
                retain.seconds = seconds
            }
        default: return nil
        }
        guard scanner.skip(text: "records"), let recordCount = scanner.arrayCount(), recordCount <= UInt64(bytes.count) else { return nil }
        var records: [[UInt8]] = []
        records.reserveCapacity(Int(min(recordCount, 1_024)))  // the count is untrusted until the records are read
        for _ in 0..<recordCount {
            guard let record = scanner.byteString() else { return nil }
            records.append(record)
        }
        guard scanner.skip(text: "replies"), let replyCount = scanner.arrayCount(), replyCount <= UInt64(bytes.count) else { return nil }
        var replies: [Reply] = []
        replies.reserveCapacity(Int(min(replyCount, 1_024)))
        for _ in 0..<replyCount {
            guard scanner.mapCount() == 3, scanner.skip(text: "seq"), let seq = scanner.unsigned(), scanner.skip(text: "reply"),
                let reply = scanner.byteString(), scanner.skip(text: "worker"), let worker = scanner.text()
            else { return nil }
            replies.append(Reply(worker: worker, seq: seq, reply: reply))
        }
        guard scanner.skip(text: "openings"), scanner.arrayCount() == 0, scanner.skip(text: "rejections"), scanner.arrayCount() == 0,
            scanner.isAtEnd
        else { return nil }
        self.init(
            epoch: epoch, number: number, log: log, first: first, time: Date(timeIntervalSince1970: seconds), records: records, replies: replies, index: index,
            retain: retain, openings: [], rejections: [], prune: prune)
    }
}

extension ShippedCommit {
    /// Whether `bytes` are read by the direct reader (no openings, no
    /// rejections, laid out as `encoded()` writes them), not the general one.
    package static func isScannable(_ bytes: [UInt8]) -> Bool { Wire(scanning: bytes) != nil }
}

/// A shipped commit that is not one.
private func invalid(_ message: String) -> CodecError {
    CodecError(code: .invalidValue, path: [], message: message)
}

extension RejectionRecord {
    /// The stored value's fields (its revision and order come from where it is stored).
    var stored: Stored {
        Stored(
            time: time, worker: request.worker, seq: request.sequence, op: op, digest: digest, kind: kind, code: code, reason: reason,
            earlier: earlier ? true : nil)
    }

    init(stored: Stored) {
        self.init(
            time: stored.time, request: RequestID(worker: stored.worker, sequence: stored.seq), op: stored.op, digest: stored.digest,
            kind: stored.kind, code: stored.code, reason: stored.reason, earlier: stored.earlier == true)
    }
}
