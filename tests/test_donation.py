"""Buffer donation: ``jax.jit(f, donate_argnums=...)`` on a program's call.

JAX deletes a donated array and XLA may reuse its buffers (per shard) for results of the same
shape and sharding (https://docs.jax.dev/en/latest/faq.html#buffer-donation). The typing rule
(a call's first jit only, distinct argument positions), the rendering (the donated inputs are
passed as copies, so that later calls and the lowerings still read them), JAX against the
reference with donated sharded arguments, and the generator drawing it.
"""
import pytest

from fuzz import render as R
from fuzz import typecheck as T
from fuzz.features import features
from fuzz.program import validate_program
from fuzz.render import NEWEST_CAPS, render
from support.draws import drawn_programs
from support.judging import agree_with_jax
from support.programs import JIT, call, donating, donation_program, eqn, fn


def test_donation_is_typed_on_a_calls_first_jit_only():
    T.check_program(donation_program())
    validate_program(donation_program())
    p = donation_program()
    p["calls"][0]["transforms"] = [{"kind": "checkpoint", "policy": None}, donating([0])]
    with pytest.raises(T.ProgramError, match="first transform"):
        T.check_program(p)
    for bad in ([2], [0, 0]):
        p = donation_program()
        p["calls"][0]["transforms"][0]["donate_argnums"] = bad
        with pytest.raises(T.ProgramError, match="distinct argument positions"):
            T.check_program(p)
    nested = donation_program()
    nested["functions"]["f1"] = fn(["a"], [eqn("call", ["a", "a"], ["o"], transforms=[donating([0])],
                                               fn=nested["functions"]["f0"])], ["o"])
    nested["calls"].append(call("f1", [JIT], ["x0"]))
    with pytest.raises(T.ProgramError, match="first transform"):
        T.check_program(nested)


def test_donated_inputs_are_passed_as_copies():
    p = donation_program()
    src = render(p, NEWEST_CAPS)
    assert "jax.jit(f0, donate_argnums=(0,)), (jnp.copy(x0), x1))" in src
    assert "donate_argnums=(0, 1)), (jnp.copy(x0), jnp.copy(x1)))" in src
    assert "jax.jit(f0), (x0, x1))" in src
    assert "donate_argnums" in features(p)[0]
    assert "donate_argnums" not in features({**p, "calls": p["calls"][3:]})[0]


@pytest.mark.parametrize("axis_type", ["auto", "explicit"])
def test_jax_agrees_with_the_reference_on_donated_calls(worker, axis_type):
    if axis_type == "explicit" and "no_explicit" in T.release_rules(worker.caps):
        pytest.skip("this JAX has no Explicit meshes")
    agree_with_jax(worker, donation_program(axis_type))


def test_without_the_copies_a_later_call_reads_a_deleted_input(worker, monkeypatch):
    """What the copies are for (and that the donation reaches JAX): passed as they are, the
    inputs the first call donates are deleted before the last call reads them."""
    monkeypatch.setattr(R, "call_args", lambda c: [R._id(a) for a in c["args"]])
    out = worker.run(render(donation_program(), worker.caps), timeout=240)
    assert out["status"] == "ok", out
    assert not out["calls"][3]["ok"] and "delete" in out["calls"][3]["error"]["message"].lower()


def test_the_generator_draws_donation_on_first_jits_only():
    progs = drawn_programs(range(3), 200, cached=True)
    donated = [p for p in progs if "donate_argnums" in features(p)[0]]
    assert len(donated) >= 10, len(donated)
    for p in donated:
        T.check_program(p)
        for c in p["calls"]:
            for t in c["transforms"][1:]:
                assert not t.get("donate_argnums")
    assert not any("donate_argnums" in features(p)[0] for p in drawn_programs(range(2), 100, cached=True,
                                                                              disabled=frozenset({"donate_argnums"})))
