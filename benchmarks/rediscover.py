"""How long a campaign from an empty database takes to rediscover a seed bug's kind.

    python benchmarks/rediscover.py A --jax-version 0.4.38 --seeds 1 2 3
    python benchmarks/rediscover.py B --jax-version 0.4.28 --seeds 1 2 3
    python benchmarks/rediscover.py C --seeds 1 2 3          # newest JAX (this environment)
    python benchmarks/rediscover.py jax-18434 --seeds 1 2 3  # a public report, on its default release

Each run is a default campaign (determinism on, no database) that stops at the first
finding of the bug's *kind* (``../shared/seeds.md``), judged on the finding and the
program that showed it, never on hand-written programs:

- A: the worker aborts (SIGABRT with a ``Check failed`` line) on a program with an
  ordered io_callback;
- B: a lowering differs across processes with different PYTHONHASHSEED, on a program
  that takes grad through a shard_map;
- C: JAX raises on a valid program combining vmap with spmd_axis_name and shard_map,
  with one of the messages of seed C's family.

- public reports (issue 8's table; described in our words, matched by kind and features,
  never by program):
  - jax-21403 (0.4.26): a wrong value (differential) from a program with cumsum and
    with_sharding_constraint under jit;
  - jax-18434 (0.10.2): a wrong value from `.at[].set` under jit;
  - xla-49122 (0.10.2): a wrong value from `lax.dynamic_slice` (per-shard clamping of the start);
  - jax-29832 (0.6.1): JAX raises on a valid program with jacrev inside a shard_map;
  - jax-34211 (0.8.1): JAX raises on a valid program with a custom_vjp under grad / vjp of a
    shard_map on an Explicit mesh;
  - jax-25699 (0.4.38): the worker aborts on a program with axis_index in a partial-manual
    shard_map.
  ``--jax-version`` defaults to the release named here (``default`` for the seeds: the
  environment's JAX, except A: 0.4.38 and B: 0.4.28).

Prints one JSON line per seed (seconds to the find, or null after --seconds) and a summary.
``--need K`` runs the seeds in order and stops once the verdict "found on at least K of
them" is settled (K finds, or too many misses for K), so a 2-of-3 check costs two
campaigns when the first two agree; the seeds left out are listed as ``skipped``.
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


def _value(*needed):
    """A wrong value (differential finding) from a program whose features include ``needed``."""
    return lambda f, program: f.oracle == "differential" and set(needed) <= features(program)[0]


def _raises(*needed, any_of=()):
    """JAX raising on a valid program (internal-error) whose features include ``needed`` (and one of ``any_of``)."""
    def match(f, program):
        feats = features(program)[0]
        return (f.oracle == "internal-error" and set(needed) <= feats
                and (not any_of or bool(feats & set(any_of))))
    return match


def kind_25699(f, program) -> bool:
    return f.oracle == "crash" and {"axis_index", "partial_manual"} <= features(program)[0]


KINDS = {"A": kind_a, "B": kind_b, "C": kind_c,
         "jax-21403": _value("cumsum", "with_sharding_constraint", "jit"),
         "jax-18434": _value("at_set", "jit"),
         "xla-49122": _value("dynamic_slice"),
         "jax-29832": _raises("jacrev", "shard_map"),
         "jax-34211": _raises("custom_vjp", "shard_map", "explicit_mesh", any_of=("grad", "value_and_grad", "vjp")),
         "jax-25699": kind_25699}
# The release each bug is measured on unless --jax-version says otherwise (None: this environment's JAX).
RELEASES = {"A": "0.4.38", "B": "0.4.28", "C": None, "jax-21403": "0.4.26", "jax-18434": None, "xla-49122": None,
            "jax-29832": "0.6.1", "jax-34211": "0.8.1", "jax-25699": "0.4.38"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bug", choices=sorted(KINDS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--jax-version", default=None)
    ap.add_argument("--python", default=None)
    ap.add_argument("--need", type=int, default=None, metavar="K",
                    help="stop once 'found on at least K seeds' is settled (default: run every seed)")
    ap.add_argument("--no-avoid", action="store_true", help="switch off avoidance of bugs found earlier in the run")
    args = ap.parse_args()
    python = args.python
    version = args.jax_version or (None if python else RELEASES[args.bug])
    if version:
        from fuzz.provision import interpreter

        python = interpreter(version, log=lambda s: print(s, file=sys.stderr))
    times = []
    for i, s in enumerate(args.seeds):
        if args.need is not None:
            hits = sum(t is not None for t in times)
            if hits >= args.need or hits + len(args.seeds) - i < args.need:
                print(json.dumps({"bug": args.bug, "skipped": args.seeds[i:]}), flush=True)
                break
        c = Campaign(seconds=args.seconds, seed=s, python=python, shrink_seconds=0, stop_when=KINDS[args.bug],
                     avoid_known=not args.no_avoid)
        try:
            c.run()
        finally:
            c.close()
        hit = c.matched if c.matched and c.matched[0] <= args.seconds else None  # (found in the grace after: a miss)
        row = {"bug": args.bug, "seed": s, "jax_version": c.caps["jax_version"],
               "seconds_to_find": round(hit[0], 1) if hit else None, "programs": c.stats.programs,
               "signature": hit[1].signature[:160] if hit else None}
        times.append(row["seconds_to_find"])
        print(json.dumps(row), flush=True)
    found = [t for t in times if t is not None]
    print(json.dumps({"bug": args.bug, "found": f"{len(found)}/{len(times)}", "seeds": len(args.seeds),
                      "median_seconds": statistics.median(found) if found else None}))


if __name__ == "__main__":
    main()
