"""``pvary`` (the explicit invariant -> varying cast, fuzz/ops/collectives.py Pvary).

The typing rule (checked manual mesh axes only, never one the value varies over already),
its rendering on both APIs, then JAX (the session's worker) against the reference under jit,
eagerly, under grad (whose transpose of the cast is a psum over its axes) and under vmap of
the shard_map; a planted bug in the reference is caught, and derandomized generated
programs agree.
"""
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference
from fuzz.render import NEWEST_CAPS, render
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap


def pvary_program():
    # a (invariant over x) cast to varying, then mixed with b (split over x); a second cast over
    # both axes of a value invariant over both; the loss reads the cast value on every device
    body = fn(["a", "b"], [eqn("pvary", ["a"], ["v"], axes=["x"]), eqn("mul", ["v", "b"], ["m"]),
                           eqn("pvary", ["a"], ["w"], axes=["y", "x"]), eqn("sin", ["w"], ["s"])],
              ["m", "s"])
    loss = fn(["a", "b"], [eqn("pvary", ["a"], ["v"], axes=["x"]), eqn("mul", ["v", "b"], ["m"]),
                           eqn("wsum", ["m"], ["w"], seed=7), eqn("psum", ["w"], ["l"], axes=["x"])], ["l"])
    specs = shard_map([[None], [["x"]]], [[["x"]], [["x", "y"]]])
    calls = [call("f0", [JIT, specs], ["x0", "x1"]),
             call("f0", [specs], ["x0", "x1"]),
             call("f1", [JIT, GRAD, shard_map([[None], [["x"]]], [[]])], ["x0", "x1"]),
             call("f1", [JIT, shard_map([[None], [["x"]]], [[None]]), GRAD], ["x0", "x1"]),
             call("f0", [JIT, vmap([0, None], [0, 0]), specs], ["x2", "x1"])]
    return program(mesh=(("x", 2), ("y", 2)), inputs=[("x0", (4,), 1), ("x1", (8,), 2), ("x2", (3, 4), 3)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_pvary_typing():
    ctx = T.Ctx(mesh={"x": 2, "y": 2}, axes=(T.Axis("x", 2, "mesh"), T.Axis("y", 2, "mesh")))
    e = eqn("pvary", ["a"], ["v"], axes=["x"])
    assert T.eqn_types(e, [T.Ty((3,), frozenset({"y"}))], ctx) == [T.Ty((3,), frozenset({"x", "y"}))]
    with pytest.raises(T.ProgramError, match="already varies"):
        T.eqn_types(e, [T.Ty((3,), frozenset({"x"}))], ctx)
    unchecked = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh", check_vma=False),))
    with pytest.raises(T.ProgramError, match="not a checked manual mesh axis"):
        T.eqn_types(e, [T.Ty((3,))], unchecked)
    batched = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "vmap"),))
    with pytest.raises(T.ProgramError, match="not a checked manual mesh axis"):
        T.eqn_types(e, [T.Ty((3,))], batched)


def test_pvary_renders_the_release_api():
    p = pvary_program()
    assert "jax.lax.pcast(a, 'x', to='varying')" in render(p, NEWEST_CAPS).replace('"', "'")
    old = render(p, {**NEWEST_CAPS, "pvary": "pvary"}).replace('"', "'")
    assert "jax.lax.pvary(a, 'x')" in old and "pcast" not in old


def test_jax_agrees_with_the_reference_on_pvary(worker):
    if not (worker.caps or {}).get("pvary"):
        pytest.skip("this JAX has no pvary")
    agree_with_jax(worker, pvary_program())


class Shifted(Reference):
    """The reference with a planted bug: the cast adds one."""

    def primitive(self, e, xs, ts, ctx):
        got = super().primitive(e, xs, ts, ctx)
        return [got[0] + 1] if e["op"] == "pvary" else got


def test_a_wrong_pvary_is_caught(worker):
    p = pvary_program()
    planted = Shifted(p).evaluate()
    assert ("differential", 0) in judged(worker, p, planted)


def test_generated_programs_with_pvary_agree(worker):
    assert "pvary" in agree_on_generated(worker, "pvary", 2)
