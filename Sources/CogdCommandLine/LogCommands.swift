import CogCluster
import CogCodec
import CogLog
import CogProtocol
import CogWire
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cogd tail`: prints turns from the log, safe beside a running writer.
struct TailCommand {
    let options: Command.TailOptions
    /// How far it has got against `--to` and `--count`.
    let progress = Progress()

    final class Progress {
        var printed = 0
        /// Turns read and held to `--name` (up to `--to`).
        var considered = 0
        var done = false
        /// Scope instances seen opening, by number: their labels name the
        /// turns that come from them (at most `TailCommand.scopeLabelLimit`).
        var scopes: [UInt64: String] = [:]
        /// The labels the folder keeps for instances opened by registration
        /// replies (`TurnStore.openings(of:)`); nil when following a leader.
        var openingLabels: ((Set<UInt64>) throws -> [UInt64: String])?
        /// The last turn read (printed or held to `--name`): a follower
        /// that meets one at or below it, or of an older epoch, reads another log.
        var lastRecord: TurnRecord?
        /// With `--rejections`: reads the rejections kept from a revision and
        /// order through a revision (`TurnStore.rejections`); nil when following a leader.
        var rejectionLookup: ((UInt64, UInt64, UInt64) throws -> [RejectionRecord])?
        /// The next rejection to print (revision, order): those before it are printed.
        var rejectionCursor: (revision: UInt64, order: UInt64)?
    }

    /// The most instance labels `tail` remembers (an instance retired is forgotten).
    static let scopeLabelLimit = 100_000

    /// The revision after `revision`, held at 2^64−1: a revision comes from a
    /// file or a leader, and the last one must not trap the tail.
    static func revision(after revision: UInt64) -> UInt64 {
        revision == .max ? .max : revision + 1
    }
    /// How many turns before the first printed `tail` reads, at most, for the
    /// openings of the instances the printed ones come from.
    static let scopeLookback: UInt64 = 10_000

    /// Looks back from `first` (at most `scopeLookback` turns) for the turns
    /// that opened the instances `records` come from or retire, so those are
    /// named too (`scope TrailScreens.trailScreen[1] #1.1`), not only numbered;
    /// one that no record opened (a root placed by a registration reply) is
    /// named by the opening the folder keeps for it (`turnlog.md` §2c), else
    /// by the record that retires it, when the log holds one.
    private func seedScopeLabels(_ store: TurnStore, before first: UInt64, for records: [TurnRecord]) throws {
        var wanted = Set(records.compactMap(\.origin.instance) + records.flatMap { $0.scopeEvents.filter { $0.kind == .retire }.map(\.instance) })
        for record in records { for event in record.scopeEvents where event.kind == .open { wanted.remove(event.instance) } }
        var end = min(first, TailCommand.revision(after: store.lastRevision))
        let floor = max(store.firstRevision, first > TailCommand.scopeLookback ? first - TailCommand.scopeLookback : 1)
        while !wanted.isEmpty && end > floor {
            let start = max(floor, end > 1_000 ? end - 1_000 : 1)
            for record in try store.records(from: start, limit: Int(end - start)) {
                for event in record.scopeEvents where event.kind == .open && wanted.remove(event.instance) != nil {
                    progress.scopes[event.instance] = TurnRecord.scopeLabel(event)
                }
            }
            end = start
        }
        // Not opened by any record read: a mechanism's root (or a member) placed by a
        // registration reply (`cogwire.md` §6a). The folder keeps its opening (a log
        // written before it did does not): else a later record that retires it names
        // it: looked for in these records, then at most `scopeLookback` turns after them.
        try nameFromOpenings(&wanted)
        guard !wanted.isEmpty, let last = records.last?.revision else { return }
        func named(by record: TurnRecord) {
            for event in record.scopeEvents where event.kind == .retire && wanted.remove(event.instance) != nil {
                progress.scopes[event.instance] = TurnRecord.scopeLabel(event)
            }
        }
        records.forEach(named)
        var start = last + 1
        let ceiling = min(store.lastRevision, last + TailCommand.scopeLookback)
        while !wanted.isEmpty && start <= ceiling {
            let chunk = try store.records(from: start, limit: Int(min(1_000, ceiling - start + 1)))
            guard let end = chunk.last?.revision else { break }
            chunk.forEach(named)
            start = end + 1
        }
    }

    /// Names what it can of `wanted` from the openings the folder keeps, and
    /// takes those out of it.
    private func nameFromOpenings(_ wanted: inout Set<UInt64>) throws {
        guard let lookUp = progress.openingLabels, !wanted.isEmpty, progress.scopes.count < TailCommand.scopeLabelLimit else { return }
        for (instance, label) in try lookUp(wanted) {
            progress.scopes[instance] = label
            wanted.remove(instance)
        }
    }

    func run() -> Int32 {
        if let endpoint = options.connect { return followStream(endpoint) }
        var store: TurnStore
        do {
            store = try TurnStore(directory: options.dataFolder, mode: .reader)
        } catch {
            printError("Error: \(escaped: error)")
            if error.code == .missingFolder, options.leaderSource == Command.leaderEnvironmentVariable {
                // COGD_LEADER names a running leader, whose turns a folder-less tail follows with --connect.
                printError(
                    "(COGD_LEADER is set: tail reads a data folder unless given --connect TURNS-ENDPOINT, "
                        + "the leader's turn stream, which it follows, catching up from COGD_LEADER with --from or --since)")
            }
            return 1
        }
        defer { store.close() }
        // Which file was opened: a follower notices when the folder's log is moved away or replaced.
        var opened = TailCommand.logFile(in: options.dataFolder)
        progress.openingLabels = { [store] in try store.openings(of: $0).mapValues(TurnRecord.scopeLabel) }
        if options.rejections { progress.rejectionLookup = { [store] in try store.rejections(from: $0, order: $1, through: $2) } }
        do {
            var next: UInt64
            var from = options.from
            if let since = options.since {
                let moment = since.date()
                let found = try TailSince.firstRevision(atOrAfter: moment, first: store.firstRevision, last: store.lastRevision) { revision in
                    try store.records(from: revision, limit: 1).first.map { $0.revision == revision ? $0.time : .distantFuture }
                }
                if let found {
                    from = found
                } else {
                    // Every turn is older (or there is none): say what the newest is, or wait for a newer one.
                    let newest = try store.lastRevision == 0 ? nil : store.records(from: store.lastRevision, limit: 1).first
                    let ends =
                        newest.map { "the newest turn, revision \($0.revision), is from \(CBORText.iso8601($0.time.timeIntervalSince1970))" }
                        ?? "the log has no turns yet"
                    guard options.follow else {
                        printError("Error: no turn since \(since): \(ends) (an earlier --since, or --follow to wait)")
                        return 1
                    }
                    printError("\(CogdCommandLine.programName) tail: no turn since \(since) yet: \(ends); waiting for newer ones")
                    from = TailCommand.revision(after: store.lastRevision)
                }
            }
            if let from {
                // Below what retention kept: say which revisions remain.
                if from < store.firstRevision {
                    printError(
                        "Error: revision \(from) is no longer in the log: retention removed revisions 1…\(store.firstRevision - 1); "
                            + "it keeps \(store.firstRevision)…\(store.lastRevision) (--from \(store.firstRevision) to \(store.lastRevision))")
                    return 1
                }
                // Past the end prints nothing: say which revisions exist instead (following waits for them).
                if from > store.lastRevision, options.since == nil {
                    let ends = store.lastRevision == 0 ? "the log has no turns yet" : "the log ends at revision \(store.lastRevision)"
                    guard options.follow else {
                        let choices = store.lastRevision == 0 ? "--follow to wait" : "--from 1 to \(store.lastRevision), or --follow to wait"
                        printError("Error: nothing from revision \(from): \(ends) (\(choices))")
                        return 1
                    }
                    printError("\(CogdCommandLine.programName) tail: \(ends); waiting for revision \(from)")
                }
                next = from
                let records = try store.records(from: from)
                try seedScopeLabels(store, before: from, for: records)
                next = try printRecords(records, after: next)
                if progress.done { return 0 }
            } else if let to = options.to, options.namePattern == nil, to < store.lastRevision {
                // `--to` without `--from`: the last 10 (or --last N) up to it, not the log's last ones (all after it).
                let end = min(to, store.lastRevision)
                let wanted = UInt64(options.last ?? 10)
                let from = max(store.firstRevision, end >= wanted ? end - wanted + 1 : 1)
                let records = end < store.firstRevision ? [] : try store.records(from: from, limit: Int(end - from + 1))
                if let first = records.first { try seedScopeLabels(store, before: first.revision, for: records) }
                next = try printRecords(records, after: from)
                if records.isEmpty {
                    printError(
                        "Error: nothing up to revision \(to): retention removed revisions 1…\(store.firstRevision - 1); "
                            + "the log keeps \(store.firstRevision)…\(store.lastRevision)")
                    return 1
                }
                return 0
            } else {
                let wanted = options.last ?? 10
                let records = options.namePattern == nil ? try store.lastRecords(wanted) : try lastMatching(store, wanted)
                next = TailCommand.revision(after: records.last?.revision ?? store.lastRevision)
                if let first = records.first { try seedScopeLabels(store, before: first.revision, for: records) }
                next = try printRecords(records, after: next)
                next = max(next, TailCommand.revision(after: store.lastRevision))
                // Every turn of the log was read for the pattern.
                progress.considered = store.lastRevision == 0 ? 0 : Int(clamping: store.lastRevision - store.firstRevision + 1)
            }
            guard options.follow, !progress.done else {
                if let pattern = options.namePattern, progress.printed == 0 {
                    // Still exit 0, like `tail` of an empty log: the read succeeded, and a follower would simply wait.
                    printError(
                        "\(CogdCommandLine.programName) tail: no turn matches --name '\(escaped: pattern)' "
                            + "(\(progress.considered) turn\(progress.considered == 1 ? "" : "s") read)")
                }
                return 0
            }
            sayNothingMatchesYet()
            var lastLooked = ContinuousClock.now
            var goneSaid = false
            while true {
                let records = try store.records(from: next, limit: 1_000)
                if records.isEmpty {
                    // Answered since the last turn printed: shown at once, at that turn's revision.
                    if next > 1, progress.rejectionCursor != nil { try printRejections(through: next - 1, startingAt: next - 1) }
                    usleep(50_000)
                    // Idle: once a second, whether the folder still holds the log being read.
                    guard ContinuousClock.now - lastLooked >= .seconds(1) else { continue }
                    lastLooked = .now
                    let now = TailCommand.logFile(in: options.dataFolder)
                    guard now != opened else { continue }
                    guard now != nil, let replacement = try? TurnStore(directory: options.dataFolder, mode: .reader) else {
                        if !goneSaid {
                            goneSaid = true
                            printError(
                                "\(CogdCommandLine.programName) tail: \(escaped: options.dataFolder) no longer holds the log being read "
                                    + "(moved or removed); waiting for a log there")
                        }
                        continue
                    }
                    let end = replacement.lastRevision
                    // The same log (its id) that has every turn read so far goes on where it was; any other is followed from its end.
                    if replacement.logID != nil && replacement.logID == store.logID && next <= TailCommand.revision(after: end) {
                        printError(
                            "\(CogdCommandLine.programName) tail: the log in \(escaped: options.dataFolder) was replaced by a copy of the same log; "
                                + "following it from \(next)")
                    } else {
                        printError(
                            "\(CogdCommandLine.programName) tail: the log in \(escaped: options.dataFolder) was replaced by another log, "
                                + "or a restored backup, which ends at revision \(end); following it from \(TailCommand.revision(after: end))")
                        next = TailCommand.revision(after: end)
                        progress.lastRecord = nil
                    }
                    store.close()
                    store = replacement
                    progress.openingLabels = { [store] in try store.openings(of: $0).mapValues(TurnRecord.scopeLabel) }
                    if options.rejections {
                        progress.rejectionLookup = { [store] in try store.rejections(from: $0, order: $1, through: $2) }
                        progress.rejectionCursor = nil
                    }
                    opened = now
                    goneSaid = false
                    continue
                }
                next = try printRecords(records, after: next)
                if progress.done { return 0 }
            }
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    /// A follower with `--name` that has printed nothing says so once on
    /// stderr (stdout carries turn lines only), then waits.
    func sayNothingMatchesYet() {
        guard let pattern = options.namePattern, progress.printed == 0 else { return }
        printError(
            "\(CogdCommandLine.programName) tail: no turn matches --name '\(escaped: pattern)' yet "
                + "(\(progress.considered) turn\(progress.considered == 1 ? "" : "s") read); waiting for one (Ctrl-C stops)")
    }

    /// The device and inode of the folder's `data.mdb` (nil when there is
    /// none): another pair means the folder now holds another file.
    static func logFile(in folder: String) -> [UInt64]? {
        var info = stat()
        guard stat(folder + "/data.mdb", &info) == 0 else { return nil }
        return [UInt64(info.st_dev), UInt64(info.st_ino)]
    }

    /// Prints the records that match `--name`; returns the revision after the last one seen.
    func printRecords(_ records: [TurnRecord], after next: UInt64) throws -> UInt64 {
        if let first = records.first, next > 0, first.revision > next {
            // A follower that fell behind the writer's retention: say what it could not print.
            printError(
                "\(CogdCommandLine.programName) tail: revisions \(next)…\(first.revision - 1) were removed by retention before they could be printed")
        }
        var next = next
        // Turns from instances no record opened (a follower meets new ones): named from the folder's openings.
        var unnamed = Set(records.compactMap(\.origin.instance).filter { progress.scopes[$0] == nil })
        for record in records { for event in record.scopeEvents where event.kind == .open { unnamed.remove(event.instance) } }
        try nameFromOpenings(&unnamed)
        for record in records {
            if let to = options.to, record.revision > to {
                progress.done = true
                break
            }
            next = TailCommand.revision(after: record.revision)
            for event in record.scopeEvents where event.kind == .open && progress.scopes.count < TailCommand.scopeLabelLimit {
                progress.scopes[event.instance] = TurnRecord.scopeLabel(event)
            }
            // Forgotten once retired, after the record that retires it is printed.
            defer { for event in record.scopeEvents where event.kind == .retire { progress.scopes[event.instance] = nil } }
            progress.considered += 1
            progress.lastRecord = record
            // Answered before this turn, after the one printed before it (a follower meets them late).
            if record.revision > 0, progress.rejectionCursor != nil { try printRejections(through: record.revision - 1, startingAt: record.revision) }
            guard matches(record.name) else {
                try printRejections(through: record.revision, startingAt: record.revision)
                continue
            }
            defer {
                progress.printed += 1
                if let count = options.count, progress.printed >= count { progress.done = true }
                if let to = options.to, record.revision >= to { progress.done = true }
            }
            if progress.done { break }
            if options.json {
                print(record.jsonLine)
            } else {
                for line in record.displayLines(scopes: progress.scopes) { print(line) }
            }
            try printRejections(through: record.revision, startingAt: record.revision)
        }
        fflush(nil)
        return next
    }

    /// With `--rejections`, prints the rejections kept at revisions up to
    /// `revision` that are not printed yet (`turnlog.md` §2d), each after
    /// the turn of its revision; a tail that printed none yet starts at
    /// `start` (those of earlier revisions belong to turns it did not print).
    func printRejections(through revision: UInt64, startingAt start: UInt64) throws {
        guard let lookUp = progress.rejectionLookup else { return }
        var cursor = progress.rejectionCursor ?? (start, 0)
        while cursor.revision <= revision {
            let found = try lookUp(cursor.revision, cursor.order, revision)
            for rejection in found { print(options.json ? rejection.jsonLine : rejection.displayLine) }
            guard let last = found.last else { break }
            fflush(nil)  // a follower waiting for the next turn shows it now
            cursor = last.order == .max ? (last.revision &+ 1, 0) : (last.revision, last.order + 1)
            if found.count < TurnStore.rejectionReadLimit { break }
        }
        progress.rejectionCursor = cursor
    }

    private func matches(_ name: String) -> Bool {
        guard let pattern = options.namePattern else { return true }
        return fnmatch(pattern, name, 0) == 0
    }

    /// The newest `count` records whose name matches, in revision order.
    private func lastMatching(_ store: TurnStore, _ count: Int) throws -> [TurnRecord] {
        var found: [TurnRecord] = []
        var from: UInt64 = 1
        while true {
            let batch = try store.records(from: from, limit: 10_000)
            guard let last = batch.last else { break }
            found += batch.filter { matches($0.name) }
            if found.count > count { found.removeFirst(found.count - count) }
            from = TailCommand.revision(after: last.revision)
        }
        return found
    }
}

/// `cogd log verify` and `cogd log stats`.
enum LogCommands {
    @MainActor
    static func verify(dataFolder: String) -> Int32 {
        do {
            let store = try TurnStore(directory: dataFolder, mode: .reader)
            let report = try store.verify()
            if let problem = report.problem {
                printError("Error: log verify: \(escaped: problem)")
                return 1
            }
            // The values, read with this build's declarations (its rigs).
            let state = try StoredValueAudit.stateTable(of: store)
            let history = try StoredValueAudit.records(of: store)
            for finding in state { printError("Error: log verify: \(escaped: finding.description)") }
            if history.count > state.count {
                printError("log verify: \(history.count) writes in the records do not decode with this build's types; the first:")
                for finding in history.listed { printError("  \(escaped: finding.description)") }
            }
            guard state.isEmpty else {
                printError(
                    "Error: log verify: \(state.count) state entr\(state.count == 1 ? "y does" : "ies do") not decode with this build's types: "
                        + "a leader of this build refuses to start over them")
                return 1
            }
            let decodes = history.count == 0 ? ", every value decodes with this build's types" : ""
            guard report.firstRevision > 1 else {
                let range = report.turns == 0 ? "no turns" : "revisions 1…\(report.lastRevision) contiguous"
                print(
                    "ok: \(report.turns) turns, \(range), every record decodes and carries the state digest of the replay, "
                        + "state table (\(report.stateEntries) entries, digest \(report.stateDigest)) equals the replay of the log" + decodes)
                return 0
            }
            let unchecked = report.turns - report.digestsChecked
            let before = "before revision \(report.firstRevision)"
            print(
                "ok: \(report.turns) turns, revisions \(report.firstRevision)…\(report.lastRevision) contiguous "
                    + "(retention removed revisions 1…\(report.firstRevision - 1)), every record decodes; "
                    + "state digests: \(report.digestsChecked) of \(report.turns) records checked against a replay of the kept records"
                    + (unchecked > 0
                        ? " (the other \(unchecked) overwrite values written \(before), which that replay lacks)" : "")
                    + "; the state table (\(report.stateEntries) entries, digest \(report.stateDigest)) holds what the kept records wrote last "
                    + "and adds up to the last record's digest (\(report.entriesFromRemovedRecords) of its entries last written \(before))"
                    + decodes)
            return 0
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    static func upgrade(dataFolder: String) -> Int32 {
        do {
            let report = try TurnStore.upgrade(directory: dataFolder)
            guard report.fromSchema < TurnStore.wholeLogSchemaVersion else {
                print("ok: \(dataFolder) already has schema \(report.fromSchema); nothing to do")
                return 0
            }
            print(
                "ok: upgraded \(dataFolder) from schema \(report.fromSchema) to \(TurnStore.wholeLogSchemaVersion): \(report.recordsRewritten) records rewritten "
                    + "with checksums and state digests, \(report.nullWritesAsReleases) null writes recorded as releases, "
                    + "\(report.stateEntriesRemoved) state entries they released removed")
            return 0
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    /// `cogd log compact --keep N`: removes every turn but the newest N, with no leader running.
    static func compact(dataFolder: String, keep: UInt64) -> Int32 {
        guard FileManager.default.fileExists(atPath: dataFolder + "/data.mdb") else {
            printError("Error: data folder \(escaped: dataFolder) holds no turn log (no data.mdb)")
            return 1
        }
        let store: TurnStore
        do {
            // Maintenance: the folder's lock, no new epoch; nothing to remove writes nothing.
            store = try TurnStore(directory: dataFolder, mode: .maintenance)
        } catch where error.code == .locked {
            printError(
                "Error: \(escaped: error.message): a leader serves from this folder. Stop it first, or let it remove old turns "
                    + "while it serves (cogd leader --retain-turns \(keep))")
            return 1
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
        defer { store.close() }
        do {
            // Replies a leader left only in their records (a backup's newest, or a leader
            // stopped without indexing them) are indexed first, as a leader does when it
            // opens the folder: then those records may go too. Nothing to remove: nothing written.
            var indexed = 0
            let sizeBefore = try store.statistics().fileBytes
            if store.unindexedFrom != nil, store.lastRevision - store.firstRevision + 1 > keep {
                let replies = LeaderCore.inKeyOrder(try LeaderCore.rebuiltReplies(store))
                _ = try store.append([], replies: replies, index: .indexed)
                indexed = replies.count
            }
            let before = store.firstRevision
            let report = try store.compact(keep: keep)
            let stats = try store.statistics()
            var line =
                report.records == 0
                ? "ok: nothing to remove: \(dataFolder) keeps revisions \(store.firstRevision)…\(store.lastRevision)"
                : "ok: removed revisions \(before)…\(report.firstRevision - 1) (\(report.records) turns); \(dataFolder) keeps revisions "
                    + "\(report.firstRevision)…\(store.lastRevision)"
            if indexed > 0 {
                line += "; first indexed \(indexed == 1 ? "1 reply held only in its record" : "\(indexed) replies held only in their records") (as a leader does when it opens the folder)"
            }
            line += "; removed \(counted(report.dedupEntries, "dedup answer", "dedup answers")) stored before them"
            if report.rejections > 0 { line += " and \(counted(report.rejections, "rejection", "rejections")) kept at their revisions" }
            // LMDB never gives pages back to the file system (the compaction's own
            // commit may even add some): the freed ones serve later commits.
            let size =
                stats.fileBytes > sizeBefore
                ? "data.mdb grew from \(bytes(sizeBefore)) to \(bytes(stats.fileBytes)) (LMDB writes the changed pages anew before it frees the old)"
                : "data.mdb is \(bytes(stats.fileBytes))"
            line += "; \(size); \(counted(stats.freePages, "page", "pages")) free for later commits (`\(CogdCommandLine.programName) log backup` writes a compacted copy)"
            print(line)
            return 0
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    /// `cogd log backup DEST`: a consistent, compacted copy of the log, beside a running leader.
    static func backup(dataFolder: String, destination: String) -> Int32 {
        do {
            let store = try TurnStore(directory: dataFolder, mode: .reader)
            defer { store.close() }
            let report = try store.backup(to: destination)
            let range = report.lastRevision == 0 ? "no turns" : "revisions \(report.firstRevision)…\(report.lastRevision)"
            print(
                "ok: backed up \(dataFolder) to \(destination): \(range), epoch \(report.epoch), state digest \(report.stateDigest); "
                    + "data.mdb \(bytes(report.bytes)) (the folder's is \(bytes(report.sourceBytes)))"
                    + (report.identityWritten ? ", and a cogd.identity naming that revision" : ""))
            return 0
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    static func stats(dataFolder: String, json: Bool) -> Int32 {
        do {
            let store = try TurnStore(directory: dataFolder, mode: .reader)
            let stats = try store.statistics()
            let rejections = try store.rejectionCount()
            if json {
                print(
                    "{\"epoch\": \(stats.epoch), \"firstRevision\": \(stats.firstRevision), \"lastRevision\": \(stats.lastRevision), "
                        + "\"turns\": \(stats.turns), \"stateEntries\": \(stats.stateEntries), \"dedupEntries\": \(stats.dedupEntries), "
                        + "\"unindexedFrom\": \(store.unindexedFrom.map(String.init) ?? "null"), "
                        + "\"turnsBytes\": \(stats.turnsBytes), \"stateBytes\": \(stats.stateBytes), \"fileBytes\": \(stats.fileBytes), "
                        + "\"mapBytes\": \(stats.mapBytes), \"recordBytes\": \(stats.recordBytes), \"dedupBytes\": \(stats.dedupBytes), "
                        + "\"pageSize\": \(stats.pageSize), \"usedPages\": \(stats.usedPages), \"freePages\": \(stats.freePages), "
                        + "\"expiredNames\": \(stats.expiredNames), \"rejections\": \(rejections)}")
            } else {
                let range = stats.turns == 0 ? "none" : "\(stats.firstRevision)…\(stats.lastRevision)"
                print("data folder  \(dataFolder)")
                print("epoch        \(stats.epoch)")
                print(
                    "revisions    \(range) (\(counted(stats.turns, "turn", "turns"))\(stats.firstRevision > 1 ? "; retention removed 1…\(stats.firstRevision - 1)" : ""))")
                print("records      \(bytes(stats.recordBytes))")
                print("state        \(counted(stats.stateEntries, "entry", "entries"))")
                print(
                    "dedup        \(counted(stats.dedupEntries, "entry", "entries"))"
                        + (store.unindexedFrom.map { " (applied requests' replies from revision \($0) on are in their records, not yet indexed)" } ?? ""))
                if rejections > 0 {
                    print("rejections   \(counted(rejections, "entry", "entries")) (requests answered rejected or refused, beside the turns)")
                }
                if stats.expiredNames > 0 {
                    print("expired      \(counted(stats.expiredNames, "worker name", "worker names")) whose oldest answers retention removed")
                }
                print(
                    "sizes        turns \(bytes(stats.turnsBytes)), state \(bytes(stats.stateBytes)), dedup \(bytes(stats.dedupBytes)), "
                        + "file \(bytes(stats.fileBytes)) (map \(bytes(stats.mapBytes)))")
                print(
                    "pages        \(stats.usedPages) used (\(bytes(stats.pageSize)) each), \(stats.freePages) of them free "
                        + "(\(bytes(stats.freePages * stats.pageSize)), reused by later commits before the file grows)")
            }
            return 0
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    /// Commits synthetic turns, `batch` per transaction, printing `committed R`
    /// after each commit returns (so a watcher knows what is durable).
    static func soak(dataFolder: String, batch: Int, count: Int?) -> Int32 {
        do {
            let store = try TurnStore(directory: dataFolder, mode: .writer, createIfMissing: true)
            let encoder = CBOREncoder()
            var committed = 0
            while count.map({ committed < $0 }) ?? true {
                let revision = store.lastRevision
                let drafts = try (1...batch).map { offset in
                    let value = Int(revision) + offset
                    return TurnDraft(
                        name: "soak.set(_:)",
                        writes: [
                            TurnWrite(name: "soak.value", key: try encoder.encode(value % 97), value: try encoder.encode(value)),
                            TurnWrite(name: "soak.last", key: nil, value: try encoder.encode(value)),
                        ])
                }
                try store.append(drafts)
                committed += batch
                print("committed \(store.lastRevision)")
                fflush(nil)
            }
            return 0
        } catch {
            printError("Error: \(escaped: error)")
            return 1
        }
    }

    private static func bytes(_ count: Int) -> String {
        switch count {
        case ..<1_024: "\(count) B"
        case ..<(1 << 20): "\(count / 1_024) KiB"
        default: String(format: "%.1f MiB", Double(count) / Double(1 << 20))
        }
    }
}

/// `count` with its noun, singular for one: `1 entry`, `2 entries`.
package func counted<Count: BinaryInteger>(_ count: Count, _ singular: String, _ plural: String) -> String {
    "\(count) \(count == 1 ? singular : plural)"
}
