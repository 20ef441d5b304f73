import CogCluster
import CogProtocol
import CogWire
import Foundation
import Testing

/// The peers file (`cogwire.md` §9): its lines, comments, roles, patterns,
/// and the files it refuses, each with its line and why.
@Suite("Peers file")
struct PeerTableTests {
    static let keyA = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
    static let keyB = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
    /// A key holding `#` (Z85 has it; no key starts with one).
    static let hashKey = "0#00000000000000000000000000000000000001"

    @Test func `lines give a key its role, its names and a client's ops; comments and blank lines are skipped`() throws {
        #expect(CurveKeyPair.isValidKey(PeerTableTests.hashKey))
        #expect(!CurveKeyPair.isValidKey("#" + PeerTableTests.hashKey.dropFirst()), "a group's first digit is at most `%`")
        let table = try PeerTable(
            parsing: """
                # key                                      role    name
                \(PeerTableTests.keyA)   worker  w1     # the first worker

                \(PeerTableTests.keyB)\tclient\tops-*\tledger.* trails.openScreen
                \(PeerTableTests.hashKey) observer dash
                """)
        #expect(table.count == 3)
        let worker = try #require(table[PeerTableTests.keyA])
        #expect(worker.role == .worker)
        #expect(worker.line == 2)
        #expect(worker.mayUse(name: "w1") && !worker.mayUse(name: "w10") && !worker.mayUse(name: "w"))
        #expect(worker.mayRun(op: "anything.at.all"))
        let client = try #require(table[PeerTableTests.keyB])
        #expect(client.role == .client)
        #expect(client.mayUse(name: "ops-console") && client.mayUse(name: "ops-") && !client.mayUse(name: "ops"))
        #expect(client.mayRun(op: "ledger.open") && client.mayRun(op: "trails.openScreen"))
        #expect(!client.mayRun(op: "trails.openScreens") && !client.mayRun(op: "ledgers.open"))
        #expect(!client.mayReadTurns)
        let observer = try #require(table[PeerTableTests.hashKey])
        #expect(observer.role == .observer && observer.mayReadTurns)
        #expect(table["0000000000000000000000000000000000000000"] == nil)
    }

    @Test(arguments: [
        ("w1 worker w1", 1, "'w1' is not a CURVE public key (40 characters of the Z85 alphabet; `cogd keys show FILE` prints one)"),
        ("\(keyA) worker", 1, "a peer line is PUBLIC-KEY ROLE NAME [OP-PATTERN…]; this one has 2 fields"),
        ("\(keyA) admin w1", 1, "the role is worker, client, observer or standby, not 'admin'"),
        ("\(keyA) standby n*", 1, "a standby line names its node (its --name): 1 to 64 letters, digits, '_', '.' or '-', not 'n*'"),
        ("\(keyA) standby n1 ledger.*", 1, "only a client line lists op patterns (a standby runs none)"),
        ("\(keyA) standby n1\n\(keyB) standby n1", 2, "node `n1` has a standby key on line 1 already: one key per node"),
        ("\(keyA) client ops", 1, "a client line lists the ops it may run after its name (for example `ledger.*`)"),
        ("\(keyA) worker w1 ledger.*", 1, "only a client line lists op patterns (a worker runs any op in its own names)"),
        ("\(keyA) observer d ledger.*", 1, "only a client line lists op patterns (an observer runs none)"),
        ("\(keyA) worker w*1", 1, "'w*1': a name is a name, or a prefix ending in `*` (a `*` goes only at the end)"),
        ("\(keyA) worker w1\n\(keyA) observer d", 2, "this key is listed already, on line 1: one line per key"),
        ("\(keyA) worker w*\n\(keyB) client w1 x", 2, "name `w1` meets `w*` of line 1: a worker name belongs to one key, so two keys' names may not overlap"),
        ("\(keyA) worker ab*\n\(keyB) worker a*", 2, "name `a*` meets `ab*` of line 1: a worker name belongs to one key, so two keys' names may not overlap"),
        ("\(keyA) worker w1\u{7}", 1, "a control character (U+7) is not allowed"),
        ("\(keyA) worker w1\u{9B}", 1, "a control character (U+9B) is not allowed"),
    ])
    func `a file that is not valid is refused, naming the line and why`(text: String, line: Int, message: String) {
        #expect(throws: PeerTableError(path: "peers", line: line, message: message)) { try PeerTable(parsing: text, path: "peers") }
    }

    @Test func `an observer's name may repeat a worker's: observers act in no name`() throws {
        let table = try PeerTable(parsing: "\(PeerTableTests.keyA) worker w*\n\(PeerTableTests.keyB) observer w1\n")
        #expect(table.count == 2)
    }

    /// `protocol/vectors/security/`: what each peers file holds, or the line it is refused at (`expected.json`).
    @Test func `the peers file vectors parse as expected_json says`() throws {
        let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("protocol/vectors")
        let expected = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: vectors.appendingPathComponent("expected.json"))) as? [String: Any])
        let files = try FileManager.default.contentsOfDirectory(atPath: vectors.appendingPathComponent("security").path).sorted()
        #expect(files.count == 11)
        for file in files {
            let path = vectors.appendingPathComponent("security/\(file)").path
            let want = expected["security/\(file)"]
            do {
                let table = try PeerTable.load(path: path)
                let got = table.peers.map {
                    ["line": $0.line, "key": $0.publicKey, "role": $0.role.rawValue, "name": $0.name.text, "ops": $0.ops.map(\.text)] as [String: Any]
                }
                #expect(NSArray(array: got).isEqual(want as? [Any]), "\(file): \(got)")
            } catch {
                let refused = (want as? [String: Any])?["refused"] as? [String: Any]
                #expect(refused?["line"] as? Int == error.line, "\(file): \(error)")
            }
        }
    }

    @Test func `a missing file says so`() {
        #expect(throws: PeerTableError(path: "/nonexistent/peers", line: nil, message: "cannot open it: No such file or directory")) {
            try PeerTable.load(path: "/nonexistent/peers")
        }
    }
}
