#!/usr/bin/env python3
"""Checks protocol/vectors/{turnlog,cogwire}/*.cbor with an off-the-shelf CBOR library.

For every vector: the bytes decode with cbor2, the decoded value equals the
expectation in expected.json (where one is listed), and re-encoding the
decoded value with cbor2's canonical (deterministic) encoder gives the same
bytes back. Every turn record (turnlog/turn-record-*, and each record of
cogwire/turns) must also carry its checksum (turnlog.md §3): it starts with
a8 63 63 72 63 44 and bytes 6..10 are the CRC-32C, big-endian, of the whole
record with those four bytes taken as zero. Run: pip install cbor2 &&
python3 protocol/vectors/check.py
"""
import base64
import datetime
import json
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


RECORD_PREFIX = bytes([0xA8, 0x63, 0x63, 0x72, 0x63, 0x44])


def record_checksum_problem(record):
    """None when a turn record's bytes carry their own checksum, else what is wrong."""
    if not record.startswith(RECORD_PREFIX) or len(record) <= 10:
        return "a turn record must start with a8 63 63 72 63 44 (its crc field)"
    computed = crc32c(record[:6] + bytes(4) + record[10:])
    stored = int.from_bytes(record[6:10], "big")
    if computed != stored:
        return f"crc {stored:08x} stored, {computed:08x} computed"
    return None


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
    print(f"{len(files) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
