"""A campaign's draws are independent programs, not Hypothesis' mutants of the draw before
(strategies/fresh.py). No JAX: programs are drawn as a campaign's rounds draw them
(benchmarks/draws.py, the census docs/measurements.md's figures come from) and counted."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import seed as hseed

from fuzz.campaign import ROUND, draw_settings
from strategies.swarm import swarm_programs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import draws  # noqa: E402


def test_fresh_draws_are_distinct_and_hypothesis_mutants_are_not():
    # measured: 1288 / 1600 distinct fresh; Hypothesis' mutants 503 / 1600 (benchmarks/draws.py)
    fresh, mutations = draws.census(1, 2, True), draws.census(1, 2, False)
    assert fresh["programs"] == mutations["programs"] == 2 * ROUND
    assert fresh["mutant_draws"] == 0 < mutations["mutant_draws"]
    assert fresh["distinct_shapes"] >= 0.8 * fresh["programs"], fresh
    assert mutations["distinct_shapes"] <= 0.6 * mutations["programs"], "Hypothesis' generate phase changed?"


def test_fresh_draws_repeat_under_a_seed():
    first, second = [], []
    for out in (first, second):
        @hseed(3)
        @draw_settings(True, max_examples=30)
        @given(swarm_programs())
        def draw(program):
            out.append(json.dumps(program, sort_keys=True))
        draw()
    assert first == second and len(set(first)) > 20
