// CogProtocol — every protocol rule as a state machine, and the messages
// (`protocol/cogwire.md`; issue 26).
//
// What is here: the leader core (`LeaderCore`, what it reads through
// `LeaderLog`, the batch it builds in `LeaderStore`, `MemoryLog` for the
// simulator and the core tests), the replica core (`ReplicaCore`, with the
// events its operator is told), the worker's book of scope instances
// (`ReplicaScopes`), the snapshot sender (`SnapshotSender`), the
// leader's scope instances (`ScopeTable`), the workers given up for silence
// (`GoneWorkers`), the peers file's rules (`PeerTable`, `CurveKeyText`), and
// the messages with their codes (`WireMessage`, `CogdCode`, …).
//
// What may not be here: sockets, the LMDB store, the C library, Foundation,
// or a clock read. The module imports only `Cog`, `CogCodec` and
// `Synchronization`; every time a core decides by is an input (`now`). The
// drivers in `CogCluster` (`Leader`, `Worker`) own the sockets, the store
// and the timers; `CogWire` frames the messages on ZeroMQ;
// `TurnStore: LeaderLog` and `PeerTable.load(path:)` (which reads a file)
// live in `CogCluster`. `MemberImportVisibility` is on for this target, so
// even a Foundation member reached through `CogCodec` does not compile, and
// `Tests/CoreTests/ModulePurityTests.swift` checks the imports and the
// forbidden names in these sources.
//
// Remaining Foundation use: none. (`TurnRecord.time` is a `Date` in
// `CogCodec`; `MemoryLog.append(_:secondsSince1970:)` takes the commit time
// as a number and `CogCodec` makes the `Date`.)
//
// Asserted invariants (`precondition`, on in release builds: each one
// broken would mean an acknowledged answer that is not stored, or an effect
// or op that happens twice; the process stops with
// "internal inconsistency: …" and restarts from the log):
// - replies leave only after their batch is durable, and revisions only
//   grow: `.committed` answers the commit under way with exactly its drafts'
//   revisions, ending where the log ends (`LeaderCore.committed`);
// - a request id answered by running is never run again (in a batch, or
//   applied and not yet indexed) — except under the simulator's broken
//   `dedup` rule, which its checker must catch (`LeaderCore.run`);
// - one owner per scope instance, of this epoch: a number is minted once and
//   never spills into the epoch's bits (`ScopeTable.mint`); a leader serves
//   only epochs its instance numbers can hold (`LeaderCore.init`).
//
// `try?` on paths that decide exactly-once, durability, placement or dedup
// (issue 26): none drops an answer without a word. Messages of this module
// always encode (a failure is a precondition failure naming the message);
// an op request the worker's socket cannot take is answered locally
// `rejected unavailable` and counted; a registration that cannot be sent is
// sent again at the next pass; a selector that cannot be read retires
// nothing (`selector-unreadable`). What remains, each decided:
// - `LeaderCore.digestAgreement`: a record that cannot be read makes the
//   comparison `unknown`, and nothing is decided on it;
// - `Leader.close` (in `CogCluster`): replies not yet indexed that cannot be
//   stored at close are rebuilt from the records at the next start
//   (turnlog.md §2, `meta.unindexed-from`);
// - `Leader.carrySnapshot`: a refusal its requester cannot take is counted
//   `send-dropped`; the requester asks again.
