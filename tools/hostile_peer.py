#!/usr/bin/env python3
"""tools/hostile-peer's checks: a hostile local peer against the real registryd, as real users.

Two modes, both started by tools/hostile-peer (never by hand):

  hostile_peer.py run --binary REGISTRYD --workdir DIR --group GROUP [--only NAME,...]
      As root: for each check, starts the daemon in DIR/<check>/ (its own configuration, socket,
      data directory and log), runs the check's clients as the test users and prints one line,
      `PASS name: figures` or `FAIL name: figures`. Exits 1 when a check failed.

  hostile_peer.py client TASK
      Run as a test user (setpriv --reuid --regid --init-groups): reads its arguments as one JSON
      line on standard input, talks to the socket, and writes JSON lines on standard output.

Frames are built with the Python client's generated code (clients/python/registryd_client,
copied next to this file), or by hand where a frame must be what no client would send.
"""

from __future__ import annotations

import base64
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

from registryd_client import registry_pb2 as pb

MAXIMUM_FRAME = 4 * 1024 * 1024
ARCFACE = 24
CODE = {value: name.replace("ERROR_CODE_", "") for name, value in pb.ErrorCode.items()}
PERMISSION_DENIED = pb.ERROR_CODE_PERMISSION_DENIED
MALFORMED = pb.ERROR_CODE_MALFORMED_REQUEST
TOO_MANY = pb.ERROR_CODE_TOO_MANY_CONNECTIONS

# The users tools/hostile-peer creates (their names are its, too).
NONE_USER = "hp-none"
ADMIN_USER = "hp-admin"
FAIR_USERS = ("hp-a", "hp-b")


# --------------------------------------------------------------------------------------------
# Wire helpers (both modes)


def frame(message: bytes) -> bytes:
    return struct.pack(">I", len(message)) + message


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def fields(data: bytes) -> List[Tuple[int, int, object]]:
    """The top-level fields of a protobuf message: (number, wire type, value: int or bytes)."""
    out = []
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, i = read_varint(data, i)
        elif kind == 1:
            value, i = data[i : i + 8], i + 8
        elif kind == 2:
            length, i = read_varint(data, i)
            value, i = data[i : i + length], i + length
        elif kind == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {kind}")
        out.append((number, kind, value))
    return out


def read_varint(data: bytes, i: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def unit_vector(rng: random.Random, dimension: int = 128) -> List[float]:
    values = [rng.gauss(0, 1) for _ in range(dimension)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def face(rng: random.Random) -> pb.Face:
    f = pb.Face()
    f.templates.add(algorithm=ARCFACE, vector=unit_vector(rng))
    return f


class Connection:
    """One client connection: send frames, read whole responses."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""

    def send(self, request: pb.Request) -> None:
        self.sock.sendall(frame(request.SerializeToString()))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_raw(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """One response's bytes; None at EOF (or a reset), socket.timeout past the timeout."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        header = self._exactly(4)
        if header is None:
            return None
        body = self._exactly(struct.unpack(">I", header)[0])
        return body

    def read(self, timeout: Optional[float] = None) -> Optional[pb.Response]:
        raw = self.read_raw(timeout)
        if raw is None:
            return None
        response = pb.Response()
        response.ParseFromString(raw)
        return response

    def _exactly(self, count: int) -> Optional[bytes]:
        while len(self.buffer) < count:
            try:
                chunk = self.sock.recv(max(65536, count - len(self.buffer)))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        out, self.buffer = self.buffer[:count], self.buffer[count:]
        return out

    def call(self, request: pb.Request, timeout: float = 30.0) -> Optional[pb.Response]:
        try:
            self.send(request)
        except (BrokenPipeError, ConnectionResetError):
            # A refused connection (TOO_MANY_CONNECTIONS) may be closed before the request is
            # written; the refusal is still there to read.
            pass
        return self.read(timeout)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def describe(response: Optional[pb.Response]) -> str:
    if response is None:
        return "no reply (connection closed)"
    if response.WhichOneof("result") == "error":
        return CODE.get(response.error.code, str(response.error.code))
    return "ok:" + str(response.WhichOneof("result"))


def explain(response: Optional[pb.Response]) -> str:
    """describe(), plus the daemon's message for an error other than PERMISSION_DENIED."""
    text = describe(response)
    if response is not None and response.WhichOneof("result") == "error" and response.error.code != PERMISSION_DENIED:
        text += f" ({response.error.message[:100]})"
    return text


def error_code(response: Optional[pb.Response]) -> Optional[int]:
    if response is not None and response.WhichOneof("result") == "error":
        return response.error.code
    return None


def hello(request_id: int, name: str = "hostile-peer") -> pb.Request:
    r = pb.Request(id=request_id)
    r.hello.protocol_major = 1
    r.hello.protocol_minor = 1
    r.hello.client_name = name
    return r


def list_galleries(request_id: int) -> pb.Request:
    r = pb.Request(id=request_id)
    r.list_galleries.SetInParent()
    return r


# --------------------------------------------------------------------------------------------
# Client mode: run as a test user


def client_main(task: str) -> int:
    args = json.loads(sys.stdin.readline())
    handler = {
        "exchange": task_exchange,
        "refusals": task_refusals,
        "big-frames": task_big_frames,
        "hold": task_hold,
        "shell": task_shell,
    }[task]
    handler(args)
    return 0


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def task_exchange(args: dict) -> None:
    """Sends the frames (base64) on one connection, then reads until a reply with `until_id`
    arrives, EOF, or the timeout; every reply's bytes come back."""
    conn = Connection(args["socket"])
    replies: List[str] = []
    eof = False
    try:
        for data in args["frames"]:
            conn.send_raw(base64.b64decode(data))
        deadline = time.monotonic() + args.get("timeout", 15.0)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                raw = conn.read_raw(left)
            except socket.timeout:
                break
            if raw is None:
                eof = True
                break
            replies.append(base64.b64encode(raw).decode())
            response = pb.Response()
            response.ParseFromString(raw)
            if response.id == args["until_id"]:
                break
    except (BrokenPipeError, ConnectionResetError) as error:
        eof = True
        emit({"replies": replies, "eof": eof, "send_error": str(error)})
        return
    finally:
        conn.close()
    emit({"replies": replies, "eof": eof})


def refusal_requests(start_id: int, count: int, rng: random.Random) -> List[bytes]:
    """`count` requests hp-none has no right for, long-ish but valid names, operations mixed."""
    template = face(rng)
    long_gallery = "g" * 60
    out = []
    for n in range(count):
        i = start_id + n
        identifier = ("hostile-" * 24)[:180] + f"-{i}"
        gallery = f"{long_gallery}{i % 10000:04d}"  # 64 bytes, valid, unknown: the right decides first
        r = pb.Request(id=i)
        kind = i % 8
        if kind == 0:
            r.register.gallery = "default"
            r.register.identifier = identifier
            r.register.face.CopyFrom(template)
        elif kind == 1:
            r.authenticate.gallery = "default"
            r.authenticate.identifier = identifier
            r.authenticate.face.CopyFrom(template)
        elif kind == 2:
            r.list_identifiers.gallery = gallery
        elif kind == 3:
            r.get_templates.gallery = "default"
            r.get_templates.identifier = identifier
        elif kind == 4:
            r.delete_identifier.gallery = gallery
            r.delete_identifier.identifier = identifier
        elif kind == 5:
            r.export.gallery = gallery
        elif kind == 6:
            r.identify.gallery = gallery
            r.identify.face.CopyFrom(template)
        else:
            r.audit.identifier = identifier
        out.append(frame(r.SerializeToString()))
    return out


def task_refusals(args: dict) -> None:
    """`count` refused requests pipelined over `connections` connections; counts the replies."""
    count, connections = args["count"], args["connections"]
    rng = random.Random(7)
    per = count // connections
    batches = [refusal_requests(1 + c * per, per, rng) for c in range(connections)]
    results: List[Dict[str, object]] = [dict() for _ in range(connections)]

    def one(index: int) -> None:
        results[index] = {"answered": 0, "codes": {}, "eof": True}
        try:
            conn = Connection(args["socket"], timeout=60)
        except OSError as error:
            results[index]["error"] = f"connect: {error}"
            return
        codes: Dict[str, int] = {}
        answered = 0
        eof = False

        def writer() -> None:
            try:
                # A few frames per send: fewer system calls, the daemon still cuts them one by one.
                frames = batches[index]
                for k in range(0, len(frames), 32):
                    conn.send_raw(b"".join(frames[k : k + 32]))
            except OSError:
                pass

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            while answered < per:
                response = conn.read(60)
                if response is None:
                    eof = True
                    break
                answered += 1
                code = describe(response)
                codes[code] = codes.get(code, 0) + 1
        except socket.timeout:
            pass
        thread.join(5)
        conn.close()
        results[index] = {"answered": answered, "codes": codes, "eof": eof}

    started = time.monotonic()
    threads = [threading.Thread(target=one, args=(c,)) for c in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - started
    codes: Dict[str, int] = {}
    for r in results:
        for k, v in r["codes"].items():  # type: ignore[union-attr]
            codes[k] = codes.get(k, 0) + v
    emit({
        "sent": per * connections,
        "answered": sum(int(r["answered"]) for r in results),  # type: ignore[arg-type]
        "codes": codes,
        "eofs": sum(1 for r in results if r["eof"]),
        "errors": [r["error"] for r in results if r.get("error")],
        "seconds": seconds,
    })


def big_frame_tail() -> Tuple[bytes, int]:
    """A Request's bytes after its id field: `register` whose Face holds as many empty `templates`
    entries (`0a 00`) as fit, the frame (with an id of up to 3 varint bytes) under 4 MiB."""
    identifier = b"flood"
    count = (MAXIMUM_FRAME - 64) // 2
    while True:
        face_bytes = b"\x0a\x00" * count
        register = b"\x12" + varint(len(identifier)) + identifier + b"\x1a" + varint(len(face_bytes)) + face_bytes
        tail = b"\x52" + varint(len(register)) + register
        if 1 + 3 + len(tail) <= MAXIMUM_FRAME:
            return tail, count
        count -= 8


def task_big_frames(args: dict) -> None:
    """Back-to-back ~4 MB frames on `connections` connections for `seconds`; counts the answers."""
    tail, templates = big_frame_tail()
    seconds, connections = args["seconds"], args["connections"]
    stats = [{"sent": 0, "answered": 0, "codes": {}, "eof": False, "error": ""} for _ in range(connections)]
    emit({"event": "built", "frame_bytes": 1 + 3 + len(tail), "templates": templates})
    conns = [Connection(args["socket"], timeout=60) for _ in range(connections)]
    stop_at = time.monotonic() + seconds

    def writer(index: int) -> None:
        conn = conns[index]
        request_id = 1
        try:
            while time.monotonic() < stop_at:
                # The 4 MB tail is sent as it is, not copied per frame: the client's own memory
                # traffic would compete with the daemon for the machine's cores.
                head = b"\x08" + varint(request_id)
                conn.send_raw(struct.pack(">I", len(head) + len(tail)) + head)
                conn.send_raw(tail)
                stats[index]["sent"] += 1
                request_id += 1
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError as error:
            stats[index]["error"] = str(error)

    def reader(index: int) -> None:
        conn = conns[index]
        try:
            while True:
                response = conn.read(args.get("drain_timeout", 30))
                if response is None:
                    stats[index]["eof"] = True
                    return
                stats[index]["answered"] += 1
                code = describe(response)
                stats[index]["codes"][code] = stats[index]["codes"].get(code, 0) + 1
        except (socket.timeout, OSError):
            return

    writers = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(connections)]
    readers = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(connections)]
    for t in writers + readers:
        t.start()
    emit({"event": "started"})
    for t in writers:
        t.join(seconds + 60)
    emit({"event": "sent"})
    for t in readers:
        t.join(args.get("drain_timeout", 30) + 5)
    for c in conns:
        c.close()
    codes: Dict[str, int] = {}
    for s in stats:
        for k, v in s["codes"].items():  # type: ignore[union-attr]
            codes[k] = codes.get(k, 0) + v
    emit({
        "event": "result",
        "sent": sum(int(s["sent"]) for s in stats),  # type: ignore[arg-type]
        "answered": sum(int(s["answered"]) for s in stats),  # type: ignore[arg-type]
        "codes": codes,
        "errors": [s["error"] for s in stats if s["error"]],
    })


def task_hold(args: dict) -> None:
    """Opens connections until the daemon refuses one (each says hello, so none is an idle
    never-spoke connection the daemon may close to make room), reports how many it holds, then
    keeps them, saying hello now and then, until its standard input closes."""
    held: List[Connection] = []
    refusal = ""
    refusals = 0
    request_id = 1
    while len(held) < args["maximum"] and refusals < 3:
        try:
            conn = Connection(args["socket"], timeout=10)
            response = conn.call(hello(request_id, "hostile-peer-hold"))
            request_id += 1
        except OSError as error:
            refusal = f"connect: {error}"
            refusals += 1
            time.sleep(0.1)
            continue
        if response is not None and response.WhichOneof("result") == "hello":
            held.append(conn)
            refusals = 0
        else:
            refusal = describe(response)
            refusals += 1
            conn.close()
            time.sleep(0.1)
    emit({"held": len(held), "refusal": refusal})
    lost = 0
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 5.0)
        if ready and not sys.stdin.readline():
            break
        for conn in list(held):
            try:
                if conn.call(hello(request_id, "hostile-peer-hold"), timeout=10) is None:
                    raise OSError("closed")
                request_id += 1
            except OSError:
                held.remove(conn)
                lost += 1
    for conn in held:
        conn.close()
    emit({"held_at_end": len(held), "lost": lost})


def task_shell(args: dict) -> None:
    """A file system action as the user (planting a symlink, making a directory)."""
    action = args["action"]
    try:
        if action == "symlink":
            os.symlink(args["target"], args["path"])
        elif action == "symlinks":
            for path in args["paths"]:
                os.symlink(args["target"], path)
        elif action == "mkdir":
            os.mkdir(args["path"], 0o755)
        emit({"ok": True})
    except OSError as error:
        emit({"ok": False, "error": str(error)})


# --------------------------------------------------------------------------------------------
# Run mode: as root


class ScriptError(Exception):
    """The check could not be carried out (not a verdict on the daemon)."""


class Daemon:
    """The real registryd in its own directory, as root, its socket handed to the clients' group."""

    def __init__(self, run: "Runner", name: str, extra: Optional[dict] = None) -> None:
        self.run = run
        self.extra = extra or {}
        self.directory = os.path.join(run.workdir, name)
        os.makedirs(self.directory, exist_ok=True)
        os.chmod(self.directory, 0o755)
        self.socket = os.path.join(self.directory, "registryd.sock")
        self.data = os.path.join(self.directory, "data")
        self.log_path = os.path.join(self.directory, "registryd.log")
        self.config_path = os.path.join(self.directory, "registryd.json")
        self.process: Optional[subprocess.Popen] = None

    def configuration(self) -> dict:
        registries = [
            {"algorithm": "arcface", "authentication": 0.6, "identification": 0.6, "autoEnrolment": 0.6},
            {"algorithm": "r300"},
            {"algorithm": "dlib"},
            {"algorithm": "landmarks"},
        ]
        only_root = ["uid:0"]
        return {
            "socketPath": self.socket,
            "dataDirectory": self.data,
            "logLevel": "info",
            "galleries": [
                {"name": "default", "registries": registries},
                {"name": "alpha", "registries": [{"algorithm": "arcface"}]},
            ],
            "access": {
                # Store-wide (and every gallery without an entry of its own): hp-admin is an admin.
                "*": {"identify": only_root, "enrol": only_root, "admin": ["uid:0", f"user:{ADMIN_USER}"]},
                # alpha's own entry leaves hp-admin out.
                "alpha": {"identify": only_root, "enrol": only_root, "admin": only_root},
            },
            **self.extra,
        }

    def start(self) -> "Daemon":
        with open(self.config_path, "w") as f:
            json.dump(self.configuration(), f, indent=2)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [self.run.binary, "--config", self.config_path],
            cwd=self.directory, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        with open(os.path.join(self.run.workdir, "daemon.pids"), "a") as f:
            f.write(f"{self.process.pid}\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ScriptError(f"registryd exited ({self.status()}) at start: {self.log_tail()}")
            if os.path.exists(self.socket) and os.path.exists(os.path.join(self.data, "data.mdb")):
                try:
                    conn = Connection(self.socket, timeout=10)
                    ok = conn.call(list_galleries(1)) is not None
                    conn.close()
                    if ok:
                        break
                except OSError:
                    pass
            time.sleep(0.05)
        else:
            raise ScriptError(f"registryd did not answer on {self.socket} within 60 s: {self.log_tail()}")
        # registryd has no configuration key for its socket's group or mode: started by hand it
        # makes the socket 0660 in its own group (root's here); under systemd the .socket unit's
        # SocketGroup= hands it to the group `registryd`. The same is done here by hand: the socket
        # is given to the test users' group (mode left as the daemon made it).
        os.chown(self.socket, -1, self.run.gid)
        mode = os.stat(self.socket).st_mode & 0o777
        if mode != 0o660:
            raise ScriptError(f"the daemon's socket has mode {mode:o}, not 660")
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def status(self) -> str:
        if self.process is None or self.process.returncode is None:
            return "running"
        code = self.process.returncode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name} (exit {128 - code})"
        return f"exited {code}"

    def answers(self) -> bool:
        try:
            conn = Connection(self.socket, timeout=10)
            response = conn.call(list_galleries(99))
            conn.close()
            return response is not None and response.WhichOneof("result") == "list_galleries"
        except OSError:
            return False

    def log_tail(self, lines: int = 5) -> str:
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def crash_line(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                for line in f.read().decode(errors="replace").splitlines():
                    if "Fatal error" in line or "fatal" in line.lower():
                        return line.strip()[:240]
        except OSError:
            pass
        return ""

    def stop(self) -> str:
        if self.process is None:
            return "not started"
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return "did not stop within 40 s of SIGTERM (killed)"
        return self.status()

    def root(self, timeout: float = 30.0) -> Connection:
        return Connection(self.socket, timeout=timeout)


class Runner:
    def __init__(self, binary: str, workdir: str, group: str) -> None:
        import grp
        import pwd

        self.binary = binary
        self.workdir = workdir
        self.gid = grp.getgrnam(group).gr_gid
        self.uids = {}
        for user in (NONE_USER, ADMIN_USER) + FAIR_USERS:
            try:
                self.uids[user] = pwd.getpwnam(user).pw_uid
            except KeyError:
                raise ScriptError(f"user {user} does not exist (tools/hostile-peer creates it)")
        self.failed = 0
        self.flood_latency = 0.050
        self.rng = random.Random(int.from_bytes(os.urandom(4), "big"))

    # -- running clients as a user

    def client(self, user: str, task: str, args: dict, timeout: float = 120) -> List[dict]:
        process = self.start_client(user, task, args)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            raise ScriptError(f"client {task} as {user} took over {timeout} s: {err.strip()[-400:]}")
        if process.returncode != 0:
            raise ScriptError(f"client {task} as {user} exited {process.returncode}: {err.strip()[-600:]}")
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def start_client(self, user: str, task: str, args: dict) -> subprocess.Popen:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
                   sys.executable, os.path.abspath(__file__), "client", task]
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.path.dirname(os.path.abspath(__file__)), "LANG": "C.UTF-8"}
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=env, cwd=self.workdir)
        assert process.stdin is not None
        process.stdin.write(json.dumps(args) + "\n")
        process.stdin.flush()
        return process

    def exchange(self, user: str, daemon: Daemon, requests: List[pb.Request], until_id: int,
                 timeout: float = 15.0) -> Tuple[List[pb.Response], bool]:
        frames = [base64.b64encode(frame(r.SerializeToString())).decode() for r in requests]
        result = self.client(user, "exchange", {"socket": daemon.socket, "frames": frames,
                                                "until_id": until_id, "timeout": timeout})[-1]
        replies = []
        for raw in result["replies"]:
            response = pb.Response()
            response.ParseFromString(base64.b64decode(raw))
            replies.append(response)
        return replies, bool(result["eof"])

    def one(self, user: str, daemon: Daemon, request: pb.Request) -> Optional[pb.Response]:
        """One request as `user`, on a connection of its own; its reply (None: none came)."""
        replies, _ = self.exchange(user, daemon, [request], request.id)
        return replies[0] if replies else None

    # -- reporting

    def report(self, name: str, passed: bool, figures: str) -> None:
        if not passed:
            self.failed += 1
        print(f"{'PASS' if passed else 'FAIL'} {name}: {figures}", flush=True)

    # -- setup helpers (as root)

    def register(self, conn: Connection, request_id: int, gallery: str, identifier: str) -> pb.Response:
        r = pb.Request(id=request_id)
        r.register.gallery = gallery
        r.register.identifier = identifier
        r.register.face.CopyFrom(face(self.rng))
        response = conn.call(r)
        if response is None or response.WhichOneof("result") != "register":
            raise ScriptError(f"root could not register {identifier} in {gallery}: {describe(response)}"
                              f" {response.error.message if response is not None else ''}")
        return response

    def audit_entries(self, conn: Connection, request_id: int, **query) -> Optional[pb.Response]:
        r = pb.Request(id=request_id)
        r.audit.SetInParent()
        for key, value in query.items():
            setattr(r.audit, key, value)
        return conn.call(r, timeout=60)

    # -- the checks ---------------------------------------------------------------------------

    def check_long_fields(self) -> None:
        """a: long identifier and gallery names, as hp-none; one reply each, and the daemon lives."""
        cases = []
        long_identifier = "i" * 70_000
        r = pb.Request(id=1)
        r.authenticate.identifier = long_identifier
        r.authenticate.face.CopyFrom(face(self.rng))
        cases.append(("authenticate identifier 70000 B", r))
        for size in (65_535, 65_536, 1 << 20):
            r = pb.Request(id=1)
            r.list_identifiers.gallery = "g" * size
            cases.append((f"list_identifiers gallery {size} B", r))
            r = pb.Request(id=1)
            r.authenticate.gallery = "g" * size
            r.authenticate.identifier = "someone"
            r.authenticate.face.CopyFrom(face(self.rng))
            cases.append((f"authenticate gallery {size} B", r))
        figures = []
        passed = True
        crashes_seen = set()
        for index, (label, request) in enumerate(cases):
            daemon = Daemon(self, f"a{index}").start()
            try:
                replies, eof = self.exchange(NONE_USER, daemon, [request, list_galleries(2)], until_id=2)
                time.sleep(0.5)  # audit entries are written within 100 ms, after the reply
                first = [x for x in replies if x.id in (0, 1)]
                followed = any(x.id == 2 for x in replies)
                alive = daemon.alive()
                answers = alive and daemon.answers()
                ok = (len(first) == 1 and error_code(first[0]) in (MALFORMED, PERMISSION_DENIED)
                      and followed and alive and answers)
                what = "/".join(describe(x) for x in first) or "no reply"
                text = f"{label}: {len(first)} {'reply' if len(first) == 1 else 'replies'} ({what})"
                if not followed:
                    text += ", next request on the connection unanswered"
                if not alive:
                    text += f", daemon {daemon.status()}"
                    crash = daemon.crash_line()
                    if crash and crash not in crashes_seen:
                        crashes_seen.add(crash)
                        text += f" [{crash}]"
                elif not answers:
                    text += ", daemon alive but not answering"
                figures.append(text)
                passed = passed and ok
            finally:
                daemon.stop()
        self.report("long-fields", passed, "; ".join(figures))

    def check_refusal_flood(self) -> None:
        """b: 100,000 refused requests must not grow the store or the log by 1 MiB, nor push an
        earlier audit entry out."""
        count = 100_000
        daemon = Daemon(self, "b").start()
        try:
            root = daemon.root()
            witness = "flood-witness"
            self.register(root, 1, "default", witness)
            found = False
            for _ in range(40):
                response = self.audit_entries(root, 2, identifier=witness, limit=10)
                if response is not None and any(e.operation == "register" and witness in e.identifiers
                                                 for e in response.audit.entries):
                    found = True
                    break
                time.sleep(0.1)
            if not found:
                raise ScriptError(f"root's register of {witness} is not in the audit trail: {describe(response)}")
            time.sleep(0.5)
            mdb = os.path.join(daemon.data, "data.mdb")
            store_before = os.stat(mdb).st_size
            log_before = os.stat(daemon.log_path).st_size
            result = self.client(NONE_USER, "refusals", {"socket": daemon.socket, "count": count,
                                                         "connections": 4}, timeout=600)[-1]
            time.sleep(1.5)  # the audit's group commits, erasure's commit
            alive = daemon.alive()
            store_growth = os.stat(mdb).st_size - store_before
            log_growth = os.stat(daemon.log_path).st_size - log_before
            still = False
            if alive:
                response = self.audit_entries(root, 3, identifier=witness, limit=10)
                still = response is not None and any(e.operation == "register" and witness in e.identifiers
                                                     for e in response.audit.entries)
            root.close()
            denied = result["codes"].get("PERMISSION_DENIED", 0)
            passed = (store_growth < (1 << 20) and log_growth < (1 << 20) and still and alive
                      and result["answered"] == count and denied == count)
            codes = ", ".join(f"{k} {v}" for k, v in sorted(result["codes"].items()))
            figures = (f"{result['answered']}/{result['sent']} refused requests answered in {result['seconds']:.1f} s"
                       f" ({codes}); data.mdb grew {store_growth} B, the log {log_growth} B (limit 1048576 each);"
                       f" root's earlier audit entry {'still returned' if still else 'NOT returned'}")
            self.report("refusal-flood", passed, figures + self.flood_trailer(result, daemon, alive, ""))
        finally:
            daemon.stop()

    @staticmethod
    def flood_trailer(result: dict, daemon: "Daemon", alive: bool, label: str) -> str:
        """What a flood check adds to its figures: the client's first error, and a dead daemon's status."""
        trailer = f"; {label}{result['errors'][0]}" if result.get("errors") else ""
        return trailer + ("" if alive else f"; daemon {daemon.status()}")

    def check_store_wide_rights(self) -> None:
        """c: hp-admin, admin in `*` but not in alpha's entry, must not reach alpha's people through
        the store-wide operations."""
        daemon = Daemon(self, "c")
        # The backup root the engineer's fix defaults to (<dataDirectory>-backups), made ahead so
        # that today's daemon, which needs an existing parent, can be asked for a copy inside it.
        backup_root = daemon.data + "-backups"
        os.makedirs(backup_root, mode=0o700, exist_ok=True)
        daemon.start()
        try:
            root = daemon.root()
            self.register(root, 1, "alpha", "alice-in-alpha")
            self.register(root, 2, "default", "bob-in-default")
            time.sleep(0.5)
            root.close()
            key_file = os.path.join(daemon.directory, "store.key")
            with open(key_file, "w") as f:
                f.write(os.urandom(32).hex() + "\n")
            os.chmod(key_file, 0o600)
            checks = []
            passed = True

            def expect_denied(label: str, request: pb.Request) -> None:
                nonlocal passed
                response = self.one(ADMIN_USER, daemon, request)
                ok = error_code(response) == PERMISSION_DENIED
                passed = passed and ok
                checks.append(f"{label} {explain(response)}")

            # The control: hp-admin is an admin where the policy says so (the refusals below are not
            # a policy that failed to name it).
            r = pb.Request(id=1)
            r.list_identifiers.gallery = "default"
            response = self.one(ADMIN_USER, daemon, r)
            control = response is not None and response.WhichOneof("result") == "list_identifiers"
            passed = passed and control
            checks.append(f"control: list_identifiers default {explain(response)}"
                          + (f" ({len(response.list_identifiers.identifiers)} identifiers)" if control else " (hp-admin should be an admin there)"))

            r = pb.Request(id=1)
            r.list_identifiers.gallery = "alpha"
            expect_denied("list_identifiers alpha", r)

            r = pb.Request(id=1)
            r.audit.limit = 10_000
            response = self.one(ADMIN_USER, daemon, r)
            if error_code(response) is not None:
                checks.append(f"audit {describe(response)}")
            elif response is not None and response.WhichOneof("result") == "audit":
                entries = response.audit.entries
                alpha = sum(1 for e in entries if e.gallery == "alpha")
                alice = sum(1 for e in entries if "alice-in-alpha" in e.identifiers)
                ok = alpha == 0 and alice == 0
                passed = passed and ok
                checks.append(f"audit answered {len(entries)} entries, {alpha} in alpha, {alice} naming alice-in-alpha")
            else:
                passed = False
                checks.append(f"audit {describe(response)}")

            r = pb.Request(id=1)
            r.backup.directory = ""
            expect_denied("backup (root)", r)
            r = pb.Request(id=1)
            r.backup.directory = os.path.join(backup_root, "by-hp-admin")
            expect_denied("backup into the backup root", r)
            if os.path.exists(os.path.join(backup_root, "by-hp-admin")):
                checks[-1] += " (and the copy was written)"
            r = pb.Request(id=1)
            r.verify.SetInParent()
            expect_denied("verify", r)
            r = pb.Request(id=1)
            r.export.gallery = "alpha"
            expect_denied("export alpha", r)
            r = pb.Request(id=1)
            r.set_encryption_key.key_file = key_file
            expect_denied("set_encryption_key", r)
            self.report("store-wide-rights", passed, "; ".join(checks))
        finally:
            daemon.stop()

    def check_backup_paths(self) -> None:
        """d: root's backups go only to the configured backup root; never somewhere a peer chose or
        planted."""
        daemon = Daemon(self, "d")
        # The backup root (the fix's default, <dataDirectory>-backups) exists, root's, 0700: a path
        # that climbs out of it with .. then reaches a directory today's daemon can create.
        backup_root = daemon.data + "-backups"
        os.makedirs(backup_root, mode=0o700)
        peer_dir = os.path.join(daemon.directory, "hp-none-dir")
        os.makedirs(peer_dir)
        os.chown(peer_dir, self.uids[NONE_USER], -1)
        os.chmod(peer_dir, 0o755)
        # Where a planted symlink points: a root-only directory the peer cannot write itself.
        secret = os.path.join(daemon.directory, "root-only")
        os.makedirs(secret, mode=0o700)
        daemon.start()
        try:
            planted = os.path.join(peer_dir, "link")
            result = self.client(NONE_USER, "shell", {"action": "symlink", "target": secret, "path": planted})[-1]
            if not result["ok"]:
                raise ScriptError(f"hp-none could not plant a symlink in its directory: {result.get('error')}")
            dangling = os.path.join(peer_dir, "dangling")
            result = self.client(NONE_USER, "shell", {"action": "symlink",
                                                      "target": os.path.join(secret, "planted-copy"), "path": dangling})[-1]
            if not result["ok"]:
                raise ScriptError(f"hp-none could not plant a symlink: {result.get('error')}")

            def listing() -> Dict[str, List[str]]:
                out = {}
                for d in (peer_dir, secret, daemon.data, daemon.directory):
                    out[d] = sorted(os.listdir(d))
                return out

            cases = [
                ("a directory of hp-none's", os.path.join(peer_dir, "copy")),
                ("a relative path", "relative-copy"),
                ("inside the data directory", os.path.join(daemon.data, "copy")),
                ("the data directory itself", daemon.data),
                ("through hp-none's symlink", os.path.join(planted, "copy")),
                ("hp-none's dangling symlink", dangling),
                ("the backup root, then ..", os.path.join(backup_root, "..", "hp-none-dir", "escape")),
            ]
            conn = daemon.root(timeout=120)
            figures = []
            passed = True
            for index, (label, path) in enumerate(cases):
                before = listing()
                r = pb.Request(id=10 + index)
                r.backup.directory = path
                response = conn.call(r, timeout=120)
                after = listing()
                created = sorted(f"{d}/{n}" for d in after for n in set(after[d]) - set(before[d]))
                created = [c.replace(daemon.directory + "/", "") for c in created]
                ok = error_code(response) == PERMISSION_DENIED and not created
                passed = passed and ok
                text = f"{label} {explain(response)}"
                if created:
                    text += f" (created {', '.join(created)})"
                figures.append(text)
            # The positive control: an empty directory means the backup root; the reply names the copy.
            r = pb.Request(id=30)
            r.backup.directory = ""
            response = conn.call(r, timeout=120)
            conn.close()
            written = ""
            if response is not None and response.WhichOneof("result") == "backup":
                raw = response.SerializeToString()
                backup_bytes = [v for n, k, v in fields(raw) if n == 32][0]
                names = [v for n, k, v in fields(backup_bytes) if n == 2 and k == 2]
                written = names[0].decode() if names else ""
                inside = (written.startswith(backup_root + "/") and os.path.isdir(written)
                          and not os.path.islink(written) and os.path.exists(os.path.join(written, "data.mdb")))
                figures.append(f"the root (empty directory) ok, {response.backup.bytes} B into "
                               f"{written or '(no directory field in the reply)'}" + ("" if inside else " NOT a copy in the backup root"))
                passed = passed and inside
            else:
                passed = False
                figures.append(f"the root (empty directory) {describe(response)}"
                               + (f" ({response.error.message})" if error_code(response) is not None else ""))
        finally:
            daemon.stop()
        shared_passed, shared_figure = self.backup_into_a_shared_directory()
        figures.append(shared_figure)
        self.report("backup-paths", passed and shared_passed, "; ".join(figures))

    def backup_into_a_shared_directory(self) -> Tuple[bool, str]:
        """d, continued: an allowed directory hp-none may write (backup.allowedDirectories), where it
        has planted links at every name the daemon may choose (the UTC time, now to 20 s ahead, with
        -2 and -3): the copy must not go through any of them."""
        label = "an allowed directory hp-none writes, links planted at the next names"
        directory = os.path.join(self.workdir, "d-shared")
        os.makedirs(directory)
        shared = os.path.join(directory, "shared")
        os.makedirs(shared)
        os.chown(shared, self.uids[NONE_USER], -1)
        os.chmod(shared, 0o755)
        secret = os.path.join(directory, "root-only")
        os.makedirs(secret, mode=0o700)
        daemon = Daemon(self, "d-shared", {"backup": {"allowedDirectories": [shared]}})
        try:
            daemon.start()
        except ScriptError as error:
            return False, f"{label}: the daemon did not start with backup.allowedDirectories ({str(error)[:200]})"
        try:
            now = int(time.time())
            names = []
            for t in range(now - 1, now + 21):
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))
                names += [stamp, f"{stamp}-2", f"{stamp}-3"]
            result = self.client(NONE_USER, "shell", {"action": "symlinks", "target": secret,
                                                      "paths": [os.path.join(shared, n) for n in names]})[-1]
            if not result["ok"]:
                raise ScriptError(f"hp-none could not plant links in its directory: {result.get('error')}")
            conn = daemon.root(timeout=120)
            r = pb.Request(id=1)
            r.backup.directory = shared
            response = conn.call(r, timeout=120)
            conn.close()
            leaked = sorted(os.listdir(secret))
            if response is not None and response.WhichOneof("result") == "backup":
                raw = response.SerializeToString()
                backup_bytes = [v for n, k, v in fields(raw) if n == 32][0]
                names_written = [v for n, k, v in fields(backup_bytes) if n == 2 and k == 2]
                written = names_written[0].decode() if names_written else ""
                info = os.lstat(written) if written and os.path.lexists(written) else None
                real = (info is not None and os.path.dirname(written.rstrip("/")) == shared
                        and not os.path.islink(written) and os.path.isdir(written)
                        and info.st_uid == 0 and info.st_mode & 0o777 == 0o700)
                ok = real and not leaked
                text = (f"{label}: ok, into {os.path.basename(written) or '(no directory field in the reply)'}"
                        + ("" if real else " (NOT a directory of root's, 0700, in the allowed directory)"))
            else:
                ok = error_code(response) is not None and not leaked
                text = f"{label}: {explain(response)}"
            if leaked:
                text += f" (written through a link: root-only/{', root-only/'.join(leaked)})"
            return ok, text
        finally:
            daemon.stop()

    def check_frame_flood(self) -> None:
        """e: 4 MB frames decoding to millions of empty templates, as hp-none, must not hold up
        root's cheap requests beyond the bound (--flood-latency-ms, 50 by default)."""
        daemon = Daemon(self, "e").start()
        try:
            root = daemon.root(timeout=60)
            self.register(root, 1, "default", "latency-probe")
            request_id = 100

            def probe() -> float:
                nonlocal request_id
                request_id += 1
                if request_id % 2:
                    r = list_galleries(request_id)
                else:
                    r = pb.Request(id=request_id)
                    r.authenticate.identifier = "latency-probe"
                    r.authenticate.face.CopyFrom(probe_face)
                    r.authenticate.auto_enrol = False
                started = time.monotonic()
                response = root.call(r, timeout=60)
                elapsed = time.monotonic() - started
                if response is None or error_code(response) is not None:
                    raise ScriptError(f"root's probe got {describe(response)}")
                return elapsed

            probe_face = face(self.rng)
            quiet = [probe() for _ in range(40)]
            flood = self.start_client(NONE_USER, "big-frames", {"socket": daemon.socket, "connections": 4,
                                                                "seconds": 5, "drain_timeout": 30})
            assert flood.stdout is not None
            built = json.loads(flood.stdout.readline() or "{}")
            started = json.loads(flood.stdout.readline() or "{}")
            if started.get("event") != "started":
                flood.kill()
                raise ScriptError(f"the flood client did not start: {flood.stderr.read()[-400:] if flood.stderr else ''}")
            latencies = []
            t0 = time.monotonic()
            while flood.poll() is None and time.monotonic() - t0 < 60:
                latencies.append(probe())
                time.sleep(0.01)
            out, err = flood.communicate(timeout=60)
            lines = [json.loads(x) for x in out.splitlines() if x.strip()]
            result = [x for x in lines if x.get("event") == "result"]
            if not result:
                raise ScriptError(f"the flood client gave no result: {err[-400:]}")
            result = result[0]
            root.close()
            alive = daemon.alive()
            latencies.sort()
            worst = latencies[-1] if latencies else float("nan")
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else float("nan")
            codes = ", ".join(f"{k} {v}" for k, v in sorted(result["codes"].items())) or "none"
            passed = bool(latencies) and worst < self.flood_latency and alive
            figures = (f"root's {len(latencies)} requests during the flood: max {worst * 1000:.1f} ms,"
                       f" p99 {p99 * 1000:.1f} ms (quiet: max {max(quiet) * 1000:.1f} ms);"
                       f" {result['sent']} flood frames of {built.get('frame_bytes')} B"
                       f" ({built.get('templates')} empty templates) sent on 4 connections,"
                       f" {result['answered']} answered ({codes})")
            self.report("frame-flood", passed, figures + self.flood_trailer(result, daemon, alive, "send errors: "))
        finally:
            daemon.stop()

    def check_connection_fairness(self) -> None:
        """f: two users holding every connection they can get must not lock root out."""
        daemon = Daemon(self, "f").start()
        holders = []
        try:
            counts = {}
            for user in FAIR_USERS:
                process = self.start_client(user, "hold", {"socket": daemon.socket, "maximum": 400})
                holders.append(process)
                assert process.stdout is not None
                ready, _, _ = select.select([process.stdout], [], [], 120)
                line = process.stdout.readline() if ready else ""
                if not line:
                    raise ScriptError(f"{user}'s connections did not report: "
                                      f"{process.stderr.read()[-400:] if process.stderr and process.poll() is not None else 'timeout'}")
                counts[user] = json.loads(line)
            answer = None
            error = ""
            try:
                conn = daemon.root(timeout=10)
                answer = conn.call(list_galleries(1), timeout=10)
                conn.close()
            except OSError as e:
                error = str(e)
            answered = answer is not None and answer.WhichOneof("result") == "list_galleries"
            held = ", ".join(f"{u} held {counts[u]['held']} (then {counts[u]['refusal'] or 'no refusal'})" for u in FAIR_USERS)
            figures = f"{held}; root: {describe(answer) if not error else error}"
            if not daemon.alive():
                figures += f"; daemon {daemon.status()}"
            self.report("connection-fairness", answered, figures)
        finally:
            for process in holders:
                try:
                    assert process.stdin is not None
                    process.stdin.close()
                    process.wait(30)
                except Exception:
                    process.kill()
            daemon.stop()


CHECKS = [
    ("long-fields", "check_long_fields"),
    ("refusal-flood", "check_refusal_flood"),
    ("store-wide-rights", "check_store_wide_rights"),
    ("backup-paths", "check_backup_paths"),
    ("frame-flood", "check_frame_flood"),
    ("connection-fairness", "check_connection_fairness"),
]


def run_main(argv: List[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="hostile_peer.py run")
    parser.add_argument("--binary", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--flood-latency-ms", type=float, default=50.0)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("hostile_peer.py: run as root (tools/hostile-peer does)", file=sys.stderr)
        return 2
    # SIGTERM (tools/hostile-peer interrupted, or its timeout) unwinds: each check's `finally` stops its daemon.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(143))
    wanted = [x for x in args.only.split(",") if x]
    unknown = set(wanted) - {name for name, _ in CHECKS}
    if unknown:
        print(f"hostile_peer.py: no check named {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    try:
        runner = Runner(os.path.abspath(args.binary), args.workdir, args.group)
        runner.flood_latency = args.flood_latency_ms / 1000
    except ScriptError as error:
        print(f"hostile_peer.py: {error}", file=sys.stderr)
        return 2
    ran = 0
    for name, method in CHECKS:
        if wanted and name not in wanted:
            continue
        ran += 1
        try:
            getattr(runner, method)()
        except (ScriptError, OSError, subprocess.SubprocessError, ValueError) as error:
            # Not a verdict on the daemon, but the check was not done: that fails too.
            runner.report(name, False, f"the check could not be carried out: {error}")
    print(f"hostile-peer: {runner.failed} of {ran} checks failed" if runner.failed else f"hostile-peer: {ran} checks passed",
          file=sys.stderr)
    return 1 if runner.failed else 0


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "client":
        return client_main(sys.argv[2])
    if len(sys.argv) >= 2 and sys.argv[1] == "run":
        return run_main(sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
