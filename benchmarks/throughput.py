"""Campaign throughput and where the wall time goes.

    python benchmarks/throughput.py --seconds 120 --seeds 1 2 3
    python benchmarks/throughput.py --seconds 120 --seeds 1 2 --compare-determinism

For each seed, runs a campaign (empty database) and reports programs/s, programs per
CPU-second (parent + worker CPU time: the campaign keeps two processes busy), and the
share of wall time spent in the worker (JAX tracing, lowering, compiling and executing
the program under test), in the reference (eager single-device evaluation) and in the
fuzzer itself (Hypothesis generation and shrinking, rendering, oracles, IPC). Prints one
JSON line per seed, then the medians. With ``--compare-determinism`` each seed runs
twice, with and without the determinism oracle (second worker), back to back, and the
summary gives the median throughput ratio (without / with).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.campaign import Campaign  # noqa: E402


def cpu_seconds(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def measure(seconds: float, seed: int, python: str | None, determinism: bool = True) -> dict:
    parent0, children0 = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    c = Campaign(seconds=seconds, seed=seed, python=python, shrink_seconds=0, determinism=determinism)
    t0 = time.monotonic()
    report = c.run()
    wall = time.monotonic() - t0
    c.close()  # reaped: the workers' CPU time now counts in RUSAGE_CHILDREN
    cpu = (cpu_seconds(resource.RUSAGE_SELF) - parent0) + (cpu_seconds(resource.RUSAGE_CHILDREN) - children0)
    return {"seed": seed, "determinism": determinism, "jax_version": report["jax_version"],
            "wall_seconds": round(wall, 1),
            "programs": report["programs"], "programs_per_second": round(report["programs"] / wall, 3),
            "programs_per_cpu_second": round(report["programs"] / cpu, 3),
            "worker_share": round(report["worker_seconds"] / wall, 3),
            "reference_share": round(report["reference_seconds"] / wall, 3),
            "fuzzer_share": round(1 - (report["worker_seconds"] + report["reference_seconds"]) / wall, 3),
            "findings": len(report["findings"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--python", default=None, help="interpreter whose JAX the worker uses")
    ap.add_argument("--compare-determinism", action="store_true")
    args = ap.parse_args()
    rows, ratios = [], []
    for s in args.seeds:
        for det in ((True, False) if args.compare_determinism else (True,)):
            rows.append(measure(args.seconds, s, args.python, det))
            print(json.dumps(rows[-1]), flush=True)
        if args.compare_determinism:
            ratios.append(rows[-1]["programs_per_second"] / rows[-2]["programs_per_second"])
    keys = ["programs_per_second", "programs_per_cpu_second", "worker_share", "reference_share", "fuzzer_share"]
    summary = {"median_with_determinism": {k: statistics.median(r[k] for r in rows if r["determinism"]) for k in keys}}
    if ratios:
        summary["median_without_over_with"] = round(statistics.median(ratios), 3)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
