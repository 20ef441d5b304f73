import Foundation
import Testing

/// The protocol module is pure because the build says so (issue
/// 26): `CogProtocol` imports nothing but `Cog`, `CogCodec` and
/// `Synchronization`, and names no clock, socket, LMDB or C library, so the
/// simulator runs the very rules that ship; `CogWire` links no LMDB. These
/// tests read the sources, so a new file that breaks the rule fails here
/// even before anyone looks at `Package.swift`.
@Suite("Module purity: what CogProtocol and CogWire may import")
struct ModulePurityTests {
    /// The modules a `CogProtocol` source may import.
    static let allowedImports: Set<String> = ["Cog", "CogCodec", "Synchronization"]

    /// Text no `CogProtocol` source may hold: clock reads, and the C modules
    /// of ZeroMQ, LMDB and the C library.
    static let forbiddenText = [
        "Date()", "ContinuousClock", "SuspendingClock", "clock_gettime", "gettimeofday", "DispatchTime",
        "CZMQ", "CLMDB", "Glibc",
    ]

    /// The repository root: three folders above this file.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every `.swift` file under `Sources/<module>`, by its path from the root, with its text.
    static func sources(of module: String) throws -> [(path: String, text: String)] {
        let folder = root.appendingPathComponent("Sources/\(module)")
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { return [] }
        var files: [(path: String, text: String)] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            let path = String(url.path.dropFirst(root.path.count + 1))
            files.append((path, try String(contentsOf: url, encoding: .utf8)))
        }
        return files.sorted { $0.path < $1.path }
    }

    /// The modules a source imports, whatever the form: `import X`,
    /// `@testable import X`, `internal import X`, `import struct X.Y`,
    /// `@preconcurrency import X`, or inside `#if canImport(X)`.
    static func importedModules(_ text: String) -> [String] {
        var modules: [String] = []
        for line in text.split(whereSeparator: \.isNewline) {
            var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            if words.first == "#if" || words.first == "#elseif", let canImport = line.range(of: "canImport(") {
                modules.append(String(line[canImport.upperBound...].prefix { $0 != ")" && $0 != "," }))
                continue
            }
            while let first = words.first, first.hasPrefix("@") || ["public", "package", "internal", "private", "fileprivate"].contains(first) {
                words.removeFirst()
            }
            guard words.first == "import", words.count >= 2 else { continue }
            let kinds: Set<String> = ["struct", "class", "enum", "protocol", "typealias", "func", "let", "var"]
            let path = kinds.contains(words[1]) && words.count >= 3 ? words[2] : words[1]
            modules.append(String(path.prefix { $0 != "." }))
        }
        return modules
    }

    @Test func `the protocol module imports only Cog, CogCodec and Synchronization`() throws {
        let files = try ModulePurityTests.sources(of: "CogProtocol")
        #expect(files.count >= 10, "found \(files.count) sources under Sources/CogProtocol from \(ModulePurityTests.root.path)")
        for file in files {
            for module in ModulePurityTests.importedModules(file.text) {
                #expect(ModulePurityTests.allowedImports.contains(module), "\(file.path) imports \(module)")
            }
        }
    }

    @Test func `the protocol module reads no clock and names no socket, LMDB or C library`() throws {
        for file in try ModulePurityTests.sources(of: "CogProtocol") {
            for text in ModulePurityTests.forbiddenText {
                #expect(!file.text.contains(text), "\(file.path) mentions \(text)")
            }
        }
    }

    @Test func `the wire module does not link LMDB`() throws {
        let files = try ModulePurityTests.sources(of: "CogWire")
        #expect(!files.isEmpty)
        for file in files {
            let modules = ModulePurityTests.importedModules(file.text)
            #expect(!modules.contains("CogLog") && !modules.contains("CLMDB"), "\(file.path) imports \(modules)")
        }
    }

    @Test func `the import reader sees every form of import`() {
        let text = """
            import Cog
            @testable import CogCodec
            internal import CZMQ
            public import struct Foundation.Date
            @preconcurrency import Dispatch
            #if canImport(Glibc)
                import Glibc
            #endif
            // import Commented
            """
        #expect(ModulePurityTests.importedModules(text) == ["Cog", "CogCodec", "CZMQ", "Foundation", "Dispatch", "Glibc", "Glibc"])
    }
}
