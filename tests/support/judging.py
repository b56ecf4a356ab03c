"""JAX (a ``fuzz.execute.Worker``, usually the session's ``worker`` fixture) against the reference."""
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings

import oracles
from fuzz import ops as O
from fuzz.features import features
from fuzz.program import corpus_files, known_signatures, validate_program
from fuzz.reference import evaluate
from fuzz.render import render
from strategies.programs import programs

CORPUS = Path(__file__).resolve().parent.parent.parent / "corpus"
KNOWN = set(known_signatures(corpus_files(CORPUS)))  # the corpus's signatures and faces
VALUE_ORACLES = {"differential", "callbacks", "metamorphic", "determinism"}


def agree_with_jax(worker, p, ignore=()):
    """JAX (the ``worker``) and the unsharded reference give the same values on every call of ``p``:
    no finding of any oracle but those in ``ignore``. Returns the worker's outcome."""
    validate_program(p)
    out = worker.run(render(p, worker.caps), timeout=240)
    assert out["status"] == "ok", out
    assert all(c["ok"] for c in out["calls"]), [c.get("error") for c in out["calls"]]
    found = [f for f in oracles.judge(p, out, evaluate(p)) if f.oracle not in ignore]
    assert not found, [(f.signature, f.details) for f in found]
    return out


_EVALUATED: dict = {}


def reference(p: dict) -> dict:
    """The reference's values of ``p``, computed once per program in this process (eager JAX is slow)."""
    key = json.dumps(p, sort_keys=True)
    if key not in _EVALUATED:
        _EVALUATED[key] = evaluate(p)
    return _EVALUATED[key]


def judged(worker, p, planted=None):
    """The findings of JAX (the worker) against the reference (or ``planted`` values) on ``p``: [(oracle, call)]."""
    validate_program(p)
    out = worker.run(render(p, worker.caps), timeout=240)
    assert out["status"] == "ok", out
    found = oracles.judge(p, out, planted if planted is not None else reference(p))
    return sorted((f.oracle, f.call) for f in found)


def equations(p: dict) -> list:
    """Every equation of ``p``, those in ``call`` bodies too."""
    found = []

    def walk(f):
        for e in f["eqns"]:
            found.append(e)
            if e["op"] == "call":
                walk(e["fn"])

    for f in p["functions"].values():
        walk(f)
    return found


def generated(op, n: int, keep=("sin", "mul", "wsum", "sum", "psum", "ppermute", "broadcast", "reshape"),
              feature=None, tries=(10, 40, 160, 640)) -> list:
    """The first ``n`` derandomized generated programs that use ``op`` (the other ops but ``keep`` left out),
    or, with ``feature``, whose report features (fuzz.features) include it (no op left out).

    Tries ``tries[i] * n`` examples in turn: each count is its own derandomized sequence, so a
    change of the generator's weights moves the op around but does not lose it."""
    disabled = frozenset() if feature else frozenset(O.REGISTRY) - {op, *keep}
    wanted = (lambda p: feature in features(p)[0]) if feature else (lambda p: any(e["op"] == op for e in equations(p)))
    for m in (k * n for k in tries):
        out = []

        @settings(max_examples=m, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
        @given(programs(disabled=disabled, max_depth=2, max_eqns=4, max_calls=1))
        def collect(p):
            if len(out) < n and wanted(p):
                out.append(p)

        collect()
        if len(out) == n:
            return out
    raise AssertionError(f"only {len(out)} of {m} drawn programs use {feature or op}")


def agree_on_generated(worker, op, n: int, **how) -> set:
    """JAX agrees with the reference on ``n`` generated programs using ``op`` (or ``feature=``, see
    :func:`generated`); returns their features. A finding of a corpus entry (a known JAX bug,
    e.g. differential-b909f86363df's sharded constant) is let pass, but at least one program
    must agree on every value."""
    seen, agreed = set(), 0
    for p in generated(op, n, **how):
        out = worker.run(render(p, worker.caps), timeout=240)
        assert out["status"] == "ok", out
        found = oracles.judge(p, out, evaluate(p))
        bad = [f for f in found if f.signature not in KNOWN]
        assert not bad, ([f.signature for f in bad], render(p))
        agreed += not any(f.oracle in VALUE_ORACLES for f in found)
        seen |= features(p)[0]
    assert agreed >= 1, f"every generated program with {op} shows a known wrong value: draw more"
    return seen
