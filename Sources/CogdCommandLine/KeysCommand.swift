import Cog
import CogWire

/// `cogd keys generate` and `cogd keys show`: CURVE key files
/// (`CurveKeyPair`, `protocol/cogwire.md` "Security").
enum KeysCommand {
    /// Writes `NAME.key` and `NAME.pub` in `folder` and prints where, and the public key.
    static func generate(name: String, folder: String) -> Int32 {
        do {
            let pair = try CurveKeyPair.generate()
            let files = try pair.write(name: name, to: folder)
            print("secret key: \(TerminalText.escaped(files.secretKeyFile)) (mode 0600; keep it there)")
            print("public key: \(TerminalText.escaped(files.publicKeyFile))")
            print(pair.publicKey)
            return 0
        } catch {
            printError("Error: \(TerminalText.escaped(error.message))")
            return 1
        }
    }

    /// Prints the public key of `file` (a public key file's, or a secret key file's derived one).
    static func show(file: String) -> Int32 {
        do {
            print(try CurveKeyPair.publicKey(ofFile: file))
            return 0
        } catch {
            printError("Error: \(TerminalText.escaped(error.message))")
            return 1
        }
    }
}
