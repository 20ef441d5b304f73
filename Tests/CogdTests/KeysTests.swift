import CogWire
import Foundation
import Testing

@testable import CogdCommandLine

#if canImport(Glibc)
    import Glibc
#endif

/// The mode bits of `path`.
private func mode(of path: String) -> mode_t {
    var info = stat()
    #expect(stat(path, &info) == 0, "stat \(path)")
    return info.st_mode & 0o777
}

/// Gives `path` a POSIX access ACL (python3 writes the attribute):
/// `entries` are (tag, permissions, id) with the kernel's tags (1 the
/// owner, 2 a user, 4 the group, 0x10 the mask, 0x20 others). Whether it took.
private func setAccessACL(_ path: String, _ entries: [(tag: Int, permissions: Int, id: UInt32)]) -> Bool {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return false }
    let script = """
        import os, struct, sys
        entries = [tuple(int(x) for x in e.split(":")) for e in sys.argv[2:]]
        os.setxattr(sys.argv[1], "system.posix_acl_access", struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries))
        """
    let arguments = ["-c", script, path] + entries.map { "\($0.tag):\($0.permissions):\($0.id)" }
    return (try? runProgram(URL(fileURLWithPath: "/usr/bin/python3"), arguments))?.status == 0
}

/// Whether files in the temporary folder take ACLs (and python3 is here to give them).
private let temporaryFilesTakeACLs: Bool = {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("cogd-acl-probe-\(UUID().uuidString)").path
    guard FileManager.default.createFile(atPath: path, contents: Data()) else { return false }
    defer { unlink(path) }
    return setAccessACL(path, [(1, 6, UInt32.max), (2, 4, geteuid()), (4, 0, UInt32.max), (0x10, 4, UInt32.max), (0x20, 0, UInt32.max)])
}()

@Suite("CURVE keys: cogd keys and CurveKeyPair", .serialized, .timeLimit(.minutes(10)))
struct KeysTests {
    @Test func `a secret key gives ZeroMQ's public key, and Z85 keys are checked`() throws {
        // The client pair of ZeroMQ's CURVE documentation (zmq_curve(7)).
        let pair = try CurveKeyPair(secretKey: "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs")
        #expect(pair.publicKey == "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID")
        #expect(!"\(pair)".contains(pair.secretKey), "printing a pair never prints its secret")
        #expect(CurveKeyPair.isValidKey("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"))
        #expect(!CurveKeyPair.isValidKey("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf"), "39 characters")
        #expect(!CurveKeyPair.isValidKey("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7a"), "41 characters")
        #expect(!CurveKeyPair.isValidKey("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]y 7"), "a space")
        #expect(!CurveKeyPair.isValidKey("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]y\"7"), "a quote is not Z85")
        #expect(!CurveKeyPair.isValidKey("#####" + String(repeating: "0", count: 35)), "a group above 2^32-1")
        #expect(throws: CurveKeyError.self) { try CurveKeyPair(secretKey: "short") }
        let generated = try CurveKeyPair.generate()
        #expect(CurveKeyPair.isValidKey(generated.publicKey) && CurveKeyPair.isValidKey(generated.secretKey))
        #expect(try CurveKeyPair(secretKey: generated.secretKey) == generated)
    }

    @Test func `keys parse as commands`() throws {
        #expect(try Command.parse(["keys", "generate", "w1"], rigNames: ["trails"]) == .keysGenerate(name: "w1", folder: "."))
        #expect(try Command.parse(["keys", "generate", "w1", "--out=/k"], rigNames: ["trails"]) == .keysGenerate(name: "w1", folder: "/k"))
        #expect(try Command.parse(["keys", "show", "w1.pub"], rigNames: ["trails"]) == .keysShow(file: "w1.pub"))
        #expect(try Command.parse(["keys", "--help"], rigNames: ["trails"]) == .help(topic: "keys"))
        for arguments in [["keys"], ["keys", "rotate"], ["keys", "generate"], ["keys", "generate", "../x"], ["keys", "generate", "a", "b"],
            ["keys", "show"], ["keys", "show", "f", "--out", "d"], ["keys", "generate", "w1", "--force"]]
        {
            #expect(throws: Command.UsageError.self, "\(arguments)") { try Command.parse(arguments, rigNames: ["trails"]) }
        }
        let help = try runCogd(["help"])
        #expect(help.status == 0 && help.stdout.contains("\n  keys      make and show CURVE keys"), "\(help.stdout)")
    }

    @Test func `keys generate writes a 0600 secret and a public key that keys show prints, and never overwrites`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let keys = folder.path + "/keys"
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let generated = try runCogd(["keys", "generate", "w1", "--out", keys])
        #expect(generated.status == 0, "\(generated)")
        let secretFile = keys + "/w1.key"
        let publicFile = keys + "/w1.pub"
        #expect(mode(of: keys) == 0o700)
        #expect(mode(of: secretFile) == 0o600)
        let printedKey = generated.stdout.split(separator: "\n").last.map(String.init) ?? ""
        #expect(CurveKeyPair.isValidKey(printedKey), "\(generated.stdout)")
        let secretText = try String(contentsOfFile: secretFile, encoding: .utf8)
        let publicText = try String(contentsOfFile: publicFile, encoding: .utf8)
        #expect(secretText.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == 1)
        #expect(secretText.contains("\nsecret-key = ") && !secretText.contains(printedKey))
        #expect(publicText.hasSuffix("\npublic-key = \(printedKey)\n"))
        let pair = try CurveKeyPair.load(secretKeyFile: secretFile)
        #expect(pair.publicKey == printedKey)
        #expect(secretText.contains("secret-key = \(pair.secretKey)\n"))
        for file in [secretFile, publicFile] {
            let shown = try runCogd(["keys", "show", file])
            #expect(shown.status == 0 && shown.stdout == printedKey + "\n", "\(file): \(shown)")
        }
        // Run again: both files stay as they were.
        let again = try runCogd(["keys", "generate", "w1", "--out", keys])
        #expect(again.status == 1 && again.stderr.contains("\(secretFile) exists already"), "\(again)")
        #expect(try String(contentsOfFile: secretFile, encoding: .utf8) == secretText)
        #expect(try String(contentsOfFile: publicFile, encoding: .utf8) == publicText)
        // A .pub left alone is not overwritten either, and no secret is left without its public key.
        unlink(secretFile)
        let orphan = try runCogd(["keys", "generate", "w1", "--out", keys])
        #expect(orphan.status == 1 && orphan.stderr.contains("\(publicFile) exists already"), "\(orphan)")
        #expect(access(secretFile, F_OK) != 0)
        // Under a permissive umask the secret is still created 0600.
        let previous = umask(0)
        defer { umask(previous) }
        try CurveKeyPair.generate().write(name: "open", to: folder.path)
        #expect(mode(of: folder.path + "/open.key") == 0o600)
    }

    @Test func `a secret key file its group or others may read is refused, naming the file, its mode and the fix`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let files = try CurveKeyPair.generate().write(name: "leader", to: folder.path)
        for exposed: mode_t in [0o640, 0o604, 0o660, 0o644] {
            chmod(files.secretKeyFile, exposed)
            let shown = try runCogd(["keys", "show", files.secretKeyFile])
            let octal = "0" + String(exposed, radix: 8)
            #expect(shown.status == 1, "\(shown)")
            #expect(
                shown.stderr
                    == "Error: the secret key file \(files.secretKeyFile) has mode \(octal): its group or others may read or change it; "
                    + "a secret key must be readable by its owner only — run: chmod 600 \(files.secretKeyFile)\n")
            #expect(throws: CurveKeyError.self) { try CurveKeyPair.load(secretKeyFile: files.secretKeyFile) }
        }
        chmod(files.secretKeyFile, 0o400)
        #expect(try runCogd(["keys", "show", files.secretKeyFile]).status == 0, "owner read-only is fine")
        // A public key file may be read by anyone; it is not a secret key file.
        #expect(throws: CurveKeyError.self) { try CurveKeyPair.load(secretKeyFile: files.publicKeyFile) }
    }

    @Test(.enabled(if: temporaryFilesTakeACLs, "the temporary folder's file system takes no ACLs, or python3 is missing"))
    func `a secret key only its owner and this user may read through an ACL, as systemd hands out credentials, is accepted`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let pair = try CurveKeyPair.generate()
        let files = try pair.write(name: "leader", to: folder.path)
        chmod(files.secretKeyFile, 0o400)
        let owner: (Int, Int, UInt32) = (1, 4, UInt32.max)
        let group: (Int, Int, UInt32) = (4, 0, UInt32.max)
        let mask: (Int, Int, UInt32) = (0x10, 4, UInt32.max)
        let others: (Int, Int, UInt32) = (0x20, 0, UInt32.max)
        // What systemd's LoadCredential= makes on a file system with ACLs: 0400 and read for the service's user.
        #expect(setAccessACL(files.secretKeyFile, [owner, (2, 4, geteuid()), group, mask, others]))
        #expect(mode(of: files.secretKeyFile) == 0o440, "stat shows the ACL's mask as the group's bits")
        let shown = try runCogd(["keys", "show", files.secretKeyFile])
        #expect(shown.status == 0 && shown.stdout == pair.publicKey + "\n", "\(shown)")
        #expect(try CurveKeyPair.load(secretKeyFile: files.secretKeyFile) == pair)
        // Another user, or the group, that the ACL lets read: refused, as a group-readable mode is.
        for (what, entries) in [
            ("another user", [owner, (2, 4, geteuid() &+ 4242), group, mask, others]),
            ("the group", [owner, (4, 4, UInt32.max), mask, others]),
        ] {
            #expect(setAccessACL(files.secretKeyFile, entries), "\(what)")
            let refused = try runCogd(["keys", "show", files.secretKeyFile])
            #expect(refused.status == 1, "\(what): \(refused)")
            #expect(refused.stderr.contains("has mode 0440: its group or others may read or change it"), "\(what): \(refused)")
        }
    }

    @Test func `key files that are not one valid key line are refused`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        let valid = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
        let cases: [(String, String)] = [
            ("", "holds no key line"),
            ("# only a comment\n", "holds no key line"),
            ("public-key = \(valid)\npublic-key = \(valid)\n", "more than one key line"),
            ("public-key = \(valid.dropLast())\n", "not 40 characters of the Z85 alphabet"),
            ("public_key = \(valid)\n", "expected `secret-key = KEY` or `public-key = KEY`"),
            ("\(valid)\n", "expected `secret-key = KEY`"),
            (String(repeating: "#\n", count: 3_000), "a key file has at most 4096"),
        ]
        for (index, (text, expected)) in cases.enumerated() {
            let path = folder.path + "/case\(index).pub"
            #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
            let shown = try runCogd(["keys", "show", path])
            #expect(shown.status == 1 && shown.stderr.contains(expected), "case \(index): \(shown)")
        }
        let path = folder.path + "/spaced.pub"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("\n  # comment\n\tpublic-key=\(valid)  \r\n\n".utf8)))
        #expect(try CurveKeyPair.publicKey(ofFile: path) == valid)
        #expect(try runCogd(["keys", "show", folder.path + "/missing.pub"]).stderr.contains("cannot open the key file"))
    }
}
