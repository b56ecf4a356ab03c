"""``insert`` (``jnp.insert`` with a static index, fuzz/ops/movement.py).

The reference against NumPy by hand (indices inside, at the ends, negative and out of
range, which JAX clips), the typing rule, then JAX (the session's worker) against the
reference under jit, eagerly, inside a shard_map body, under vmap and under grad; a
planted bug in the reference is caught, and derandomized generated programs agree.
"""
import numpy as np
import pytest

from fuzz import typecheck as T
from fuzz.reference import Reference, evaluate, make_input
from support.judging import agree_on_generated, agree_with_jax, judged
from support.programs import GRAD, JIT, call, eqn, fn, program, shard_map, vmap

INDICES = (0, 2, 4, -1, -9, 7)  # x0's dim 0 has 4: inside, the end, from the end, clipped low and high


def insert_program():
    body = fn(["a", "b", "s"], [eqn("insert", ["a", "b"], [f"t{k}"], axis=0, index=i) for k, i in enumerate(INDICES)]
              + [eqn("insert", ["a", "s"], ["u"], axis=1, index=1)],  # a scalar fills the slice
              [f"t{k}" for k in range(len(INDICES))] + ["u"])
    loss = fn(["a", "b"], [eqn("insert", ["a", "b"], ["t"], axis=1, index=-2), eqn("sin", ["t"], ["y"]),
                           eqn("wsum", ["y"], ["l"], seed=7)], ["l"])
    n = len(INDICES) + 1
    calls = [call("f0", [JIT], ["x0", "x1", "x2"]),
             call("f0", [], ["x0", "x1", "x2"]),
             call("f0", [JIT, shard_map([[None, ["x"]], [["x"]], []], [[None, ["x"]]] * n)], ["x0", "x1", "x2"]),
             call("f0", [vmap([0, 0, None], [0] * n)], ["x3", "x4", "x2"]),
             call("f1", [JIT, GRAD], ["x0", "x5"]),
             call("f1", [JIT, vmap([0, None], [0]), GRAD], ["x3", "x5"])]
    return program(mesh=(("x", 2),), inputs=[("x0", (4, 6), 1), ("x1", (6,), 2), ("x2", (), 3),
                                             ("x3", (3, 4, 6), 4), ("x4", (3, 6), 5), ("x5", (4,), 6)],
                   functions={"f0": body, "f1": loss}, calls=calls)


def test_insert_reference_by_hand():
    res = evaluate(insert_program())["results"]
    a, b, s = make_input(1, (4, 6)), make_input(2, (6,)), make_input(3, ())
    for k, i in enumerate(INDICES):
        at = min(max(i + 4 if i < 0 else i, 0), 4)
        np.testing.assert_array_equal(res[0][k], np.insert(a, at, b, axis=0))
    np.testing.assert_array_equal(res[0][len(INDICES)], np.insert(a, 1, s, axis=1))
    for k in range(len(INDICES) + 1):  # eager and jit alike
        np.testing.assert_array_equal(res[1][k], res[0][k])


def test_insert_typing():
    ctx = T.Ctx(mesh={"x": 2}, axes=(T.Axis("x", 2, "mesh"),))
    e = eqn("insert", ["a", "v"], ["t"], axis=1, index=9)
    x = T.Ty((3, 4, 5), frozenset({"x"}))
    assert T.eqn_types(e, [x, T.Ty((3, 5))], ctx) == [T.Ty((3, 5, 5), frozenset({"x"}))]
    assert T.eqn_types(e, [T.Ty((3, 4, 5)), T.Ty((), frozenset({"x"}))], ctx) == [T.Ty((3, 5, 5), frozenset({"x"}))]
    with pytest.raises(T.ProgramError, match="insert of a"):
        T.eqn_types(e, [x, T.Ty((3, 4))], ctx)
    with pytest.raises(T.ProgramError, match="out of range"):
        T.eqn_types({**e, "axis": 3}, [x, T.Ty(())], ctx)


def test_jax_agrees_with_the_reference_on_insert(worker):
    agree_with_jax(worker, insert_program())


class NoClip(Reference):
    """The reference with a planted bug: an index past the end wraps instead of being clipped."""

    def primitive(self, e, xs, ts, ctx):
        if e["op"] == "insert" and e["index"] > xs[0].shape[len(ctx.axes) + e["axis"]]:
            e = {**e, "index": e["index"] % xs[0].shape[len(ctx.axes) + e["axis"]]}
        return super().primitive(e, xs, ts, ctx)


def test_a_wrong_clip_in_the_reference_is_caught(worker):
    p = insert_program()
    assert {c for o, c in judged(worker, p, NoClip(p).evaluate()) if o == "differential"} == {0, 1, 2, 3}


def test_generated_programs_with_insert_agree(worker):
    assert "insert" in agree_on_generated(worker, "insert", 2)
