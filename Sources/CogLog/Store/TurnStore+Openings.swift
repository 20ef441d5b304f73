import CogCodec
import Foundation
internal import CLMDB

/// The openings no record holds (`protocol/turnlog.md` §2c): a scope
/// instance opened by a registration reply — a mechanism's root, or a member
/// selected when its worker registered — appears in no record until one
/// retires it, so a reader of the log alone could only number the turns it
/// causes. The leader keeps each such opening in `instances`, in the commit
/// that precedes any turn from it, and `cogd tail` names the turn's scope
/// from it (`scope Journal (root) #1.3`).
extension TurnStore {
    /// The most openings `openings(of:)` looks up in one call.
    public static let openingLookupLimit = 10_000

    /// Writes `openings` into `instances` in `txn` (key: the instance, 8
    /// bytes big-endian; value: the open scope event's CBOR map, as in a
    /// record's `scopes`).
    func recordOpenings(_ txn: Transaction, _ openings: [ScopeEvent]) throws {
        guard let instancesDB, !openings.isEmpty else { return }
        let encoder = CBOREncoder()
        for opening in openings where opening.kind == .open {
            try txn.put(instancesDB, TurnStore.bytes(opening.instance), try encoder.encode(opening))
        }
    }

    /// The kept openings of `instances` (at most `openingLookupLimit` of
    /// them are looked up), by instance. An instance with no opening kept, or
    /// one whose entry does not read as an open scope event of that
    /// instance, is left out: a damaged entry only costs its name.
    public func openings(of instances: some Sequence<UInt64>) throws(TurnStoreError) -> [UInt64: ScopeEvent] {
        if instancesDB == nil, mode == .reader {
            // Made by a writer after this reader opened the folder.
            instancesDB = try TurnStoreError.catching { () throws in try environment.openDatabases(["instances"])[0] }
        }
        guard let instancesDB else { return [:] }
        return try TurnStoreError.catching { () throws in
            try environment.read { (txn: Transaction) in
                let decoder = CBORDecoder()
                var found: [UInt64: ScopeEvent] = [:]
                for instance in instances.prefix(TurnStore.openingLookupLimit) {
                    guard let bytes = try txn.get(instancesDB, TurnStore.bytes(instance)),
                        let event = try? decoder.decode(ScopeEvent.self, from: bytes),
                        event.kind == .open, event.instance == instance
                    else { continue }
                    found[instance] = event
                }
                return found
            }
        }
    }

    /// Removes, in `txn`, up to `limit` kept openings of epochs before
    /// `epoch` (the epoch of the oldest record kept: an instance causes turns
    /// only in its own epoch, `cogwire.md` §6); returns how many went.
    func pruneOpenings(_ txn: Transaction, before epoch: UInt64, limit: Int) throws -> Int {
        guard let instancesDB else { return 0 }
        return try txn.deleteLeading(instancesDB, limit: limit) { key, _ in
            key.count != 8 || TurnStore.number(key) >> 32 < epoch
        }.count
    }
}
