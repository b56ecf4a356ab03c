"""Campaign throughput and where the wall time goes.

    python benchmarks/throughput.py --seconds 120 --seeds 1 2 3

For each seed, runs a campaign (empty database) and reports programs/s, programs per
CPU-second (parent + worker CPU time: the campaign keeps two processes busy), and the
share of wall time spent in the worker (JAX tracing, lowering, compiling and executing
the program under test), in the reference (eager single-device evaluation) and in the
fuzzer itself (Hypothesis generation and shrinking, rendering, oracles, IPC). Prints one
JSON line per seed, then the medians.
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


def measure(seconds: float, seed: int, python: str | None, **kw) -> dict:
    parent0, children0 = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    c = Campaign(seconds=seconds, seed=seed, python=python, shrink_seconds=0, **kw)
    t0 = time.monotonic()
    report = c.run()
    wall = time.monotonic() - t0
    c.close()  # reaped: the workers' CPU time now counts in RUSAGE_CHILDREN
    cpu = (cpu_seconds(resource.RUSAGE_SELF) - parent0) + (cpu_seconds(resource.RUSAGE_CHILDREN) - children0)
    return {"seed": seed, "jax_version": report["jax_version"], "wall_seconds": round(wall, 1),
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
    args = ap.parse_args()
    rows = []
    for s in args.seeds:
        rows.append(measure(args.seconds, s, args.python))
        print(json.dumps(rows[-1]), flush=True)
    keys = ["programs_per_second", "programs_per_cpu_second", "worker_share", "reference_share", "fuzzer_share"]
    print(json.dumps({"median": {k: statistics.median(r[k] for r in rows) for k in keys}}))


if __name__ == "__main__":
    main()
