#!/usr/bin/python3
"""Power-loss harness for registryd (tools/power-loss runs it; docs/power-loss.md explains it).

One file, three roles, chosen by the first argument:

  serve STATE           the FUSE file system: mirrors STATE/backing at STATE/mnt and holds every
                        data write in memory (a "page cache") until the file is synced; listens on
                        STATE/control.sock for the hook's commands.
  arm|cut|reset …       the crash loop's power hook (registry-crash-loop --power-hook, see
                        Sources/registry-crash-loop/PowerHook.swift); STATE comes from
                        $POWER_LOSS_STATE.
  run …                 the driver: mounts, runs registry-crash-loop on the mount (and the negative
                        control with syncs disabled), prints the summary, decides the exit status.
  fleet …               the fleet's driver: mounts, runs registry-fleet-loop with node-1's data
                        directory on the mount (its power cut under the fleet's load and in its
                        starts), prints the cuts, decides the exit status.

The model (why each rule is what it is):
- Data written with write() is visible at once (reads and the daemon's read-only mmap see it) but
  reaches the backing directory ("the disk") only when the file is fsynced or fdatasynced (FUSE's
  fsync op), or when the harness's periodic writeback runs (at the start of each round's load, as the
  kernel writes back dirty pages within ~30 s). close() (FUSE flush/release) is not a sync.
- A write through a descriptor opened with O_SYNC or O_DSYNC is durable at once (LMDB writes its meta
  pages so). FUSE sends the kernel's implicit fsync after every such write without a range, so an
  fsync through such a descriptor counts for that descriptor's writes only (already durable).
- Namespace and size changes (create, mkdir, unlink, rename, truncate, chmod) are durable at once: a
  cut never undoes them. This is a limit: a missing directory fsync cannot be seen.
- A cut kills the daemon and freezes the file system (every later change fails with EIO and is not
  kept), then drops the unsynced writes entirely, keeps a random subset of the dirty 4 KiB pages
  (each page's latest content, or none of it), or keeps the writes in issue order up to a random
  point; then the file system is unmounted and mounted afresh, so no kernel cache survives it.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

PAGE = 4096
SYNC_FLAGS = os.O_SYNC | os.O_DSYNC
CUT_KINDS = ("drop", "page", "prefix")


# MARK: The file system


@dataclass
class Write:
    """One pending write: its global issue number (for prefix tears), offset and bytes."""

    seq: int
    offset: int
    data: bytes


@dataclass
class Dirty:
    """A file's unsynced state: the visible content of its dirty pages, its visible size, and the
    writes in issue order. `fd` is the harness's own read-write descriptor on the backing file (the
    daemon's may be read-only, and the name may change or go)."""

    fd: int
    size: int
    pages: dict[int, bytearray] = field(default_factory=dict)
    log: list[Write] = field(default_factory=list)


def clip(log: list[Write], low: int, high: int) -> list[Write]:
    """The writes less their bytes in [low, high): superseded by a durable write or a truncation."""
    kept: list[Write] = []
    for w in log:
        end = w.offset + len(w.data)
        if end <= low or w.offset >= high:
            kept.append(w)
            continue
        if w.offset < low:
            kept.append(Write(w.seq, w.offset, w.data[: low - w.offset]))
        if end > high:
            kept.append(Write(w.seq, high, w.data[high - w.offset :]))
    return kept


def pending_pages(state: Dirty) -> set[int]:
    """The pages that unsynced writes touch (a page an O_DSYNC write covered is durable already)."""
    return {index for w in state.log for index in range(w.offset // PAGE, (w.offset + len(w.data) - 1) // PAGE + 1)}


class CutFileSystem:
    """The pass-through file system with a page cache that a power cut can lose (see the module
    notes). One lock serialises every operation: simple, and the daemon's I/O is small."""

    def __init__(self, state: str) -> None:
        self.state = state
        self.root = os.path.join(state, "backing")
        self.mutex = threading.RLock()
        self.dirty: dict[int, Dirty] = {}  # backing inode → unsynced state
        self.handles: dict[int, tuple[str, int]] = {}  # fh → (name at open, open flags)
        self.seq = 0
        self.frozen = False
        self.cut: Optional[dict[str, Any]] = None  # set by a cut, read by the hook's reset
        self.trigger: Optional[dict[str, Any]] = None  # {"file", "op", "n", "aim"}
        self.counts: dict[tuple[str, str], int] = {}
        self.trace = os.environ.get("POWER_LOSS_TRACE") == "1"
        self.use_ns = True

    def __call__(self, op: str, *args: Any) -> Any:
        if not hasattr(self, op):
            raise fusepy.FuseOSError(errno.ENOSYS)
        with self.mutex:
            try:
                return getattr(self, op)(*args)
            except OSError as error:
                raise fusepy.FuseOSError(error.errno or errno.EIO) from None

    def init(self, path: str) -> None:
        pass

    def destroy(self, path: str) -> None:
        pass

    # Helpers

    def real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def event(self, name: str, op: str) -> None:
        """Counts the op and fires the armed trigger on its n-th occurrence: the caller is killed
        before the op takes effect, and the file system freezes."""
        if self.frozen:
            raise OSError(errno.EIO, "the power is off")
        base = os.path.basename(name)
        key = (base, op)
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.trace:
            print(f"trace {op} {base} #{self.counts[key]}", file=sys.stderr, flush=True)
        t = self.trigger
        if t and t["file"] == base and t["op"] == op and self.counts[key] == t["n"]:
            _, _, pid = fusepy.fuse_get_context()
            self.power_off(pid, t["aim"] + f" ({op} #{t['n']} of {base})")
            raise OSError(errno.EIO, "the power is off")

    def power_off(self, pid: int, aim: str) -> None:
        self.frozen = True
        self.trigger = None
        tgid = pid
        try:  # the context's pid is the calling thread's; kill its process
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("Tgid:"):
                        tgid = int(line.split()[1])
        except OSError:
            pass
        try:
            os.kill(tgid, signal.SIGKILL)
        except OSError:
            pass
        self.cut = {"aim": aim, "pages": sum(len(pending_pages(d)) for d in self.dirty.values()),
                    "writes": sum(len(d.log) for d in self.dirty.values())}

    def dirty_for(self, fd: int) -> Dirty:
        info = os.fstat(fd)
        state = self.dirty.get(info.st_ino)
        if state is None:
            writer = os.open(f"/proc/self/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
            state = Dirty(writer, info.st_size)
            self.dirty[info.st_ino] = state
        return state

    def page(self, state: Dirty, index: int) -> bytearray:
        if index not in state.pages:
            data = os.pread(state.fd, PAGE, index * PAGE)
            state.pages[index] = bytearray(data.ljust(PAGE, b"\0"))
        return state.pages[index]

    def sync(self, inode: int) -> None:
        """Makes a file's pending writes durable, in order, and forgets them."""
        state = self.dirty.pop(inode, None)
        if state is None:
            return
        for w in state.log:
            os.pwrite(state.fd, w.data, w.offset)
        os.close(state.fd)

    def writeback(self) -> None:
        for inode in list(self.dirty):
            self.sync(inode)

    def apply_cut(self, kind: str, rng: random.Random) -> dict[str, Any]:
        """What survives the cut reaches the backing files; the rest is forgotten."""
        assert self.cut is not None
        landed = 0
        if kind == "page":
            for state in self.dirty.values():
                for index in sorted(pending_pages(state)):
                    content = state.pages[index]
                    if rng.random() < 0.5:
                        start = index * PAGE
                        length = max(0, min(PAGE, state.size - start))
                        os.pwrite(state.fd, bytes(content[:length]), start)
                        landed += 1
        elif kind == "prefix":
            writes = sorted(((w, s) for s in self.dirty.values() for w in s.log), key=lambda p: p[0].seq)
            landed = rng.randint(0, len(writes))
            for w, state in writes[:landed]:
                os.pwrite(state.fd, w.data, w.offset)
        for state in self.dirty.values():
            os.close(state.fd)
        self.dirty.clear()
        return {**self.cut, "kind": kind, "landed": landed}

    # FUSE operations (fusepy, raw_fi: file handles come as fuse_file_info)

    def getattr(self, path: Optional[str], fi: Any = None) -> dict[str, Any]:
        info = os.fstat(fi.fh) if fi is not None else os.lstat(self.real(path or "/"))
        attrs = {key: getattr(info, key) for key in (
            "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks",
            "st_atime_ns", "st_mtime_ns", "st_ctime_ns")}
        attrs = {k.replace("_ns", ""): v for k, v in attrs.items()}
        state = self.dirty.get(info.st_ino)
        if state is not None and stat.S_ISREG(info.st_mode):
            attrs["st_size"] = state.size
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", ".."] + os.listdir(self.real(path))

    def opendir(self, path: str) -> int:
        return 0

    def releasedir(self, path: Optional[str], fh: int) -> int:
        return 0

    def fsyncdir(self, path: Optional[str], datasync: int, fh: int) -> int:
        return 0  # namespace changes are durable at once (a limit, see the notes)

    def statfs(self, path: str) -> dict[str, Any]:
        s = os.statvfs(self.real(path))
        return {k: getattr(s, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                           "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def access(self, path: str, mode: int) -> int:
        if not os.access(self.real(path), mode):
            raise OSError(errno.EACCES, path)
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self.real(path))

    def mkdir(self, path: str, mode: int) -> int:
        self.event(path, "mkdir")
        os.mkdir(self.real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self.event(path, "rmdir")
        os.rmdir(self.real(path))
        return 0

    def unlink(self, path: str) -> int:
        self.event(path, "unlink")
        # A file's unsynced state stays: an open descriptor still reads it (the snapshot is read so
        # after its unlink), and its writer descriptor keeps the inode from being reused meanwhile.
        os.unlink(self.real(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        self.event(old, "rename")
        os.rename(self.real(old), self.real(new))
        return 0

    def symlink(self, target: str, source: str) -> int:
        self.event(target, "symlink")
        os.symlink(source, self.real(target))
        return 0

    def link(self, target: str, source: str) -> int:
        self.event(target, "link")
        os.link(self.real(source), self.real(target))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        self.event(path, "chmod")
        os.chmod(self.real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        self.event(path, "chown")
        os.chown(self.real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        os.utime(self.real(path), ns=times) if times else os.utime(self.real(path))
        return 0

    def open(self, path: str, fi: Any) -> int:
        if fi.flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
            self.event(path, "open-write")
        fi.fh = os.open(self.real(path), fi.flags & ~(SYNC_FLAGS | os.O_CREAT | os.O_EXCL), 0)
        self.handles[fi.fh] = (path, fi.flags)
        if fi.flags & os.O_TRUNC:
            self.truncated(fi.fh, 0)
        return 0

    def create(self, path: str, mode: int, fi: Any) -> int:
        self.event(path, "create")
        fi.fh = os.open(self.real(path), (fi.flags & ~SYNC_FLAGS) | os.O_CREAT, mode)
        self.handles[fi.fh] = (path, fi.flags)
        return 0

    def read(self, path: Optional[str], size: int, offset: int, fi: Any) -> bytes:
        state = self.dirty.get(os.fstat(fi.fh).st_ino)
        if state is None:
            return os.pread(fi.fh, size, offset)
        end = min(offset + size, state.size)
        out = bytearray()
        position = offset
        while position < end:
            index, within = divmod(position, PAGE)
            step = min(PAGE - within, end - position)
            if index in state.pages:
                out += state.pages[index][within : within + step]
            else:
                out += os.pread(state.fd, step, position).ljust(step, b"\0")
            position += step
        return bytes(out)

    def write(self, path: Optional[str], data: bytes, offset: int, fi: Any) -> int:
        name, flags = self.handles[fi.fh]
        durable = bool(flags & SYNC_FLAGS)
        self.event(name, "dsync-write" if durable else "write")
        state = self.dirty_for(fi.fh)
        position = 0
        while position < len(data):
            index, within = divmod(offset + position, PAGE)
            step = min(PAGE - within, len(data) - position)
            self.page(state, index)[within : within + step] = data[position : position + step]
            position += step
        state.size = max(state.size, offset + len(data))
        if durable:  # O_SYNC/O_DSYNC: these bytes are on disk now; older pending ones there superseded
            os.pwrite(state.fd, data, offset)
            state.log = clip(state.log, offset, offset + len(data))
        else:
            self.seq += 1
            state.log.append(Write(self.seq, offset, bytes(data)))
        return len(data)

    def truncated(self, fd: int, length: int) -> None:
        """A size change is durable at once: applied to the backing file, pending bytes beyond dropped."""
        info = os.fstat(fd)
        state = self.dirty.get(info.st_ino)
        if state is None:
            os.ftruncate(fd, length) if fd >= 0 else None
            return
        os.ftruncate(state.fd, length)
        state.log = clip(state.log, length, 1 << 62)
        for index in [i for i in state.pages if i * PAGE >= length]:
            del state.pages[index]
        if length % PAGE and length // PAGE in state.pages:
            page = state.pages[length // PAGE]
            page[length % PAGE :] = bytes(PAGE - length % PAGE)
        state.size = length

    def truncate(self, path: Optional[str], length: int, fi: Any = None) -> int:
        name = self.handles[fi.fh][0] if fi is not None else path or ""
        self.event(name, "truncate")
        if fi is not None:
            self.truncated(fi.fh, length)
        else:
            fd = os.open(self.real(path or ""), os.O_RDWR | os.O_CLOEXEC)
            try:
                self.truncated(fd, length)
            finally:
                os.close(fd)
        return 0

    def fsync(self, path: Optional[str], datasync: int, fi: Any) -> int:
        name, flags = self.handles[fi.fh]
        if flags & SYNC_FLAGS:
            return 0  # the kernel's implicit fsync after an O_DSYNC write (see the notes)
        self.event(name, "fsync")
        self.sync(os.fstat(fi.fh).st_ino)
        return 0

    def flush(self, path: Optional[str], fi: Any) -> int:
        return 0  # close() is not a sync

    def release(self, path: Optional[str], fi: Any) -> int:
        self.handles.pop(fi.fh, None)
        os.close(fi.fh)
        return 0

    # The hook's commands, one JSON object per connection on STATE/control.sock

    def command(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.mutex:
            op = request["op"]
            if op == "arm":
                self.counts.clear()
                self.trigger = request.get("trigger")
                if request.get("writeback") and not self.frozen:
                    self.writeback()
                # A trigger armed before may have fired after the caller's last look (a fleet node
                # writes as it catches up, right after it answers): the caller must know.
                return {"ok": True, "off": self.cut["aim"] if self.frozen and self.cut else None}
            if op == "cut":
                if not self.frozen:
                    self.power_off(int(request["pid"]), request.get("aim", "timed"))
                return {"ok": True}
            if op == "apply":
                if self.cut is None:
                    self.trigger = None
                    return {"cut": None}
                return {"cut": self.apply_cut(request["kind"], random.Random(request["seed"]))}
            if op == "ping":
                return {"ok": True}
            raise ValueError(f"unknown command {op}")

    def serve_control(self) -> None:
        path = os.path.join(self.state, "control.sock")
        if os.path.exists(path):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(8)
        while True:
            connection, _ = listener.accept()
            with connection:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                try:
                    reply = self.command(json.loads(data))
                except Exception as error:  # reported to the hook, which fails the run
                    reply = {"error": repr(error)}
                connection.sendall(json.dumps(reply).encode() + b"\n")


def serve(state: str) -> None:
    filesystem = CutFileSystem(state)
    threading.Thread(target=filesystem.serve_control, daemon=True).start()
    # No direct_io (the daemon mmaps data.mdb), no writeback cache (libfuse 2 does not ask for it),
    # so every write reaches this process; no attribute or entry caching, so sizes are always ours;
    # hard_remove: an unlinked open file stays readable through its handle (the snapshot's is).
    fusepy.FUSE(filesystem, os.path.join(state, "mnt"), raw_fi=True, foreground=True, nothreads=False,
                allow_other=True, big_writes=True, hard_remove=True, attr_timeout=0, entry_timeout=0,
                negative_timeout=0, fsname="power-loss")


# MARK: The hook


def control(state: str, request: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(timeout)
                connection.connect(os.path.join(state, "control.sock"))
                connection.sendall(json.dumps(request).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            reply = json.loads(data)
            if "error" in reply:
                raise RuntimeError(f"the file system refused {request}: {reply['error']}")
            return reply
        except (ConnectionRefusedError, FileNotFoundError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def mount(state: str) -> None:
    """Starts a file-system process on STATE/mnt and waits until it answers."""
    mnt = os.path.join(state, "mnt")
    log = open(os.path.join(state, "fs.log"), "ab")
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", state], stdin=subprocess.DEVNULL,
                               stdout=log, stderr=log, start_new_session=True)
    with open(os.path.join(state, "fs.pid"), "w") as pid_file:
        pid_file.write(str(process.pid))
    deadline = time.monotonic() + 30
    while not os.path.ismount(mnt):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the power-loss file system did not mount at {mnt} (see {state}/fs.log)")
        time.sleep(0.02)
    control(state, {"op": "ping"})


def unmount(state: str) -> None:
    mnt = os.path.join(state, "mnt")
    for attempt in range(100):
        if not os.path.ismount(mnt):
            break
        if subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL).returncode == 0:
            break
        time.sleep(0.05)  # a dying daemon's descriptors are still being closed
    else:
        subprocess.run(["umount", "-l", mnt], check=False)
    try:
        with open(os.path.join(state, "fs.pid")) as pid_file:
            pid = int(pid_file.read())
        for _ in range(200):
            os.kill(pid, 0)
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


# Where cuts are aimed, by phase. Each aim is (name, file, op, highest n); n is drawn from 1…highest.
# The op counts start when the phase is armed. The ops were read off a trace (POWER_LOSS_TRACE=1):
# a commit writes data.mdb's pages (write), fdatasyncs them (fsync), then writes its meta page
# through the O_DSYNC descriptor (dsync-write); a clean stop writes index.snapshot.tmp, fdatasyncs
# it, renames it to index.snapshot, then commits the token to data.mdb (one whose index is unchanged
# since a start from the snapshot renames index.snapshot.in-use back instead). A load of at most a second
# makes some ten commits through this file system (a few writes each), so n stays small enough to be
# reached before the crash loop's timed cut.
COMMIT_AIMS = [
    ("commit: among data-page writes", "data.mdb", "write", 80),
    ("commit: before the data fdatasync", "data.mdb", "fsync", 10),
    ("commit: before the meta-page write", "data.mdb", "dsync-write", 10),
]
SNAPSHOT_AIMS = [
    ("snapshot: among its writes", "index.snapshot.tmp", "write", 300),
    ("snapshot: before its fdatasync", "index.snapshot.tmp", "fsync", 1),
    ("snapshot: before its rename", "index.snapshot.tmp", "rename", 1),
    ("snapshot: before the token's meta-page write (without a snapshot: the stop's first)", "data.mdb", "dsync-write", 1),
    # A stop whose index is still the snapshot it started from (the check after a clean stop reads
    # only) renames that file back from its in-use name instead of writing one.
    ("snapshot kept: before its rename back", "index.snapshot.in-use", "rename", 1),
]
STOP_AIMS = [
    ("stop: among data-page writes", "data.mdb", "write", 4),
    ("stop: before a data fdatasync", "data.mdb", "fsync", 2),
    ("stop: before a meta-page write", "data.mdb", "dsync-write", 2),
]
START_AIMS = [
    ("start: among data-page writes", "data.mdb", "write", 8),
    ("start: before a data fdatasync", "data.mdb", "fsync", 3),
    ("start: before a meta-page write", "data.mdb", "dsync-write", 3),
]
FIRST_START_AIMS = [
    ("first start: among its first writes", "data.mdb", "write", 2),
    ("first start: before the first data fdatasync", "data.mdb", "fsync", 1),
    ("first start: before the first meta-page write", "data.mdb", "dsync-write", 1),
]


def choose_trigger(config: dict[str, Any], phase: str, round_number: int, attempt: int) -> Optional[dict[str, Any]]:
    rng = random.Random(f"{config['seed']}/{phase}/{round_number}/{attempt}")
    aims: list[tuple[str, str, str, int]] = []
    # The very first start of the empty data directory: the prefill's when there is one, else round 1's.
    first = "prefill-start" if config.get("prefill") else "start"
    if phase == first and round_number <= 1 and attempt == 1 and config.get("first_start_cut", True):
        aims = FIRST_START_AIMS
    elif phase in ("start", "restart", "prefill-start") and attempt < config["start_attempts"]:
        # A start, or a start after a cut (attempt > 1: the recovery of a cut, cut again).
        if rng.random() < (0.3 if phase == "restart" or attempt > 1 else 0.2):
            aims = START_AIMS
    elif phase == "load":
        # Half the loads end at the crash loop's random delay (a timed cut, or SIGTERM and a clean
        # stop); in a SIGTERM round an aimed cut may land in the drain's commits or the snapshot.
        if rng.random() < 0.5:
            # (Not the token's aim: counted from the load's start, its meta-page write is a commit's.)
            aims = COMMIT_AIMS if round_number % 2 == 1 else COMMIT_AIMS + SNAPSHOT_AIMS[:3]
    elif phase == "stop":
        # The snapshot is written for stores of --snapshot-minimum templates or more (every round's
        # store but the first round's, when it is cut early): else the stop's own commits (a last
        # erasure pass).
        if rng.random() < 0.5:
            aims = SNAPSHOT_AIMS + STOP_AIMS
    if not aims:
        return None
    name, file, op, highest = rng.choice(aims)
    return {"aim": name, "file": file, "op": op, "n": rng.randint(1, highest)}


def hook(words: list[str]) -> None:
    state = os.environ["POWER_LOSS_STATE"]
    with open(os.path.join(state, "config.json")) as config_file:
        config = json.load(config_file)
    if words[0] == "arm":
        phase, round_number, attempt = words[1], int(words[2]), int(words[3])
        trigger = choose_trigger(config, phase, round_number, attempt)
        reply = control(state, {"op": "arm", "trigger": trigger, "writeback": phase == "load"})
        if reply.get("off"):
            print(f"the power is off: {reply['off']}")
    elif words[0] == "cut":
        control(state, {"op": "cut", "pid": int(words[1]), "aim": "timed (at the crash loop's random delay)"})
    elif words[0] == "reset":
        log_path = os.path.join(state, "cuts.jsonl")
        number = sum(1 for _ in open(log_path)) if os.path.exists(log_path) else 0
        rng = random.Random(f"{config['seed']}/cut/{number}")
        kinds = config.get("kinds", CUT_KINDS)
        reply = control(state, {"op": "apply", "kind": rng.choice(kinds), "seed": rng.getrandbits(64)})
        cut = reply["cut"]
        if cut is None:
            return
        # The power comes back: a new mount, no kernel cache of the old one.
        unmount(state)
        mount(state)
        with open(log_path, "a") as log:
            log.write(json.dumps(cut) + "\n")
        landed = {"drop": "none landed",
                  "page": f"{cut['landed']} of the pages landed",
                  "prefix": f"the first {cut['landed']} writes landed"}[cut["kind"]]
        print(f"{cut['kind']} cut, {cut['aim']}: {cut['pages']} dirty pages in {cut['writes']} pending writes, {landed}")
    else:
        raise SystemExit(f"unknown hook word {words[0]}")


# MARK: The driver


SHIM = r"""
/* Disables registryd's syncs (the negative control): what the daemon believes durable is not. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>
int fsync(int fd) { (void)fd; return 0; }
int fdatasync(int fd) { (void)fd; return 0; }
int msync(void *a, size_t l, int f) { (void)a; (void)l; (void)f; return 0; }
int sync_file_range(int fd, off_t o, off_t n, unsigned int f) { (void)fd; (void)o; (void)n; (void)f; return 0; }
int syncfs(int fd) { (void)fd; return 0; }
#define STRIP(flags) ((flags) & ~(O_SYNC | O_DSYNC))
#define OPEN(name, ...) \
    static int (*real)(__VA_ARGS__); \
    if (!real) real = dlsym(RTLD_NEXT, name);
int open(const char *p, int f, ...) { va_list a; va_start(a, f); mode_t m = va_arg(a, mode_t); va_end(a);
    OPEN("open", const char *, int, ...) return real(p, STRIP(f), m); }
int open64(const char *p, int f, ...) { va_list a; va_start(a, f); mode_t m = va_arg(a, mode_t); va_end(a);
    OPEN("open64", const char *, int, ...) return real(p, STRIP(f), m); }
int openat(int d, const char *p, int f, ...) { va_list a; va_start(a, f); mode_t m = va_arg(a, mode_t); va_end(a);
    OPEN("openat", int, const char *, int, ...) return real(d, p, STRIP(f), m); }
int openat64(int d, const char *p, int f, ...) { va_list a; va_start(a, f); mode_t m = va_arg(a, mode_t); va_end(a);
    OPEN("openat64", int, const char *, int, ...) return real(d, p, STRIP(f), m); }
"""


def build_shim(directory: str) -> str:
    source = os.path.join(directory, "nosync.c")
    library = os.path.join(directory, "nosync.so")
    with open(source, "w") as file:
        file.write(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"], check=True)
    return library


@dataclass
class Pass:
    """One run of the crash loop on a fresh mount: its JSON summary and the cuts the hook made."""

    name: str
    summary: dict[str, Any]
    cuts: list[dict[str, Any]]
    exit_status: int


def run_pass(name: str, args: Any, seed: int, rounds: int, environment: list[str], kinds: tuple[str, ...] = CUT_KINDS,
             signal: str = "both") -> Pass:
    state = os.path.join(args.work, name)
    os.makedirs(os.path.join(state, "backing", "data"))
    os.makedirs(os.path.join(state, "mnt"))
    with open(os.path.join(state, "config.json"), "w") as config:
        json.dump({"seed": seed, "start_attempts": 4, "first_start_cut": not args.no_first_start_cut,
                   "prefill": args.prefill, "kinds": kinds}, config)
    mount(state)
    try:
        command = [args.crash_loop, "--daemon", args.daemon, "--rounds", str(rounds), "--seed", str(seed),
                   "--signal", signal, "--work-directory", os.path.join(state, "work"),
                   "--data-directory", os.path.join(state, "mnt", "data"), "--power-hook", os.path.abspath(__file__),
                   "--start-attempts", "4", "--maximum-delay", str(args.maximum_delay), "--window", "48",
                   "--json", "--keep-going", "--keep",
                   f"--daemon-arg=--snapshot-minimum-templates={args.snapshot_minimum}"]
        for entry in environment:
            command += ["--daemon-environment", entry]
        if args.prefill:
            # A large store: the clean stops write the index snapshot, slowly through this file system.
            command += ["--prefill", str(args.prefill), "--drain-deadline", "300", "--start-timeout", "300"]
        print(f"power-loss: {name}: {' '.join(command)}", file=sys.stderr, flush=True)
        completed = subprocess.run(command, env={**os.environ, "POWER_LOSS_STATE": state}, stdout=subprocess.PIPE,
                                   text=True, check=False)
        summary = json.loads(completed.stdout.strip().splitlines()[-1]) if completed.stdout.strip() else {}
    finally:
        unmount(state)
    log_path = os.path.join(state, "cuts.jsonl")
    cuts = [json.loads(line) for line in open(log_path)] if os.path.exists(log_path) else []
    return Pass(name, summary, cuts, completed.returncode)


def describe(p: Pass) -> list[str]:
    s = p.summary
    kinds: dict[str, int] = {}
    aims: dict[str, int] = {}
    for cut in p.cuts:
        kinds[cut["kind"]] = kinds.get(cut["kind"], 0) + 1
        aim = cut["aim"].split(" (")[0]
        aims[aim] = aims.get(aim, 0) + 1
    lines = [
        f"{p.name}: {s.get('rounds', 0)} rounds, {len(p.cuts)} cuts "
        f"({s.get('load_cuts', 0)} under load, {s.get('start_cuts', 0)} in starts, {s.get('stop_cuts', 0)} in stops); "
        f"registrations {s.get('acknowledged', 0)} acknowledged, {s.get('lost', 0)} lost; deletions "
        f"{s.get('deletions_acknowledged', 0)} acknowledged, {s.get('deletions_undone', 0)} undone; "
        f"{s.get('refused_stored', 0)} refused but stored; {s.get('verify_problems', 0)} verify problems; "
        f"{s.get('failed_starts', 0)} failed starts; "
        f"failed rounds {s.get('failed_rounds', [])}; final check {s.get('final_check', '?')}",
        f"  cuts by kind: {', '.join(f'{k} {v}' for k, v in sorted(kinds.items())) or 'none'}",
        f"  cuts by aim: {'; '.join(f'{k} {v}' for k, v in sorted(aims.items())) or 'none'}",
    ]
    return lines


def drive(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/power-loss", description="Power cuts under registryd (see docs/power-loss.md).")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--control-rounds", type=int, default=4, help="rounds of the negative control (0: none)")
    parser.add_argument("--control", action="store_true", help="run only the negative control")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--crash-loop", required=True)
    parser.add_argument("--maximum-delay", type=int, default=800)
    parser.add_argument("--no-first-start-cut", action="store_true",
                        help="do not cut round 1's first start of the empty store")
    parser.add_argument("--prefill", type=int, default=0,
                        help="register this many templates first (round 0), for cuts in a large store's starts and "
                             "snapshot (slow: minutes per round)")
    parser.add_argument("--snapshot-minimum", type=int, default=200,
                        help="the daemon's --snapshot-minimum-templates: clean stops of stores this large write the "
                             "index snapshot, so that the snapshot's cuts are reached (the daemon's default is 100000)")
    parser.add_argument("--work", default=None, help="a new directory for the state (default: under $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the state when everything passed")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.getrandbits(63)
    args.work = args.work or tempfile.mkdtemp(prefix="power-loss.", dir=os.environ.get("TMPDIR", "/tmp"))
    os.makedirs(args.work, exist_ok=True)
    args.daemon = os.path.abspath(args.daemon)
    print(f"power-loss: seed {seed}, state in {args.work}", file=sys.stderr, flush=True)

    passes: list[Pass] = []
    if not args.control:
        passes.append(run_pass("power-loss", args, seed, args.rounds, []))
    control_pass: Optional[Pass] = None
    if args.control or args.control_rounds > 0:
        shim = build_shim(args.work)
        rounds = args.rounds if args.control else args.control_rounds
        # Its cuts drop every unsynced write: a tear that happens to land everything would show
        # nothing, and a short control must show its losses. Every round ends in a cut under load
        # (SIGKILL rounds): a SIGTERM round stops cleanly and loses nothing, so a 2-round control
        # whose one cut came before any acknowledgement found no loss (seen in tools/test).
        control_pass = run_pass("control", args, seed ^ 0x5EED, rounds, [f"LD_PRELOAD={shim}"], kinds=("drop",),
                                signal="kill")
        passes.append(control_pass)

    print(f"power-loss: seed {seed}")
    for p in passes:
        for line in describe(p):
            print(line)
    failures: list[str] = []
    main = next((p for p in passes if p.name == "power-loss"), None)
    if main is not None and (main.exit_status != 0 or not main.summary.get("passed")):
        failures.append("the power-loss rounds found violations (see above and the crash loop's messages)")
    if control_pass is not None:
        s = control_pass.summary
        # A start refused after a cut (the store damaged) loses every acknowledged write too.
        found = s.get("lost", 0) + s.get("deletions_undone", 0) + s.get("failed_starts", 0)
        print(f"control (syncs disabled): {s.get('lost', 0)} acknowledged registrations lost, "
              f"{s.get('deletions_undone', 0)} acknowledged deletions undone, "
              f"{s.get('failed_starts', 0)} starts refused (store damaged)")
        if found == 0:
            failures.append("the negative control lost nothing: the harness cannot show a missing sync")
    if failures:
        print("power-loss: FAILED: " + "; ".join(failures) + f" (state left in {args.work})")
        return 1
    print("power-loss: PASSED")
    if not args.keep:
        subprocess.run(["rm", "-rf", "--", args.work], check=False)
    return 0


def drive_fleet(argv: list[str]) -> int:
    """The fleet fault loop with node-1's data directory on this file system: its power cut under
    the fleet's load, inside its commits and its starts (the first, of its empty store, too)."""
    parser = argparse.ArgumentParser(prog="tools/power-loss --fleet",
                                     description="Power cuts under one node of a fleet (see docs/power-loss.md).")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--fleet-loop", required=True)
    parser.add_argument("--work", default=None, help="a new directory for the state (default: under $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the state when everything passed")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.getrandbits(63)
    work = args.work or tempfile.mkdtemp(prefix="power-loss-fleet.", dir=os.environ.get("TMPDIR", "/tmp"))
    state = os.path.join(work, "fleet")
    os.makedirs(os.path.join(state, "backing", "data"))
    os.makedirs(os.path.join(state, "mnt"))
    with open(os.path.join(state, "config.json"), "w") as config:
        json.dump({"seed": seed, "start_attempts": 4, "first_start_cut": True, "prefill": 0, "kinds": CUT_KINDS}, config)
    print(f"power-loss --fleet: seed {seed}, state in {work}", file=sys.stderr, flush=True)
    mount(state)
    try:
        command = [args.fleet_loop, "--daemon", os.path.abspath(args.daemon), "--rounds", str(args.rounds),
                   "--seed", str(seed), "--power-hook", os.path.abspath(__file__),
                   "--power-data", os.path.join(state, "mnt", "data")]
        print(f"power-loss --fleet: {' '.join(command)}", file=sys.stderr, flush=True)
        completed = subprocess.run(command, env={**os.environ, "POWER_LOSS_STATE": state}, check=False)
    finally:
        unmount(state)
    log_path = os.path.join(state, "cuts.jsonl")
    cuts = [json.loads(line) for line in open(log_path)] if os.path.exists(log_path) else []
    kinds: dict[str, int] = {}
    for cut in cuts:
        kinds[cut["kind"]] = kinds.get(cut["kind"], 0) + 1
    print(f"power-loss --fleet: seed {seed}: {len(cuts)} cuts of node-1's power "
          f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items())) or 'none'})")
    if completed.returncode != 0:
        print(f"power-loss --fleet: FAILED (state left in {work})")
        return 1
    if not cuts:
        print(f"power-loss --fleet: FAILED: no cut was made (state left in {work})")
        return 1
    print("power-loss --fleet: PASSED")
    if not args.keep:
        subprocess.run(["rm", "-rf", "--", work], check=False)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    if sys.argv[1] in ("serve", "arm", "cut", "reset"):
        import fusepy  # Debian's python3-fusepy

    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif sys.argv[1] in ("arm", "cut", "reset"):
        hook(sys.argv[1:])
    elif sys.argv[1] == "run":
        sys.exit(drive(sys.argv[2:]))
    elif sys.argv[1] == "fleet":
        sys.exit(drive_fleet(sys.argv[2:]))
    else:
        raise SystemExit(__doc__)
