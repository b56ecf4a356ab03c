"""A shard_map whose in_specs (and mesh) are left out on an Explicit mesh (``infer``, jax >= 0.7.2).

shard_map then infers in_specs from its arguments' shardings and takes the context mesh
(jax/_src/shard_map.py, ``in_specs is Infer``): the typing rule (Explicit meshes only, not
before jax 0.7.2), the rendering, JAX against the reference eagerly, under jit, grad and vmap,
a planted bug caught, and generated programs that draw it.
"""
import pytest

from fuzz import typecheck as T
from fuzz.features import features
from fuzz.reference import Reference
from fuzz.render import NEWEST_CAPS, render
from support.draws import drawn_programs
from support.judging import agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def inferred(in_specs, out_specs):
    return {**shard_map(in_specs, out_specs), "infer": True}


def infer_program(axis_type="explicit"):
    body = fn(["a", "b"], [eqn("sin", ["a"], ["s"]), eqn("psum", ["b"], ["p"], axes=["y"]),
                           eqn("mul", ["s", "p"], ["m"])], ["m"])
    loss = fn(["a", "b"], [eqn("call", ["a", "b"], ["m"], transforms=[inferred([[["x"]], [["x"]]], [[["x"]]])],
                               fn=body),
                           eqn("wsum", ["m"], ["l"], seed=4)], ["l"])
    sm = inferred([[["x"]], [["x"]]], [[["x"]]])
    calls = [call("f0", [sm], ["x0", "x1"]),
             call("f0", [JIT, sm], ["x0", "x1"]),
             call("f1", [JIT, GRAD], ["x0", "x1"]),
             call("f0", [vmap([None, 0], [0]), sm], ["x0", "x2"])]
    return program(mesh=(("x", 2), ("y", 2)), axis_type=axis_type,
                   inputs=[("x0", (8,), 1), ("x1", (8,), 2), ("x2", (3, 8), 3)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_infer_is_typed_on_explicit_meshes_only():
    T.check_program(infer_program())
    with pytest.raises(T.ProgramError, match="not Explicit"):
        T.check_program(infer_program(axis_type="auto"))
    old = {**NEWEST_CAPS, "jax_version": "0.7.0"}
    assert T.NO_INFER_IN_SPECS in T.release_rules(old)
    assert T.NO_INFER_IN_SPECS not in T.release_rules({**old, "jax_version": "0.7.2"})
    with pytest.raises(T.ProgramError, match="jax < 0.7.2"):
        T.check_program(infer_program(), caps=old)


def test_infer_renders_no_in_specs_and_no_mesh():
    p = infer_program()
    src = render(p, NEWEST_CAPS).replace('"', "'")
    assert "jax.shard_map(f0, out_specs=(P('x'),))" in src and "in_specs=" not in src and "mesh=mesh" not in src
    assert "infer_in_specs" in features(p)[0]
    plain = infer_program()
    for c in plain["calls"]:
        for t in c["transforms"]:
            t.pop("infer", None)
    assert "jax.shard_map(f0, mesh=mesh, in_specs=" in render(plain, NEWEST_CAPS)


def _needs_infer(worker):
    if T.NO_INFER_IN_SPECS in T.release_rules(worker.caps) or "no_explicit" in T.release_rules(worker.caps):
        pytest.skip("this JAX cannot infer in_specs (jax < 0.7.2)")


def test_jax_agrees_with_the_reference_on_inferred_in_specs(worker):
    _needs_infer(worker)
    agree_with_jax(worker, infer_program())


class Unsummed(Reference):
    """The reference with a planted bug: the psum over y leaves its operand as it is."""

    def collective(self, e, x, ctx):
        return x if e["op"] == "psum" else super().collective(e, x, ctx)


def test_a_wrong_value_under_inferred_in_specs_is_caught(worker):
    _needs_infer(worker)
    p = infer_program()
    assert {c for o, c in judged(worker, p, Unsummed(p).evaluate()) if o == "differential"} == {0, 1, 2, 3}


def test_the_generator_draws_inferred_in_specs():
    progs = drawn_programs(range(3), 300, cached=True)
    assert any("infer_in_specs" in features(p)[0] for p in progs)
    for p in progs:
        if "infer_in_specs" in features(p)[0]:
            assert p["mesh"]["axis_type"] == "explicit"
