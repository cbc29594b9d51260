"""Test support: a real registryd in a temporary directory, a scripted fake daemon for what a real
one cannot be made to do, and random ArcFace-style faces.

The real daemon is the binary named by the REGISTRYD_BINARY environment variable (clients/python/
run-tests passes its first argument). It is started with ``--socket <tmp>/registryd.sock --data
<tmp>/data`` and stopped with SIGTERM, which must make it exit 0.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Callable, Dict, List, Optional, Sequence

from registryd_client import Face, registry_pb2 as pb
from registryd_client.operations import ENROLMENT_POSES

ARCFACE = 24
DIMENSION = 128
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0


def daemon_binary() -> str:
    binary = os.environ.get("REGISTRYD_BINARY", "")
    if not binary:
        raise RuntimeError("set REGISTRYD_BINARY to a built registryd (clients/python/run-tests does)")
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"REGISTRYD_BINARY={binary} is not an executable file")
    return os.path.abspath(binary)


class Daemon:
    """A registryd serving a fresh store in a temporary directory."""

    def __init__(self, *extra_args: str) -> None:
        self.binary = daemon_binary()
        # Short: a Unix socket path must fit in 108 bytes.
        self.directory = tempfile.mkdtemp(prefix="registryd-py-")
        self.socket_path = os.path.join(self.directory, "registryd.sock")
        self.data_directory = os.path.join(self.directory, "data")
        self.log_path = os.path.join(self.directory, "registryd.log")
        self.extra_args = list(extra_args)
        self.process: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> Daemon:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--socket", self.socket_path, "--data", self.data_directory, *self.extra_args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"registryd exited with {self.process.returncode} at start:\n{self.log()}")
            if self._accepts():
                return self
            time.sleep(0.02)
        self.process.kill()
        raise RuntimeError(
            f"registryd did not listen on {self.socket_path} within {START_TIMEOUT} s:\n{self.log()}"
        )

    def _accepts(self) -> bool:
        if not os.path.exists(self.socket_path):
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(self.socket_path)
            except OSError:
                return False
        return True

    def stop(self, remove: bool = True) -> int:
        """SIGTERM, then the exit status (the directory is removed when it is 0, unless ``remove``
        is false: then :meth:`start` can start the daemon again on the same socket and store)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(
                f"registryd did not exit within {STOP_TIMEOUT} s of SIGTERM:\n{self.log()}"
            ) from None
        if status == 0 and remove:
            shutil.rmtree(self.directory, ignore_errors=True)
        return status

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                return log.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"


class ModuleDaemon:
    """One daemon for a test module: ``setUpModule`` calls :meth:`start`, ``tearDownModule``
    :meth:`stop`, which fails unless SIGTERM ends the daemon with status 0."""

    def __init__(self) -> None:
        self.daemon: Optional[Daemon] = None

    def start(self) -> None:
        self.daemon = Daemon().start()

    def stop(self) -> None:
        assert self.daemon is not None
        status = self.daemon.stop()
        if status != 0:
            raise AssertionError(f"registryd exited with {status} after SIGTERM:\n{self.daemon.log()}")

    @property
    def socket_path(self) -> str:
        assert self.daemon is not None
        return self.daemon.socket_path

    @property
    def directory(self) -> str:
        assert self.daemon is not None
        return self.daemon.directory


def unique(name: str) -> str:
    """A name no other test uses (identifiers, galleries)."""
    return f"{name}-{uuid.uuid4().hex[:12]}"


# ---------------------------------------------------------------------------------------------
# Faces


def random_values(rng: random.Random, dimension: int = DIMENSION) -> List[float]:
    """A random unit vector: two of them score about 0 against each other (far below 0.6)."""
    values = [rng.gauss(0.0, 1.0) for _ in range(dimension)]
    norm = math.sqrt(sum(value * value for value in values))
    return [value / norm for value in values]


def nearby_values(values: Sequence[float], rng: random.Random, noise: float = 0.05) -> List[float]:
    """Another capture of the same face: cosine about 0.85 with ``values`` (above 0.6)."""
    moved = [value + rng.gauss(0.0, noise) for value in values]
    norm = math.sqrt(sum(value * value for value in moved))
    return [value / norm for value in moved]


def arcface(values: Sequence[float]) -> Face:
    return Face.vector(algorithm=ARCFACE, values=values)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def scaled(values: Sequence[float], factor: float = 7919.0) -> List[float]:
    """The vector times ``factor``: the same face for cosine scores (arcface normalises), but values
    whose text cannot be mistaken for anything an error message legitimately holds (scores are in
    [0, 1]; sizes and algorithm ids are integers)."""
    return [value * factor for value in values]


def renderings(values: Sequence[float]) -> List[str]:
    """How the template values of magnitude 10 or more could show up in text: repr, the float32
    rounding the wire carries, and short fixed forms. Each holds a decimal point after at least two
    digits, which no score ("0.875") or integer in a message has, so a match means a leak."""
    texts = []
    for value in values:
        if abs(value) < 10:
            continue
        as_float32 = struct.unpack("<f", struct.pack("<f", value))[0]
        for number in (value, as_float32):
            texts += [repr(number), f"{number:.6g}", f"{number:.2f}", f"{number:.1f}"]
    return texts


def depth_frames(count: int = 5, distance: float = 0.45, flat: bool = False) -> List[pb.DepthFrame]:
    """10 x 10 depth grids of a face-like surface (an ellipsoid with a nose ridge, moving a little
    between frames 600 ms apart) at ``distance`` metres or, with ``flat``, of a photo: what the
    daemon's own end-to-end test of the liveness gate sends (Tests/IntegrationTests)."""
    frames = []
    for index in range(count):
        depths = []
        for row in range(10):
            for column in range(10):
                x = (column - 4.5 + index * 0.15) / 5
                y = (row - 4.5) / 5
                bulge = 0.0 if flat else math.sqrt(max(0.0, 1 - x * x - y * y)) * 0.15
                nose = 0.02 if not flat and abs(x) < 0.15 and abs(y) < 0.4 else 0.0
                noise = 0.0 if flat else ((row * 7 + column * 13 + index * 5) % 11) * 0.0002 - 0.001
                depths.append(distance - bulge - nose + noise)
        frames.append(pb.DepthFrame(depths=depths, timestamp_millis=index * 600))
    return frames


def enrolment_poses() -> Dict[str, List[pb.DepthFrame]]:
    """Five frames for each enrolment pose, closer and further at other distances."""
    distances = {"closer": 0.35, "further": 0.6}
    return {pose: depth_frames(5, distances.get(pose, 0.45)) for pose in ENROLMENT_POSES}


# ---------------------------------------------------------------------------------------------
# A scripted peer


def read_request(connection: socket.socket) -> Optional[pb.Request]:
    header = _read_exactly(connection, 4)
    if header is None:
        return None
    (length,) = struct.unpack(">I", header)
    body = _read_exactly(connection, length) if length else b""
    request = pb.Request()
    request.ParseFromString(body or b"")
    return request


def write_response(connection: socket.socket, response: pb.Response) -> None:
    body = response.SerializeToString()
    connection.sendall(struct.pack(">I", len(body)) + body)


def _read_exactly(connection: socket.socket, size: int) -> Optional[bytes]:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def hello_response(request: pb.Request, major: int = 1) -> pb.Response:
    return pb.Response(
        id=request.id, hello=pb.HelloResult(protocol_major=major, protocol_minor=1, server_version="fake")
    )


class FakeDaemon:
    """A Unix socket served by ``script(connection)`` on a thread, one connection at a time (or, with
    ``concurrent``, each on a thread of its own), for the client behaviours a real daemon cannot be
    made to show (a version mismatch, a wrong id, a response that never comes, answering only after
    many requests arrived, refusing with a code of choice)."""

    def __init__(self, script: Callable[[socket.socket], None], concurrent: bool = False) -> None:
        self.directory = tempfile.mkdtemp(prefix="registryd-fake-")
        self.socket_path = os.path.join(self.directory, "fake.sock")
        self._script = script
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.socket_path)
        self._listener.listen(8)
        self.errors: List[BaseException] = []
        #: Connections accepted so far.
        self.connections = 0
        self._concurrent = concurrent
        self._threads: List[threading.Thread] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            self.connections += 1
            if self._concurrent:
                thread = threading.Thread(target=self._run, args=(connection,), daemon=True)
                self._threads.append(thread)
                thread.start()
            else:
                self._run(connection)

    def _run(self, connection: socket.socket) -> None:
        with connection:
            # A client that stops sending (e.g. one that does not pipeline, waiting for an answer
            # the script holds back) gets its connection closed rather than hanging the test.
            connection.settimeout(5)
            try:
                self._script(connection)
            except OSError:
                pass  # the client went away
            except BaseException as error:  # reported by the test through .errors
                self.errors.append(error)

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)
