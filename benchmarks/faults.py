"""Many injected faults in a row: does the campaign survive, record each, and reap every worker?

    python benchmarks/faults.py --count 200 --timeout 2

Runs a program whose io_callback host function aborts, segfaults or sleeps forever (in
turn) ``--count`` times through a campaign's runner (real workers, crash confirmation
included), then prints the findings recorded, their distinct signatures, and the worker
processes alive before and after (from /proc).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz.campaign import Campaign  # noqa: E402
from fuzz.faults import rotating, worker_processes  # noqa: E402
from test_faults import callback_program  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds before a program is a hang")
    args = ap.parse_args()
    before = worker_processes(parent=1)
    t0 = time.monotonic()
    c = Campaign(seconds=10 ** 6, determinism=False, timeout=args.timeout, source_hook=rotating())
    c.start = time.monotonic()
    findings = 0
    try:
        for _ in range(args.count):
            findings += len(c.run_program(callback_program()))
    finally:
        c.close()
    time.sleep(1)
    after = worker_processes(parent=1)
    print(json.dumps({"faults": args.count, "findings": findings, "seconds": round(time.monotonic() - t0, 1),
                      "signatures": {s: r.count for s, r in c.records.items()},
                      "own_workers_left": sorted(worker_processes(parent=os.getpid())),
                      "orphan_workers_before": sorted(before), "orphan_workers_after": sorted(after)}, indent=1))


if __name__ == "__main__":
    main()
