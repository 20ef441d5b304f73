import Foundation

/// Linux CPU lists: "0-3,5,7-8".
public enum CPUList {
    /// Parses a list; nil when any part is not a number or a range of them.
    public static func parse(_ text: String) -> [Int]? {
        var cpus: [Int] = []
        for part in text.split(separator: ",") {
            let bounds = part.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(bounds.count), let low = Int(bounds[0]), low >= 0,
                let high = bounds.count == 2 ? Int(bounds[1]) : low, high >= low
            else { return nil }
            cpus += Array(low...high)
        }
        return cpus.isEmpty ? nil : Array(Set(cpus)).sorted()
    }

    /// Formats sorted CPUs with ranges: [0, 1, 2, 5] → "0-2,5".
    public static func format(_ cpus: [Int]) -> String {
        var parts: [String] = []
        var index = 0
        let sorted = Array(Set(cpus)).sorted()
        while index < sorted.count {
            var end = index
            while end + 1 < sorted.count && sorted[end + 1] == sorted[end] + 1 { end += 1 }
            parts.append(end == index ? "\(sorted[index])" : "\(sorted[index])-\(sorted[end])")
            index = end + 1
        }
        return parts.joined(separator: ",")
    }
}
