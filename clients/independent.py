#!/usr/bin/env python3
"""An independent cogd client, written from protocol/ and README.md only.

It plays a worker against a leader it starts itself: hello -> welcome ->
subscribe -> snapshot in parts -> the turn stream in revision order, with
heartbeats, a catch-up on a gap it makes by dropping a publication, scope
registrations over `ledger.accounts` and `ledger.balance` with ops stamped
with the instances it is given, and requests with retries. It checks every
message it receives against cogwire.md, its replica against the leader's
state table (read with Python's lmdb), the data folder against turnlog.md,
and every vector in protocol/vectors/ against vectors/README.md.

Usage: python3 clients/independent.py PATH/TO/cogd
Prints `ok NAME` / `FAIL NAME: …` per check and `N passed, N failed` last.
"""
import base64
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import cbor2
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cogwire import (answered_earlier, refusal, rejection_code, request_digest, Checks, Deadline, Leader, Peer, Tag, CBORError, decode, encode, item_spans,  # noqa: E402
                     entry_hash, message, message_problem, parse, read_folder, record_problem, state_digest, state_key)

# Checks the leader fails today although protocol/ says otherwise:
# {check name: "what the document says vs what the leader does"}.
KNOWN_GAPS = {
}

ROOT = pathlib.Path(__file__).resolve().parent.parent
VECTORS = ROOT / "protocol" / "vectors"
TOTAL = Deadline(55)


def plain(value):
    """A decoded value in expected.json's terms (vectors/README.md)."""
    if isinstance(value, Tag):
        inner = value.value
        if value.tag == 37 and isinstance(inner, bytes):
            hexed = inner.hex().upper()
            inner = f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"
        return {"tag": value.tag, "value": plain(inner)}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def check_vectors(checks):
    expected = json.loads((VECTORS / "expected.json").read_text())
    listed = {"uint-0", "uint-24", "uint64-max", "int-minus-500", "int64-min", "float-half-1.5",
              "float-single-100000", "float-double-0.1", "true", "null-optional", "text-unicode", "bytes-data",
              "array-mixed-optionals", "map-sorted-keys", "struct-absent-optional", "struct-present-optional",
              "enum-no-payload", "enum-payload", "date-tag-1", "uuid-tag-37", "turn-record-system",
              "turn-record-request", "turn-record-nil-value", "turn-record-retirement", "state-digest",
              "instance-opening", "rejection-refused", "shipped-commit"}
    hexes = {"uint-0": "00", "uint-24": "1818", "uint64-max": "1bffffffffffffffff", "int-minus-500": "3901f3",
             "int64-min": "3b7fffffffffffffff", "float-half-1.5": "f93e00", "float-single-100000": "fa47c35000",
             "float-double-0.1": "fb3fb999999999999a", "true": "f5", "null-optional": "f6", "bytes-data": "44000102ff",
             "array-mixed-optionals": "8301f603", "date-tag-1": "c1fb41dad27480200000",
             "uuid-tag-37": "d825502f1c7d4a9b3e4c618a0f5d2e6b7c8d9e"}
    files = sorted((VECTORS / "turnlog").glob("*.cbor"))
    checks.check("vectors: turnlog/ holds exactly the vectors vectors/README.md lists",
                 {path.stem for path in files} == listed, f"{sorted({p.stem for p in files} ^ listed)}")
    for path in files:
        data, name = path.read_bytes(), path.stem
        try:
            value = decode(data)
        except CBORError as error:
            checks.check(f"vector {name} decodes strictly", False, str(error))
            continue
        problems = []
        if encode(value) != data:
            problems.append("re-encoding differs")
        if name in expected and plain(value) != expected[name]:
            problems.append(f"decoded {plain(value)!r}")
        if name in hexes and data.hex() != hexes[name]:
            problems.append(f"bytes {data.hex()}")
        if name == "text-unicode" and (value != "Grüße, 世界 🥾" or len(value.encode()) != 20):
            problems.append("text")
        if name == "map-sorted-keys" and list(value) != ["a", "b", "aa"]:
            problems.append(f"key order {list(value)}")
        if name.startswith("turn-record-"):
            problem = record_problem(data)
            if problem:
                problems.append(problem)
        try:
            cbor2.loads(data)
        except Exception as error:  # noqa: BLE001
            problems.append(f"cbor2: {error}")
        checks.check(f"vector {name} decodes as documented", not problems, "; ".join(problems))

    record = decode((VECTORS / "turnlog" / "turn-record-request.cbor").read_bytes())
    checks.check("vector turn-record-request: origin has all four keys (its digest that of trails.accept {receipt: 7}), "
                 "the write is a release",
                 set(record["origin"]) == {"worker", "request", "instance", "digest"}
                 and record["origin"]["digest"] == request_digest("trails.accept", encode({"receipt": 7}))
                 and record["writes"] == [{"key": 7, "name": "trails.filter", "released": True}], repr(record))
    record = decode((VECTORS / "turnlog" / "turn-record-retirement.cbor").read_bytes())
    checks.check("vector turn-record-retirement: a system record, no writes, one retire event",
                 record["name"] == "cogd.workerGone" and record["origin"] == {} and record["writes"] == []
                 and record["scopes"] == [{"kind": "retire", "instance": 3 << 32 | 5, "scope": "LedgerGreeter.greeter",
                                           "identity": encode("alice"), "worker": "w1", "registration": 1}], repr(record))
    record = decode((VECTORS / "turnlog" / "turn-record-nil-value.cbor").read_bytes())
    checks.check("vector turn-record-nil-value: a nil value, not a release",
                 record["writes"] == [{"name": "trails.loaded", "value": None}] and record["rev"] == 43, repr(record))

    # turnlog.md §3a: the state digest, computed here from its definition.
    vector = decode((VECTORS / "turnlog" / "state-digest.cbor").read_bytes())
    state = {(e["name"], e.get("key", b"")): e["value"] for e in vector["entries"]}
    hashes = [entry_hash(e["name"], e.get("key"), e["value"]).to_bytes(16, "big") for e in vector["entries"]]
    checks.check("vector state-digest: each entry's hash and the state's digest are as turnlog.md §3a computes them",
                 hashes == [e["hash"] for e in vector["entries"]] and state_digest(state) == vector["state"]
                 and vector["state"].hex() == "b0ab88ee559b94b568e03e92f2a95aef", repr(vector))
    story = {1: {}}
    after = dict(state)
    for name in ["turn-record-request", "turn-record-nil-value", "turn-record-retirement"]:
        record = decode((VECTORS / "turnlog" / f"{name}.cbor").read_bytes())
        for write in record["writes"]:
            key = (write["name"], encode(write["key"]) if "key" in write else b"")
            after.pop(key, None) if write.get("released") else after.__setitem__(key, encode(write["value"]))
        story[record["rev"]] = (record["state"], state_digest(after))
    system = decode((VECTORS / "turnlog" / "turn-record-system.cbor").read_bytes())
    first = {(w["name"], encode(w["key"]) if "key" in w else b""): encode(w["value"]) for w in system["writes"]}
    checks.check("vectors turn-record-*: each record's state is the digest of the state after it (1 from the empty "
                 "state, 42-44 from the state-digest vector's)",
                 system["state"] == state_digest(first) and all(given == computed for given, computed in
                                                                 (story[r] for r in (42, 43, 44))), repr(story))

    wire = {path.stem: path.read_bytes() for path in sorted((VECTORS / "cogwire").glob("*.cbor"))}
    documented = {"hello", "hello-rig", "hello-rig-shapes", "welcome", "heartbeat", "snapshot-request", "snapshot-request-parts", "snapshot-part",
                  "catch-up-request", "op", "reply-applied", "reply-unchanged", "reply-rejected", "error-version",
                  "turns", "error-hello-first", "reply-request-mismatch", "scope-register", "scope-registered",
                  "status-request", "status", "error-not-your-name", "reply-role-forbids", "hello-group", "welcome-group",
                  "error-compacted", "status-uptime", "hello-tool", "status-tool", "goodbye",
                  "error-goodbye-not-holder", "reply-earlier", "reply-refused", "hello-settings", "status-settings",
                  "standby-hello", "standby-hello-empty", "ship-welcome", "ship-resync", "ship", "ship-copy", "standby-copied", "ship-crashed",
                  "ship-ack", "status-replication", "not-leader", "not-leader-none"}
    checks.check("vectors: cogwire/ holds exactly the messages vectors/README.md lists", set(wire) == documented,
                 f"{sorted(set(wire) ^ documented)}")

    def wire_check(name, expected_type, test):
        if name not in wire:
            return
        try:
            value = decode(wire[name])
        except CBORError as error:
            checks.check(f"vector cogwire/{name} decodes strictly", False, str(error))
            return
        problem = message_problem(value, expected_type)
        if not problem and encode(value) != wire[name]:
            problem = "re-encoding differs"
        if not problem:
            try:
                problem = test(value.get("body"))
            except Exception as error:  # noqa: BLE001
                problem = f"{type(error).__name__}: {error}"
        checks.check(f"vector cogwire/{name} is the documented message", not problem, str(problem))

    def expect(condition, what):
        return None if condition else what

    wire_check("hello", "hello", lambda b: expect(b == {"worker": "w1", "lastRevision": 0}, repr(b)))
    wire_check("hello-rig", "hello", lambda b: expect(b == {
        "worker": "w1", "lastRevision": 42,
        "rig": {"name": "ledger", "schemaVersion": 1, "durableSources": ["ledger.accounts", "ledger.balance"],
                "ops": ["ledger.open", "ledger.transfer"]}}, repr(b)))
    wire_check("hello-rig-shapes", "hello", lambda b: expect(
        b["rig"]["name"] == "ledger" and b["rig"]["ops"] == ["ledger.open", "ledger.transfer"]
        and b["rig"]["shapes"]["ops"]["ledger.transfer"] == {"object": [
            {"name": "from", "shape": "string"}, {"name": "to", "shape": "string"}, {"name": "amount", "shape": "integer"},
            {"name": "memo", "shape": "string", "optional": True}]}
        and b["rig"]["shapes"]["durableSources"] == {
            "ledger.accounts": {"value": {"array": "string"}}, "ledger.balance": {"value": "integer", "key": "string"}}, repr(b)))
    wire_check("welcome", "welcome", lambda b: expect(
        b == {"epoch": 3, "lastRevision": 42, "turns": "tcp://127.0.0.1:5702", "lastSequence": 18}, repr(b)))
    after_42 = bytes.fromhex("b0bb0fab5ad9d06be330f882b748022c")
    wire_check("heartbeat", "heartbeat", lambda b: expect(
        b == {"worker": "w1", "revision": 42, "stateDigest": after_42}, repr(b)))
    wire_check("snapshot-request", "snapshot-request", lambda b: expect(
        b is None and "body" not in decode(wire["snapshot-request"]), repr(b)))
    wire_check("snapshot-request-parts", "snapshot-request", lambda b: expect(b == {"parts": True}, repr(b)))
    wire_check("snapshot-part", "snapshot", lambda b: expect(
        b == {"epoch": 3, "revision": 42, "part": 1, "more": True, "stateDigest": after_42,
              "entries": [{"name": "ledger.balance", "key": encode("a"), "value": encode(6)}]}, repr(b)))
    wire_check("catch-up-request", "catch-up-request", lambda b: expect(b == {"from": 43}, repr(b)))
    wire_check("op", "op", lambda b: expect(
        b["request"] == {"worker": "w1", "seq": 19} and b["op"] == "ledger.transfer"
        and decode(b["argument"]) == {"amount": 4, "from": "a", "to": "b"} and b["instance"] == 7
        and b["name"] == "Bank.teller.transfer" and set(b) == {"request", "op", "argument", "instance", "name"},
        repr(b)))
    wire_check("reply-applied", "reply", lambda b: expect(
        b["request"] == {"worker": "w1", "seq": 19} and list(b["outcome"]) == ["applied"], repr(b)))
    wire_check("reply-unchanged", "reply", lambda b: expect(
        b == {"request": {"worker": "w1", "seq": 19}, "outcome": {"unchanged": {}}}, repr(b)))
    wire_check("reply-rejected", "reply", lambda b: expect(
        b["request"] == {"worker": "w1", "seq": 19}
        and b["outcome"] == {"rejected": {"code": "unknown-op", "detail": "no op named `x` is registered",
                                          "reason": "unknown-op: no op named `x` is registered"}}, repr(b)))
    wire_check("reply-earlier", "reply", lambda b: expect(
        b == {"request": {"worker": "w1", "seq": 19}, "outcome": {"applied": {"revision": 6}}, "earlier": True}, repr(b)))
    wire_check("reply-refused", "reply", lambda b: expect(
        b == {"request": {"worker": "w1", "seq": 19},
              "outcome": {"rejected": {"code": "refused",
                                       "detail": "insufficient-funds: alice has 30, the transfer needs 50",
                                       "reason": "refused: insufficient-funds: alice has 30, the transfer needs 50",
                                       "refusal": {"code": "insufficient-funds",
                                                   "reason": "alice has 30, the transfer needs 50"}}}}, repr(b)))
    wire_check("error-version", "error", lambda b: expect(b["code"] == "version" and "request" not in b, repr(b)))
    wire_check("error-hello-first", "error", lambda b: expect(b["code"] == "hello-first", repr(b)))
    wire_check("hello-group", "hello", lambda b: expect(b == {"worker": "w1", "lastRevision": 0, "group": "greeters"}, repr(b)))
    wire_check("welcome-group", "welcome", lambda b: expect(
        b == {"epoch": 3, "lastRevision": 42, "turns": "tcp://127.0.0.1:5702", "lastSequence": 0, "group": "greeters"}, repr(b)))
    wire_check("error-compacted", "error", lambda b: expect(
        b["code"] == "compacted" and "request" not in b and "keeps revisions 40 to 42" in b["message"], repr(b)))
    wire_check("error-not-your-name", "error", lambda b: expect(
        b["code"] == "not-your-name" and "request" not in b, repr(b)))
    wire_check("reply-role-forbids", "reply", lambda b: expect(
        b["request"] == {"worker": "dashboard", "seq": 1}
        and b["outcome"]["rejected"]["code"] == "role-forbids"
        and b["outcome"]["rejected"]["reason"].startswith("role-forbids: "), repr(b)))
    wire_check("reply-request-mismatch", "reply", lambda b: expect(
        b["outcome"]["rejected"]["code"] == "request-mismatch"
        and b["outcome"]["rejected"]["detail"].startswith("request w1#19 "), repr(b)))
    wire_check("scope-register", "scope-register", lambda b: expect(
        b == {"worker": "w1", "registration": 2, "path": "Bank.desk.peer", "source": "ledger.accounts", "form": "each",
              "parent": 1 << 32 | 3}, repr(b)))
    wire_check("scope-registered", "scope-registered", lambda b: expect(
        b == {"worker": "w1", "registration": 2, "revision": 42,
              "instances": [{"identity": encode("a"), "instance": 1 << 32 | 4}]}, repr(b)))
    wire_check("status-request", "status-request", lambda b: expect(b is None, repr(b)))
    wire_check("status", "status", lambda b: expect(
        b["epoch"] == 3 and b["revision"] == 42 and b["errorCounts"] == {"hello-first": 1}
        and b["openScopeInstances"] == [1 << 32 | 4] and b["workers"][0]["name"] == "w1"
        and b["workers"][0]["digest"] == "agrees" and "roots" not in b["workers"][0]
        and b["workers"][1]["group"] == "bank" and b["workers"][1]["instances"] == 2
        and b["workers"][1]["roots"] == ["Bank"], repr(b)))
    wire_check("hello-tool", "hello", lambda b: expect(
        b == {"worker": "get-0c4f3c9e-5b1a-4d2e-9f6a-2b7d8e1c3a50", "lastRevision": 0, "tool": True}, repr(b)))
    wire_check("goodbye", "goodbye", lambda b: expect(b == {"worker": "get-0c4f3c9e-5b1a-4d2e-9f6a-2b7d8e1c3a50"}, repr(b)))
    wire_check("error-goodbye-not-holder", "error", lambda b: expect(
        b["code"] == "name-in-use" and "request" not in b and "only the connection that said hello" in b["message"], repr(b)))
    wire_check("status-tool", "status", lambda b: expect(
        [w["name"] for w in b["workers"]] == ["tail-7d2b", "w1"] and b["workers"][0]["tool"] is True
        and "tool" not in b["workers"][1], repr(b)))
    wire_check("hello-settings", "hello", lambda b: expect(
        b == {"worker": "w1", "lastRevision": 0, "group": "boxOffice", "settings": ["hold-seconds", "mail.from"]}, repr(b)))
    wire_check("status-settings", "status", lambda b: expect(
        [w["name"] for w in b["workers"]] == ["w1", "w2"] and b["workers"][0]["settings"] == ["hold-seconds", "mail.from"]
        and "settings" not in b["workers"][1], repr(b)))
    wire_check("status-uptime", "status", lambda b: expect(
        b["version"] == "0.1.0" and b["uptimeSeconds"] == 3723.5 and b["heartbeatTimeoutSeconds"] == 5.0
        and [w["name"] for w in b["workers"]] == ["w1", "w2"] and b["workers"][1]["secondsSinceHeard"] == 3.25, repr(b)))

    # ha.md §8–§9: shipping to a standby.
    log_id = bytes(range(0x10, 0x20))
    wire_check("standby-hello", "standby-hello", lambda b: expect(
        b == {"node": "n2", "epoch": 3, "revision": 42, "log": log_id, "stateDigest": after_42,
              "commit": {"epoch": 3, "number": 17}}, repr(b)))
    wire_check("standby-hello-empty", "standby-hello", lambda b: expect(b == {"node": "n2", "epoch": 0, "revision": 0}, repr(b)))
    wire_check("ship-welcome", "ship-welcome", lambda b: expect(b == {"epoch": 3, "sequence": 7}, repr(b)))
    wire_check("ship-resync", "ship-resync", lambda b: expect(b == {"epoch": 3, "revision": 42}, repr(b)))
    wire_check("ship-ack", "ship-ack", lambda b: expect(b == {"node": "n2", "sequence": 8}, repr(b)))
    # ha.md §10: a standby's answer to workers and tools.
    wire_check("not-leader", "not-leader", lambda b: expect(b == {"leader": "tcp://10.0.0.1:5701", "epoch": 3}, repr(b)))
    wire_check("not-leader-none", "not-leader", lambda b: expect(b == {"leader": "", "epoch": 0}, repr(b)))
    wire_check("standby-copied", "standby-copied", lambda b: expect(b == {"node": "n2", "sequence": 7}, repr(b)))
    wire_check("ship-crashed", "ship-crashed", lambda b: expect(
        b == {"epoch": 3, "worker": "w1", "seq": 19, "op": "ledger.transfer", "digest": bytes(range(1, 9)), "signal": 4}, repr(b)))
    wire_check("ship-copy", "ship-copy", lambda b: expect(
        b == {"epoch": 3, "sequence": 7, "offset": 1 << 20, "data": bytes.fromhex("deadbeef"), "more": False}, repr(b)))

    def ship_vector(body):
        # The embedded commit is a retention pass (§8.1): `prune` and `retain`, nothing else shipped.
        commit = decode(body["commit"])
        return expect(body["epoch"] == 3 and body["sequence"] == 8 and commit["epoch"] == 3 and commit["log"] == log_id
                      and commit["first"] == 43 and commit["prune"] == 1024 and commit["retain"] == {"kind": "turns", "count": 100000}
                      and commit["records"] == [] and commit["replies"] == [] and "index" not in commit
                      and encode(commit) == body["commit"], repr(commit))
    wire_check("ship", "ship", ship_vector)
    wire_check("status-replication", "status", lambda b: expect(
        b["replication"] == {"state": "sync", "named": ["n2"], "shipped": 42, "released": 41, "standbys": [{"node": "n2", "lag": 1}]},
        repr(b)))
    commit = decode((VECTORS / "turnlog" / "shipped-commit.cbor").read_bytes())
    checks.check("vector shipped-commit: eleven keys, its record checksummed (turnlog.md §3) and at revision 43, the index made "
                 "whole, commit 17 of its epoch",
                 set(commit) == {"epoch", "log", "first", "time", "records", "replies", "index", "number", "retain", "openings",
                                 "rejections"}
                 and commit["number"] == 17
                 and len(commit["records"]) == 1 and not record_problem(commit["records"][0])
                 and decode(commit["records"][0])["rev"] == 43 and commit["index"] == 0
                 and commit["replies"] == [{"worker": "w1", "seq": 20, "reply": bytes.fromhex("cd94c1439e44b476a0")}], repr(commit))

    def turns_vector(body):
        if body["epoch"] != 3 or len(body["records"]) != 1:
            return repr(body)
        frame = wire["turns"]
        # The record's own bytes inside the frame: copied, never re-encoded (turnlog.md §3).
        reader_body_start = frame.index(b"\x67records") + 8
        (start, end), = item_spans(frame, reader_body_start)
        problem = record_problem(frame[start:end])
        rec = body["records"][0]
        written = {(w["name"], encode(w["key"])): encode(w["value"]) for w in rec["writes"]}
        return problem or expect(rec["rev"] == 43 and rec["epoch"] == 3 and rec["state"] == state_digest(written), repr(rec))

    wire_check("turns", "turns", turns_vector)


class Worker:
    """The worker this client plays (cogwire.md §5-6)."""

    def __init__(self, checks, context, leader, name):
        self.checks, self.context, self.leader, self.name = checks, context, leader, name
        self.dealer = Peer(context, leader.requests, identity=f"{name}/{os.urandom(6).hex()}".encode())
        self.sub = None
        self.replica = {}          # (name, encoded key) -> encoded value
        self.applied = 0
        self.epoch = None
        self.held = {}             # revision -> (record value, raw bytes)
        self.records = {}          # revision -> raw bytes, as received
        self.seq = 0
        self.leader_revision = 0
        self.inbox = []            # messages on the DEALER not consumed by the pump
        self.problems = []         # messages that did not match the document
        self.drop_publications = 0
        self.catch_ups = 0
        self.last_heartbeat = 0.0
        self.catch_up_pending = False
        self.events = []           # scope events seen in records, in order
        self.digest = 0            # the replica's state digest, as a number (turnlog.md §3a)
        self.digest_mismatches = []

    # -- messages
    def note_problem(self, what):
        self.problems.append(what)

    def receive_dealer(self, timeout):
        frames = self.dealer.receive(timeout)
        if frames is None:
            return None
        value, problem, raw = parse(frames)
        if problem:
            self.note_problem(f"requests socket: {problem}")
            return None
        problem = message_problem(value)
        if problem:
            self.note_problem(f"{value.get('type')}: {problem}")
        return value, raw

    def handle(self, value, raw):
        kind = value["type"]
        body = value.get("body", {})
        if kind == "welcome":
            self.leader_revision = max(self.leader_revision, body["lastRevision"])
            if body["epoch"] != self.epoch:
                self.note_problem(f"welcome of epoch {body['epoch']} while synced at {self.epoch}")
            return False
        if kind == "turns" and self.catch_up_pending:
            self.catch_up_pending = False
            self.take_turns(value, raw, from_catch_up=True)
            return True
        return False

    def take_turns(self, value, raw, from_catch_up=False):
        body = value["body"]
        if body["epoch"] != self.epoch:
            self.note_problem(f"turns of epoch {body['epoch']}, synced at {self.epoch}")
        start = raw.index(b"\x67records") + 8
        for (begin, end), record in zip(item_spans(raw, start), body["records"]):
            record_raw = raw[begin:end]
            problem = record_problem(record_raw)
            if problem:
                self.note_problem(f"record in turns: {problem}")
                continue
            self.held[record["rev"]] = (record, record_raw)
        if from_catch_up:
            self.catch_ups += 1
        self.apply_held()

    def apply_held(self):
        for revision in sorted(self.held):
            if revision <= self.applied:
                del self.held[revision]
        while self.applied + 1 in self.held:
            record, raw = self.held.pop(self.applied + 1)
            self.apply(record, raw)
        if self.held and not self.catch_up_pending:
            self.request_catch_up()

    def request_catch_up(self):
        self.catch_up_pending = True
        self.dealer.send(message("catch-up-request", {"from": self.applied + 1}))

    def apply(self, record, raw):
        if record["epoch"] > self.epoch:
            self.note_problem(f"record {record['rev']} of epoch {record['epoch']} above {self.epoch}")
        for write in record["writes"]:
            key = (write["name"], encode(write["key"]) if "key" in write else b"")
            if key in self.replica:
                self.digest -= entry_hash(key[0], key[1], self.replica[key])
            if write.get("released"):
                self.replica.pop(key, None)
            else:
                self.replica[key] = encode(write["value"])
                self.digest += entry_hash(key[0], key[1], self.replica[key])
        self.digest %= 1 << 128
        if record["state"] != self.digest.to_bytes(16, "big"):
            self.digest_mismatches.append(record["rev"])
        self.events.extend((record["rev"], record["name"], event) for event in record["scopes"])
        self.records[record["rev"]] = raw
        self.applied = record["rev"]

    # -- the loop
    def pump(self, until, seconds=10.0):
        """Serves both sockets until `until()` is true (or the deadline)."""
        deadline = Deadline(min(seconds, TOTAL.left() + 5))
        poller = zmq.Poller()
        poller.register(self.dealer.socket, zmq.POLLIN)
        if self.sub is not None:
            poller.register(self.sub, zmq.POLLIN)
        while not until():
            if deadline.passed():
                return False
            now = time.monotonic()
            if self.epoch is not None and now - self.last_heartbeat >= 1.0:
                self.last_heartbeat = now
                self.dealer.send(message("heartbeat", self.heartbeat()))
            if self.leader_revision > self.applied and not self.catch_up_pending and self.epoch is not None \
                    and self.synced:
                self.request_catch_up()
            ready = dict(poller.poll(int(min(100, deadline.left() * 1000))))
            if self.sub is not None and ready.get(self.sub):
                frames = self.sub.recv_multipart()
                value, problem, raw = parse(frames)
                if problem or message_problem(value, "turns"):
                    self.note_problem(f"turns stream: {problem or message_problem(value, 'turns')}")
                elif self.drop_publications > 0 and self.synced:
                    self.drop_publications -= 1
                else:
                    self.take_turns(value, raw)
            if ready.get(self.dealer.socket):
                got = self.receive_dealer(0)
                if got is not None and not self.handle(*got):
                    self.inbox.append(got)
        return True

    synced = False

    def heartbeat(self):
        return {"worker": self.name, "revision": self.applied, "stateDigest": self.digest.to_bytes(16, "big")}

    def take(self, predicate, seconds=10.0):
        """The first DEALER message matching `predicate`, pumping meanwhile."""
        found = []

        def look():
            for index, (value, raw) in enumerate(self.inbox):
                if predicate(value):
                    found.append(self.inbox.pop(index))
                    return True
            return False
        self.pump(look, seconds)
        return found[0] if found else (None, None)

    def reply_for(self, seq, seconds=10.0):
        return self.take(lambda v: v["type"] == "reply" and v["body"]["request"] == {"worker": self.name, "seq": seq},
                         seconds)

    def op(self, op, argument, instance=None, name=None, seq=None):
        if seq is None:
            self.seq += 1
            seq = self.seq
        body = {"request": {"worker": self.name, "seq": seq}, "op": op, "argument": encode(argument)}
        if instance is not None:
            body["instance"] = instance
        if name is not None:
            body["name"] = name
        self.dealer.send(message("op", body))
        return seq

    def close(self):
        self.dealer.close()
        if self.sub is not None:
            self.sub.close(0)


def tool_ops(context, leader, ops, worker="indep-tool"):
    """Sends ops pipelined from a tool and returns {seq: outcome}."""
    peer = Peer(context, leader.requests)
    name = f"{worker}-{os.urandom(4).hex()}"
    try:
        for seq, (op, argument) in enumerate(ops, start=1):
            peer.send(message("op", {"request": {"worker": name, "seq": seq}, "op": op, "argument": encode(argument)}))
        outcomes = {}
        deadline = Deadline(20)
        while len(outcomes) < len(ops) and not deadline.passed():
            value, problem, _ = parse(peer.receive(deadline.left()))
            if value is not None and not message_problem(value, "reply"):
                outcomes[value["body"]["request"]["seq"]] = value["body"]["outcome"]
        return outcomes
    finally:
        peer.close()


def status(context, leader):
    peer = Peer(context, leader.requests)
    try:
        value, problem, _ = parse(peer.ask(message("status-request")))
        return value, problem
    finally:
        peer.close()


def status_problem(value):
    from cogwire import t_uint, t_text, t_map, t_list_of, t_shape, shape_problem, t_any, envelope_problem
    problem = envelope_problem(value) or (None if value["type"] == "status" else f"type {value['type']}")
    if problem:
        return problem
    number = lambda v, p: None if isinstance(v, (int, float)) and not isinstance(v, bool) else f"{p} not a number"
    return shape_problem(value.get("body"), {
        "epoch": (t_uint, True), "revision": (t_uint, True),
        "workers": (t_list_of(t_shape({"name": (t_text, True), "appliedRevision": (t_uint, True),
                                       "lag": (t_uint, True), "secondsSinceHeard": (number, True),
                                       "digest": (t_text, False), "group": (t_text, False),
                                       "instances": (t_uint, False), "roots": (t_list_of(t_text), False),
                                       "settings": (t_list_of(t_text), False)})), True),
        "errorCounts": (t_map, True), "openScopeInstances": (t_list_of(t_uint), True),
        "placement": (t_text, False),
        "commits": (t_shape({"count": (number, True), "window": (number, True), "p50Micros": (number, True),
                             "p99Micros": (number, True), "turnsPerCommit": (number, True)}), False),
        "version": (t_text, False), "uptimeSeconds": (number, False), "heartbeatTimeoutSeconds": (number, False),
        "refusals": (t_list_of(t_shape({"op": (t_text, True), "code": (t_text, True), "count": (t_uint, True)})), False)})


def outcome_kind(outcome):
    return next(iter(outcome)) if isinstance(outcome, dict) and len(outcome) == 1 else None


def run(cogd, checks):
    check = checks.check
    check_vectors(checks)

    context = zmq.Context()
    leader = Leader(cogd, extra=["--snapshot-part-bytes", "1024"])
    worker = None
    try:
        leader.start(context)
        value, problem = status(context, leader)
        check("status-request is answered with a status of the documented shape",
              not problem and not status_problem(value), str(problem or status_problem(value)))

        # Seed: 30 accounts with 44-byte names (so a 1 KiB part holds few) from a tool.
        names = [f"a{index:02d}-" + "x" * 40 for index in range(30)]
        outcomes = tool_ops(context, leader, [("ledger.open", {"account": n, "balance": 100}) for n in names])
        revisions = [outcomes.get(seq, {}).get("applied", {}).get("revision") for seq in range(1, 31)]
        check("30 pipelined ledger.open ops are applied at revisions 1..30 in arrival order",
              revisions == list(range(1, 31)), repr(revisions))

        # hello -> welcome.
        worker = Worker(checks, context, leader, f"indep-{os.urandom(3).hex()}")
        worker.dealer.send(message("hello", {"worker": worker.name, "lastRevision": 0}))
        got = worker.receive_dealer(5)
        value = got[0] if got else None
        problem = "no answer" if value is None else message_problem(value, "welcome")
        check("hello is answered by a welcome of the documented shape", not problem, str(problem))
        if problem:
            return
        welcome = value["body"]
        check("welcome names the leader's turns endpoint", welcome["turns"] == leader.turns,
              f"{welcome['turns']!r} vs {leader.turns!r}")
        check("welcome carries the last revision (30)", welcome["lastRevision"] == 30, repr(welcome))
        check("welcome's lastSequence is 0 or absent for a new name", welcome.get("lastSequence", 0) == 0, repr(welcome))
        worker.epoch = welcome["epoch"]
        worker.leader_revision = welcome["lastRevision"]

        # subscribe, then snapshot in parts.
        worker.sub = context.socket(zmq.SUB)
        worker.sub.setsockopt(zmq.LINGER, 0)
        worker.sub.setsockopt(zmq.SUBSCRIBE, b"")
        worker.sub.connect(welcome["turns"])
        # Turns published while the snapshot is being asked for must be held (Clone pattern).
        more = tool_ops(context, leader, [("ledger.transfer", {"from": names[0], "to": names[1], "amount": 1})])
        worker.dealer.send(message("snapshot-request", {"parts": True}))
        parts = []

        def snapshot_done():
            while True:
                index = next((i for i, (v, _) in enumerate(worker.inbox) if v["type"] == "snapshot"), None)
                if index is None:
                    return False
                parts.append(worker.inbox.pop(index)[0]["body"])
                if not parts[-1].get("more", False):
                    return True
        worker.pump(snapshot_done, 15)
        check("a snapshot asked for in parts comes in more than one part (--snapshot-part-bytes 1024)",
              len(parts) > 1, f"{len(parts)} parts")
        check("snapshot parts are numbered 0, 1, … in order",
              [p.get("part", 0) for p in parts] == list(range(len(parts))), repr([p.get("part") for p in parts]))
        check("every snapshot part but the last says more: true, the last more: false",
              parts and all(p.get("more") is True for p in parts[:-1]) and parts[-1].get("more", False) is False,
              repr([p.get("more") for p in parts]))
        check("every part has the same epoch and revision",
              parts and len({(p["epoch"], p["revision"]) for p in parts}) == 1, repr({(p["epoch"], p["revision"]) for p in parts}))
        if not parts:
            return
        snap_revision = parts[0]["revision"]
        for part in parts:
            for entry in part["entries"]:
                worker.replica[(entry["name"], entry.get("key", b""))] = entry["value"]
        worker.digest = int.from_bytes(state_digest(worker.replica), "big")
        check("every snapshot part carries the same stateDigest, the digest its entries add up to (turnlog.md §3a)",
              parts and all(p.get("stateDigest") == state_digest(worker.replica) for p in parts),
              repr({p.get("stateDigest") for p in parts}))
        empty_keys = [e["name"] for p in parts for e in p["entries"] if "key" in e and e["key"] == b""]
        check("a keyless source's snapshot entry leaves `key` out (cogwire.md: `key: bytes?`)", not empty_keys,
              f"keyless entries carry key b'': {sorted(set(empty_keys))}")
        worker.applied = snap_revision
        worker.synced = True
        worker.apply_held()
        ok = worker.pump(lambda: worker.applied >= 31, 10)
        check("after the snapshot the replica reaches revision 31 (held and caught-up records applied)", ok,
              f"applied {worker.applied}, snapshot at {snap_revision}, more {more}")

        # Heartbeats are answered by welcome; the worker appears in status.
        heard = []
        worker.dealer.send(message("heartbeat", worker.heartbeat()))
        worker.last_heartbeat = time.monotonic()
        before = worker.leader_revision
        got = worker.take(lambda v: True, 5)
        check("a heartbeat is answered by a welcome", got[0] is not None and got[0]["type"] == "welcome"
              or worker.leader_revision >= before, repr(got[0]))
        # status comes over another connection: it may be answered before the
        # heartbeat is read, so look again (bounded) until the heartbeat is in.
        deadline = Deadline(5)
        while True:
            value, _ = status(context, leader)
            entries = [w for w in value["body"]["workers"] if w["name"] == worker.name] if value else []
            if (entries and entries[0]["appliedRevision"] == worker.applied) or deadline.passed():
                break
            worker.pump(lambda: False, 0.05)
        check("status lists the worker with the revision it heartbeated",
              entries and entries[0]["appliedRevision"] == worker.applied, repr(entries))
        check("status says the state digest the worker heartbeated agrees with the leader's",
              entries and entries[0].get("digest") == "agrees", repr(entries))
        # A heartbeat whose digest is not the state's at that revision is shown as differing.
        wrong = dict(worker.heartbeat(), stateDigest=bytes(16))
        worker.dealer.send(message("heartbeat", wrong))
        worker.last_heartbeat = time.monotonic()  # the next regular heartbeat, a second away, says agrees again
        deadline = Deadline(5)
        while True:
            worker.pump(lambda: False, 0.05)
            value, _ = status(context, leader)
            entries = [w for w in value["body"]["workers"] if w["name"] == worker.name] if value else []
            if (entries and entries[0].get("digest") == "differs") or deadline.passed():
                break
        check("status shows `differs` for a heartbeat whose state digest is not the leader's at that revision",
              entries and entries[0].get("digest") == "differs", repr(entries))
        worker.dealer.send(message("heartbeat", worker.heartbeat()))
        worker.last_heartbeat = time.monotonic()

        # A tool says hello (tool: true), is listed, says goodbye: dropped at once (cogwire.md §3).
        tool_name = f"indep-tool-{os.getpid()}"
        tool = Peer(context, leader.requests, identity=f"{tool_name}/1".encode())
        try:
            value, problem, _ = parse(tool.ask(message("hello", {"worker": tool_name, "lastRevision": 0, "tool": True})))
            check("a tool's hello is answered by a welcome", not problem and value["type"] == "welcome", problem or repr(value))
            value, _ = status(context, leader)
            listed = [w for w in value["body"]["workers"] if w["name"] == tool_name] if value else []
            check("status lists the tool with tool: true", listed and listed[0].get("tool") is True, repr(listed))
            tool.send(message("goodbye", {"worker": tool_name}))
            deadline = Deadline(2)  # under the leader's 5 s heartbeat timeout: only the goodbye drops it this soon
            while True:
                value, _ = status(context, leader)
                names_now = [w["name"] for w in value["body"]["workers"]] if value else None
                if (names_now is not None and tool_name not in names_now) or deadline.passed():
                    break
                time.sleep(0.05)
            check("after its goodbye status no longer lists the tool (well before the heartbeat timeout)",
                  names_now is not None and tool_name not in names_now and worker.name in names_now, repr(names_now))
        finally:
            tool.close()

        # The stream: ops from a tool reach the replica in order; a dropped publication is caught up.
        worker.drop_publications = 1
        tool_ops(context, leader, [("ledger.transfer", {"from": names[2], "to": names[3], "amount": 2})])
        tool_ops(context, leader, [("ledger.transfer", {"from": names[3], "to": names[4], "amount": 3})])
        ok = worker.pump(lambda: worker.applied >= 33, 10)
        check("a publication dropped on purpose is filled by catch-up-request -> turns", ok and worker.catch_ups >= 1,
              f"applied {worker.applied}, catch-ups {worker.catch_ups}")

        # Catch-up from 1 returns the whole log, byte for byte as stored.
        worker.dealer.send(message("catch-up-request", {"from": 1}))
        value, raw = worker.take(lambda v: v["type"] == "turns", 5)
        if value is not None:
            start = raw.index(b"\x67records") + 8
            copies = [raw[b:e] for b, e in item_spans(raw, start)]
            check("a catch-up from 1 returns revisions 1.. in order, each record byte-identical to the stream's",
                  [decode(r)["rev"] for r in copies] == list(range(1, len(copies) + 1))
                  and all(worker.records.get(i + 1, r) == r for i, r in enumerate(copies)), f"{len(copies)} records")
        else:
            check("a catch-up from 1 returns revisions 1.. in order, each record byte-identical to the stream's",
                  False, "no turns reply")

        # Scope registration over ledger.accounts (each) and ops stamped with its instances.
        worker.dealer.send(message("scope-register", {"worker": worker.name, "registration": 1,
                                                      "path": "Indep.desk", "source": "ledger.accounts",
                                                      "form": "each"}))
        value, _ = worker.take(lambda v: v["type"] in ("scope-registered", "error"), 5)
        problem = "no answer" if value is None else message_problem(value, "scope-registered")
        check("scope-register is answered by scope-registered of the documented shape", not problem, str(problem))
        if problem:
            return
        registered = value["body"]
        identities = [i["identity"] for i in registered["instances"]]
        check("scope-registered lists every member of ledger.accounts in collection order, identity = encoding",
              identities == [encode(n) for n in names], repr(identities[:3]))
        instances = {decode(i["identity"]): i["instance"] for i in registered["instances"]}
        check("instances are numbered epoch << 32 | n, distinct",
              all(i >> 32 == worker.epoch for i in instances.values()) and len(set(instances.values())) == len(instances),
              repr(list(instances.values())[:3]))
        check("scope-registered names the worker and registration",
              registered["worker"] == worker.name and registered["registration"] == 1, repr(registered))
        worker.pump(lambda: worker.applied >= registered["revision"], 5)

        seq = worker.op("ledger.transfer", {"from": names[5], "to": names[6], "amount": 5}, instance=instances[names[5]],
                        name="Indep.desk.transfer")
        value, raw = worker.reply_for(seq)
        kind = outcome_kind(value["body"]["outcome"]) if value else None
        check("an op stamped with a live instance is applied", kind == "applied", repr(value))
        if kind == "applied":
            revision = value["body"]["outcome"]["applied"]["revision"]
            worker.pump(lambda: worker.applied >= revision, 5)
            record = decode(worker.records[revision]) if revision in worker.records else {}
            digest = request_digest("ledger.transfer", encode({"from": names[5], "to": names[6], "amount": 5}))
            check("its record's origin is {worker, request {seq, worker}, instance, digest of op and argument}",
                  record.get("origin") == {"worker": worker.name, "request": {"seq": seq, "worker": worker.name},
                                           "instance": instances[names[5]], "digest": digest}, repr(record.get("origin")))
            check("its record's name is the op's composed turn name", record.get("name") == "Indep.desk.transfer",
                  repr(record.get("name")))

        # A retry under the same id with another argument is refused request-mismatch (cogwire.md §4).
        if kind == "applied":
            worker.op("ledger.transfer", {"from": names[5], "to": names[6], "amount": 6}, instance=instances[names[5]],
                      name="Indep.desk.transfer", seq=seq)
            value, _ = worker.reply_for(seq)
            reason = (value or {}).get("body", {}).get("outcome", {}).get("rejected", {}).get("reason", "")
            check("a retry with the same id and another argument is rejected request-mismatch",
                  reason.startswith(f"request-mismatch: request {worker.name}#{seq} was answered for another op or argument"),
                  repr(value))

        # Retries: the same request id again is answered the same, not run again.
        worker.dealer.send(message("op", {"request": {"worker": worker.name, "seq": seq}, "op": "ledger.transfer",
                                          "argument": encode({"from": names[5], "to": names[6], "amount": 5}),
                                          "instance": instances[names[5]], "name": "Indep.desk.transfer"}))
        again, raw_again = worker.reply_for(seq)
        check("a retried request id is answered with the same reply, marked earlier", answered_earlier(raw, raw_again),
              f"{again!r} vs {raw!r}")
        seq2 = worker.op("ledger.nope", {"x": 1})
        first, first_raw = worker.reply_for(seq2)
        check("an unknown op is rejected unknown-op",
              first is not None and rejection_code(first["body"]["outcome"]) == "unknown-op",
              repr(first))
        worker.op("ledger.nope", {"x": 1}, seq=seq2)
        second, second_raw = worker.reply_for(seq2)
        check("its retry gets the same reply, marked earlier", answered_earlier(first_raw, second_raw), repr(second))

        # An overdraft: the op's body refuses insufficient-funds naming the balance (cogwire.md §4, "Refusals");
        # an earlier reader sees a rejection coded refused. Stored: a retry gets it again, marked earlier.
        seq3 = worker.op("ledger.transfer", {"from": names[8], "to": names[9], "amount": 1000000})
        refused, refused_raw = worker.reply_for(seq3)
        said = refusal(refused["body"]["outcome"]) if refused else None
        check("an overdraft is refused insufficient-funds, its reason naming the balance",
              said is not None and said[0] == "insufficient-funds" and said[1].startswith(f"{names[8]} has ")
              and said[1].endswith(", the transfer needs 1000000")
              and rejection_code(refused["body"]["outcome"]) == "refused", repr(refused))
        worker.op("ledger.transfer", {"from": names[8], "to": names[9], "amount": 1000000}, seq=seq3)
        again, again_raw = worker.reply_for(seq3)
        check("its retry gets the same refusal, marked earlier", answered_earlier(refused_raw, again_raw), repr(again))
        value, problem = status(context, leader)
        counted = [r for r in ((value or {}).get("body", {}).get("refusals") or [])
                   if r.get("op") == "ledger.transfer" and r.get("code") == "insufficient-funds"]
        check("status counts the refusal by op and code (refusals), the retry not again",
              not problem and not status_problem(value) and len(counted) == 1 and counted[0]["count"] == 1,
              str(problem or status_problem(value) or value))

        # A member that arrives opens in the causing turn's record; one that leaves retires.
        outcomes = tool_ops(context, leader, [("ledger.open", {"account": "zed", "balance": 7})])
        rev_open = outcomes.get(1, {}).get("applied", {}).get("revision")
        worker.pump(lambda: rev_open is not None and worker.applied >= rev_open, 5)
        opened = [e for r, n, e in worker.events if r == rev_open]
        check("an arriving member opens in the causing turn's record (scopes: open, path, identity, worker, registration)",
              len(opened) == 1 and opened[0]["kind"] == "open" and opened[0]["scope"] == "Indep.desk"
              and opened[0].get("identity") == encode("zed") and opened[0]["worker"] == worker.name
              and opened[0]["registration"] == 1 and opened[0]["instance"] >> 32 == worker.epoch, repr(opened))
        outcomes = tool_ops(context, leader, [("ledger.transfer", {"from": names[7], "to": names[29], "amount": 100}),
                                              ("ledger.close", names[7])])  # the rig closes only an empty account
        outcomes = {1: outcomes.get(2, {})}
        rev_close = outcomes.get(1, {}).get("applied", {}).get("revision")
        worker.pump(lambda: rev_close is not None and worker.applied >= rev_close, 5)
        retired = [e for r, n, e in worker.events if r == rev_close]
        check("a departing member retires in the causing turn's record",
              [(e["kind"], e["instance"]) for e in retired] == [("retire", instances[names[7]])], repr(retired))
        seq = worker.op("ledger.transfer", {"from": names[8], "to": names[9], "amount": 1}, instance=instances[names[7]])
        value, _ = worker.reply_for(seq)
        code = rejection_code(value["body"]["outcome"]) if value else None
        check("an op stamped with a retired instance is rejected retired-scope", code == "retired-scope",
              repr(value))
        seq = worker.op("ledger.transfer", {"from": names[8], "to": names[9], "amount": 1},
                        instance=(worker.epoch << 32) | 0xFFFFFF)
        value, _ = worker.reply_for(seq)
        code = rejection_code(value["body"]["outcome"]) if value else None
        check("an op stamped with an instance never minted is rejected retired-scope", code == "retired-scope",
              repr(value))

        # An optional scope over a box member: its member is the value's encoding, so a change re-opens it.
        worker.dealer.send(message("scope-register", {"worker": worker.name, "registration": 2, "path": "Indep.purse",
                                                      "source": "ledger.balance", "key": encode(names[10]),
                                                      "form": "optional"}))
        value, _ = worker.take(lambda v: v["type"] in ("scope-registered", "error"), 5)
        members = value["body"]["instances"] if value and value["type"] == "scope-registered" else None
        check("an optional scope over ledger.balance[a10] has one member, the value's encoding",
              members is not None and [m["identity"] for m in members] == [encode(100)], repr(value))
        outcomes = tool_ops(context, leader, [("ledger.transfer", {"from": names[10], "to": names[11], "amount": 10})])
        rev = outcomes.get(1, {}).get("applied", {}).get("revision")
        worker.pump(lambda: rev is not None and worker.applied >= rev, 5)
        events = [(e["kind"], e.get("identity")) for r, n, e in worker.events if r == rev and e["registration"] == 2]
        check("a changed optional value retires the old member and opens the new one in the same record",
              events == [("retire", encode(100)), ("open", encode(90))], repr(events))

        # Re-sending registration 2 replaces it: a cogd.scopeReregistered record.
        worker.dealer.send(message("scope-register", {"worker": worker.name, "registration": 2, "path": "Indep.purse",
                                                      "source": "ledger.balance", "key": encode(names[10]),
                                                      "form": "optional"}))
        value, _ = worker.take(lambda v: v["type"] in ("scope-registered", "error"), 5)
        rev = value["body"]["revision"] if value and value["type"] == "scope-registered" else None
        worker.pump(lambda: rev is not None and worker.applied >= rev, 5)
        record = decode(worker.records[rev]) if rev in worker.records else None
        check("a re-sent registration number retires its instances in a cogd.scopeReregistered system record",
              record is not None and record["name"] == "cogd.scopeReregistered" and record["origin"] == {}
              and record["writes"] == [] and [e["kind"] for e in record["scopes"]] == ["retire"],
              repr(record))

        # Status, the replica, the state table.
        worker.dealer.send(message("heartbeat", worker.heartbeat()))
        worker.pump(lambda: False, 0.3)
        value, _ = status(context, leader)
        body = value["body"] if value else {}
        check("status revision equals the replica's applied revision", body.get("revision") == worker.applied,
              f"{body.get('revision')} vs {worker.applied}")
        check("status lists the open instances (this worker's live ones among them)",
              set(v for k, v in instances.items() if k != names[7]) <= set(body.get("openScopeInstances", [])),
              repr(body.get("openScopeInstances")))
        folder = read_folder(leader.data)
        check("the replica equals the leader's state table", worker.replica == folder["state"],
              f"{len(worker.replica)} vs {len(folder['state'])} entries; "
              f"differ: {sorted(set(worker.replica.items()) ^ set(folder['state'].items()))[:3]}")
        check("every record applied carried the state digest of the replica after it (turnlog.md §3a)",
              not worker.digest_mismatches and worker.digest.to_bytes(16, "big") == state_digest(folder["state"]),
              f"mismatches at {worker.digest_mismatches[:5]}")
        cli = leader.cogd_cli("status", "--leader", leader.requests, "--json")
        try:
            cli_status = json.loads(cli.stdout)
        except ValueError:
            cli_status = {}
        check("`cogd status --json` reports the replica's revision", cli_status.get("revision") == worker.applied,
              cli.stdout.decode(errors="replace")[:200])

        # A restart under the same name (new connection) continues above the answered sequences.
        last_seq = worker.seq
        old_instances = sorted(v for k, v in instances.items() if k != names[7])
        worker.dealer.close()
        worker.dealer = Peer(context, leader.requests, identity=f"{worker.name}/{os.urandom(6).hex()}".encode())
        # cogwire.md §6: until the leader sees the old connection closed, the
        # name is in use; a restarted worker says hello again (cogd's: 0.5 s doubling to 5 s apart).
        worker.inbox.clear()
        deadline = Deadline(10)
        while True:
            worker.dealer.send(message("hello", {"worker": worker.name, "lastRevision": worker.applied}))
            value, _ = worker.take(lambda v: v["type"] in ("welcome", "error"), 5)
            if not (value and value["type"] == "error" and value["body"]["code"] == "name-in-use") or deadline.passed():
                break
            time.sleep(0.25)  # the documented retry interval of a refused worker, not a synchronization
        check("a restarted worker's welcome carries lastSequence = the highest sequence answered in its name",
              value is not None and value["type"] == "welcome" and value["body"].get("lastSequence", 0) == last_seq,
              repr(value))
        worker.pump(lambda: any(n == "cogd.nameTakenOver" for r, n, e in worker.events), 5)
        retired = [e["instance"] for r, n, e in worker.events if n == "cogd.nameTakenOver"]
        check("taking a name over retires its registrations in a cogd.nameTakenOver record, in instance order",
              retired and retired == sorted(retired) and set(old_instances) <= set(retired), repr(retired[:5]))

        # The data folder (turnlog.md).
        check("the worker saw no message that differs from cogwire.md", not worker.problems, "; ".join(worker.problems[:5]))
        folder = read_folder(leader.data)
        turns = folder["turns"]
        check("turns keys are revisions 1..N, contiguous", sorted(turns) == list(range(1, len(turns) + 1)),
              repr(sorted(turns)[:5]))
        bad = [(rev, record_problem(raw)) for rev, raw in turns.items() if record_problem(raw)]
        check("every stored record has its checksum and the documented 9 keys", not bad, repr(bad[:3]))
        check("every record the worker received is byte-identical to the stored one",
              all(turns.get(rev) == raw for rev, raw in worker.records.items()),
              repr([rev for rev, raw in worker.records.items() if turns.get(rev) != raw][:5]))
        meta = folder["meta"]
        check("meta.schema is 4 (8 bytes big-endian)", meta.get("schema") == (4).to_bytes(8, "big"), repr(meta.get("schema")))
        check("meta.epoch is the welcome's epoch", meta.get("epoch") == worker.epoch.to_bytes(8, "big"), repr(meta.get("epoch")))
        check("meta values are 8 bytes, log-id 16 (turnlog.md §2's table; its rule says every one is 8)",
              all(len(v) == (16 if k == "log-id" else 8) for k, v in meta.items()) and len(meta.get("log-id", b"")) == 16,
              repr({k: len(v) for k, v in meta.items()}))
        identity = folder["identity"] or b""
        lines = identity.decode("ascii", "replace").split("\n")
        check("cogd.identity is 99 bytes: cogd-log ID / epoch N / revision N",
              len(identity) == 99 and len(lines) == 4 and lines[3] == "" and lines[0] == "cogd-log " + meta.get("log-id", b"").hex()
              and lines[1] == f"epoch {worker.epoch:020d}", repr(identity))
        deadline = Deadline(5)
        while identity[78:98] != f"{max(turns):020d}".encode() and not deadline.passed():
            leader_alive = leader.alive()
            identity = open(os.path.join(leader.data, "cogd.identity"), "rb").read()
            worker.pump(lambda: False, 0.05) if leader_alive else None
        check("cogd.identity bytes 78..97 hold the last committed revision", identity[78:98] == f"{max(turns):020d}".encode(),
              repr(identity[78:98]))
        # dedup holds the refused request's digest, then its reply frame exactly as sent.
        stored = folder["dedup"].get((worker.name, seq2)) or b""
        check("dedup holds a refused request's reply frame exactly as it was sent, after its 8-byte digest",
              stored[8:] == first_raw, repr(stored))

        code = leader.stop()
        check("the leader stops cleanly on SIGTERM (exit 0)", code == 0, f"exit {code}: {leader.output()[-300:]}")
        note = os.path.join(leader.data, "running-request")
        raw_note = open(note, "rb").read() if os.path.exists(note) else b""
        check("running-request holds no request after a clean stop",
              len(raw_note) < 4 or int.from_bytes(raw_note[:4], "big") == 0, repr(raw_note[:40]))
        verify = leader.cogd_cli("log", "verify", "--data", leader.data)
        check("cogd log verify passes", verify.returncode == 0, verify.stdout.decode(errors="replace")[-300:])
    finally:
        if worker is not None:
            worker.close()
        leader.kill()
        context.term()
        shutil.rmtree(leader.tmp, ignore_errors=True)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    checks = Checks(KNOWN_GAPS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))  # so `finally` stops the leader
    try:
        run(os.path.abspath(sys.argv[1]), checks)
    except Exception as error:  # noqa: BLE001 - an exception is a failed check, and the leader is stopped
        import traceback
        traceback.print_exc()
        checks.check("the run completes without an exception", False, f"{type(error).__name__}: {error}")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
