import Cog
import CogCluster
import CogCodec
import CogLog
import Foundation

/// `cogd ops`: the ops this program's leader serves — every op of every rig
/// given to `CogdCommandLine.main(rigs:)` — each with what it does, its
/// argument's JSON shape (derived from the argument's type) and an example
/// `cogd call` line (the op's declared example, else one made from the shape).
struct OpsCommand {
    let json: Bool
    let rigs: Rigs

    /// One op as listed: the first rig that lists it (a rig's variants share its ops).
    struct Listing {
        let op: any RemoteOpDeclaration
        let rig: String?
        /// Served only by a leader given this option (the program's trap rig).
        let onlyWith: String?
    }

    /// Every op the leader serves, in the rigs' order, each once, then
    /// those it serves only with `--trap-op`.
    var listings: [Listing] {
        var seen = Set<String>()
        var listings: [Listing] = []
        for rig in rigs.all {
            for op in rig.ops where seen.insert("\(op.name) \(op.site)").inserted {
                listings.append(Listing(op: op, rig: rig.name, onlyWith: nil))
            }
        }
        for op in rigs.trap?.ops ?? [] where seen.insert("\(op.name) \(op.site)").inserted {
            listings.append(Listing(op: op, rig: nil, onlyWith: "--trap-op"))
        }
        return listings
    }

    @MainActor
    func run() -> Int32 {
        let codec = ReplicaCodec()
        for listing in listings {
            let op = listing.op
            let shape = op.argumentShape
            let example = OpsCommand.example(of: op, shape: shape, codec: codec)
            if json {
                var fields = ["\"name\": \(CBORText.quoted(op.name))", "\"rig\": \(listing.rig.map(CBORText.quoted) ?? "null")"]
                fields.append("\"summary\": \(CBORText.quoted(op.summary))")
                fields.append("\"argument\": \(CBORText.quoted(shape.description))")
                fields.append("\"example\": \(example ?? "null")")
                if let option = listing.onlyWith { fields.append("\"onlyWith\": \(CBORText.quoted("leader \(option)"))") }
                print("{\(fields.joined(separator: ", "))}")
            } else {
                let served = listing.onlyWith.map { "served only by `\(CogdCommandLine.programName) leader \($0)`" }
                print("\(escaped: op.name)  (\(listing.rig.map { "rig \(TerminalText.escaped($0))" } ?? served ?? ""))")
                if !op.summary.isEmpty { print("    \(escaped: op.summary)") }
                print("    argument: \(escaped: shape.description)")
                if let example {
                    // JSON text from `CBORText`: every unsafe character already a `\u` escape.
                    // A negative number after `--`, or it would read as an option.
                    let argument = (example.hasPrefix("-") ? "-- " : "") + OpsCommand.shellQuoted(example)
                    print("    example:  \(CogdCommandLine.programName) call \(escaped: op.name) \(argument)")
                } else {
                    print("    example:  none (the argument's type has no JSON form cogd call can send, and the op declares no example)")
                }
                print("")
            }
        }
        return 0
    }

    /// The example argument as JSON, object fields in the order the type
    /// reads them: the op's declared example, else one made from its shape
    /// (nil when neither exists).
    @MainActor
    static func example(of op: any RemoteOpDeclaration, shape: OpArgumentShape, codec: any CogDurableStore) -> String? {
        if let bytes = try? op.encodedExample(codec: codec), let value = try? CBORValue.parse(bytes) {
            return json(value, shape: shape)
        }
        return sample(of: shape).map { json($0, shape: shape) }
    }

    /// `value` as strict JSON (`CBORText.json`), with the fields of each
    /// object in the order `shape` gives them (CBOR's deterministic order
    /// puts shorter keys first, which reads oddly in an example).
    static func json(_ value: CBORValue, shape: OpArgumentShape) -> String {
        switch (value, shape) {
        case (_, .optional(let wrapped)):
            return json(value, shape: wrapped)
        case (.array(let items), .array(let element)):
            return "[" + items.map { json($0, shape: element) }.joined(separator: ", ") + "]"
        case (.map(let entries), .object(let fields)):
            func rank(_ key: CBORValue) -> Int { fields.firstIndex { .text($0.name) == key } ?? fields.count }
            let ordered = entries.enumerated().sorted { (rank($0.element.key), $0.offset) < (rank($1.element.key), $1.offset) }
            return "{" + ordered.map { _, entry in
                let field = fields.first { .text($0.name) == entry.key }
                let key = entry.key.textValue.map(CBORText.quoted) ?? CBORText.quoted(CBORText.display(entry.key))
                return "\(key): \(json(entry.value, shape: field?.shape ?? .unknown))"
            }.joined(separator: ", ") + "}"
        case (.map(let entries), .dictionary(let element)):
            return "{" + entries.map { entry in
                let key = entry.key.textValue.map(CBORText.quoted) ?? CBORText.quoted(CBORText.display(entry.key))
                return "\(key): \(json(entry.value, shape: element))"
            }.joined(separator: ", ") + "}"
        default:
            return CBORText.json(value)
        }
    }

    /// A value of `shape` to show when the op declares no example: text
    /// "text", numbers 1 and 1.5, `true`, one element, every required
    /// field; nil when part of the shape has no JSON form.
    static func sample(of shape: OpArgumentShape) -> CBORValue? {
        switch shape {
        case .string: return .text("text")
        case .integer: return .unsigned(1)
        case .number: return .float(1.5)
        case .boolean: return .bool(true)
        case .array(let element): return sample(of: element).map { .array([$0]) }
        case .dictionary(let element): return sample(of: element).map { .map([(key: .text("key"), value: $0)]) }
        case .oneOf(let texts): return texts.first.map(CBORValue.text)
        case .optional(let wrapped): return sample(of: wrapped)
        case .object(let fields):
            var entries: [(key: CBORValue, value: CBORValue)] = []
            for field in fields where !field.isOptional {
                guard let value = sample(of: field.shape) else { return nil }
                entries.append((key: .text(field.name), value: value))
            }
            return .map(entries)
        case .opaque, .unknown: return nil
        }
    }

    /// `text` as one word for a POSIX shell: as it is when it is made of
    /// letters, digits, `.`, `_` and `-` only (a number), else in single
    /// quotes (a `'` inside as `'\''`).
    static func shellQuoted(_ text: String) -> String {
        let plain =
            !text.isEmpty
            && text.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) }
        return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
