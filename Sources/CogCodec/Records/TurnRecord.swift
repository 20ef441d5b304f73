import Foundation

/// One settled turn as the log keeps it (normative layout in
/// `protocol/turnlog.md`). A turn that changes nothing has no record.
public struct TurnRecord: Codable, Equatable, Sendable {
    /// Contiguous from 1.
    public var revision: UInt64
    /// The leader epoch (writable opens of the store) that committed it.
    public var epoch: UInt64
    /// Wall time when the turn was committed.
    public var time: Date
    /// The turn's composed name (`Trails.trailScreen.load()`).
    public var name: String
    public var origin: TurnOrigin
    /// What the turn settled, in commit order.
    public var writes: [TurnWrite]
    /// Scope instances the turn opened or retired (cluster mode; empty otherwise).
    public var scopeEvents: [ScopeEvent]
    /// The digest of the whole durable state after this turn (`StateDigest`),
    /// set by the store at commit: a replica that applied the record checks
    /// its own against it.
    public var stateDigest: StateDigest

    public init(
        revision: UInt64, epoch: UInt64, time: Date, name: String, origin: TurnOrigin = .system,
        writes: [TurnWrite], scopeEvents: [ScopeEvent] = [], stateDigest: StateDigest = StateDigest()
    ) {
        self.revision = revision
        self.epoch = epoch
        self.time = time
        self.name = name
        self.origin = origin
        self.writes = writes
        self.scopeEvents = scopeEvents
        self.stateDigest = stateDigest
    }

    /// A record committed `secondsSince1970` after 1970 (for code that
    /// keeps time as a number and imports no Foundation: `MemoryLog`).
    package init(
        revision: UInt64, epoch: UInt64, secondsSince1970: Double, name: String, origin: TurnOrigin = .system,
        writes: [TurnWrite], scopeEvents: [ScopeEvent] = [], stateDigest: StateDigest = StateDigest()
    ) {
        self.init(
            revision: revision, epoch: epoch, time: Date(timeIntervalSince1970: secondsSince1970), name: name, origin: origin,
            writes: writes, scopeEvents: scopeEvents, stateDigest: stateDigest)
    }

    package enum CodingKeys: String, CodingKey {
        case checksum = "crc", revision = "rev", epoch, time, name, origin, writes, scopeEvents = "scopes", stateDigest = "state"
    }

    /// The record's `Codable` form: `crc` is four zero bytes here (the
    /// checksum is a property of the bytes, set by `encoded()` and checked by
    /// `decode(_:)`, never by the `Codable` conformance).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Data(count: 4), forKey: .checksum)
        try container.encode(revision, forKey: .revision)
        try container.encode(epoch, forKey: .epoch)
        try container.encode(Data(stateDigest.bytes), forKey: .stateDigest)
        try container.encode(time, forKey: .time)
        try container.encode(name, forKey: .name)
        try container.encode(origin, forKey: .origin)
        try container.encode(writes, forKey: .writes)
        try container.encode(scopeEvents, forKey: .scopeEvents)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        revision = try container.decode(UInt64.self, forKey: .revision)
        epoch = try container.decode(UInt64.self, forKey: .epoch)
        time = try container.decode(Date.self, forKey: .time)
        name = try container.decode(String.self, forKey: .name)
        origin = try container.decode(TurnOrigin.self, forKey: .origin)
        writes = try container.decode([TurnWrite].self, forKey: .writes)
        scopeEvents = try container.decode([ScopeEvent].self, forKey: .scopeEvents)
        let digest = try container.decode([UInt8].self, forKey: .stateDigest)
        guard let stateDigest = StateDigest(bytes: digest) else {
            throw DecodingError.dataCorruptedError(
                forKey: .stateDigest, in: container, debugDescription: "a state digest is \(StateDigest.size) bytes, not \(digest.count)")
        }
        self.stateDigest = stateDigest
    }
}

/// Who asked for a turn: a worker's scope instance and request, or the system.
public struct TurnOrigin: Codable, Equatable, Hashable, Sendable {
    public var worker: String?
    public var instance: UInt64?
    public var request: RequestID?
    /// The request's digest of op and argument (`RequestDigest`): a retry
    /// with the same id must carry the same op and argument.
    public var digest: [UInt8]?

    public init(worker: String? = nil, instance: UInt64? = nil, request: RequestID? = nil, digest: [UInt8]? = nil) {
        self.worker = worker
        self.instance = instance
        self.request = request
        self.digest = digest
    }

    /// Turns opened by the runtime itself (or an embedded app) carry no origin.
    public static let system = TurnOrigin()

    public var isSystem: Bool { worker == nil && instance == nil && request == nil }
}

/// A request's identity: the worker that sent it and its sequence number there.
public struct RequestID: Codable, Equatable, Hashable, Sendable, CustomStringConvertible {
    public var worker: String
    public var sequence: UInt64

    public init(worker: String, sequence: UInt64) {
        self.worker = worker
        self.sequence = sequence
    }

    public var description: String { "\(worker)#\(sequence)" }

    package enum CodingKeys: String, CodingKey {
        case worker, sequence = "seq"
    }
}

/// One settled write: a durable source (and key) got a new value, or was released.
///
/// A value of `nil` (an optional source set to `nil`) is a value like any
/// other: its encoding is CBOR's `null`, `[0xf6]`. Only `value == nil`
/// means a release (`discard`); schema 3 records the two differently
/// (`protocol/turnlog.md` §3).
public struct TurnWrite: Codable, Equatable, Sendable {
    /// The source's stable `name:`.
    public var name: String
    /// The box key as deterministic CBOR; nil for a keyless source.
    public var key: [UInt8]?
    /// The new value as deterministic CBOR (`[0xf6]` for a `nil` value); nil
    /// only when the state was released.
    public var value: [UInt8]?

    public init(name: String, key: [UInt8]?, value: [UInt8]?) {
        self.name = name
        self.key = key
        self.value = value
    }

    public var isRelease: Bool { value == nil }

    /// An entry's identity in memory: its name's UTF-8, a 0, then its key —
    /// what replicas, the in-memory log and the checkers index state by
    /// (the LMDB key of a long key differs, `turnlog.md` §2).
    public static func entryKey(name: String, key: [UInt8]?) -> [UInt8] {
        Array(name.utf8) + [0] + (key ?? [])
    }

    /// This write's entry identity (`entryKey(name:key:)`).
    public var entryKey: [UInt8] { TurnWrite.entryKey(name: name, key: key) }

    package enum CodingKeys: String, CodingKey {
        case name, key, value, released
    }

    /// A write is `{"name", "key"?, "value"}` (`value` always present, `null`
    /// included); a release is `{"name", "key"?, "released": true}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        if let key { try container.encode(CBORValue.encoded(key), forKey: .key) }
        if let value {
            try container.encode(CBORValue.encoded(value), forKey: .value)
        } else {
            try container.encode(true, forKey: .released)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        key = try container.decodeIfPresent(CBORValue.self, forKey: .key).map { CBORWriter.encode($0) }
        let released = try container.decodeIfPresent(Bool.self, forKey: .released)
        // Not `decodeIfPresent`: it reads a present `null` (a nil value) as absent.
        let value = container.contains(.value) ? try container.decode(CBORValue.self, forKey: .value) : nil
        switch (released, value) {
        case (true?, nil): self.value = nil
        case (nil, let value?): self.value = CBORWriter.encode(value)
        default:
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "a write has either `value` or `\"released\": true`, not both or neither"))
        }
    }
}

/// A scope instance opened or retired by a turn (cluster mode, `protocol/cogwire.md` §6).
public struct ScopeEvent: Codable, Equatable, Sendable {
    public enum Kind: String, Codable, Sendable { case open, retire }
    public var kind: Kind
    public var instance: UInt64
    /// The composed scope path (`Trails.trailScreen`).
    public var scope: String
    /// The identity as deterministic CBOR (nil for a Bool scope).
    public var identity: [UInt8]?
    /// The worker whose registration the instance belongs to.
    public var worker: String?
    /// That worker's number for the registration.
    public var registration: UInt64?

    public init(
        kind: Kind, instance: UInt64, scope: String, identity: [UInt8]?, worker: String? = nil, registration: UInt64? = nil
    ) {
        self.kind = kind
        self.instance = instance
        self.scope = scope
        self.identity = identity
        self.worker = worker
        self.registration = registration
    }
}

/// The part of a record the store assigns at commit.
package struct TurnStamp {
    package var revision: UInt64
    package var epoch: UInt64
    package var time: Date
    /// The state's digest after the turn.
    package var stateDigest = StateDigest()

    package init(revision: UInt64, epoch: UInt64, time: Date, stateDigest: StateDigest = StateDigest()) {
        self.revision = revision
        self.epoch = epoch
        self.time = time
        self.stateDigest = stateDigest
    }
}

extension TurnRecord {
    package var stamp: TurnStamp { TurnStamp(revision: revision, epoch: epoch, time: time, stateDigest: stateDigest) }

    /// What the record holds besides its stamp.
    package var draft: TurnDraft { TurnDraft(name: name, origin: origin, writes: writes, scopeEvents: scopeEvents) }

    /// The record's deterministic CBOR. A hand-written fast path, byte-equal
    /// to `CBOREncoder().encode(record)` (a test keeps it so): the exact size
    /// is added up first and the bytes written into one allocation; scope
    /// events go through the generic encoder.
    public func encoded() -> [UInt8] {
        let scopes = TurnRecordWriter.scopes(scopeEvents)
        return withUnsafePointer(to: draft) { draft in
            let size = TurnRecordWriter.size(stamp, draft, scopes: scopes)
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                var writer = CBORSpanWriter(buffer.baseAddress!)
                var spans: [WriteSpan] = []
                TurnRecordWriter.write(stamp, draft, scopes: scopes, into: &writer, base: buffer.baseAddress!, spans: &spans)
                count = size
            }
        }
    }

    /// Decodes a record from its CBOR, after checking its checksum
    /// (`TurnRecordChecksum`): a record whose bytes were damaged throws,
    /// whatever the damage.
    public static func decode<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(CodecError) -> TurnRecord {
        let array = bytes as? [UInt8] ?? Array(bytes)
        try TurnRecordChecksum.check(array)
        var scanner = CBORScanner(array)
        if let record = TurnRecord(scanning: &scanner), scanner.isAtEnd { return record }
        return try CBORDecoder().decode(TurnRecord.self, from: array)
    }

    /// The state digest a record's bytes carry, after checking its
    /// checksum: its fields up to `state` are scanned, its writes and scope
    /// events are not read (the leader reads it for a lagging worker's heartbeat).
    package static func stateDigest(of bytes: [UInt8]) throws(CodecError) -> StateDigest {
        try TurnRecordChecksum.check(bytes)
        var scanner = CBORScanner(bytes)
        if scanner.mapCount() == 9, scanner.skip(text: "crc"), scanner.byteString()?.count == 4, scanner.skip(text: "rev"),
            scanner.unsigned() != nil, scanner.skip(text: "name"), scanner.item() != nil, scanner.skip(text: "time"),
            scanner.item() != nil, scanner.skip(text: "epoch"), scanner.unsigned() != nil, scanner.skip(text: "state"),
            let digest = scanner.byteString().flatMap({ StateDigest(bytes: $0) })
        {
            return digest
        }
        return try decode(bytes).stateDigest
    }

    /// The commit time a record's bytes carry, in seconds since 1970 (its
    /// fields up to `time` are scanned, nothing else is read); nil when
    /// they are not laid out as `encoded()` writes them.
    package static func time(of bytes: [UInt8]) -> Double? {
        var scanner = CBORScanner(bytes)
        guard scanner.mapCount() == 9, scanner.skip(text: "crc"), scanner.byteString()?.count == 4, scanner.skip(text: "rev"),
            scanner.unsigned() != nil, scanner.skip(text: "name"), scanner.item() != nil, scanner.skip(text: "time")
        else { return nil }
        return scanner.epochSeconds()
    }

    /// Reads one record laid out as `encoded()` writes it, without a tree
    /// (what `tail`, `verify` and replicas read most); nil for any other
    /// layout, and for records with scope events, which the general decoder
    /// reads instead.
    package init?(scanning scanner: inout CBORScanner) {
        let start = scanner.position
        guard scanner.mapCount() == 9, scanner.skip(text: "crc"), scanner.byteString()?.count == 4,
            scanner.skip(text: "rev"), let revision = scanner.unsigned(),
            scanner.skip(text: "name"), let name = scanner.text(), scanner.skip(text: "time"), let time = scanner.epochSeconds(),
            scanner.skip(text: "epoch"), let epoch = scanner.unsigned(),
            scanner.skip(text: "state"), let digest = scanner.byteString().flatMap({ StateDigest(bytes: $0) }), scanner.skip(text: "origin"),
            let origin = TurnOrigin(scanning: &scanner), scanner.skip(text: "scopes"), scanner.arrayCount() == 0,
            scanner.skip(text: "writes"), let count = scanner.arrayCount(), count <= 1 << 20
        else { return nil }
        var writes: [TurnWrite] = []
        writes.reserveCapacity(Int(min(count, 64)))  // the count is untrusted until the writes are read
        for _ in 0..<count {
            guard let fields = scanner.mapCount() else { return nil }
            var key: [UInt8]?
            if scanner.skip(text: "key") {
                guard let item = scanner.item() else { return nil }
                key = Array(item)
            }
            guard fields == (key == nil ? 2 : 3), scanner.skip(text: "name"), let writeName = scanner.text() else { return nil }
            var value: [UInt8]?
            if scanner.skip(text: "value") {
                guard let item = scanner.item() else { return nil }
                value = Array(item)
            } else {
                guard scanner.skip(text: "released"), scanner.skipTrue() else { return nil }
            }
            writes.append(TurnWrite(name: writeName, key: key, value: value))
        }
        // The checksum covers exactly the bytes read: a record in a `turns`
        // frame is checked here (the store checks before scanning).
        guard scanner.checksumMatches(recordFrom: start) else { return nil }
        self.init(
            revision: revision, epoch: epoch, time: Date(timeIntervalSince1970: time), name: name, origin: origin, writes: writes,
            stateDigest: digest)
    }
}

/// Writes turn records (from records, or from drafts with the stamp the
/// store gives them) as deterministic CBOR into a sized span.
///
/// - Important: drafts, their origins and writes are read through pointers,
///   in place: taking them by value made Swift retain and release every
///   string and array in them, which was half of the encoding time (`cogd
///   bench log --only encode`). The pointers are only valid inside the
///   caller's `withUnsafe…` scope.
/// Where one write's name (UTF-8, without its head), encoded key and encoded
/// value lie in an encoded batch; nil key: none, nil value: released.
package struct WriteSpan: Sendable {
    package var name: Range<Int>
    package var key: Range<Int>?
    package var value: Range<Int>?
}

package enum TurnRecordWriter {
    /// The scope events' CBOR, or nil when there are none (the common case).
    ///
    /// - Important: scope events are plain values the codec always encodes;
    ///   one that did not would put a false record (no events) in the log,
    ///   so it stops the process instead.
    package static func scopes(_ events: [ScopeEvent]) -> [UInt8]? {
        guard !events.isEmpty else { return nil }
        do {
            return try CBOREncoder().encode(events)
        } catch {
            preconditionFailure("internal inconsistency: \(events.count) scope events do not encode (\(error)); a record without them would be false")
        }
    }

    /// The exact byte count `write` writes.
    package static func size(_ stamp: TurnStamp, _ draft: UnsafePointer<TurnDraft>, scopes: [UInt8]?) -> Int {
        typealias Span = CBORSpanWriter
        var size = 1 + Span.textSize("crc") + 5 + Span.textSize("rev") + Span.headSize(stamp.revision)
        size += Span.textSize("state") + 1 + StateDigest.size
        size += Span.textSize("name") + Span.textSize(draft.pointee.name)
        size += Span.textSize("time") + Span.headSize(CBORTag.epochDate) + Span.floatSize(stamp.time.timeIntervalSince1970)
        size += Span.textSize("epoch") + Span.headSize(stamp.epoch)
        size += Span.textSize("origin") + TurnOrigin.encodedSize(TurnOrigin.of(draft))
        size += Span.textSize("scopes") + (scopes?.count ?? 1)
        size += Span.textSize("writes") + Span.headSize(UInt64(draft.pointee.writes.count))
        // Through the buffer: reading a field in place copies no whole write.
        draft.pointee.writes.withUnsafeBufferPointer { writes in
            guard let first = writes.baseAddress else { return }
            for write in first..<(first + writes.count) {
                size += 1 + Span.textSize("name") + Span.textSize(write.pointee.name)
                if let count = write.pointee.value?.count { size += Span.textSize("value") + count } else { size += Span.textSize("released") + 1 }
                if let count = write.pointee.key?.count { size += Span.textSize("key") + count }
            }
        }
        return size
    }

    /// Writes one record; the span holds `size(…)` bytes. Where each write's
    /// name, key and value land (offsets from `base`) goes into `spans`.
    package static func write(
        _ stamp: TurnStamp, _ draft: UnsafePointer<TurnDraft>, scopes: [UInt8]?, into writer: inout CBORSpanWriter,
        base: UnsafeMutablePointer<UInt8>, spans: inout [WriteSpan]
    ) {
        // Keys in deterministic order: crc, rev, name, time, epoch, state, origin, scopes, writes.
        let start = writer.cursor
        writer.head(major: 5, 9)
        writer.text("crc")
        writer.head(major: 2, 4)
        for _ in 0..<4 { writer.byte(0) }
        writer.text("rev")
        writer.head(major: 0, stamp.revision)
        writer.text("name")
        writer.text(draft.pointee.name)
        writer.text("time")
        writer.head(major: 6, CBORTag.epochDate)
        writer.float(stamp.time.timeIntervalSince1970)
        writer.text("epoch")
        writer.head(major: 0, stamp.epoch)
        writer.text("state")
        writer.head(major: 2, UInt64(StateDigest.size))
        let digest = stamp.stateDigest.value
        for index in 0..<StateDigest.size { writer.byte(UInt8(truncatingIfNeeded: digest >> UInt128(8 * (StateDigest.size - 1 - index)))) }
        writer.text("origin")
        TurnOrigin.write(TurnOrigin.of(draft), into: &writer)
        writer.text("scopes")
        if let scopes { writer.raw(scopes) } else { writer.head(major: 4, 0) }
        writer.text("writes")
        writer.head(major: 4, UInt64(draft.pointee.writes.count))
        draft.pointee.writes.withUnsafeBufferPointer { writes in
            guard let first = writes.baseAddress else { return }
            for write in first..<(first + writes.count) {
                // Keys: key, name, value (3 < 4 < 5 characters).
                writer.head(major: 5, write.pointee.key == nil ? 2 : 3)
                var keySpan: Range<Int>?
                if let key = write.pointee.key {
                    writer.text("key")
                    let start = writer.cursor - base
                    writer.raw(key)
                    keySpan = start..<(writer.cursor - base)
                }
                writer.text("name")
                let nameHead = writer.cursor - base
                writer.text(write.pointee.name)
                let nameSpan = (nameHead + CBORSpanWriter.headLength(base[nameHead]))..<(writer.cursor - base)
                var valueSpan: Range<Int>?
                if let value = write.pointee.value {
                    writer.text("value")
                    let start = writer.cursor - base
                    writer.raw(value)
                    valueSpan = start..<(writer.cursor - base)
                } else {
                    writer.text("released")
                    writer.byte(0xf5)
                }
                spans.append(WriteSpan(name: nameSpan, key: keySpan, value: valueSpan))
            }
        }
        TurnRecordChecksum.seal(UnsafeMutableRawBufferPointer(start: start, count: writer.cursor - start))
    }
}

extension TurnOrigin {
    /// Reads an origin map laid out as `write` writes it; nil otherwise.
    package init?(scanning scanner: inout CBORScanner) {
        guard let fields = scanner.mapCount() else { return nil }
        var origin = TurnOrigin()
        if scanner.skip(text: "digest") {
            guard let digest = scanner.byteString() else { return nil }
            origin.digest = digest
        }
        if scanner.skip(text: "worker") {
            guard let worker = scanner.text() else { return nil }
            origin.worker = worker
        }
        if scanner.skip(text: "request") {
            guard scanner.mapCount() == 2, scanner.skip(text: "seq"), let sequence = scanner.unsigned(),
                scanner.skip(text: "worker"), let worker = scanner.text()
            else { return nil }
            origin.request = RequestID(worker: worker, sequence: sequence)
        }
        if scanner.skip(text: "instance") {
            guard let instance = scanner.unsigned() else { return nil }
            origin.instance = instance
        }
        let present =
            (origin.worker == nil ? 0 : 1) + (origin.request == nil ? 0 : 1) + (origin.instance == nil ? 0 : 1)
            + (origin.digest == nil ? 0 : 1)
        guard fields == UInt64(present) else { return nil }
        self = origin
    }

    /// The origin of the draft at `draft`, read in place.
    package static func of(_ draft: UnsafePointer<TurnDraft>) -> UnsafePointer<TurnOrigin> {
        (UnsafeRawPointer(draft) + MemoryLayout<TurnDraft>.offset(of: \TurnDraft.origin)!).assumingMemoryBound(to: TurnOrigin.self)
    }

    package static func encodedSize(_ origin: UnsafePointer<TurnOrigin>) -> Int {
        typealias Span = CBORSpanWriter
        var size = 1
        if let digest = origin.pointee.digest { size += Span.textSize("digest") + Span.headSize(UInt64(digest.count)) + digest.count }
        if origin.pointee.worker != nil { size += Span.textSize("worker") + Span.textSize(origin.pointee.worker!) }
        if origin.pointee.request != nil {
            size += Span.textSize("request") + 1 + Span.textSize("seq") + Span.headSize(origin.pointee.request!.sequence)
            size += Span.textSize("worker") + Span.textSize(origin.pointee.request!.worker)
        }
        if let instance = origin.pointee.instance { size += Span.textSize("instance") + Span.headSize(instance) }
        return size
    }

    package static func write(_ origin: UnsafePointer<TurnOrigin>, into writer: inout CBORSpanWriter) {
        let hasWorker = origin.pointee.worker != nil
        let hasRequest = origin.pointee.request != nil
        let instance = origin.pointee.instance
        let digest = origin.pointee.digest
        writer.head(major: 5, UInt64((instance == nil ? 0 : 1) + (hasRequest ? 1 : 0) + (hasWorker ? 1 : 0) + (digest == nil ? 0 : 1)))
        // Keys: digest (6), worker (6, after "digest"), request (7), instance (8).
        if let digest {
            writer.text("digest")
            writer.head(major: 2, UInt64(digest.count))
            writer.raw(digest)
        }
        if hasWorker {
            writer.text("worker")
            writer.text(origin.pointee.worker!)
        }
        if hasRequest {
            writer.text("request")
            writer.head(major: 5, 2)
            writer.text("seq")
            writer.head(major: 0, origin.pointee.request!.sequence)
            writer.text("worker")
            writer.text(origin.pointee.request!.worker)
        }
        if let instance {
            writer.text("instance")
            writer.head(major: 0, instance)
        }
    }
}

/// Records encoded back to back in one buffer, as one group commit writes
/// them: each record's bytes go into the log, and the whole run becomes the
/// `records` array of the `turns` frame the leader publishes.
public struct EncodedTurnBatch: Sendable {
    /// The records' CBOR, back to back.
    public let bytes: [UInt8]
    /// Where each record ends in `bytes`.
    public let ends: [Int]
    /// Every write of every record, in order: where its name, key and value
    /// lie in `bytes` (the state table's puts are made from them).
    package let writeSpans: [WriteSpan]

    /// Encodes records as they are.
    public init(_ records: [TurnRecord]) {
        self.init(drafts: records.map(\.draft)) { records[$0].stamp }
    }

    /// Encodes drafts with the stamp the store gives draft `index`.
    package init(drafts: [TurnDraft], stamp: (Int) -> TurnStamp) {
        var scopes: [[UInt8]?] = []
        if drafts.contains(where: { !$0.scopeEvents.isEmpty }) { scopes = drafts.map { TurnRecordWriter.scopes($0.scopeEvents) } }
        var ends: [Int] = []
        ends.reserveCapacity(drafts.count)
        var total = 0
        drafts.withUnsafeBufferPointer { drafts in
            for index in drafts.indices {
                total += TurnRecordWriter.size(stamp(index), drafts.baseAddress! + index, scopes: scopes.isEmpty ? nil : scopes[index])
                ends.append(total)
            }
        }
        self.ends = ends
        var spans: [WriteSpan] = []
        spans.reserveCapacity(drafts.count)
        bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            guard let base = buffer.baseAddress else { return }
            var writer = CBORSpanWriter(base)
            drafts.withUnsafeBufferPointer { drafts in
                for index in drafts.indices {
                    TurnRecordWriter.write(
                        stamp(index), drafts.baseAddress! + index, scopes: scopes.isEmpty ? nil : scopes[index], into: &writer,
                        base: base, spans: &spans)
                }
            }
            count = total
        }
        writeSpans = spans
    }

    public static let empty = EncodedTurnBatch([])

    /// Encodes drafts as consecutive revisions from `firstRevision`, stamped
    /// with `epoch` and `time` (what a group commit writes), and with the
    /// state digests after each (`stateDigests[i]` for draft `i`; none: the
    /// empty state's, for measuring the encoding alone).
    public init(drafts: [TurnDraft], epoch: UInt64, firstRevision: UInt64, time: Date = Date(), stateDigests: [StateDigest]? = nil) {
        self.init(drafts: drafts) {
            TurnStamp(revision: firstRevision + UInt64($0), epoch: epoch, time: time, stateDigest: stateDigests?[$0] ?? StateDigest())
        }
    }

    /// `init(drafts:epoch:firstRevision:time:stateDigests:)` with the time
    /// as seconds since 1970 (for code that imports no Foundation: `MemoryLog`).
    package init(drafts: [TurnDraft], epoch: UInt64, firstRevision: UInt64, secondsSince1970: Double, stateDigests: [StateDigest]?) {
        self.init(
            drafts: drafts, epoch: epoch, firstRevision: firstRevision, time: Date(timeIntervalSince1970: secondsSince1970),
            stateDigests: stateDigests)
    }

    public var count: Int { ends.count }

    /// The bytes of record `index`.
    public func record(_ index: Int) -> ArraySlice<UInt8> {
        bytes[(index == 0 ? 0 : ends[index - 1])..<ends[index]]
    }
}

/// The checksum every turn record carries (`protocol/turnlog.md` §3).
///
/// A record is a map of 9 keys whose first key, in deterministic order, is
/// `crc`, so it starts with the 6 bytes `a9 63 63 72 63 44` (map of 9, text
/// "crc", byte string of 4) and bytes 6..<10 hold the CRC-32C, big-endian,
/// of the whole record with those 4 bytes taken as zero. (Schema 3 records
/// had 8 keys, no `state`, and start `a8 …`; only `cogd log upgrade` reads
/// them.)
public enum TurnRecordChecksum {
    /// The bytes every record starts with.
    package static let prefix: [UInt8] = [0xa9, 0x63, 0x63, 0x72, 0x63, 0x44]
    /// The bytes a schema 3 record starts with (8 keys: no `state`).
    package static let schema3Prefix: [UInt8] = [0xa8, 0x63, 0x63, 0x72, 0x63, 0x44]
    /// Where the checksum lies in a record.
    package static let field = 6..<10

    /// The CRC-32C of `record` with its checksum field taken as zero.
    package static func compute(_ record: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32C.update(0xFFFF_FFFF, UnsafeRawBufferPointer(rebasing: record[..<field.lowerBound]))
        crc = withUnsafeBytes(of: UInt32(0)) { CRC32C.update(crc, $0) }
        crc = CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: record[field.upperBound...]))
        return crc ^ 0xFFFF_FFFF
    }

    /// Writes the checksum into a record laid out with the prefix.
    package static func seal(_ record: UnsafeMutableRawBufferPointer) {
        let crc = compute(UnsafeRawBufferPointer(record))
        for index in 0..<4 { record[field.lowerBound + index] = UInt8(truncatingIfNeeded: crc >> (24 - 8 * index)) }
    }

    /// `record` (laid out with the prefix) with its checksum written in.
    package static func sealed(_ record: [UInt8]) -> [UInt8] {
        var record = record
        guard record.starts(with: prefix), record.count > field.upperBound else { return record }
        record.withUnsafeMutableBytes { seal($0) }
        return record
    }

    /// Whether `record` starts as a record does and carries its own checksum.
    package static func matches(_ record: UnsafeRawBufferPointer) -> Bool {
        guard record.count > field.upperBound, record.starts(with: prefix) else { return false }
        let stored = record[field].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return stored == compute(record)
    }

    /// Throws unless `record` carries its own checksum, saying what is wrong.
    public static func check(_ record: [UInt8]) throws(CodecError) {
        try check(record, prefix: prefix)
    }

    /// `check`, for records that start with `prefix` (a schema 3 one, for the upgrade).
    package static func check(_ record: [UInt8], prefix: [UInt8]) throws(CodecError) {
        let failure: String? = record.withUnsafeBytes { raw in
            guard raw.count > field.upperBound, raw.starts(with: prefix) else {
                if prefix == self.prefix, raw.starts(with: schema3Prefix) {
                    return "a schema 3 turn record (no state digest); `cogd log upgrade` rewrites its folder as schema 4"
                }
                return "not a schema \(prefix == self.prefix ? 4 : 3) turn record (it does not start with its `crc` field)"
            }
            let stored = raw[field].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let computed = compute(raw)
            guard stored != computed else { return nil }
            return "checksum mismatch: the record says crc \(hex(stored)), its bytes give \(hex(computed))"
        }
        if let failure { throw CodecError(code: .malformed, path: [], message: failure) }
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}
