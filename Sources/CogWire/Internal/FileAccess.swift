internal import CFileAccess

#if canImport(Glibc)
    import Glibc
#endif

/// Who besides its owner may read or change a file: its mode and, when it
/// has one, its POSIX access ACL (the `system.posix_acl_access` attribute,
/// in the kernel's layout: a version word, 2, then 8-byte entries of tag,
/// permissions and id, little-endian).
///
/// With an ACL the mode's group bits show the ACL's mask, not the group's
/// permissions: systemd hands a service its `LoadCredential=` files as
/// `0400` plus an ACL entry that lets the service's user read them, which
/// `stat` shows as `0440`. Such a file is still private to its owner and
/// that one user.
enum FileAccess {
    private static let aclVersion: UInt32 = 2
    private static let entryBytes = 8
    /// The most ACL entries read; a larger ACL counts as open.
    private static let maximumEntries = 64

    private enum Tag: UInt16 {
        case userObject = 0x01
        case user = 0x02
        case groupObject = 0x04
        case group = 0x08
        case mask = 0x10
        case other = 0x20
    }

    /// Whether nobody but the file's owner and `reader` may read or change
    /// the open file `descriptor` whose mode is `mode`.
    static func isPrivate(_ descriptor: Int32, mode: mode_t, reader: uid_t = geteuid()) -> Bool {
        if mode & 0o077 == 0 { return true }
        if mode & 0o007 != 0 { return false }
        var bytes = [UInt8](repeating: 0, count: 4 + maximumEntries * entryBytes)
        let count = bytes.withUnsafeMutableBufferPointer { cogd_access_acl(descriptor, $0.baseAddress, $0.count) }
        // No ACL: the group bits are the group's. One too large to read (ERANGE), or unreadable: counted as open.
        guard count > 0 else { return false }
        return isPrivate(acl: bytes[..<count], reader: reader)
    }

    /// Whether an access ACL (its attribute's bytes) lets nobody but the
    /// owner and `reader` read or change the file. Anything unexpected
    /// (another version, an unknown tag, a torn entry) counts as open.
    static func isPrivate(acl: ArraySlice<UInt8>, reader: uid_t) -> Bool {
        let bytes = Array(acl)
        guard bytes.count >= 4, (bytes.count - 4) % entryBytes == 0, word(bytes, at: 0) == aclVersion else { return false }
        var entries: [(tag: Tag, permissions: UInt16, id: UInt32)] = []
        for offset in stride(from: 4, to: bytes.count, by: entryBytes) {
            guard let tag = Tag(rawValue: UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8) else { return false }
            let permissions = UInt16(bytes[offset + 2]) | UInt16(bytes[offset + 3]) << 8
            entries.append((tag, permissions, word(bytes, at: offset + 4)))
        }
        // Without a mask entry the ACL is the mode itself, and the group's entry counts in full.
        let mask = entries.first { $0.tag == .mask }?.permissions ?? 0o7
        return entries.allSatisfy { entry in
            switch entry.tag {
            case .userObject, .mask: true
            case .user: entry.id == reader || entry.permissions & mask == 0
            case .groupObject, .group: entry.permissions & mask == 0
            case .other: entry.permissions == 0
            }
        }
    }

    private static func word(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }
}
