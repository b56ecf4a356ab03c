"""Programs run with jax_enable_checks (the program's ``checks``): drawn, rendered, run, reduced, exported."""
import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from fuzz.features import features
from fuzz.program import validate_program
from fuzz.reduce import reduce_program, size
from fuzz.render import NEWEST_CAPS, render
from fuzz.repro import render_repro
from strategies.programs import programs
from support.programs import JIT, call, eqn, fn, program

LINE = 'jax.config.update("jax_enable_checks", True)'


def checked_program():
    p = program(inputs=[("x0", (4,), 3)], functions={"f0": fn(["a"], [eqn("sin", ["a"], ["v1"])], ["v1"])},
                calls=[call("f0", [JIT], ["x0"])])
    p["checks"] = True
    validate_program(p)
    return p


def drawn(disabled=frozenset(), n=200):
    out = []

    @settings(max_examples=n, database=None, derandomize=True, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @given(programs(disabled=disabled))
    def collect(p):
        out.append(p)
    collect()
    return out


def test_some_drawn_programs_run_with_checks_and_say_so():
    ps = drawn()
    on = [p for p in ps if p.get("checks")]
    assert 0 < len(on) < len(ps) / 2, len(on)
    for p in ps:
        validate_program(p)
        assert (LINE in render(p)) == bool(p.get("checks"))
        assert ("enable_checks" in features(p)[0]) == bool(p.get("checks"))
    assert not any(p.get("checks") for p in drawn(disabled=frozenset({"enable_checks"}), n=100))


def test_schema_refuses_a_checks_that_is_not_a_boolean():
    p = checked_program()
    p["checks"] = "yes"
    with pytest.raises(Exception, match="checks"):
        validate_program(p)


@pytest.fixture(scope="module")
def worker_module():
    jax = pytest.importorskip("jax")
    spec = importlib.util.spec_from_file_location("shardfuzz_worker_under_test",
                                                  Path(__file__).resolve().parent.parent / "fuzz" / "worker.py")
    w = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(w)
    return w, jax


PROBE = '''
import contextlib
import jax
import jax.numpy as jnp
{line}
CALLBACK_LOG = []
mesh_context = contextlib.nullcontext
CALLS = [("probe", lambda: jnp.float32(jax.config.jax_enable_checks), ())]
{tail}
'''


@pytest.mark.parametrize("before", [False, True])
def test_the_worker_runs_a_program_with_its_checks_then_restores_them(worker_module, before):
    import numpy as np

    w, jax = worker_module
    jax.config.update("jax_enable_checks", before)
    try:
        calls = w.run_program(jax, np, PROBE.format(line=LINE, tail=""), False)
        assert calls[0]["ok"] and np.frombuffer(__import__("base64").b64decode(calls[0]["outputs"][0]["b64"]),
                                                np.float32)[0] == 1.0
        assert jax.config.jax_enable_checks is before
        calls = w.run_program(jax, np, PROBE.format(line="", tail=""), False)  # the next program: as before
        assert np.frombuffer(__import__("base64").b64decode(calls[0]["outputs"][0]["b64"]),
                             np.float32)[0] == float(before)
        with pytest.raises(RuntimeError):  # a module that fails after turning them on
            w.run_program(jax, np, PROBE.format(line=LINE, tail='raise RuntimeError("module")'), False)
        assert jax.config.jax_enable_checks is before
    finally:
        jax.config.update("jax_enable_checks", False)


def test_the_reducer_turns_checks_off_unless_the_finding_needs_them():
    p = checked_program()
    r = reduce_program(p, lambda c, k: True, call=0)
    assert "checks" not in r.program and size(r.program) < size(p)
    r = reduce_program(p, lambda c, k: bool(c.get("checks")), call=0)
    assert r.program.get("checks") is True


def test_a_repro_turns_checks_on_when_its_program_does():
    p = checked_program()
    finding = {"oracle": "internal-error", "kind": "ValueError", "message": "m", "call": 0}
    assert LINE in render_repro(p, NEWEST_CAPS, finding)
    del p["checks"]
    assert LINE not in render_repro(p, NEWEST_CAPS, finding)


def test_a_crash_repro_runs_each_earlier_program_with_its_own_checks():
    p = checked_program()
    h = checked_program()
    del p["checks"]
    finding = {"oracle": "crash", "kind": "SIGABRT", "message": "m", "call": None}
    src = render_repro(p, NEWEST_CAPS, finding, history=[h])
    earlier = src[src.index("def earlier_program_1"):]
    assert 'jax.config.update("jax_enable_checks", True)' in earlier.splitlines()[1]
    assert src.index('jax.config.update("jax_enable_checks", False)') > src.index("earlier_program_1()")
    p["checks"] = True  # all with checks: one line at the top
    src = render_repro(p, NEWEST_CAPS, finding, history=[h])
    assert src.count("jax_enable_checks") == 1 and src.index(LINE) < src.index("def earlier_program_1")
