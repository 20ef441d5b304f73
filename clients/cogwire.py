"""Shared pieces of the external clients, written from protocol/ alone.

A strict deterministic-CBOR codec (turnlog.md §4), the record checksum
(turnlog.md §3), a reader of the data folder (turnlog.md §1-2), the leader
process the clients start, and the check bookkeeping (`ok …` / `FAIL …`).
Nothing here is taken from Sources/.
"""
import math
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import zmq

# ---------------------------------------------------------------- the codec


class Tag:
    """A CBOR tag kept as it is (tag 1 stays float seconds, tag 37 bytes)."""

    __slots__ = ("tag", "value")

    def __init__(self, tag, value):
        self.tag, self.value = tag, value

    def __eq__(self, other):
        return isinstance(other, Tag) and (self.tag, self.value) == (other.tag, other.value)

    def __repr__(self):
        return f"Tag({self.tag}, {self.value!r})"


class CBORError(Exception):
    pass


class Strict:
    """Decodes one item and insists on the deterministic form: shortest heads,
    definite lengths, map keys in bytewise order of their encodings, no
    duplicate keys, floats in their shortest exact width, only false/true/null
    simple values, nesting at most 256, no trailing bytes."""

    def __init__(self, data):
        self.data, self.pos = bytes(data), 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise CBORError(f"truncated at byte {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def head(self):
        first = self.take(1)[0]
        major, info = first >> 5, first & 31
        if info < 24:
            return major, info, info
        if info in (24, 25, 26, 27):
            width = 1 << (info - 24)
            arg = int.from_bytes(self.take(width), "big")
            if major != 7:
                floor = {24: 24, 25: 256, 26: 65536, 27: 1 << 32}[info]
                if arg < floor:
                    raise CBORError(f"non-shortest head at byte {self.pos - width - 1}")
            return major, info, arg
        raise CBORError(f"indefinite or reserved length (info {info}) at byte {self.pos - 1}")

    def item(self, depth=0):
        if depth > 256:
            raise CBORError("nesting deeper than 256")
        start = self.pos
        major, info, arg = self.head()
        if major == 0:
            return arg
        if major == 1:
            return -1 - arg
        if major == 2:
            return self.take(arg)
        if major == 3:
            try:
                return self.take(arg).decode("utf-8")
            except UnicodeDecodeError as error:
                raise CBORError(f"text is not UTF-8: {error}") from None
        if major == 4:
            return [self.item(depth + 1) for _ in range(arg)]
        if major == 5:
            result, previous = {}, None
            for _ in range(arg):
                key_start = self.pos
                key = self.item(depth + 1)
                key_bytes = self.data[key_start:self.pos]
                if previous is not None and key_bytes <= previous:
                    raise CBORError(f"map keys out of deterministic order at byte {key_start}")
                previous = key_bytes
                if isinstance(key, (list, dict)):
                    raise CBORError("container as map key")
                result[key] = self.item(depth + 1)
            return result
        if major == 6:
            return Tag(arg, self.item(depth + 1))
        # major 7
        if info == 20:
            return False
        if info == 21:
            return True
        if info == 22:
            return None
        if info in (25, 26, 27):
            raw = self.data[start + 1:self.pos]
            value = struct.unpack({25: ">e", 26: ">f", 27: ">d"}[info], raw)[0]
            if encode(value) != self.data[start:self.pos]:
                raise CBORError(f"float {value!r} not in its shortest exact form at byte {start}")
            return value
        raise CBORError(f"simple value {info} at byte {start}")


def decode(data):
    reader = Strict(data)
    value = reader.item()
    if reader.pos != len(reader.data):
        raise CBORError(f"{len(reader.data) - reader.pos} trailing bytes")
    return value


def item_spans(data, start=0):
    """For an array at `start`, the (start, end) byte spans of its elements."""
    reader = Strict(data)
    reader.pos = start
    major, _, count = reader.head()
    assert major == 4
    spans = []
    for _ in range(count):
        begin = reader.pos
        reader.item()
        spans.append((begin, reader.pos))
    return spans


def _head(major, arg):
    if arg < 24:
        return bytes([major << 5 | arg])
    for info, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if arg < (1 << (8 * width)):
            return bytes([major << 5 | info]) + arg.to_bytes(width, "big")
    raise CBORError(f"integer {arg} does not fit 64 bits")


def encode(value):
    """Deterministic CBOR (turnlog.md §4)."""
    if value is False:
        return b"\xf4"
    if value is True:
        return b"\xf5"
    if value is None:
        return b"\xf6"
    if isinstance(value, int):
        return _head(0, value) if value >= 0 else _head(1, -1 - value)
    if isinstance(value, float):
        if math.isnan(value):
            return b"\xf9\x7e\x00"
        for fmt, lead in ((">e", 0xF9), (">f", 0xFA)):
            try:
                packed = struct.pack(fmt, value)
            except (OverflowError, struct.error):
                continue
            if struct.unpack(fmt, packed)[0] == value:
                return bytes([lead]) + packed
        return b"\xfb" + struct.pack(">d", value)
    if isinstance(value, (bytes, bytearray)):
        return _head(2, len(value)) + bytes(value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return _head(3, len(raw)) + raw
    if isinstance(value, (list, tuple)):
        return _head(4, len(value)) + b"".join(encode(item) for item in value)
    if isinstance(value, dict):
        pairs = sorted((encode(key), encode(item)) for key, item in value.items())
        return _head(5, len(pairs)) + b"".join(key + item for key, item in pairs)
    if isinstance(value, Tag):
        return _head(6, value.tag) + encode(value.value)
    raise CBORError(f"cannot encode {type(value).__name__}")


def message(type_, body=None, v=1):
    frame = {"v": v, "type": type_}
    if body is not None:
        frame["body"] = body
    return encode(frame)


# ---------------------------------------------------------------- checksum


RECORD_PREFIX = bytes([0xA9, 0x63, 0x63, 0x72, 0x63, 0x44])


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def record_problem(record):
    """None when a turn record carries its checksum and the documented shape."""
    if not record.startswith(RECORD_PREFIX) or len(record) <= 10:
        return "does not start with a9 63 63 72 63 44"
    if crc32c(record[:6] + bytes(4) + record[10:]) != int.from_bytes(record[6:10], "big"):
        return "checksum does not match"
    try:
        value = decode(record)
    except CBORError as error:
        return f"not deterministic CBOR: {error}"
    if list(value) != ["crc", "rev", "name", "time", "epoch", "state", "origin", "scopes", "writes"]:
        return f"keys {list(value)}"
    problems = []
    if not (isinstance(value["state"], bytes) and len(value["state"]) == 16):
        problems.append("state")
    if not (isinstance(value["rev"], int) and value["rev"] >= 1):
        problems.append("rev")
    if not isinstance(value["name"], str):
        problems.append("name")
    if not (isinstance(value["time"], Tag) and value["time"].tag == 1 and isinstance(value["time"].value, (int, float))):
        problems.append("time")
    if not (isinstance(value["epoch"], int) and value["epoch"] >= 0):
        problems.append("epoch")
    origin = value["origin"]
    if not isinstance(origin, dict) or not set(origin) <= {"worker", "request", "instance", "digest"}:
        problems.append("origin")
    elif "digest" in origin and not ("request" in origin and isinstance(origin["digest"], bytes) and len(origin["digest"]) == 8):
        problems.append("origin.digest")
    elif "request" in origin and not (isinstance(origin["request"], dict) and set(origin["request"]) == {"seq", "worker"}):
        problems.append("origin.request")
    for event in value["scopes"] if isinstance(value["scopes"], list) else [None]:
        if not isinstance(event, dict) or not {"kind", "instance", "scope", "worker", "registration"} <= set(event) \
                or not set(event) <= {"kind", "instance", "scope", "identity", "worker", "registration"} \
                or event["kind"] not in ("open", "retire"):
            problems.append(f"scope event {event!r}")
    for write in value["writes"] if isinstance(value["writes"], list) else [None]:
        if not isinstance(write, dict) or "name" not in write or not set(write) <= {"name", "key", "value", "released"}:
            problems.append(f"write {write!r}")
        elif ("value" in write) == ("released" in write) or write.get("released", True) is not True:
            problems.append(f"write with both or neither of value/released {write!r}")
    return "; ".join(problems) or None


# ---------------------------------------------------------------- the state digest


def entry_hash(name, encoded_key, encoded_value):
    """turnlog.md §3a: the first 16 bytes of SHA-256 over u32 BE len(name) ‖ name ‖
    u32 BE len(key) ‖ key (empty: keyless) ‖ value, as a big-endian number."""
    import hashlib
    name = name.encode()
    key = encoded_key or b""
    message = len(name).to_bytes(4, "big") + name + len(key).to_bytes(4, "big") + key + encoded_value
    return int.from_bytes(hashlib.sha256(message).digest()[:16], "big")


def state_digest(state):
    """The digest of {(name, encoded key or b""): encoded value}: the entry hashes' sum mod 2^128, 16 bytes."""
    return (sum(entry_hash(name, key, value) for (name, key), value in state.items()) % (1 << 128)).to_bytes(16, "big")


# ---------------------------------------------------------------- the data folder


def state_key(name, encoded_key):
    """The `state` table key of turnlog.md §2 (a digest key above 511 bytes)."""
    import hashlib
    key = name.encode() + b"\x00" + encoded_key
    if len(key) > 511:
        key = name.encode() + b"\x00\xff" + hashlib.sha256(encoded_key).digest()
    return key


def read_folder(path):
    """Everything a reader needs from a data folder (turnlog.md §1-2):
    {"turns": {rev: bytes}, "state": {(name, key bytes): value bytes},
     "dedup": {(worker, seq): digest + frame}, "meta": {name: bytes}, "identity": text}"""
    import lmdb
    env = lmdb.open(path, readonly=True, lock=True, max_dbs=8, subdir=True)
    try:
        result = {"turns": {}, "state": {}, "state_raw": {}, "dedup": {}, "meta": {}}
        with env.begin() as txn:
            for table in ("turns", "state", "dedup", "meta"):
                db = env.open_db(table.encode(), txn=txn, create=False)
                for key, value in txn.cursor(db=db):
                    key, value = bytes(key), bytes(value)
                    if table == "turns":
                        result["turns"][int.from_bytes(key, "big") if len(key) == 8 else key] = value
                    elif table == "state":
                        result["state_raw"][key] = value
                        name, _, rest = key.partition(b"\x00")
                        if rest[:1] == b"\xff":
                            length = int.from_bytes(value[:8], "big")
                            enc_key, value = value[8:8 + length], value[8 + length:]
                        else:
                            enc_key = rest
                        result["state"][(name.decode(), enc_key)] = value
                    elif table == "dedup":
                        name, seq = key[:-9], key[-8:]
                        result["dedup"][(name.decode("utf-8", "replace"), int.from_bytes(seq, "big"))] = value
                    else:
                        result["meta"][key.decode()] = value
    finally:
        env.close()
    identity = os.path.join(path, "cogd.identity")
    result["identity"] = open(identity, "rb").read() if os.path.exists(identity) else None
    return result


# ---------------------------------------------------------------- checks


class Checks:
    def __init__(self, known_gaps):
        self.known_gaps = dict(known_gaps)
        self.passed = self.failed = 0
        self.gaps_hit = []

    def check(self, name, condition, detail=""):
        if name in self.known_gaps:
            if condition:
                print(f"ok   {name} (listed in KNOWN_GAPS but passes now: remove it)")
                self.passed += 1
            else:
                print(f"ok   {name} [KNOWN GAP: {self.known_gaps[name]}] {detail}".rstrip())
                self.gaps_hit.append(name)
                self.passed += 1
            return condition
        if condition:
            print(f"ok   {name}")
            self.passed += 1
        else:
            print(f"FAIL {name}: {detail}")
            self.failed += 1
        sys.stdout.flush()
        return condition

    def summary(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


# ---------------------------------------------------------------- processes


_handed_out = set()


def free_port():
    """A loopback port that binds now, in 10000-14999: below the kernel's
    ephemeral range (32768 and up), so no outgoing connection can take it
    before the server given it binds, and apart from the ranges the Swift
    tests pick from (15000-32767); never the same one twice in a process."""
    for _ in range(1000):
        port = random.randint(10000, 14999)
        if port in _handed_out:
            continue
        _handed_out.add(port)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port between 10000 and 14999")


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def passed(self):
        return time.monotonic() >= self.end


class Leader:
    """A `cogd leader` child over a fresh folder, on loopback ports of its own."""

    def __init__(self, cogd, extra=(), data=None, probe_curve=None):
        self.cogd = cogd
        self.probe_curve = probe_curve  # (public, secret, leader public) the readiness probe connects with
        self.tmp = tempfile.mkdtemp(prefix="cogd-ext-")
        self.data = data or os.path.join(self.tmp, "data")
        self.requests = f"tcp://127.0.0.1:{free_port()}"
        self.turns = f"tcp://127.0.0.1:{free_port()}"
        self.extra = list(extra)
        self.process = None

    def start(self, context, timeout=20):
        self.log = open(os.path.join(self.tmp, "leader.log"), "ab")
        self.process = subprocess.Popen(
            [self.cogd, "leader", "--data", self.data, "--requests", self.requests, "--turns", self.turns,
             "--rig", "ledger", "--commit-cpu", "none"] + self.extra,
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        # Ready when it answers a status-request (bounded).
        deadline = Deadline(timeout)
        while not deadline.passed():
            if self.process.poll() is not None:
                raise RuntimeError(f"leader exited {self.process.returncode}: {self.output()}")
            tool = Peer(context, self.requests, curve=self.probe_curve)
            try:
                answer = tool.ask(message("status-request"), timeout=min(1.0, deadline.left()))
                if answer is not None:
                    return self
            finally:
                tool.close()
        raise RuntimeError("leader did not answer a status-request within the deadline")

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def output(self):
        try:
            return open(os.path.join(self.tmp, "leader.log"), "rb").read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, timeout=10):
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        code = self.process.returncode
        self.process = None
        self.log.close()
        return code

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def rss_anon_kib(self):
        try:
            for line in open(f"/proc/{self.process.pid}/status"):
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def cogd_cli(self, *args, timeout=30):
        return subprocess.run([self.cogd, *args], capture_output=True, timeout=timeout)


class Peer:
    """A DEALER on the requests endpoint."""

    counter = 0

    def __init__(self, context, endpoint, identity=None, curve=None, monitor=False):
        """`curve`: (own public key, own secret key, the leader's public key), Z85 text or bytes,
        for a leader that authenticates (cogwire.md §9); None speaks the NULL mechanism.
        `monitor`: watch the connection's handshake (`handshake()`)."""
        Peer.counter += 1
        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVHWM, 0)
        self.socket.setsockopt(zmq.SNDHWM, 0)
        self.socket.setsockopt(zmq.SNDTIMEO, 5000)  # a DEALER with no connection made blocks a send: never for ever
        self.socket.setsockopt(zmq.IDENTITY, identity or f"tool/{os.getpid()}-{Peer.counter}-{os.urandom(4).hex()}".encode())
        set_curve_client(self.socket, curve)
        self.monitor = HandshakeMonitor(self.socket) if monitor else None
        self.socket.connect(endpoint)

    def handshake(self, timeout):
        return self.monitor.outcome(timeout)

    def drain(self):
        """Drops whatever is waiting (late answers of earlier requests)."""
        while self.socket.poll(0, zmq.POLLIN):
            self.socket.recv_multipart()

    def send(self, frame):
        self.socket.send(frame)

    def receive(self, timeout):
        """One message's frames, or None after `timeout` seconds."""
        if self.socket.poll(int(timeout * 1000), zmq.POLLIN):
            return self.socket.recv_multipart()
        return None

    def ask(self, frame, timeout=5.0):
        self.send(frame)
        frames = self.receive(timeout)
        return None if frames is None else frames

    def close(self):
        if self.monitor is not None:
            self.monitor.close()
        self.socket.close(0)


# ---------------------------------------------------------------- CURVE (cogwire.md §9)

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_key_problem(text):
    """None when `text` is a CURVE key as cogwire.md §9 "Key files" spells one."""
    if len(text) != 40:
        return f"{len(text)} characters, not 40"
    if any(ch not in Z85_ALPHABET for ch in text):
        return "a character outside Z85"
    for group in range(0, 40, 5):
        value = 0
        for ch in text[group:group + 5]:
            value = value * 85 + Z85_ALPHABET.index(ch)
        if value >= 1 << 32:
            return f"group {group // 5} encodes {value}, not below 2^32"
    return None


def read_key_file(path):
    """(kind, key) of a key file (`secret-key` or `public-key`, Z85 text), parsed as §9 "Key files" says."""
    data = open(path, "rb").read()
    if len(data) > 4096:
        raise ValueError(f"{path}: {len(data)} bytes, more than 4,096")
    found = []
    for line in data.decode("utf-8").split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        stripped = line.strip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        found.append(stripped)
    if len(found) != 1:
        raise ValueError(f"{path}: {len(found)} key lines, not one")
    kind, equals, key = found[0].partition("=")
    kind, key = kind.strip(" \t"), key.strip(" \t")
    if not equals or kind not in ("secret-key", "public-key") or z85_key_problem(key):
        raise ValueError(f"{path}: not a key line: {found[0]!r}")
    return kind, key


def write_key_pair(directory, name):
    """A key pair made with pyzmq, written as `cogd keys generate` documents it (NAME.key 0600, NAME.pub 0644).
    Returns (public, secret) as Z85 text."""
    public, secret = (key.decode() for key in zmq.curve_keypair())
    secret_path = os.path.join(directory, f"{name}.key")
    fd = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"# cogd CURVE key pair {name}: the secret key. Keep it readable by its owner only (chmod 600).\n"
                  f"secret-key = {secret}\n")
    with open(os.path.join(directory, f"{name}.pub"), "w") as out:
        out.write(f"# cogd CURVE key pair {name}: the public key.\npublic-key =\t{public}  \n")
    os.chmod(os.path.join(directory, f"{name}.pub"), 0o644)
    return public, secret


def set_curve_client(socket, curve):
    if curve is None:
        return
    public, secret, server = (key.encode() if isinstance(key, str) else key for key in curve)
    socket.setsockopt(zmq.CURVE_SERVERKEY, server)
    socket.setsockopt(zmq.CURVE_PUBLICKEY, public)
    socket.setsockopt(zmq.CURVE_SECRETKEY, secret)


def event_name(number):
    try:
        return zmq.Event(number).name.lower()
    except ValueError:
        return f"event-{number}"


class HandshakeMonitor:
    """What became of a socket's handshakes (ZMQ_EVENT_HANDSHAKE_*), from its monitor."""

    EVENTS = {zmq.EVENT_HANDSHAKE_SUCCEEDED: "succeeded", zmq.EVENT_HANDSHAKE_FAILED_AUTH: "failed-auth",
              zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "failed-protocol",
              zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "failed-no-detail"}

    def __init__(self, socket):
        self.monitor = socket.get_monitor_socket()
        self.seen = []  # (event name, value) in order, every event

    def outcome(self, timeout):
        """The first handshake outcome: ("succeeded", 0), ("failed-auth", ZAP status), … or None within `timeout`."""
        from zmq.utils.monitor import recv_monitor_message
        for name, value in self.seen:
            if name in self.EVENTS.values():
                return name, value
        deadline = Deadline(timeout)
        while self.monitor.poll(int(deadline.left() * 1000), zmq.POLLIN):
            event = recv_monitor_message(self.monitor)
            name = self.EVENTS.get(event["event"]) or event_name(event["event"])
            self.seen.append((name, int(event["value"])))
            if event["event"] in self.EVENTS:
                return name, int(event["value"])
            if deadline.passed():
                break
        return None

    def wait_for(self, wanted, timeout, after=0):
        """The first event named `wanted` among those seen from index `after` on: (name, value), or None."""
        from zmq.utils.monitor import recv_monitor_message
        deadline = Deadline(timeout)
        while True:
            for name, value in self.seen[after:]:
                if name == wanted:
                    return name, value
            after = len(self.seen)
            if deadline.passed() or not self.monitor.poll(int(deadline.left() * 1000), zmq.POLLIN):
                return None
            event = recv_monitor_message(self.monitor)
            self.seen.append((self.EVENTS.get(event["event"]) or event_name(event["event"]), int(event["value"])))

    def close(self):
        self.monitor.close(0)


class Subscriber:
    """A SUB on the turn stream, subscribed to everything, NULL or CURVE."""

    def __init__(self, context, endpoint, curve=None):
        self.socket = context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.SUBSCRIBE, b"")
        set_curve_client(self.socket, curve)
        self.monitor = HandshakeMonitor(self.socket)
        self.socket.connect(endpoint)
        self.revisions = []  # of every record received
        self.problems = []

    def handshake(self, timeout):
        return self.monitor.outcome(timeout)

    def read(self, timeout=0.0):
        """Reads what has come (waiting up to `timeout` for the first message); returns the revisions read."""
        got = []
        wait = int(timeout * 1000)
        while self.socket.poll(wait, zmq.POLLIN):
            wait = 0
            value, problem, _ = parse(self.socket.recv_multipart())
            if problem or message_problem(value, "turns"):
                self.problems.append(problem or message_problem(value, "turns"))
                continue
            got.extend(record.get("rev") for record in value["body"]["records"])
        self.revisions.extend(got)
        return got

    def close(self):
        self.monitor.close()
        self.socket.close(0)


def parse(frames):
    """A received message: (decoded frame or None, problem or None, raw frame)."""
    if frames is None:
        return None, "no answer", None
    if len(frames) != 1:
        return None, f"{len(frames)} frames", None
    try:
        return decode(frames[0]), None, frames[0]
    except CBORError as error:
        return None, f"not deterministic CBOR: {error}", frames[0]


def envelope_problem(value):
    if not isinstance(value, dict):
        return "not a map"
    if value.get("v") != 1 or type(value.get("v")) is not int:
        return f"v is {value.get('v')!r}"
    if not isinstance(value.get("type"), str):
        return "type is not text"
    if not set(value) <= {"v", "type", "body"}:
        return f"extra envelope keys {sorted(set(value) - {'v', 'type', 'body'})}"
    return None


def is_uint(value):
    return type(value) is int and 0 <= value < 1 << 64


def shape_problem(value, shape, path="body"):
    """Checks a decoded body against a shape: {key: (type-check, required)}."""
    if not isinstance(value, dict):
        return f"{path} is not a map: {value!r}"
    for key in value:
        if key not in shape:
            return f"{path} has undocumented key {key!r}"
    for key, (check, required) in shape.items():
        if key not in value:
            if required:
                return f"{path} lacks {key!r}"
            continue
        problem = check(value[key], f"{path}.{key}") if callable(check) else None
        if problem:
            return problem
    return None


def t_uint(value, path):
    return None if is_uint(value) else f"{path} is not a uint: {value!r}"


def t_text(value, path):
    return None if isinstance(value, str) else f"{path} is not text: {value!r}"


def t_bytes(value, path):
    return None if isinstance(value, bytes) else f"{path} is not bytes: {value!r}"


def t_bool(value, path):
    return None if isinstance(value, bool) else f"{path} is not a bool: {value!r}"


def t_map(value, path):
    return None if isinstance(value, dict) else f"{path} is not a map: {value!r}"


def t_any(value, path):
    return None


def t_list_of(check):
    def inner(value, path):
        if not isinstance(value, list):
            return f"{path} is not an array"
        for index, item in enumerate(value):
            problem = check(item, f"{path}.{index}")
            if problem:
                return problem
        return None
    return inner


def t_shape(shape):
    return lambda value, path: shape_problem(value, shape, path)


REQUEST_ID = {"worker": (t_text, True), "seq": (t_uint, True)}

def t_true(value, path):
    return None if value is True else f"{path} is not true: {value!r}"


SHAPES = {
    "welcome": {"epoch": (t_uint, True), "lastRevision": (t_uint, True), "turns": (t_text, True),
                "lastSequence": (t_uint, False), "group": (t_text, False)},
    "snapshot": {"epoch": (t_uint, True), "revision": (t_uint, True),
                 "entries": (t_list_of(t_shape({"name": (t_text, True), "key": (t_bytes, False),
                                                "value": (t_bytes, True)})), True),
                 "part": (t_uint, False), "more": (t_bool, False), "stateDigest": (t_bytes, False)},
    "turns": {"epoch": (t_uint, True), "records": (t_list_of(t_map), True)},
    "reply": {"request": (t_shape(REQUEST_ID), True), "outcome": (t_map, True), "earlier": (t_true, False)},
    "error": {"code": (t_text, True), "message": (t_text, True), "request": (t_shape(REQUEST_ID), False)},
    "scope-registered": {"worker": (t_text, True), "registration": (t_uint, True), "revision": (t_uint, True),
                         "instances": (t_list_of(t_shape({"identity": (t_bytes, True), "instance": (t_uint, True)})), True)},
}


def answered_earlier(first_raw, retry_raw):
    """cogwire.md §4: a retry answered from dedup is the first reply with
    "earlier": true added to its body, nothing else changed."""
    if first_raw is None or retry_raw is None:
        return False
    first, retry = decode(first_raw), decode(retry_raw)
    return "earlier" not in first["body"] and retry == {**first, "body": {**first["body"], "earlier": True}}


def rejection_code(outcome):
    """The code of a rejected outcome (cogwire.md §4, "Rejection codes"):
    its code field, or, from an earlier leader, the reason's text before ': '."""
    rejected = (outcome or {}).get("rejected")
    if not isinstance(rejected, dict):
        return None
    if "code" in rejected:
        return rejected["code"]
    reason = rejected.get("reason", "")
    return reason.split(": ", 1)[0] if ": " in reason else None


def refusal(outcome):
    """(code, reason) of an outcome the op's body refused (cogwire.md §4,
    "Refusals"): a rejected outcome carrying `refusal`; None for any other."""
    rejected = (outcome or {}).get("rejected")
    if not isinstance(rejected, dict) or not isinstance(rejected.get("refusal"), dict):
        return None
    return rejected["refusal"].get("code"), rejected["refusal"].get("reason")


def outcome_problem(outcome):
    if not isinstance(outcome, dict) or len(outcome) != 1:
        return f"outcome is not a one-key map: {outcome!r}"
    (kind, value), = outcome.items()
    if kind == "applied":
        return shape_problem(value, {"revision": (t_uint, True)}, "outcome.applied")
    if kind == "unchanged":
        return None if value == {} else f"unchanged carries {value!r}"
    if kind == "rejected":
        # cogwire.md §3: code and detail as fields, and reason, "code: detail",
        # for earlier readers; an earlier leader sends reason alone. A refusal
        # (§4, "Refusals") adds its own code and reason in `refusal`, under the code "refused".
        problem = shape_problem(value, {"code": (t_text, False), "detail": (t_text, False), "reason": (t_text, True),
                                        "refusal": (t_shape({"code": (t_text, True), "reason": (t_text, True)}), False)},
                                "outcome.rejected")
        if problem:
            return problem
        if "refusal" in value:
            own = value["refusal"]
            if value.get("code") != "refused" or value.get("detail") != f"{own['code']}: {own['reason']}":
                return f"outcome.rejected carries a refusal but not code 'refused' and detail 'code: reason': {value!r}"
        if ("code" in value) != ("detail" in value):
            return f"outcome.rejected has one of code and detail without the other: {value!r}"
        if "code" in value and value["reason"] != f"{value['code']}: {value['detail']}":
            return f"outcome.rejected reason is not 'code: detail': {value!r}"
        return None
    return f"unknown outcome {kind!r}"


def message_problem(value, expected_type=None):
    """None when a decoded message matches cogwire.md §2-3 exactly."""
    problem = envelope_problem(value)
    if problem:
        return problem
    kind = value["type"]
    if expected_type is not None and kind != expected_type:
        return f"type {kind!r}, expected {expected_type!r}" + (f" ({value.get('body')!r})" if kind == "error" else "")
    if kind in SHAPES:
        if "body" not in value:
            return f"{kind} without body"
        problem = shape_problem(value["body"], SHAPES[kind])
        if problem:
            return problem
        if kind == "reply":
            return outcome_problem(value["body"]["outcome"])
        if kind == "turns":
            return None
    return None


def request_digest(op, argument):
    """turnlog.md §3: the first 8 bytes of SHA-256 over op, 0x00, argument."""
    import hashlib
    return hashlib.sha256(op.encode("utf-8") + b"\x00" + argument).digest()[:8]
