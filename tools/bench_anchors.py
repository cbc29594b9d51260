#!/usr/bin/env python3
"""Data generation, anchors and bookkeeping for tools/bench.

Each subcommand prints one JSON object on stdout (progress, if any, goes to stderr), so tools/bench
treats the anchors exactly like our binaries: run, keep the last stdout line, record it.

  gen-vectors      random unit vectors and queries (raw little-endian float32), cached by a .json sidecar
  gen-faces        face-like templates (identities with 2-5 captures), their identities and queries
  gen-landmarks    a stand-in landmark set in registry-bench's format (only for --anchors-only)
  faiss            FAISS IndexFlatIP (or, with --index panorama, IndexFlatIPPanorama), one query per
                   search, timed per query, 1 and 2 OpenMP threads
  faiss-batch      FAISS IndexFlatIP, k=1, the queries searched a batch at a time: queries/s per thread count
  landmarks-numpy  the landmark score over registry-bench's files, vectorised numpy, timed per query
  lmdb-commits     durable single-put LMDB write transactions per second (py-lmdb, sync on)
  lmdb-scan-build  an LMDB env holding the vectors as values (cached while the vectors are unchanged)
  lmdb-scan        open that env and copy every value into one float32 array: the start-up anchor
  record           append one run's output (last JSON line, or redis-benchmark CSV) to the raw log
  table            medians, ratios and agreement from the raw log: prints the table, writes results.json

numpy, faiss and lmdb are imported inside the subcommands that need them, so record and table start fast.
"""

import argparse
import csv
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

SEED = 20240611
LANDMARK_SLOTS = 32
SCORE_TOLERANCE = 1e-5   # our scores against the anchor's
TIE_TOLERANCE = 1e-6     # anchor scores this close are a tie: their order (and, at the cut, membership) is free


def emit(obj):
    print(json.dumps(obj), flush=True)


def progress(message):
    print(f"  {message}", file=sys.stderr, flush=True)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write_json(path, obj):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------ data

def normalise_rows(x):
    import numpy as np
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def cmd_gen_vectors(a):
    import numpy as np
    meta = {"rows": a.rows, "dimension": a.dimension, "queries": a.queries, "seed": a.seed, "format": 1}
    meta_path = a.vectors + ".json"
    row_bytes = a.dimension * 4
    if (os.path.exists(meta_path) and read_json(meta_path).get("params") == meta
            and os.path.getsize(a.vectors) == a.rows * row_bytes
            and os.path.getsize(a.queries_out) == a.queries * row_bytes):
        emit({**read_json(meta_path), "cached": True})
        return

    started = time.perf_counter()
    rng = np.random.default_rng([a.seed, a.dimension])
    chunk = 1 << 16
    with open(a.vectors + ".tmp", "wb") as f:
        for start in range(0, a.rows, chunk):
            x = rng.standard_normal((min(chunk, a.rows - start), a.dimension), dtype=np.float32)
            normalise_rows(x).astype("<f4", copy=False).tofile(f)
    os.replace(a.vectors + ".tmp", a.vectors)

    # Half near-duplicates of stored rows (a noise vector of norm ~0.1) so the true match is known,
    # half fresh vectors (no match: the whole top-10 is decided by small score differences).
    stored = np.memmap(a.vectors, dtype="<f4", mode="r", shape=(a.rows, a.dimension))
    near = a.queries // 2
    picks = np.sort(rng.choice(a.rows, size=near, replace=False))
    noisy = stored[picks] + rng.standard_normal((near, a.dimension), dtype=np.float32) * np.float32(0.1 / math.sqrt(a.dimension))
    fresh = rng.standard_normal((a.queries - near, a.dimension), dtype=np.float32)
    queries = normalise_rows(np.vstack([noisy, fresh]).astype(np.float32))
    queries.astype("<f4", copy=False).tofile(a.queries_out)

    result = {"cached": False, "params": meta, "near_rows": [int(i) for i in picks],
              "seconds": round(time.perf_counter() - started, 3)}
    write_json(meta_path, result)
    emit(result)


def cmd_gen_landmarks(a):
    """Files in the layout `registry-bench landmarks` writes, so the anchor runs without our binaries."""
    import numpy as np
    rng = np.random.default_rng([a.seed, 96])
    os.makedirs(a.out, exist_ok=True)

    def masks(n):
        # ~25 of 32 slots present, as a detector's landmark set would be.
        bits = rng.random((n, LANDMARK_SLOTS)) < 25 / 32
        return (bits.astype(np.uint64) << np.arange(LANDMARK_SLOTS, dtype=np.uint64)).sum(axis=1).astype("<u4")

    def points(n):
        x = rng.standard_normal((n, LANDMARK_SLOTS, 3), dtype=np.float32) * np.float32(0.3)
        return x.reshape(n, LANDMARK_SLOTS * 3).astype("<f4")

    points(a.count).tofile(os.path.join(a.out, "rows.f32"))
    masks(a.count).tofile(os.path.join(a.out, "masks.u32"))
    points(a.queries).tofile(os.path.join(a.out, "queries.f32"))
    masks(a.queries).tofile(os.path.join(a.out, "qmasks.u32"))
    (rng.random(LANDMARK_SLOTS, dtype=np.float32) + np.float32(0.5)).astype("<f4").tofile(os.path.join(a.out, "weights.f32"))
    write_json(os.path.join(a.out, "params.json"), {"decay": 2.5, "minimum": 15, "slots": LANDMARK_SLOTS})
    emit({"stand_in": True, "count": a.count, "queries": a.queries})


# --------------------------------------------------------------------------------------------- anchors

def cmd_gen_faces(a):
    """Face-like templates: identities with 2-5 captures each. An identity's centre shares a common
    component with every other (impostor cosines about 0.1, up to about 0.35); a capture is its
    centre plus noise (captures of one identity: cosine about 0.7, at least 0.6). Queries: new
    captures of enrolled identities (first half) and of strangers (second half)."""
    import numpy as np
    meta = {"rows": a.rows, "dimension": a.dimension, "queries": a.queries, "seed": a.seed, "format": 1, "kind": "faces"}
    meta_path = a.vectors + ".json"
    row_bytes = a.dimension * 4
    if (os.path.exists(meta_path) and read_json(meta_path).get("params") == meta
            and os.path.getsize(a.vectors) == a.rows * row_bytes and os.path.getsize(a.identities_out) == a.rows * 4
            and os.path.getsize(a.queries_out) == a.queries * row_bytes):
        emit({**read_json(meta_path), "cached": True})
        return
    started = time.perf_counter()
    d = a.dimension
    rng = np.random.default_rng([a.seed, d, 7])
    captures = rng.integers(2, 6, size=a.rows)  # 2-5 each; more than enough identities
    identities_of_rows = np.repeat(np.arange(a.rows, dtype=np.uint32), captures)[:a.rows]
    identities = int(identities_of_rows[-1]) + 1
    rng.shuffle(identities_of_rows)  # registration order mixes identities, as enrolment does
    common = normalise_rows(rng.standard_normal((1, d)).astype(np.float32))[0]
    sigma = np.float32(math.sqrt(0.43 / d))  # capture noise: cosine between captures ~ 1 / (1 + 0.43)

    def all_centres():
        r = np.random.default_rng([a.seed, d, 11])  # one centre per identity, whatever the order asked
        for start in range(0, identities, 1 << 16):
            block = normalise_rows(r.standard_normal((min(1 << 16, identities - start), d)).astype(np.float32))
            yield start, normalise_rows(block + np.float32(0.42) * common)

    # Every centre at once when they fit in a few GiB (ten million rows: 2.9M identities, 5.8 GiB),
    # else made again for each block of rows (the same values either way).
    kept = None
    if identities * d * 4 <= 8 << 30:
        kept = np.empty((identities, d), dtype=np.float32)
        for start, block in all_centres():
            kept[start:start + len(block)] = block

    def centres(ids):
        if kept is not None:
            return kept[ids]
        out = np.empty((len(ids), d), dtype=np.float32)
        for start, block in all_centres():
            mask = (ids >= start) & (ids < start + len(block))
            out[mask] = block[ids[mask] - start]
        return out

    with open(a.vectors + ".tmp", "wb") as f:
        for start in range(0, a.rows, 1 << 17):
            ids = identities_of_rows[start:start + (1 << 17)]
            x = centres(ids) + rng.standard_normal((len(ids), d)).astype(np.float32) * sigma
            normalise_rows(x).astype("<f4", copy=False).tofile(f)
    os.replace(a.vectors + ".tmp", a.vectors)
    identities_of_rows.astype("<u4").tofile(a.identities_out)
    enrolled = a.queries // 2
    picks = rng.choice(identities, size=enrolled, replace=False).astype(np.uint32)
    genuine = centres(picks) + rng.standard_normal((enrolled, d)).astype(np.float32) * sigma
    strangers = normalise_rows(rng.standard_normal((a.queries - enrolled, d)).astype(np.float32))
    strangers = normalise_rows(strangers + np.float32(0.42) * common)
    strangers += rng.standard_normal(strangers.shape).astype(np.float32) * sigma
    normalise_rows(np.vstack([genuine, strangers]).astype(np.float32)).astype("<f4", copy=False).tofile(a.queries_out)
    result = {"cached": False, "params": meta, "identities": identities, "expected": [int(i) for i in picks] + [-1] * (a.queries - enrolled),
              "seconds": round(time.perf_counter() - started, 3)}
    write_json(meta_path, result)
    emit(result)


def cmd_faiss(a):
    import faiss
    import numpy as np
    started = time.perf_counter()
    vectors = np.fromfile(a.vectors, dtype="<f4").reshape(-1, a.dimension)
    queries = np.fromfile(a.queries, dtype="<f4").reshape(-1, a.dimension)
    if a.index == "panorama":
        # Exact too: it sums each row's dot product level by level (a level a slice of the dimensions)
        # and stops a row once the remaining levels' norms bound it below the k-th best.
        index = faiss.IndexFlatIPPanorama(a.dimension, a.levels, a.batch_size)
    else:
        index = faiss.IndexFlatIP(a.dimension)
    index.add(vectors)
    rows = vectors.shape[0]
    del vectors  # the index holds its own copy
    load_seconds = time.perf_counter() - started

    runs = {}
    for threads in a.threads:
        faiss.omp_set_num_threads(threads)
        index.search(queries[:1], a.k)  # untimed warm-up: thread pool start, code paths faulted in
        ms, top, scores = [], [], []
        for i in range(queries.shape[0]):
            query = queries[i:i + 1]
            t = time.perf_counter()
            distances, labels = index.search(query, a.k)
            ms.append((time.perf_counter() - t) * 1000)
            top.append([int(x) for x in labels[0]])
            scores.append([float(x) for x in distances[0]])
        runs[str(threads)] = {"identify_ms": ms, "top": top, "scores": scores}
        progress(f"faiss d={a.dimension} threads={threads}: median {statistics.median(ms):.3g} ms")

    emit({"rows": rows, "dimension": a.dimension, "k": a.k, "load_seconds": round(load_seconds, 3), "index": a.index,
          "faiss_version": faiss.__version__, "faiss_options": faiss.get_compile_options(), "threads": runs})


def cmd_faiss_batch(a):
    """The registrations-1m anchor: every query's best stored row (k=1), as a registration's check
    needs, searched `batch` queries at a time, each batch multiplied against the rows as one matrix
    product (BLAS), all the queries (or the first max_queries) timed as one, for each thread count."""
    import faiss
    import numpy as np
    started = time.perf_counter()
    vectors = np.fromfile(a.vectors, dtype="<f4").reshape(-1, a.dimension)
    queries = np.fromfile(a.queries, dtype="<f4").reshape(-1, a.dimension)[:a.max_queries]
    index = faiss.IndexFlatIP(a.dimension)
    index.add(vectors)
    rows = vectors.shape[0]
    del vectors  # the index holds its own copy
    load_seconds = time.perf_counter() - started
    # Batches are what BLAS is for, but FAISS takes its one-query-at-a-time loop below
    # distance_compute_blas_threshold, which 1.15 raised from 20 queries to nq * d < 128,000: a batch
    # of 64 then ran about 10x slower here. 1 sends every batch through BLAS (as 20 did before 1.15).
    default_threshold = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = 1

    runs, best_scores = {}, np.empty(queries.shape[0], dtype=np.float32)
    for threads in a.threads:
        faiss.omp_set_num_threads(threads)
        index.search(queries[:a.batch], 1)  # untimed warm-up: thread pool start, code paths faulted in
        t = time.perf_counter()
        for start in range(0, queries.shape[0], a.batch):
            distances, _ = index.search(queries[start:start + a.batch], 1)
            best_scores[start:start + len(distances)] = distances[:, 0]
        seconds = time.perf_counter() - t
        runs[str(threads)] = {"seconds": seconds, "queries_per_second": queries.shape[0] / seconds}
        progress(f"faiss-batch d={a.dimension} rows={rows} threads={threads}: {queries.shape[0] / seconds:.0f} queries/s")

    best = max(runs, key=lambda t: runs[t]["queries_per_second"])
    emit({"rows": rows, "dimension": a.dimension, "queries": queries.shape[0], "batch": a.batch, "k": 1,
          "load_seconds": round(load_seconds, 3), "faiss_version": faiss.__version__,
          "blas_threshold_default": default_threshold, "by_threads": runs,
          "best_threads": best, "queries_per_second": runs[best]["queries_per_second"],
          "best_score_max": float(best_scores.max())})


def top_k(score, k):
    """Indices of the k best scores, best first; equal scores: smaller index first."""
    import numpy as np
    k = min(k, score.shape[0])
    kth = np.partition(score, score.shape[0] - k)[score.shape[0] - k]
    candidates = np.flatnonzero(score >= kth)  # everything tied with the k-th, so the index order decides
    order = np.lexsort((candidates, -score[candidates]))[:k]
    return candidates[order]


def cmd_landmarks_numpy(a):
    import numpy as np
    path = lambda name: os.path.join(a.dir, name)
    params = read_json(path("params.json"))
    slots, decay, minimum = int(params["slots"]), np.float32(params["decay"]), int(params["minimum"])
    rows = np.fromfile(path("rows.f32"), dtype="<f4").reshape(-1, slots, 3)
    masks = np.fromfile(path("masks.u32"), dtype="<u4")
    queries = np.fromfile(path("queries.f32"), dtype="<f4").reshape(-1, slots, 3)
    qmasks = np.fromfile(path("qmasks.u32"), dtype="<u4")
    weights = np.fromfile(path("weights.f32"), dtype="<f4")
    n_rows = rows.shape[0]
    if masks.shape[0] != n_rows or qmasks.shape[0] != queries.shape[0] or weights.shape[0] != slots:
        sys.exit(f"landmarks-numpy: inconsistent files in {a.dir}")

    # Load-time layout, as any index would do: one contiguous (N, slots) array per coordinate, and the
    # rows' slot bits as 0/1 floats. Then bit(shared, s) = rowbit[s] * querybit[s], and the per-query
    # work is a few streaming passes (about 2x faster than the literal (N, slots, 3) formulation).
    xs = [np.ascontiguousarray(rows[:, :, c]) for c in range(3)]
    shifts = np.arange(slots, dtype=np.uint32)
    row_bits = ((masks[:, None] >> shifts) & 1).astype(np.float32)
    distance = np.empty((n_rows, slots), dtype=np.float32)
    scratch = np.empty((n_rows, slots), dtype=np.float32)

    ms, top, scores = [], [], []
    for qi in range(queries.shape[0]):
        t = time.perf_counter()
        q, qmask = queries[qi], qmasks[qi]
        shared_count = np.bitwise_count(masks & qmask)
        np.subtract(xs[0], q[:, 0], out=distance)
        distance *= distance
        for c in (1, 2):
            np.subtract(xs[c], q[:, c], out=scratch)
            scratch *= scratch
            distance += scratch
        np.sqrt(distance, out=distance)
        distance *= row_bits
        query_weights = weights * ((qmask >> shifts) & 1).astype(np.float32)
        weight_sum = row_bits @ query_weights
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = (distance @ query_weights) / weight_sum
        score = np.exp(-decay * mean)
        score[(shared_count < minimum) | ~(weight_sum > 0)] = 0
        best = top_k(score, a.k)
        ms.append((time.perf_counter() - t) * 1000)
        top.append([int(i) for i in best])
        scores.append([float(score[i]) for i in best])

    emit({"rows": n_rows, "queries": queries.shape[0], "k": a.k, "numpy_version": np.__version__,
          "identify_ms": ms, "top": top, "scores": scores})


def cmd_lmdb_commits(a):
    import lmdb
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    values = [os.urandom(512) for _ in range(a.count)]
    env = lmdb.open(a.dir, map_size=1 << 30)  # sync=True, metasync=True: each commit is durable
    started, cpu_started = time.perf_counter(), time.process_time()
    for i, value in enumerate(values):
        with env.begin(write=True) as txn:
            txn.put(i.to_bytes(8, "big"), value)
    seconds = time.perf_counter() - started
    # The writing process's CPU (user + system, every thread), beside the daemon's per registration.
    cpu_seconds = time.process_time() - cpu_started
    entries = env.stat()["entries"]
    env.close()
    if entries != a.count:
        sys.exit(f"lmdb-commits: {entries} entries after {a.count} commits")
    emit({"commits": a.count, "seconds": round(seconds, 4), "commits_per_second": a.count / seconds,
          "cpu_us_per_commit": round(cpu_seconds * 1e6 / a.count, 2), "lmdb_version": ".".join(map(str, lmdb.version()))})


def process_cpu_seconds(pid):
    """User plus system CPU seconds of process `pid`, all its threads (/proc/PID/stat fields 14, 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmd_cpu_window(a):
    """Runs a load generator and records the CPU the server `--pid` and the generator itself spent
    while it ran, per request: the figures registry-load reports for our daemon, for an anchor's."""
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    before = process_cpu_seconds(a.pid)
    child = subprocess.Popen(command)
    _, status, usage = os.wait4(child.pid, 0)
    after = process_cpu_seconds(a.pid)
    write_json(a.out, {"server_cpu_us_per_request": round((after - before) * 1e6 / a.requests, 2),
                       "client_cpu_us_per_request": round((usage.ru_utime + usage.ru_stime) * 1e6 / a.requests, 2)})
    sys.exit(os.waitstatus_to_exitcode(status))


def cmd_lmdb_scan_build(a):
    import lmdb
    import numpy as np
    source = read_json(a.vectors + ".json")["params"]
    marker = os.path.join(a.dir, "bench-source.json")
    if os.path.exists(marker) and read_json(marker) == source:
        emit({"cached": True, "rows": source["rows"]})
        return

    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    rows, dimension = source["rows"], source["dimension"]
    vectors = np.memmap(a.vectors, dtype="<f4", mode="r", shape=(rows, dimension))
    started = time.perf_counter()
    # A 2 KiB value takes one 4 KiB overflow page: ~4.1 GiB for 1M rows; 8 GiB (or 2x) leaves room.
    env = lmdb.open(a.dir, map_size=max(8 << 30, 2 * rows * 4096))
    for start in range(0, rows, 10_000):
        end = min(start + 10_000, rows)
        with env.begin(write=True) as txn:
            txn.cursor().putmulti(((i.to_bytes(8, "big"), vectors[i].tobytes()) for i in range(start, end)),
                                  append=True)
    entries = env.stat()["entries"]
    env.close()
    if entries != rows:
        sys.exit(f"lmdb-scan-build: {entries} entries, expected {rows}")
    write_json(marker, source)
    emit({"cached": False, "rows": rows, "seconds": round(time.perf_counter() - started, 3)})


def cmd_lmdb_scan(a):
    import lmdb
    import numpy as np
    source = read_json(os.path.join(a.dir, "bench-source.json"))
    rows, dimension = source["rows"], source["dimension"]
    started = time.perf_counter()
    env = lmdb.open(a.dir, readonly=True)
    with env.begin(buffers=True) as txn:
        # Allocated inside the timing: its page faults count, as ours do.
        out = np.empty((rows, dimension), dtype=np.float32)
        # A memoryview slice assignment is a plain memcpy: ~1.5x faster than out[i] = np.frombuffer(value).
        target, offset, size = memoryview(out).cast("B"), 0, dimension * 4
        for value in txn.cursor().iternext(keys=False, values=True):
            target[offset:offset + size] = value
            offset += size
        count = offset // size
    seconds = time.perf_counter() - started
    env.close()
    if count != rows:
        sys.exit(f"lmdb-scan: {count} values, expected {rows}")
    # Spot check outside the timing that the copy is the data set.
    vectors = np.memmap(a.vectors, dtype="<f4", mode="r", shape=(rows, dimension))
    sample = np.linspace(0, rows - 1, 64).astype(np.int64)
    if not np.array_equal(out[sample], vectors[sample]):
        sys.exit("lmdb-scan: values differ from the vectors file")
    emit({"rows": rows, "dimension": dimension, "seconds": seconds})


# ------------------------------------------------------------------------------------------ raw log

def parse_last_json(text):
    for line in reversed(text.splitlines()):
        if line.strip():
            return json.loads(line)
    raise ValueError("no output")


def parse_redis_csv(text):
    """redis-benchmark --csv: a header line, then one line per test (7.x: rps and latency percentiles)."""
    rows = list(csv.DictReader(line for line in text.splitlines() if line.strip()))
    if not rows or "rps" not in rows[-1]:
        raise ValueError("no rps column")
    row = rows[-1]
    out = {"test": row.get("test"), "requests_per_second": float(row["rps"])}
    for column, value in row.items():
        if column.endswith("_latency_ms"):
            out[column[: -len("_latency_ms")] + "_ms"] = float(value)
    return out


def cmd_record(a):
    with open(a.output) as f:
        text = f.read()
    try:
        data = parse_redis_csv(text) if a.format == "redis-csv" else parse_last_json(text)
    except ValueError as error:
        sys.exit(f"{a.workload} ({a.side}, round {a.round}): cannot read the output in {a.output}: {error}")
    if not isinstance(data, dict):
        sys.exit(f"{a.workload} ({a.side}, round {a.round}): expected a JSON object in {a.output}")
    if a.cpu:
        data.update(read_json(a.cpu))
    record = {"workload": a.workload, "side": a.side, "round": a.round, "data": data}
    with open(a.raw, "a") as f:
        f.write(json.dumps(record) + "\n")
    summary = summarise(data)
    if summary:
        progress(f"{a.workload} {a.side}: {summary}")
    emit({"recorded": a.workload, "side": a.side, "round": a.round})


def summarise(data):
    """A few headline figures of one run, for the progress log."""
    if data.get("cached"):
        return "cached"
    parts = []
    if data.get("identify_ms"):
        parts.append(f"median {fmt_ms(statistics.median(data['identify_ms']))}")
    for threads, run in (data.get("threads") or {}).items():
        parts.append(f"{threads} thread(s) median {fmt_ms(statistics.median(run['identify_ms']))}")
    for key, fmt in (("startup_ms", fmt_ms), ("requests_per_second", fmt_rps), ("commits_per_second", fmt_rps),
                     ("queries_per_second", fmt_rps), ("p99_ms", fmt_ms), ("rss_anon_bytes", fmt_bytes), ("templates", str)):
        if data.get(key) is not None:
            parts.append(f"{key} {fmt(data[key])}")
    for key in ("server_cpu_us_per_request", "cpu_us_per_commit"):
        if data.get(key) is not None:
            parts.append(f"{key} {data[key]:.3g}")
    if "seconds" in data:
        parts.append(f"{data['seconds']:.3g} s")
    for key in ("gbps_1", "gbps_2"):
        if key in data:
            parts.append(f"{key} {data[key]:.1f}")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------- table

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_sig3(x):
    """3 significant digits, never in exponent form."""
    if x is None:
        return "-"
    if x == 0:
        return "0"
    rounded = float(f"{x:.3g}")
    decimals = max(0, 2 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}"


def fmt_ms(x):
    return "-" if x is None else f"{fmt_sig3(x)} ms"


def fmt_us(x):
    return "-" if x is None else f"{fmt_sig3(x)} µs"


def fmt_rps(x):
    return "-" if x is None else f"{round(x)} req/s"


def fmt_bytes(x):
    if x is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= size:
            return f"{fmt_sig3(x / size)} {unit}"
    return f"{x} B"


def compare_top(ours_top, ours_scores, ref_top, ref_scores):
    """(ids agree, scores agree or None) for one query. Ids may differ only inside a tie of the
    reference (scores within TIE_TOLERANCE): in any order within the list, and in membership at the
    cut, where a tie can extend past k (then our scores there must equal the tied score, give or take
    rounding)."""
    scores_ok = None
    if ours_scores is not None:
        scores_ok = len(ours_scores) == len(ref_scores) and all(
            abs(x - y) <= SCORE_TOLERANCE for x, y in zip(ours_scores, ref_scores))
    # Ours returns only matches above its threshold (1e-6): a shorter list is complete if the
    # reference's extra entries score no more than that.
    if len(ours_top) < len(ref_top) and all(s <= TIE_TOLERANCE for s in ref_scores[len(ours_top):]):
        ref_top, ref_scores = ref_top[:len(ours_top)], ref_scores[:len(ours_top)]
        if ours_scores is not None:
            scores_ok = all(abs(x - y) <= SCORE_TOLERANCE for x, y in zip(ours_scores, ref_scores))
    k = len(ref_top)
    if len(ours_top) != k:
        return False, scores_ok
    start = 0
    while start < k:
        end = start + 1
        while end < k and abs(ref_scores[end] - ref_scores[end - 1]) <= TIE_TOLERANCE:
            end += 1
        if set(ours_top[start:end]) != set(ref_top[start:end]):
            at_cut_ok = end == k and ours_scores is not None and all(
                abs(ours_scores[j] - ref_scores[start]) <= 2 * TIE_TOLERANCE for j in range(start, end))
            if not at_cut_ok:
                return False, scores_ok
        start = end
    return True, scores_ok


def agreement(pairs):
    """pairs: (ours record data, reference (top, scores)). Counts queries agreeing in every pair."""
    ids_ok, scores_ok, total, scores_known = None, None, 0, True
    for ours, (ref_top, ref_scores) in pairs:
        ours_top, ours_scores = ours.get("top"), ours.get("scores")
        if ours_top is None or len(ours_top) != len(ref_top):
            return {"error": "ours has no top list for every query"}
        total = len(ref_top)
        if ids_ok is None:
            ids_ok, scores_ok = [True] * total, [True] * total
        for q in range(total):
            ids, scores = compare_top(ours_top[q], ours_scores[q] if ours_scores else None, ref_top[q], ref_scores[q])
            ids_ok[q] &= ids
            if scores is None:
                scores_known = False
            else:
                scores_ok[q] &= scores
    if ids_ok is None:
        return None
    return {"queries": total, "ids_agree": sum(ids_ok), "scores_agree": sum(scores_ok) if scores_known else None,
            "ids_differ": [q for q in range(total) if not ids_ok[q]],
            "scores_differ": [q for q in range(total) if scores_known and not scores_ok[q]]}


def agreement_note(name, result):
    if result is None:
        return None
    if "error" in result:
        return f"top-10 agreement {name}: {result['error']}"
    text = f"top-10 agreement {name}: {result['ids_agree']}/{result['queries']} queries"
    if result["ids_differ"]:
        text += f" (ids differ in queries {result['ids_differ'][:10]})"
    if result["scores_agree"] is not None:
        text += f"; scores within {SCORE_TOLERANCE:g}: {result['scores_agree']}/{result['queries']}"
        if result["scores_differ"]:
            text += f" (differ in queries {result['scores_differ'][:10]})"
    return text


class Raw:
    def __init__(self, path):
        self.records = []
        if os.path.exists(path):
            with open(path) as f:
                self.records = [json.loads(line) for line in f if line.strip()]

    def get(self, workload, side):
        return [r["data"] for r in self.records if r["workload"] == workload and r["side"] == side]

    def pooled(self, workload, side, field):
        values = []
        for data in self.get(workload, side):
            values.extend(data.get(field) or [])
        return values

    def each(self, workload, side, field):
        return [data.get(field) for data in self.get(workload, side)]


def ratio_text(ratio, target):
    """The ratio to two decimals, or more when two would print the target itself: a ratio of 0.2504
    against <= 0.25 shows as 0.2504 beside its FAIL, not as 0.25."""
    for digits in (2, 3, 4):
        text = f"{ratio:.{digits}f}"
        if text != f"{target:.{digits}f}":
            return text
    return f"{ratio:.6f}"


def cmd_table(a):
    raw = Raw(a.raw)
    selected = a.workloads.split(",")
    rows, notes, details = [], [], {}

    def row(name, ours, anchor, kind, target, fmt, extra=None):
        """kind: 'at-most' (ours/anchor <= target: times, memory), 'at-least' (ours/anchor >= target:
        throughputs), 'limit-ms' (ours <= target ms, no anchor)."""
        if kind == "limit-ms":
            ratio = None
            passed = None if ours is None else ours <= target
            target_text = f"<= {target:g} ms"
        elif kind == "limit-us":
            ratio = None
            passed = None if ours is None else ours <= target
            target_text = f"<= {target:g} µs"
        elif kind == "report":
            ratio = ours / anchor if ours is not None and anchor else None
            passed = None
            target_text = "-"
        elif kind == "floor-rps":
            ratio = None
            passed = None if ours is None else ours >= target
            target_text = f">= {target:,.0f}/s"
        else:
            ratio = ours / anchor if ours is not None and anchor else None
            passed = None if ratio is None else (ratio <= target if kind == "at-most" else ratio >= target)
            target_text = f"{'<=' if kind == 'at-most' else '>='} {target:g}x"
        rows.append([name, fmt(ours), fmt(anchor), "-" if ratio is None else ratio_text(ratio, target),
                     target_text, "-" if passed is None else ("pass" if passed else "FAIL")])
        details[name] = {"ours_median": ours, "anchor_median": anchor, "ratio": ratio, "target": target,
                         "kind": kind, "pass": passed, **(extra or {})}

    def kernel_note(name, ours_runs):
        """The kernel level our runs used and the fraction of rows the float32 kernel rescored."""
        if ours_runs and "kernels" in ours_runs[-1]:
            fractions = [r["rescored_fraction"] for r in ours_runs if r.get("rescored_fraction") is not None]
            rescored = f"{100 * statistics.median(fractions):.3f} % of rows rescored" if fractions else "no prefilter"
            notes.append(f"{name}: kernels {ours_runs[-1]['kernels']}; {rescored} (median over rounds)")

    def faiss_anchor(name, anchor_workload):
        anchors = raw.get(anchor_workload, "anchor")
        per_threads = {}
        for data in anchors:
            for threads, run in data["threads"].items():
                per_threads.setdefault(threads, []).extend(run["identify_ms"])
        medians = {t: statistics.median(ms) for t, ms in per_threads.items()}
        best = min(medians, key=medians.get) if medians else None
        if best is not None:
            threads = lambda t: f"{t} thread{'s' if t != '1' else ''}"
            label = ", ".join(f"{threads(t)} {fmt_ms(m)}" for t, m in sorted(medians.items()))
            index = "IndexFlatIPPanorama" if anchors[0].get("index") == "panorama" else "IndexFlatIP"
            notes.append(f"{name}: FAISS {index}, one query per search: {label}; the table uses {threads(best)} "
                         f"(rows {anchors[0]['rows']}, FAISS {anchors[0]['faiss_version']})")
        return anchors, medians, best

    def vectors(dimension, target):
        name = f"vectors-{dimension}"
        ours_runs = raw.get(f"identify-{dimension}", "ours")
        anchors, medians, best = faiss_anchor(name, name)
        ours = median(raw.pooled(f"identify-{dimension}", "ours", "identify_ms"))
        extra = {"anchor_threads": best, "anchor_median_by_threads": medians}
        if best is not None and ours_runs:
            ref = anchors[0]["threads"][best]
            result = agreement([(o, (ref["top"], ref["scores"])) for o in ours_runs])
            extra["agreement"] = result
            notes.append(agreement_note(name, result))
        kernel_note(name, ours_runs)
        row(name, ours, medians.get(best), "at-most", target, fmt_ms, extra)

    if "vectors-512" in selected:
        vectors(512, 0.25)
        if raw.get("vectors-512-panorama", "anchor"):
            # FAISS's exact pruning index beside the flat anchor, no target (the ratio stays flat's).
            _, medians, best = faiss_anchor("vectors-512-panorama", "vectors-512-panorama")
            row("vectors-512-panorama", median(raw.pooled("identify-512", "ours", "identify_ms")), medians.get(best),
                "report", None, fmt_ms, {"anchor_threads": best, "anchor_median_by_threads": medians})
    if "vectors-128" in selected:
        vectors(128, 0.3)

    if "faces-512" in selected:
        name = "faces-512"
        ours_runs = raw.get("identify-faces", "ours")
        anchors, medians, best = faiss_anchor(name, name)
        extra = {"anchor_threads": best, "anchor_median_by_threads": medians}
        if a.faces_identities and a.faces_meta and os.path.exists(a.faces_identities):
            import numpy as np
            ids = np.fromfile(a.faces_identities, dtype="<u4")
            expected = read_json(a.faces_meta)["expected"]
            # FAISS ranks rows, we rank identities (each one's best row): their best must agree, and
            # a new capture of an enrolled identity must find it first.
            same_best = found = 0
            for o in ours_runs:
                ref = anchors[0]["threads"][best]["top"] if best is not None else None
                for q, top in enumerate(o["top"]):
                    if ref is not None and top and int(ids[ref[q][0]]) == top[0]:
                        same_best += 1
                    if q < len(expected) and expected[q] >= 0 and top and top[0] == expected[q]:
                        found += 1
            enrolled = sum(1 for e in expected if e >= 0) * len(ours_runs)
            extra.update({"best_agrees_with_faiss": same_best, "enrolled_found_first": found})
            notes.append(f"{name}: best identity = identity of FAISS's best row in {same_best}/{sum(len(o['top']) for o in ours_runs)} "
                         f"queries; new captures of enrolled identities found first in {found}/{enrolled}")
        kernel_note(name, ours_runs)
        row(name, median(raw.pooled("identify-faces", "ours", "identify_ms")), medians.get(best), "at-most", 0.3, fmt_ms, extra)

    if "landmarks" in selected:
        # Each anchor run is checked against the ours run that wrote its files: the last one before it.
        pairs, last_ours = [], None
        for r in raw.records:
            if r["workload"] != "landmarks":
                continue
            if r["side"] == "ours":
                last_ours = r["data"]
            elif r["side"] == "anchor" and last_ours is not None:
                pairs.append((last_ours, (r["data"]["top"], r["data"]["scores"])))
        result = agreement(pairs) if pairs else None
        anchors = raw.get("landmarks", "anchor")
        if anchors:
            notes.append(f"landmarks: numpy {anchors[0]['numpy_version']}, {anchors[0]['rows']} templates, "
                         f"{anchors[0]['queries']} queries" + (" (stand-in files: --anchors-only)"
                                                               if raw.get("landmarks", "stand-in") else ""))
        notes.append(agreement_note("landmarks", result))
        row("landmarks", median(raw.pooled("landmarks", "ours", "identify_ms")),
            median(raw.pooled("landmarks", "anchor", "identify_ms")), "at-most", 0.5, fmt_ms, {"agreement": result})

    if "landmarks-aligned" in selected:
        row("landmarks-aligned", median(raw.pooled("landmarks-aligned", "ours", "identify_ms")),
            median(raw.pooled("landmarks-aligned", "anchor", "identify_ms")), "at-most", 2.0, fmt_ms, {})
        notes.append("landmarks-aligned: anchor = landmarks (1000) identify over the same generated faces, run beside it")

    if "daemon-identify" in selected:
        daemon = raw.get("daemon-identify", "ours")
        in_process = raw.get("daemon-identify", "anchor")
        extra = {}
        if daemon and in_process:
            first = in_process[0]
            result = agreement([(d, (first["top"], first.get("scores") or [[0.0] * len(t) for t in first["top"]]))
                                for d in daemon])
            extra["agreement_with_in_process"] = result
            notes.append(agreement_note("daemon-identify vs in-process (ids)", result))
        row("daemon-identify", median(raw.pooled("daemon-identify", "ours", "identify_ms")),
            median(raw.pooled("daemon-identify", "anchor", "identify_ms")), "at-most", 1.2, fmt_ms, extra)
        notes.append("daemon-identify: anchor = our in-process identify on the same 128-float store, run beside it")

    def load_note(name, ours_runs, more=""):
        if ours_runs:
            last = ours_runs[-1]
            keys = ("p50_ms", "p90_ms", "p99_ms", "max_ms")
            latency = ", ".join(f"{k[:-3]} {fmt_ms(last.get(k))}" for k in keys if k in last)
            errors = sum(int(r.get("errors", 0)) for r in ours_runs)
            notes.append(f"{name}: ours {latency} (last round); errors: {errors}{more}" + ("  <-- errors!" if errors else ""))

    if "registrations" in selected:
        ours_runs = raw.get("registrations", "ours")
        load_note("registrations", ours_runs)
        row("registrations", median(raw.each("registrations", "ours", "requests_per_second")),
            median(raw.each("registrations", "anchor", "commits_per_second")), "at-least", 6.0, fmt_rps)
        notes.append("registrations: anchor = py-lmdb, one durable put per write transaction, 1 thread")
        # The daemon's CPU per registration (utime + stime of registryd over the measured window: every
        # check, put, commit and reply), which does not depend on the machine's cores or disk; the
        # anchor's CPU per commit is shown beside it, without a ratio (it checks nothing).
        row("registrations-cpu", median(raw.each("registrations", "ours", "server_cpu_us_per_request")),
            median(raw.each("registrations", "anchor", "cpu_us_per_commit")), "limit-us", 25, fmt_us)
        notes.append(f"registrations-cpu: registryd's CPU per registration; anchor = py-lmdb's per commit (context, no ratio); "
                     f"registry-load's own {fmt_us(median(raw.each('registrations', 'ours', 'client_cpu_us_per_request')))}")

    if "registrations-1m" in selected:
        for dimension in (128, 512):
            name = f"registrations-1m-{dimension}"
            ours_runs, anchors = raw.get(name, "ours"), raw.get(name, "anchor")
            seed = (raw.get(f"{name}-seed", "ours") or [None])[-1]
            p50 = median(raw.each(name, "ours", "p50_ms"))
            by_threads = {}
            for data in anchors:
                for threads, run in data["by_threads"].items():
                    by_threads.setdefault(threads, []).append(run["queries_per_second"])
            by_threads = {t: statistics.median(q) for t, q in sorted(by_threads.items())}
            seeding = ("reused, not seeded" if seed["reused"] else f"seeded through the daemon's import in "
                       f"{seed['seconds']:.0f} s, not timed") if seed else "seeding not recorded"
            load_note(name, ours_runs, f"; p50 {fmt_ms(p50)} (median over rounds); 64 clients registering into "
                                       f"{seed['people'] if seed else '?'} people ({seeding})")
            if anchors:
                label = ", ".join(f"{t} thread{'s' if t != '1' else ''} {round(q)} queries/s" for t, q in by_threads.items())
                searched = anchors[0]["queries"]
                measured = ours_runs[-1].get("requests") if ours_runs else None
                share = f"the first {searched} of {measured}" if measured and measured > searched else f"all {searched}"
                notes.append(f"{name}: anchor = FAISS {anchors[0]['faiss_version']} IndexFlatIP, k=1: ours' queries "
                             f"({share}) over the same {anchors[0]['rows']} rows, {anchors[0]['batch']} per search "
                             f"through BLAS: {label}; the table uses the better; FAISS's best score at most "
                             f"{max(d['best_score_max'] for d in anchors):.3f} (registration threshold 0.6)")
            row(name, median(raw.each(name, "ours", "requests_per_second")),
                median(raw.each(name, "anchor", "queries_per_second")), "at-least", 1.0, fmt_rps,
                {"p50_ms": p50, "seed_seconds": seed["seconds"] if seed else None,
                 "anchor_queries_per_second_by_threads": by_threads})

    if "authenticate-50" in selected:
        load_note("authenticate-50", raw.get("authenticate-50", "ours"))
        redis = raw.get("authenticate-50", "anchor")
        if redis:
            notes.append(f"authenticate-50: redis GET, 50 clients: p50 {fmt_ms(median(raw.each('authenticate-50', 'anchor', 'p50_ms')))}"
                         f", p99 {fmt_ms(median(raw.each('authenticate-50', 'anchor', 'p99_ms')))}")
        row("authenticate-50", median(raw.each("authenticate-50", "ours", "requests_per_second")),
            median(raw.each("authenticate-50", "anchor", "requests_per_second")), "at-least", 1.0, fmt_rps)
        # Server CPU per request: the figure that holds on any machine (on two cores the load
        # generators' share decides the throughputs).
        row("authenticate-50-cpu", median(raw.each("authenticate-50", "ours", "server_cpu_us_per_request")),
            median(raw.each("authenticate-50", "anchor", "server_cpu_us_per_request")), "at-most", 1.2, fmt_us)
        notes.append("authenticate-50-cpu: server CPU per request (utime + stime over the measured window): registryd per "
                     "authentication, redis-server per GET; the load generators' own: registry-load "
                     f"{fmt_us(median(raw.each('authenticate-50', 'ours', 'client_cpu_us_per_request')))}, redis-benchmark "
                     f"{fmt_us(median(raw.each('authenticate-50', 'anchor', 'client_cpu_us_per_request')))}")

    if "authenticate-p99" in selected:
        load_note("authenticate-p99", raw.get("authenticate-p99", "ours"))
        if raw.get("authenticate-p99", "context"):
            notes.append(f"authenticate-p99 context: redis GET, 1 client: "
                         f"{fmt_rps(median(raw.each('authenticate-p99', 'context', 'requests_per_second')))}, "
                         f"p99 {fmt_ms(median(raw.each('authenticate-p99', 'context', 'p99_ms')))}")
        row("authenticate-p99", median(raw.each("authenticate-p99", "ours", "p99_ms")), None, "limit-ms", 1.0, fmt_ms)

    if "fleet" in selected:
        row("fleet-identify", median(raw.each("fleet-identify", "ours", "p50_ms")),
            median(raw.each("fleet-identify", "anchor", "p50_ms")), "at-most", 1.05, fmt_ms)
        row("fleet-authenticate", median(raw.each("fleet-authenticate", "ours", "requests_per_second")),
            median(raw.each("fleet-authenticate", "anchor", "requests_per_second")), "at-least", 0.95, fmt_rps)
        # The three nodes' rates of one round add up: the fleet's rate that round.
        by_round = {}
        for r in raw.records:
            if r["workload"] == "fleet-registrations" and r["side"] == "ours":
                by_round[r["round"]] = by_round.get(r["round"], 0) + r["data"].get("requests_per_second", 0)
        row("fleet-registrations", median(list(by_round.values())), None, "floor-rps", 5000, fmt_rps)
        row("fleet-lag", median(raw.each("fleet-lag", "ours", "p99_ms")), None, "limit-ms", 100, fmt_ms)
        lag = raw.get("fleet-lag", "ours")
        if lag:
            last = lag[-1]
            notes.append(f"fleet-lag: {last.get('writes_per_second')} writes/s achieved, p50 {fmt_ms(last.get('p50_ms'))}, "
                         f"max {fmt_ms(last.get('max_ms'))}, errors {last.get('errors')} (last round)")
        load_note("fleet-authenticate", raw.get("fleet-authenticate", "ours"))
        notes.append("fleet: anchor of identify and authenticate = a standalone registryd with the same people, run beside the node; "
                     "PostgreSQL on this machine, synchronous_commit=on")

    identify512 = raw.get("identify-512", "ours")
    if "startup" in selected:
        scans = raw.each("startup", "anchor", "seconds")
        anchor = median([s * 1000 for s in scans])
        row("startup", median(raw.each("identify-512", "ours", "startup_ms")), anchor, "at-most", 1.0, fmt_ms)
        loads = sorted(set(r.get("index_load", "?") for r in raw.get("identify-512", "ours")))
        notes.append(f"startup: anchor = py-lmdb cursor scan of the {a.vector_rows}x512 values into one float32 array; "
                     f"ours loaded the index: {', '.join(loads)}")

    if "confined" in selected:
        confined, free = raw.get("confined", "ours"), raw.get("confined", "anchor")
        ours = median(raw.pooled("confined", "ours", "identify_ms"))
        anchor = median(raw.pooled("confined", "anchor", "identify_ms"))
        row("confined", ours, anchor, "at-most", 1.3, fmt_ms,
            {"startup_ms": median(raw.each("confined", "ours", "startup_ms")),
             "anchor_startup_ms": median(raw.each("confined", "anchor", "startup_ms"))})
        top_ours = median(raw.pooled("confined-top10", "ours", "identify_ms"))
        top_anchor = median(raw.pooled("confined-top10", "anchor", "identify_ms"))
        details["confined-top10"] = {"ours_median": top_ours, "anchor_median": top_anchor,
                                     "ratio": top_ours / top_anchor if top_ours and top_anchor else None}
        if confined and free:
            # The limit tools/bench gave the cgroup (0.4x the raw float32, floored), as it wrote it.
            with open(os.path.join(os.path.dirname(a.raw), "out", "confined.limit")) as f:
                limit = int(f.read())
            top = (f"; top-10 without a threshold {fmt_ms(top_ours)} confined, {fmt_ms(top_anchor)} not"
                   if top_ours is not None and top_anchor is not None else "")
            notes.append(f"confined: identify at 0.6 in a memory cgroup of {fmt_bytes(limit)} ({limit / (a.vector_rows * 512 * 4):.2f}x the raw float32), "
                         f"page cache dropped first: {fmt_ms(ours)} against {fmt_ms(anchor)} unconfined; start-up "
                         f"{fmt_ms(details['confined']['startup_ms'])} against "
                         f"{fmt_ms(details['confined']['anchor_startup_ms'])}; RSS after the queries "
                         f"{fmt_bytes(median(raw.each('confined', 'ours', 'rss_after_bytes')))} confined, "
                         f"{fmt_bytes(median(raw.each('confined', 'anchor', 'rss_after_bytes')))} not{top}")
            # Rates: within 1.3x of unconfined is a ratio of at least 1 / 1.3.
            reg_ours = median(raw.each("confined-registrations", "ours", "requests_per_second"))
            reg_anchor = median(raw.each("confined-registrations", "anchor", "requests_per_second"))
            row("confined-registrations", reg_ours, reg_anchor, "at-least", 0.77, fmt_rps,
                {"p50_ms": median(raw.each("confined-registrations", "ours", "p50_ms")),
                 "anchor_p50_ms": median(raw.each("confined-registrations", "anchor", "p50_ms"))})
            seed = (raw.get("confined-registrations-seed", "ours") or [None])[-1]
            load_note("confined-registrations", raw.get("confined-registrations", "ours"),
                      f"; 64 clients registering into {seed['people'] if seed else '?'} people of 512 floats, "
                      f"registryd in the same cgroup; unconfined: "
                      f"p50 {fmt_ms(details['confined-registrations']['anchor_p50_ms'])}")
        else:
            skipped = os.path.join(os.path.dirname(a.raw), "out", "confined.skipped")
            reason = open(skipped).read().strip() if os.path.exists(skipped) else "no runs recorded"
            notes.append(f"confined: not measured ({reason})")

    if "memory" in selected:
        anchor = a.vector_rows * 512 * 4
        # The whole resident set after the identify rounds, anonymous and file-backed alike (the codes
        # mapped from the index snapshot, and whatever pages of LMDB's map the rescored rows were read
        # through and are still mapped).
        ours = median(raw.each("identify-512", "ours", "rss_after_bytes"))
        row("memory", ours, anchor, "at-most", 0.4, fmt_bytes,
            {"rss_after_anon_bytes": median(raw.each("identify-512", "ours", "rss_after_anon_bytes")),
             "rss_after_file_bytes": median(raw.each("identify-512", "ours", "rss_after_file_bytes"))})
        if identify512:
            notes.append(f"memory: ours = whole RSS after the identify rounds {fmt_bytes(ours)} (anonymous "
                         f"{fmt_bytes(details['memory']['rss_after_anon_bytes'])}, file-backed "
                         f"{fmt_bytes(details['memory']['rss_after_file_bytes'])}); anchor = raw float32 bytes")

    bandwidth = {}
    if "bandwidth" in selected:
        probe = (raw.get("bandwidth", "ours") or [None])[-1]
        c_probe = (raw.get("bandwidth", "c-probe") or [None])[-1]
        ours_ms = details.get("vectors-512", {}).get("ours_median")
        scan = a.vector_rows * 512 * 4 / (ours_ms / 1000) / 1e9 if ours_ms else None
        bandwidth = {"probe": probe, "c_probe": c_probe, "identify_scan_gbps": scan}
        rows_label = f"{a.vector_rows // 1_000_000}M" if a.vector_rows % 1_000_000 == 0 else f"{a.vector_rows // 1000}k"
        if probe:
            line = (f"read bandwidth probe: {probe['gbps_1']:.1f} GB/s (1 thread), {probe['gbps_2']:.1f} GB/s (2 threads)")
        else:
            line = "read bandwidth probe: - (our probe not run)"
        if scan is not None:
            # The prefilter reads each row's int8 codes and terms (512 + 16 bytes), and the float32
            # row (2,048 bytes) only of the rows it rescores.
            fractions = [r["rescored_fraction"] for r in raw.get("identify-512", "ours") if r.get("rescored_fraction") is not None]
            rescored = statistics.median(fractions) if fractions else None
            if rescored is not None:
                read = a.vector_rows * (528 + rescored * 2048) / (ours_ms / 1000) / 1e9
                bandwidth["identify_read_gbps"] = read
                share = f" ({read / probe['gbps_2']:.2f} of the probe's 2-thread figure)" if probe else ""
                line += (f"; our {rows_label}x512 identify reads codes and rescored rows at {read:.1f} GB/s{share}"
                         f" (as float32 rows: {scan:.1f} GB/s)")
            else:
                share = f" ({scan / probe['gbps_2']:.2f} of the probe's 2-thread figure)" if probe else ""
                line += f"; our {rows_label}x512 identify scans at {scan:.1f} GB/s{share}"
        bandwidth["line"] = line
        if c_probe:
            bandwidth["c_line"] = (f"C read probe (cc -O3 -march=native, 2 GiB float sum): {c_probe['gbps_1']:.1f} GB/s "
                                   f"(1 thread), {c_probe['gbps_2']:.1f} GB/s (2 threads)")

    header = ["workload", "ours (median)", "anchor (median)", "ratio", "target", "pass/fail"]
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda cells: " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    print()
    for note in filter(None, notes):
        print(note)
    for key in ("line", "c_line"):
        if key in bandwidth:
            print(bandwidth[key])

    results = {
        "config": {"mode": a.mode, "rounds": a.rounds, "workloads": selected, "anchors_only": a.anchors_only,
                   "vector_rows": a.vector_rows, "landmark_count": a.landmark_count},
        "environment": environment(),
        "workloads": details,
        "bandwidth": bandwidth,
        "notes": [n for n in notes if n],
        "raw": raw.records,
    }
    write_json(a.out, results)


def environment():
    from importlib import metadata
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        pass
    versions = {}
    for package in ("faiss-cpu", "numpy", "lmdb"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
            "packages": versions, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


# -------------------------------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("gen-vectors")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--dimension", type=int, required=True)
    p.add_argument("--queries", type=int, required=True)
    p.add_argument("--vectors", required=True, help="output: rows x dimension float32")
    p.add_argument("--queries-out", required=True, help="output: queries x dimension float32")
    p.add_argument("--seed", type=int, default=SEED)
    p.set_defaults(run=cmd_gen_vectors)

    p = sub.add_parser("gen-faces")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--dimension", type=int, required=True)
    p.add_argument("--queries", type=int, required=True)
    p.add_argument("--vectors", required=True, help="output: rows x dimension float32")
    p.add_argument("--identities-out", required=True, help="output: the identity of each row, uint32")
    p.add_argument("--queries-out", required=True, help="output: queries x dimension float32")
    p.add_argument("--seed", type=int, default=SEED)
    p.set_defaults(run=cmd_gen_faces)

    p = sub.add_parser("gen-landmarks")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--queries", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.set_defaults(run=cmd_gen_landmarks)

    p = sub.add_parser("faiss")
    p.add_argument("--vectors", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--dimension", type=int, required=True)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument("--index", choices=["flat", "panorama"], default="flat")
    p.add_argument("--levels", type=int, default=8, help="panorama: levels (slices of the dimensions)")
    p.add_argument("--batch-size", type=int, default=128, help="panorama: rows stored per batch")
    p.set_defaults(run=cmd_faiss)

    p = sub.add_parser("faiss-batch")
    p.add_argument("--vectors", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--dimension", type=int, required=True)
    p.add_argument("--batch", type=int, default=64, help="queries per search")
    p.add_argument("--max-queries", type=int, help="search only the first N queries (default: all)")
    p.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.set_defaults(run=cmd_faiss_batch)

    p = sub.add_parser("landmarks-numpy")
    p.add_argument("--dir", required=True)
    p.add_argument("--k", type=int, default=10)
    p.set_defaults(run=cmd_landmarks_numpy)

    p = sub.add_parser("lmdb-commits")
    p.add_argument("--dir", required=True)
    p.add_argument("--count", type=int, required=True)
    p.set_defaults(run=cmd_lmdb_commits)

    p = sub.add_parser("lmdb-scan-build")
    p.add_argument("--vectors", required=True)
    p.add_argument("--dir", required=True)
    p.set_defaults(run=cmd_lmdb_scan_build)

    p = sub.add_parser("lmdb-scan")
    p.add_argument("--vectors", required=True, help="the source file, for a spot check after the timing")
    p.add_argument("--dir", required=True)
    p.set_defaults(run=cmd_lmdb_scan)

    p = sub.add_parser("record")
    p.add_argument("--raw", required=True)
    p.add_argument("--workload", required=True)
    p.add_argument("--side", required=True)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--format", choices=["json", "redis-csv"], default="json")
    p.add_argument("--cpu", help="a cpu-window's figures, merged into the run's")
    p.add_argument("output")
    p.set_defaults(run=cmd_record)

    p = sub.add_parser("cpu-window")
    p.add_argument("--pid", type=int, required=True, help="the server")
    p.add_argument("--requests", type=int, required=True, help="what the command sends")
    p.add_argument("--out", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(run=cmd_cpu_window)

    p = sub.add_parser("table")
    p.add_argument("--raw", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--workloads", required=True)
    p.add_argument("--mode", required=True)
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--vector-rows", type=int, required=True)
    p.add_argument("--landmark-count", type=int, required=True)
    p.add_argument("--anchors-only", action="store_true")
    p.add_argument("--faces-identities", help="the faces workload's identity of each row (uint32)")
    p.add_argument("--faces-meta", help="the faces workload's .json sidecar (expected identity per query)")
    p.set_defaults(run=cmd_table)

    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
