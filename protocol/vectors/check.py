#!/usr/bin/env python3
"""Checks protocol/vectors/{turnlog,cogwire}/*.cbor with an off-the-shelf CBOR library,
and the peers files of security/ with a parser written from cogwire.md §9.

For every vector: the bytes decode with cbor2, the decoded value equals the
expectation in expected.json (where one is listed), and re-encoding the
decoded value with cbor2's canonical (deterministic) encoder gives the same
bytes back. Every turn record (turnlog/turn-record-*, and each record of
cogwire/turns) must also carry its checksum (turnlog.md §3): it starts with
a9 63 63 72 63 44 and bytes 6..10 are the CRC-32C, big-endian, of the whole
record with those four bytes taken as zero.

State digests (turnlog.md §3a) are computed here with hashlib, from the
definition alone: the state-digest vector's entry hashes and sum; the
records' `state` along the vectors' story (revision 1 from the empty state;
42, 43 and 44 from the state-digest vector's state, the state after 41);
the turns message's record from the empty state; the heartbeat's and the
snapshot part's `stateDigest` (the state after 42).

Run: pip install cbor2 && python3 protocol/vectors/check.py
"""
import base64
import datetime
import hashlib
import json
import re
import pathlib
import sys
import uuid

import cbor2

HERE = pathlib.Path(__file__).parent
FOLDERS = [HERE / "turnlog", HERE / "cogwire"]


def crc32c(data):
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


RECORD_PREFIX = bytes([0xA9, 0x63, 0x63, 0x72, 0x63, 0x44])


def record_checksum_problem(record):
    """None when a turn record's bytes carry their own checksum, else what is wrong."""
    if not record.startswith(RECORD_PREFIX) or len(record) <= 10:
        return "a turn record must start with a9 63 63 72 63 44 (its crc field)"
    computed = crc32c(record[:6] + bytes(4) + record[10:])
    stored = int.from_bytes(record[6:10], "big")
    if computed != stored:
        return f"crc {stored:08x} stored, {computed:08x} computed"
    return None


def entry_hash(name, key, value):
    """An entry's hash (turnlog.md §3a): the first 16 bytes of SHA-256 over the
    name's and the encoded key's lengths (u32 big-endian) and bytes, then the
    encoded value, as a big-endian number. `key` None: a keyless source."""
    name = name.encode()
    key = key or b""
    message = len(name).to_bytes(4, "big") + name + len(key).to_bytes(4, "big") + key + value
    return int.from_bytes(hashlib.sha256(message).digest()[:16], "big")


def state_digest(state):
    """The digest of a state {(name, key): value}: the sum of its entry hashes mod 2^128, as 16 bytes."""
    total = sum(entry_hash(name, key, value) for (name, key), value in state.items())
    return (total % (1 << 128)).to_bytes(16, "big")


def embedded(item):
    """The bytes of a key or value embedded in a record (the vectors are canonical)."""
    return cbor2.dumps(item, canonical=True, datetime_as_timestamp=True, timezone=datetime.timezone.utc)


def replay(state, record):
    """The state after a record's writes: a value sets its entry, a release removes it."""
    state = dict(state)
    for write in record["writes"]:
        entry = (write["name"], embedded(write["key"]) if "key" in write else None)
        if write.get("released") is True:
            state.pop(entry, None)
        else:
            state[entry] = embedded(write["value"])
    return state


def digest_problems():
    """What is wrong with the state digests the vectors carry, computed from scratch."""
    problems = []
    load = lambda name: cbor2.loads((HERE / name).read_bytes())  # noqa: E731
    vector = load("turnlog/state-digest.cbor")
    state = {}
    for entry in vector["entries"]:
        computed = entry_hash(entry["name"], entry.get("key"), entry["value"]).to_bytes(16, "big")
        if computed != entry["hash"]:
            problems.append(f"state-digest: entry {entry['name']}: hash {entry['hash'].hex()}, computed {computed.hex()}")
        state[(entry["name"], entry.get("key"))] = entry["value"]
    if state_digest(state) != vector["state"]:
        problems.append(f"state-digest: state {vector['state'].hex()}, computed {state_digest(state).hex()}")
    story = [("turn-record-system", {})]
    after = state
    for name in ["turn-record-request", "turn-record-nil-value", "turn-record-retirement"]:
        story.append((name, after))
        after = replay(after, load(f"turnlog/{name}.cbor"))
    after_42 = replay(state, load("turnlog/turn-record-request.cbor"))
    for name, before in story:
        record = load(f"turnlog/{name}.cbor")
        if record["state"] != state_digest(replay(before, record)):
            problems.append(f"{name}: state {record['state'].hex()}, computed {state_digest(replay(before, record)).hex()}")
    turns = load("cogwire/turns.cbor")["body"]["records"][0]
    if turns["state"] != state_digest(replay({}, turns)):
        problems.append(f"cogwire/turns: state {turns['state'].hex()}, computed {state_digest(replay({}, turns)).hex()}")
    for name in ["cogwire/heartbeat", "cogwire/snapshot-part"]:
        if load(f"{name}.cbor")["body"]["stateDigest"] != state_digest(after_42):
            problems.append(f"{name}: stateDigest is not the state's after revision 42 ({state_digest(after_42).hex()})")
    return problems


def plain(value):
    """The decoded value in JSON's terms, for comparison with expected.json."""
    if isinstance(value, cbor2.CBORTag):
        return {"tag": value.tag, "value": plain(value.value)}
    if isinstance(value, datetime.datetime):
        return {"tag": 1, "value": value.timestamp()}
    if isinstance(value, uuid.UUID):
        return {"tag": 37, "value": str(value).upper()}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def is_key(text):
    """A CURVE key in Z85: 40 characters, each group of five below 2^32."""
    if len(text) != 40 or any(c not in Z85 for c in text):
        return False
    for group in range(0, 40, 5):
        value = 0
        for c in text[group:group + 5]:
            value = value * 85 + Z85.index(c)
        if value >= 1 << 32:
            return False
    return True


def overlaps(a, b):
    """Whether some name matches both patterns (cogwire.md §9)."""
    if a.endswith("*") and b.endswith("*"):
        return a[:-1].startswith(b[:-1]) or b[:-1].startswith(a[:-1])
    if a.endswith("*"):
        return b.startswith(a[:-1])
    if b.endswith("*"):
        return a.startswith(b[:-1])
    return a == b


def parse_peers(text):
    """The peers file's lines (cogwire.md §9), or ("refused", line)."""
    peers = []
    for number, line in enumerate(text.split("\n"), start=1):
        fields = [field for field in line.replace("\t", " ").replace("\r", " ").split(" ") if field]
        for index, field in enumerate(fields):
            if field.startswith("#"):
                fields = fields[:index]
                break
        if not fields:
            continue
        if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in "".join(fields)):
            return ("refused", number)
        if len(fields) < 3 or not is_key(fields[0]) or fields[1] not in ("worker", "client", "observer", "standby"):
            return ("refused", number)
        key, role, name, ops = fields[0], fields[1], fields[2], fields[3:]
        # A standby's name is its node's (ha.md §1): 1 to 64 of A-Z a-z 0-9 _ . -, one key per node.
        if role == "standby" and (not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name)
                                  or any(peer["role"] == "standby" and peer["name"] == name for peer in peers)):
            return ("refused", number)
        if any("*" in pattern[:-1] or len(pattern.encode()) > 255 for pattern in [name] + ops):
            return ("refused", number)
        if (role == "client") != bool(ops):
            return ("refused", number)
        if any(peer["key"] == key for peer in peers):
            return ("refused", number)
        if role in ("worker", "client") and any(peer["role"] in ("worker", "client") and overlaps(peer["name"], name) for peer in peers):
            return ("refused", number)
        peers.append({"line": number, "key": key, "role": role, "name": name, "ops": ops})
    return peers


def peers_problems(expected):
    """The security/ vectors: each peers file parses (or is refused at its line) as expected.json says."""
    problems = []
    files = sorted((HERE / "security").glob("peers*"))
    for path in files:
        name = f"security/{path.name}"
        parsed = parse_peers(path.read_bytes().decode("utf-8"))
        if isinstance(parsed, tuple):
            parsed = {"refused": {"line": parsed[1]}}
        if name not in expected:
            problems.append(f"{name}: no expectation in expected.json")
        elif parsed != expected[name]:
            problems.append(f"{name}: parsed {parsed!r}, expected {expected[name]!r}")
    return problems, len(files)


def main():
    expected = json.loads((HERE / "expected.json").read_text())
    failures = 0
    files = [path for folder in FOLDERS for path in sorted(folder.glob("*.cbor"))]
    for path in files:
        data = path.read_bytes()
        name = path.stem if path.parent.name == "turnlog" else f"{path.parent.name}/{path.stem}"
        try:
            decoded = cbor2.loads(data)
        except Exception as error:  # noqa: BLE001 - report any decoder failure
            print(f"FAIL {name}: cbor2 cannot decode: {error}")
            failures += 1
            continue
        if name in expected and plain(decoded) != expected[name]:
            print(f"FAIL {name}: decoded {plain(decoded)!r}, expected {expected[name]!r}")
            failures += 1
            continue
        reencoded = cbor2.dumps(decoded, canonical=True, datetime_as_timestamp=True, timezone=datetime.timezone.utc)
        records = []
        if name.startswith("turn-record-"):
            records = [data]
        elif name == "shipped-commit":
            records = decoded["records"]
        elif name == "cogwire/turns":
            records = [cbor2.dumps(record, canonical=True, datetime_as_timestamp=True, timezone=datetime.timezone.utc)
                       for record in decoded["body"]["records"]]
        problems = [problem for problem in map(record_checksum_problem, records) if problem]
        if problems:
            print(f"FAIL {name}: {problems[0]}")
            failures += 1
            continue
        if reencoded != data:
            print(f"FAIL {name}: canonical re-encoding differs: {reencoded.hex()} != {data.hex()}")
            failures += 1
            continue
        print(f"ok   {name}")
    problems = digest_problems()
    for problem in problems:
        print(f"FAIL {problem}")
    if not problems:
        print("ok   state digests (computed with hashlib)")
    peer_problems, peer_files = peers_problems(expected)
    for problem in peer_problems:
        print(f"FAIL {problem}")
    if not peer_problems:
        print(f"ok   {peer_files} peers files (parsed by the rules of cogwire.md §9)")
    print(f"{len(files) - failures} passed, {failures} failed, state digests {'wrong' if problems else 'right'}, "
          f"peers files {'wrong' if peer_problems else 'right'}")
    return 1 if failures or problems or peer_problems else 0


if __name__ == "__main__":
    sys.exit(main())
