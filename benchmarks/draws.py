"""How a campaign's draws spread: fresh draws (strategies/fresh.py) against Hypothesis' own generate phase.

    python benchmarks/draws.py --seeds 1 2 --rounds 16          # both ways, 1600 programs per seed
    python benchmarks/draws.py --seeds 1 --rounds 16 --only fresh

No JAX runs: programs are drawn exactly as ``fuzz.campaign.Campaign`` draws them (rounds of
``fuzz.campaign.ROUND`` programs, round ``i`` of seed ``s`` seeded ``s * 7919 + i``,
``fuzz.campaign.draw_settings``, the generate phase only, nothing to avoid), with
``fresh`` True and False. Per seed and way, one JSON line:

- ``programs``; ``mutant_draws``: draws Hypothesis made as mutants of the draw before it
  (inside ``ConjectureRunner.generate_mutations_from``, hypothesis 6.170.9; 0 when fresh);
- ``distinct_shapes``: distinct meshes and transform chains (``seeded.program_shape``);
- means per program of ``calls``, ``transforms`` (of the calls, outermost chains),
  ``equations`` (nested bodies included), ``depth`` (``fuzz.features.features``) and the
  JSON size in bytes;
- ``exposed``: {seeded mutant: programs with its composition live (``seeded.exposures``)},
  and ``independent``: the same counting a draw and its mutants once. A rare composition
  met only by one draw and its near-duplicates is met once, so ``independent`` is what
  sets a campaign's chance to meet it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def census(seed: int, rounds: int, fresh: bool) -> dict:
    """The counts of the module docstring for ``rounds`` rounds of seed ``seed``. Raises nothing
    for a valid seed (any int)."""
    from hypothesis import Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis.internal.conjecture import engine

    import seeded
    from fuzz.campaign import draw_settings
    from fuzz.features import features
    from strategies.swarm import swarm_programs

    state = {"mutating": False, "draw": 0}
    original = engine.ConjectureRunner.generate_mutations_from

    def watched(self, data):  # marks the draws Hypothesis makes as mutants of ``data``
        state["mutating"] = True
        try:
            original(self, data)
        finally:
            state["mutating"] = False

    def equations(fn: dict) -> int:
        return sum(1 + (equations(e["fn"]) if e["op"] == "call" else 0) for e in fn["eqns"])

    rows: list = []
    engine.ConjectureRunner.generate_mutations_from = watched
    try:
        for index in range(rounds):
            @hseed(seed * 7919 + index)
            @settings(draw_settings(fresh), phases=[Phase.generate])
            @given(swarm_programs())
            def draw(program):
                if not state["mutating"]:
                    state["draw"] += 1  # a fresh draw: its mutants, if any, follow it
                rows.append({"cluster": state["draw"], "mutant": state["mutating"],
                             "exposed": seeded.exposures(program), "shape": seeded.program_shape(program),
                             "calls": len(program["calls"]),
                             "transforms": sum(len(c["transforms"]) for c in program["calls"]),
                             "equations": sum(equations(f) for f in program["functions"].values()),
                             "depth": features(program)[1], "bytes": len(json.dumps(program))})
            draw()
    finally:
        engine.ConjectureRunner.generate_mutations_from = original
    names = sorted({n for r in rows for n in r["exposed"]})
    return {"seed": seed, "fresh": fresh, "programs": len(rows), "mutant_draws": sum(r["mutant"] for r in rows),
            "distinct_shapes": len({r["shape"] for r in rows}),
            **{f"mean_{k}": round(statistics.mean(r[k] for r in rows), 2)
               for k in ("calls", "transforms", "equations", "depth", "bytes")},
            "exposed": {n: sum(n in r["exposed"] for r in rows) for n in names},
            "independent": {n: len({r["cluster"] for r in rows if n in r["exposed"]}) for n in names}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=16, help="rounds of 100 programs per seed")
    ap.add_argument("--only", choices=("fresh", "mutations"), help="one way only")
    args = ap.parse_args(argv)
    ways = [True, False] if args.only is None else [args.only == "fresh"]
    for seed in args.seeds:
        for fresh in ways:
            out = census(seed, args.rounds, fresh)
            out["independent_total"] = sum(out["independent"].values())
            print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
