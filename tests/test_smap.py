"""A shard_map over one mesh axis written as ``jax.smap`` (``smap``, jax >= 0.7.0).

``jax.smap(f, in_axes, out_axes, axis_name)`` is a shard_map over ``axis_name`` of the context
mesh with check_vma=True whose in_axes / out_axes ``d`` stand for ``P(*[None] * d + [axis_name])``
(jax/_src/shard_map.py ``smap``): the typing rule (one axis, a context mesh, the release),
the rendering (in_axes counted from the end with ``negative_axes``), JAX against the reference
nested in a shard_map body and on an Explicit mesh, eagerly and under jit and grad, a planted
bug caught, and generated programs that draw it.
"""
import pytest

from fuzz import typecheck as T
from fuzz.features import features
from fuzz.reference import Reference
from fuzz.render import NEWEST_CAPS, render
from support.draws import drawn_programs
from support.judging import agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, smap, top_program


def nested_program(negative=False):
    """On a (2, 4) Auto mesh: a shard_map over x whose body smaps over y along dim 1 (a psum
    over y inside), eagerly and under jit. (Not under grad: a nested shard_map's transpose
    fails to lower on jax 0.10.2, corpus entry internal-error-1af23057e5ae, smap or not.)"""
    inner = fn(["b"], [eqn("sin", ["b"], ["s"]), eqn("psum", ["s"], ["p"], axes=["y"]),
                       eqn("mul", ["s", "p"], ["m"])], ["m"])
    body = fn(["a"], [eqn("call", ["a"], ["m"], transforms=[smap([[None, ["y"]]], [[None, ["y"]]], "y", negative)],
                          fn=inner)], ["m"])
    outer = shard_map([[["x"], None]], [[["x"], None]], axis_names=["x"])
    calls = [call("f0", [outer], ["x0"]), call("f0", [JIT, outer], ["x0"])]
    return program(mesh=(("x", 2), ("y", 4)), inputs=[("x0", (4, 8), 1)], functions={"f0": body}, calls=calls)


def explicit_program(negative=False):
    """On a one-axis Explicit mesh (calls run under jax.set_mesh): an smap along dim 1,
    eagerly, under jit and under jit of grad of a weighted sum of its result."""
    body = fn(["a"], [eqn("cos", ["a"], ["c"]), eqn("psum", ["c"], ["p"], axes=["x"])], ["p"])
    sm = smap([[None, ["x"]]], [[None, None]], "x", negative)
    loss = fn(["a"], [eqn("call", ["a"], ["m"], transforms=[sm], fn=body), eqn("wsum", ["m"], ["l"], seed=3)], ["l"])
    calls = [call("f0", [sm], ["x0"]), call("f0", [JIT, sm], ["x0"]), call("f1", [JIT, GRAD], ["x0"])]
    return program(mesh=(("x", 2),), axis_type="explicit", inputs=[("x0", (3, 4), 2)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_smap_is_typed_where_there_is_a_context_mesh_and_one_axis():
    T.check_program(nested_program())
    T.check_program(explicit_program())
    T.check_program(top_program())
    top = top_program()
    del top["mesh"]["set_mesh"]  # Auto, no context mesh
    with pytest.raises(T.ProgramError, match="context mesh"):
        T.check_program(top)
    for change, why in (({"axis_names": None}, "exactly one mesh axis"), ({"check_vma": False}, "check_vma"),
                        ({"infer": True}, "inferred"), ({"smap": False, "negative_axes": True}, "without smap")):
        p = explicit_program()
        p["calls"][0]["transforms"][0].update(change)
        with pytest.raises(T.ProgramError, match=why):
            T.check_program(p)
    old = {**NEWEST_CAPS, "jax_version": "0.6.2"}
    assert T.NO_SMAP in T.release_rules(old) and T.NO_SMAP not in T.release_rules({**old, "jax_version": "0.7.0"})
    with pytest.raises(T.ProgramError, match="jax < 0.7.0"):
        T.check_program(nested_program(), caps=old)


def test_smap_renders_in_axes_and_out_axes_under_the_context_mesh():
    src = render(nested_program(), NEWEST_CAPS).replace('"', "'")
    assert "jax.smap(g1, in_axes=(1,), out_axes=(1,), axis_name='y')" in src
    src = render(explicit_program(negative=True), NEWEST_CAPS).replace('"', "'")
    assert "jax.smap(f0, in_axes=(-1,), out_axes=(None,), axis_name='x')" in src
    assert "jax.smap(g1, in_axes=(-1,), out_axes=(-1,), axis_name='y')" in render(nested_program(negative=True), NEWEST_CAPS).replace('"', "'")
    assert {"smap", "negative_axes"} <= features(explicit_program(negative=True))[0]
    src = render(top_program(), NEWEST_CAPS).replace('"', "'")
    assert "jax.smap(f0, in_axes=(1,), out_axes=(None,), axis_name='y')" in src
    assert "mesh_context = lambda: jax.set_mesh(mesh)" in src
    assert "smap" not in features(program(functions={"f0": fn(["a"], [], ["a"])},
                                          calls=[call("f0", [shard_map([[None]], [[None]])], ["a"])]))[0]


def _needs_smap(worker):
    if T.NO_SMAP in T.release_rules(worker.caps) or "no_explicit" in T.release_rules(worker.caps):
        pytest.skip("this JAX has no jax.smap (jax < 0.7.0)")


@pytest.mark.parametrize("make", [nested_program, explicit_program, top_program])
def test_jax_agrees_with_the_reference_on_smap(worker, make):
    _needs_smap(worker)
    agree_with_jax(worker, make())


class Unsummed(Reference):
    """The reference with a planted bug: the psum leaves its operand as it is."""

    def collective(self, e, x, ctx):
        return x if e["op"] == "psum" else super().collective(e, x, ctx)


def test_a_wrong_value_under_smap_is_caught(worker):
    _needs_smap(worker)
    p = explicit_program()
    assert {c for o, c in judged(worker, p, Unsummed(p).evaluate()) if o == "differential"} == {0, 1, 2}


def test_the_generator_draws_smap_with_and_without_negative_axes():
    progs = drawn_programs(range(4), 300, cached=True)
    drawn = [features(p)[0] for p in progs]
    assert any("smap" in f and "negative_axes" not in f for f in drawn)
    assert any("negative_axes" in f for f in drawn)
    for p in progs:
        T.check_program(p)


def test_an_smap_over_the_last_free_axis_is_not_partial_manual():
    """An smap names its axis; it is partial-manual only when a mesh axis stays automatic."""
    nested = features(nested_program())[0]  # x, then y inside: every axis manual
    assert "smap" in nested and "partial_manual" in nested  # (the outer shard_map over x alone is)
    p = explicit_program()  # one axis, named
    assert "partial_manual" not in features(p)[0]
    assert "partial_manual" in features(top_program())[0]  # y alone of (x, y)
