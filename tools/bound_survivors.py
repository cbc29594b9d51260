#!/usr/bin/env python3
"""How many rows a prefilter bound lets through, for the int8 bound identify uses and for a 4-bit one.

Why this exists: a first stage reading 4 bits per dimension instead of 8 would halve the bytes an
identification streams, if its bound stayed tight enough to drop almost every row. This measures that
on the bench's vectors (docs/scans.md, "A 4-bit first stage"). Both bounds are the exact, deterministic
ones (Cauchy-Schwarz on each quantisation residual, as the int8 prefilter's): the 4-bit codes are
h = clamp(round(c / 18), -7, 7) of the int8 codes c, with r = c - 18 h, so that
b.c <= 18 (b.h) + |b| |r| for the query's int8 codes b, and the int8 bound follows from that.

Usage: tools/bound_survivors.py VECTORS.f32 QUERIES.f32 [--dimension 512] [--k 10] [--queries-used 20]
(with numpy: .bench/venv/bin/python after tools/bench has made it).
"""
import argparse

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("vectors")
    parser.add_argument("queries")
    parser.add_argument("--dimension", type=int, default=512)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--queries-used", type=int, default=20)
    a = parser.parse_args()
    d = a.dimension
    x = np.fromfile(a.vectors, dtype="<f4").reshape(-1, d)
    q = np.fromfile(a.queries, dtype="<f4").reshape(-1, d)[: a.queries_used]
    s = np.abs(x).max(axis=1) / 127
    c = np.rint(x / s[:, None]).astype(np.float32)
    sc_norm = s * np.linalg.norm(c, axis=1)
    residual = np.linalg.norm(x - s[:, None] * c, axis=1)
    h = np.clip(np.rint(c / 18), -7, 7)
    r_norm = np.linalg.norm(c - 18 * h, axis=1)
    int8, four = [], []
    for query in q:
        t = np.abs(query).max() / 127
        b = np.rint(query / t).astype(np.float32)
        q_residual = np.linalg.norm(query - t * b)
        cut = np.partition(x @ query, -a.k)[-a.k]
        slack = q_residual * sc_norm + np.linalg.norm(query) * residual
        int8.append(np.mean(s * t * (c @ b) + slack >= cut))
        four.append(np.mean(s * t * (18 * (h @ b) + np.linalg.norm(b) * r_norm) + slack >= cut))
    print(f"{len(x)} rows x {d}, {len(q)} queries, top-{a.k}")
    print(f"int8 bound: {np.median(int8):.5%} of rows survive (median; {min(int8):.5%}-{max(int8):.5%})")
    print(f"4-bit bound: {np.median(four):.3%} of rows survive (median; {min(four):.3%}-{max(four):.3%})")


if __name__ == "__main__":
    main()
