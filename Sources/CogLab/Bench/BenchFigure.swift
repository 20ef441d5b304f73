import CogdCommandLine
import Foundation

/// One measured figure, printed beside the raw LMDB or ZeroMQ figure from
/// the same run when there is one (`cogd-lab bench log|cluster`).
struct BenchFigure {
    let name: String
    let value: Double
    let unit: String
    let baseline: Double?
    /// What the baseline is when it is not the raw LMDB or ZeroMQ figure
    /// (`without-curve`: the same measured without CURVE); nil: raw.
    var baselineKind: String? = nil

    /// Prints the figure: a text line, or with `json` one object
    /// `{"name", "value", "unit", "baseline", "ratio"}` (and `"baselineKind"` when set, and
    /// `"ports"`, the loopback ports the run served on, when given).
    func report(json: Bool, nameWidth: Int, ports: LoopbackPorts? = nil) {
        if json {
            let baselineText = baseline.map(BenchFigure.format) ?? "null"
            let ratio = baseline.map { BenchFigure.format(value / $0) } ?? "null"
            let kind = baselineKind.map { ", \"baselineKind\": \"\($0)\"" } ?? ""
            let portsField = ports.map { ", \"ports\": \($0.json)" } ?? ""
            print("{\"name\": \"\(name)\", \"value\": \(BenchFigure.format(value)), \"unit\": \"\(unit)\", \"baseline\": \(baselineText), \"ratio\": \(ratio)\(kind)\(portsField)}")
        } else if let baseline, let baselineKind {
            print(
                "\(padded(name, to: nameWidth)) \(BenchFigure.format(value)) \(unit)   \(baselineKind) \(BenchFigure.format(baseline)) \(unit)   ratio \(BenchFigure.format(value / baseline))"
            )
        } else if let baseline {
            print("\(padded(name, to: nameWidth)) \(BenchFigure.format(value)) \(unit)   raw \(BenchFigure.format(baseline)) \(unit)   ratio \(BenchFigure.format(value / baseline))")
        } else {
            print("\(padded(name, to: nameWidth)) \(BenchFigure.format(value)) \(unit)")
        }
        fflush(nil)
    }

    static func format(_ value: Double) -> String {
        if value >= 100 || value == value.rounded() { return String(Int(value.rounded())) }
        return String((value * 100).rounded() / 100)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
