extension CogdCommandLine {
    /// What `help TOPIC` adds under the summary for the subcommands whose
    /// page lists its options one by one: each with its default and an
    /// example. nil: the subcommand's page says it another way.
    static func optionsHelp(for topic: String) -> String? {
        let cogd = programName
        let leaderOption = """
              --leader ENDPOINT   the leader's requests endpoint; HOST:PORT means tcp://HOST:PORT
                                  (default: $\(Command.leaderEnvironmentVariable) when set, else \(Command.defaultRequestsEndpoint))
            """
        let keyOptions = """
              --key FILE          this side's secret key file, for a leader that authenticates with CURVE
                                  (default: $\(Command.keyEnvironmentVariable) when set; needs --leader-key)
              --leader-key FILE   the leader's public key file (default: $\(Command.leaderKeyEnvironmentVariable) when set)
            """
        switch topic {
        case "call":
            return """

                Sends one op with its argument (any JSON value: an object, a number, a
                string, true) to the leader and prints what became of it.

                Options:
                \(leaderOption)
                  --timeout SECONDS   how long to wait for the answer (default \(Command.secondsText(Command.defaultTimeout)))
                  --request-id W#N    the request's id, to retry a request (default: a new one per call)
                  --name NAME         the worker name it sends in, numbered by the clock (default: with --key,
                                      the key file's name — keys/ops-console.key sends as ops-console)
                \(keyOptions)

                Exit status:
                  0   applied (`applied revision R`) or unchanged (`unchanged: …`, no new revision)
                  1   another failure (the leader refused the request itself or this key, a socket error)
                  3   rejected: `rejected: REASON` on stderr
                  4   no answer from the leader within --timeout
                  64  a usage error, or an argument that is not JSON (says where)

                Example:
                  \(cogd) call ledger.open '{"account": "alice", "balance": 100}' --leader 127.0.0.1:5701 --timeout 2
                """
        case "status":
            return """

                Prints the leader's epoch and revision, each worker's applied revision,
                lag and state digest, error counts, open scope instances, commit times
                and placement.

                Options:
                \(leaderOption)
                  --timeout SECONDS   how long to wait for the answer (default \(Command.secondsText(Command.defaultTimeout)))
                  --json              one JSON object instead of lines (default: lines)
                \(keyOptions)

                Exit status: 0 shown, 1 a failure, 4 no answer within --timeout, 64 a usage error.

                Example:
                  \(cogd) status --leader 127.0.0.1:5701 --timeout 1 --json
                """
        case "worker":
            return """

                Options:
                \(leaderOption)
                  --name NAME         this worker's name, one process per name (default worker-PID)
                  --rig NAME          the rig whose mechanisms it runs (default below)
                \(keyOptions)

                Example:
                  \(cogd) worker --leader 127.0.0.1:5701 --name worker-1 --rig replica
                """
        case "version":
            return """

                Takes no options. Example: \(cogd) version
                """
        case "help":
            return """

                Example: \(cogd) help call   (the same as \(cogd) call --help)
                """
        default:
            return nil
        }
    }
}
