"""A campaign's draws are independent programs, not Hypothesis' mutants of the draw before
(strategies/fresh.py). No JAX: programs are drawn as a campaign's rounds draw them and counted."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import seed as hseed

from fuzz.campaign import ROUND, draw_settings
from strategies.swarm import swarm_programs

ROUNDS = 2


def shapes(fresh: bool) -> tuple[int, int]:
    """(programs drawn, distinct meshes-and-transform-chains among them) over ROUNDS rounds of a
    seeded campaign's draws (fuzz.campaign.Campaign._round: one seeded Hypothesis run per round)."""
    seen: list = []
    for index in range(ROUNDS):
        @hseed(7919 + index)
        @draw_settings(fresh)
        @given(swarm_programs())
        def draw(program):
            seen.append(json.dumps([program["mesh"], [[t["kind"] for t in c["transforms"]]
                                                      for c in program["calls"]]], sort_keys=True))
        draw()
    return len(seen), len(set(seen))


def test_fresh_draws_are_distinct_and_hypothesis_mutants_are_not():
    n, distinct = shapes(fresh=True)
    assert n == ROUNDS * ROUND
    # measured: 1495 / 1600 fresh; Hypothesis' mutants 662 / 1600 (strategies/fresh.py)
    assert distinct >= 0.8 * n, f"{distinct} distinct of {n} fresh draws"
    n_mut, distinct_mut = shapes(fresh=False)
    assert distinct_mut <= 0.6 * n_mut, f"{distinct_mut} distinct of {n_mut}: Hypothesis' generate phase changed?"


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


def test_the_draws_benchmark_tells_mutants_from_fresh_draws():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import draws

    fresh, mutations = draws.census(1, 1, True), draws.census(1, 1, False)
    assert fresh["programs"] == mutations["programs"] == ROUND
    assert fresh["mutant_draws"] == 0 < mutations["mutant_draws"]
    assert fresh["distinct_shapes"] > mutations["distinct_shapes"]
