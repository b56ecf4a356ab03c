"""``unreduced_psum`` (``psum(pcast(x, axes, to='unreduced'), axes)``, fuzz/ops/collectives.py).

The typing rule (a value varying over checked manual mesh axes; never under vmap or a
Jacobian, whose batching rules for these primitives raise), its rendering, then JAX (the
session's worker, jax >= 0.9.0) against the reference under jit and under grad outside and
inside the shard_map (the transposes ``preduced`` and ``reduced_vary_cast``); a planted bug
is caught, and derandomized generated programs agree.
"""
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference
from fuzz.render import NEWEST_CAPS, render
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def unreduced_program():
    # b varies over x (split), c over x and y: each reduced over one axis or both
    body = fn(["b", "c"], [eqn("unreduced_psum", ["b"], ["u"], axes=["x"]), eqn("sin", ["c"], ["s"]),
                           eqn("unreduced_psum", ["s"], ["v"], axes=["y", "x"]),
                           eqn("unreduced_psum", ["c"], ["w"], axes=["y"])],
              ["u", "v", "w"])
    loss = fn(["b"], [eqn("sin", ["b"], ["s"]), eqn("unreduced_psum", ["s"], ["u"], axes=["x"]),
                      eqn("wsum", ["u"], ["l"], seed=5)], ["l"])
    specs = shard_map([[["x"]], [["x", "y"]]], [[None], [None], [["x"]]])
    calls = [call("f0", [JIT, specs], ["x0", "x1"]),
             call("f1", [JIT, GRAD, shard_map([[["x"]]], [[]])], ["x0"]),
             call("f1", [JIT, shard_map([[["x"]]], [[["x"]]]), GRAD], ["x0"])]
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (8,), 1), ("x1", (8,), 2)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_unreduced_psum_typing():
    ctx = T.Ctx(mesh={"x": 2, "y": 2}, axes=(T.Axis("x", 2, "mesh"), T.Axis("y", 2, "mesh")))
    e = eqn("unreduced_psum", ["a"], ["v"], axes=["x"])
    assert T.eqn_types(e, [T.Ty((3,), frozenset({"x", "y"}))], ctx) == [T.Ty((3,), frozenset({"y"}))]
    with pytest.raises(T.ProgramError, match="does not vary over it"):
        T.eqn_types(e, [T.Ty((3,), frozenset({"y"}))], ctx)
    unchecked = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh", check_vma=False),))
    with pytest.raises(T.ProgramError, match="not a checked manual mesh axis"):
        T.eqn_types(e, [T.Ty((3,), frozenset({"x"}))], unchecked)
    batched = T.Ctx(mesh={"x": 2}, axes=(T.Axis("_vmap0", 3, "vmap", visible=False), T.Axis("x", 2, "mesh")))
    with pytest.raises(T.ProgramError, match="under vmap"):
        T.eqn_types(e, [T.Ty((3,), frozenset({"x"}))], batched)
    jacobian = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),), grad_at=1, rules=frozenset({T.JACOBIAN}))
    with pytest.raises(T.ProgramError, match="under vmap or a Jacobian"):
        T.eqn_types(e, [T.Ty((3,), frozenset({"x"}))], jacobian)


def test_a_vmap_around_the_shard_map_is_refused():
    p = unreduced_program()
    p["calls"].append(call("f0", [JIT, vmap([0, None], [0, 0, 0]), p["calls"][0]["transforms"][1]], ["x2", "x1"]))
    p["inputs"].append({**p["inputs"][0], "name": "x2", "shape": [3, 8]})
    with pytest.raises(T.ProgramError, match="under vmap"):
        T.check_program(p)


def test_unreduced_psum_renders_a_cast_then_a_psum():
    src = render(unreduced_program(), NEWEST_CAPS).replace('"', "'")
    assert "jax.lax.psum(jax.lax.pcast(b, 'x', to='unreduced'), 'x')" in src


def _needs_pcast(worker):
    if (worker.caps or {}).get("pvary") != "pcast":
        pytest.skip("this JAX has no pcast (jax < 0.9.0)")


def test_jax_agrees_with_the_reference_on_unreduced_psum(worker):
    _needs_pcast(worker)
    agree_with_jax(worker, unreduced_program())


class Halved(Reference):
    """The reference with a planted bug: the reduction takes the mean (psum / axis size)."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "unreduced_psum":
            e = {**e, "op": "pmean"}
        return super().primitive(e, xs, ts, ctx)


def test_eager_unreduced_psum_follows_the_release_rule():
    # jax 0.9.x: eager shard_map has no unreduced values (the worker measures it: eager_unreduced)
    old = {**NEWEST_CAPS, "jax_version": "0.9.2", "eager_unreduced": False}
    assert "unreduced_needs_jit" in T.release_rules(old)
    assert "unreduced_needs_jit" not in T.release_rules({**old, "eager_unreduced": True})
    p = unreduced_program()
    T.check_program(p, caps=old)  # every call is jitted
    p["calls"][0] = {**p["calls"][0], "transforms": p["calls"][0]["transforms"][1:]}
    T.check_program(p, caps={**old, "eager_unreduced": True})
    with pytest.raises(T.ProgramError, match="outside jit"):
        T.check_program(p, caps=old)


def test_the_worker_measures_eager_unreduced(worker):
    _needs_pcast(worker)
    assert isinstance(worker.caps.get("eager_unreduced"), bool)


def scatter_program():
    # b varies over x (rows split over x), c over x and y: psum_scatter of the unreduced cast
    # along dim 0 and dim 1; under grad the transposes all_gather_reduced and reduced_vary_cast
    body = fn(["b", "c"], [eqn("unreduced_psum_scatter", ["b"], ["u"], axes=["x"], axis=0),
                           eqn("sin", ["c"], ["s"]),
                           eqn("unreduced_psum_scatter", ["s"], ["v"], axes=["y"], axis=1)],
              ["u", "v"])
    loss = fn(["b"], [eqn("sin", ["b"], ["s"]), eqn("unreduced_psum_scatter", ["s"], ["u"], axes=["x"], axis=0),
                      eqn("wsum", ["u"], ["w"], seed=7), eqn("psum", ["w"], ["l"], axes=["x"])], ["l"])
    specs = shard_map([[["x"], None], [["x", "y"], None]], [[["x"], None], [["x", "y"], None]])
    calls = [call("f0", [JIT, specs], ["x0", "x1"]),
             call("f1", [JIT, GRAD, shard_map([[["x"], None]], [[]])], ["x0"]),
             call("f1", [JIT, shard_map([[["x"], None]], [[["x"], None]]), GRAD], ["x0"])]
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (8, 2), 1), ("x1", (8, 4), 2)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_unreduced_psum_scatter_typing():
    ctx = T.Ctx(mesh={"x": 2, "y": 2}, axes=(T.Axis("x", 2, "mesh"), T.Axis("y", 2, "mesh")))
    e = eqn("unreduced_psum_scatter", ["a"], ["v"], axes=["x"], axis=1)
    assert T.eqn_types(e, [T.Ty((3, 4), frozenset({"x"}))], ctx) == [T.Ty((3, 2), frozenset({"x"}))]
    with pytest.raises(T.ProgramError, match="does not vary over it"):
        T.eqn_types(e, [T.Ty((3, 4), frozenset({"y"}))], ctx)
    with pytest.raises(T.ProgramError, match="must divide"):
        T.eqn_types(e, [T.Ty((3, 3), frozenset({"x"}))], ctx)
    batched = T.Ctx(mesh={"x": 2}, axes=(T.Axis("_vmap0", 3, "vmap", visible=False), T.Axis("x", 2, "mesh")))
    with pytest.raises(T.ProgramError, match="unreduced_psum_scatter under vmap"):
        T.eqn_types(e, [T.Ty((3, 4), frozenset({"x"}))], batched)
    unchecked = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh", check_vma=False),))
    with pytest.raises(T.ProgramError, match="not a checked manual mesh axis"):
        T.eqn_types(e, [T.Ty((3, 4), frozenset({"x"}))], unchecked)


def test_unreduced_psum_scatter_renders_a_cast_then_a_psum_scatter():
    src = render(scatter_program(), NEWEST_CAPS).replace('"', "'")
    assert ("jax.lax.psum_scatter(jax.lax.pcast(b, 'x', to='unreduced'), 'x', scatter_dimension=0, tiled=True)"
            in src)


def test_jax_agrees_with_the_reference_on_unreduced_psum_scatter(worker):
    _needs_pcast(worker)
    agree_with_jax(worker, scatter_program())


class Unscattered(Reference):
    """The reference with a planted bug: each device's block of the sum reversed along the
    scattered dim (a scatter that reads its block backwards)."""

    def collective(self, e, x, ctx):
        out = super().collective(e, x, ctx)
        if e["op"] == "unreduced_psum_scatter":
            return self.xp.flip(out, axis=len(ctx.axes) + e["axis"])
        return out


@pytest.mark.parametrize("make, planted", [(unreduced_program, Halved), (scatter_program, Unscattered)])
def test_a_wrong_unreduced_collective_is_caught(worker, make, planted):
    _needs_pcast(worker)
    p = make()
    assert {c for o, c in judged(worker, p, planted(p).evaluate()) if o == "differential"} == {0, 1, 2}


@pytest.mark.parametrize("op, feature", [("unreduced_psum", "unreduced"), ("unreduced_psum_scatter", "psum_scatter")])
def test_generated_programs_with_unreduced_collectives_agree(worker, op, feature):
    _needs_pcast(worker)
    # (a rare draw: it needs a checked shard_map body outside any vmap; ~1 program in 150 with the
    # other ops but a few left out, so the derandomized rounds go further than the default)
    assert feature in agree_on_generated(worker, op, 2, tries=(10, 40, 160, 640))
