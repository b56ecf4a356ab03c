"""Rules of old JAX releases, measured by the worker (fuzz/worker.py measured_rules), shape generation.

jax 0.4.28 (measured): a partial-manual shard_map (experimental ``auto=``) runs only
under jit, and an io_callback may not sit under grad even on a stop_gradient argument.
The generator must not spend programs on either; the typing rules refuse them for that
release only.
"""
import pytest
from hypothesis import given, settings

from fuzz.render import render
from fuzz.typecheck import ProgramError, check_program
from helpers import JIT, call, eqn, fn, program, shard_map
from strategies.programs import programs

CAPS_0_4_28 = {"shard_map": "experimental", "check_kw": "check_rep", "partial_manual": "auto", "explicit": False,
               "eager_partial_manual": False, "callback_under_grad": False, "n_devices": 8}


def _walk(fn_, under_jit, out):
    for e in fn_["eqns"]:
        if e["op"] == "call":
            _chain(e["transforms"], e["fn"], under_jit, out)
        elif e["op"] == "io_callback":
            out.append(("callback", e["stop_gradient"]))


def _chain(transforms, fn_, under_jit, out):
    for t in transforms:
        if t["kind"] == "jit":
            under_jit = True
        if t["kind"] == "shard_map" and t["axis_names"] is not None:
            out.append(("partial", under_jit))
    _walk(fn_, under_jit, out)


@settings(max_examples=150)
@given(programs(caps=CAPS_0_4_28))
def test_old_release_programs_keep_its_rules(p):
    check_program(p, caps=CAPS_0_4_28)
    src = render(p, CAPS_0_4_28)
    seen = []
    for c in p["calls"]:
        _chain(c["transforms"], p["functions"][c["function"]], False, seen)
    assert all(under_jit for kind, under_jit in seen if kind == "partial")
    # under grad a callback's argument is under stop_gradient: on this release none may be there
    assert not any(kind == "callback" and stopped for kind, stopped in seen)
    assert "auto=frozenset(" in src or not any(kind == "partial" for kind, _ in seen)


def partial_program(transforms):
    body = fn(["a"], [eqn("sin", ["a"], ["v"])], ["v"])
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)], functions={"f0": body},
                   calls=[call("f0", transforms, ["x0"])])


def test_eager_partial_manual_is_refused_only_where_the_release_cannot_run_it():
    sm = shard_map([[["x"]]], [[["x"]]], axis_names=["x"])
    eager, jitted = partial_program([sm]), partial_program([JIT, sm])
    check_program(eager)  # the newest release runs it
    check_program(jitted, caps=CAPS_0_4_28)
    with pytest.raises(ProgramError, match="only under jit"):
        check_program(eager, caps=CAPS_0_4_28)


def test_measured_rules_match_this_release():
    from fuzz.execute import Worker

    with Worker() as w:
        caps = w.caps
    # the newest JAX (what the test suite installs) runs both; older releases are measured the same way
    assert caps["eager_partial_manual"] is True and caps["callback_under_grad"] is True


def test_nested_shard_maps_are_not_applicable_on_the_experimental_api():
    from fuzz.replay import applicable

    inner = fn(["b"], [eqn("sin", ["b"], ["s"])], ["s"])
    body = fn(["a"], [eqn("call", ["a"], ["v"], transforms=[shard_map([[["y"]]], [[["y"]]])], fn=inner)], ["v"])
    p = program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 0)], functions={"f0": body},
                calls=[call("f0", [JIT, shard_map([[["x"]]], [[["x"]]], axis_names=["x"])], ["x0"])])
    check_program(p)
    assert "cannot nest" in applicable(p, CAPS_0_4_28)
