import CCogdSupport
internal import CLMDB
internal import CZMQ

#if canImport(Glibc)
    import Glibc
#endif

@main
struct CogdMain {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let command: Command
        do {
            command = try Command.parse(arguments)
        } catch {
            printError("Error: \(error.message)")
            printError(usageLine(for: error.subcommand))
            printError("See 'cogd \(error.subcommand.map { "\($0) " } ?? "")--help'")
            exit(64)
        }
        switch command {
        case .help(let topic):
            print(helpText(for: topic))
        case .version:
            print(versionText())
        case .bench(let options):
            await MainActor.run { GraphBench(options: options).run() }
        case .notYetAvailable(let name):
            printError("Error: 'cogd \(name)' is not yet available in this build; see README.md for what works today")
            exit(1)
        }
    }

    static func usageLine(for subcommand: String?) -> String {
        switch subcommand {
        case "bench": "Usage: cogd bench graph [--json] [--runs N] [--only SHAPE[,SHAPE…]]"
        case let name?: "Usage: cogd \(name) [options]"
        case nil: "Usage: cogd <subcommand> [options] [--] [args]"
        }
    }

    static func helpText(for topic: String?) -> String {
        if let topic, let entry = Command.subcommands.first(where: { $0.name == topic }) {
            var text = "\(usageLine(for: topic))\n\n\(entry.summary)\n"
            if topic == "bench" {
                text += """

                    Shapes: \(GraphBench.shapeNames.joined(separator: ", "))
                    Options:
                      --json          one JSON object per figure: {"name", "value", "unit"}
                      --runs N        timed runs per shape (median reported; default 7)
                      --only S1,S2    run only these shapes

                    Build in release mode first: swift build -c release
                    """
            }
            return text
        }
        var text = "cogd — Cog-style state on Linux, made multi-process\n\n\(usageLine(for: nil))\n\nSubcommands:\n"
        for entry in Command.subcommands {
            text += "  \(padded(entry.name, to: 9)) \(entry.summary)\n"
        }
        text += "\nSee 'cogd help <subcommand>' for one subcommand."
        return text
    }

    static func versionText() -> String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        let lmdb = String(cString: mdb_version(nil, nil, nil))
        return "cogd 0.1.0\n\(lmdb)\nZeroMQ \(major).\(minor).\(patch)"
    }
}

/// Writes one line to standard error.
func printError(_ text: String) {
    fflush(nil)
    var line = text + "\n"
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { break }
            offset += written
        }
    }
}

/// `text` followed by spaces up to `width` characters.
func padded(_ text: String, to width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}
