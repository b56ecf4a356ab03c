"""How long a campaign from an empty database takes to rediscover a seed bug's kind.

    python benchmarks/rediscover.py A --jax-version 0.4.38 --seeds 1 2 3
    python benchmarks/rediscover.py B --jax-version 0.4.28 --seeds 1 2 3
    python benchmarks/rediscover.py C --seeds 1 2 3          # newest JAX (this environment)

Each run is a default campaign (determinism on, no database) that stops at the first
finding of the bug's *kind* (``../shared/seeds.md``), judged on the finding and the
program that showed it, never on hand-written programs:

- A: the worker aborts (SIGABRT with a ``Check failed`` line) on a program with an
  ordered io_callback;
- B: a lowering differs across processes with different PYTHONHASHSEED, on a program
  that takes grad through a shard_map;
- C: JAX raises on a valid program combining vmap with spmd_axis_name and shard_map,
  with one of the messages of seed C's family.

Prints one JSON line per seed (seconds to the find, or null after --seconds) and a summary.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.campaign import Campaign  # noqa: E402
from fuzz.features import features  # noqa: E402

SEED_C_MESSAGES = re.compile(r"requires varying manual axes to match|should be of type `Manual`|too many values to "
                             r"unpack|pvary is a invariant->variant|dimension size")


def kind_a(f, program) -> bool:
    return (f.oracle == "crash" and f.kind == "SIGABRT" and "Check failed" in f.message
            and "io_callback_ordered" in features(program)[0])


def kind_b(f, program) -> bool:
    feats = features(program)[0]
    return (f.oracle == "determinism" and f.kind == "cross-process" and "shard_map" in feats
            and ("grad" in feats or "value_and_grad" in feats))


def kind_c(f, program) -> bool:
    feats = features(program)[0]
    return (f.oracle == "internal-error" and {"vmap", "spmd_axis_name", "shard_map"} <= feats
            and bool(SEED_C_MESSAGES.search(f.message)))


KINDS = {"A": kind_a, "B": kind_b, "C": kind_c}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bug", choices=sorted(KINDS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--jax-version", default=None)
    ap.add_argument("--python", default=None)
    args = ap.parse_args()
    python = args.python
    if args.jax_version:
        from fuzz.provision import interpreter

        python = interpreter(args.jax_version, log=lambda s: print(s, file=sys.stderr))
    times = []
    for s in args.seeds:
        c = Campaign(seconds=args.seconds, seed=s, python=python, shrink_seconds=0, stop_when=KINDS[args.bug])
        try:
            c.run()
        finally:
            c.close()
        hit = c.matched
        row = {"bug": args.bug, "seed": s, "jax_version": c.caps["jax_version"],
               "seconds_to_find": round(hit[0], 1) if hit else None, "programs": c.stats.programs,
               "signature": hit[1].signature[:160] if hit else None}
        times.append(row["seconds_to_find"])
        print(json.dumps(row), flush=True)
    found = [t for t in times if t is not None]
    print(json.dumps({"bug": args.bug, "found": f"{len(found)}/{len(times)}",
                      "median_seconds": statistics.median(found) if found else None}))


if __name__ == "__main__":
    main()
