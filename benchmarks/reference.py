"""The reference's cost and agreement: derivatives by jaxpr + NumPy (fuzz/jaxpr_numpy.py) against eager JAX.

    python benchmarks/reference.py --programs 400 --seeds 13 14

Draws ``--programs`` programs per seed as a campaign draws them (``strategies.swarm.swarm_programs``,
``fuzz.campaign.draw_settings``: fresh draws, Hypothesis' generate phase, no JAX worker) and
evaluates each with the unsharded reference twice, one after the other in this process: with
derivatives traced once and evaluated by NumPy (the default, ``Reference.jaxpr_numpy``) and
eagerly with jax.numpy (as before 2026-12-07@b1886ed). Reports per seed: seconds of each (total and
for the programs with a derivative), their ratio, and the programs whose two results the
differential oracle would tell apart (``oracles.differential.agree`` or ``ill_conditioned``
with the eager result as JAX's and the NumPy one as the reference), callbacks compared
within 1e-5; the primitives the NumPy path left to JAX (``bound``) and the derivatives it
ran eagerly because their trace failed (``eager``). One JSON line per seed, then a summary.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DERIVATIVES = {"grad", "value_and_grad", "vjp", "jvp", "linearize", "jacrev", "jacfwd"}


def drawn(n: int, seed: int) -> list:
    """``n`` programs drawn as a campaign draws them, with Hypothesis seed ``seed``."""
    from hypothesis import Phase, given, settings
    from hypothesis import seed as hseed

    from fuzz.campaign import draw_settings
    from strategies.swarm import swarm_programs

    out = []

    @hseed(seed)
    @settings(draw_settings(max_examples=n), phases=[Phase.generate])
    @given(swarm_programs())
    def collect(p):
        out.append(json.loads(json.dumps(p)))

    collect()
    return out


def timed(program: dict, numpy_path: bool):
    """(the reference's result or the exception it raised, seconds)."""
    from fuzz.reference import Reference

    r = Reference(program)
    r.jaxpr_numpy = numpy_path
    t0 = time.perf_counter()
    try:
        out = r.evaluate()
    except Exception as e:  # (an invalid program: both paths must raise alike)
        out = e
    return out, time.perf_counter() - t0


def disagree(program: dict, fast, eager) -> str | None:
    """Why the differential or callbacks oracle would tell the two results apart, or None."""
    import numpy as np

    from oracles.differential import agree, ill_conditioned, tolerance

    if isinstance(fast, Exception) or isinstance(eager, Exception):
        return None if type(fast) is type(eager) else f"raised {type(fast).__name__} / {type(eager).__name__}"
    nudged: dict = {}
    for k, (gs, ws) in enumerate(zip(fast["results"], eager["results"])):
        for j, (g, w) in enumerate(zip(gs, ws)):
            if not agree(w, g, tolerance(program)) and not ill_conditioned(fast, k, j, w, g, nudged):
                return f"call {k} output {j}"
    for k, (gc, wc) in enumerate(zip(fast["callbacks"], eager["callbacks"])):
        if sorted(gc) != sorted(wc) or any(gc[t].shape != wc[t].shape or not np.allclose(gc[t], wc[t], 1e-5, 1e-6, True)
                                           for t in gc):
            return f"call {k} callbacks"
    return None


def run_seed(n: int, seed: int) -> dict:
    from fuzz import jaxpr_numpy as J
    from fuzz.features import features

    J.STATS.__init__()
    row = {"seed": seed, "programs": n, "with_derivative": 0, "numpy_seconds": 0.0, "eager_seconds": 0.0,
           "numpy_seconds_derivative": 0.0, "eager_seconds_derivative": 0.0, "disagree": []}
    for i, p in enumerate(drawn(n, seed)):
        fast, t_fast = timed(p, True)
        eager, t_eager = timed(p, False)
        deriv = bool(features(p)[0] & DERIVATIVES)
        row["with_derivative"] += deriv
        row["numpy_seconds"] += t_fast
        row["eager_seconds"] += t_eager
        if deriv:
            row["numpy_seconds_derivative"] += t_fast
            row["eager_seconds_derivative"] += t_eager
        why = disagree(p, fast, eager)
        if why:
            row["disagree"].append({"program": i, "why": why})
    for k in ("numpy_seconds", "eager_seconds", "numpy_seconds_derivative", "eager_seconds_derivative"):
        row[k] = round(row[k], 1)
    row["ratio"] = round(row["eager_seconds"] / max(row["numpy_seconds"], 1e-9), 2)
    row["bound"] = dict(sorted(J.STATS.bound.items(), key=lambda kv: -kv[1]))
    row["eager"] = dict(J.STATS.eager)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=400, help="Programs drawn per seed.")
    ap.add_argument("--seeds", type=int, nargs="+", default=[13, 14])
    args = ap.parse_args()
    rows = []
    for s in args.seeds:
        rows.append(run_seed(args.programs, s))
        print(json.dumps(rows[-1]), flush=True)
    import statistics
    print(f"summary: {len(rows)} seeds x {args.programs} programs; ratio eager/numpy median "
          f"{statistics.median(r['ratio'] for r in rows)}; programs the oracles tell apart: "
          f"{sum(len(r['disagree']) for r in rows)}")


if __name__ == "__main__":
    main()
