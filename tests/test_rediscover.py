"""benchmarks/rediscover.py: the matchers of the public reports judge the failing calls only."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import rediscover  # noqa: E402
from oracles.common import Finding, value_signature  # noqa: E402

from helpers import eqn, fn, program  # noqa: E402


def _wrong(program_, calls):
    return Finding("differential", "wrong-value", "x", signature=value_signature("differential", "wrong-value",
                                                                                 program_, calls))


def test_value_matchers_look_at_the_failing_calls_only():
    """jax-21403 needs a cumulative op under jit in the calls that gave the wrong value: a
    cumprod in another call of the program does not count, and neither does another oracle."""
    cum = fn(["a"], [eqn("cumprod", ["a"], ["b"], axis=0)], ["b"])
    plain = fn(["a"], [eqn("sin", ["a"], ["b"])], ["b"])
    p = program(inputs=[("x", (8, 4), 1)], functions={"f": cum, "g": plain},
                calls=[{"function": f, "transforms": [{"kind": "jit"}], "args": ["x"]} for f in ("f", "g")])
    match = rediscover.KINDS["jax-21403"]
    assert match(_wrong(p, [0]), p)
    assert not match(_wrong(p, [1]), p)
    raised = Finding("internal-error", "TypeError", "x")
    assert not match(raised, p)
    assert rediscover.KINDS["jax-18434"](_wrong(p, [0]), p) is False
