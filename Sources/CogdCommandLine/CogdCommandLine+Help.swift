import CogCluster
import CogLog
import CogProtocol
import CogWire

extension CogdCommandLine {
    /// What `help TOPIC` prints under the usage line and the summary: what
    /// the subcommand does, each option it takes with its default, and an
    /// example. Every subcommand has one (the tests hold every option the
    /// parser accepts to appearing here, and every page to an `Example:`),
    /// and none sends the reader back to the help it is.
    static func helpPage(for topic: String, rigs: Rigs) -> String {
        let cogd = programName
        let leaderOption = """
              --leader ENDPOINT   the leader's requests endpoint; HOST:PORT means tcp://HOST:PORT. For an
                                  HA cluster, every node's, comma-separated: a standby's not-leader
                                  sends it to the node that leads, silence to the next node
                                  (default: $\(Command.leaderEnvironmentVariable) when set, else \(Command.defaultRequestsEndpoint))
            """
        let keyOptions = """
              --key FILE          this side's secret key file, for a leader that authenticates with CURVE
                                  (default: $\(Command.keyEnvironmentVariable) when set; needs --leader-key)
              --leader-key FILE   the leader's public key file (default: $\(Command.leaderKeyEnvironmentVariable) when set)
            """
        let trapOption = rigs.trap.map { trap in
            "--trap-op               also serve \(trap.opNames.joined(separator: ", ")), an op whose body stops the leader\n"
                + "                          (drills and tests; default off)\n  "
        } ?? ""
        if let extra = rigs.extras.first(where: { $0.name == topic }) { return extra.page(cogd) }
        let examples = HelpExamples(rigs: rigs, program: cogd)
        let rigList = rigs.all.map { "  \(padded($0.name, to: 17)) \($0.summary)" }.joined(separator: "\n")
        switch topic {
        case "leader":
            return """

                Owns the turn log in the data folder: runs each op as one turn, commits
                every batch in one LMDB transaction, then publishes the turns and answers.
                Serves the ops of every rig below (`\(cogd) ops` lists them). SIGINT or
                SIGTERM drains and stops it (a second one: at once); SIGHUP reads --peers
                again. Without keys it binds only this host (127.0.0.0/8, ::1, localhost,
                ipc://) unless given --insecure.

                Options:
                  --data DIR              the data folder, made when missing (default $\(Command.dataEnvironmentVariable)
                                          when set, else ./\(Command.defaultDataFolder))
                  --requests ENDPOINT     where workers and tools send requests; HOST:PORT means tcp://HOST:PORT
                                          (default $\(Command.requestsEnvironmentVariable) when set, else \(Command.defaultRequestsEndpoint))
                  --turns ENDPOINT        where it publishes committed turns (default $\(Command.turnsEnvironmentVariable)
                                          when set, else \(Command.defaultTurnsEndpoint))
                  --rig NAME              names a rig in its first line only: it serves every rig's
                                          ops (default \(rigs.defaultName))
                  --heartbeat-timeout S   a worker silent this many seconds is gone and its scope
                                          instances retire (default \(formatted(Command.LeaderOptions().heartbeatTimeout)))
                  --commit-cpu auto|none|LIST
                                          where the serving thread runs: auto, the CPUs that take the data
                                          disk's interrupts; none, where the scheduler puts it; a CPU list
                                          like 1 or 0-3,6 (default auto)
                  --spin-wait MICROSECONDS
                                          after each batch, look for the next request this long before
                                          sleeping: less latency for more CPU, 0 to 1000000 (default 0: off)
                  --snapshot-part-bytes N about how many bytes each part of a snapshot holds, 1024 to
                                          67108864 (default \(WireMessage.snapshotPartTarget))
                  --snapshot-deadline S   a snapshot whose requester reads nothing this long is given up
                                          with its LMDB read (default \(formatted(Command.LeaderOptions().snapshotDeadline)))
                  --max-record-bytes N    the largest turn record; a larger turn is undone and refused
                                          too-large, 4096 to \(Leader.maximumRecordBytes) (default \(Leader.maximumRecordBytes))
                  --retain-turns N        keep the newest N turns, at least 1; older ones, and the answers
                                          stored with them, are removed a few at a time (default: keep
                                          every turn; give at most one --retain-* option)
                  --retain-age DURATION   keep the turns of the last DURATION: 30s, 15m, 12h, 7d (default: all)
                  --retain-bytes SIZE     keep the newest turns within SIZE of the turns table: 512MiB, 10GiB,
                                          500MB, at least 1MiB (default: all). With any of the three, the
                                          state table keeps every current value, a worker behind the first
                                          turn kept re-syncs from a snapshot and an expired retry is refused
                                          (protocol/turnlog.md §2a)
                  \(trapOption)--accept-data-loss      start even when data.mdb is missing, emptied or behind what the
                                          folder's cogd.identity remembers (default off: refuse to start)
                  --curve-secret FILE     the leader's secret key file: CURVE on both sockets, every
                                          connection authenticated against --peers (default: none, no
                                          authentication; protocol/cogwire.md §9)
                  --peers FILE            who may connect, one `PUBLIC-KEY ROLE NAME [OP-PATTERN…]` a line,
                                          ROLE worker, client, observer or standby; read again on SIGHUP
                                          (default: none; needed with --curve-secret)
                  --insecure              without keys, bind endpoints off this host too: anyone who reaches
                                          them runs any op and reads all state (default off: loopback only)
                  --metrics HOST:PORT     serve HTTP GET /metrics (Prometheus text), /healthz and /readyz
                                          there, like 127.0.0.1:9464 (default: off; protocol/metrics.md)
                  --log-format text|json  the log on stderr: one line per event with time and level
                                          (default text, or $\(Command.logFormatEnvironmentVariable))
                  --log-level LEVEL       debug, info, warn or error: the least that is logged
                                          (default info, or $\(Command.logLevelEnvironmentVariable)); warn
                                          leaves out the start and stop lines (info); debug adds tools
                                          coming and going (each cogd call --name, get, tail --connect)
                  --ha URLS               one node of a cluster whose leader etcd decides: etcd's client
                                          URLs, http://HOST:PORT, comma-separated. It serves only while
                                          it holds the leader key, in the epoch etcd minted, and releases
                                          nothing once its lease may have ended (protocol/ha.md). While
                                          another node leads it keeps --data a copy of the leader's log and
                                          answers workers and tools not-leader (default: none, a lone leader)
                  --cluster NAME          the cluster's name in etcd (with --ha; default: none)
                  --name NODE             this node's name in the cluster, its own (with --ha; default: none)
                  --lease-ttl S           the lease's TTL, 2 to 3600 whole seconds: a stopped leader's key
                                          goes this long after its last renewal (default 5)
                  --sync MODE             ship the log to standbys and release by MODE: one or quorum:K
                                          (K from 1 to 8) — nothing leaves before K standbys named in
                                          etcd's sync key acknowledged it — or none (released at once; a
                                          failover may lose turns). A standby may take the lead once
                                          the sync key names it (with --ha; default: one)
                  --degrade-after S       with --sync one or quorum:K: after S seconds in which held
                                          replies did not move, drop the standbys no longer connected
                                          from the sync key and release alone (default: hold)
                  --standby-key FILE      with --ha and --curve-secret (every node of a cluster serves
                                          with one leader key): this node's own secret key, listed in
                                          the peers file as `standby NODE`; it follows the leader's log
                                          with it (default: none; needed with both)

                Rigs (--rig NAME, default \(rigs.defaultName)):
                \(rigList)

                Exit status: 0 stopped cleanly, 1 a failure (a folder it refuses, a port in use, a key or
                peers file it cannot read, an etcd it cannot use, a step-down), 64 a usage error.

                Example:
                  \(cogd) leader --data /var/lib/cogd --requests 0.0.0.0:5701 --turns 0.0.0.0:5702 \\
                      --curve-secret keys/leader.key --peers peers
                  \(cogd) leader --metrics 127.0.0.1:9464 --log-format json --log-level debug
                """
        case "worker":
            return """

                Says hello to the leader, syncs its replica (a snapshot, then the turn
                stream) and runs one rig's mechanisms on it; their ops go to the leader.
                It keeps trying while no leader answers, saying so every few seconds.

                Options:
                \(leaderOption)
                  --name NAME         this worker's name, one process per name, 1 to 255 bytes of UTF-8
                                      as the leader requires (default worker-PID)
                  --rig NAME          the rig whose mechanisms it runs; replica runs none (default \(rigs.defaultName))
                  --group NAME        the worker group it joins: each mechanism's top-level reactions and
                                      tasks, and each child of a top-level scope, run on one worker of
                                      the group, moving when that worker goes (default: the rig's name,
                                      so workers of one rig share its work; a name no other worker uses,
                                      e.g. --group worker-1, runs everything here; --rig replica only
                                      replicates)
                  --heartbeat-timeout S
                                      the leader's --heartbeat-timeout: with no welcome from the leader
                                      for this less a margin (a fifth, 1 s at least), the instances placed
                                      here stop their tasks and reactions until one comes, before the
                                      leader moves them elsewhere (default 5; protocol/cogwire.md §6b)
                  --set KEY=VALUE     an app setting the rig's mechanisms read (CogRig.Host.settings),
                                      repeated for more; a key is 1 to 64 of A-Z a-z 0-9 _ . -, a value
                                      at most 4096 bytes, at most 256 settings; wins over --settings
                                      (default: none)
                  --settings FILE     app settings from a file read at start-up: KEY=VALUE lines (spaces
                                      around either dropped, no quotes), # comments and blank lines,
                                      each key once, at most 65536 bytes (default: none). The started
                                      line, /metrics and `status` name the settings' keys, never
                                      their values
                  --metrics HOST:PORT serve HTTP GET /metrics (Prometheus text), /healthz and /readyz
                                      there, like 127.0.0.1:9465 (default: off; protocol/metrics.md)
                  --log-format text|json
                                      the log on stderr: one line per event with time and level
                                      (default text, or $\(Command.logFormatEnvironmentVariable))
                  --log-level LEVEL   debug, info, warn or error; debug adds a line per revision
                                      applied (default info, or $\(Command.logLevelEnvironmentVariable))
                \(keyOptions)

                Exit status:
                  0   stopped by SIGINT or SIGTERM: it says goodbye to the leader (at most half a
                      second) and prints the revision it stopped at; a second signal is told the
                      goodbye comes first
                  1   a third signal (stops at once); a failure: a key file it cannot read, a
                      metrics address it cannot bind, a setting the rig cannot read (named), a
                      socket error (a leader that is down or refuses it is waited on, not one)
                  4   --leader is the leader's turn stream (its --turns), not its requests endpoint
                  64  a usage error (a bad --set, a --settings file it cannot read or take)

                Rigs (--rig NAME, default \(rigs.defaultName)):
                \(rigList)

                Example:
                  \(cogd) worker --leader 127.0.0.1:5701 --name worker-1 --rig \(rigs.defaultName)
                  \(cogd) worker --leader 127.0.0.1:5701 --name worker-2 --rig \(rigs.defaultName) --group solo-2
                  \(cogd) worker --leader 127.0.0.1:5701 --name worker-3 --rig replica
                  \(cogd) worker --name worker-1 --metrics 127.0.0.1:9465 --log-level debug
                  \(cogd) worker --name worker-1 --set hold-seconds=600 --settings /etc/box-office.settings
                """
        case "call":
            return """

                Sends one op with its argument (any JSON value: an object, a number, a
                string, true) to the leader and prints what became of it. `\(cogd) ops`
                lists the ops, each argument's shape and an example.

                Options:
                \(leaderOption)
                  --timeout SECONDS   how long to wait for the answer (default \(Command.secondsText(Command.defaultTimeout)))
                  --request-id W#N    the request's id, to retry a request (default: a new one per call)
                  --json              one JSON object on stdout instead of a line (default: a line):
                                      request, outcome (applied, unchanged, refused, rejected), revision,
                                      code and detail (of a rejection) or code and reason (of a refusal),
                                      earlier (true: answered from an earlier request)
                  --name NAME         the worker name it sends in (default: with --key, the key file's name —
                                      keys/ops-console.key sends as ops-console; without either, call- and a
                                      UUID, once)
                \(keyOptions)

                Request ids: under a name, each call is numbered one above the highest
                sequence the leader has answered in that name — NAME#1, NAME#2, … across
                runs and leader restarts (the leader's dedup table keeps it): the call says
                hello as a tool under the name to learn it, and goodbye as it closes. A name
                a live worker holds is refused (name-in-use). The id is printed with the
                outcome (and with no answer, when it was sent); to retry a call, give it
                as --request-id: a request already answered is answered again from the
                first run, not applied twice, and says so (`answered from an earlier
                request: applied at revision R`).

                Exit status:
                  0   applied (`applied revision R`) or unchanged (`unchanged: …`, no new revision)
                  1   another failure (the leader refused the request itself or this key, a socket error)
                  3   rejected (`rejected: REASON`) or refused by the op (`refused CODE: REASON`), on stderr
                  4   no answer from the leader within --timeout
                  64  a usage error, or an argument that is not JSON (says where)

                Example:
                \(examples.call)
                """
        case "status":
            return """

                Prints the leader's version and uptime, epoch and revision, each worker's
                applied revision, lag, when it was last heard and state digest, error
                counts, open scope instances, commit times and placement. A worker is
                marked SILENT when no heartbeat came for more than half the leader's
                heartbeat timeout and more than 2 s (workers send one every second, so
                two or more are missing); the leader gives it up at the whole timeout
                (`leader --heartbeat-timeout`, default 5 s). `commits` counts the leader's
                LMDB transactions: one holds every turn of a batch, or no turn at all when
                it only stores the answers of ops that changed nothing or were rejected (kept
                for retries), so turns each may be below 1.

                Options:
                \(leaderOption)
                  --timeout SECONDS   how long to wait for the answer (default \(Command.secondsText(Command.defaultTimeout)))
                  --watch [SECONDS]   ask again every SECONDS and redraw (on a terminal; else one report
                                      after another, --json one object a line) until Ctrl-C; on a
                                      UTF-8 terminal each worker's line ends with its lag over the
                                      last 24 reports as a sparkline, `lag ▁▁▃█▂`
                                      (default: once; SECONDS default \(Command.secondsText(Command.defaultWatchInterval)))
                  --count N           with --watch, stop after N reports (default: until Ctrl-C);
                                      a revision or epoch lower than the last report's (another
                                      log, a restored backup) adds a `note` line (--json: stderr)
                  --json              one JSON object instead of lines (default: lines), with the same
                                      fields: version, uptimeSeconds, heartbeatTimeoutSeconds, epoch,
                                      revision, workers [{name, appliedRevision, lag,
                                      secondsSinceHeard, silent, digest?, group?, instances?, roots?,
                                      tool?, settings?}], errors {code: count}, openScopeInstances, placement?,
                                      commits? {count, window, p50Micros, p99Micros, turnsPerCommit},
                                      refusals? [{op, code, count}], replication? {state, named,
                                      shipped, released, standbys [{node, lag}]} (--sync)
                                      (? absent when the leader does not report it; version and
                                      uptimeSeconds null from older leaders)
                \(keyOptions)

                Exit status: 0 shown, 1 a failure, 4 no answer within --timeout (with --watch: the
                last report's), 64 a usage error.

                Example:
                  \(cogd) status --leader 127.0.0.1:5701 --timeout 1 --json
                  \(cogd) status --watch 1 --count 3
                """
        case "get":
            return """

                Prints the current value of a durable source (a manual cog or box with a
                `name:`): every key of a box, one key (KEY, as JSON: '"alice"', 5,
                '{"id": 1}'), or the one value of a keyless source, as `name[key] = value`
                lines (text escaped as `\(cogd) tail` escapes it). A key matches when it
                is the one stored, or reads the same written as JSON (a UUID key by its
                text). Reads the data folder beside a running leader, or with --leader
                asks the leader for a snapshot of its state table (protocol/cogwire.md §5):
                without keys it says hello under a name of its own, get-UUID, which
                `\(cogd) status` lists until its goodbye as it closes; with keys, an observer
                key, or a worker key (said hello as a tool in its key file's name, while
                that worker is not running; §9). A KEY that starts with `-` goes after `--`.

                Options:
                  --data DIR          the leader's data folder (default $\(Command.dataEnvironmentVariable) when set,
                                      else ./\(Command.defaultDataFolder))
                  --leader ENDPOINT   ask this leader's requests endpoint instead; HOST:PORT means
                                      tcp://HOST:PORT; an HA cluster's nodes comma-separated (default:
                                      $\(Command.leaderEnvironmentVariable) when set and --data is not given, else none — read --data)
                  --json              one JSON object: {"name", "revision", "entries": [{"key", "value"}]},
                                      "key" null for a keyless source (default: lines)
                  --timeout SECONDS   with --leader, how long to wait for each answer (default \(Command.secondsText(Command.defaultTimeout)))
                  --key FILE          with --leader under CURVE, an observer's secret key file, or a
                                      worker's whose worker is not running (default:
                                      $\(Command.keyEnvironmentVariable) when set; needs --leader-key)
                  --leader-key FILE   with --leader under CURVE, the leader's public key file
                                      (default: $\(Command.leaderKeyEnvironmentVariable) when set)

                Durable sources this program declares:
                \(GetCommand.declaredSources(rigs).map { "  \(padded($0.name, to: 22)) \($0.isKeyed ? "a box: a value per key" : "one value")" }.joined(separator: "\n"))

                Exit status:
                  0   printed
                  1   no durable source of that name (it says which this program declares), a KEY
                      given to a keyless source, an unreadable folder, a refusal
                  3   the source holds no stored value (for that KEY): never written, or released
                  4   no answer from the leader within --timeout
                  64  a usage error, or a KEY that is not JSON

                Example:
                \(examples.get)
                """
        case "ops":
            return """

                Lists the ops a leader of this program serves — every op of every rig
                built into it (a leader built from another program serves that program's)
                — each with what it does, its argument's JSON shape, derived from the
                argument's Swift type ("note"?: an optional field; integer | null), and an
                example `\(cogd) call` line: the op's declared example, else one made from
                the shape.

                Options:
                  --json              one JSON object per op: {"name", "rig", "summary", "argument",
                                      "example"} (and "onlyWith" for an op served only with a
                                      leader option) (default: lines)

                Example:
                  \(cogd) ops --json
                """
        case "tail":
            return """

                Prints the last 10 turns (or --last N, or every turn from --from REV),
                oldest first: revision, time, turn name, origin, then one line per write,
                `name[key] = value` (`released` for a discard); control characters in
                names and text print escaped (`\\n`, `\\u{1B}`). A scope instance prints
                as #EPOCH.N (its number is EPOCH << 32 | N; --json gives the number),
                after its scope and member (`scope TrailScreens.trailScreen[1] #1.1`)
                when tail finds the turn that opened it (among those it prints or the
                \(TailCommand.scopeLookback) before). Safe beside a running writer. JSON
                fields: protocol/turnlog.md.

                Options:
                  --data DIR          the leader's data folder (default $\(Command.dataEnvironmentVariable) when set,
                                      else ./\(Command.defaultDataFolder))
                  --from REV          every turn from revision REV (default: the last 10); past the
                                      end it says where the log ends and exits 1 (unless --follow)
                  --last N            the last N turns (default 10)
                  --since TIME        from the first turn committed at or after TIME, by the records'
                                      times (the writer's clock): an RFC 3339 time, 2026-12-01T20:15:00Z
                                      or with an offset (+01:00), or a duration before now — a whole
                                      number and s, m, h or d (90s, 10m, 2h, 7d); also with --connect
                                      (default: the last 10)
                  --to REV            stop after revision REV, also when following (default: no end);
                                      without --from or --since: the last 10 (or --last N) up to REV
                  --count N           stop after N turns printed (those --name matches), also when
                                      following or with --connect (default: no limit)
                  --follow            keep printing turns as they commit (default: stop at the end)
                  --json              one JSON object per turn (default: lines)
                  --rejections        also the requests answered rejected or refused (and their retries
                                      answered from an earlier request), each after the turn of the
                                      revision the log ended at when it was answered: `#REV +  TIME
                                      refused CODE: REASON  (op OP, request W#N, digest HEX)`; with
                                      --json an object with "rejection": true (not with --connect;
                                      not counted by --count, not filtered by --name) (default: turns only)
                  --name PATTERN      only turns whose name matches a shell pattern (default: all);
                                      a malformed pattern (an unclosed `[`) is an error
                  --connect ENDPOINT  follow a running leader's live turn stream instead, its turns
                                      endpoint (HOST:PORT means tcp://HOST:PORT; the leader's default
                                      is \(Command.defaultTurnsEndpoint)), until Ctrl-C (default: none — read --data).
                                      For an HA cluster, every node's, comma-separated: it follows
                                      the node that leads, and after a failover the new leader (said
                                      on stderr), printing each revision once, in order.
                                      Nothing answering there within --timeout is an error (exit 4);
                                      \(Command.secondsText(TailCommand.quietNotice)) s without a turn, it says so on stderr and keeps
                                      waiting. With --from REV or --since TIME it first catches up
                                      from the leader's requests endpoint (--leader), then follows
                  --leader ENDPOINT   with --connect and --from or --since, the leader's requests
                                      endpoint it catches up from, and fills any gap from; for an HA
                                      cluster every node's, comma-separated: a standby's not-leader
                                      sends it to the node that leads, silence to the next node (default:
                                      $\(Command.leaderEnvironmentVariable) when set, else \(Command.defaultRequestsEndpoint)); without keys it
                                      says hello there as a tool, tail-UUID, which `status` lists under
                                      tools until it says goodbye as it stops (--to, --count, Ctrl-C)
                  --timeout SECONDS   with --connect, how long to wait for the stream's connection and
                                      for each answer while catching up (default \(Command.secondsText(Command.defaultTimeout)))
                  --key FILE          with --connect to a leader that authenticates with CURVE, a worker's
                                      or observer's secret key file (--from and --since: an observer's)
                                      (default: $\(Command.keyEnvironmentVariable) when set; needs --leader-key)
                  --leader-key FILE   with --connect, the leader's public key file, one for every node of
                                      an HA cluster (default: $\(Command.leaderKeyEnvironmentVariable) when set)

                With --connect it says on stderr once the stream is connected (without --from
                or --since), so stdout holds turn lines only; --follow is for --data
                (--connect always follows). A --name that no turn read matches prints
                nothing on stdout, says so on stderr and exits 0, like a log with no turns;
                following, it says so once and waits. A follower does not splice a log
                that went back: a turn at or below the last one read, an older epoch, or a
                leader (or a --data folder's data.mdb) replaced by another log or a restored
                backup that ends before the last turn read is said on stderr, and that log
                is followed from its end (one already past it is not noticed: README).

                Exit status:
                  0   printed (or nothing matched --name), or stopped by --to or --count
                  1   a failure: an unreadable folder, a revision retention removed, --from past
                      the end or --since after the newest turn (without --follow), a refused key
                  4   with --connect: nothing answers within --timeout (or only standbys do), or the
                      endpoint is the leader's other one (--connect takes the turns endpoint, --leader
                      the requests one)
                  64  a usage error
                  130 with --connect and --from or --since: stopped by Ctrl-C or SIGTERM (after
                      its goodbye to the leader)

                Example:
                  \(cogd) tail --data cogd-data --from 100 --name '\(examples.tailPattern)' --json
                  \(cogd) tail --data cogd-data --from 100 --to 200
                  \(cogd) tail --data cogd-data --follow --count 5
                  \(cogd) tail --data cogd-data --since 10m --name '\(examples.otherTailPattern)'
                  \(cogd) tail --connect 127.0.0.1:5702 --from 1 --leader 127.0.0.1:5701 --timeout 2
                  \(cogd) tail --connect 127.0.0.1:5702 --key keys/operator.key --leader-key keys/leader.pub
                  \(cogd) tail --connect 10.0.0.1:5702,10.0.0.2:5702 --leader 10.0.0.1:5701,10.0.0.2:5701 --from 1
                """
        case "log":
            return """

                Actions:
                  verify   checks that revisions are contiguous from 1, every record decodes and
                           carries the state digest of the replay, and the state table equals the
                           replay of the log (and decodes with this build's types); exits 1 naming
                           the first problem
                           — on a log whose oldest turns retention removed: contiguous from the
                           first kept revision, every record's checksum, the state digest of each
                           record whose writes touch only entries written since, and the state
                           table against the last record (protocol/turnlog.md §3a)
                  stats    the first and last revision kept, counts, record bytes, sizes, the file
                           size and LMDB's free pages
                  upgrade  rewrites a folder of an older log schema as this cogd's (schema \(TurnStore.wholeLogSchemaVersion);
                           one whose old turns retention removed is schema \(TurnStore.schemaVersion)); stop the leader first
                  compact  removes every turn but the newest --keep N, and the answers stored before
                           them, with no leader running (it refuses while one holds the folder); the
                           file does not shrink (it may even grow a little: LMDB writes the changed
                           pages anew), its freed pages are reused by later commits
                  backup DEST
                           writes a consistent, compacted copy of the log into DEST, a new or empty
                           folder, beside a running leader: data.mdb as of one moment and a
                           cogd.identity naming its last revision; a leader started on it (or on a
                           copy of it put where the old folder was) serves from there
                  soak     commits synthetic turns (soak.value, soak.last) and prints each committed
                           revision, until --count or Ctrl-C: a way to fill a log by hand

                Options:
                  --data DIR          the data folder (default $\(Command.dataEnvironmentVariable) when set, else
                                      ./\(Command.defaultDataFolder)); every action
                  --json              stats: one JSON object (default: lines)
                  --batch N           soak: turns per transaction, 1 to 100000 (default 1)
                  --count N           soak: stop after N turns (default: none, until Ctrl-C)
                  --keep N            compact: how many of the newest turns to keep, 1 or more (no default)

                Exit status:
                  0   done (verify: the log checks out)
                  1   a failure: verify found a problem (named on stderr), a folder that is missing,
                      unreadable or locked by a leader (compact, upgrade, soak), a backup refused
                  64  a usage error

                Example:
                  \(cogd) log stats --data cogd-data --json
                  \(cogd) log backup /backups/cogd-$(date +%F) --data /var/lib/cogd/data
                """
        case "keys":
            return """

                Actions:
                  generate NAME  writes a new CURVE key pair in DIR, made mode 0700 when missing:
                                 NAME.key, the secret key (mode 0600, created so; never
                                 overwritten), and NAME.pub, the public key. Prints the public key.
                  show FILE      prints the public key of a key file: a .pub file's, or the one
                                 derived from a secret key file (refused when its group or others
                                 may read it: chmod 600 FILE).

                Options:
                  --out DIR           generate: the folder (default: the working directory)

                The leader takes its own with --curve-secret and lists the others in --peers;
                worker, call, status, get and tail --connect take --key and --leader-key.
                Format: protocol/cogwire.md §9, "Key files".

                Example:
                  \(cogd) keys generate w1 --out keys
                  \(cogd) keys show keys/w1.pub
                """
        case "version":
            return """

                Takes no options.

                Example:
                  \(cogd) version
                """
        case "help":
            return """

                Prints the list of subcommands, or one subcommand's page (the same as
                `\(cogd) SUBCOMMAND --help`). Takes no options.

                Example:
                  \(cogd) help call
                """
        default:
            return ""
        }
    }

    /// A number of seconds as help prints it: `5`, `0.5`.
    private static func formatted(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
