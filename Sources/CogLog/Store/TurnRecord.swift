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

    public init(
        revision: UInt64, epoch: UInt64, time: Date, name: String, origin: TurnOrigin = .system,
        writes: [TurnWrite], scopeEvents: [ScopeEvent] = []
    ) {
        self.revision = revision
        self.epoch = epoch
        self.time = time
        self.name = name
        self.origin = origin
        self.writes = writes
        self.scopeEvents = scopeEvents
    }

    enum CodingKeys: String, CodingKey {
        case revision = "rev", epoch, time, name, origin, writes, scopeEvents = "scopes"
    }
}

/// Who asked for a turn: a worker's scope instance and request, or the system.
public struct TurnOrigin: Codable, Equatable, Hashable, Sendable {
    public var worker: String?
    public var instance: UInt64?
    public var request: RequestID?

    public init(worker: String? = nil, instance: UInt64? = nil, request: RequestID? = nil) {
        self.worker = worker
        self.instance = instance
        self.request = request
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

    enum CodingKeys: String, CodingKey {
        case worker, sequence = "seq"
    }
}

/// One settled write: a durable source (and key) got a new value, or was released.
public struct TurnWrite: Codable, Equatable, Sendable {
    /// The source's stable `name:`.
    public var name: String
    /// The box key as deterministic CBOR; nil for a keyless source.
    public var key: [UInt8]?
    /// The new value as deterministic CBOR; nil when the state was released.
    public var value: [UInt8]?

    public init(name: String, key: [UInt8]?, value: [UInt8]?) {
        self.name = name
        self.key = key
        self.value = value
    }

    public var isRelease: Bool { value == nil }

    enum CodingKeys: String, CodingKey {
        case name, key, value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        if let key { try container.encode(CBORValue.encoded(key), forKey: .key) }
        try container.encode(value.map(CBORValue.encoded) ?? .null, forKey: .value)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        key = try container.decodeIfPresent(CBORValue.self, forKey: .key).map { CBORWriter.encode($0) }
        let value = try container.decode(CBORValue.self, forKey: .value)
        self.value = value == .null ? nil : CBORWriter.encode(value)
    }
}

/// A scope instance opened or retired by a turn (cluster mode, DESIGN §6).
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

extension TurnRecord {
    /// The record's deterministic CBOR. A hand-written fast path, byte-equal
    /// to `CBOREncoder().encode(record)` (a test keeps it so); scope events go
    /// through the generic encoder.
    public func encoded() -> [UInt8] {
        var writer = CBORWriter(reservingCapacity: 96 + writes.count * 48)
        let hasScopes = !scopeEvents.isEmpty
        // Keys in deterministic order: rev, name, time, epoch, origin, scopes, writes.
        writer.appendHead(major: 5, 7)
        writer.appendText("rev")
        writer.appendHead(major: 0, revision)
        writer.appendText("name")
        writer.appendText(name)
        writer.appendText("time")
        writer.appendHead(major: 6, CBORTag.epochDate)
        writer.appendFloat(time.timeIntervalSince1970)
        writer.appendText("epoch")
        writer.appendHead(major: 0, epoch)
        writer.appendText("origin")
        origin.write(into: &writer)
        writer.appendText("scopes")
        if hasScopes {
            writer.appendRaw((try? CBOREncoder().encode(scopeEvents)) ?? [0x80])
        } else {
            writer.appendHead(major: 4, 0)
        }
        writer.appendText("writes")
        writer.appendHead(major: 4, UInt64(writes.count))
        for write in writes {
            // Keys: key, name, value (3 < 4 < 5 characters).
            writer.appendHead(major: 5, write.key == nil ? 2 : 3)
            if let key = write.key {
                writer.appendText("key")
                writer.appendRaw(key)
            }
            writer.appendText("name")
            writer.appendText(write.name)
            writer.appendText("value")
            if let value = write.value { writer.appendRaw(value) } else { writer.appendRaw(CollectionOfOne(0xf6)) }
        }
        return writer.bytes
    }

    /// Decodes a record from its CBOR.
    public static func decode<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(CodecError) -> TurnRecord {
        try CBORDecoder().decode(TurnRecord.self, from: bytes)
    }
}

extension TurnOrigin {
    func write(into writer: inout CBORWriter) {
        let count = (instance == nil ? 0 : 1) + (request == nil ? 0 : 1) + (worker == nil ? 0 : 1)
        writer.appendHead(major: 5, UInt64(count))
        // Keys: worker (6), request (7), instance (8).
        if let worker {
            writer.appendText("worker")
            writer.appendText(worker)
        }
        if let request {
            writer.appendText("request")
            writer.appendHead(major: 5, 2)
            writer.appendText("seq")
            writer.appendHead(major: 0, request.sequence)
            writer.appendText("worker")
            writer.appendText(request.worker)
        }
        if let instance {
            writer.appendText("instance")
            writer.appendHead(major: 0, instance)
        }
    }
}
