#!/usr/bin/env python3
"""Runs a bench_* binary and prints its ratio table (medians of repetitions).

    python3 bench/ratios.py                      # bench_store: beehive / raw SQLite
    python3 bench/ratios.py --suite watch        # bench_watch: ratios to 0 watchers
    python3 bench/ratios.py --suite all          # store, controller, watch, relations,
                                                 # events, perf, commit, selectors,
                                                 # change_log, postgres
    python3 bench/ratios.py --repetitions 5      # more repetitions (default 3, watch 7)
    python3 bench/ratios.py --json out.json      # only read an earlier JSON result
    python3 bench/ratios.py -- --benchmark_filter=Get   # extra args for the binary

Suites: store (bench/store.cpp), controller (bench/controller.cpp), watch
(bench/watch.cpp), relations (bench/relations.cpp), events (bench/events.cpp), perf
(bench/perf.cpp, all but group commit), commit (bench/perf.cpp's group commit cases,
repeated), selectors (bench/selectors.cpp: a selective list of 100 000 objects against raw
SQLite and the full list), change_log (bench/change_log.cpp: a create with and without
the change log's row) and postgres (bench/postgres.cpp: the PostgreSQL store against raw
libpq on one server; $BEEHIVE_BENCH_PG names it, else the binary starts a throwaway one). Every ratio divides two medians measured in the same run. The binary's own console output is shown while it runs; the
JSON result is kept in build/default/bench_<suite>.json (or --out). Standard library
only.
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


# --- the suites added after bench_store: generic parsing -----------------------------------

# Name parts Google Benchmark appends that are not part of a case's identity.
def _case(run_name):
    parts = [p for p in run_name.split("/")
             if p not in ("real_time", "manual_time")
             and not p.startswith(("iterations:", "min_time:", "repeats:", "threads:"))]
    return "/".join(parts)


def results(path):
    """({case: {"time": median real time in µs, "cv": cv of real time or None,
    counter: median value, ...}}, context). A case is the run name without the
    iterations:/real_time/manual_time parts, e.g. "BM_Converge/objects:1000/workers:4"."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    runs = {}
    skip = {"name", "run_name", "run_type", "aggregate_name", "aggregate_unit", "family_index",
            "per_family_instance_index", "repetitions", "repetition_index", "threads",
            "iterations", "real_time", "cpu_time", "time_unit", "error_occurred",
            "error_message", "label"}
    for b in data["benchmarks"]:
        case = _case(b.get("run_name", b["name"]))
        unit = TO_US[b.get("time_unit", "ns")]
        if b.get("error_occurred"):
            out.setdefault(case, {})["error"] = b.get("error_message", "error")
            continue
        if b.get("run_type") == "aggregate":
            entry = out.setdefault(case, {})
            if b.get("aggregate_name") == "median":
                entry["time"] = b["real_time"] * unit
                entry.update({k: v for k, v in b.items() if k not in skip})
            elif b.get("aggregate_name") == "cv":
                entry["cv"] = b["real_time"]
            continue
        runs.setdefault(case, []).append(b)
    for case, bs in runs.items():  # no aggregates (a single repetition)
        entry = out.setdefault(case, {})
        if "time" in entry:
            continue
        entry["time"] = statistics.median(b["real_time"] * TO_US[b.get("time_unit", "ns")]
                                          for b in bs)
        for k in bs[0]:
            if k not in skip and isinstance(bs[0][k], (int, float)):
                entry[k] = statistics.median(b[k] for b in bs)
        if len(bs) > 1:
            ts = [b["real_time"] for b in bs]
            entry["cv"] = statistics.stdev(ts) / statistics.mean(ts)
    return out, data.get("context", {})


def _cv(entry):
    return f"{entry['cv']:.0%}" if entry.get("cv") is not None else "-"


def _num(x, fmt):
    return format(x, fmt) if x is not None else "-"


def controller_table(res):
    lines = [
        "| objects | workers | start → all settled (ms) | objects settled/s | µs/object "
        "| start() (ms) | cv |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for objects in (1000, 10000):
        for workers in (1, 4):
            e = res.get(f"BM_Converge/objects:{objects}/workers:{workers}")
            if not e or "time" not in e:
                continue
            lines.append(f"| {objects} | {workers} | {e['time'] / 1e3:.1f} | "
                         f"{_num(e.get('objects/s'), ',.0f')} | {_num(e.get('us/object'), '.1f')} "
                         f"| {_num(e.get('start_ms'), '.2f')} | {_cv(e)} |")
    small = res.get("BM_ConvergeRequeueing/objects:1000")
    large = res.get("BM_ConvergeRequeueing/objects:20000")
    if small and large and small.get("us/object") and large.get("us/object"):
        growth = large["us/object"] / small["us/object"]
        lines += [
            "",
            "| every pass requeueing (4 workers) | µs/object at 1 000 | at 20 000 | growth |",
            "|---|---:|---:|---:|",
            f"| timers held by every object | {small['us/object']:.1f} | "
            f"{large['us/object']:.1f} | {growth:.2f}x |",
        ]
    raw, bh = res.get("BM_RawUpdateStatus"), res.get("BM_BeehiveUpdateStatus")
    if raw and bh and "time" in raw and "time" in bh:
        ratio = bh["time"] / raw["time"]
        lines += [
            "",
            "| op | synchronous | raw SQLite (µs) | beehive (µs) | beehive / raw | write target "
            "| met | cv raw / beehive |",
            "|---|---|---:|---:|---:|---:|---|---:|",
            f"| update_status | NORMAL | {raw['time']:.2f} | {bh['time']:.2f} | {ratio:.2f}x "
            f"| ≤ 3x | {'yes' if ratio <= 3 else '**no**'} | {_cv(raw)} / {_cv(bh)} |",
        ]
    return "\n".join(lines)


WATCH_CASES = [
    ("none", "no watch (baseline)"),
    ("one", "1 watcher on the written kind, consumed"),
    ("many", "64 watchers on the written kind, consumed"),
    ("other_kinds", "16 watchers, one on each of 16 other kinds"),
    ("slow", "1 watcher on the written kind, never read"),
]


def watch_table(res):
    base = res.get("BM_WatchedUpdate/none", {}).get("time")
    lines = [
        "| case | update (µs) | ratio to no watch | delivered / write / watcher "
        "| pending after | RSS growth (KiB) | cv |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in WATCH_CASES:
        e = res.get(f"BM_WatchedUpdate/{key}")
        if not e or "time" not in e:
            continue
        ratio = f"{e['time'] / base:.2f}x" if base else "-"
        lines.append(f"| {label} | {e['time']:.1f} | {ratio} | "
                     f"{_num(e.get('delivered/write'), '.2f')} | "
                     f"{_num(e.get('pending_after'), '.0f')} | "
                     f"{_num(e.get('rss_growth_KiB'), '.0f')} | {_cv(e)} |")
    fan = {key: res.get(f"BM_WatchFanout/watchers:{key}") for key in FANOUT_CASES}
    if any(e and "lag_ms" in e for e in fan.values()):
        base = (fan.get("0/writes:200000") or {}).get("writes/s")
        short = (fan.get("200/writes:20000") or {}).get("peak_rss_growth_MiB")
        lines += [
            "",
            "| watchers x writes | writes/s | ratio to no watcher | lag after the last write "
            "(ms) | peak RSS growth (MiB) | delivered / write / watcher | cv |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for key, label in FANOUT_CASES.items():
            e = fan.get(key)
            if not e or "lag_ms" not in e:
                continue
            rate = e.get("writes/s")
            ratio = rate / base if rate and base else None
            growth = _num(e.get("peak_rss_growth_MiB"), ".1f")
            if key == "200/writes:200000" and short:
                growth += f" ({e['peak_rss_growth_MiB'] / short:.2f}x 20 000 writes)"
            lines.append(f"| {label} | {_num(rate, ',.0f')} | {_num(ratio, '.2f')}x "
                         f"| {e['lag_ms']:.1f} | {growth} "
                         f"| {_num(e.get('delivered/write'), '.2f')} | {_cv(e)} |")
    return "\n".join(lines)


# BM_WatchFanout cases, after "watchers:".
FANOUT_CASES = {
    "0/writes:200000": "0 x 200 000 (baseline)",
    "10/writes:20000": "10 x 20 000",
    "200/writes:20000": "200 x 20 000",
    "200/writes:200000": "200 x 200 000",
}

LIST_LOADS = ["plain", "owner", "dependencies", "dependents", "owned", "events", "all"]


def relations_table(res):
    lines = [
        "| children | beehive | remove(owner) → Deleted (ms) | µs per child | cv |",
        "|---:|---|---:|---:|---:|",
    ]
    for n, warmed in ((1, 0), (1, 1), (16, 1), (256, 1), (4096, 1)):
        e = res.get(f"BM_CascadeDelete/children:{n}/warmed:{warmed}")
        if not e or "time" not in e:
            continue
        lines.append(f"| {n} | {'warmed' if warmed else 'fresh'} | {e['time'] / 1e3:.2f} "
                     f"| {_num(e.get('us/child'), '.1f')} | {_cv(e)} |")
    base = res.get("BM_List/plain", {}).get("time")
    lines += [
        "",
        "| list of 10 000 with | time (ms) | ratio to plain list | objects/s | cv |",
        "|---|---:|---:|---:|---:|",
    ]
    for load in LIST_LOADS:
        e = res.get(f"BM_List/{load}")
        if not e or "time" not in e:
            continue
        name = {"plain": "nothing (plain)", "all": "all five"}.get(load, f"load_{load}()")
        ratio = f"{e['time'] / base:.2f}x" if base else "-"
        lines.append(f"| {name} | {e['time'] / 1e3:.1f} | {ratio} | "
                     f"{_num(e.get('objects/s'), ',.0f')} | {_cv(e)} |")
    return "\n".join(lines)


def commit_table(res):
    """Group commit: each case's median rows/s over the median of raw single-row FULL
    commits, both from the same interleaved repetitions (a single run's ratio moves by
    ±10% on a small VM, mostly with the baseline)."""
    base = res.get("BM_RawFullCommit/batch:1", {}).get("rows/s")
    # Raw batches of 8 rows: the most 8 blocking callers can get from SQLite per commit;
    # beehive's share of it moves less with the machine than the ratio to single rows.
    ceiling = res.get("BM_RawFullCommit/batch:8", {}).get("rows/s")
    lines = ["| case | rows/s (median) | ÷ raw single-row commits | ÷ raw batches of 8 | "
             "rows per commit | CPU µs per row | cv |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, e in sorted(res.items()):
        rate = e.get("rows/s")
        if rate is None:
            continue
        ratio = f"{rate / base:.2f}x" if base else "-"
        eight = "callers:8/" in name or name.endswith("batch:8")
        of_ceiling = f"{100 * rate / ceiling:.0f}%" if ceiling and eight else "-"
        per_commit = e.get("rows/commit")
        cpu = e.get("cpu_us/row")
        if per_commit is None and "batch:" in name:  # a raw case: one commit per op
            per_commit = float(name.split("batch:")[1].split("/")[0])
            cpu = e.get("cpu_us/op", 0) / per_commit
        lines.append(f"| {name} | {rate:,.0f} | {ratio} | {of_ceiling} | "
                     f"{_num(per_commit, '.2f')} | {_num(cpu, '.1f')} | {_cv(e)} |")
    return "\n".join(lines)


def counters_table(res):
    """Every case with its time and counters; ratios (x_*) first. For bench_perf and
    bench_events, whose cases carry their ratios as counters."""
    lines = ["| case | time (µs) | ratios | other counters | cv |", "|---|---:|---|---|---:|"]
    for name, e in res.items():
        if "time" not in e:
            continue
        counters = {k: v for k, v in e.items() if k not in ("time", "cv") and v is not None}
        ratios = ", ".join(f"{k} {v:.2f}" for k, v in sorted(counters.items())
                           if k.startswith("x_"))
        other = ", ".join(f"{k} {v:,.4g}" for k, v in sorted(counters.items())
                          if not k.startswith("x_"))
        lines.append(f"| {name} | {e['time']:,.1f} | {ratios or '-'} | {other or '-'} "
                     f"| {_cv(e)} |")
    return "\n".join(lines)


def selectors_table(res):
    """The selective list (1 000 of 100 000) against raw SQLite through the labels index,
    against the raw statement beehive runs, and against the full list."""
    t = {k: e.get("time") for k, e in res.items()}
    cv = {k: _cv(e) for k, e in res.items()}
    lines = ["| case | rows | time (µs) | cv |", "|---|---:|---:|---:|"]
    for name in ("BM_RawSelectorList", "BM_RawSelectorListShipped", "BM_RawSelectorListFixed",
                 "BM_SelectorList",
                 "BM_RawFullList", "BM_FullList", "BM_PageOfACommonLabel", "BM_PageOfTheKind"):
        e = res.get(name)
        if e and "time" in e:
            lines.append(f"| {name} | {_num(e.get('rows'), ',.0f')} | {e['time']:,.1f} "
                         f"| {cv[name]} |")
    ratios = [
        ("selective list / raw selective (labels index)", "BM_SelectorList",
         "BM_RawSelectorList"),
        ("selective list / raw of beehive's statement", "BM_SelectorList",
         "BM_RawSelectorListFixed"),
        ("raw of beehive's statement (+kind terms) / raw selective",
         "BM_RawSelectorListFixed", "BM_RawSelectorList"),
        ("raw without the + (the plan SQLite picks unaided) / raw selective",
         "BM_RawSelectorListShipped", "BM_RawSelectorList"),
        ("selective list / full list", "BM_SelectorList", "BM_FullList"),
        ("raw selective / raw full", "BM_RawSelectorList", "BM_RawFullList"),
        ("full list / raw full", "BM_FullList", "BM_RawFullList"),
        ("a page of a label 99% carry / a page of the kind (expect ~1x)",
         "BM_PageOfACommonLabel", "BM_PageOfTheKind"),
    ]
    lines += ["", "| ratio | value |", "|---|---:|"]
    for label, a, b in ratios:
        if t.get(a) and t.get(b):
            r = t[a] / t[b]
            lines.append(f"| {label} | {r:.2f}x ({100 * r:.1f}%) |")
    return "\n".join(lines)


def change_log_table(res):
    """A create with and without the change log: raw SQLite both ways, and beehive's
    blocking create over the raw create without the log."""
    lines = ["| synchronous | raw create (µs) | raw create + log (µs) | log's cost (raw) "
             "| beehive create (µs) | beehive / raw create | cv raw / raw+log / beehive |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for mode in MODES:
        raw = res.get(f"BM_RawCreate/{mode}", {})
        logged = res.get(f"BM_RawCreateLogged/{mode}", {})
        bh = res.get(f"BM_BeehiveCreate/{mode}", {})
        if "time" not in raw:
            continue
        log_ratio = f"{logged['time'] / raw['time']:.3f}x" if "time" in logged else "-"
        bh_ratio = f"{bh['time'] / raw['time']:.2f}x" if "time" in bh else "-"
        lines.append(f"| {mode.upper()} | {raw['time']:.1f} | {_num(logged.get('time'), '.1f')} "
                     f"| {log_ratio} | {_num(bh.get('time'), '.1f')} | {bh_ratio} "
                     f"| {_cv(raw)} / {_cv(logged)} / {_cv(bh)} |")
    return "\n".join(lines)


# bench/postgres.cpp: (label, beehive case, raw case, how the ratio is read, target).
# "time": beehive time / raw time, at most the target; "rate": beehive rows/s / raw
# rows/s, at least the target.
PG_PAIRS = [
    ("blocking update to a new spec / raw BEGIN, UPDATE, COMMIT", "BM_PgUpdate",
     "BM_PgRawUpdate", "time", 2.0),
    ("blocking update / the raw transaction in one round trip (context)", "BM_PgUpdate",
     "BM_PgRawUpdatePipelined", "time", None),
    ("get / raw prepared point select", "BM_PgGet", "BM_PgRawGet", "time", 1.5),
    ("8 callers creating (rows/s) / raw single-row commits, 1 connection",
     "BM_PgGroupCommit/callers:8", "BM_PgRawCommit/conns:1", "rate", 4.0),
    ("8 raw connections, single-row commits / 1 connection (context)",
     "BM_PgRawCommit/conns:8", "BM_PgRawCommit/conns:1", "rate", None),
    ("8 callers creating / 8 raw connections (context)", "BM_PgGroupCommit/callers:8",
     "BM_PgRawCommit/conns:8", "rate", None),
    ("raw 8-row batches, one round trip each / raw single-row commits (context: a "
     "perfect group commit)", "BM_PgRawBatch/shape:0", "BM_PgRawCommit/conns:1", "rate", None),
    ("8 callers creating / raw 8-row batches with beehive's statements (context: its "
     "ceiling)", "BM_PgGroupCommit/callers:8", "BM_PgRawBatch/shape:1", "rate", None),
    ("raw, 8 rows in flight as 2 concurrent 4-row commits / as one 8-row commit (context: "
     "groups in flight at once)", "BM_PgRawSplitBatch/conns:2/rows:8",
     "BM_PgRawSplitBatch/conns:1/rows:8", "rate", None),
    ("raw, 8 rows in flight as 4 concurrent 2-row commits / as one 8-row commit (context)",
     "BM_PgRawSplitBatch/conns:4/rows:8", "BM_PgRawSplitBatch/conns:1/rows:8", "rate", None),
    ("raw, 16 rows in flight as 2 concurrent 8-row commits / 8 rows as one (context)",
     "BM_PgRawSplitBatch/conns:2/rows:16", "BM_PgRawSplitBatch/conns:1/rows:8", "rate", None),
    ("1 caller creating / raw single-row commits, 1 connection (context)",
     "BM_PgGroupCommit/callers:1", "BM_PgRawCommit/conns:1", "rate", None),
    ("watch in another process: update called -> delivered / raw BEGIN, UPDATE, NOTIFY, "
     "COMMIT -> received", "BM_PgWatchLatency", "BM_PgRawUpdateNotify", "time", 2.0),
    ("watch in another process, delivered after the writer's call returned / the same, raw "
     "(context)", "BM_PgWatchLatency", "BM_PgRawUpdateNotify", "after_write_us", None),
    ("watch in another process: update called -> delivered / a bare NOTIFY -> received "
     "(context)", "BM_PgWatchLatency", "BM_PgRawNotify", "time", None),
]


def postgres_table(res):
    lines = ["| case | time (µs) | rows/s | other counters | cv |", "|---|---:|---:|---|---:|"]
    for name, e in sorted(res.items()):
        if "time" not in e:
            continue
        other = ", ".join(f"{k} {v:,.4g}" for k, v in sorted(e.items())
                          if k not in ("time", "cv", "rows/s") and isinstance(v, (int, float)))
        lines.append(f"| {name} | {e['time']:,.1f} | {_num(e.get('rows/s'), ',.0f')} "
                     f"| {other or '-'} | {_cv(e)} |")
    lines += ["", "| pair | beehive | baseline | ratio | target | met |",
              "|---|---:|---:|---:|---:|---|"]
    for label, bh, raw, how, target in PG_PAIRS:
        b, r = res.get(bh, {}), res.get(raw, {})
        key = {"time": "time", "rate": "rows/s"}.get(how, how)
        if key not in b or key not in r or not r[key]:
            continue
        ratio = b[key] / r[key]
        unit = "rows/s" if how == "rate" else "µs"
        if target is None:
            goal, met = "-", "-"
        elif how != "rate":
            goal, met = f"≤ {target:g}x", "yes" if ratio <= target else "**no**"
        else:
            goal, met = f"≥ {target:g}x", "yes" if ratio >= target else "**no**"
        lines.append(f"| {label} | {b[key]:,.1f} {unit} | {r[key]:,.1f} {unit} | {ratio:.2f}x "
                     f"| {goal} | {met} |")
    return "\n".join(lines)


SUITE_TABLES = {
    "controller": controller_table,
    "watch": watch_table,
    "relations": relations_table,
    "events": counters_table,
    "perf": counters_table,
    "commit": commit_table,
    "selectors": selectors_table,
    "change_log": change_log_table,
    "postgres": postgres_table,
}
SUITES = ["store", "controller", "watch", "relations", "events", "perf", "commit", "selectors",
          "change_log", "postgres"]
# The binary a suite runs, when it is not bench_<suite>.
SUITE_BINARY = {"commit": "perf"}
GROUP_COMMIT = "FullCommit|GroupCommit"
# Per-suite defaults: repetitions, and arguments put before the ones given after --.
# Random interleaving runs the repetitions of all cases in a shuffled order, so that a
# slow drift of the machine (or a short disturbance) spreads over every case instead of
# landing on one side of a ratio.
SUITE_DEFAULTS = {
    "store": (3, []),
    "controller": (3, ["--benchmark_enable_random_interleaving=true"]),
    "watch": (7, ["--benchmark_enable_random_interleaving=true"]),
    "relations": (3, ["--benchmark_enable_random_interleaving=true"]),
    "events": (3, []),
    # The scale and idle cases run long: one repetition; ratios come from the same run.
    "perf": (1, [f"--benchmark_filter=-{GROUP_COMMIT}"]),
    # Short but noisy: medians of interleaved repetitions.
    "commit": (7, [f"--benchmark_filter={GROUP_COMMIT}",
                   "--benchmark_enable_random_interleaving=true"]),
    # One 100 000-object file built through beehive at start (~10-20 s), then short cases.
    "selectors": (5, ["--benchmark_enable_random_interleaving=true"]),
    # Single-row commits: noisy; interleaved so that the disk's drift spreads evenly.
    "change_log": (7, ["--benchmark_enable_random_interleaving=true"]),
    # A throwaway server (fsync on) unless BEEHIVE_BENCH_PG names one; round trips over
    # a Unix socket: interleaved, so that the server's drift spreads over both sides.
    "postgres": (5, ["--benchmark_enable_random_interleaving=true"]),
}


def report_store(path):
    times, cvs, ctx = medians(path)
    print()
    if not times:
        sys.exit(f"no benchmark results in {path}")
    print(f"beehive / raw SQLite, median real time ({ctx.get('date', '')}, "
          f"{ctx.get('num_cpus', '?')} CPUs)")
    print(table(times, cvs))
    print("(cv: coefficient of variation of real time across repetitions; a few % is a "
          "quiet machine)")


def report_suite(suite, path):
    res, ctx = results(path)
    print()
    if not res:
        sys.exit(f"no benchmark results in {path}")
    print(f"bench_{suite}, medians ({ctx.get('date', '')}, {ctx.get('num_cpus', '?')} CPUs, "
          f"load average {ctx.get('load_avg', '?')})")
    print(SUITE_TABLES[suite](res))
    errors = {k: v["error"] for k, v in res.items() if "error" in v}
    for k, msg in errors.items():
        print(f"ERROR {k}: {msg}")
    print("(cv: coefficient of variation of real time across repetitions; a few % is a "
          "quiet machine)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="store", choices=SUITES + ["all"],
                    help="which bench_<suite> binary (default: store)")
    ap.add_argument("--binary", help="default: build/default/bench_<suite>")
    ap.add_argument("--out", help="default: build/default/bench_<suite>.json")
    ap.add_argument("--repetitions", type=int,
                    help="default: 3 (watch: 7); all but store interleave repetitions")
    ap.add_argument("--json", help="read this JSON result instead of running the binary")
    ap.add_argument("extra", nargs="*", help="arguments passed to the binary (after --)")
    args = ap.parse_args()

    suites = SUITES if args.suite == "all" else [args.suite]
    if len(suites) > 1 and (args.binary or args.out or args.json):
        sys.exit("--binary, --out and --json take one suite")
    for suite in suites:
        path = args.json
        if not path:
            binary = args.binary or os.path.join(
                ROOT, f"build/default/bench_{SUITE_BINARY.get(suite, suite)}")
            path = args.out or os.path.join(ROOT, f"build/default/bench_{suite}.json")
            if not os.access(binary, os.X_OK):
                sys.exit(f"{binary} not found: build first "
                         "(cmake --preset default && cmake --build --preset default)")
            reps, suite_args = SUITE_DEFAULTS[suite]
            run(binary, path, args.repetitions or reps, suite_args + args.extra)
        if suite == "store":
            report_store(path)
        else:
            report_suite(suite, path)

if __name__ == "__main__":
    main()
