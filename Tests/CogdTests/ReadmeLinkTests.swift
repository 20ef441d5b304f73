import Foundation
import Testing

/// The repository's root (this file is Tests/CogdTests/…).
private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite("The README's links")
struct ReadmeLinkTests {
    /// The repository paths the README names: Markdown link targets, and
    /// backticked paths that start at a top-level folder of the repository
    /// or climb out of it (`../…`).
    static func namedPaths(in text: String) throws -> Set<String> {
        var paths = Set<String>()
        let link = try NSRegularExpression(pattern: #"\]\(([^)#\s]+)"#)
        let quoted = try NSRegularExpression(pattern: #"`(\.\./[^`\s]+|(?:Sources|Tests|deploy|protocol|clients|Examples)/[^`\s]*)`"#)
        for pattern in [link, quoted] {
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let range = Range(match.range(at: 1), in: text) else { continue }
                let path = String(text[range])
                if path.contains("://") || path.hasPrefix("mailto:") { continue }
                paths.insert(path)
            }
        }
        return paths
    }

    @Test func `every repository path the README names exists in a clone, none outside it`() throws {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let paths = try ReadmeLinkTests.namedPaths(in: readme)
        #expect(paths.contains("protocol/cogwire.md") && paths.contains("protocol/turnlog.md") && paths.count >= 10, "the scan finds paths: \(paths.sorted())")
        for path in paths.sorted() {
            #expect(!path.hasPrefix("../"), "the README points outside the repository: \(path)")
            // A glob or placeholder (`Sources/*`, `Sources/…`) names a folder: check what precedes it.
            let literal = path.split(whereSeparator: { "*…<".contains($0) }).first.map(String.init) ?? path
            #expect(
                FileManager.default.fileExists(atPath: root.appendingPathComponent(literal).path),
                "the README names \(path), which a clone does not have")
        }
    }
}
