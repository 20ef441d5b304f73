import Testing

@testable import CogCluster

@Suite("Metric label values from peers")
struct MetricLabelTests {
    @Test func `a worker name with terminal controls is shown inert; the format's own escapes still apply`() {
        let text = MetricFamily.exposition([
            .labelled("cogd_leader_worker_lag_revisions", .gauge, help: "Lag.", label: "worker", [
                ("w1", 1), ("back\\slash \"q\"", 2), ("\u{1B}[2Jx", 3), ("bidi\u{202E}", 4), ("two\nlines", 5),
            ])
        ])
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains(#"cogd_leader_worker_lag_revisions{worker="w1"} 1"#), "\(text)")
        // No control character: only the format's escapes, the name as it is.
        #expect(lines.contains(#"cogd_leader_worker_lag_revisions{worker="back\\slash \"q\""} 2"#), "\(text)")
        // ESC and the bidi override written as the text logs write them (the backslash escaped for the format).
        #expect(lines.contains(#"cogd_leader_worker_lag_revisions{worker="\\u{1B}[2Jx"} 3"#), "\(text)")
        #expect(lines.contains(#"cogd_leader_worker_lag_revisions{worker="bidi\\u{202E}"} 4"#), "\(text)")
        // A newline is a control too: one line per sample whatever the name.
        #expect(lines.contains(#"cogd_leader_worker_lag_revisions{worker="two\\nlines"} 5"#), "\(text)")
        #expect(!text.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{202E}" })
    }
}
