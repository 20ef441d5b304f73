import Foundation
import Testing

/// An overdraft through `cogd call` against a real leader (loopback): the
/// ledger's `ledger.transfer` refuses `insufficient-funds` naming the
/// balance (issue 28 item 1).
@Suite("cogd call: a refused op", .serialized, .timeLimit(.minutes(10)))
struct RefusalCallTests {
    @Test func `an overdraft exits 3 printing the code and balance, a retry says the same, state, metrics and status show it`() throws {
        let folder = TemporaryFolder()
        defer { folder.cleanUp() }
        let ports = ClusterPorts()
        let metrics = freePort()
        let leader = try ports.startLeader(data: folder.path, options: ["--metrics", "127.0.0.1:\(metrics)"])
        defer { leader.stop() }
        #expect(try ports.call("ledger.open", #"{"account": "alice", "balance": 30}"#).hasPrefix("applied revision 1"))
        #expect(try ports.call("ledger.open", #"{"account": "bob", "balance": 0}"#).hasPrefix("applied revision 2"))

        let overdraft = #"{"from": "alice", "to": "bob", "amount": 50}"#
        let first = try runCogd(["call", "ledger.transfer", overdraft, "--leader", ports.requests, "--request-id", "teller#1"])
        #expect(first.status == 3 && first.stdout.isEmpty, "\(first)")
        #expect(first.stderr == "refused insufficient-funds: alice has 30, the transfer needs 50 (request teller#1)\n", "\(first.stderr)")
        let retry = try runCogd(["call", "ledger.transfer", overdraft, "--leader", ports.requests, "--request-id", "teller#1"])
        #expect(retry.status == 3 && retry.stdout.isEmpty, "\(retry)")
        #expect(
            retry.stderr == "answered from an earlier request: refused insufficient-funds: alice has 30, the transfer needs 50 (request teller#1)\n",
            "\(retry.stderr)")
        let json = try runCogd(["call", "ledger.transfer", overdraft, "--leader", ports.requests, "--request-id", "teller#1", "--json"])
        #expect(json.status == 3, "\(json)")
        #expect(
            json.stdout
                == #"{"code":"insufficient-funds","earlier":true,"outcome":"refused","reason":"alice has 30, the transfer needs 50","request":"teller#1"}"#
                + "\n", "\(json.stdout)")
        let unknown = try runCogd(["call", "ledger.transfer", #"{"from": "alice", "to": "zed\u001b[2J", "amount": 5}"#, "--leader", ports.requests, "--json"])
        #expect(unknown.status == 3 && unknown.stdout.contains(#""code":"unknown-account","earlier":false,"outcome":"refused""#), "\(unknown)")
        let escaped = try runCogd(["call", "ledger.transfer", #"{"from": "alice", "to": "zed\u001b[2J", "amount": 5}"#, "--leader", ports.requests])
        #expect(escaped.stderr.hasPrefix(#"refused unknown-account: no open account named zed\u{1B}[2J (request "#), "\(escaped.stderr)")

        // Nothing kept: the balances as before, and the next change is revision 3.
        let balances = try runCogd(["get", "ledger.balance", "--leader", ports.requests])
        #expect(balances.status == 0 && balances.stdout == "ledger.balance[\"alice\"] = 30\n", "bob still holds nothing: \(balances)")
        #expect(try ports.call("ledger.transfer", #"{"from": "alice", "to": "bob", "amount": 10}"#).hasPrefix("applied revision 3"))

        let (samples, _) = try MetricsEndpointTests.scrape(metrics)
        #expect(samples[#"cogd_leader_refusals_total{code="insufficient-funds",op="ledger.transfer"}"#] == 1, "\(samples)")
        #expect(samples[#"cogd_leader_refusals_total{code="unknown-account",op="ledger.transfer"}"#] == 2)
        #expect(samples[#"cogd_leader_requests_total{outcome="refused"}"#] == 3)
        #expect(samples[#"cogd_leader_requests_total{outcome="deduplicated"}"#] == 2)
        #expect(samples[#"cogd_leader_requests_total{outcome="unchanged"}"#] == 0)

        let status = try runCogd(["status", "--leader", ports.requests])
        #expect(status.stdout.contains("refusals  ledger.transfer insufficient-funds 1, ledger.transfer unknown-account 2\n"), "\(status.stdout)")
        #expect(status.stdout.contains("errors    none\n"), "a refusal is an answer, not an error: \(status.stdout)")
        let statusJSON = try runCogd(["status", "--leader", ports.requests, "--json"])
        #expect(statusJSON.stdout.contains(#""refusals": [{"op": "ledger.transfer", "code": "insufficient-funds", "count": 1}, "#), "\(statusJSON.stdout)")
    }
}
