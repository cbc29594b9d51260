#!/usr/bin/env python3
"""Helpers of tools/bench-scale (`tools/bench --scale N,...`): the exactness check by brute force
over the raw file, and the table and plot of the figures each size produced."""
import argparse
import json
import os
import sys


def cmd_brute_top1(a):
    """Per query, the best row of the file's first `rows` rows by float32 dot product (streamed a
    block at a time, never the whole file in memory), as the identity of that row and its score."""
    import numpy as np
    d = a.dimension
    queries = np.fromfile(a.queries, dtype="<f4").reshape(-1, d)
    identities = np.fromfile(a.identities, dtype="<u4", count=a.rows)
    best = np.full(len(queries), -np.inf, dtype=np.float32)
    where = np.zeros(len(queries), dtype=np.int64)
    block = 1 << 18
    with open(a.vectors, "rb") as f:
        for start in range(0, a.rows, block):
            count = min(block, a.rows - start)
            rows = np.fromfile(f, dtype="<f4", count=count * d).reshape(count, d)
            scores = rows @ queries.T  # count x queries
            top = scores.argmax(axis=0)
            values = scores[top, np.arange(len(queries))]
            better = values > best
            best[better] = values[better]
            where[better] = start + top[better]
    print(json.dumps({"identity": [int(identities[w]) for w in where], "score": [float(s) for s in best]}))


def cmd_table(a):
    """The table of the sizes measured (one JSON object per line in `results`), markdown, and the plot."""
    results = [json.loads(line) for line in open(a.results) if line.strip()]
    results.sort(key=lambda r: r["rows"])
    mib = 1 << 20
    lines = ["| templates | import (templates/s) | start, clean stop (s) | start, after a crash (s) | identify top-10, median (ms) "
             "| resident after identify: all / anonymous / file (MiB) | against the raw float32 | exact (best identity and score, of queries) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        raw = r["rows"] * r["dimension"] * 4
        lines.append(
            f"| {r['rows']:,} | {r['rows'] / r['import_seconds']:,.0f} | {r['clean_start_ms'] / 1000:.1f} | "
            f"{r['crash_start_ms'] / 1000:.1f} | {r['identify_median_ms']:.1f} | "
            f"{r['rss_after_bytes'] / mib:,.0f} / {r['rss_after_anon_bytes'] / mib:,.0f} / {r['rss_after_file_bytes'] / mib:,.0f} | "
            f"{r['rss_after_bytes'] / raw:.2f}x | {r['exact']}/{r['queries']} |")
    print("\n".join(lines))
    if a.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("bench-scale: no matplotlib: no plot", file=sys.stderr)
            return
        n = [r["rows"] / 1e6 for r in results]
        fig, left = plt.subplots(figsize=(7, 4))
        left.plot(n, [r["identify_median_ms"] for r in results], "o-", color="tab:blue", label="identify top-10, median (ms)")
        left.set_xlabel("templates (millions, 512 floats each)")
        left.set_ylabel("identify median (ms)", color="tab:blue")
        right = left.twinx()
        right.plot(n, [r["rss_after_bytes"] / (1 << 30) for r in results], "s--", color="tab:red", label="resident set (GiB)")
        right.plot(n, [r["rows"] * r["dimension"] * 4 / (1 << 30) for r in results], ":", color="grey", label="raw float32 (GiB)")
        right.set_ylabel("GiB", color="tab:red")
        fig.legend(loc="upper left", bbox_to_anchor=(0.12, 0.88), fontsize="small")
        fig.tight_layout()
        fig.savefig(a.plot)
        print(f"bench-scale: plot written to {a.plot}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("brute-top1")
    p.add_argument("--vectors", required=True)
    p.add_argument("--identities", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--dimension", type=int, required=True)
    p.set_defaults(run=cmd_brute_top1)
    p = sub.add_parser("table")
    p.add_argument("--results", required=True)
    p.add_argument("--plot")
    p.set_defaults(run=cmd_table)
    a = parser.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
