#!/usr/bin/env python3
"""An adversarial cogd peer, written from protocol/ and README.md only.

It starts a leader and attacks it as a hostile peer would: malformed CBOR,
wrong envelopes, `v` values, unknown and not-served types, oversize and
multi-frame messages, requests without hello, a hello ahead of the log,
sequences and worker names out of range, overflowing op arguments, names
with control characters, re-sent registration numbers and request ids, many
registrations, snapshots and catch-ups never read. For each it asserts the
answer cogwire.md documents, then that the leader still runs and serves (a
`ledger.open` applies). At the end `cogd log verify` must pass.

Usage: python3 clients/adversarial.py PATH/TO/cogd
Prints `ok NAME` / `FAIL NAME: …` per check (`note …` for what the
documents leave open) and `N passed, N failed` last.
"""
import json
import os
import shutil
import signal
import sys

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cogwire import (Checks, Deadline, Leader, Peer, decode, encode, message, message_problem, parse,  # noqa: E402
                     read_folder, record_problem)

# Checks the leader fails today although protocol/ says otherwise:
# {check name: "what the document says vs what the leader does"}.
KNOWN_GAPS = {
}

MiB = 1 << 20


def time_since(deadline):
    import time
    return time.monotonic() - deadline.end


def note(text):
    print(f"note {text}")


class Attacker:
    def __init__(self, checks, context, leader):
        self.checks, self.context, self.leader = checks, context, leader
        self.opened = 0
        self.refused_ids = []  # request ids the leader must store nowhere

    def peer(self, identity=None):
        return Peer(self.context, self.leader.requests, identity=identity)

    def answer(self, peer, frames, timeout=5.0):
        if isinstance(frames, (bytes, bytearray)):
            peer.send(frames)
        else:
            peer.socket.send_multipart(frames)
        value, problem, raw = parse(peer.receive(timeout))
        return value, problem, raw

    def expect_error(self, name, frames, code, contains=None, peer=None):
        own = peer is None
        peer = peer or self.peer()
        try:
            value, problem, _ = self.answer(peer, frames)
        finally:
            if own:
                peer.close()
        if problem:
            return self.checks.check(name, False, problem)
        problem = message_problem(value, "error")
        if not problem and value["body"]["code"] != code:
            problem = f"code {value['body']['code']!r} ({value['body']['message']!r}), documented {code!r}"
        if not problem and contains is not None and contains not in value["body"]["message"]:
            problem = f"message {value['body']['message']!r} does not name {contains!r}"
        return self.checks.check(name, not problem, problem)

    def op_frame(self, worker, seq, op, argument, raw_argument=None, **extra):
        body = {"request": {"worker": worker, "seq": seq}, "op": op,
                "argument": raw_argument if raw_argument is not None else encode(argument)}
        body.update(extra)
        return message("op", body)

    def reply(self, frame, worker, seq, peer=None, timeout=5.0):
        own = peer is None
        peer = peer or self.peer()
        try:
            peer.send(frame)
            deadline = Deadline(timeout)
            while not deadline.passed():
                frames = peer.receive(min(0.2, deadline.left()))
                if frames is None:
                    if not self.leader.alive():
                        return None, "no answer: the leader exited", None
                    continue
                value, problem, raw = parse(frames)
                if problem:
                    return None, problem, None
                if value.get("type") == "reply" and value["body"]["request"] == {"worker": worker, "seq": seq}:
                    return value, message_problem(value, "reply"), raw
                if value.get("type") == "error":
                    return value, f"error {value['body']}", raw
            return None, "no reply", None
        finally:
            if own:
                peer.close()

    def restart_if_dead(self):
        """A dead leader is started again over its folder (as systemd would), so the run goes on."""
        if self.leader.alive():
            return False
        self.leader.stop()
        self.leader.start(self.context)
        return True

    def still_serving(self, after):
        alive = self.leader.alive()
        if not alive:
            self.restart_if_dead()
        ok = False
        detail = "leader exited" if not alive else ""
        if alive:
            self.opened += 1
            worker = f"adv-probe-{os.urandom(4).hex()}"
            value, problem, _ = self.reply(self.op_frame(worker, 1, "ledger.open",
                                                         {"account": f"probe-{self.opened}", "balance": 1}), worker, 1,
                                           timeout=10)
            ok = value is not None and not problem and "applied" in value["body"]["outcome"]
            detail = problem or repr(value)
        return self.checks.check(f"after {after}: the leader runs and a ledger.open applies", ok,
                                 detail + (f"; leader output: {self.leader.output()[-400:]}" if not alive else ""))


def rejected_reason(value):
    if value is None:
        return None
    return value["body"]["outcome"].get("rejected", {}).get("reason")


def run(cogd, checks):
    check = checks.check
    context = zmq.Context()
    leader = Leader(cogd)
    try:
        leader.start(context)
        attacker = Attacker(checks, context, leader)
        A = attacker

        # --- malformed CBOR and envelopes
        A.expect_error("not CBOR (0xff) is malformed", b"\xff", "malformed")
        A.expect_error("an empty frame is malformed", b"", "malformed")
        A.expect_error("a truncated map is malformed", b"\xa3\x61v\x01", "malformed")
        A.expect_error("an indefinite-length map is malformed", b"\xbf\x61v\x01\xff", "malformed")
        A.expect_error("trailing bytes after the envelope are malformed",
                       message("hello", {"worker": "w", "lastRevision": 0}) + b"\x00", "malformed")
        A.expect_error("an array instead of the envelope map is malformed", encode([1, "hello", {}]), "malformed")
        A.expect_error("an envelope without type is malformed", encode({"v": 1}), "malformed")
        A.expect_error("an envelope whose type is a number is malformed", encode({"v": 1, "type": 7}), "malformed")
        A.expect_error("a hello whose body is text is malformed", message("hello", "w"), "malformed")
        A.expect_error("a hello without lastRevision is malformed", message("hello", {"worker": "w"}), "malformed")
        A.expect_error("a hello whose worker is a number is malformed",
                       message("hello", {"worker": 5, "lastRevision": 0}), "malformed")
        A.expect_error("a hello with a negative lastRevision is malformed",
                       message("hello", {"worker": "w", "lastRevision": -1}), "malformed")
        A.expect_error("an op whose argument is not a byte string is malformed",
                       message("op", {"request": {"worker": "w", "seq": 1}, "op": "ledger.open", "argument": {"a": 1}}),
                       "malformed")
        A.expect_error("text that is not UTF-8 is malformed",
                       encode({"v": 1, "type": "hello", "body": {"worker": "w", "lastRevision": 0}}).replace(b"aw", b"a\xff"),
                       "malformed")
        peer = A.peer()
        value, problem, _ = A.answer(peer, encode({"v": 1, "type": "status-request", "extra": True}))
        peer.close()
        note(f"an envelope with an extra key (cogwire.md §2 is silent): answered {value.get('type') if value else problem}"
             f"{' ' + repr(value['body']) if value and value.get('type') == 'error' else ''}")
        peer = A.peer()
        value, problem, _ = A.answer(peer, encode({"type": "status-request"}))
        peer.close()
        note(f"an envelope without v (§2: 'anything but the unsigned integer 1' / 'not the envelope'): answered "
             f"{value['body'] if value and value.get('type') == 'error' else (value or {}).get('type', problem)}")
        A.still_serving("malformed frames")

        # --- v values
        for label, v, named in (("-1", -1, "-1"), ("1.0", 1.0, "1.0"), ("2", 2, "2"), ("text '1'", "1", "1"),
                                ("2^64-1", (1 << 64) - 1, str((1 << 64) - 1)), ("null", None, "null"),
                                ("true", True, "true")):
            frame = encode({"v": v, "type": "hello", "body": {"worker": "w", "lastRevision": 0}})
            A.expect_error(f"v = {label} is answered version, naming it", frame, "version", contains=named)
        A.still_serving("v values")

        # --- types
        A.expect_error("an unknown type is unknown-type", message("frobnicate", {}), "unknown-type")
        for kind, body in (("reply", {"request": {"worker": "w", "seq": 1}, "outcome": {"unchanged": {}}}),
                           ("welcome", {"epoch": 1, "lastRevision": 0, "turns": "tcp://x"}),
                           ("turns", {"epoch": 1, "records": []}),
                           ("error", {"code": "x", "message": "y"}),
                           ("status", {"epoch": 1, "revision": 0, "workers": [], "errorCounts": {},
                                       "openScopeInstances": []}),
                           ("snapshot", {"epoch": 1, "revision": 0, "entries": []}),
                           ("scope-registered", {"worker": "w", "registration": 1, "revision": 0, "instances": []})):
            A.expect_error(f"a {kind} sent to the leader is not-allowed", message(kind, body), "not-allowed")
        A.still_serving("unknown and not-served types")

        # --- sizes and frames
        def op_of_size(size, worker, seq):
            base = A.op_frame(worker, seq, "adv.nope", None, raw_argument=b"")
            pad = size - len(base)
            for extra in range(0, 12):
                frame = A.op_frame(worker, seq, "adv.nope", None, raw_argument=b"\x00" * (pad - extra))
                if len(frame) == size:
                    return frame
            raise AssertionError("cannot size the frame")
        worker = f"adv-size-{os.urandom(4).hex()}"
        value, problem, _ = A.reply(op_of_size(MiB, worker, 1), worker, 1)
        check("a frame of exactly 1 MiB is served (an unknown op: rejected unknown-op)",
              (rejected_reason(value) or "").startswith("unknown-op:"), problem or repr(value)[:200])
        A.expect_error("a frame of 1 MiB + 1 byte is oversize", op_of_size(MiB + 1, worker, 2), "oversize")
        peer = A.peer()
        peer.send(op_of_size(5 * MiB, worker, 3))
        value, problem, _ = parse(peer.receive(1.0))
        peer.close()
        check("a frame above 4 MiB gets no answer (ZeroMQ drops the connection)", value is None,
              repr(value)[:200])
        A.expect_error("a two-frame message is malformed",
                       [message("status-request"), message("status-request")], "malformed")
        A.expect_error("a message with an empty second frame is malformed",
                       [message("hello", {"worker": "w", "lastRevision": 0}), b""], "malformed")
        A.still_serving("sizes and frames")

        # --- no hello first
        nobody = f"adv-nohello-{os.urandom(4).hex()}"
        A.expect_error("scope-register without hello is hello-first",
                       message("scope-register", {"worker": nobody, "registration": 1, "path": "X.y",
                                                  "source": "ledger.accounts", "form": "each"}), "hello-first")
        A.expect_error("snapshot-request without hello is hello-first", message("snapshot-request"), "hello-first")
        A.expect_error("snapshot-request in parts without hello is hello-first",
                       message("snapshot-request", {"parts": True}), "hello-first")
        A.expect_error("catch-up-request without hello is hello-first", message("catch-up-request", {"from": 1}),
                       "hello-first")
        A.expect_error("heartbeat without hello is hello-first",
                       message("heartbeat", {"worker": nobody, "revision": 0}), "hello-first")
        # A name held by another connection.
        holder_name = f"adv-holder-{os.urandom(4).hex()}"
        holder = A.peer(identity=f"{holder_name}/a".encode())
        value, problem, _ = A.answer(holder, message("hello", {"worker": holder_name, "lastRevision": 0}))
        check("hello is answered welcome", value is not None and not message_problem(value, "welcome"),
              problem or message_problem(value, "welcome"))
        rival = A.peer(identity=f"{holder_name}/b".encode())
        A.expect_error("a hello for a name another live connection holds is name-in-use",
                       message("hello", {"worker": holder_name, "lastRevision": 0}), "name-in-use", peer=rival)
        A.expect_error("a heartbeat from the rival is name-in-use",
                       message("heartbeat", {"worker": holder_name, "revision": 0}), "name-in-use", peer=rival)
        A.expect_error("a scope-register from the rival is name-in-use",
                       message("scope-register", {"worker": holder_name, "registration": 1, "path": "X.y",
                                                  "source": "ledger.accounts", "form": "each"}), "name-in-use",
                       peer=rival)
        value, problem, _ = A.reply(A.op_frame(holder_name, 1, "ledger.open", {"account": "rival", "balance": 1}),
                                    holder_name, 1, peer=rival)
        check("an op from the rival is rejected name-in-use", (rejected_reason(value) or "").startswith("name-in-use:"),
              problem or repr(value))
        A.refused_ids.append((holder_name, 1))
        rival.close()
        A.expect_error("a hello whose lastRevision is beyond the log is revision-ahead",
                       message("hello", {"worker": f"adv-ahead-{os.urandom(4).hex()}", "lastRevision": 1 << 40}),
                       "revision-ahead")
        A.still_serving("requests without hello")

        # --- sequences
        worker = f"adv-seq-{os.urandom(4).hex()}"
        for seq in (0, 1 << 63, (1 << 64) - 1):
            value, problem, _ = A.reply(A.op_frame(worker, seq, "ledger.open", {"account": f"seq-{seq}", "balance": 1}),
                                        worker, seq)
            expected = f"bad-request: request sequences are 1 to 2^63-1; this one is {seq}"
            check(f"an op with seq {seq} is rejected '{expected}'", rejected_reason(value) == expected,
                  problem or repr(value))
            A.refused_ids.append((worker, seq))
        value, problem, _ = A.reply(A.op_frame(worker, (1 << 63) - 1, "ledger.open", {"account": "seq-max", "balance": 1}),
                                    worker, (1 << 63) - 1)
        check("an op with seq 2^63-1 is served", value is not None and "applied" in value["body"]["outcome"],
              problem or repr(value))
        peer = A.peer(identity=f"{worker}/x".encode())
        value, problem, _ = A.answer(peer, message("hello", {"worker": worker, "lastRevision": 0}))
        peer.close()
        check("a hello in that name gets lastSequence 2^63-1",
              value is not None and value.get("type") == "welcome" and value["body"].get("lastSequence") == (1 << 63) - 1,
              problem or repr(value))
        A.still_serving("sequences out of range")

        # --- worker names
        for label, name in (("0 bytes", ""), ("256 bytes", "w" * 256), ("with NUL", "a\x00b")):
            value, problem, _ = A.reply(A.op_frame(name, 1, "ledger.open", {"account": f"n-{label}", "balance": 1}),
                                        name, 1)
            check(f"an op from a worker name of {label} is rejected bad-request",
                  (rejected_reason(value) or "").startswith("bad-request:"), problem or repr(value)[:200])
            A.refused_ids.append((name, 1))
            A.expect_error(f"a hello from a worker name of {label} is malformed",
                           message("hello", {"worker": name, "lastRevision": 0}), "malformed")
            A.expect_error(f"a heartbeat from a worker name of {label} is malformed",
                           message("heartbeat", {"worker": name, "revision": 0}), "malformed")
            A.expect_error(f"a scope-register from a worker name of {label} is malformed",
                           message("scope-register", {"worker": name, "registration": 1, "path": "X.y",
                                                      "source": "ledger.accounts", "form": "each"}), "malformed")
        long_name = "é" * 127 + "a"  # 255 bytes of UTF-8
        peer = A.peer(identity=b"long/" + os.urandom(4).hex().encode())
        value, problem, _ = A.answer(peer, message("hello", {"worker": long_name, "lastRevision": 0}))
        peer.close()
        check("a hello from a 255-byte name is welcome", value is not None and value.get("type") == "welcome",
              problem or repr(value))
        A.still_serving("worker names out of range")

        # --- overflowing op arguments: the rig refuses (unchanged) what would overflow
        worker = f"adv-money-{os.urandom(4).hex()}"
        state = read_folder(leader.data)["state"]
        total = sum(decode(value) for (name, _), value in state.items() if name == "ledger.balance")
        # Room for 10,000 more in the bank, so the later probes (balance 1) still open.
        rich_balance = (1 << 63) - 1 - total - 10_000
        peer = A.peer()
        outcomes = {}
        for seq, (op, argument) in enumerate((
                ("ledger.open", {"account": "rich", "balance": rich_balance}),
                ("ledger.open", {"account": "poor", "balance": 20_000}),
                ("ledger.transfer", {"from": "rich", "to": "rich2", "amount": -(1 << 63)})), start=1):
            value, problem, _ = A.reply(A.op_frame(worker, seq, op, argument), worker, seq, peer=peer, timeout=10)
            outcomes[seq] = (value, problem)
        peer.close()
        check("an account whose balance brings the bank's total to 2^63-1 less 10,000 opens",
              (outcomes[1][0] or {}).get("body", {}).get("outcome", {}).get("applied") is not None, repr(outcomes[1]))
        check("an opening that would overflow the bank's total changes nothing (unchanged), the leader survives",
              (outcomes[2][0] or {}).get("body", {}).get("outcome") == {"unchanged": {}} and leader.alive(), repr(outcomes[2]))
        check("a transfer of -2^63 changes nothing (unchanged)",
              (outcomes[3][0] or {}).get("body", {}).get("outcome") == {"unchanged": {}} and leader.alive(), repr(outcomes[3]))
        value, problem, _ = A.reply(A.op_frame(worker, 2, "ledger.open", {"account": "poor", "balance": 20_000}), worker, 2, timeout=10)
        check("its retry gets the same answer", (value or {}).get("body", {}).get("outcome") == {"unchanged": {}},
              problem or repr(value))
        rich = read_folder(leader.data)["state"].get(("ledger.balance", encode("rich")))
        check("the refused ops wrote nothing (rich still holds its balance, poor has none)",
              rich == encode(rich_balance) and read_folder(leader.data)["state"].get(("ledger.balance", encode("poor"))) is None,
              repr(rich))
        for seq, balance in ((4, 1 << 63), ((5), -(1 << 64)), (6, "lots")):
            value, problem, _ = A.reply(A.op_frame(worker, seq, "ledger.open", {"account": f"x{seq}", "balance": balance}),
                                        worker, seq, timeout=10)
            check(f"ledger.open with balance {balance!r} (not an Int) is rejected bad-argument",
                  (rejected_reason(value) or "").startswith("bad-argument:"), problem or repr(value))
        value, problem, _ = A.reply(A.op_frame(worker, 7, "ledger.open", None, raw_argument=b"\xa1\x61"), worker, 7)
        check("an op whose argument is not CBOR is rejected bad-argument",
              (rejected_reason(value) or "").startswith("bad-argument:"), problem or repr(value))
        for seq, ticks in ((8, (1 << 63) - 1), (9, (1 << 63) - 1), (10, -(1 << 63))):
            value, problem, _ = A.reply(A.op_frame(worker, seq, "trails.tickHike", ticks), worker, seq, timeout=10)
            check(f"trails.tickHike({ticks}) is answered and the leader survives",
                  value is not None and not problem and leader.alive(), problem or repr(value))
            A.restart_if_dead()
        A.still_serving("overflowing op arguments")

        # --- names with newlines and ANSI escapes
        evil_worker = "adv-evil\n#999  2026-01-01T00:00:00.000Z  ledger.open  (forged)\x1b[2J"
        value, problem, _ = A.reply(
            A.op_frame(evil_worker, 1, "ledger.open", {"account": "evil\n\x1b[31mred", "balance": 3},
                       name="Evil\n#998  forged\x1b]0;title\x07"), evil_worker, 1)
        check("names with newlines and escapes are carried as text (the op applies)",
              value is not None and "applied" in value["body"]["outcome"], problem or repr(value))
        tail = leader.cogd_cli("tail", "--data", leader.data)
        text = tail.stdout.decode("utf-8", "replace")
        forged = [line for line in text.splitlines() if "forged" in line]
        check("cogd tail prints no raw control character a peer chose (protocol/ is silent; issue 13 item 9)",
              "\x1b" not in text and "\x07" not in text and all(not line.startswith("#99") for line in forged),
              repr(forged[:3]))
        lines = leader.cogd_cli("tail", "--data", leader.data, "--json").stdout.decode("utf-8", "replace").splitlines()
        try:
            names = [json.loads(line)["name"] for line in lines]
        except (ValueError, KeyError) as error:
            names = [f"unparsable: {error}"]
        check("cogd tail --json gives one parsable object per record, names intact",
              "Evil\n#998  forged\x1b]0;title\x07" in names, repr(names[-3:]))
        A.still_serving("names with control characters")

        # --- re-sent registration numbers and request ids
        reg_name = f"adv-reg-{os.urandom(4).hex()}"
        reg = A.peer(identity=f"{reg_name}/r".encode())
        A.answer(reg, message("hello", {"worker": reg_name, "lastRevision": 0}))
        value, problem, _ = A.answer(reg, message("scope-register", {"worker": reg_name, "registration": 9,
                                                                     "path": "Adv.all", "source": "ledger.accounts",
                                                                     "form": "each"}))
        first = value["body"]["instances"] if value and value.get("type") == "scope-registered" else []
        check("scope-register over ledger.accounts (each) mints instances", bool(first), problem or repr(value)[:200])
        value, problem, _ = A.answer(reg, message("scope-register", {"worker": reg_name, "registration": 9,
                                                                     "path": "Adv.none", "source": "adv.nothing",
                                                                     "form": "bool"}))
        ok = value is not None and value.get("type") == "scope-registered" and value["body"]["instances"] == []
        check("re-sending registration 9 over another source replaces it (no members now)", ok,
              problem or repr(value)[:200])
        if ok and first:
            record = read_folder(leader.data)["turns"].get(value["body"]["revision"])
            record = decode(record) if record else {}
            check("the replaced registration's instances retire in its cogd.scopeReregistered record, in order",
                  record.get("name") == "cogd.scopeReregistered"
                  and [e["instance"] for e in record.get("scopes", [])] == sorted(i["instance"] for i in first)
                  and all(e["kind"] == "retire" and e["registration"] == 9 for e in record.get("scopes", [])),
                  repr(record)[:300])
            value, problem, _ = A.reply(A.op_frame(reg_name, 1, "ledger.open", {"account": "via-old", "balance": 1},
                                                   instance=first[0]["instance"]), reg_name, 1, peer=reg)
            check("an op stamped with a replaced registration's instance is rejected retired-scope",
                  (rejected_reason(value) or "").startswith("retired-scope:"), problem or repr(value))
        worker = f"adv-dup-{os.urandom(4).hex()}"
        frame = A.op_frame(worker, 1, "ledger.open", {"account": "dup", "balance": 4})
        value, problem, raw = A.reply(frame, worker, 1)
        again, problem2, raw2 = A.reply(frame, worker, 1)
        check("the same request id re-sent is answered from dedup, byte for byte", raw is not None and raw == raw2,
              f"{value!r} / {again!r}")
        other, problem3, raw3 = A.reply(A.op_frame(worker, 1, "ledger.open", {"account": "dup-other", "balance": 9}),
                                        worker, 1)
        state = read_folder(leader.data)["state"]
        check("the same request id with another op is not run (cogwire.md §3: an id names one request for good)",
              ("ledger.balance", encode("dup-other")) not in state, repr(other))
        note(f"the same id with another argument was answered {other['body']['outcome'] if other else problem3} "
             f"(the first reply {'again' if raw3 == raw else 'NOT repeated'}); cogwire.md does not say whether a "
             f"mismatched retry is refused")
        burst = A.peer()
        for _ in range(20):
            burst.send(frame)
        answers = []
        deadline = Deadline(10)
        while len(answers) < 20 and not deadline.passed():
            got = burst.receive(deadline.left())
            if got:
                answers.append(got[0])
        burst.close()
        check("20 copies of one request id in a burst get 20 identical replies", len(answers) == 20
              and set(answers) == {raw}, f"{len(answers)} answers, {len(set(answers))} distinct")
        A.still_serving("re-sent registrations and request ids")

        # --- many scope registrations
        many = f"adv-many-{os.urandom(4).hex()}"
        peer = A.peer(identity=f"{many}/m".encode())
        A.answer(peer, message("hello", {"worker": many, "lastRevision": 0}))
        kinds = {}
        last = None
        deadline = Deadline(30)
        for window in range(0, 4097, 500):  # a polite client: 500 at a time, reading the answers, heartbeating
            numbers = range(window + 1, min(window + 501, 4098))
            for number in numbers:
                peer.send(message("scope-register", {"worker": many, "registration": number, "path": "Adv.many",
                                                     "source": "adv.nothing", "form": "bool"}))
            peer.send(message("heartbeat", {"worker": many, "revision": 0}))
            count = 0
            while count < len(numbers) and not deadline.passed():
                value, problem, _ = parse(peer.receive(deadline.left()))
                if value is None:
                    break
                kind = value["type"] if value["type"] != "error" else value["body"]["code"]
                if kind == "welcome":
                    continue
                count += 1
                kinds[kind] = kinds.get(kind, 0) + 1
                last = value
        peer.send(message("scope-register", {"worker": many, "registration": 17, "path": "Adv.many",
                                             "source": "adv.nothing", "form": "bool"}))
        value, problem = None, "no answer"
        deadline = Deadline(5)
        while not deadline.passed():
            value, problem, _ = parse(peer.receive(deadline.left()))
            if value is None or value.get("type") != "welcome":
                break
        check("re-sending a held registration number at the limit is allowed",
              value is not None and value.get("type") == "scope-registered", problem or repr(value))
        peer.close()
        A.still_serving("4,097 scope registrations")

        # --- a pipelining peer: every request gets its reply (cogwire.md §4 step 4)
        worker = f"adv-pipe-{os.urandom(4).hex()}"
        pipe = A.peer()
        for seq in range(1, 4001):
            pipe.send(A.op_frame(worker, seq, "adv.nope", None, raw_argument=b""))
        seen = set()
        deadline = Deadline(15)
        while len(seen) < 4000 and not deadline.passed():
            frames = pipe.receive(min(1.0, deadline.left()))
            if frames is None:
                if A.leader.alive() and len(seen) > 0:
                    break  # a second of silence after replies stopped: the rest are not coming
                continue
            value, problem, _ = parse(frames)
            if value is not None and value.get("type") == "reply":
                seen.add(value["body"]["request"]["seq"])
        pipe.close()
        check("4,000 requests pipelined by one peer all get their replies", len(seen) == 4000,
              f"{len(seen)} of 4000 answered")
        A.still_serving("4,000 pipelined requests")

        # --- snapshots and catch-ups never read, a subscriber that never reads
        worker = f"adv-fill-{os.urandom(4).hex()}"
        fill = A.peer()
        for seq in range(1, 101):
            fill.send(A.op_frame(worker, seq, "ledger.open", {"account": f"fill-{seq:03d}-" + "f" * 1000, "balance": 1}))
        got = 0
        deadline = Deadline(20)
        while got < 100 and not deadline.passed():
            if fill.receive(deadline.left()):
                got += 1
        fill.close()
        check("100 accounts with 1 KB names open", got == 100, f"{got} replies")
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.setsockopt(zmq.RCVHWM, 1)
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect(leader.turns)
        rss_before = leader.rss_anon_kib()
        hog_name = f"adv-hog-{os.urandom(4).hex()}"
        hog = A.peer(identity=f"{hog_name}/h".encode())
        value, problem, _ = A.answer(hog, message("hello", {"worker": hog_name, "lastRevision": 0}))
        for _ in range(300):
            hog.send(message("snapshot-request"))
        for _ in range(150):
            hog.send(message("catch-up-request", {"from": 1}))
        started = Deadline(0)
        samples = [rss_before or 0]
        probe = f"adv-probe-hog-{os.urandom(4).hex()}"
        value, problem, _ = A.reply(A.op_frame(probe, 1, "ledger.open", {"account": "while-hogged", "balance": 1}),
                                    probe, 1, timeout=30)
        waited = -started.left() if False else time_since(started)
        check("with 300 whole snapshots and 150 catch-ups queued for a peer that never reads, an op is answered",
              value is not None and "applied" in value["body"]["outcome"], problem or repr(value))
        note(f"that op's answer took {waited:.1f} s (cogwire.md §4/§5 give no bound)")
        for _ in range(10):
            samples.append(leader.rss_anon_kib() or 0)
            A.still_serving("a subscriber that never reads")
        rss_after = max(samples)
        note(f"leader RssAnon {rss_before} KiB -> {rss_after} KiB with 300 unread snapshots and 150 unread catch-ups "
             f"of a ~0.3 MB state and a subscriber that never reads (cogwire.md on main documents no limit)")
        check("the leader's memory stays bounded with snapshots and catch-ups never read (+64 MiB at most; issue 13 §5)",
              rss_before is not None and rss_after is not None and rss_after - rss_before < 64 * 1024,
              f"+{(rss_after or 0) - (rss_before or 0)} KiB")
        hog.close()
        sub.close(0)
        A.still_serving("the hog went away")

        # --- the end: nothing refused is stored, the log verifies
        folder = read_folder(leader.data)
        stored = [key for key in A.refused_ids if key in folder["dedup"]]
        check("requests refused bad-request / name-in-use are stored nowhere (no dedup entry)", not stored, repr(stored))
        bad = [(rev, record_problem(raw)) for rev, raw in folder["turns"].items() if record_problem(raw)]
        check("every record in the log has its checksum and shape", not bad, repr(bad[:3]))
        code = leader.stop()
        check("the leader stops cleanly (exit 0)", code == 0, f"exit {code}: {leader.output()[-300:]}")
        verify = leader.cogd_cli("log", "verify", "--data", leader.data)
        check("cogd log verify passes", verify.returncode == 0,
              (verify.stdout + verify.stderr).decode(errors="replace")[-300:])
    finally:
        leader.kill()
        context.destroy(0)
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
