#!/usr/bin/env python3
"""Runs bench_store and prints beehive time / raw SQLite time per pair and mode.

    python3 bench/ratios.py                      # 3 repetitions, medians
    python3 bench/ratios.py --repetitions 5      # more repetitions
    python3 bench/ratios.py --json out.json      # only read an earlier JSON result
    python3 bench/ratios.py -- --benchmark_filter=Get   # extra args for the binary

The binary's own console output is shown while it runs; the JSON result is kept in
build/default/bench_store.json (or --out). Standard library only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, beehive benchmark, raw benchmark, target ratio)
PAIRS = [
    ("create", "BM_BeehiveCreate", "BM_RawInsert", 3.0),
    ("update", "BM_BeehiveUpdate", "BM_RawUpdate", 3.0),
    ("get", "BM_BeehiveGet", "BM_RawPointSelect", 1.5),
]
MODES = ["normal", "full"]
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def run(binary, out, repetitions, extra):
    cmd = [
        binary,
        f"--benchmark_repetitions={repetitions}",
        "--benchmark_report_aggregates_only=true",
        f"--benchmark_out={out}",
        "--benchmark_out_format=json",
    ] + extra
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def medians(path):
    """({(benchmark, mode): median real time in µs}, {(benchmark, mode): cv of real time},
    context) from a Google Benchmark JSON file."""
    with open(path) as f:
        data = json.load(f)
    per_run = {}  # run_name -> list of iteration times, when there are no aggregates
    result = {}
    cvs = {}
    for b in data["benchmarks"]:
        # run_name looks like "BM_RawInsert/normal/real_time".
        parts = b.get("run_name", b["name"]).split("/")
        if len(parts) < 2:
            continue
        key = (parts[0], parts[1])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                result[key] = b["real_time"] * TO_US[b.get("time_unit", "ns")]
            elif b.get("aggregate_name") == "cv":
                cvs[key] = b["real_time"]  # a fraction, not a time
            continue
        t = b["real_time"] * TO_US[b.get("time_unit", "ns")]
        if not b.get("error_occurred"):
            per_run.setdefault(key, []).append(t)
    for key, ts in per_run.items():
        result.setdefault(key, statistics.median(ts))
        if len(ts) > 1 and key not in cvs:
            cvs[key] = statistics.stdev(ts) / statistics.mean(ts)
    return result, cvs, data.get("context", {})


def table(times, cvs):
    lines = [
        "| op | synchronous | raw SQLite (µs) | beehive (µs) | beehive / raw | target | met "
        "| cv raw / beehive |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for label, bh, raw, target in PAIRS:
        for mode in MODES:
            b, r = times.get((bh, mode)), times.get((raw, mode))
            if b is None or r is None:
                continue
            ratio = b / r
            met = "yes" if ratio <= target else "**no**"
            cv = " / ".join(f"{cvs[(n, mode)]:.0%}" if (n, mode) in cvs else "-" for n in (raw, bh))
            lines.append(f"| {label} | {mode.upper()} | {r:.2f} | {b:.2f} | "
                         f"{ratio:.2f}x | ≤ {target:g}x | {met} | {cv} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/default/bench_store"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build/default/bench_store.json"))
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--json", help="read this JSON result instead of running the binary")
    ap.add_argument("extra", nargs="*", help="arguments passed to the binary (after --)")
    args = ap.parse_args()

    path = args.json
    if not path:
        if not os.access(args.binary, os.X_OK):
            sys.exit(f"{args.binary} not found: build first "
                     "(cmake --preset default && cmake --build --preset default)")
        run(args.binary, args.out, args.repetitions, args.extra)
        path = args.out

    times, cvs, ctx = medians(path)
    print()
    if not times:
        sys.exit(f"no benchmark results in {path}")
    print(f"beehive / raw SQLite, median real time ({ctx.get('date', '')}, "
          f"{ctx.get('num_cpus', '?')} CPUs)")
    print(table(times, cvs))
    print("(cv: coefficient of variation of real time across repetitions; a few % is a "
          "quiet machine)")


if __name__ == "__main__":
    main()
