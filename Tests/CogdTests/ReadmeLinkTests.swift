import Foundation
import Testing

/// The repository's root (this file is Tests/CogdTests/…).
private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite("The README's and docs/' links")
struct ReadmeLinkTests {
    /// A repository path a document names: a Markdown link target (taken
    /// from the document's own folder, as a Markdown viewer takes it), or a
    /// backticked path (taken from the repository's root).
    struct NamedPath: Hashable, Comparable {
        let path: String
        let isLink: Bool
        static func < (a: NamedPath, b: NamedPath) -> Bool { (a.path, a.isLink ? 1 : 0) < (b.path, b.isLink ? 1 : 0) }
    }

    /// The repository paths a document names: Markdown link targets, and
    /// backticked paths that start at a top-level folder of the repository
    /// or climb out of it (`../…`).
    static func namedPaths(in text: String) throws -> Set<NamedPath> {
        var paths = Set<NamedPath>()
        let link = try NSRegularExpression(pattern: #"\]\(([^)#\s]+)"#)
        let quoted = try NSRegularExpression(pattern: #"`(\.\./[^`\s]+|(?:Sources|Tests|deploy|protocol|clients|Examples|docs)/[^`\s]*)`"#)
        for (pattern, isLink) in [(link, true), (quoted, false)] {
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let range = Range(match.range(at: 1), in: text) else { continue }
                let path = String(text[range])
                if path.contains("://") || path.hasPrefix("mailto:") { continue }
                paths.insert(NamedPath(path: path, isLink: isLink))
            }
        }
        return paths
    }

    /// README.md and every Markdown file in docs/, as paths from the root.
    static func documents() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }
            .sorted()
        return ["README.md"] + docs.map { "docs/" + $0 }
    }

    @Test func `every repository path the README and docs/ name exists in a clone, none outside it`() throws {
        let documents = try ReadmeLinkTests.documents()
        #expect(documents.count >= 7, "README.md and the documents in docs/: \(documents)")
        for document in documents {
            let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
            let named = try ReadmeLinkTests.namedPaths(in: text)
            if document == "README.md" {
                let paths = Set(named.map(\.path))
                #expect(
                    paths.contains("protocol/cogwire.md") && paths.contains("protocol/turnlog.md") && paths.count >= 10,
                    "the scan finds paths in the README: \(paths.sorted())")
            } else {
                #expect(!named.isEmpty, "the scan finds paths in \(document)")
            }
            // A link is taken from the document's folder (docs/), a backticked path from the root.
            let folder = document.split(separator: "/").dropLast().joined(separator: "/")
            for item in named.sorted() {
                #expect(!item.path.hasPrefix("../"), "\(document) points outside the repository: \(item.path)")
                // A glob or placeholder (`Sources/*`, `Sources/…`) names a folder: check what precedes it.
                let literal = item.path.split(whereSeparator: { "*…<".contains($0) }).first.map(String.init) ?? item.path
                let fromRoot = item.isLink && !folder.isEmpty ? folder + "/" + literal : literal
                #expect(
                    FileManager.default.fileExists(atPath: root.appendingPathComponent(fromRoot).path),
                    "\(document) names \(item.path), which a clone does not have")
            }
        }
    }

    @Test func `the README is short: at most 200 lines, the rest is in docs/`() throws {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        var lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        if readme.hasSuffix("\n") { lines.removeLast() }
        #expect(lines.count <= 200, "README.md has \(lines.count) lines; move the rest into docs/")
        for document in try ReadmeLinkTests.documents().dropFirst() {
            #expect(readme.contains("(\(document))"), "the README links \(document)")
        }
    }

    /// Ways a text sends its reader to documents that are not in the
    /// repository (the notes and specification the project was built from,
    /// under names like "the seeds" or "DESIGN"). The simulator's seeds
    /// (`--seeds 1-200`, "200 seeds") are not such a reference and do not match.
    static var outsideReferences: [(pattern: String, caseInsensitive: Bool)] {
        [
            (#"\bthe seeds\b"#, true),  // "as the seeds teach", "follow the seeds"
            (#"\bseeds'"#, true),  // "the seeds' public API", "the seeds' style"
            (#"\bseeds? (teach|say|describe|document|specify)"#, true),
            (#"\b[Ss]eeds?,? (§|[A-Z]{1,2}[0-9])"#, false),  // "seeds §6.2", "seeds D19", "Seeds §6.2"
            (#"\bseeds, ""#, true),  // (seeds, "Lifetimes")
            (#"\bDESIGN\b"#, false),  // DESIGN.md, "DESIGN §4"
            (#"\bdesign (notes|documents?|docs?)\b"#, true),
            (#"shared workspace"#, true),
            (#"\.\./shared|/work/shared"#, false),
        ]
    }

    /// The outside references in `text`, as "line: match".
    static func outsideReferences(in text: String) throws -> [String] {
        var found: [String] = []
        for (pattern, caseInsensitive) in outsideReferences {
            let expression = try NSRegularExpression(pattern: pattern, options: caseInsensitive ? [.caseInsensitive] : [])
            for match in expression.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let range = Range(match.range, in: text) else { continue }
                let line = text[..<range.lowerBound].split(separator: "\n", omittingEmptySubsequences: false).count
                found.append("\(line): \(text[range])")
            }
        }
        return found
    }

    /// Every source, script and document of the repository (its top-level
    /// folders a clone has, without build folders), as paths from the root.
    static func repositoryTexts() -> [String] {
        let extensions: Set = ["swift", "md", "sh", "py", "c", "h", "modulemap", "yml", "yaml", "json", "service", "conf", "txt", "cbor-diag"]
        var texts: [String] = ["Package.swift", "README.md", ".ci/run"]
        for top in ["Sources", "Tests", "Examples", "deploy", "protocol", "clients", "docs"] {
            guard let walker = FileManager.default.enumerator(atPath: root.appendingPathComponent(top).path) else { continue }
            while let relative = walker.nextObject() as? String {
                if relative.split(separator: "/").contains(where: { $0 == ".build" || $0 == ".swiftpm" }) { continue }
                let name = relative.split(separator: "/").last.map(String.init) ?? relative
                let suffix = name.split(separator: ".").last.map(String.init) ?? ""
                if extensions.contains(suffix) || !name.contains(".") { texts.append(top + "/" + relative) }
            }
        }
        // This file names the patterns it looks for.
        return texts.filter { $0 != "Tests/CogdTests/ReadmeLinkTests.swift" }.sorted()
    }

    @Test func `no source comment, script or test refers to the seeds or design documents outside the repository`() throws {
        let texts = ReadmeLinkTests.repositoryTexts()
        #expect(texts.contains("Sources/Cog/CogRig.swift") && texts.contains("Examples/TodoApp/Sources/TodoApp/TodoApp+Model.swift"), "\(texts.count) files")
        for path in texts {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isFolder), !isFolder.boolValue,
                let text = try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
            else { continue }
            for found in try ReadmeLinkTests.outsideReferences(in: text) {
                Issue.record("\(path):\(found) refers to a document outside the repository")
            }
        }
    }

    @Test func `no document refers to the seeds or design documents outside the repository`() throws {
        let documents = try ReadmeLinkTests.documents() + ["Examples/TodoApp/README.md"]
        for document in documents {
            let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
            for found in try ReadmeLinkTests.outsideReferences(in: text) {
                Issue.record("\(document):\(found) refers to a document outside the repository")
            }
        }
    }
}
