import CogProtocol
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// etcd's v3 JSON gateway over plain HTTP/1.1 (ha.md §3): each
/// `EtcdRequest` the arbiter core asks is one `POST` on a fresh loopback or
/// LAN connection, its answer one `EtcdAnswer`. No package can be fetched
/// here, so this is a client of our own, as small as the five requests the
/// arbiter needs.
///
/// Limits (ha.md §3): an answer is read up to 1 MiB (larger is `garbage`);
/// each request has a time limit, connection included, and a failed
/// connection tries the next endpoint of the list within the same limit.
///
/// - Important: one request at a time; call from one thread.
public final class EtcdGateway {
    /// An etcd client URL, `http://HOST:PORT`.
    public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
        public let host: String
        public let port: UInt16
        public var description: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
    }

    /// The answer size past which an answer is refused as garbage.
    public static let answerLimit = 1 << 20

    public let endpoints: [Endpoint]
    /// The endpoint tried first: the last that answered.
    private var current = 0

    public init(endpoints: [Endpoint]) {
        precondition(!endpoints.isEmpty, "internal inconsistency: an etcd gateway with no endpoint")
        self.endpoints = endpoints
    }

    /// Reads `--ha`'s list: comma-separated `http://HOST:PORT` URLs.
    public static func endpoints(_ text: String) throws -> [Endpoint] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard !parts.isEmpty, parts.count <= 16 else { throw EndpointError("--ha takes 1 to 16 etcd client URLs, comma-separated") }
        return try parts.map { part in
            let shown = String(part.unicodeScalars.prefix(80).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
            if part.hasPrefix("https://") {
                throw EndpointError("--ha \(shown): etcd over TLS is not supported; give the plain http:// client URL (keep etcd's client port on a trusted network)")
            }
            guard part.hasPrefix("http://") else { throw EndpointError("--ha \(shown): an etcd client URL is http://HOST:PORT") }
            var rest = Substring(part.dropFirst(7))
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]), port > 0 else {
                throw EndpointError("--ha \(shown): an etcd client URL is http://HOST:PORT, with the port")
            }
            var host = String(rest[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }) else {
                throw EndpointError("--ha \(shown): no host in the URL")
            }
            return Endpoint(host: host, port: port)
        }
    }

    public struct EndpointError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Asks etcd, trying each endpoint once from the last that answered,
    /// all within `limit`.
    public func perform(_ request: EtcdRequest, limit: Duration) -> EtcdAnswer {
        let deadline = ContinuousClock.now + limit
        var failure = EtcdFailure(.unreachable, "no endpoint tried")
        for offset in 0..<endpoints.count {
            let index = (current + offset) % endpoints.count
            switch post(endpoints[index], path: Self.path(request), body: Self.body(request), until: deadline) {
            case .success(let json):
                current = index
                return Self.answer(request, json)
            case .failure(let error):
                failure = error
                // An endpoint that answered (garbage or an error of etcd's) is the answer.
                if error.kind == .garbage || error.kind == .refused { return .failed(error) }
            }
            if ContinuousClock.now >= deadline { break }
        }
        return .failed(failure)
    }

    // MARK: - Requests and answers

    static func path(_ request: EtcdRequest) -> String {
        switch request {
        case .grantLease: "/v3/lease/grant"
        case .keepAlive: "/v3/lease/keepalive"
        case .revoke: "/v3/lease/revoke"
        case .read, .transaction: "/v3/kv/txn"
        }
    }

    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    static func body(_ request: EtcdRequest) -> [String: Any] {
        switch request {
        case .grantLease(let seconds): return ["TTL": String(seconds)]
        case .keepAlive(let lease), .revoke(let lease): return ["ID": String(lease)]
        case .read(let keys):
            return ["success": keys.map { ["request_range": ["key": base64($0)]] }]
        case .transaction(let compares, let puts):
            return [
                "compare": compares.map {
                    ["target": "MOD", "result": "EQUAL", "key": base64($0.key), "mod_revision": String($0.modRevision)]
                },
                "success": puts.map { put -> [String: Any] in
                    var fields: [String: Any] = ["key": base64(put.key), "value": base64(put.value)]
                    if put.lease != 0 { fields["lease"] = String(put.lease) }
                    return ["request_put": fields]
                },
            ]
        }
    }

    /// A 64-bit number as the gateway writes it: a decimal string (or, from
    /// some builds, a JSON number).
    static func int64(_ value: Any?) -> Int64? {
        if let text = value as? String { return Int64(text) }
        if let number = value as? Int64 { return number }
        if let number = value as? Int { return Int64(number) }
        return nil
    }

    static func answer(_ request: EtcdRequest, _ json: [String: Any]) -> EtcdAnswer {
        func garbage(_ what: String) -> EtcdAnswer { .failed(EtcdFailure(.garbage, "etcd's answer to \(path(request)) \(what)")) }
        if let code = json["code"], let message = json["message"] as? String ?? json["error"] as? String {
            if case .revoke = request, message.contains("lease not found") { return .revoked }
            return .failed(EtcdFailure(.refused, "etcd error \(int64(code).map(String.init) ?? "?"): \(ArbiterCore.shown(message))"))
        }
        switch request {
        case .grantLease:
            guard let lease = int64(json["ID"]), let seconds = int64(json["TTL"]) else { return garbage("has no lease ID and TTL") }
            return .granted(lease: lease, seconds: seconds)
        case .keepAlive:
            guard let result = json["result"] as? [String: Any] else { return garbage("has no result") }
            return .keptAlive(seconds: int64(result["TTL"]) ?? 0)
        case .revoke:
            return .revoked
        case .read(let keys):
            guard let responses = json["responses"] as? [[String: Any]], responses.count == keys.count else {
                return garbage("does not hold one range per key")
            }
            var values: [String: EtcdValue] = [:]
            for (key, response) in zip(keys, responses) {
                guard let range = response["response_range"] as? [String: Any] else { return garbage("holds a response that is not a range") }
                guard let kv = (range["kvs"] as? [[String: Any]])?.first else { continue }
                guard let encoded = kv["value"] as? String ?? (kv["value"] == nil ? "" : nil), let data = Data(base64Encoded: encoded),
                    let modRevision = int64(kv["mod_revision"])
                else { return garbage("holds a key without a readable value or revision") }
                values[key] = EtcdValue(value: String(decoding: data, as: UTF8.self), modRevision: modRevision)
            }
            return .values(values)
        case .transaction:
            guard json["header"] is [String: Any] else { return garbage("has no header") }
            return .transaction(succeeded: json["succeeded"] as? Bool ?? false)
        }
    }

    // MARK: - HTTP/1.1

    private func post(_ endpoint: Endpoint, path: String, body: [String: Any], until deadline: ContinuousClock.Instant)
        -> Result<[String: Any], EtcdFailure>
    {
        let payload: Data
        do { payload = try JSONSerialization.data(withJSONObject: body) } catch {
            preconditionFailure("internal inconsistency: an etcd request body that JSON cannot hold: \(error)")
        }
        let connection: Int32
        switch connect(endpoint, until: deadline) {
        case .success(let descriptor): connection = descriptor
        case .failure(let failure): return .failure(failure)
        }
        defer { close(connection) }
        let head = "POST \(path) HTTP/1.1\r\nHost: \(endpoint.host):\(endpoint.port)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(payload.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + Array(payload)
        var sent = 0
        while sent < bytes.count {
            guard SocketWait.ready(connection, for: Int16(POLLOUT), until: deadline) else {
                return .failure(EtcdFailure(.timedOut, "\(endpoint) took the request too slowly"))
            }
            let count = bytes[sent...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return .failure(EtcdFailure(.unreachable, "\(endpoint): send: \(String(cString: strerror(errno)))"))
            }
            sent += count
        }
        var response = HTTPResponse()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            switch response.parse() {
            case .complete(let body):
                // The gateway answers etcd's errors as JSON under a non-2xx status: read them all the same.
                return Self.json(body, endpoint: endpoint, status: response.status)
            case .garbage(let what):
                return .failure(EtcdFailure(.garbage, "\(endpoint) answered \(what), not etcd's HTTP gateway"))
            case .needMore:
                break
            }
            guard response.received.count <= Self.answerLimit + 64 * 1024 else {
                return .failure(EtcdFailure(.garbage, "\(endpoint) answered more than \(Self.answerLimit) bytes"))
            }
            guard SocketWait.ready(connection, for: Int16(POLLIN), until: deadline) else {
                return .failure(EtcdFailure(.timedOut, "no whole answer from \(endpoint) in time"))
            }
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return .failure(EtcdFailure(.unreachable, "\(endpoint): recv: \(String(cString: strerror(errno)))"))
            }
            if count == 0 {
                response.closed = true
                if case .needMore = response.parse() {
                    return .failure(response.received.isEmpty
                        ? EtcdFailure(.unreachable, "\(endpoint) closed the connection without answering")
                        : EtcdFailure(.garbage, "\(endpoint) closed the connection in the middle of an answer"))
                }
                continue
            }
            response.received += buffer[0..<count]
        }
    }

    private static func json(_ body: [UInt8], endpoint: Endpoint, status: Int) -> Result<[String: Any], EtcdFailure> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)), let json = object as? [String: Any] else {
            return .failure(EtcdFailure(.garbage, "\(endpoint) answered HTTP \(status) with a body that is not a JSON object"))
        }
        return .success(json)
    }

    private func connect(_ endpoint: Endpoint, until deadline: ContinuousClock.Instant) -> Result<Int32, EtcdFailure> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let looked = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &found)
        guard looked == 0, let address = found else {
            return .failure(EtcdFailure(.unreachable, "\(endpoint): \(String(cString: gai_strerror(looked)))"))
        }
        defer { freeaddrinfo(found) }
        let descriptor = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(EtcdFailure(.unreachable, "socket(): \(String(cString: strerror(errno)))")) }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        if Glibc.connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen) != 0 {
            guard errno == EINPROGRESS else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                return .failure(EtcdFailure(.unreachable, "connect to \(endpoint): \(reason)"))
            }
            guard SocketWait.ready(descriptor, for: Int16(POLLOUT), until: deadline) else {
                close(descriptor)
                return .failure(EtcdFailure(.unreachable, "connect to \(endpoint): no answer in time"))
            }
            var failure: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &failure, &length) == 0, failure == 0 else {
                close(descriptor)
                return .failure(EtcdFailure(.unreachable, "connect to \(endpoint): \(String(cString: strerror(failure)))"))
            }
        }
        return .success(descriptor)
    }

}

/// An HTTP/1.1 response as it arrives: the status line, the headers, and a
/// body by `Content-Length`, by chunks, or up to the close. A chunked body
/// is whole at its last chunk or at its first line (etcd's gateway streams
/// a keepalive's answer as one JSON line per chunk).
struct HTTPResponse {
    enum Parsed: Equatable {
        case needMore
        case complete([UInt8])
        case garbage(String)
    }

    var received: [UInt8] = []
    var closed = false
    private(set) var status = 0

    mutating func parse() -> Parsed {
        guard let headEnd = HTTPResponse.find([13, 10, 13, 10], in: received[...]) else {
            if received.count > 64 * 1024 { return .garbage("a head of more than 64 KiB") }
            if !Array("HTTP/1.".utf8).starts(with: received.prefix(7)) {
                return .garbage("something that is not HTTP")
            }
            return .needMore
        }
        let head = String(decoding: received[..<headEnd], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let statusFields = lines[0].split(separator: " ")
        guard statusFields.count >= 2, statusFields[0].hasPrefix("HTTP/1."), let code = Int(statusFields[1]), (100...599).contains(code) else {
            return .garbage("something that is not HTTP")
        }
        status = code
        var length: Int?
        var chunked = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "content-length" {
                guard let number = Int(value), number >= 0 else { return .garbage("a Content-Length that is not a number") }
                length = number
            }
            if name == "transfer-encoding", value.lowercased().contains("chunked") { chunked = true }
        }
        let body = received[(headEnd + 4)...]
        if chunked { return HTTPResponse.chunks(body) }
        if let length {
            guard length <= EtcdGateway.answerLimit else { return .garbage("a body of \(length) bytes") }
            return body.count >= length ? .complete(Array(body.prefix(length))) : .needMore
        }
        return closed ? .complete(Array(body)) : .needMore
    }

    /// A chunked body: whole at the last chunk, or once the chunks so far end a line.
    private static func chunks(_ bytes: ArraySlice<UInt8>) -> Parsed {
        var body: [UInt8] = []
        var rest = bytes
        while true {
            guard let lineEnd = find([13, 10], in: rest) else { return rest.count > 32 ? .garbage("a chunk size line too long") : .needMore }
            let sizeText = String(decoding: rest[rest.startIndex..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0, size <= EtcdGateway.answerLimit
            else { return .garbage("a chunk size that is not a number") }
            let start = lineEnd + 2
            if size == 0 { return .complete(body) }
            guard rest.endIndex - start >= size + 2 else { return body.last == 10 ? .complete(body) : .needMore }
            body += rest[start..<(start + size)]
            guard body.count <= EtcdGateway.answerLimit else { return .garbage("more than \(EtcdGateway.answerLimit) bytes") }
            rest = rest[(start + size + 2)...]
            if body.last == 10 { return .complete(body) }
        }
    }

    static func find(_ pattern: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        var index = bytes.startIndex
        while index + pattern.count <= bytes.endIndex {
            if bytes[index..<(index + pattern.count)].elementsEqual(pattern) { return index }
            index += 1
        }
        return nil
    }
}
