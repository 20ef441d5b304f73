internal import CPrefetch

/// A state entry's stored key, as `EntryHashCache` holds it. A key of up to
/// 32 bytes (a source's name and a short encoded key: most of them) is held
/// in place, so looking a hot entry up allocates nothing; a longer one is
/// held as an array.
struct StoredKey: Equatable {
    /// The first 32 bytes, zero-padded, and how many bytes there are.
    fileprivate var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    fileprivate let count: Int
    /// The bytes of a key longer than 32 (nil: held in `words`).
    fileprivate let spilled: [UInt8]?

    static let inlineBytes = 32

    init(bytes: UnsafeRawBufferPointer) {
        count = bytes.count
        if bytes.count > StoredKey.inlineBytes {
            spilled = Array(bytes)
        } else {
            spilled = nil
            if !bytes.isEmpty { withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: bytes) } }
        }
    }

    init(bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { StoredKey(bytes: $0) }
    }

    /// The plain stored key of a name and an encoded key (nil: keyless),
    /// `name` 0 `key`, built in place when it fits (`StateLayout.isPlain`
    /// says whether the entry is stored so).
    init(plainName name: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer?) {
        let total = name.count + 1 + (key?.count ?? 0)
        guard total <= StoredKey.inlineBytes else {
            var bytes = [UInt8](name)
            bytes.append(0)
            if let key { bytes.append(contentsOf: key) }
            self.init(bytes: bytes)
            return
        }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { words in
            if !name.isEmpty { words.baseAddress!.copyMemory(from: name.baseAddress!, byteCount: name.count) }
            // The byte after the name stays 0: the separator.
            if let key, !key.isEmpty { (words.baseAddress! + name.count + 1).copyMemory(from: key.baseAddress!, byteCount: key.count) }
        }
        self.init(words: words, count: total)
    }

    private init(words: (UInt64, UInt64, UInt64, UInt64), count: Int) {
        self.words = words
        self.count = count
        spilled = nil
    }

    /// The empty slot's mark: no stored key has a negative count.
    fileprivate static let vacant = StoredKey(words: (0, 0, 0, 0), count: -1)

    static func == (lhs: StoredKey, rhs: StoredKey) -> Bool {
        lhs.count == rhs.count && lhs.words == rhs.words && lhs.spilled == rhs.spilled
    }
}

/// Entry hashes of state entries recently written, by stored key: the old
/// hash a write takes off the running state digest, without reading and
/// hashing the old value again (0: a released entry).
///
/// An open-addressing table with linear probing, kept at most half full
/// (it doubles from 1,024 slots). A slot holds its key's first 32 bytes in
/// place, so a lookup of a short key allocates nothing and compares four
/// words. A short key's slot comes from a folded 64×64-bit multiply of
/// its words with a salt drawn at random for each cache, so keys that
/// collide cannot be chosen without knowing it; a longer key goes through
/// the standard library's randomly keyed `Hasher`. About 64 bytes per entry (and a
/// long key's bytes), up to twice that in free slots.
struct EntryHashCache {
    private struct Slot {
        var key: StoredKey
        var hash: UInt128
    }

    private var slots: [Slot] = []
    private var mask = 0
    private(set) var count = 0
    private let salt: (UInt64, UInt64, UInt64, UInt64, UInt64)

    static let initialSlots = 1_024

    init() {
        var random = SystemRandomNumberGenerator()
        salt = (random.next(), random.next(), random.next(), random.next(), random.next())
    }

    /// Forgets every entry and frees the table.
    mutating func removeAll() {
        slots = []
        mask = 0
        count = 0
    }

    /// Sets `key`'s entry hash to `hash`; returns the one it had, or nil
    /// for a key the cache does not hold.
    mutating func exchange(_ hash: UInt128, for key: StoredKey) -> UInt128? {
        if (count + 1) * 2 > slots.count { grow() }
        var index = slotIndex(key)
        let mask = self.mask
        return slots.withUnsafeMutableBufferPointer { slots in
            while true {
                if slots[index].key.count < 0 {
                    slots[index] = Slot(key: key, hash: hash)
                    count += 1
                    return nil
                }
                if slots[index].key == key {
                    let old = slots[index].hash
                    slots[index].hash = hash
                    return old
                }
                index = (index + 1) & mask
            }
        }
    }

    /// Starts bringing `key`'s first slot into the processor's cache: an
    /// `exchange` for it after other work (the entry hash's SHA-256) then
    /// does not wait for memory. A batch's writes mostly touch slots last
    /// touched a batch ago, long evicted by the commit between.
    /// (Mutating only so that a call on a stored property borrows the table
    /// instead of copying it.)
    mutating func prefetch(_ key: StoredKey) {
        guard !slots.isEmpty else { return }
        let index = slotIndex(key)
        slots.withUnsafeMutableBufferPointer { cogd_prefetch_for_write($0.baseAddress! + index) }
    }

    private func slotIndex(_ key: StoredKey) -> Int {
        if let spilled = key.spilled {
            var hasher = Hasher()
            spilled.withUnsafeBytes { hasher.combine(bytes: $0) }
            return hasher.finalize() & mask
        }
        func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let product = a.multipliedFullWidth(by: b)
            return product.high ^ product.low
        }
        let front = fold(key.words.0 ^ salt.0, key.words.1 ^ salt.1)
        let back = fold(key.words.2 ^ salt.2, key.words.3 ^ salt.3)
        return Int(truncatingIfNeeded: fold(front ^ UInt64(truncatingIfNeeded: key.count), back ^ salt.4)) & mask
    }

    private mutating func grow() {
        let old = slots
        let size = max(EntryHashCache.initialSlots, old.count * 2)
        slots = Array(repeating: Slot(key: .vacant, hash: 0), count: size)
        mask = size - 1
        count = 0
        for slot in old where slot.key.count >= 0 { _ = exchange(slot.hash, for: slot.key) }
    }
}
