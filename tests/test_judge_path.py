"""The oracles fire through the real path a campaign takes: ``Runner.run`` -> ``oracles.judge``.

tests/test_oracles.py calls single oracles on hand-made outcomes; here the program is
rendered, run in the main worker, lowered in the second worker (another
PYTHONHASHSEED) and judged exactly as in a campaign, so that a runner that stops
passing the lowering worker's outcome, or a ``judge`` that stops calling an oracle,
fails a test.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from fuzz.runner import Runner
from support.programs import JIT, call, eqn, fn, program

# Appended after the last function of a rendered source: the jitted function's name, and
# so the lowered module's name, follows a set's iteration order, which depends on
# PYTHONHASHSEED (the two workers of a Runner run with different seeds).
NAME = "'f_' + '_'.join({'x', 'y', 'z', 'w'})"
RENAME = f"f0.__name__ = {NAME}\n"


def name_under(seed) -> str:
    """What NAME evaluates to in a process with this PYTHONHASHSEED."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    return subprocess.run([sys.executable, "-c", f"print({NAME})"], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def hash_dependent(source: str) -> str:
    """The rendered source with ``f0`` renamed by set order, before the CALLS list wraps it."""
    marker = re.search(r"^CALLS = \[", source, re.M)
    assert marker, "the rendered source has no CALLS list: update this hook"
    return source[:marker.start()] + RENAME + "\n" + source[marker.start():]


class SwitchableHook:
    """A source hook that tests turn on and off (one Runner for the module: workers are slow to start)."""

    def __init__(self):
        self.hook = None

    def __call__(self, source: str) -> str:
        return self.hook(source) if self.hook else source


@pytest.fixture(scope="module")
def hook():
    return SwitchableHook()


@pytest.fixture(scope="module")
def runner(hook):
    r = Runner(timeout=120, source_hook=hook)
    yield r
    r.close()


def sin_program():
    body = fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])
    return program(inputs=[("x0", (8,), 3)], functions={"f0": body}, calls=[call("f0", [JIT], ["x0"])])


def test_runner_reports_no_finding_for_a_deterministic_program(runner, hook):
    hook.hook = None
    found, source = runner.run(sin_program())
    assert "jax.jit(f0)" in source  # the module name comes from f0: what the other test renames
    assert [(f.oracle, f.kind, f.message) for f in found] == []


def test_runner_reports_a_lowering_that_depends_on_the_hash_seed(runner, hook):
    assert runner.lowerer is not None, "a Runner lowers in a second worker by default"
    seeds = runner.worker.hash_seed, runner.lowerer.hash_seed
    assert name_under(seeds[0]) != name_under(seeds[1]), f"hash seeds {seeds} order the set alike: change NAME"
    hook.hook = hash_dependent
    try:
        found, source = runner.run(sin_program())
    finally:
        hook.hook = None
    assert RENAME in source  # the hooked source is the one that ran
    # the source still runs and computes the right values: the only finding is the lowering's
    assert [(f.oracle, f.kind, f.call) for f in found] == [("determinism", "cross-process", 0)]
    assert f"PYTHONHASHSEED={seeds[0]} and {seeds[1]}" in found[0].message
    assert "@@" in found[0].details  # a unified diff of the two lowerings


def test_the_lowering_hash_seeds_order_sets_of_axis_names_unlike_the_main_workers():
    """fuzz.runner.LOWERING_HASH_SEEDS: each orders most pairs of axis names otherwise than seed 0
    (a seed picked at random orders a pair alike half of the time), and the pairs each misses
    are covered by another."""
    from fuzz.runner import LOWERING_HASH_SEEDS

    names = ["x", "y", "z", "w", "i", "j", "k", "l", "m"]
    code = ("import itertools, json; n = %r; print(json.dumps([list({a, b}) + list({b, a}) "
            "for a, b in itertools.combinations(n, 2)]))" % names)

    def orders(seed):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        return json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                         check=True).stdout)

    base = orders(0)
    differs = [[a != b for a, b in zip(orders(s), base)] for s in LOWERING_HASH_SEEDS]
    assert all(sum(d) >= 0.75 * len(base) for d in differs), [sum(d) for d in differs]
    assert all(any(col) for col in zip(*differs))  # every pair is ordered otherwise by some seed
