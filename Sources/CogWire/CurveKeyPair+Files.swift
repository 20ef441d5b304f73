#if canImport(Glibc)
    import Glibc
#endif

extension CurveKeyPair {
    /// What a key file holds: a secret key (`secret-key = …`) or a public key (`public-key = …`).
    public enum FileKind: String, Sendable {
        case secret = "secret-key"
        case `public` = "public-key"
    }

    /// The most bytes a key file may have: a key line and some comments.
    public static let maximumFileBytes = 4_096

    /// Whether `name` may name a key pair's files (`NAME.key`, `NAME.pub`):
    /// 1 to 100 letters, digits, `.`, `_`, `-` and `@`, not starting with `.` or `-`.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...100).contains(bytes.count), bytes[0] != UInt8(ascii: "."), bytes[0] != UInt8(ascii: "-") else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "@"):
                true
            default: false
            }
        }
    }

    /// The pair in a secret key file (`secret-key = KEY`).
    ///
    /// - Important: refuses a file its group or others may read or write
    ///   (any of mode 077), naming the file, its mode and the fix
    ///   (`chmod 600 FILE`); the mode is read from the open file, so what is
    ///   checked is what is read. Group bits that are an ACL's mask pass when
    ///   the ACL lets only this process's user read it besides the owner: how
    ///   systemd hands a service its `LoadCredential=` files.
    public static func load(secretKeyFile path: String) throws(CurveKeyError) -> CurveKeyPair {
        let file = try readKeyFile(path)
        guard file.kind == .secret else {
            throw CurveKeyError(.invalidFile, "\(path) is a public key file (public-key = …), not a secret key file")
        }
        return try pair(fromSecret: file.key, path: path)
    }

    /// The public key a key file gives: a public key file's key (checked), or
    /// the public key of a secret key file's key (loaded as `load(secretKeyFile:)` does).
    public static func publicKey(ofFile path: String) throws(CurveKeyError) -> String {
        let file = try readKeyFile(path)
        switch file.kind {
        case .public: return file.key
        case .secret: return try pair(fromSecret: file.key, path: path).publicKey
        }
    }

    /// Writes `NAME.key` (the secret key, created mode 0600) and `NAME.pub`
    /// (the public key) in `folder` (made, mode 0700, when missing) and
    /// returns their paths.
    ///
    /// - Important: never overwrites: a file that exists is an error and
    ///   nothing is written. The secret key file is created with its mode
    ///   (`O_CREAT | O_EXCL`, 0600), so it is never readable by others, even
    ///   briefly.
    @discardableResult
    public func write(name: String, to folder: String) throws(CurveKeyError) -> (secretKeyFile: String, publicKeyFile: String) {
        guard Self.isValidName(name) else {
            throw CurveKeyError(
                .invalidFile, "a key name is 1 to 100 letters, digits, '.', '_', '-' and '@', not starting with '.' or '-'")
        }
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw Self.ioError("cannot make the folder \(folder)")
        }
        let base = folder.hasSuffix("/") ? folder : folder + "/"
        let secretPath = base + name + ".key"
        let publicPath = base + name + ".pub"
        for path in [secretPath, publicPath] {
            var info = stat()
            if lstat(path, &info) == 0 {
                throw CurveKeyError(.exists, "\(path) exists already; remove it or choose another name (nothing was written)")
            }
        }
        let header = "# cogd CURVE key pair \(name)"
        try Self.create(
            secretPath, mode: 0o600,
            text: "\(header): the secret key. Keep it readable by its owner only (chmod 600).\n\(FileKind.secret.rawValue) = \(secretKey)\n")
        do {
            try Self.create(publicPath, mode: 0o644, text: "\(header): the public key.\n\(FileKind.public.rawValue) = \(publicKey)\n")
        } catch {
            unlink(secretPath)
            throw error
        }
        return (secretPath, publicPath)
    }

    // MARK: Reading and writing

    private static func pair(fromSecret key: String, path: String) throws(CurveKeyError) -> CurveKeyPair {
        do {
            return try CurveKeyPair(secretKey: key)
        } catch {
            throw CurveKeyError(error.code, "\(path): \(error.message)")
        }
    }

    /// Reads and parses a key file; a secret one must not be open to group or others.
    private static func readKeyFile(_ path: String) throws(CurveKeyError) -> (kind: FileKind, key: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else { throw ioError("cannot open the key file \(path)") }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw ioError("cannot stat the key file \(path)") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw CurveKeyError(.invalidFile, "\(path) is not a regular file") }
        guard info.st_size <= maximumFileBytes else {
            throw CurveKeyError(.invalidFile, "\(path) is \(info.st_size) bytes; a key file has at most \(maximumFileBytes)")
        }
        var bytes = [UInt8](repeating: 0, count: maximumFileBytes + 1)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + count, $0.count - count) }
            if read < 0 && errno == EINTR { continue }
            guard read >= 0 else { throw ioError("cannot read the key file \(path)") }
            if read == 0 { break }
            count += read
        }
        guard count <= maximumFileBytes else {
            throw CurveKeyError(.invalidFile, "\(path) has more than \(maximumFileBytes) bytes; a key file has at most that")
        }
        let file = try parse(bytes[..<count], path: path)
        if file.kind == .secret {
            let mode = info.st_mode & 0o777
            // An ACL that lets only this process's user read it besides the
            // owner (systemd's LoadCredential= files) keeps it private.
            guard FileAccess.isPrivate(descriptor, mode: mode) else {
                throw CurveKeyError(
                    .exposedSecret,
                    "the secret key file \(path) has mode \(octal(mode)): its group or others may read or change it; "
                        + "a secret key must be readable by its owner only — run: chmod 600 \(path)")
            }
        }
        return file
    }

    /// The one key line of a key file's text (`protocol/cogwire.md`, "Security").
    static func parse(_ bytes: ArraySlice<UInt8>, path: String) throws(CurveKeyError) -> (kind: FileKind, key: String) {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CurveKeyError(.invalidFile, "\(path) is not UTF-8 text")
        }
        var found: (kind: FileKind, key: String)?
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).enumerated() {
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            let expected = "\(path) line \(index + 1): expected `secret-key = KEY` or `public-key = KEY` (KEY: 40 Z85 characters)"
            guard let equals = line.firstIndex(of: "="),
                let kind = FileKind(rawValue: String(line[..<equals].trimmingWhitespace()))
            else { throw CurveKeyError(.invalidFile, expected) }
            let key = String(line[line.index(after: equals)...].trimmingWhitespace())
            guard isValidKey(key) else {
                throw CurveKeyError(.invalidKey, "\(path) line \(index + 1): the key is not 40 characters of the Z85 alphabet")
            }
            guard found == nil else { throw CurveKeyError(.invalidFile, "\(path) has more than one key line; a key file holds one key") }
            found = (kind, key)
        }
        guard let found else { throw CurveKeyError(.invalidFile, "\(path) holds no key line (`secret-key = KEY` or `public-key = KEY`)") }
        return found
    }

    /// Creates `path` with `mode` (refusing an existing file or a symbolic link) and writes `text`, synced.
    private static func create(_ path: String, mode: mode_t, text: String) throws(CurveKeyError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw CurveKeyError(.exists, "\(path) exists already; remove it or choose another name") }
            throw ioError("cannot create \(path)")
        }
        var failure: CurveKeyError?
        // The umask may only take bits away; set the mode exactly (never more than asked).
        if fchmod(descriptor, mode) != 0 { failure = ioError("cannot set the mode of \(path)") }
        let bytes = Array(text.utf8)
        var offset = 0
        while failure == nil && offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { failure = ioError("cannot write \(path)") } else { offset += written }
        }
        if failure == nil && fsync(descriptor) != 0 { failure = ioError("cannot sync \(path)") }
        if close(descriptor) != 0 && failure == nil { failure = ioError("cannot close \(path)") }
        if let failure {
            unlink(path)
            throw failure
        }
    }

    private static func ioError(_ what: String) -> CurveKeyError {
        CurveKeyError(.io, "\(what): \(String(cString: strerror(errno)))")
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

extension StringProtocol {
    fileprivate func trimmingWhitespace() -> Substring {
        let view = self[...]
        let start = view.firstIndex { $0 != " " && $0 != "\t" && $0 != "\r" } ?? view.endIndex
        let end = view[start...].lastIndex { $0 != " " && $0 != "\t" && $0 != "\r" }.map { view.index(after: $0) } ?? start
        return Substring(view[start..<end])
    }
}
