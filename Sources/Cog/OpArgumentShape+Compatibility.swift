extension OpArgumentShape {
    /// How deep a shape from a peer may nest (an object's field, an array's
    /// element, an optional's value each go one level down) before a leader
    /// refuses to compare it (`protocol/cogwire.md` §7, "Rig versions";
    /// the shapes `of` derives stay within 2 × `maximumDepth`).
    public static let maximumComparedDepth = 32
    /// How many parts (each leaf, array, object, field, …) a shape from a
    /// peer may have before a leader refuses to compare it.
    public static let maximumComparedParts = 4_096
    /// How many characters of a shape a message shows, then `…`.
    public static let maximumShownCharacters = 300

    /// Whether the shape is within `maximumComparedDepth` and
    /// `maximumComparedParts`: counts at most one part past the limit, so a
    /// hostile shape costs no more than the limit to measure.
    public var isWithinComparedLimits: Bool {
        var parts = 0
        return fits(depth: 1, parts: &parts)
    }

    private func fits(depth: Int, parts: inout Int) -> Bool {
        parts += 1
        guard depth <= Self.maximumComparedDepth, parts <= Self.maximumComparedParts else { return false }
        switch self {
        case .string, .integer, .number, .boolean, .unknown, .opaque:
            return true
        case .oneOf(let texts):
            parts += texts.count
            return parts <= Self.maximumComparedParts
        case .array(let element), .dictionary(let element), .optional(let element):
            return element.fits(depth: depth + 1, parts: &parts)
        case .object(let fields):
            for field in fields {
                parts += 1
                guard field.shape.fits(depth: depth + 1, parts: &parts) else { return false }
            }
            return true
        }
    }

    /// Whether a value encoded as `self` (what the writer's type encodes)
    /// decodes as `reader` (the reading side's type), without losing what
    /// the writer meant. Conservative: every leaf must be the same (an
    /// `integer` does not read as a `number`), and
    ///
    /// - an object field the reader lacks must be optional at the writer
    ///   (the reader ignores it: nothing it needs is lost), and a field the
    ///   writer lacks must be optional at the reader (it reads `nil`);
    /// - a field optional at the writer must be optional at the reader (the
    ///   writer may leave it out); a field the writer always writes may be
    ///   optional at the reader;
    /// - a value that is not `null` reads as an optional of it, a `null`
    ///   never reads as a value;
    /// - texts of an enum read as its own texts and more, or as any text;
    /// - `unknown` (not derived) reads only as `unknown`: neither side can
    ///   say what it holds, so only a change the names show is noticed.
    ///
    /// - Important: call it on shapes `isWithinComparedLimits` (the
    ///   comparison follows both shapes as deep as the shallower one goes).
    public func canBeRead(as reader: OpArgumentShape) -> Bool {
        switch (self, reader) {
        case (.string, .string), (.integer, .integer), (.number, .number), (.boolean, .boolean), (.unknown, .unknown):
            return true
        case (.opaque(let written), .opaque(let read)):
            return written == read
        case (.oneOf(let written), .oneOf(let read)):
            let known = Set(read)
            return written.allSatisfy(known.contains)
        case (.oneOf, .string):
            return true
        case (.array(let written), .array(let read)), (.dictionary(let written), .dictionary(let read)),
            (.optional(let written), .optional(let read)):
            return written.canBeRead(as: read)
        case (.optional, _):
            return false
        case (_, .optional(let read)):
            return canBeRead(as: read)
        case (.object(let written), .object(let read)):
            let writerFields = Dictionary(written.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            let readerFields = Dictionary(read.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            for field in read {
                guard let writer = writerFields[field.name] else {
                    if field.isOptional { continue } else { return false }
                }
                if writer.isOptional && !field.isOptional { return false }
                guard writer.shape.canBeRead(as: field.shape) else { return false }
            }
            return written.allSatisfy { readerFields[$0.name] != nil || $0.isOptional }
        default:
            return false
        }
    }

    /// Whether the two shapes are the same, fields in any order: what both
    /// sides must agree on when each encodes and the other compares bytes
    /// (a box's keys, a selector's values).
    public func isSame(as other: OpArgumentShape) -> Bool {
        switch (self, other) {
        case (.object(let mine), .object(let theirs)):
            guard mine.count == theirs.count else { return false }
            let theirFields = Dictionary(theirs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            return mine.allSatisfy { field in
                guard let their = theirFields[field.name] else { return false }
                return field.isOptional == their.isOptional && field.shape.isSame(as: their.shape)
            }
        case (.array(let mine), .array(let theirs)), (.dictionary(let mine), .dictionary(let theirs)),
            (.optional(let mine), .optional(let theirs)):
            return mine.isSame(as: theirs)
        case (.oneOf(let mine), .oneOf(let theirs)):
            return Set(mine) == Set(theirs)
        default:
            return self == other
        }
    }

    /// The description, cut after `maximumShownCharacters` characters (a
    /// peer's shape may be long): for messages.
    public var shown: String {
        let text = description
        guard text.count > Self.maximumShownCharacters else { return text }
        return String(text.prefix(Self.maximumShownCharacters)) + "…"
    }
}
