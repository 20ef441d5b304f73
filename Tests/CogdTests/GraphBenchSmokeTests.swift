import Foundation
import Testing

/// `cogd-lab bench graph` prints each shape beside its hand-written
/// baseline; the bench stops when a baseline computes something other than
/// the graph, so exit 0 here also says they agreed. Speed is not judged here
/// (a release build is where it is).
@Suite("cogd-lab bench graph (smoke)", .serialized, .timeLimit(.minutes(10)))
struct GraphBenchSmokeTests {
    static let shapes = [
        "steady", "deep", "broad", "diamond", "keyed", "keyed-single-10", "keyed-single-10000", "cold", "scopes",
        "quiet-reactions", "refresh",
    ]

    @Test func `each graph shape prints its figure beside a hand-written baseline that computed the same`() throws {
        let result = try runCogdLab(
            ["bench", "graph", "--only", Self.shapes.joined(separator: ","), "--runs", "1", "--json"], timeout: .seconds(110))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let figures = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let names = figures.compactMap { $0["name"] as? String }
        #expect(names == [
            "graph.steady", "graph.steady.allocations", "graph.deep", "graph.broad", "graph.diamond", "graph.keyed",
            "graph.keyed-single-10", "graph.keyed-single-10000", "graph.cold", "graph.cold.read",
            "graph.scopes.open-and-retire", "graph.reactions.1-woken-of-1", "graph.reactions.1-woken-of-100",
            "graph.reactions.quiet-growth", "graph.refresh", "graph.peak-rss",
        ])
        let unbaselined: Set = ["graph.steady.allocations", "graph.reactions.quiet-growth", "graph.peak-rss"]
        for figure in figures {
            let name = figure["name"] as? String ?? ""
            if unbaselined.contains(name) {
                #expect(figure["baseline"] == nil && figure["baselineKind"] == nil, "\(figure)")
                continue
            }
            #expect(figure["baselineKind"] as? String == "hand-written", "\(figure)")
            #expect((figure["value"] as? Double ?? 0) > 0, "\(figure)")
            #expect((figure["baseline"] as? Double ?? 0) > 0, "\(figure)")
            #expect((figure["ratio"] as? Double ?? 0) > 0, "\(figure)")
        }
    }

    @Test func `the text form prints the hand-written figure and the ratio beside the graph's`() throws {
        let result = try runCogdLab(["bench", "graph", "--only", "steady", "--runs", "1"], timeout: .seconds(60))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let line = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("graph.steady ") }, "\(result.stdout)")
        #expect(line.contains(" ns/turn   hand-written ") && line.contains(" ns/turn   ratio "), "\(line)")
    }
}
