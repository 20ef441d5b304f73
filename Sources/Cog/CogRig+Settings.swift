extension CogRig {
    /// The app's own settings a worker was started with (`cogd worker --set
    /// KEY=VALUE`, repeated, and `--settings FILE`): what a rig's mechanisms
    /// read from `host.settings` instead of environment variables of their own.
    ///
    /// ```swift
    /// mechanisms: { host in
    ///   let holdFor = try host.settings.duration("hold-seconds") ?? .seconds(600)
    ///   return [SeatHoldMechanism(clock: host.clock, holdFor: holdFor)]
    /// }
    /// ```
    ///
    /// Every value came from outside, so it is bounded and checked: a key is
    /// 1 to 64 of `A-Z a-z 0-9 _ . -`, a value at most 4,096 bytes, at most
    /// 256 settings. The typed readers (`int`, `duration`, `bool`) throw a
    /// `Problem` naming the key when a value is there but not of the type, so
    /// a bad value stops the worker at start-up with a line that says which;
    /// they never trap.
    ///
    /// - Important: values may be secrets: `cogd worker` logs the keys it was
    ///   given, never the values.
    public struct Settings: Sendable, Equatable, CustomStringConvertible {
        /// The longest key, in bytes.
        public static let maximumKeyBytes = 64
        /// The longest value, in bytes (UTF-8).
        public static let maximumValueBytes = 4_096
        /// The most settings one worker takes (file and `--set` together).
        public static let maximumCount = 256
        /// The largest settings file, in bytes.
        public static let maximumFileBytes = 65_536
        /// The longest duration `duration(_:)` reads: 366 days.
        public static let maximumDuration: Duration = .seconds(366 * 86_400)

        /// The settings, by key.
        public let values: [String: String]

        /// No settings.
        public init() { values = [:] }

        /// These settings, each key and value checked (`Problem` names the first bad one).
        ///
        /// ```swift
        /// let settings = try CogRig.Settings(["hold-seconds": "5"])
        /// ```
        public init(_ values: [String: String]) throws(Problem) {
            guard values.count <= Self.maximumCount else { throw Problem(.tooMany, key: nil, "more than \(Self.maximumCount) settings") }
            for (key, value) in values.sorted(by: { $0.key < $1.key }) { try Self.check(key: key, value: value) }
            self.values = values
        }

        /// The keys, sorted: what `cogd worker` logs at start-up.
        public var keys: [String] { values.keys.sorted() }

        /// Whether no setting was given.
        public var isEmpty: Bool { values.isEmpty }

        /// The value of `key` as given, or nil when it was not given.
        public subscript(key: String) -> String? { values[key] }

        /// `key`'s value as a whole number (within `range`), or nil when it
        /// was not given; throws, naming the key, when it is not one.
        public func int(_ key: String, in range: ClosedRange<Int> = Int.min...Int.max) throws(Problem) -> Int? {
            guard let text = values[key] else { return nil }
            guard let number = Int(text), range.contains(number) else {
                let bounds = range == Int.min...Int.max ? "" : " from \(range.lowerBound) to \(range.upperBound)"
                throw Problem(.badValue, key: key, "setting '\(key)' is '\(TerminalText.escaped(text))', not a whole number\(bounds)")
            }
            return number
        }

        /// `key`'s value as a duration, or nil when it was not given: seconds
        /// (`600`, `0.5`) or a number with a unit, `ms`, `s`, `m`, `h` or `d`
        /// (`250ms`, `10m`, `2h`), to the millisecond, from 0 to 366 days;
        /// throws, naming the key, when it is not one.
        public func duration(_ key: String) throws(Problem) -> Duration? {
            guard let text = values[key] else { return nil }
            guard let duration = Self.parseDuration(text) else {
                throw Problem(
                    .badValue, key: key,
                    "setting '\(key)' is '\(TerminalText.escaped(text))', not a duration (seconds, or a number with ms, s, m, h or d, "
                        + "like 600 or 10m; at most 366 days)")
            }
            return duration
        }

        /// `key`'s value as `true` or `false`, or nil when it was not given;
        /// throws, naming the key, when it is neither.
        public func bool(_ key: String) throws(Problem) -> Bool? {
            guard let text = values[key] else { return nil }
            switch text {
            case "true": return true
            case "false": return false
            default: throw Problem(.badValue, key: key, "setting '\(key)' is '\(TerminalText.escaped(text))', not true or false")
            }
        }

        /// The keys only (values may be secrets).
        public var description: String { keys.isEmpty ? "no settings" : keys.joined(separator: ", ") }

        /// These settings with `overrides` replacing any value of the same key
        /// (`--set` wins over `--settings FILE`).
        public func merging(_ overrides: Settings) throws(Problem) -> Settings {
            try Settings(values.merging(overrides.values) { _, new in new })
        }

        /// Why a setting cannot be taken: a code a program switches on, a
        /// message a person reads (it names the key).
        public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
            public struct Code: Sendable, Hashable, CustomStringConvertible {
                public let description: String
                private init(_ description: String) { self.description = description }
                /// A key that is not 1 to 64 of `A-Z a-z 0-9 _ . -`.
                public static let badKey = Code("bad-key")
                /// A value longer than `maximumValueBytes`.
                public static let valueTooLong = Code("value-too-long")
                /// More than `maximumCount` settings.
                public static let tooMany = Code("too-many")
                /// One key given twice in one place (twice in `--set`, or on two lines of a file).
                public static let duplicateKey = Code("duplicate-key")
                /// A `--set` argument or file line that is not `KEY=VALUE`.
                public static let notAssignment = Code("not-assignment")
                /// A settings file larger than `maximumFileBytes`, or not UTF-8.
                public static let badFile = Code("bad-file")
                /// A value a typed reader (`int`, `duration`, `bool`) cannot read.
                public static let badValue = Code("bad-value")
            }

            public let code: Code
            /// The key it is about, when there is one.
            public let key: String?
            public let message: String

            package init(_ code: Code, key: String?, _ message: String) {
                self.code = code
                self.key = key
                self.message = message
            }

            public var description: String { message }
        }

        /// Why `key` is not a settings key, or nil.
        public static func keyProblem(_ key: String) -> String? {
            let bytes = key.utf8
            guard (1...maximumKeyBytes).contains(bytes.count),
                bytes.allSatisfy({ byte in
                    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
                        || byte == UInt8(ascii: "-")
                })
            else { return "a key is 1 to \(maximumKeyBytes) of A-Z a-z 0-9 _ . -" }
            return nil
        }

        private static func check(key: String, value: String) throws(Problem) {
            if let problem = keyProblem(key) {
                throw Problem(.badKey, key: key, "setting key '\(TerminalText.escaped(key))' is not allowed: \(problem)")
            }
            guard value.utf8.count <= maximumValueBytes else {
                throw Problem(.valueTooLong, key: key, "setting '\(key)' is \(value.utf8.count) bytes long; a value is at most \(maximumValueBytes) bytes")
            }
        }

        /// One `KEY=VALUE` (a `--set` argument): the key is everything before
        /// the first `=`, the value everything after it, as given.
        package static func assignment(_ text: String) throws(Problem) -> (key: String, value: String) {
            guard let equals = text.firstIndex(of: "=") else {
                throw Problem(.notAssignment, key: nil, "'\(TerminalText.escaped(text))' is not KEY=VALUE")
            }
            let key = String(text[..<equals])
            let value = String(text[text.index(after: equals)...])
            try check(key: key, value: value)
            return (key, value)
        }

        /// The settings of `--set` arguments, each `KEY=VALUE`; a key given twice is refused.
        package init(assignments: [String]) throws(Problem) {
            var values: [String: String] = [:]
            for text in assignments {
                let (key, value) = try Self.assignment(text)
                guard values.updateValue(value, forKey: key) == nil else {
                    throw Problem(.duplicateKey, key: key, "setting '\(key)' is given twice")
                }
            }
            try self.init(values)
        }

        /// The settings of a settings file's bytes: UTF-8, one `KEY=VALUE` a
        /// line; blank lines and lines whose first non-blank character is `#`
        /// are skipped; spaces and tabs around the key and the value are
        /// dropped (a value is otherwise taken as written: no quotes, no
        /// escapes); a key on two lines is refused.
        ///
        /// ```
        /// # box office
        /// hold-seconds = 600
        /// mail.from = tickets@example.com
        /// ```
        package init(fileBytes: [UInt8]) throws(Problem) {
            guard fileBytes.count <= Self.maximumFileBytes else {
                throw Problem(.badFile, key: nil, "the file is \(fileBytes.count) bytes; a settings file is at most \(Self.maximumFileBytes) bytes")
            }
            guard let text = String(validating: fileBytes, as: UTF8.self) else {
                throw Problem(.badFile, key: nil, "the file is not UTF-8 text")
            }
            var values: [String: String] = [:]
            var firstLine: [String: Int] = [:]
            let blanks: Set<Character> = [" ", "\t", "\r"]
            func trimmed(_ part: Substring) -> String {
                String(part.drop(while: { blanks.contains($0) }).reversed().drop(while: { blanks.contains($0) }).reversed())
            }
            // "\r\n" is one Character in Swift: a line ends at either.
            let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
            for (index, line) in lines.enumerated() {
                let number = index + 1
                let content = trimmed(line)
                if content.isEmpty || content.hasPrefix("#") { continue }
                guard let equals = content.firstIndex(of: "=") else {
                    throw Problem(.notAssignment, key: nil, "line \(number): '\(TerminalText.escaped(content))' is not KEY=VALUE")
                }
                let key = trimmed(content[..<equals])
                let value = trimmed(content[content.index(after: equals)...])
                do {
                    try Self.check(key: key, value: value)
                } catch {
                    throw Problem(error.code, key: error.key, "line \(number): \(error.message)")
                }
                if let first = firstLine[key] {
                    throw Problem(.duplicateKey, key: key, "line \(number): setting '\(key)' is given twice (first on line \(first))")
                }
                firstLine[key] = number
                values[key] = value
                guard values.count <= Self.maximumCount else {
                    throw Problem(.tooMany, key: nil, "line \(number): more than \(Self.maximumCount) settings")
                }
            }
            try self.init(values)
        }

        static func parseDuration(_ text: String) -> Duration? {
            let units: [(suffix: String, milliseconds: Double)] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
            var number = Substring(text)
            var scale: Double = 1_000
            for unit in units where text.hasSuffix(unit.suffix) {
                number = text.dropLast(unit.suffix.count)
                scale = unit.milliseconds
                break
            }
            // Digits and at most one point only: no signs, exponents, nan or inf.
            guard !number.isEmpty, number.utf8.count <= 32, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
                number.filter({ $0 == "." }).count <= 1, number != ".", let value = Double(number)
            else { return nil }
            let milliseconds = (value * scale).rounded()
            let limit = Double(maximumDuration.components.seconds) * 1_000
            guard milliseconds.isFinite, milliseconds >= 0, milliseconds <= limit else { return nil }
            return .milliseconds(Int64(milliseconds))
        }
    }
}
